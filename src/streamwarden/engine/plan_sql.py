"""Spark's analyzed logical plan of a DataFrame, written back as Spark SQL text.

Nothing here knows streamwarden's operators: each Spark operator becomes a clause
(``Project`` a SELECT list, ``Filter`` a WHERE, ``Join`` a JOIN, ``Aggregate`` a GROUP BY,
``Generate`` a LATERAL VIEW, ``Window`` an OVER) and each expression is Spark's own
``Expression.sql``. Named sub-plans are cut out and referred to by name, so a plan made of
named steps prints as a ``WITH`` query (see :func:`query_sql`).

The text is equivalent to the plan, never an approximation of it. A few rewrites make it
readable and each keeps the meaning:

* a projection over a projection, a filter or a grouping is merged into one SELECT only
  when whole columns are substituted (no expression is rewritten), and a filter moves
  below a projection only when it reads none of its computed columns;
* ``TRUE AND x`` and ``FALSE OR x`` are written ``x``;
* Spark's expansion of ``window(ts, size, slide)`` (a projection or an ``Expand`` of
  start/end structs) is folded back into the call, once every constant of it is checked;
* what ``Expression.sql`` leaves out is written in: lambda functions and their variables,
  ``from_json``'s schema, and which side of a join a column of a repeated name comes from.

    >>> duration(3_600_000_000), duration(600_000_000), duration(1_500_000)
    ("'1 hour'", "'10 minutes'", "'1500 milliseconds'")
    >>> quote("Position__ts"), quote("AVG(Heart)")
    ('Position__ts', '`AVG(Heart)`')
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from pyspark.sql import DataFrame

JavaObject = Any  # a py4j proxy of a Catalyst plan node or expression
Scope = Mapping[int, str]  # how a block's clauses name the input columns whose names clash (by expression id)


def query_sql(result: DataFrame, steps: Sequence[tuple[str, DataFrame]],
              inputs: Sequence[tuple[str, DataFrame]]) -> str:
    """``result`` as a ``WITH`` query: one common table expression per step, in the order
    given (each may read the inputs and earlier steps), ``result`` last.

    Wherever an input's or a step's plan occurs inside another, the text names it instead
    of repeating it; an input's own plan is never shown, only its columns.
    """
    jvm = result.sparkSession._jvm
    names = _Names([(name, _plan(frame)) for name, frame in [*inputs, *steps]])
    header = [f"-- input {name}: {', '.join(quote(c) for _, c in _columns(_plan(frame)))}" for name, frame in inputs]
    ctes = [f"{name} AS (\n{textwrap.indent(_Renderer(jvm, names, name).sql(_plan(frame)), '  ')}\n)"
            for name, frame in steps]
    final = _Renderer(jvm, names, None).sql(_plan(result))
    body = "WITH " + ",\n".join(ctes) + "\n" + final if ctes else final
    return "\n".join([*header, body])


def duration(micros: int) -> str:
    """A whole number of microseconds as an interval string Spark reads back exactly."""
    units = (("day", 86_400_000_000), ("hour", 3_600_000_000), ("minute", 60_000_000), ("second", 1_000_000),
             ("millisecond", 1_000))
    for unit, size in units:
        if micros and micros % size == 0:
            count = micros // size
            return f"'{count} {unit}{'s' if count != 1 else ''}'"
    return f"'{micros} microsecond{'s' if micros != 1 else ''}'"


def quote(name: str) -> str:
    """``name`` as a SQL identifier (back-quoted unless a plain word, as Spark quotes)."""
    if re.fullmatch(r"[A-Za-z0-9_]+", name) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal (its backslashes and quotes escaped).

    >>> sql_string("it's")
    "'it\\\\'s'"
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class UnnamedInput(Exception):
    """The plan reads data outside every named plan (so the text would describe an input)."""


# -- reading Catalyst objects over py4j -----------------------------------------------------------

def _plan(frame: DataFrame) -> JavaObject:
    return frame._jdf.queryExecution().analyzed()


def _seq(scala_seq: JavaObject) -> list[JavaObject]:
    items, iterator = [], scala_seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


_ATTRIBUTE = re.compile(r"^(.*)#(\d+)L?(?:-T\d+ms)?$", re.S)
_SEP = "\u0001"


def _attributes(attributes: JavaObject) -> tuple[tuple[int, str], ...]:
    """(id, name) of each attribute of a Scala collection, in one call (``name#id`` texts)."""
    text = attributes.mkString(_SEP)
    found = []
    for part in text.split(_SEP) if text else []:
        match = _ATTRIBUTE.match(part)
        if match is None:
            raise ValueError(f"not an attribute: {part!r}")
        found.append((int(match.group(2)), match.group(1)))
    return tuple(found)


def _columns(plan: JavaObject) -> tuple[tuple[int, str], ...]:
    return _attributes(plan.output())


def _refs(expression: JavaObject) -> frozenset[int]:
    return frozenset(i for i, _ in _attributes(expression.references()))


def _is_literal(expression: JavaObject, text: str) -> bool:
    return expression.nodeName() == "Literal" and expression.sql() == text


# -- expressions ----------------------------------------------------------------------------------

_INCOMPLETE = ("namedlambdavariable()", "lambdafunction(", "from_json(")


class _Expressions:
    """``Expression.sql``, completed where Spark's own text leaves something out."""

    def __init__(self, jvm: JavaObject):
        self.jvm = jvm

    def sql(self, expression: JavaObject, scope: Scope, lambdas: Mapping[int, str] | None = None) -> str:
        """``lambdas``: the names of the variables of the lambda functions around ``expression``."""
        text = expression.sql()
        if not self._incomplete(text, expression, scope):
            return text
        return self._completed(expression, scope, lambdas or {}).sql()

    def _incomplete(self, text: str, expression: JavaObject, scope: Scope) -> bool:
        return any(marker in text for marker in _INCOMPLETE) or bool(scope and _refs(expression) & scope.keys())

    def _completed(self, expression: JavaObject, scope: Scope, lambdas: Mapping[int, str]) -> JavaObject:
        """The expression with every part Spark cannot print replaced by a leaf holding its text."""
        kind = expression.nodeName()
        if kind == "NamedLambdaVariable":
            return self._text(lambdas.get(int(expression.exprId().id()), quote(expression.name())), expression)
        if kind == "LambdaFunction":
            return self._text(self._lambda(expression, scope, lambdas), expression)
        if kind == "AttributeReference" and int(expression.exprId().id()) in scope:
            return self._text(scope[int(expression.exprId().id())], expression)
        if kind == "JsonToStructs":
            schema = expression.schema().sql().replace("'", "\\'")
            options = self._options(expression.options())
            return self._text(f"from_json({self.sql(expression.child(), scope, lambdas)}, '{schema}'{options})",
                              expression)
        children = _seq(expression.children())
        completed = [self._completed(c, scope, lambdas) if self._incomplete(c.sql(), c, scope) else c for c in children]
        return expression.withNewChildren(self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(completed).toSeq())

    def _lambda(self, function: JavaObject, scope: Scope, lambdas: Mapping[int, str]) -> str:
        """``(x, y) -> body`` (``x -> body``). PySpark numbers its variables by a counter of the whole process
        (``x_12``): each is named by its base name, numbered only where an enclosing lambda
        has that name already, so the same plan always reads the same."""
        names = dict(lambdas)
        arguments = []
        for argument in _seq(function.arguments()):
            base = re.sub(r"_\d+$", "", argument.name()) or "x"
            name, k = base, 1
            while name in names.values():
                k += 1
                name = f"{base}{k}"
            names[int(argument.exprId().id())] = name
            arguments.append(quote(name))
        # Spark's grammar: x -> or (x, y) ->
        head = arguments[0] if len(arguments) == 1 else f"({', '.join(arguments)})"
        return f"{head} -> {self.sql(function.function(), scope, names)}"

    def _text(self, text: str, typed_like: JavaObject) -> JavaObject:
        """A leaf whose SQL is ``text`` (Catalyst's PrettyAttribute prints its name), of the
        replaced part's type, so the parents' own SQL (a struct field's name) still resolves."""
        return self.jvm.org.apache.spark.sql.catalyst.expressions.PrettyAttribute(text, typed_like.dataType())

    def _options(self, options: JavaObject) -> str:
        pairs = [(p._1(), p._2()) for p in _seq(options.toSeq())]
        if not pairs:
            return ""
        return ", map(" + ", ".join(f"'{k}', '{v}'" for k, v in sorted(pairs)) + ")"


# -- the blocks of a SELECT ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Item:
    """One column of a SELECT list."""

    id: int
    name: str
    value: Callable[[Scope], str]  # the expression's text (no alias) in the block's scope
    refs: frozenset[int]  # ids of the input columns it reads
    plain: bool = False  # the input column of the same id, passed through
    column: int | None = None  # the value is this input column as it is (plain, or renamed)
    multiplies: bool = False  # yields several rows per input row (a sliding window): never dropped

    def text(self, scope: Scope) -> str:
        value = self.value(scope)
        return value if self.plain or value == quote(self.name) else f"{value} AS {quote(self.name)}"


def _plain(column: tuple[int, str]) -> _Item:
    ident, name = column
    return _Item(ident, name, lambda scope: scope.get(ident, quote(name)), frozenset({ident}), plain=True,
                 column=ident)


@dataclass(frozen=True)
class _Block:
    """SELECT items FROM source [LATERAL VIEW ...] [WHERE ...] [GROUP BY ... [HAVING ...]]."""

    source: str
    inputs: tuple[tuple[int, str], ...]  # the columns FROM (and LATERAL VIEW) give
    scope: Scope = field(default_factory=dict)
    items: tuple[_Item, ...] | None = None  # None: SELECT *
    lateral: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    group_by: tuple[str, ...] | None = None
    having: tuple[str, ...] = ()
    windowed: bool = False  # the items hold window functions: no filter may move below them

    @property
    def columns(self) -> tuple[tuple[int, str], ...]:
        return self.inputs if self.items is None else tuple((i.id, i.name) for i in self.items)

    @property
    def named(self) -> bool:
        """Only a name: FROM it and nothing else."""
        return self.items is None and not (self.lateral or self.where or self.group_by is not None)

    def computed(self) -> dict[int, _Item]:
        return {} if self.items is None else {i.id: i for i in self.items if not i.plain}

    def text(self) -> str:
        lines = [f"SELECT{self._select()}", f"FROM {self.source}", *self.lateral]
        lines += _clause("WHERE", self.where)
        if self.group_by:
            lines.append(f"GROUP BY {', '.join(self.group_by)}")
        lines += _clause("HAVING", self.having)
        return "\n".join(lines)

    def _select(self) -> str:
        if self.items is None:
            return " *"
        texts = [i.text(self.scope) for i in self.items]
        ids = [i.id if i.plain else None for i in self.items]
        every = [i for i, _ in self.inputs]
        if self.group_by is None and len(ids) >= len(every) > 0:
            for start in range(len(ids) - len(every) + 1):  # every input column in order: *
                if ids[start:start + len(every)] == every:
                    texts[start:start + len(every)] = ["*"]
                    break
        one_line = ", ".join(texts)
        return " " + one_line if len(one_line) <= 100 else "\n  " + ",\n  ".join(texts)


def _clause(keyword: str, conditions: Sequence[str]) -> list[str]:
    if not conditions:
        return []
    return [f"{keyword} {conditions[0]}", *[f"  AND {c}" for c in conditions[1:]]]


def _nested(block: _Block) -> _Block:
    """``block`` as a subquery: ``SELECT * FROM (block)``."""
    return _Block(f"(\n{textwrap.indent(block.text(), '  ')}\n)", block.columns)


# -- operators ---------------------------------------------------------------------------------------

class _Names:
    """Named plans, found again inside other plans (the same plan, or the same result with
    renumbered columns, as Spark gives the second side of a self-join)."""

    def __init__(self, named: Sequence[tuple[str, JavaObject]]):
        self.cuts = bool(named)
        self.by_schema: dict[str, list[tuple[str, JavaObject]]] = {}
        for name, plan in named:
            self.by_schema.setdefault(plan.schema().simpleString(), []).append((name, plan))

    def name_of(self, plan: JavaObject, skip: str | None) -> str | None:
        candidates = [(n, p) for n, p in self.by_schema.get(plan.schema().simpleString(), []) if n != skip]
        for name, named in candidates:
            if plan.equals(named):
                return name
        for name, named in candidates:
            if plan.sameResult(named):
                return name
        return None


class _Renderer:
    """One plan as one SELECT (named sub-plans other than ``own`` cut out)."""

    def __init__(self, jvm: JavaObject, names: _Names, own: str | None):
        self.names = names
        self.own = own
        self.expressions = _Expressions(jvm)
        self.aliases = 0

    def sql(self, plan: JavaObject) -> str:
        return self.block(plan).text()

    def block(self, plan: JavaObject) -> _Block:
        name = self.names.name_of(plan, self.own)
        if name is not None:
            return _Block(name, _columns(plan))
        if plan.children().isEmpty() and self.names.cuts:
            # Every source of the plan is inside a named input: reaching one means an input was
            # not recognised, and printing on would show how it is read (never shown).
            raise UnnamedInput(f"Spark's {plan.nodeName()} is not inside any named input")
        handler = {
            "Project": self.project, "Filter": self.filter, "Join": self.join, "Aggregate": self.aggregate,
            "Generate": self.generate, "Expand": self.expand, "Window": self.window,
            "ResolvedHint": self.transparent, "SubqueryAlias": self.transparent,
        }.get(plan.nodeName(), self.opaque)
        return handler(plan)

    def expr(self, expression: JavaObject, scope: Scope) -> str:
        return self.expressions.sql(expression, scope)

    def item(self, named: JavaObject) -> _Item:
        """An item of a SELECT list from a Catalyst NamedExpression (an Alias or a column)."""
        ident, name = int(named.exprId().id()), named.name()
        if named.nodeName() == "Alias":
            child = named.child()
            window = _window_call([child], [(ident, name)])
            if window is not None:  # a tumbling window, as Spark expands it
                return _Item(ident, name, window[0], window[1])
            column = int(child.exprId().id()) if child.nodeName() == "AttributeReference" else None
            return _Item(ident, name, lambda scope: self.expr(child, scope), _refs(child), column=column)
        return _plain((ident, name))

    # Project: SELECT list
    def project(self, plan: JavaObject) -> _Block:
        below = self.block(plan.child())
        items = tuple(self.item(e) for e in _seq(plan.projectList()))
        if all(i.plain for i in items) and [i.id for i in items] == [i for i, _ in below.columns]:
            return below  # selects every column as it is
        return self.select(below, items)

    def select(self, below: _Block, items: tuple[_Item, ...], windowed: bool = False) -> _Block:
        if below.group_by is None and below.items is None and not below.windowed:
            return replace(below, items=items, windowed=windowed)
        merged = self.merged(below, items)
        if merged is not None and not (windowed and below.computed()):
            return replace(below, items=merged, windowed=windowed or below.windowed)
        return replace(_nested(below), items=items, windowed=windowed)

    def merged(self, below: _Block, items: Sequence[_Item]) -> tuple[_Item, ...] | None:
        """``items`` over ``below``'s SELECT list, as one list; None when an expression would
        have to be rewritten (it reads a column ``below`` computes) or a row-multiplying item
        would be dropped."""
        computed = below.computed() if below.items is not None else {}
        merged = []
        for item in items:
            if item.plain and item.id in computed:
                merged.append(computed[item.id])  # the same column: the same name
            elif item.refs & computed.keys():
                return None
            else:
                merged.append(item)
        kept = {i.id for i in merged}
        if any(i.multiplies and i.id not in kept for i in computed.values()):
            return None
        return tuple(merged)

    # Filter: WHERE (HAVING over a grouping)
    def filter(self, plan: JavaObject) -> _Block:
        below = self.block(plan.child())
        condition = plan.condition()
        if below.group_by is not None and not below.windowed:
            return replace(below, having=below.having + tuple(self.conjuncts(condition, {})))
        if below.windowed or _refs(condition) & below.computed().keys():
            below = _nested(below)
        return replace(below, where=below.where + tuple(self.conjuncts(condition, below.scope)))

    def conjuncts(self, condition: JavaObject, scope: Scope) -> list[str]:
        """The AND-ed parts of a condition (TRUE parts left out; FALSE OR x is x)."""
        kind = condition.nodeName()
        if kind == "And":
            return self.conjuncts(condition.left(), scope) + self.conjuncts(condition.right(), scope)
        if _is_literal(condition, "true"):
            return []
        if kind == "Or":
            parts = [p for p in _disjuncts(condition) if not _is_literal(p, "false")]
            if len(parts) < len(_disjuncts(condition)):  # the compiler's FALSE OR view0 OR view1 ...
                texts = [self.expr(p, scope) for p in parts] or ["false"]
                return [texts[0] if len(texts) == 1 else f"({' OR '.join(texts)})"]
        return [self.expr(condition, scope)]

    # Join: FROM left JOIN right ON ...
    def join(self, plan: JavaObject) -> _Block:
        left, right = self.block(plan.left()), self.block(plan.right())
        clashing = {n for _, n in left.columns} & {n for _, n in right.columns}
        left_from, left_alias = self.side(left, bool(clashing), "l", force=False)
        right_from, right_alias = self.side(right, bool(clashing), "r", force=False)
        if left_alias == right_alias:  # one named plan on both sides, or a relation named l or r
            left_from, left_alias = self.side(left, True, "l_", force=True)
            right_from, right_alias = self.side(right, True, "r_", force=True)
        scope = {i: f"{alias}.{quote(n)}" for side, alias in ((left, left_alias), (right, right_alias))
                 for i, n in side.columns if n in clashing}
        condition = plan.condition()
        kind = plan.joinType().sql()
        if condition.isEmpty():
            source = f"{left_from}\n{'CROSS' if kind in ('INNER', 'CROSS') else kind} JOIN {right_from}"
        else:
            on = self.conjuncts(condition.get(), scope) or ["true"]
            source = f"{left_from}\n{kind} JOIN {right_from}\n" + "\n".join(_clause("ON", on))
        return _Block(source, _columns(plan), scope)

    def side(self, block: _Block, qualified: bool, alias: str, force: bool) -> tuple[str, str]:
        """The FROM text of a join's input, and the name its columns are qualified by: its
        own name if it is one, else ``alias`` (``force``: ``alias`` in any case)."""
        if block.named and not force:
            return block.source, block.source
        if block.named:
            return f"{block.source} AS {alias}", alias
        text = _nested(block).source
        return (f"{text} AS {alias}", alias) if qualified else (text, alias)

    # Aggregate: GROUP BY
    def aggregate(self, plan: JavaObject) -> _Block:
        below = self.block(plan.child())
        items = tuple(self.item(e) for e in _seq(plan.aggregateExpressions()))
        keys = _seq(plan.groupingExpressions())
        if below.group_by is not None or below.windowed:
            below = _nested(below)
        computed = below.computed()
        grouped = self.grouping_items(items, computed)
        group_by = self.grouping_keys(keys, computed, below.scope)
        keyed = {int(k.exprId().id()) for k in keys if k.nodeName() == "AttributeReference"}
        if any(i.multiplies and i.id not in keyed for i in computed.values()):
            grouped = None  # a row-multiplying column the grouping drops: keep it in its own SELECT
        if grouped is None or group_by is None:
            below, grouped = _nested(below), items
            group_by = tuple(self.expr(k, {}) for k in keys)
        return replace(below, items=grouped, group_by=group_by)

    def grouping_items(self, items: Sequence[_Item], computed: Mapping[int, _Item]) -> tuple[_Item, ...] | None:
        """Aggregate items over ``computed`` columns: a grouped column by its expression
        (``window(...) AS __window``); None if an aggregate reads a computed column."""
        result = []
        for item in items:
            if item.plain and item.id in computed:
                result.append(computed[item.id])
            elif item.column is not None and item.column in computed:  # a computed column renamed: its expression,
                # under the new name
                result.append(replace(computed[item.column], id=item.id, name=item.name, plain=False, column=None))
            elif item.refs & computed.keys():
                return None
            else:
                result.append(item)
        return tuple(result)

    def grouping_keys(self, keys: Sequence[JavaObject], computed: Mapping[int, _Item],
                      scope: Scope) -> tuple[str, ...] | None:
        result = []
        for key in keys:
            refs = _refs(key)
            if key.nodeName() == "AttributeReference" and int(key.exprId().id()) in computed:
                result.append(computed[int(key.exprId().id())].value(scope))
            elif refs & computed.keys():
                return None
            else:
                result.append(self.expr(key, scope))
        return tuple(result)

    # Generate: LATERAL VIEW
    def generate(self, plan: JavaObject) -> _Block:
        below = self.block(plan.child())
        if not (below.items is None and below.group_by is None):
            below = _nested(below)
        outer = " OUTER" if plan.outer() else ""
        names = ", ".join(quote(n) for _, n in _attributes(plan.generatorOutput()))
        self.aliases += 1
        view = f"LATERAL VIEW{outer} {self.expr(plan.generator(), below.scope)} generated{self.aliases} AS {names}"
        given = below.columns + _attributes(plan.generatorOutput())
        block = replace(below, lateral=below.lateral + (view,), inputs=given)
        if _columns(plan) != given:  # child columns the generator does not pass on
            block = replace(block, items=tuple(_plain(c) for c in _columns(plan)))
        return block

    # Expand: only the one Spark makes of a sliding time window
    def expand(self, plan: JavaObject) -> _Block:
        projections = [_seq(p) for p in _seq(plan.projections())]
        output = _columns(plan)
        window = _window_call([p[0] for p in projections], output)
        if window is None or output[1:] != _columns(plan.child()):
            return self.opaque(plan)
        ident, name = output[0]
        item = _Item(ident, name, window[0], window[1], multiplies=len(projections) > 1)
        return self.select(self.block(plan.child()), (item, *[_plain(c) for c in output[1:]]))

    # Window: window functions in the SELECT list
    def window(self, plan: JavaObject) -> _Block:
        below = self.block(plan.child())
        if below.group_by is not None or below.computed():
            below = _nested(below)
        functions = tuple(self.item(e) for e in _seq(plan.windowExpressions()))
        return self.select(below, (*[_plain(c) for c in below.columns], *functions), windowed=True)

    def transparent(self, plan: JavaObject) -> _Block:
        """A hint or a name for a sub-plan: the same rows."""
        return self.block(plan.child())

    def opaque(self, plan: JavaObject) -> _Block:
        """An operator this module does not write as SQL: named in a comment (never its data)."""
        children = _seq(plan.children())
        described = re.sub(r"#\d+L?", "", plan.simpleString(25)) if children else plan.nodeName()
        inner = "\n".join(_nested(self.block(c)).source for c in children)
        return _Block(f"{inner} /* Spark {described} */" if inner else f"/* Spark {described} */", _columns(plan))


def _disjuncts(condition: JavaObject) -> list[JavaObject]:
    if condition.nodeName() != "Or":
        return [condition]
    return _disjuncts(condition.left()) + _disjuncts(condition.right())


# -- time windows -----------------------------------------------------------------------------------

def _window_call(structs: list[JavaObject], output: Sequence[tuple[int, str]]
                 ) -> tuple[Callable[[Scope], str], frozenset[int]] | None:
    """``window(ts, size, slide)`` if ``structs`` (the ``window`` column of each projection)
    are exactly Spark's expansion of it, one per overlapping window, else None."""
    if not structs or output[0][1] != "window":
        return None
    parts = [p for p in map(_window_parts, structs) if p is not None]
    if len(parts) != len(structs):
        return None
    (column, size, slide, offset, _), *_ = parts
    starts = [p[4] for p in parts]
    if ({p[:4] for p in parts} != {(column, size, slide, offset)}
            or starts != [k * slide for k in range(len(parts))] or len(parts) != math.ceil(size / slide)):
        return None
    ident, name = column
    arguments = [duration(size)] + ([duration(slide)] if slide != size or offset else []) + (
        [duration(offset)] if offset else [])
    return (lambda scope: f"window({scope.get(ident, quote(name))}, {', '.join(arguments)})"), frozenset({ident})


def _window_parts(struct: JavaObject) -> tuple[tuple[int, str], int, int, int, int] | None:
    """(time column, size, slide, offset, k·slide) of one of TimeWindowing's start/end structs:
    start = ts - ((ts - offset) mod slide) - k·slide, end = start + size (in µs)."""
    if struct.nodeName() != "CreateNamedStruct":
        return None
    children = _seq(struct.children())
    columns = _attributes(struct.references())
    if len(children) != 4 or [children[0].sql(), children[2].sql()] != ["'start'", "'end'"] or len(columns) != 1:
        return None
    start, end = _timestamp_micros(children[1]), _timestamp_micros(children[3])
    if start is None or end is None or start.nodeName() != "Subtract" or end.nodeName() != "Add":
        return None
    if not end.left().semanticEquals(start):
        return None
    size, back = _long(end.right()), _long(start.right())
    remainders = _remainders(start.left())
    if size is None or back is None or len(remainders) != 1:
        return None
    (offset, slide), = remainders
    return columns[0], size, slide, offset, back


def _timestamp_micros(part: JavaObject) -> JavaObject | None:
    """x of ``knownnullable(precisetimestampconversion(x, LongType, TimestampType))``."""
    if part.nodeName() == "KnownNullable":
        part = part.child()
    if part.nodeName() != "PreciseTimestampConversion":
        return None
    return part.child()


def _long(expression: JavaObject) -> int | None:
    if expression.nodeName() != "Literal":
        return None
    value = expression.value()
    return value if isinstance(value, int) else None


def _remainders(expression: JavaObject) -> set[tuple[int, int]]:
    """(offset, slide) of every ``(µs(ts) - offset) % slide`` inside ``expression``."""
    found: set[tuple[int, int]] = set()
    if expression.nodeName() == "Remainder":
        shifted, slide = expression.left(), _long(expression.right())
        offset = _long(shifted.right()) if shifted.nodeName() == "Subtract" else None
        found.add((offset if offset is not None else -1, slide if slide is not None else -1))
        return found
    for child in _seq(expression.children()):
        found |= _remainders(child)
    return found
