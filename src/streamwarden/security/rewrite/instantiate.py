"""Instantiate a catalog policy for one user and one place in a query graph.

The catalog binds a policy's ``where`` over columns named ``<Stream>.<attr>``. Placing it
in a graph means: replacing ``self.<attr>`` by the user's profile value, adding the
general time constraint ``ts >= begin AND ts <= end``, and pointing stream names at the
relations (query aliases) of the graph. A policy that cannot be instantiated (the
profile lacks the attribute, or holds a value of the wrong type) does not apply: the
reason is returned, never an empty condition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

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
        bounds: list[E.Expr] = []
        for stream in policy.streams:
            ts = E.Column(relations[stream], "ts", "timestamp")
            bounds.append(E.Compare(">=", ts, time_bound(policy.time[0])))
            bounds.append(E.Compare("<=", ts, time_bound(policy.time[1])))
        condition = E.conjoin(E.conjuncts(condition) + bounds)
    if policy.attributes is None:
        attributes = None
    else:
        attributes = frozenset(
            (relations[s], a) for s in policy.streams for a in granted_attributes(policy, s, streams) or ()
        )
    return View(policy.id, condition, attributes)


def granted_attributes(policy: Policy, stream: str, streams: Mapping[str, StreamDef]) -> frozenset[str] | None:
    """The attributes of ``stream`` that ``policy`` grants (None: all of them, ``*``).

    A bare name in the policy's ATTs grants that attribute of every one of its streams that
    has it; a qualified one (``Position.Pos``, as the loader keeps it) grants it on that
    stream only. Every reader of :attr:`Policy.attributes` that asks "does this policy grant
    attribute a of stream s" should ask here, so that a qualified grant never widens.

        >>> from streamwarden.catalog.loader import load_catalog_text
        >>> cat = load_catalog_text('''
        ... streams:
        ...   P: {schema: {ts: timestamp, SID: int, Pos: double}}
        ...   H: {schema: {ts: timestamp, SID: int, Heart: int}}
        ... roles: {R: {}}
        ... policies: [{id: j, subject: R, streams: [P, H], attributes: [P.SID, Heart], privilege: read}]
        ... ''')
        >>> p = cat.policies[0]
        >>> sorted(granted_attributes(p, "P", cat.streams)), sorted(granted_attributes(p, "H", cat.streams))
        (['SID'], ['Heart'])
    """
    if policy.attributes is None:
        return None
    definition = streams[stream]
    granted = set()
    for name in policy.attributes:
        qualifier, dot, bare = name.partition(".")
        if dot and qualifier in policy.streams:
            if qualifier == stream and definition.type_of(bare):
                granted.add(bare)
        elif definition.type_of(name):
            granted.add(name)
    return frozenset(granted)


def time_bound(bound: TimeBound) -> E.Expr:
    if bound.action is not None:
        return E.ActionValue(bound.action_kind or "start", bound.action)
    return E.Literal(bound.value, "timestamp")


class _ProfileProblem(Exception):
    pass


def substitute_profile(expr: E.Expr, user: User) -> E.Expr:
    """Replace ``self.<attr>`` by the user's profile value, typed like what it is compared to."""

    def value_for(ref: E.ProfileRef, dtype: str) -> E.Literal:
        # A missing or null (YAML ``~``/``null``) value: the policy does not apply. It never
        # becomes a literal (str(None) is 'None', which a tuple could match).
        if user.profile.get(ref.attr) is None:
            state = "has no" if ref.attr not in user.profile else "has a null"
            raise _ProfileProblem(f"user {user.name} {state} profile attribute {ref.attr!r} for self.{ref.attr}")
        return coerce(user.profile[ref.attr], dtype, f"self.{ref.attr} of {user.name}")

    # Top-down, so a profile value takes the type of the attribute it is compared with.
    return _replace_in_comparisons(expr, value_for) if _has_profile(expr) else expr


def _has_profile(expr: E.Expr) -> bool:
    return any(isinstance(e, E.ProfileRef) for e in E.walk(expr))


def _replace_in_comparisons(expr: E.Expr, value_for: Callable[[E.ProfileRef, str], E.Literal]) -> E.Expr:
    if isinstance(expr, E.Compare):
        left = value_for(expr.left, expr.right.dtype) if isinstance(expr.left, E.ProfileRef) else expr.left
        right = value_for(expr.right, left.dtype) if isinstance(expr.right, E.ProfileRef) else expr.right
        return E.Compare(expr.op, _replace_in_comparisons(left, value_for), _replace_in_comparisons(right, value_for))
    if isinstance(expr, E.ProfileRef):
        return value_for(expr, "unknown")
    children = tuple(_replace_in_comparisons(c, value_for) for c in expr.children())
    return expr.replace_children(children) if children != expr.children() else expr


_INT = 2**31
_LONG = 2**63
#: The YAML and JSON values int() and float() read (the others raise TypeError there).
_NUMBER_LIKE = (int, float, str, bytes)


def coerce(value: object, dtype: str, what: str) -> E.Literal:
    """A literal of ``dtype`` from a profile value, or a problem naming what is wrong.

    None (a null or missing profile value) is always a problem, never the text 'None'; an
    integer beyond a long or a number no double holds is one too, so it cannot reach Spark.

        >>> coerce(None, "string", "self.Platoon of paul")
        Traceback (most recent call last):
        streamwarden.security.rewrite.instantiate._ProfileProblem: self.Platoon of paul is null, which is not a string
    """
    if value is None or isinstance(value, (list, tuple, dict, set)):
        raise _ProfileProblem(f"{what} is {'null' if value is None else repr(value)}, which is not a {dtype}")
    try:
        if dtype in ("int", "long") and isinstance(value, _NUMBER_LIKE) and not isinstance(value, bool):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            number = int(value)
            if not -_LONG <= number < _LONG:
                raise ValueError
            # Compared with an int column, a value beyond 32 bits is a long literal, as Spark types it.
            return E.Literal(number, dtype if dtype == "long" or -_INT <= number < _INT else "long")
        if dtype == "double" and isinstance(value, _NUMBER_LIKE) and not isinstance(value, bool):
            real = float(value)
            if math.isnan(real) or math.isinf(real):
                raise ValueError
            return E.Literal(real, "double")
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
                return coerce(value, "long", what)
            if isinstance(value, float):
                return coerce(value, "double", what)
            return E.Literal(str(value), "string")
    except (TypeError, ValueError, OverflowError):
        pass
    raise _ProfileProblem(f"{what} is {value!r}, which is not a {dtype}")
