"""Independent oracle for security punctuations (issue 3).

Written from the contract (Nehme, Rundensteiner, Bertino, sections 4-5, as the issue
states it), with plain loops over Python lists.  It imports nothing from
``streamwarden``; the only thing it borrows is the foundation oracle's window test
(``oracle._in_time``) for SCJoin pairing.

Records are the JSON-lines dicts a provider sends: an SP has ``"kind": "sp"``, anything
without ``kind`` is a tuple.  Timestamps are ISO-8601 strings (or datetimes).

Shield semantics, per stream (per provider value with ``punctuated_by``), in arrival order:

* an SP with the current policy's ts joins it (same sn replaces); a newer ts starts a new
  current policy; an SP older than the newest policy ts ever seen is discarded; with no
  current policy, an SP not older than the newest ts seen starts a new current policy;
* at a tuple, csn = the largest k with SPs 1..k all present (recomputed after every
  sp-batch, i.e. always the function of the SPs the policy holds at that moment);
* a tuple without sp_ts/sp_csn is denied (policy kept); no current policy -> denied;
  (sp_ts, sp_csn) != (policy ts, csn) -> denied and the policy dropped; csn = 0 -> denied;
* otherwise the complete policy P = its SPs with sn <= csn governs the tuple.

Access: attribute a of tuple t is accessible under a set of SPs when some positive SP
matches (stream, key value, a) and one of the user's effective roles, and no negative one
does.  Server policies S combine (intersect: both; union: either) unless an SP of P is
immutable; a stream without server policies uses P alone.  A tuple is delivered when some
attribute other than ts is accessible; inaccessible attributes are NULL (``None``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from typing import Iterable

UTC = timezone.utc


# --------------------------------------------------------------------------
# Values and patterns
# --------------------------------------------------------------------------
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def as_number(value):
    """The value as an exact number when it reads as one, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        from decimal import Decimal

        return Fraction(Decimal(value.strip()))
    return None


def as_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip() if isinstance(value, str) else str(value)


def compare(value, constant: str) -> int:
    """-1 / 0 / 1: numbers as numbers when both sides read as numbers, else as text."""
    left, right = as_number(value), as_number(constant)
    if left is None or right is None:
        left, right = as_text(value), as_text(constant)
    return (left > right) - (left < right)


@dataclass(frozen=True)
class Pattern:
    kind: str  # empty | any | const | open | closed | set
    values: tuple[str, ...] = ()

    def matches(self, value) -> bool:
        if value is None:
            return False
        if self.kind == "empty":
            return False
        if self.kind == "any":
            return True
        if self.kind in ("const", "set"):
            return any(compare(value, c) == 0 for c in self.values)
        low, high = self.values
        if self.kind == "open":
            return compare(value, low) > 0 and compare(value, high) < 0
        return compare(value, low) >= 0 and compare(value, high) <= 0


def parse_pattern(text) -> Pattern:
    """``{}`` nothing, ``*`` everything, ``c`` one value, ``(c1, c2)`` strictly between,
    ``[c1, c2]`` inclusive, ``{c1, ..., cn}`` listed values."""
    text = as_text(text).strip()
    if text == "*":
        return Pattern("any")
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1].strip()
        if not inner:
            return Pattern("empty")
        return Pattern("set", tuple(part.strip() for part in inner.split(",")))
    if (text.startswith("(") and text.endswith(")")) or (text.startswith("[") and text.endswith("]")):
        parts = [part.strip() for part in text[1:-1].split(",")]
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"malformed range pattern {text!r}")
        return Pattern("open" if text[0] == "(" else "closed", tuple(parts))
    if not text or any(ch in text for ch in "{}[](),"):
        raise ValueError(f"malformed pattern {text!r}")
    return Pattern("const", (text,))


def matches(pattern_text, value) -> bool:
    return parse_pattern(pattern_text).matches(value)


def parse_ts(value) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --------------------------------------------------------------------------
# SPs, streams, catalogs
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class SP:
    streams: str
    tuples: str
    attributes: str
    roles: str
    sign: str  # "+" | "-"
    immutable: bool = False
    ts: datetime | None = None
    sn: int = 1

    def covers(self, stream: str, key_value, attribute: str, roles: Iterable[str]) -> bool:
        """Does this SP's DDP match (stream, key value, attribute) and its SRP one of roles?"""
        return (matches(self.streams, stream) and matches(self.tuples, key_value)
                and matches(self.attributes, attribute)
                and any(matches(self.roles, role) for role in roles))


def sp_of(record: dict) -> SP:
    sign = str(record.get("sign", "+")).strip()
    if sign not in ("+", "-"):
        raise ValueError(f"sign must be + or -, not {sign!r}")
    return SP(str(record["streams"]), str(record["tuples"]), str(record["attributes"]), str(record["roles"]),
              sign, bool(record.get("immutable", False)), parse_ts(record.get("ts")), int(record.get("sn", 1)))


def is_sp(record: dict) -> bool:
    return record.get("kind") == "sp"


@dataclass(frozen=True)
class Stream:
    name: str
    attributes: tuple[str, ...]  # schema order, ts included
    key: str
    punctuated_by: str | None = None
    server_policies: tuple[SP, ...] = ()
    combine: str = "intersect"


@dataclass(frozen=True)
class Catalog:
    streams: dict[str, Stream]
    inherits: dict[str, tuple[str, ...]]
    users: dict[str, tuple[str, ...]]


def effective_roles(cat: Catalog, user: str) -> frozenset[str]:
    seen: set[str] = set()
    todo = list(cat.users.get(user, ()))
    while todo:
        role = todo.pop()
        if role not in seen:
            seen.add(role)
            todo.extend(cat.inherits.get(role, ()))
    return frozenset(seen)


def server_policy(entry: dict, index: int) -> SP:
    """A catalog server policy ({streams, tuples, attributes, roles, sign}) as an SP."""
    return SP(str(entry.get("streams", "*")), str(entry.get("tuples", "*")), str(entry.get("attributes", "*")),
              str(entry["roles"]), str(entry.get("sign", "+")).strip(), False, None, index + 1)


# --------------------------------------------------------------------------
# Arrival order
# --------------------------------------------------------------------------
def arrival_order(files: Iterable[tuple[str, Iterable[dict]]]) -> list[dict]:
    """Records of (file name, records) in arrival order: ``seq`` when every record has
    an integer one, else file name order then line order."""
    ordered = [r for _, records in sorted(files, key=lambda f: f[0]) for r in records]
    if ordered and all(isinstance(r.get("seq"), int) and not isinstance(r.get("seq"), bool) for r in ordered):
        ordered = sorted(ordered, key=lambda r: r["seq"])  # stable
    return ordered


# --------------------------------------------------------------------------
# The Security Shield
# --------------------------------------------------------------------------
@dataclass
class Policy:
    ts: datetime
    sps: dict[int, SP] = field(default_factory=dict)

    def csn(self) -> int:
        k = 0
        while k + 1 in self.sps:
            k += 1
        return k

    def complete(self) -> tuple[SP, ...]:
        csn = self.csn()
        return tuple(self.sps[sn] for sn in sorted(self.sps) if sn <= csn)


# Outcomes of a tuple at the shield (kept for statistics).
GOVERNED = "governed"
GOVERNED_EXTENDED = "governed by a policy extended after its first tuples"
NO_FIELDS = "denied: no sp_ts/sp_csn"
NO_POLICY = "denied: no current policy"
MISMATCH = "denied: (sp_ts, sp_csn) mismatch, policy dropped"
CSN_ZERO = "denied: csn 0"


class Shield:
    def __init__(self) -> None:
        self.current: Policy | None = None
        self.newest: datetime | None = None
        self.discarded = 0
        self.outcomes: list[str] = []
        self.governed_current = False  # has the current policy governed a tuple yet?
        self.extended = False  # did an SP join the current policy after it governed tuples?

    def on_sp(self, sp: SP) -> str:
        """started / joined / replaced / discarded ("... late": after the policy governed tuples)."""
        if self.current is not None and sp.ts == self.current.ts:
            replaced = sp.sn in self.current.sps
            self.current.sps[sp.sn] = sp
            self.extended = self.extended or (self.governed_current and not replaced)
            return ("replaced" if replaced else "joined") + (" late" if self.governed_current else "")
        if self.newest is not None and sp.ts < self.newest:
            self.discarded += 1
            return "discarded"
        # newer than the current policy, or no current policy and not older than the newest seen
        self.current = Policy(sp.ts, {sp.sn: sp})
        self.governed_current = False
        self.extended = False
        self.newest = sp.ts if self.newest is None else max(self.newest, sp.ts)
        return "started"

    def on_tuple(self, sp_ts, sp_csn) -> tuple[SP, ...] | None:
        """The complete policy governing a tuple, or None (denied)."""
        outcome, policy = self._decide(sp_ts, sp_csn)
        self.outcomes.append(outcome)
        return policy

    def _decide(self, sp_ts, sp_csn):
        if sp_ts is None or sp_csn is None:
            return NO_FIELDS, None
        if self.current is None:
            return NO_POLICY, None
        csn = self.current.csn()
        if parse_ts(sp_ts) != self.current.ts or int(sp_csn) != csn:
            self.current = None
            return MISMATCH, None
        if csn == 0:
            return CSN_ZERO, None
        self.governed_current = True
        return (GOVERNED_EXTENDED if self.extended else GOVERNED), self.current.complete()


def shield_records(stream: Stream,
                   records: Iterable[dict]) -> tuple[list[tuple[dict, tuple[SP, ...] | None]], list[str]]:
    """[(tuple, governing complete policy or None)] in arrival order, plus the outcomes.

    One shield per stream, or per value of ``punctuated_by`` (SPs carry that attribute)."""
    out, outcomes, _ = shield_trace(stream, records)
    return out, outcomes


def shield_trace(stream: Stream, records: Iterable[dict]):
    """shield_records plus what happened to each SP (started/joined/replaced/discarded)."""
    shields: dict[object, Shield] = {}
    out = []
    outcomes = []
    sp_actions = []
    for record in records:
        provider = record.get(stream.punctuated_by) if stream.punctuated_by else None
        shield = shields.setdefault(_provider_key(provider), Shield())
        if is_sp(record):
            sp_actions.append(shield.on_sp(sp_of(record)))
        else:
            policy = shield.on_tuple(record.get("sp_ts"), record.get("sp_csn"))
            outcomes.append(shield.outcomes[-1])
            out.append((record, policy))
    return out, outcomes, sp_actions


def _provider_key(value):
    number = as_number(value)
    return ("n", number) if number is not None else ("t", value)


# --------------------------------------------------------------------------
# Access
# --------------------------------------------------------------------------
def accessible(sps: Iterable[SP], stream: str, key_value, attribute: str, roles: frozenset[str]) -> bool:
    sps = list(sps)
    positive = any(sp.sign == "+" and sp.covers(stream, key_value, attribute, roles) for sp in sps)
    negative = any(sp.sign == "-" and sp.covers(stream, key_value, attribute, roles) for sp in sps)
    return positive and not negative


def access(stream: Stream, record: dict, policy: tuple[SP, ...], roles: frozenset[str]) -> dict[str, bool]:
    """attribute -> accessible, for a tuple governed by the complete policy ``policy``."""
    key_value = record.get(stream.key)
    immutable = any(sp.immutable for sp in policy)
    out = {}
    for attribute in stream.attributes:
        ok = accessible(policy, stream.name, key_value, attribute, roles)
        if stream.server_policies and not immutable:
            server = accessible(stream.server_policies, stream.name, key_value, attribute, roles)
            ok = (ok and server) if stream.combine == "intersect" else (ok or server)
        out[attribute] = ok
    return out


def visible(stream: Stream, record: dict, policy: tuple[SP, ...] | None, roles: frozenset[str], *,
            ts_kept: bool = False) -> dict | None:
    """The tuple as the user's query sees it (inaccessible attributes None), or None if
    it is not delivered (no policy, or no attribute but ts accessible).

    ``ts_kept``: keep ``ts`` in every delivered tuple, as the foundation's masking does
    (docs/semantics.md).  The SP contract does not exempt ``ts``: by default it is masked
    like any other attribute."""
    if policy is None:
        return None
    ok = access(stream, record, policy, roles)
    if not any(ok[a] for a in stream.attributes if a != "ts"):
        return None
    if ts_kept:
        ok["ts"] = True
    return {a: (record.get(a) if ok[a] else None) for a in stream.attributes}


def views(cat: Catalog, user: str, stream_name: str, records: Iterable[dict], *, ts_kept: bool = False):
    """[(original tuple, visible view or None, shield outcome)] in arrival order."""
    stream = cat.streams[stream_name]
    roles = effective_roles(cat, user)
    governed, outcomes = shield_records(stream, records)
    return [(t, visible(stream, t, p, roles, ts_kept=ts_kept), o) for (t, p), o in zip(governed, outcomes)]


# --------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------
_OPS = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
    "=": lambda c: c == 0, "<>": lambda c: c != 0,
}


def holds(value, op: str, constant) -> bool:
    """SQL comparison of an attribute with a numeric constant; NULL never holds."""
    if value is None:
        return False
    left, right = as_number(value), as_number(constant)
    if left is None or right is None:
        raise TypeError(f"numeric comparison only: {value!r} {op} {constant!r}")
    return _OPS[op]((left > right) - (left < right))


def select_rows(cat: Catalog, user: str, stream_name: str, records: Iterable[dict],
                where: tuple[str, str, object] | None = None, *, ts_kept: bool = False) -> list[dict]:
    """SELECT * FROM stream [WHERE attr op constant]: one dict per delivered tuple."""
    rows = []
    for _, view, _ in views(cat, user, stream_name, records, ts_kept=ts_kept):
        if view is None:
            continue
        if where is not None and not holds(view[where[0]], where[1], where[2]):
            continue
        rows.append(dict(view))
    return rows


def join_rows(cat: Catalog, user: str, a_name: str, a_records, wa_s: float, b_name: str, b_records, wb_s: float,
              on: tuple[str, str], items: list[tuple[str, str]], *, ts_kept: bool = False) -> list[dict]:
    """SELECT items FROM A [RANGE wa], B [RANGE wb] WHERE A.on[0] = B.on[1].

    A pair exists when both tuples are delivered, the join attribute is accessible in
    both (and equal), and a.ts - wb <= b.ts <= a.ts + wa; ts is read through the view,
    so a masked (NULL) ts never pairs.  items: [("A.attr" | "B.attr", output name)]."""
    from oracle import _in_time  # the foundation's window test

    a_views = [v for _, v, _ in views(cat, user, a_name, a_records, ts_kept=ts_kept) if v is not None]
    b_views = [v for _, v, _ in views(cat, user, b_name, b_records, ts_kept=ts_kept) if v is not None]
    rows = []
    for a in a_views:
        for b in b_views:
            left, right = a[on[0]], b[on[1]]
            if left is None or right is None or compare(left, as_text(right)) != 0:
                continue
            if a["ts"] is None or b["ts"] is None:
                continue
            if not _in_time({"ts": parse_ts(a["ts"])}, {"ts": parse_ts(b["ts"])}, wa_s, wb_s):
                continue
            env = {a_name: a, b_name: b}
            row = {}
            for name, out in items:
                s, attr = name.split(".", 1)
                row[out] = env[s][attr]
            rows.append(row)
    return rows
