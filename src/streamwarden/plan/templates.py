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
from functools import cached_property
from typing import Any

from streamwarden.plan import expr as E
from streamwarden.plan.hashing import by_identity, stable_text
from streamwarden.language.ast import Window
from streamwarden.plan.nodes import (Aggregate, Filter, Join, LevelGuard, Node, Project, SecureView, Shield, Source,
                                     View, walk)

#: Literal types a template takes as parameters (a level or a time of day stays in the plan).
PARAMETER_TYPES = frozenset({"int", "long", "double", "string", "boolean", "timestamp"})
_SHAREABLE = (Source, SecureView, Filter, Project, Shield, LevelGuard)


@dataclass(frozen=True)
class Template:
    """A graph's shared plan (``root``, with :class:`~streamwarden.plan.expr.Param`), this graph's
    constants (``values``, by parameter index, with their ``types``), the equality keys
    (``(stream attribute, parameter index)``) and the numeric bounds every row of the graph
    satisfies."""

    root: Node
    values: tuple[Any, ...]
    types: tuple[str, ...]
    keys: tuple[tuple[str, int], ...]
    #: Range conjuncts ``attribute op ?k`` (op one of ``< <= > >=``, the attribute on the left)
    #: every row satisfies, read from the stream itself: what a range index may prune by.
    bounds: tuple[tuple[str, str, int], ...] = ()
    #: The keys whose conjunct reads the stream's own value, which nothing in the template can
    #: hide (:func:`_raw_keys`): only these may leave the plan and become a grouping
    #: (:func:`lift_keys`). The others still find a tuple's members by a hash join, since a
    #: hidden value is NULL and NULL equals no constant, but stay in the plan.
    raw_keys: tuple[tuple[str, int], ...] = ()

    @cached_property
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

    @cached_property
    def key(self) -> str:
        """The template's identity: equal for graphs that share it, the same in every process
        (written once per template: every member of a group asks at every micro-batch)."""
        return stable_text((self.root, self.types, self.keys))


@by_identity
def parameterize(root: Node) -> Template | None:
    """``root``'s template, or None when it is not a shape one shared plan can run (see the
    module docstring). Relations are renamed to their stream, so ``FROM S`` and ``FROM S AS x``
    share. Computed once per graph (by identity: the pipelines of one secured rewriting hold
    the same graphs)."""
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
    parameters = _Parameters(found[0])
    template = parameters.rebuild(body)
    if aggregate is not None:  # its expressions keep their constants: they are the template's, not a member's
        rename = parameters.rename
        template = replace(aggregate, child=template, event_time=rename(aggregate.event_time),
                           group_by=tuple((name, rename(e)) for name, e in aggregate.group_by),
                           aggregates=tuple(replace(a, arg=None if a.arg is None else rename(a.arg))
                                            for a in aggregate.aggregates))
    return Template(template, tuple(parameters.values), tuple(parameters.types), _keys(template), _bounds(template),
                    _raw_keys(template))


class _Parameters:
    """One graph's body rebuilt as its template: each constant a parameter (collected in
    ``values`` and ``types``, in order), the source's relation renamed to its stream. (A class,
    not closures calling themselves, which would leave a reference cycle at every call.)"""

    def __init__(self, source: Source):
        self.source = source
        self.values: list[Any] = []
        self.types: list[str] = []

    def swap(self, node: E.Expr) -> E.Expr | None:
        source = self.source
        if isinstance(node, E.Column) and node.relation == source.relation:
            return E.Column(source.stream, node.name, node.dtype)
        if isinstance(node, E.Literal) and node.value is not None and node.dtype in PARAMETER_TYPES:
            self.values.append(node.value)
            self.types.append(node.dtype)
            return E.Param(len(self.values) - 1, node.dtype)
        return None

    def constant(self, expr: E.Expr) -> E.Expr:
        if isinstance(expr, E.Literal):  # a policy's whole condition (TRUE: no WHERE) is the policy's, not a member's
            return expr
        return E.transform(expr, self.swap)

    def rename(self, expr: E.Expr) -> E.Expr:
        return E.rename_relation(expr, {self.source.relation: self.source.stream})

    def rebuild(self, node: Node) -> Node:
        if isinstance(node, Source):
            return replace(node, relation=node.stream)
        child = self.rebuild(node.children()[0])
        if isinstance(node, Filter):
            return replace(node, child=child, predicate=self.constant(node.predicate))
        if isinstance(node, SecureView):
            source = self.source
            views = tuple(View(v.policy_id, self.constant(v.condition), None if v.attributes is None else frozenset(
                (source.stream if r == source.relation else r, a) for r, a in v.attributes)) for v in node.views)
            return replace(node, child=child, views=views)
        if isinstance(node, Shield):  # its reason quotes the member's selectivity: an explanation, not the plan
            return replace(node, child=child, relation=self.source.stream, reason="")
        if isinstance(node, LevelGuard):
            return replace(node, child=child, relation=self.source.stream)
        assert isinstance(node, Project)
        return replace(node, child=child, items=tuple((name, self.rename(e)) for name, e in node.items))


def why_not(root: Node) -> str:
    """Why :func:`parameterize` finds no template for ``root``, in a few words (for ``explain``)."""
    nodes = list(walk(root))
    if any(isinstance(n, Join) for n in nodes):
        return "it joins streams"
    windows = [n.window for n in nodes if isinstance(n, (Source, Aggregate)) and n.window is not None]
    if any(w.kind == "rows" for w in windows):
        return "it counts a [ROWS n] window"
    if any(E.action_refs(e) for n in nodes for e in n.expressions()):
        return "it reads a live action value"
    if any(not _ranged(w) for w in windows):
        return "its window is not a [RANGE] window"
    return "its shape has no shared plan yet"


def _ranged(window: Window | None) -> bool:
    return window is not None and window.kind == "range" and window.size_seconds is not None


@by_identity
def lift_keys(template: Template) -> Node | None:
    """The template's plan without its key conjuncts (``ward = ?0``), when nothing else reads a
    constant and every key reads the stream's own value (:attr:`Template.raw_keys`); else None
    (once per template, by identity). Its rows are every member's rows at once: a row with key
    values ``v`` belongs to exactly the members whose constants are ``v`` (a NULL key to none).
    So an aggregate of it, grouped by the keys as well, computes each member's aggregate once
    per key value, however many members share that value. A key whose attribute a view or a
    shield may hide is not lifted: grouped by the stream's value, a member would receive the
    aggregate of the tuples whose hidden value equals her constant, which her own plan, seeing
    NULL there, never selects.

        >>> from streamwarden.plan.expr import Column, Compare, Literal
        >>> from streamwarden.plan.nodes import Filter, Source
        >>> src = Source("S", "s", (("ts", "timestamp"), ("w", "string")))
        >>> t = parameterize(Filter(src, Compare("=", Column("s", "w", "string"), Literal("a", "string"))))
        >>> E.render(lift_keys(t).predicate), t.keys
        ('TRUE', (('w', 0),))
    """
    lifted = _without_keys(template.root, frozenset(index for _, index in template.raw_keys))
    if any(isinstance(e, E.Param) for n in walk(lifted) for x in n.expressions() for e in E.walk(x)):
        return None
    return lifted


def _without_keys(node: Node, keyed: frozenset[int]) -> Node:
    """``node`` without the key conjuncts on parameters ``keyed`` (see :func:`lift_keys`)."""
    if isinstance(node, Source):
        return node
    child = _without_keys(node.children()[0], keyed)
    if isinstance(node, Filter):
        return replace(node, child=child, predicate=_drop_keys(node.predicate, keyed))
    if isinstance(node, SecureView) and len(node.views) == 1:
        view = node.views[0]
        return replace(node, child=child, views=(replace(view, condition=_drop_keys(view.condition, keyed)),))
    return replace(node, child=child)


def _drop_keys(expr: E.Expr, keyed: frozenset[int]) -> E.Expr:
    return E.conjoin([c for c in E.conjuncts(expr) if (key := _key_of(c)) is None or key[1] not in keyed])


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


def _raw_keys(root: Node) -> tuple[tuple[str, int], ...]:
    """The keys (:func:`_keys`) whose conjunct sees the stream's own value of its attribute for
    every row: the template reads the stream through no Security Shield (a provider's policy may
    hide any attribute but ``ts``, and a shield placed above the selections evaluates them again
    on the masked tuple), and between the conjunct and the stream there is no projection (which
    could give the name another value) and no secure view that might hide the attribute (each of
    its views grants it). A policy's own condition reads its view's input, so its keys are raw
    when nothing below the view hides them.

        >>> from streamwarden.plan.expr import Column, Compare, Literal
        >>> from streamwarden.plan.nodes import Filter, SecureView, Source, View
        >>> src = Source("S", "s", (("ts", "timestamp"), ("w", "string")))
        >>> ward = Compare("=", Column("s", "w", "string"), Literal("a", "string"))
        >>> hidden = SecureView(src, (View("p", Literal(True, "boolean"), frozenset({("s", "ts")})),), "read")
        >>> parameterize(Filter(hidden, ward)).raw_keys, parameterize(Filter(src, ward)).raw_keys
        ((), (('w', 0),))
    """
    if any(isinstance(n, Shield) for n in walk(root)):
        return ()
    raw: set[tuple[str, int]] = set()
    for node in walk(root):
        if isinstance(node, Filter):
            conjuncts = E.conjuncts(node.predicate)
        elif isinstance(node, SecureView) and len(node.views) == 1:
            conjuncts = E.conjuncts(node.views[0].condition)
        else:
            continue
        for conjunct in conjuncts:
            key = _key_of(conjunct)
            if key is not None and _unmasked(node.children()[0], key[0]):
                raw.add(key)
    return tuple(sorted(raw))


def _unmasked(node: Node, attribute: str) -> bool:
    """Whether every row of ``node`` holds the stream's own value of ``attribute``."""
    while not isinstance(node, Source):
        if isinstance(node, SecureView):
            stream = next(n.stream for n in walk(node) if isinstance(n, Source))
            if attribute != "ts" and not all(v.attributes is None or (stream, attribute) in v.attributes
                                             for v in node.views):  # ts is always kept
                return False
        elif not isinstance(node, (Filter, LevelGuard)):
            return False
        node = node.children()[0]
    return True


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NUMERIC = frozenset({"int", "long", "double"})


def _bound_of(conjunct: E.Expr, stream: str) -> tuple[str, str, int] | None:
    """``(attribute, op, k)`` when ``conjunct`` compares the stream's numeric attribute with a
    numeric ``?k`` by ``< <= > >=`` (written either way round: the op as seen from the
    attribute)."""
    if not (isinstance(conjunct, E.Compare) and conjunct.op in _FLIPPED):
        return None
    left, right, op = conjunct.left, conjunct.right, conjunct.op
    if isinstance(left, E.Param):
        left, right, op = right, left, _FLIPPED[op]
    if (isinstance(left, E.Column) and isinstance(right, E.Param) and left.relation == stream
            and left.dtype in _NUMERIC and right.dtype in _NUMERIC
            # Spark compares the two in their wider type; a long constant against a double
            # column would order as doubles, where two longs can be equal: not an index's order
            and not (right.dtype == "long" and left.dtype == "double")):
        return left.name, op, right.index
    return None


def _bounds(root: Node) -> tuple[tuple[str, str, int], ...]:
    """Range conjuncts of the selections that read the stream's own values: each selection
    whose way down to the source passes only selections, secure views (which keep a value or
    make it NULL, and NULL passes no comparison), a shield and a level guard; no projection,
    which could give a name another value."""
    stream = next(n.stream for n in walk(root) if isinstance(n, Source))
    found: set[tuple[str, str, int]] = set()
    for node in walk(root):
        if not isinstance(node, Filter):
            continue
        below: Node = node.child
        while isinstance(below, (Filter, SecureView, Shield, LevelGuard)):
            below = below.children()[0]
        if isinstance(below, Source):
            found |= {bound for conjunct in E.conjuncts(node.predicate)
                      if (bound := _bound_of(conjunct, stream)) is not None}
    return tuple(sorted(found))


__all__ = ["PARAMETER_TYPES", "Template", "lift_keys", "parameterize", "why_not"]
