"""Query templates: many users' secured graphs as one plan and a table of their constants.

A thousand users under one policy template (``ward = self.ward``) asking one query template
(``value > c``) hold a thousand graphs that differ only in their constants. Sharing them
(AStream, CACQ: queries as data) means running the one plan those graphs have in common
over a *member table*, one row of constants per graph, instead of a thousand plans.
:func:`parameterize` finds that plan: each constant of a selection or a policy condition
becomes a :class:`~streamwarden.plan.expr.Param`, and the constants, in order, are the
member's row. Graphs with equal templates share; equality conjuncts on a parameter
(``ward = ?0``) are returned as *keys*, so an engine can find each tuple's members by a
hash lookup instead of testing every member.

A template is one stream, read through its Security Shield and level guard when it has
them, its secure read view, selections and the projection (what evaluates one tuple at a
time), optionally under one aggregate over a ``[RANGE]`` window. The shield's roles and
the level stay in the plan: members share a template only at one level and with one role
set. Joins, live action values and ``[ROWS n]`` keep their own plans (None).
An aggregate's members share its state when every constant is a key (:func:`lift_keys`):
the aggregate then runs once per key value, and each member reads its key's rows.

    >>> from streamwarden.plan.expr import Column, Compare, Literal
    >>> from streamwarden.plan.nodes import Filter, Project, Source
    >>> src = Source("S", "s", (("ts", "timestamp"), ("v", "double")))
    >>> q = Project(Filter(src, Compare(">", Column("s", "v", "double"), Literal(5, "int"))),
    ...             (("v", Column("s", "v", "double")),))
    >>> t = parameterize(q)
    >>> E.render(t.root.child.predicate), t.values
    ('S.v > ?0', (5,))
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streamwarden.plan import expr as E
from streamwarden.plan.hashing import stable_text
from streamwarden.language.ast import Window
from streamwarden.plan.nodes import (Aggregate, Filter, Join, LevelGuard, Node, Project, SecureView, Shield, Source,
                                     View, walk)

#: Literal types a template takes as parameters (a level or a time of day stays in the plan).
PARAMETER_TYPES = frozenset({"int", "long", "double", "string", "boolean", "timestamp"})
_SHAREABLE = (Source, SecureView, Filter, Project, Shield, LevelGuard)


@dataclass(frozen=True)
class Template:
    """A graph's shared plan (``root``, with :class:`~streamwarden.plan.expr.Param`), this graph's
    constants (``values``, by parameter index, with their ``types``), and the equality keys
    (``(stream attribute, parameter index)``) every row of the graph satisfies."""

    root: Node
    values: tuple[Any, ...]
    types: tuple[str, ...]
    keys: tuple[tuple[str, int], ...]

    @property
    def stream(self) -> str:
        return next(n.stream for n in walk(self.root) if isinstance(n, Source))

    @property
    def reading(self) -> tuple[Node, ...]:
        """How the stream is read, which the template's members share: its shield and level guard."""
        return tuple(n for n in walk(self.root) if isinstance(n, (Shield, LevelGuard)))

    @property
    def reading_key(self) -> str:
        """What :attr:`reading` depends on: the shield's roles and server policies, and the level
        (not where the rewriter placed the shield, which changes the cost only)."""
        parts: list[object] = []
        for node in self.reading:
            if isinstance(node, Shield):
                parts.append(("shield", node.key, node.roles, node.server, node.combine, node.grant_only))
            elif isinstance(node, LevelGuard):
                parts.append(("level", node.level, node.source))
        return stable_text(tuple(parts))

    @property
    def stateful(self) -> bool:
        """An aggregate over windows: its members share state, not only a pass over the tuples."""
        return isinstance(self.root, Aggregate)

    @property
    def key(self) -> str:
        """The template's identity: equal for graphs that share it, the same in every process."""
        return stable_text((self.root, self.types, self.keys))


def parameterize(root: Node) -> Template | None:
    """``root``'s template, or None when it is not a shape one shared plan can run (see the
    module docstring). Relations are renamed to their stream, so ``FROM S`` and ``FROM S AS x``
    share."""
    aggregate = root if isinstance(root, Aggregate) else None
    body = aggregate.child if aggregate is not None else root
    nodes = list(walk(body))
    found = [n for n in nodes if isinstance(n, Source)]
    if len(found) != 1 or not all(isinstance(n, _SHAREABLE) for n in nodes):
        return None
    if aggregate is None and found[0].window is not None:
        return None
    if aggregate is not None and not (_ranged(aggregate.window) and _ranged(found[0].window)):
        return None
    if aggregate is not None and any(E.action_refs(e) for e in aggregate.expressions()):
        return None
    # an aggregate policy's view (its window already snapped to the policy's grid, its
    # min_group on the aggregate) under the aggregate it authorizes; a join view never
    views = {"read", "aggregate"} if aggregate is not None else {"read"}
    if any(isinstance(n, SecureView) and n.kind not in views for n in nodes):
        return None
    if any(E.action_refs(e) for n in nodes for e in n.expressions()):
        return None
    source = found[0]
    values: list[Any] = []
    types: list[str] = []

    def constant(expr: E.Expr) -> E.Expr:
        def swap(node: E.Expr) -> E.Expr | None:
            if isinstance(node, E.Column) and node.relation == source.relation:
                return E.Column(source.stream, node.name, node.dtype)
            if isinstance(node, E.Literal) and node.value is not None and node.dtype in PARAMETER_TYPES:
                values.append(node.value)
                types.append(node.dtype)
                return E.Param(len(values) - 1, node.dtype)
            return None

        return E.transform(expr, swap)

    def rename(expr: E.Expr) -> E.Expr:
        return E.rename_relation(expr, {source.relation: source.stream})

    def rebuild(node: Node) -> Node:
        if isinstance(node, Source):
            return replace(node, relation=node.stream)
        child = rebuild(node.children()[0])
        if isinstance(node, Filter):
            return replace(node, child=child, predicate=constant(node.predicate))
        if isinstance(node, SecureView):
            views = tuple(View(v.policy_id, constant(v.condition), None if v.attributes is None else frozenset(
                (source.stream if r == source.relation else r, a) for r, a in v.attributes)) for v in node.views)
            return replace(node, child=child, views=views)
        if isinstance(node, Shield):  # its reason quotes the member's selectivity: an explanation, not the plan
            return replace(node, child=child, relation=source.stream, reason="")
        if isinstance(node, LevelGuard):
            return replace(node, child=child, relation=source.stream)
        assert isinstance(node, Project)
        return replace(node, child=child, items=tuple((name, rename(e)) for name, e in node.items))

    template = rebuild(body)
    if aggregate is not None:  # its expressions keep their constants: they are the template's, not a member's
        template = replace(aggregate, child=template, event_time=rename(aggregate.event_time),
                           group_by=tuple((name, rename(e)) for name, e in aggregate.group_by),
                           aggregates=tuple(replace(a, arg=None if a.arg is None else rename(a.arg))
                                            for a in aggregate.aggregates))
    return Template(template, tuple(values), tuple(types), _keys(template))


def why_not(root: Node) -> str:
    """Why :func:`parameterize` finds no template for ``root``, in a few words (for ``explain``)."""
    nodes = list(walk(root))
    if any(isinstance(n, Join) for n in nodes):
        return "it joins streams"
    windows = [w for n in nodes for w in (getattr(n, "window", None),) if w is not None]
    if any(w.kind == "rows" for w in windows):
        return "it counts a [ROWS n] window"
    if any(E.action_refs(e) for n in nodes for e in n.expressions()):
        return "it reads a live action value"
    if any(not _ranged(w) for w in windows):
        return "its window is not a [RANGE] window"
    return "its shape has no shared plan yet"


def _ranged(window: Window | None) -> bool:
    return window is not None and window.kind == "range" and window.size_seconds is not None


def lift_keys(template: Template) -> Node | None:
    """The template's plan without its key conjuncts (``ward = ?0``), when nothing else reads a
    constant; else None. Its rows are every member's rows at once: a row with key values
    ``v`` belongs to exactly the members whose constants are ``v`` (a NULL key to none). So
    an aggregate of it, grouped by the keys as well, computes each member's aggregate once
    per key value, however many members share that value.

        >>> from streamwarden.plan.expr import Column, Compare, Literal
        >>> from streamwarden.plan.nodes import Filter, Source
        >>> src = Source("S", "s", (("ts", "timestamp"), ("w", "string")))
        >>> t = parameterize(Filter(src, Compare("=", Column("s", "w", "string"), Literal("a", "string"))))
        >>> E.render(lift_keys(t).predicate), t.keys
        ('TRUE', (('w', 0),))
    """
    keyed = {index for _, index in template.keys}

    def without_keys(expr: E.Expr) -> E.Expr:
        return E.conjoin([c for c in E.conjuncts(expr) if (key := _key_of(c)) is None or key[1] not in keyed])

    def rebuild(node: Node) -> Node:
        if isinstance(node, Source):
            return node
        child = rebuild(node.children()[0])
        if isinstance(node, Filter):
            return replace(node, child=child, predicate=without_keys(node.predicate))
        if isinstance(node, SecureView) and len(node.views) == 1:
            view = node.views[0]
            return replace(node, child=child, views=(replace(view, condition=without_keys(view.condition)),))
        return replace(node, child=child)

    lifted = rebuild(template.root)
    if any(isinstance(e, E.Param) for n in walk(lifted) for x in n.expressions() for e in E.walk(x)):
        return None
    return lifted


def _key_of(conjunct: E.Expr) -> tuple[str, int] | None:
    """``(attribute, k)`` when ``conjunct`` is ``attribute = ?k`` (either way round, of one type)."""
    if isinstance(conjunct, E.Compare) and conjunct.op == "=":
        sides = (conjunct.left, conjunct.right)
        column = next((s for s in sides if isinstance(s, E.Column)), None)
        param = next((s for s in sides if isinstance(s, E.Param)), None)
        if column is not None and param is not None and column.dtype == param.dtype:
            return column.name, param.index
    return None


def _keys(root: Node) -> tuple[tuple[str, int], ...]:
    """Equality conjuncts ``attribute = ?k`` that every row of ``root`` satisfies: those of its
    selections, and of its secure view when it has one view (with several, a row passes when
    any holds, so no one view's conjunct is necessary)."""
    necessary: list[E.Expr] = []
    for node in walk(root):
        if isinstance(node, Filter):
            necessary += E.conjuncts(node.predicate)
        elif isinstance(node, SecureView) and len(node.views) == 1:
            necessary += E.conjuncts(node.views[0].condition)
    return tuple(sorted({key for conjunct in necessary if (key := _key_of(conjunct)) is not None}))


__all__ = ["PARAMETER_TYPES", "Template", "lift_keys", "parameterize", "why_not"]
