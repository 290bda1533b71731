"""Bind a parsed CQL query against the catalog into the logical operator graph.

The binder resolves streams and attributes, checks types, names the output columns and
lays out the core query model: each input is an IN node; single-input conjuncts of the
WHERE become σ over that input (as in Definition 5.4, whose S1.EXPs and S2.EXPs are the
selections below a join); conjuncts that relate inputs become the join predicates of a
left-deep chain of binary joins; aggregates become Σ over the first input's window.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}")
    >>> plan = bind_query(parse_query("SELECT a FROM S WHERE a > 3"), cat)
    >>> print(render_tree(plan))
    π S.a   #n3
      σ S.a > 3   #n2
        IN S   #n1
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamwarden.catalog.model import Catalog, StreamDef
from streamwarden.errors import BindError, SourceText, Span
from streamwarden.language import ast
from streamwarden.language.expressions import Scope, bind_expression
from streamwarden.language.insert_sp import InsertSp
from streamwarden.language.parser import parse_query
from streamwarden.names import reserved_problem
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import AggCall, Aggregate, Filter, Join, Node, Project, Source, render_tree

__all__ = ["BoundQuery", "bind_query", "bind_text", "bound_query", "parse_query", "render_tree"]


def bind_query(query: ast.Query, catalog: Catalog) -> Node:
    """Turn a parsed query into a plan; raises :class:`BindError` naming line and column."""
    return _QueryBinder(query, catalog).bind()


@dataclass(frozen=True)
class BoundQuery:
    """A query parsed and bound once: its text, its plan, and what ``ON RESULT`` publishes.
    The security passes take it for every user of a registered query."""

    text: str
    plan: Node
    on_result: tuple[InsertSp, ...] = ()


def bound_query(text: str, catalog: Catalog, name: str = "<query>") -> BoundQuery:
    """Parse and bind ``text``; errors name ``name``, line and column.

        >>> from streamwarden.catalog.loader import load_catalog
        >>> bound = bound_query("SELECT SID FROM Position", load_catalog("examples/drill.yaml"))
        >>> type(bound.plan).__name__, bound.on_result
        ('Project', ())
    """
    parsed = parse_query(text, name)
    return BoundQuery(text, bind_query(parsed, catalog), parsed.on_result)


class _QueryBinder:
    def __init__(self, query: ast.Query, catalog: Catalog):
        self.query = query
        self.catalog = catalog
        self.source: SourceText = query.source
        self.counter = 0

    def next_id(self) -> str:
        self.counter += 1
        return f"n{self.counter}"

    def error(self, message: str, span: Span) -> BindError:
        return BindError(message, self.source, span)

    def check_reserved(self, what: str, name: str, span: Span) -> None:
        """Refuse an output column or FROM alias named like a column the engine adds to rows
        (:func:`streamwarden.names.reserved_problem`): in a shared group it would collide with it."""
        problem = reserved_problem(name)
        if problem is not None:
            raise self.error(f"{what} {name!r} is reserved ({problem}): choose a name that does not start with '_'",
                             span)

    def bind(self) -> Node:
        inputs = self.inputs()
        scope = Scope({s.relation: self.stream_def(s.stream) for s in inputs}, actions=frozenset(self.catalog.actions),
                      lattice=self.catalog.lattice)
        condition = self.query.where
        where = bind_expression(condition, scope, self.source) if condition else None
        if condition and where is not None and where.dtype not in ("boolean", "null"):
            raise self.error("WHERE needs a condition", condition.span)
        tree = self.from_tree(inputs, where)
        if self.is_aggregate():
            return self.aggregate(tree, inputs, scope)
        return self.projection(tree, inputs, scope)

    def stream_def(self, name: str) -> StreamDef:
        """The stream as queries see it: with the system attribute ``level`` when levels are in force
        (the trusted stream shepherd sets it; queries read it, never write it)."""
        stream = self.catalog.streams[name]
        if self.catalog.lattice is None:
            return stream
        return replace(stream, schema=stream.schema + (("level", "level"),))

    def check_level_name(self, name: str, expr: E.Expr | None, inputs: list[Source], span: Span) -> None:
        """``level`` in the output is the row's level (the LUB of its tuples'): no other column may take the name."""
        if self.catalog.lattice is None or name != "level":
            return
        if len(inputs) == 1 and expr == E.Column(inputs[0].relation, "level", "level") and not self.is_aggregate():
            return
        raise self.error("'level' is the row's security level, which the system sets (the least upper bound of "
                         "its tuples' levels): name this column something else with AS", span)

    # -- FROM and WHERE -----------------------------------------------------------------
    def inputs(self) -> list[Source]:
        sources: list[Source] = []
        for item in self.query.sources:
            stream = self.catalog.streams.get(item.stream)
            if stream is None:
                close = [s for s in self.catalog.streams if s.lower() == item.stream.lower()]
                known = ', '.join(self.catalog.streams) or 'none'
                hint = f" (did you mean {close[0]}?)" if close else f" (known: {known})"
                raise self.error(f"unknown stream {item.stream!r}{hint}", item.span)
            if item.alias is not None:
                self.check_reserved("the alias", item.alias, item.alias_span or item.span)
            if any(s.relation == item.name for s in sources):
                raise self.error(f"{item.name!r} appears twice in FROM: give each occurrence its own alias", item.span)
            sources.append(Source(stream.name, item.name, self.stream_def(stream.name).schema, item.window,
                                  id=self.next_id()))
        return sources

    def from_tree(self, inputs: list[Source], where: E.Expr | None) -> Node:
        pending = E.conjuncts(where)
        if len(inputs) == 1:
            return Filter(inputs[0], where, id=self.next_id()) if where is not None else inputs[0]
        # Selections on a single input go below the joins, as streaming engines evaluate them.
        nodes: list[Node] = []
        for source in inputs:
            mine = [c for c in pending if E.relations(c) == {source.relation}]
            pending = [c for c in pending if c not in mine]
            nodes.append(Filter(source, E.conjoin(mine), id=self.next_id()) if mine else source)
        tree, joined = nodes[0], {inputs[0].relation}
        for source, node in zip(inputs[1:], nodes[1:]):
            joined.add(source.relation)
            mine = [c for c in pending if E.relations(c) and E.relations(c) <= joined]
            pending = [c for c in pending if c not in mine]
            left_window = inputs[0].window if tree is nodes[0] else None
            tree = Join(tree, node, E.conjoin(mine), left_window, source.window, id=self.next_id())
        if pending:
            tree = Filter(tree, E.conjoin(pending), id=self.next_id())
        return tree

    # -- SELECT -------------------------------------------------------------------------
    def is_aggregate(self) -> bool:
        return bool(self.query.group_by) or any(
            isinstance(item.expr, ast.Call) and item.expr.name in ast.AGGREGATES for item in self.query.items
        )

    def projection(self, tree: Node, inputs: list[Source], scope: Scope) -> Node:
        items: list[tuple[str, E.Expr]] = []
        spans: dict[str, Span] = {}
        for item in self.query.items:
            for name, expr, span in self.expand(item, inputs, scope):
                if name in spans:
                    raise self.error(
                        f"output column {name!r} appears twice (also at column "
                        f"{self.source.line_col(spans[name].start)[1]}): add AS <alias> to tell them apart",
                        span,
                    )
                self.check_reserved("output column", name, item.alias_span or span)
                self.check_level_name(name, expr, inputs, span)
                spans[name] = span
                items.append((name, expr))
        return Project(tree, tuple(items), id=self.next_id())

    def expand(self, item: ast.SelectItem, inputs: list[Source], scope: Scope) -> list[tuple[str, E.Expr, Span]]:
        if isinstance(item.expr, ast.Star):
            chosen = [s for s in inputs if item.expr.qualifier in (None, s.relation)]
            if not chosen:
                raise self.error(f"unknown stream or alias {item.expr.qualifier!r}", item.span)
            return [(f.name, E.Column(f.relation or "", f.name, f.dtype), item.span) for s in chosen for f in s.fields]
        if isinstance(item.expr, ast.Call) and item.expr.name in ast.AGGREGATES:
            raise self.error("cannot mix aggregates with plain attributes without GROUP BY", item.span)
        expr = bind_expression(item.expr, scope, self.source)
        return [(item.alias or self.default_name(item.expr), expr, item.span)]

    def default_name(self, node: ast.Expr) -> str:
        if isinstance(node, ast.Name):
            return node.parts[-1]
        if isinstance(node, ast.Call):
            return node.text
        return " ".join(self.source.text[node.span.start : node.span.end].split())

    def aggregate(self, tree: Node, inputs: list[Source], scope: Scope) -> Node:
        groups: list[tuple[str, E.Expr]] = []
        for node in self.query.group_by:
            groups.append((self.default_name(node), bind_expression(node, scope, self.source)))
        aggregates: list[AggCall] = []
        order: list[str] = []
        for item in self.query.items:
            if isinstance(item.expr, ast.Star):
                raise self.error("SELECT * cannot be combined with aggregates", item.span)
            if isinstance(item.expr, ast.Call) and item.expr.name in ast.AGGREGATES:
                call = self.agg_call(item.expr, item.alias, scope)
                name = call.name
                aggregates.append(call)
            else:
                expr = bind_expression(item.expr, scope, self.source)
                matches = [n for n, g in groups if g == expr]
                if not matches:
                    raise self.error(f"{self.default_name(item.expr)} must appear in GROUP BY or inside an aggregate",
                                     item.span)
                name = item.alias or matches[0]
                if item.alias:
                    groups = [(item.alias if g == expr else n, g) for n, g in groups]
            self.check_reserved("output column", name, item.alias_span or item.span)
            self.check_level_name(name, None, inputs, item.span)
            if name in order or name in ("window_start", "window_end", "ts"):
                raise self.error(f"output column {name!r} appears twice: add AS <alias> to tell them apart", item.span)
            order.append(name)
        for name, _ in groups:  # grouping attributes not selected still appear, after the rest
            if name not in order:
                order.append(name)
        # Windows come from the first input: its window, and its tuple's ts places a joined pair
        # (a derived time such as the later of the two could not close windows on Spark).
        window = next((s.window for s in inputs if s.window is not None), None)
        time = E.Column(inputs[0].relation, "ts", "timestamp")
        return Aggregate(tree, tuple(aggregates), tuple(groups), window, time, tuple(order), id=self.next_id())

    def agg_call(self, call: ast.Call, alias: str | None, scope: Scope) -> AggCall:
        func = call.name.lower()
        if call.star or not call.args:
            if func != "count":
                raise self.error(f"{call.name} needs an attribute", call.span)
            return AggCall("count", None, alias or call.text)
        if len(call.args) != 1:
            raise self.error(f"{call.name} takes one argument", call.span)
        arg = bind_expression(call.args[0], scope, self.source)
        if func in ("avg", "sum") and arg.dtype not in E.NUMERIC:
            raise self.error(f"{call.name} needs a number, {self.default_name(call.args[0])} is {arg.dtype}", call.span)
        return AggCall(func, arg, alias or call.text)


def bind_text(text: str, catalog: Catalog, name: str = "<query>") -> Node:
    """Parse and bind in one step."""
    return bind_query(parse_query(text, name), catalog)
