"""Independent test oracle for streamwarden.

It computes, with plain loops over Python lists of tuples, what the authorized
answer of a continuous query must be according to docs/semantics.md (and
Carminati, Ferrari, Cao, Tan, TISSEC 2010, Definitions 4.1-5.4, Algorithm 1).
It applies the definitions directly (beta of Definition 4.3: filter, then
project); it never rewrites queries and imports nothing from ``streamwarden``.

Predicates are nested tuples::

    ("cmp", left, op, right)      op in = <> < <= > >=
    ("and", p, q) | ("or", p, q) | ("not", p) | ("true",)

Operands::

    ("attr", "Stream.attr")       attribute (unqualified allowed when unambiguous)
    ("const", value)              int | float | str | bool | datetime
    ("self", "attr")              user profile value
    ("action", "start"|"end"|"target", "name")
    ("arith", op, left, right)    op in + - * /   (numbers only)

Values follow SQL three-valued logic; ``None`` is NULL.  Every result row is a
dict of the output columns plus ``_policies`` (sorted policy ids) and
``_kind`` ("read", "agg:<policy id>" or "join").
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from fractions import Fraction

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TRUE = ("true",)

# Implication ("p's condition implies the query predicate") is decided over every
# value Spark can hold, NULL included (a record may omit an attribute, an action may
# not have started): issue 11, class 1.  False = non-NULL values only (textbook logic).
IMPLICATION_INCLUDES_NULL = True

# When a rule asks whether a policy *grants* an attribute (read-path
# deployment, Pol_agg, Pol_join), `ts` is treated like any other attribute.
# (Masking always keeps `ts`; that is separate.)  False = ts is always granted.
TS_NEEDS_GRANT = True


# --------------------------------------------------------------------------
# Catalog data model
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class OAction:
    start: datetime | None
    end: datetime | None
    target: float | None


@dataclass(frozen=True)
class OPolicy:
    id: str
    subject: str
    streams: tuple[str, ...]
    attributes: tuple[str, ...] | str  # "*" or unqualified names
    where: tuple | None
    privilege: str  # read|min|max|count|avg|sum
    time: tuple | None = None  # (begin, end): datetime or operand
    window: tuple[float, float] | None = None  # (min size s, min offset s)
    group_by: tuple[str, ...] = ()  # inference control: the attributes a query may group by
    min_group: int | None = None  # inference control: rows over fewer tuples are withheld


@dataclass(frozen=True)
class OCatalog:
    inherits: dict[str, tuple[str, ...]]
    users: dict[str, tuple[tuple[str, ...], dict]]
    actions: dict[str, OAction]
    policies: tuple[OPolicy, ...]


# --------------------------------------------------------------------------
# Values: +infinity, typing, three-valued logic
# --------------------------------------------------------------------------
class _PlusInfinity:
    """end(x) of a started action without an end: above every other value."""

    def __eq__(self, other):
        return isinstance(other, _PlusInfinity)

    def __ne__(self, other):
        return not isinstance(other, _PlusInfinity)

    def __lt__(self, other):
        return False

    def __le__(self, other):
        return isinstance(other, _PlusInfinity)

    def __gt__(self, other):
        return not isinstance(other, _PlusInfinity)

    def __ge__(self, other):
        return True

    def __hash__(self):
        return hash("+infinity")

    def __repr__(self):
        return "+infinity"


INF = _PlusInfinity()


def _utc(value):
    """Naive datetimes are read as UTC; aware ones are converted to UTC."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    return value


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, Fraction)):
        return "num"
    if isinstance(value, str):
        return "str"
    if isinstance(value, datetime):
        return "time"
    if isinstance(value, _PlusInfinity):
        return "inf"
    raise TypeError(f"unsupported value {value!r}")


def _compare(left, op, right):
    """SQL comparison: NULL if either side is NULL."""
    if left is None or right is None:
        return None
    kl, kr = _kind(left), _kind(right)
    if kl != kr and "inf" not in (kl, kr):
        raise TypeError(f"cannot compare {left!r} {op} {right!r}")
    if op == "=":
        return left == right
    if op == "<>":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    raise ValueError(f"unknown comparison operator {op!r}")


def _arith(op, left, right):
    """SQL arithmetic on numbers: NULL if either side is NULL; x/0 is NULL."""
    if left is None or right is None:
        return None
    if _kind(left) != "num" or _kind(right) != "num":
        raise TypeError(f"arithmetic only on numbers: {left!r} {op} {right!r}")
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "/":
        return None if right == 0 else left / right
    raise ValueError(f"unknown arithmetic operator {op!r}")


def _and(a, b):  # Kleene
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a, b):  # Kleene
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not(a):
    return None if a is None else (not a)


# --------------------------------------------------------------------------
# Evaluation.  `get(operand)` returns the value of an ("attr", "S.a") or
# ("action", fn, name) operand.  Predicates must be resolved (see _resolve).
# --------------------------------------------------------------------------
def _value(operand, get):
    tag = operand[0]
    if tag == "const":
        return _utc(operand[1])
    if tag in ("attr", "action"):
        return get(operand)
    if tag == "arith":
        return _arith(operand[1], _value(operand[2], get), _value(operand[3], get))
    raise ValueError(f"unresolved operand {operand!r}")


def evaluate(pred, get):
    """TRUE / FALSE / None(NULL) of a resolved predicate."""
    tag = pred[0]
    if tag == "true":
        return True
    if tag == "cmp":
        return _compare(_value(pred[1], get), pred[2], _value(pred[3], get))
    if tag == "and":
        return _and(evaluate(pred[1], get), evaluate(pred[2], get))
    if tag == "or":
        return _or(evaluate(pred[1], get), evaluate(pred[2], get))
    if tag == "not":
        return _not(evaluate(pred[1], get))
    raise ValueError(f"unknown predicate {pred!r}")


def action_value(cat: OCatalog, fn: str, name: str):
    """start/end/target of an action now.  Not started (or unknown) -> NULL."""
    action = cat.actions.get(name)
    if action is None or action.start is None:
        return None
    if fn == "start":
        return _utc(action.start)
    if fn == "end":
        return INF if action.end is None else _utc(action.end)
    if fn == "target":
        return action.target
    raise ValueError(f"unknown action function {fn!r}")


def _getter(cat: OCatalog, env: dict[str, dict]):
    """Operand values for tuples env = {stream: tuple dict}."""

    def get(operand):
        if operand[0] == "attr":
            stream, attr = operand[1].split(".", 1)
            return _utc(env[stream][attr])
        return action_value(cat, operand[1], operand[2])

    return get


def _holds(cat, pred, env) -> bool:
    return evaluate(pred, _getter(cat, env)) is True


# --------------------------------------------------------------------------
# Resolution: substitute self.X, qualify attribute names
# --------------------------------------------------------------------------
class MissingProfileValue(Exception):
    """self.X used but the user's profile has no X."""


def _qualify(name: str, streams, schemas) -> str:
    if "." in name:
        stream = name.split(".", 1)[0]
        if stream not in streams:
            raise ValueError(f"attribute {name!r} is not on streams {streams}")
        return name
    if len(streams) == 1:
        return f"{streams[0]}.{name}"
    owners = [s for s in streams if name in (schemas or {}).get(s, ())]
    if len(owners) != 1:
        raise ValueError(f"cannot qualify attribute {name!r} over {streams}")
    return f"{owners[0]}.{name}"


def _resolve_operand(op, streams, profile, schemas):
    tag = op[0]
    if tag == "attr":
        return ("attr", _qualify(op[1], streams, schemas))
    if tag == "self":
        if op[1] not in profile:
            raise MissingProfileValue(op[1])
        return ("const", profile[op[1]])
    if tag == "const":
        return ("const", _utc(op[1]))
    if tag == "action":
        return op
    if tag == "arith":
        return ("arith", op[1], _resolve_operand(op[2], streams, profile, schemas),
                _resolve_operand(op[3], streams, profile, schemas))
    raise ValueError(f"unknown operand {op!r}")


def _resolve(pred, streams, profile, schemas=None):
    if pred is None:
        return TRUE
    tag = pred[0]
    if tag == "true":
        return TRUE
    if tag == "cmp":
        return ("cmp", _resolve_operand(pred[1], streams, profile, schemas), pred[2],
                _resolve_operand(pred[3], streams, profile, schemas))
    if tag in ("and", "or"):
        return (tag, _resolve(pred[1], streams, profile, schemas),
                _resolve(pred[2], streams, profile, schemas))
    if tag == "not":
        return ("not", _resolve(pred[1], streams, profile, schemas))
    raise ValueError(f"unknown predicate {pred!r}")


def _resolve_query(pred, streams, cat, user, schemas=None):
    try:
        return _resolve(pred, streams, _profile(cat, user), schemas)
    except MissingProfileValue as e:
        raise ValueError(f"query uses self.{e} but {user} has no such profile value") from e


def _as_operand(bound):
    return bound if isinstance(bound, tuple) else ("const", bound)


def policy_condition(p: OPolicy, profile: dict, schemas=None):
    """p.where AND (ts >= begin AND ts <= end) for the ts of each of p's
    streams, resolved.  Raises MissingProfileValue (policy does not apply)."""
    cond = p.where if p.where is not None else TRUE
    if p.time is not None:
        begin, end = p.time
        for stream in p.streams:
            ts = ("attr", f"{stream}.ts")
            if begin is not None:
                cond = ("and", cond, ("cmp", ts, ">=", _as_operand(begin)))
            if end is not None:
                cond = ("and", cond, ("cmp", ts, "<=", _as_operand(end)))
    return _resolve(cond, tuple(p.streams), profile, schemas)


# --------------------------------------------------------------------------
# Users, roles, policies
# --------------------------------------------------------------------------
def effective_roles(cat: OCatalog, user: str) -> frozenset[str]:
    """The user's roles plus every role they inherit, transitively."""
    if user not in cat.users:
        return frozenset()
    seen: set[str] = set()
    todo = list(cat.users[user][0])
    while todo:
        role = todo.pop()
        if role not in seen:
            seen.add(role)
            todo.extend(cat.inherits.get(role, ()))
    return frozenset(seen)


def _profile(cat: OCatalog, user: str) -> dict:
    return cat.users[user][1] if user in cat.users else {}


def applicable_policies(cat: OCatalog, user: str, keep=lambda p: True, schemas=None):
    """[(policy, resolved condition)] of the policies p with keep(p) that
    apply to the user: subject among the effective roles, and every self.X
    resolvable."""
    roles = effective_roles(cat, user)
    profile = _profile(cat, user)
    out = []
    for p in cat.policies:
        if p.subject not in roles or not keep(p):
            continue
        try:
            cond = policy_condition(p, profile, schemas)
        except MissingProfileValue:
            continue  # fail closed
        out.append((p, cond))
    return out


def read_policies(cat: OCatalog, user: str, stream: str):
    """Pol(S, u): applicable read policies whose streams is exactly [S]."""
    return applicable_policies(
        cat, user, lambda p: p.privilege.lower() == "read" and tuple(p.streams) == (stream,))


def grants(p: OPolicy, attr: str) -> bool:
    """Does p's ATTs grant the unqualified attribute (for rule checks)?"""
    if attr == "ts" and not TS_NEEDS_GRANT:
        return True
    atts = p.attributes
    return atts == "*" or "*" in atts or attr in atts


def _masks_in(p: OPolicy, attr: str) -> bool:
    """Does p make the attribute visible in a masked tuple? (ts always is.)"""
    atts = p.attributes
    return attr == "ts" or atts == "*" or "*" in atts or attr in atts


def _mask(t: dict, auth: list[OPolicy]) -> dict:
    return {a: (v if any(_masks_in(p, a) for p in auth) else None) for a, v in t.items()}


def _read_view(cat, stream, t, pol):
    """(auth(t), masked t) for one tuple under the merged read view."""
    auth = [p for p, cond in pol if _holds(cat, cond, {stream: t})]
    return auth, _mask(t, auth)


def _ids(policies) -> list[str]:
    return sorted({p.id for p in policies})


# --------------------------------------------------------------------------
# Implication: for every value of every attribute and action function,
# p TRUE  =>  q TRUE.
#
# Variables are the ("attr", ..) and ("action", ..) operands.  Variables that
# occur in the same comparison form a class; the class's constants are those
# occurring in its comparisons.  When comparisons only relate variables to
# constants and to each other, the truth of p and q depends only on the
# *order type* of the class's variables and constants (which is equal to /
# below / above which).  We enumerate every order type, variable after
# variable: a variable is tried at each point of S (its class's constants and
# the values already given to its class's variables), at the midpoint of each
# gap of S, and one below / above S.  This is exact over a dense order (the
# reals).  Strings and datetimes are only ordered, so their constants are
# first replaced by their ranks (a non-constant rank stands for a fresh
# string or time; nothing sorts below "").  Booleans range over {False,
# True}.  Classes with arithmetic also try every point shifted by +-each
# constant of the class and +-1 (a thorough grid search, but not a proof).
# The search is depth-first; an unassigned variable reads as NULL.  Kleene
# logic is monotone in NULL -> value, so on a partial assignment a FALSE p
# or a TRUE q prunes, and TRUE p with FALSE q is already a counterexample.
# --------------------------------------------------------------------------
def _operands(pred):
    """All leaf operands of a predicate, in order (arith expanded)."""
    out = []

    def walk_operand(op):
        if op[0] == "arith":
            walk_operand(op[2])
            walk_operand(op[3])
        else:
            out.append(op)

    def walk(p):
        if p[0] == "cmp":
            walk_operand(p[1])
            walk_operand(p[3])
        elif p[0] in ("and", "or"):
            walk(p[1])
            walk(p[2])
        elif p[0] == "not":
            walk(p[1])

    walk(pred)
    return out


def _atoms(pred):
    if pred[0] == "cmp":
        return [pred]
    if pred[0] in ("and", "or"):
        return _atoms(pred[1]) + _atoms(pred[2])
    if pred[0] == "not":
        return _atoms(pred[1])
    return []


def _is_var(operand) -> bool:
    return operand[0] in ("attr", "action")


def _map_constants(pred, ranks):
    def op(o):
        if o[0] == "const" and o[1] is not None and _kind(o[1]) in ("str", "time"):
            return ("const", ranks[(_kind(o[1]), o[1])])
        if o[0] == "arith":
            return ("arith", o[1], op(o[2]), op(o[3]))
        return o

    tag = pred[0]
    if tag == "cmp":
        return ("cmp", op(pred[1]), pred[2], op(pred[3]))
    if tag in ("and", "or"):
        return (tag, _map_constants(pred[1], ranks), _map_constants(pred[2], ranks))
    if tag == "not":
        return ("not", _map_constants(pred[1], ranks))
    return pred


def _positions(points) -> list:
    """One value at each point, inside each gap, below and above."""
    s = sorted(set(points))
    if not s:
        return [Fraction(0)]
    gaps = [(a + b) / 2 for a, b in zip(s, s[1:])]
    return s + gaps + [s[0] - 1, s[-1] + 1]


# Qualified attributes ("S.a") typed int in the catalog under test: they range over the
# integers, so `a > 1` implies `a >= 2` (set by the property tests from their schemas).
INTEGER_ATTRIBUTES: set[str] = set()


def _integer_positions(points) -> list:
    """Every point and its integer neighbours: exact for integer-valued variables."""
    s = {Fraction(int(x)) if Fraction(x).denominator == 1 else Fraction(x) for x in points}
    if not s:
        return [Fraction(0)]
    near = {x + d for x in s for d in (-1, 1)}
    return sorted({x for x in s | near if x.denominator == 1} | {Fraction(int(x // 1)) for x in s})


def _number(value, ranks):
    kind = _kind(value)
    return ranks[(kind, value)] if kind in ("str", "time") else Fraction(value)


def implies(p, q) -> bool:
    """Whether resolved predicate p implies resolved predicate q."""
    # 1. classes of variables (union-find), with their constants' kinds
    parent: dict = {}

    def find(v):
        while parent[v] != v:
            v = parent[v]
        return v

    atoms = _atoms(p) + _atoms(q)
    for atom in atoms:
        vs = [o for o in _operands(atom) if _is_var(o)]
        for v in vs:
            parent.setdefault(v, v)
        for v in vs[1:]:
            parent[find(v)] = find(vs[0])
    constants, shifts, kinds = defaultdict(set), defaultdict(set), defaultdict(set)
    with_arithmetic = set()
    for atom in atoms:
        ops = _operands(atom)
        vs = [o for o in ops if _is_var(o)]
        if not vs:
            continue
        root = find(vs[0])
        for o in ops:
            if o[0] == "const" and o[1] is not None:
                constants[root].add(o[1])
                kinds[root].add(_kind(o[1]))
        if any(o[0] == "arith" for o in (atom[1], atom[3])):
            with_arithmetic.add(root)
    for root in with_arithmetic:
        shifts[root] = {Fraction(c) for c in constants[root] if _kind(c) == "num"} | {1}
    for ks in kinds.values():
        if len(ks) > 1:
            raise TypeError(f"a class of variables is compared with values of kinds {ks}")

    # 2. replace str / datetime constants by their ranks (order-preserving)
    all_constants = {o[1] for o in _operands(p) + _operands(q)
                     if o[0] == "const" and o[1] is not None}
    ranks = {}
    for kind in ("str", "time"):
        values = sorted(c for c in all_constants if _kind(c) == kind)
        ranks.update({(kind, v): Fraction(i) for i, v in enumerate(values)})
    p, q = _map_constants(p, ranks), _map_constants(q, ranks)

    def candidates(v):
        root = find(v)
        if kinds[root] == {"bool"}:
            values = [False, True]
        else:
            points = {_number(c, ranks) for c in constants[root]}
            points |= {assignment[w] for w in assignment if find(w) == root and assignment[w] is not None}
            # arithmetic (a grid, not a proof): also every point shifted by
            # every constant of the class
            points |= {x + sign * d for x in list(points) for d in shifts[root] for sign in (1, -1)}
            integer = v[0] == "attr" and v[1] in INTEGER_ATTRIBUTES
            values = _integer_positions(points) if integer else _positions(points)
            if kinds[root] == {"str"} and "" in constants[root]:
                values = [x for x in values if x >= 0]  # nothing sorts below ""
        return ([None] if IMPLICATION_INCLUDES_NULL else []) + values

    # 3. depth-first search for an assignment with p TRUE and q not TRUE
    order = []
    for o in _operands(p) + _operands(q):  # p's variables first: prunes early
        if _is_var(o) and o not in order:
            order.append(o)
    assignment: dict = {}
    get = assignment.get  # unassigned -> None (unknown)

    def counterexample(i) -> bool:
        pv, qv = evaluate(p, get), evaluate(q, get)
        if pv is False or qv is True:
            return False
        if pv is True and qv is False:
            return True
        if i == len(order):
            return pv is True
        for value in candidates(order[i]):
            assignment[order[i]] = value
            if counterexample(i + 1):
                return True
        del assignment[order[i]]
        return False

    return not counterexample(0)


# --------------------------------------------------------------------------
# Selection / projection (Sec_Read, merged view)
# --------------------------------------------------------------------------
def select_rows(cat, user, stream, tuples, items, where, *, schema=None) -> list[dict]:
    """SELECT items FROM stream WHERE where, for user.

    items: [(unqualified attribute, output name)] or "*" (schema order, or
    the tuple's own keys when no schema is given)."""
    pol = read_policies(cat, user, stream)
    q = _resolve_query(where, (stream,), cat, user)
    rows = []
    for t in tuples:
        auth, masked = _read_view(cat, stream, t, pol)
        if not auth or not _holds(cat, q, {stream: masked}):
            continue
        if items == "*":
            cols = [(a, a) for a in (schema if schema is not None else list(t))]
        else:
            cols = items
        row = {out: masked[attr] for attr, out in cols}
        row["_policies"] = _ids(auth)
        row["_kind"] = "read"
        rows.append(row)
    return rows


# --------------------------------------------------------------------------
# Aggregation (Sec_Aggr + read path)
# --------------------------------------------------------------------------
def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _epoch_micros(ts: datetime) -> int:
    return (_utc(ts) - EPOCH) // timedelta(microseconds=1)


def _window_starts(ts: datetime, size_us: int, offset_us: int) -> list[int]:
    """Starts (us since epoch) of every window [k*offset, k*offset+size) holding ts."""
    t = _epoch_micros(ts)
    first = (t - size_us) // offset_us + 1  # smallest k with k*offset + size > t
    last = t // offset_us  # largest k with k*offset <= t
    return [k * offset_us for k in range(first, last + 1)]


def _aggregate(fn: str, attr, values: list[dict]):
    if fn == "count" and attr is None:
        return len(values)
    xs = [v[attr] for v in values if v[attr] is not None]
    if fn == "count":
        return len(xs)
    if not xs:
        return None
    if fn == "min":
        return min(xs)
    if fn == "max":
        return max(xs)
    total = sum(xs) if all(isinstance(x, int) for x in xs) else math.fsum(xs)
    if isinstance(total, int) and not -(2**63) <= total < 2**63:
        return None  # try_sum / try_avg: NULL on a 64-bit overflow
    if fn == "sum":
        return total
    if fn == "avg":
        return total / len(xs)
    raise ValueError(f"unknown aggregate {fn!r}")


def _window_rows(members, aggs, group_by, size_s, offset_s, computed, kind, min_group=1):
    """members: [(values dict, policy ids)].  One row per (window, group)
    with at least `min_group` members; aggregates not in `computed` are None."""
    size_us, offset_us = _micros(size_s), _micros(offset_s)
    if size_us <= 0 or offset_us <= 0:
        raise ValueError("window size and offset must be positive")
    groups = defaultdict(list)
    for values, ids in members:
        key = tuple(values[g] for g in group_by)
        for start in _window_starts(values["ts"], size_us, offset_us):
            groups[(start, key)].append((values, ids))
    rows = []
    for (start, key), group in groups.items():
        if len(group) < min_group:
            continue
        row = {
            "window_start": EPOCH + timedelta(microseconds=start),
            "window_end": EPOCH + timedelta(microseconds=start + size_us),
        }
        row.update(zip(group_by, key))
        for i, (fn, attr, out) in enumerate(aggs):
            row[out] = _aggregate(fn.lower(), attr, [v for v, _ in group]) if i in computed else None
        row["_policies"] = sorted(set().union(*(ids for _, ids in group)))
        row["_kind"] = kind
        rows.append(row)
    return rows


def _unqualified(name: str, stream: str) -> str:
    return name.split(".", 1)[1] if name.startswith(stream + ".") else name


def aggregate_rows(cat, user, stream, tuples, aggs, group_by, where, size_s, offset_s) -> list[dict]:
    """SELECT group_by, aggs FROM stream [RANGE size_s SLIDE offset_s]
    WHERE where GROUP BY group_by, for user.  aggs: [(fn, attr|None, out)]."""
    group_by = [_unqualified(g, stream) for g in group_by]
    aggs = [(fn.lower(), None if a is None else _unqualified(a, stream), out) for fn, a, out in aggs]
    q = _resolve_query(where, (stream,), cat, user)
    rows = []

    # 1. read path (AG_a): aggregate over the merged read view
    pol = read_policies(cat, user, stream)
    aggregated = {a for _, a, _ in aggs if a is not None}
    deployed = all(any(grants(p, a) for p, _ in pol) for a in aggregated)
    if deployed:
        members = []
        for t in tuples:
            auth, masked = _read_view(cat, stream, t, pol)
            if auth and _holds(cat, q, {stream: masked}):
                members.append((masked, {p.id for p in auth}))
        rows += _window_rows(members, aggs, group_by, size_s, offset_s,
                             set(range(len(aggs))), "read")

    # 2. aggregate path (AG_sa): one per aggregate policy in Pol_agg
    functions = {fn for fn, _, _ in aggs}
    candidates = applicable_policies(
        cat, user, lambda p: p.privilege.lower() in functions and tuple(p.streams) == (stream,))
    for p, cond in candidates:
        priv = p.privilege.lower()
        mine = {i for i, (fn, _, _) in enumerate(aggs) if fn == priv}
        if not all(aggs[i][1] is None or grants(p, aggs[i][1]) for i in mine):
            continue
        if not all(g in p.group_by for g in group_by):
            continue  # inference control: group only by what the policy lists
        if not implies(cond, q):
            continue
        size, offset = size_s, offset_s
        if p.window is not None:
            # inference control: windows snap up onto the policy's grid (multiples of its offset)
            grid = p.window[1] or p.window[0]
            size = math.ceil(max(size_s, p.window[0]) / grid) * grid
            offset = math.ceil(max(offset_s, grid) / grid) * grid
        members = [(t, {p.id}) for t in tuples
                   if _holds(cat, q, {stream: t}) and _holds(cat, cond, {stream: t})]
        rows += _window_rows(members, aggs, group_by, size, offset, mine, "agg:" + p.id, p.min_group or 1)
    return rows


# --------------------------------------------------------------------------
# Join of two streams (read path + Sec_Join)
# --------------------------------------------------------------------------
def _conjuncts(pred):
    if pred[0] == "and":
        return _conjuncts(pred[1]) + _conjuncts(pred[2])
    return [pred]


def _attrs_of(pred):
    """Qualified attribute names referenced by a resolved predicate."""
    return {o[1] for o in _operands(pred) if o[0] == "attr"}


def _streams_of(pred):
    return {name.split(".", 1)[0] for name in _attrs_of(pred)}


def _conjunction(preds):
    out = TRUE
    for c in preds:
        out = c if out == TRUE else ("and", out, c)
    return out


def _in_time(a: dict, b: dict, wa_s: float, wb_s: float) -> bool:
    """a.ts - wb <= b.ts <= a.ts + wa."""
    ta, tb = _epoch_micros(a["ts"]), _epoch_micros(b["ts"])
    return ta - _micros(wb_s) <= tb <= ta + _micros(wa_s)


def join_rows(cat, user, a_stream, a_tuples, wa_s, b_stream, b_tuples, wb_s, items, where) -> list[dict]:
    """SELECT items FROM A [RANGE wa], B [RANGE wb] WHERE where, for user.
    items: [("Stream.attr", output name)]."""
    streams = (a_stream, b_stream)
    schemas = {a_stream: set(a_tuples[0]) if a_tuples else set(),
               b_stream: set(b_tuples[0]) if b_tuples else set()}
    q = _resolve_query(where, streams, cat, user, schemas)
    cols = [(_qualify(name, streams, schemas).split(".", 1), out) for name, out in items]
    rows = []

    # 1. read path (AG_j): join of the two merged read views
    pol_a = read_policies(cat, user, a_stream)
    pol_b = read_policies(cat, user, b_stream)
    for a in a_tuples:
        auth_a, ma = _read_view(cat, a_stream, a, pol_a)
        if not auth_a:
            continue
        for b in b_tuples:
            auth_b, mb = _read_view(cat, b_stream, b, pol_b)
            if not auth_b or not _in_time(a, b, wa_s, wb_s):
                continue
            env = {a_stream: ma, b_stream: mb}
            if not _holds(cat, q, env):
                continue
            row = {out: env[s][attr] for (s, attr), out in cols}
            row["_policies"] = _ids(auth_a + auth_b)
            row["_kind"] = "read"
            rows.append(row)

    # 2. join-policy path (AG_sj): Pol_join
    conjuncts = _conjuncts(q)
    cross = _conjunction([c for c in conjuncts if _streams_of(c) == set(streams)])
    single_attrs = {name.split(".", 1)[1] for c in conjuncts if len(_streams_of(c)) == 1
                    for name in _attrs_of(c)}
    pol_join = []
    candidates = applicable_policies(
        cat, user, lambda p: p.privilege.lower() == "read" and set(p.streams) == set(streams),
        schemas)
    for p, cond in candidates:
        if not all(grants(p, attr) for attr in single_attrs):
            continue  # inference prevention
        if implies(cond, cross):
            pol_join.append((p, cond))
    if not pol_join:
        return rows
    for a in a_tuples:
        for b in b_tuples:
            env = {a_stream: a, b_stream: b}
            if not _in_time(a, b, wa_s, wb_s) or not _holds(cat, q, env):
                continue
            holding = [p for p, cond in pol_join if _holds(cat, cond, env)]
            if not holding:
                continue
            row = {out: (env[s][attr] if any(_masks_in(p, attr) for p in holding) else None)
                   for (s, attr), out in cols}
            row["_policies"] = _ids(holding)
            row["_kind"] = "join"
            rows.append(row)
    return rows
