"""Abstract syntax of the CQL dialect and of policy expressions, with source positions.

The AST is what the user wrote, unresolved: names are not yet known to be streams or
attributes. :mod:`streamwarden.language.binder` turns it into the logical plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamwarden.errors import SourceText, Span
from streamwarden.language.insert_sp import InsertSp


@dataclass(frozen=True)
class Expr:
    span: Span = field(compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Name(Expr):
    """``a``, ``s.a`` or ``self.Platoon``."""

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True)
class Literal(Expr):
    """A constant. ``kind`` is number, string, bool, null, time_of_day (seconds since midnight) or level."""

    value: int | float | str | bool | None
    kind: str


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # NOT or -
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # AND OR = <> < <= > >= + - * /
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool


@dataclass(frozen=True)
class Call(Expr):
    """A function call: an aggregate (MIN MAX COUNT AVG SUM) or start/end/target(action)."""

    name: str  # upper case
    args: tuple[Expr, ...]
    star: bool = False  # COUNT(*)
    text: str = ""  # as written, for output column names


AGGREGATES = frozenset({"MIN", "MAX", "COUNT", "AVG", "SUM"})
ACTION_FUNCTIONS = frozenset({"START", "END", "TARGET"})


@dataclass(frozen=True)
class Star:
    span: Span = field(compare=False, repr=False)
    qualifier: str | None = None


@dataclass(frozen=True)
class SelectItem:
    expr: Expr | Star
    alias: str | None
    span: Span = field(compare=False, repr=False)
    alias_span: Span | None = field(default=None, compare=False, repr=False)  # where the alias is written


@dataclass(frozen=True)
class Window:
    """``[RANGE size SLIDE slide]``, ``[ROWS n]``, ``[NOW]`` or ``[UNBOUNDED]``."""

    kind: str  # range | rows | now | unbounded
    size_seconds: float | None = None
    slide_seconds: float | None = None
    rows: int | None = None
    span: Span = field(default=Span(0, 0), compare=False, repr=False)

    def __str__(self) -> str:
        if self.kind == "range":
            slide = f" SLIDE {_fmt_seconds(self.slide_seconds)}" if self.slide_seconds else ""
            return f"[RANGE {_fmt_seconds(self.size_seconds)}{slide}]"
        if self.kind == "rows":
            return f"[ROWS {self.rows}]"
        return f"[{self.kind.upper()}]"


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    for unit, size in (("hour", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 and unit == 'hour' else ''}"
    return f"{seconds:g} seconds"


@dataclass(frozen=True)
class FromItem:
    stream: str
    alias: str | None
    window: Window | None
    span: Span = field(compare=False, repr=False)
    alias_span: Span | None = field(default=None, compare=False, repr=False)  # where the alias is written

    @property
    def name(self) -> str:
        """The name the query uses for this input: its alias, else the stream name."""
        return self.alias or self.stream


@dataclass(frozen=True)
class Query:
    items: tuple[SelectItem, ...]
    sources: tuple[FromItem, ...]
    where: Expr | None
    group_by: tuple[Expr, ...]
    source: SourceText = field(compare=False, repr=False)
    # ON RESULT (INSERT SP ...): the policy the query publishes its results under (issue 3).
    on_result: tuple[InsertSp, ...] = ()
