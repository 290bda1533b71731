"""The secure operators of Carminati et al. (section 5.1): Sec_Read, Sec_Join, Sec_Aggr.

Each operator selects the policies that apply (Pol, Pol_join, Pol_agg of Definitions
5.2–5.4), instantiates them for the user and returns the views to enforce, plus one
:class:`Decision` per policy it considered saying whether it applied and, if not, why
(``explain`` shows these to the user).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, TypeVar

from streamwarden.catalog.model import Catalog, Policy, User
from streamwarden.language.ast import Window
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import AggCall, Aggregate, Join, Source, View
from streamwarden.security.rewrite.implication import implies
from streamwarden.security.rewrite.instantiate import NotApplicable, instantiate


@dataclass(frozen=True)
class Obj:
    """The protection-object-like description of a stream in the graph (section 5.1)."""

    relations: tuple[tuple[str, str], ...]  # (relation, stream), in FROM order
    exps: tuple[E.Expr, ...]  # predicates of the σ and Join operators below

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(stream for _, stream in self.relations)

    @property
    def stream_key(self) -> tuple[str, ...]:
        """The streams as a sorted multiset, to compare with a policy's streams."""
        return tuple(sorted(self.streams))

    def relation_of(self) -> dict[str, str] | None:
        """stream -> relation, or None when a stream occurs twice (a self-join)."""
        mapping = {stream: relation for relation, stream in self.relations}
        return mapping if len(mapping) == len(self.relations) else None

    def union(self, other: "Obj", extra: tuple[E.Expr, ...]) -> "Obj":
        return Obj(self.relations + other.relations, self.exps + other.exps + extra)


@dataclass(frozen=True)
class Decision:
    """Whether a policy applied at an operator of the query, and why not."""

    policy_id: str
    operator: str
    applied: bool
    reason: str = ""


@dataclass
class Context:
    """The catalog and the user a query is rewritten for (their policies, computed once)."""

    catalog: Catalog
    user: User

    def __post_init__(self) -> None:
        self.policies: tuple[Policy, ...] = self.catalog.policies_for(self.user.name)


Accepted = TypeVar("Accepted")


def _decide(ctx: Context, operator: str,
            check: Callable[[Policy], "Accepted | str | None"]) -> tuple[list[Accepted], list[Decision]]:
    """Run ``check`` on each of the user's policies: None = not a candidate here, a string =
    the reason it does not apply, anything else = what the operator enforces for it."""
    accepted: list[Accepted] = []
    decisions: list[Decision] = []
    for policy in ctx.policies:
        outcome = check(policy)
        if outcome is None:
            continue
        if isinstance(outcome, str):
            decisions.append(Decision(policy.id, operator, False, outcome))
        else:
            accepted.append(outcome)
            decisions.append(Decision(policy.id, operator, True))
    return accepted, decisions


def _instantiated(ctx: Context, policy: Policy, relations: dict[str, str] | None, what: str) -> View | str:
    if relations is None:
        return f"{what} policies do not apply to a self-join"
    view = instantiate(policy, ctx.user, relations, ctx.catalog.streams)
    return view.reason if isinstance(view, NotApplicable) else view


def sec_read(ctx: Context, source: Source, operator: str) -> tuple[list[View], list[Decision]]:
    """Pol(S, u): read policies on exactly this stream (Definition 5.2)."""

    def check(policy: Policy) -> View | str | None:
        if policy.streams != (source.stream,):
            return None
        if policy.privilege != "read":
            return f"grants {policy.privilege}, not read: it can only authorize {policy.privilege.upper()} aggregates"
        return _instantiated(ctx, policy, {source.stream: source.relation}, "read")

    return _decide(ctx, operator, check)


def sec_join(ctx: Context, left: Obj, right: Obj, join: Join, operator: str) -> tuple[list[View], list[Decision]]:
    """Pol_join(S1, S2, u) (Definition 5.4): read policies over exactly the joined streams,
    whose condition implies the join predicate and which grant every attribute the
    selections below the join read (so those selections cannot leak, inference prevention)."""
    obj = left.union(right, ())
    below = frozenset((c.relation, c.name) for e in obj.exps for c in E.columns(e))
    wanted = obj.stream_key

    def check(policy: Policy) -> View | str | None:
        if len(policy.streams) != len(wanted) or tuple(sorted(policy.streams)) != wanted:
            return None
        if policy.privilege != "read":
            return f"grants {policy.privilege}, not read"
        view = _instantiated(ctx, policy, obj.relation_of(), "join")
        if isinstance(view, str):
            return view
        if not implies(view.condition, join.predicate):
            return f"its condition does not imply the join predicate {E.render(join.predicate)}"
        missing = sorted(f"{r}.{a}" for r, a in below if view.attributes is not None and (r, a) not in view.attributes)
        if missing:
            return f"the selections below the join read {', '.join(missing)}, which it does not grant"
        return view

    return _decide(ctx, operator, check)


@dataclass(frozen=True)
class AggregateGrant:
    """One policy's Sec_Aggr: its view, the aggregates it grants and the enlarged window."""

    view: View
    aggregates: tuple[AggCall, ...]
    window: Window
    min_group: int | None = None


def sec_aggr(ctx: Context, obj: Obj, agg: Aggregate, operator: str) -> tuple[list[AggregateGrant], list[Decision]]:
    """Pol_agg(S, u) (Definition 5.3): aggregate policies over exactly the aggregated
    streams, granting the aggregated attributes, whose condition implies every predicate
    of the query below the aggregate; windows are the policy's grid at or above the
    request. Beyond the paper, inference control (docs/semantics.md): aggregates of plain
    attributes only, grouping only by the policy's ``group_by``, windows on one grid,
    and rows over fewer than ``min_group`` tuples withheld."""
    functions = {a.func for a in agg.aggregates}
    wanted = conjoin_all(obj.exps)
    streams = tuple(sorted(set(obj.streams)))

    def check(policy: Policy) -> AggregateGrant | str | None:
        if policy.privilege == "read" or tuple(sorted(policy.streams)) != streams:
            return None
        if policy.privilege not in functions:
            asked = ", ".join(sorted(f.upper() for f in functions))
            return f"grants {policy.privilege.upper()}, the query asks for {asked}"
        view = _instantiated(ctx, policy, obj.relation_of(), "aggregate")
        if isinstance(view, str):
            return view
        view = _with_group_attributes(view, policy, obj, ctx.catalog)
        obstacle = _aggregate_obstacle(view, agg, wanted, policy)
        if obstacle:
            return obstacle
        granted = tuple(replace(a, granted=a.func == policy.privilege and _grants_all(view, a.arg)
                                and _plain_enough(a.arg, policy)) for a in agg.aggregates)
        if not any(a.granted for a in granted):
            mine = [a for a in agg.aggregates if a.func == policy.privilege]
            names = ", ".join(str(a) for a in mine)
            if any(_grants_all(view, a.arg) and not _plain_enough(a.arg, policy) for a in mine):
                return (f"{names} aggregates an expression, and it grants aggregates of plain attributes only "
                        "(inference control: several expressions of one attribute can solve for its values)")
            return f"does not grant the attributes of {names}"
        return AggregateGrant(view, granted, enlarged_window(agg.window, policy), policy.min_group)

    return _decide(ctx, operator, check)


def _aggregate_obstacle(view: View, agg: Aggregate, wanted: E.Expr, policy: Policy) -> str:
    if agg.window is None or agg.window.kind != "range":
        return "aggregate policies need a [RANGE size SLIDE offset] window to enforce their minimum window"
    ungrouped = [E.render(g) for _, g in agg.group_by
                 if not isinstance(g, E.Column) or g.name not in policy.group_by]
    if ungrouped:
        allowed = f"it allows grouping by {', '.join(policy.group_by)} only" if policy.group_by else \
            "it allows no grouping"
        return (f"the query groups by {', '.join(ungrouped)}: {allowed} (inference control: a group of an "
                "attribute granted only in aggregate form would show that attribute's values)")
    if not implies(view.condition, wanted):
        return (f"its condition {E.render(view.condition)} does not imply the query's predicates "
                f"{E.render(wanted)}: the aggregate would cover tuples outside the authorized view")
    return ""


def _grants_all(view: View, expr: E.Expr | None) -> bool:
    if expr is None:
        return True
    return all(view.attributes is None or (c.relation, c.name) in view.attributes for c in E.columns(expr))


def _with_group_attributes(view: View, policy: Policy, obj: Obj, catalog: Catalog) -> View:
    """The policy's view, also keeping its ``group_by`` attributes (in clear, per group)."""
    relations = obj.relation_of() or {}
    if view.attributes is None or not policy.group_by:
        return view
    extra = {(relations[s], a) for s in policy.streams if s in relations for a in policy.group_by
             if catalog.streams[s].type_of(a)}
    return replace(view, attributes=view.attributes | frozenset(extra))


def _plain_enough(arg: E.Expr | None, policy: Policy) -> bool:
    """COUNT(*) and aggregates of a plain attribute; expressions only where the policy says so."""
    return arg is None or isinstance(arg, E.Column) or policy.aggregate_args == "expressions"


def enlarged_window(window: Window | None, policy: Policy) -> Window:
    """Sec_Aggr's window: the policy's grid at or above the request.

    The paper takes max(requested, minimum) for size and offset; then windows of 1 h and
    1 h + 1 s both satisfy a 1 h minimum, and their difference is the tuples of one
    second. So the window snaps up to the policy's grid: size and slide become multiples
    of the policy's offset (at least its size and offset), and Spark aligns window starts
    to multiples of the slide. Every authorized window then starts and ends on the
    offset's grid, and no two differ by less than what the policy's own sliding windows
    already show.
    """
    assert window is not None and window.size_seconds is not None
    size = window.size_seconds
    slide = window.slide_seconds or size
    if policy.window is not None:
        least_size, grid = policy.window
        grid = grid or least_size
        size = _snap(max(size, least_size), grid)
        slide = _snap(max(slide, grid), grid)
    return Window("range", size, slide, span=window.span)


def _snap(seconds: float, grid: float) -> float:
    """The least multiple of ``grid`` at or above ``seconds`` (to the microsecond)."""
    grid_us = round(grid * 1_000_000)
    if grid_us <= 0:
        return seconds
    wanted = round(seconds * 1_000_000)
    return -(-wanted // grid_us) * grid_us / 1_000_000


def conjoin_all(exps: tuple[E.Expr, ...]) -> E.Expr:
    return E.conjoin([c for e in exps for c in E.conjuncts(e)])
