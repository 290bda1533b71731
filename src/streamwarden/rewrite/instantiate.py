"""Instantiate a catalog policy for one user and one place in a query graph.

The catalog binds a policy's ``where`` over columns named ``<Stream>.<attr>``. Placing it
in a graph means: replacing ``self.<attr>`` by the user's profile value, adding the
general time constraint ``ts >= begin AND ts <= end``, and pointing stream names at the
relations (query aliases) of the graph. A policy that cannot be instantiated (the
profile lacks the attribute, or holds a value of the wrong type) does not apply: the
reason is returned, never an empty condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from streamwarden.catalog.model import Policy, StreamDef, TimeBound, User
from streamwarden.language.expressions import parse_timestamp
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import View


@dataclass(frozen=True)
class NotApplicable:
    policy_id: str
    reason: str


def instantiate(
    policy: Policy,
    user: User,
    relations: Mapping[str, str],
    streams: Mapping[str, StreamDef],
) -> View | NotApplicable:
    """The policy's view for ``user`` with stream names mapped to ``relations`` (stream -> relation)."""
    try:
        condition = substitute_profile(policy.where, user) if policy.where is not None else E.TRUE
    except _ProfileProblem as problem:
        return NotApplicable(policy.id, str(problem))
    condition = E.rename_relation(condition, dict(relations))
    if policy.time is not None:
        bounds = []
        for stream in policy.streams:
            ts = E.Column(relations[stream], "ts", "timestamp")
            bounds.append(E.Compare(">=", ts, time_bound(policy.time[0])))
            bounds.append(E.Compare("<=", ts, time_bound(policy.time[1])))
        condition = E.conjoin(E.conjuncts(condition) + bounds)
    if policy.attributes is None:
        attributes = None
    else:
        attributes = frozenset(
            (relations[s], a) for s in policy.streams for a in policy.attributes if streams[s].type_of(a)
        )
    return View(policy.id, condition, attributes)


def time_bound(bound: TimeBound) -> E.Expr:
    if bound.action is not None:
        return E.ActionValue(bound.action_kind or "start", bound.action)
    return E.Literal(bound.value, "timestamp")


class _ProfileProblem(Exception):
    pass


def substitute_profile(expr: E.Expr, user: User) -> E.Expr:
    """Replace ``self.<attr>`` by the user's profile value, typed like what it is compared to."""

    def value_for(ref: E.ProfileRef, dtype: str) -> E.Literal:
        if ref.attr not in user.profile:
            raise _ProfileProblem(f"user {user.name} has no profile attribute {ref.attr!r} for self.{ref.attr}")
        return coerce(user.profile[ref.attr], dtype, f"self.{ref.attr} of {user.name}")

    # Top-down, so a profile value takes the type of the attribute it is compared with.
    return _replace_in_comparisons(expr, value_for) if _has_profile(expr) else expr


def _has_profile(expr: E.Expr) -> bool:
    return any(isinstance(e, E.ProfileRef) for e in E.walk(expr))


def _replace_in_comparisons(expr: E.Expr, value_for) -> E.Expr:  # type: ignore[no-untyped-def]
    if isinstance(expr, E.Compare):
        left = value_for(expr.left, expr.right.dtype) if isinstance(expr.left, E.ProfileRef) else expr.left
        right = value_for(expr.right, left.dtype) if isinstance(expr.right, E.ProfileRef) else expr.right
        return E.Compare(expr.op, _replace_in_comparisons(left, value_for), _replace_in_comparisons(right, value_for))
    if isinstance(expr, E.ProfileRef):
        return value_for(expr, "unknown")
    children = tuple(_replace_in_comparisons(c, value_for) for c in expr.children())
    return expr.replace_children(children) if children != expr.children() else expr


def coerce(value: object, dtype: str, what: str) -> E.Literal:
    """A literal of ``dtype`` from a profile value, or a problem naming what is wrong."""
    try:
        if dtype in ("int", "long") and not isinstance(value, bool):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return E.Literal(int(value), dtype)  # type: ignore[call-overload]
        if dtype == "double" and not isinstance(value, bool):
            return E.Literal(float(value), "double")  # type: ignore[arg-type]
        if dtype == "string":
            return E.Literal(str(value), "string")
        if dtype == "boolean" and isinstance(value, bool):
            return E.Literal(value, "boolean")
        if dtype == "timestamp":
            return E.Literal(parse_timestamp(str(value)), "timestamp")
        if dtype in ("unknown", "null"):
            if isinstance(value, bool):
                return E.Literal(value, "boolean")
            if isinstance(value, int):
                return E.Literal(value, "long")
            if isinstance(value, float):
                return E.Literal(value, "double")
            return E.Literal(str(value), "string")
    except (TypeError, ValueError):
        pass
    raise _ProfileProblem(f"{what} is {value!r}, which is not a {dtype}")
