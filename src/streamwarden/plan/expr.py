"""Bound, typed expressions: the predicates and computed items of the logical plan.

Unlike the AST, every name here is resolved: a :class:`Column` names the relation (the
query's alias for an input) and the attribute. Nodes are frozen and hashable, so plans
built from them can be compared, memoized and used as dictionary keys.

    >>> p = Compare("=", Column("Position", "Platoon", "string"), Literal("X", "string"))
    >>> render(p)
    "Position.Platoon = 'X'"
"""

from __future__ import annotations

from dataclasses import Field, dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from streamwarden.plan.hashing import cached_hash

if TYPE_CHECKING:  # for annotations only: the catalog's model imports this module
    from streamwarden.catalog.lattice import Level

NUMERIC = frozenset({"int", "long", "double"})
COMPARISON_OPS = frozenset({"=", "<>", "<", "<=", ">", ">="})


class Expr:
    """Base of bound expressions; subclasses are frozen dataclasses.

    ``child_fields`` names the fields holding sub-expressions, so traversal and rebuilding
    are written once here.
    """

    child_fields: ClassVar[tuple[str, ...]] = ()
    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every subclass is a dataclass: replace() applies

        @property
        def dtype(self) -> str:
            """The value's type: a field of most expressions, computed by a few (Negate, ActionValue)."""

    def children(self) -> tuple["Expr", ...]:
        names = self.child_fields  # the common shapes spelled out: every pass over a plan asks, many times
        if not names:
            return ()
        if len(names) == 1:
            return (getattr(self, names[0]),)
        return tuple([getattr(self, name) for name in names])

    def replace_children(self, children: tuple["Expr", ...]) -> "Expr":
        return replace(self, **dict(zip(self.child_fields, children))) if self.child_fields else self


@cached_hash
@dataclass(frozen=True)
class Column(Expr):
    relation: str
    name: str
    dtype: str


@cached_hash
@dataclass(frozen=True)
class Literal(Expr):
    value: int | float | str | bool | datetime | Level | None
    dtype: str  # int long double string boolean timestamp null time_of_day


@cached_hash
@dataclass(frozen=True)
class Param(Expr):
    """A constant of a shared query template: the ``index``-th value of each member's row in
    the template's member table (:mod:`streamwarden.plan.templates`), typed as the literal it
    replaced."""

    index: int
    dtype: str


@cached_hash
@dataclass(frozen=True)
class ProfileRef(Expr):
    """``self.<attr>``: replaced by the user's profile value when a policy is instantiated."""

    attr: str
    dtype: str = "unknown"


@cached_hash
@dataclass(frozen=True)
class ActionValue(Expr):
    """``start(a)``, ``end(a)`` or ``target(a)``, read from the store at run time."""

    kind: str  # start | end | target
    action: str

    @property
    def dtype(self) -> str:
        return "double" if self.kind == "target" else "timestamp"


@cached_hash
@dataclass(frozen=True)
class TimeOfDay(Expr):
    """Seconds since midnight (UTC) of a timestamp, to compare with ``6:00am``."""

    child_fields: ClassVar[tuple[str, ...]] = ("operand",)
    operand: Expr
    dtype: str = "int"



@cached_hash
@dataclass(frozen=True)
class Compare(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("left", "right")
    op: str
    left: Expr
    right: Expr
    dtype: str = "boolean"



@cached_hash
@dataclass(frozen=True)
class Arith(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("left", "right")
    op: str  # + - * / %
    left: Expr
    right: Expr
    dtype: str = "double"



@cached_hash
@dataclass(frozen=True)
class Negate(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("operand",)
    operand: Expr

    @property
    def dtype(self) -> str:
        return self.operand.dtype



@cached_hash
@dataclass(frozen=True)
class And(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("left", "right")
    left: Expr
    right: Expr
    dtype: str = "boolean"



@cached_hash
@dataclass(frozen=True)
class Or(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("left", "right")
    left: Expr
    right: Expr
    dtype: str = "boolean"



@cached_hash
@dataclass(frozen=True)
class Not(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("operand",)
    operand: Expr
    dtype: str = "boolean"



@cached_hash
@dataclass(frozen=True)
class IsNull(Expr):
    child_fields: ClassVar[tuple[str, ...]] = ("operand",)
    operand: Expr
    negated: bool = False
    dtype: str = "boolean"



TRUE = Literal(True, "boolean")


# -- traversal --------------------------------------------------------------------------
def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, parents before children."""
    yield expr
    for child in expr.children():
        yield from walk(child)


def transform(expr: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn`` returns a replacement or None to keep a node."""
    children = tuple(transform(c, fn) for c in expr.children())
    node = expr.replace_children(children) if children != expr.children() else expr
    replaced = fn(node)
    return node if replaced is None else replaced


def columns(expr: Expr) -> frozenset[Column]:
    return frozenset(e for e in walk(expr) if isinstance(e, Column))


def relations(expr: Expr) -> frozenset[str]:
    return frozenset(c.relation for c in columns(expr))


def conjuncts(expr: Expr | None) -> list[Expr]:
    """Split a predicate on AND (``None`` and TRUE have no conjuncts)."""
    if expr is None or expr == TRUE:
        return []
    if isinstance(expr, And):
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def conjoin(parts: list[Expr] | tuple[Expr, ...]) -> Expr:
    """AND of ``parts`` (TRUE when empty), left-deep in the given order."""
    result: Expr | None = None
    for part in parts:
        if part == TRUE:
            continue
        result = part if result is None else And(result, part)
    return result if result is not None else TRUE


def rename_relation(expr: Expr, mapping: dict[str, str]) -> Expr:
    """Point columns of relation ``old`` at ``mapping[old]`` (policy stream -> query alias)."""

    def fn(node: Expr) -> Expr | None:
        if isinstance(node, Column) and node.relation in mapping:
            return Column(mapping[node.relation], node.name, node.dtype)
        return None

    return transform(expr, fn)


def action_refs(expr: Expr) -> frozenset[ActionValue]:
    return frozenset(e for e in walk(expr) if isinstance(e, ActionValue))


# -- rendering --------------------------------------------------------------------------
_PRECEDENCE = {Or: 1, And: 2, Not: 3, Compare: 4, IsNull: 4, Arith: 5}


def render(expr: Expr, *, qualify: bool = True) -> str:
    """Human-readable text of ``expr`` (explain output, error messages)."""
    return _render(expr, qualify, 0)


def _render(expr: Expr, qualify: bool, parent: int) -> str:
    mine = _PRECEDENCE.get(type(expr), 9)
    if isinstance(expr, Arith) and expr.op in "*/%":
        mine = 6
    text = _render_node(expr, qualify, mine)
    return f"({text})" if mine < parent else text


def _render_node(expr: Expr, qualify: bool, mine: int) -> str:
    if isinstance(expr, Column):
        return f"{expr.relation}.{expr.name}" if qualify else expr.name
    if isinstance(expr, Literal):
        return render_literal(expr)
    if isinstance(expr, ProfileRef):
        return f"self.{expr.attr}"
    if isinstance(expr, Param):
        return f"?{expr.index}"
    if isinstance(expr, ActionValue):
        return f"{expr.kind}({expr.action})"
    if isinstance(expr, TimeOfDay):
        return f"time_of_day({_render(expr.operand, qualify, 0)})"
    if isinstance(expr, Compare):
        return f"{_render(expr.left, qualify, mine + 1)} {expr.op} {_render(expr.right, qualify, mine + 1)}"
    if isinstance(expr, Arith):
        return f"{_render(expr.left, qualify, mine)} {expr.op} {_render(expr.right, qualify, mine + 1)}"
    if isinstance(expr, Negate):
        return f"-{_render(expr.operand, qualify, 9)}"
    if isinstance(expr, And):
        return f"{_render(expr.left, qualify, mine)} AND {_render(expr.right, qualify, mine)}"
    if isinstance(expr, Or):
        return f"{_render(expr.left, qualify, mine)} OR {_render(expr.right, qualify, mine)}"
    if isinstance(expr, Not):
        return f"NOT {_render(expr.operand, qualify, mine)}"
    if isinstance(expr, IsNull):
        return f"{_render(expr.operand, qualify, mine + 1)} IS {'NOT ' if expr.negated else ''}NULL"
    raise TypeError(f"cannot render {expr!r}")


def render_literal(lit: Literal) -> str:
    value = lit.value
    if value is None:
        return "NULL"
    if lit.dtype == "boolean":
        return "TRUE" if value else "FALSE"
    if lit.dtype == "timestamp" and isinstance(value, datetime):
        return f"TIMESTAMP '{format_timestamp(value)}'"
    if lit.dtype == "level":
        return str(value)
    if lit.dtype == "time_of_day" and isinstance(value, int):
        return f"{value // 3600:02d}:{value % 3600 // 60:02d}:{value % 60:02d}"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def format_timestamp(value: datetime) -> str:
    """ISO-8601 UTC text used everywhere streamwarden writes a timestamp: always four digits
    of year (``strftime("%Y")`` writes year 1 as ``1``, which Spark's reader and
    ``fromisoformat`` refuse).

    >>> format_timestamp(datetime(1, 1, 1, tzinfo=timezone.utc))
    '0001-01-01T00:00:00Z'
    >>> format_timestamp(datetime(2026, 3, 1, 10, 0, 0, 500, timezone.utc))
    '2026-03-01T10:00:00.000500Z'
    """
    value = value.astimezone(timezone.utc)
    text = f"{value.year:04d}-" + value.strftime("%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + "Z"
