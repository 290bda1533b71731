"""The immutable logical operator graph: IN, σ, π, Σ, Join and the secure view.

These are the operators of the core query model of Carminati et al. (Table I), plus
:class:`SecureView`, the rewriter's Sec_View over one or more policies merged. Nodes are
frozen dataclasses: equal structure means equal nodes (ids are not compared), so graphs
can be hashed, memoized and shared. Every node has a stable ``id`` that errors and
``explain`` name.

    >>> from streamwarden.plan.expr import Column, Compare, Literal
    >>> src = Source("Position", "Position", (("ts", "timestamp"), ("Pos", "double")), id="n1")
    >>> f = Filter(src, Compare(">=", Column("Position", "Pos", "double"), Literal(5, "int")), id="n2")
    >>> [field.name for field in f.fields]
    ['ts', 'Pos']
"""

from __future__ import annotations

from dataclasses import Field as DataclassField
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from streamwarden.language.ast import Window
from streamwarden.plan import expr as E
from streamwarden.plan.hashing import cached_hash

if TYPE_CHECKING:  # for annotations only: the catalog's modules import the plan's expressions
    from streamwarden.catalog.lattice import Level, LevelSource
    from streamwarden.catalog.punctuations import SecurityPunctuation


@dataclass(frozen=True)
class Field:
    """A column of a node's output; ``relation`` None for computed output columns."""

    relation: str | None
    name: str
    dtype: str


class Node:
    """Base of plan nodes (frozen dataclasses with an ``id`` excluded from equality).

    ``child_fields`` names the fields holding input nodes, so traversal and rebuilding
    are written once here.
    """

    id: str
    child_fields: ClassVar[tuple[str, ...]] = ()
    if TYPE_CHECKING:  # every subclass is a dataclass, so replace() applies
        __dataclass_fields__: ClassVar[dict[str, DataclassField[Any]]]

    def children(self) -> tuple["Node", ...]:
        names = self.child_fields  # the common shapes spelled out: every pass over a plan asks, many times
        if not names:
            return ()
        if len(names) == 1:
            return (getattr(self, names[0]),)
        return tuple([getattr(self, name) for name in names])

    def with_children(self, children: tuple["Node", ...]) -> "Node":
        return replace(self, **dict(zip(self.child_fields, children))) if self.child_fields else self

    def expressions(self) -> tuple[E.Expr, ...]:
        """The expressions this operator evaluates (predicates, items, conditions)."""
        return ()

    @property
    def fields(self) -> tuple[Field, ...]:
        raise NotImplementedError

    @property
    def label(self) -> str:
        raise NotImplementedError


@cached_hash
@dataclass(frozen=True)
class Source(Node):
    """IN: a catalog stream entering the graph under a relation name (the query's alias)."""

    stream: str
    relation: str
    schema: tuple[tuple[str, str], ...]
    window: Window | None = None
    id: str = field(default="", compare=False)

    @cached_property
    def fields(self) -> tuple[Field, ...]:
        return tuple(Field(self.relation, name, dtype) for name, dtype in self.schema)

    @property
    def label(self) -> str:
        alias = f" AS {self.relation}" if self.relation != self.stream else ""
        return f"IN {self.stream}{alias}{' ' + str(self.window) if self.window else ''}"


@cached_hash
@dataclass(frozen=True)
class Filter(Node):
    """σ(P)."""

    child_fields: ClassVar[tuple[str, ...]] = ("child",)
    child: Node
    predicate: E.Expr
    id: str = field(default="", compare=False)


    def expressions(self) -> tuple[E.Expr, ...]:
        return (self.predicate,)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.child.fields

    @property
    def label(self) -> str:
        return f"σ {E.render(self.predicate)}"


@cached_hash
@dataclass(frozen=True)
class Project(Node):
    """π: the query's output columns, each a name and an expression over the child."""

    child_fields: ClassVar[tuple[str, ...]] = ("child",)
    child: Node
    items: tuple[tuple[str, E.Expr], ...]
    id: str = field(default="", compare=False)


    def expressions(self) -> tuple[E.Expr, ...]:
        return tuple(e for _, e in self.items)

    @property
    def fields(self) -> tuple[Field, ...]:
        return tuple(Field(None, name, expr.dtype) for name, expr in self.items)

    @property
    def label(self) -> str:
        parts = [E.render(e) if E.render(e).split(".")[-1] == n else f"{E.render(e)} AS {n}" for n, e in self.items]
        return f"π {', '.join(parts)}"


@dataclass(frozen=True)
class AggCall:
    """One aggregate: ``func`` over ``arg`` (None for COUNT()), output ``name``.

    ``granted`` False means the secure aggregate may not compute it: its value is NULL.
    """

    func: str  # min max count avg sum
    arg: E.Expr | None
    name: str
    granted: bool = True

    @property
    def dtype(self) -> str:
        if self.func == "count":
            return "long"
        if self.func == "avg":
            return "double"
        if self.func == "sum":
            return "double" if self.arg is not None and self.arg.dtype == "double" else "long"
        return self.arg.dtype if self.arg is not None else "long"

    def __str__(self) -> str:
        inner = E.render(self.arg) if self.arg is not None else "*"
        return f"{self.func.upper()}({inner})" + ("" if self.granted else " [not granted: NULL]")


@cached_hash
@dataclass(frozen=True)
class Aggregate(Node):
    """Σ(F, A, s, o): aggregates over event-time windows, optionally grouped."""

    child_fields: ClassVar[tuple[str, ...]] = ("child",)
    child: Node
    aggregates: tuple[AggCall, ...]
    group_by: tuple[tuple[str, E.Expr], ...]
    window: Window | None
    event_time: E.Expr  # the time that places a row in windows (a join: its first input's ts)
    items: tuple[str, ...] = ()  # output order of groups and aggregates, as the query lists them
    id: str = field(default="", compare=False)
    min_group: int | None = None  # rows over fewer tuples are withheld (an aggregate policy's min_group)

    def __post_init__(self) -> None:
        if self.min_group is not None and self.min_group < 1:
            raise ValueError(f"min_group must be at least 1, not {self.min_group}")

    def expressions(self) -> tuple[E.Expr, ...]:
        args = tuple(a.arg for a in self.aggregates if a.arg is not None)
        return tuple(e for _, e in self.group_by) + args + (self.event_time,)

    @property
    def fields(self) -> tuple[Field, ...]:
        by_name = {name: Field(None, name, e.dtype) for name, e in self.group_by}
        by_name.update({a.name: Field(None, a.name, a.dtype) for a in self.aggregates})
        order = self.items or tuple(by_name)
        if self.window is not None and self.window.kind == "rows":  # a row per arriving tuple, at its ts
            return (Field(None, "ts", "timestamp"),) + tuple(by_name[n] for n in order)
        return (Field(None, "window_start", "timestamp"), Field(None, "window_end", "timestamp")) + tuple(
            by_name[n] for n in order
        )

    @property
    def label(self) -> str:
        groups = f" GROUP BY {', '.join(E.render(e) for _, e in self.group_by)}" if self.group_by else ""
        least = f" (groups of at least {self.min_group})" if self.min_group else ""
        return f"Σ {', '.join(map(str, self.aggregates))} over {self.window or '[UNBOUNDED]'}{groups}{least}"


@cached_hash
@dataclass(frozen=True)
class Join(Node):
    """Join(P) of two inputs over their windows (the co-existence condition on ``ts``)."""

    child_fields: ClassVar[tuple[str, ...]] = ("left", "right")
    left: Node
    right: Node
    predicate: E.Expr
    left_window: Window | None
    right_window: Window | None
    id: str = field(default="", compare=False)


    def expressions(self) -> tuple[E.Expr, ...]:
        return (self.predicate,)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.left.fields + self.right.fields

    @property
    def label(self) -> str:
        return f"Join {E.render(self.predicate)} {self.left_window or ''} {self.right_window or ''}".rstrip()


@dataclass(frozen=True)
class View:
    """One policy's view inside a secure view: its condition and the attributes it grants.

    ``condition`` is already instantiated for the user (``self.`` replaced) and points at
    the graph's relations; ``attributes`` None grants every attribute.
    """

    policy_id: str
    condition: E.Expr
    attributes: frozenset[tuple[str, str]] | None  # (relation, attribute)

    def grants(self, f: Field) -> bool:
        # A tuple's security level is system-generated, never masked (levels decide on their own).
        return f.dtype == "level" or self.attributes is None or (f.relation or "", f.name) in self.attributes


@cached_hash
@dataclass(frozen=True)
class SecureView(Node):
    """Sec_View over one or more merged policies (Definition 5.1, merged per tuple).

    A row passes when at least one view's condition is TRUE; each attribute keeps its value
    when one of the views that hold grants it, else it becomes NULL. ``ts`` is always kept.
    The ids of the views that hold are attached as ``_policies``.
    """

    child_fields: ClassVar[tuple[str, ...]] = ("child",)
    child: Node
    views: tuple[View, ...]
    kind: str  # read | join | aggregate
    id: str = field(default="", compare=False)


    @property
    def fields(self) -> tuple[Field, ...]:
        return self.child.fields

    def expressions(self) -> tuple[E.Expr, ...]:
        return tuple(v.condition for v in self.views)

    @property
    def policy_ids(self) -> tuple[str, ...]:
        return tuple(v.policy_id for v in self.views)

    @property
    def label(self) -> str:
        return f"Sec_View[{self.kind}] {', '.join(self.policy_ids)}"

    def granted(self, f: Field) -> bool:
        """Whether some view may show ``f`` (else it is NULL in every row)."""
        return f.name == "ts" or any(v.grants(f) for v in self.views)


@cached_hash
@dataclass(frozen=True)
class Shield(Node):
    """SS: the Security Shield of a punctuated stream (Nehme et al., section 5.1).

    Each tuple of ``stream`` is checked against the policy its provider streamed ahead
    of it, for the user's effective ``roles``: attributes the policy (combined with the
    stream's ``server`` policies by ``combine``) does not grant become NULL, and a tuple
    with no attribute but ``ts`` left is dropped. With ``grant_only`` an attribute must
    also be granted WITH GRANT OPTION (the query re-publishes its results, ON RESULT).

    ``placement`` says where the pass put it: ``down`` right above the stream, or ``up``
    above the selections over it (they then run on the raw tuples first, and run again
    on the masked ones, so the result is the same; only the cost differs).
    """

    child_fields: ClassVar[tuple[str, ...]] = ("child",)
    child: Node
    stream: str
    relation: str
    key: str
    roles: frozenset[str]
    server: tuple[SecurityPunctuation, ...] = ()
    combine: str = "intersect"
    grant_only: bool = False
    placement: str = "down"
    reason: str = ""
    id: str = field(default="", compare=False)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.child.fields

    @property
    def rechecked(self) -> tuple[E.Expr, ...]:
        """Predicates between a lifted shield and its stream (selections, an SCJoin's join),
        which are applied again to the masked tuples."""
        predicates: list[E.Expr] = []
        node = self.child
        while not isinstance(node, Source):
            if isinstance(node, Filter):
                predicates.append(node.predicate)
                node = node.child
            elif isinstance(node, Join):
                predicates.append(node.predicate)
                node = node.left if any(s.relation == self.relation for s in sources(node.left)) else node.right
            elif isinstance(node, (Shield, LevelGuard)):
                node = node.child
            else:
                raise TypeError(f"a shield cannot be lifted above {node.label} (node {node.id})")
        return tuple(predicates)

    @property
    def label(self) -> str:
        server = f", server policies {self.combine}" if self.server else ""
        grant = ", grant option only" if self.grant_only else ""
        roles = sorted(self.roles)
        shown = ", ".join(roles[:6]) + (f", … ({len(roles)} roles)" if len(roles) > 6 else "")
        return f"SS[{self.placement}] {self.relation} for roles {{{shown}}}{server}{grant}"


@cached_hash
@dataclass(frozen=True)
class LevelGuard(Node):
    """The trusted stream shepherd and the secure S2R filter of one input (Ray et al., section 4).

    Every tuple of ``stream`` gets its system-generated ``level`` from ``source`` (the
    company its ``attribute`` names, or a fixed level; unknown: the lattice's top), and
    only the tuples whose level the query's ``level`` dominates go on. It sits right on
    the stream, below every window, so ``[ROWS n]`` counts only visible tuples, and the
    engine applies it before the event-time watermark, so no invisible tuple moves time.
    """

    child_fields: ClassVar[tuple[str, ...]] = ("child",)
    child: Node
    stream: str
    relation: str
    level: Level  # the level the query runs at
    source: LevelSource | None  # None: every tuple is top
    id: str = field(default="", compare=False)

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.child.fields

    @property
    def label(self) -> str:
        origin = f"level {self.source}" if self.source is not None else "no level source: every tuple at the top"
        return f"Shepherd[{self.relation}: {origin}] visible at ≤ {self.level}"


# -- traversal --------------------------------------------------------------------------
# The recursions below are module functions, not closures that call themselves: such a closure
# is a reference cycle (function, cell, function), left for the cyclic collector at every call,
# and a network's driver walks plans hundreds of thousands of times.
def walk(node: Node) -> Iterator[Node]:
    """Every node, children before parents (each shared node once)."""
    return _walk(node, set())


def _walk(node: Node, seen: set[int]) -> Iterator[Node]:
    if id(node) in seen:
        return
    seen.add(id(node))
    for child in node.children():
        yield from _walk(child, seen)
    yield node


def transform(node: Node, fn: Callable[[Node], Node | None]) -> Node:
    """Rebuild bottom-up with memoization; ``fn`` returns a replacement or None."""
    return _transform(node, fn, {})


def _transform(node: Node, fn: Callable[[Node], Node | None], memo: dict[int, Node]) -> Node:
    if id(node) in memo:
        return memo[id(node)]
    children = tuple([_transform(c, fn, memo) for c in node.children()])
    rebuilt = node.with_children(children) if any(a is not b for a, b in zip(children, node.children())) else node
    result = fn(rebuilt) or rebuilt
    memo[id(node)] = result
    return result


def sources(node: Node) -> list[Source]:
    return [n for n in walk(node) if isinstance(n, Source)]


def render_tree(node: Node, indent: str = "") -> str:
    """Indented text of the graph, root first (explain output)."""
    lines = [f"{indent}{node.label}" + (f"   #{node.id}" if node.id else "")]
    for child in node.children():
        lines.append(render_tree(child, indent + "  "))
    return "\n".join(lines)
