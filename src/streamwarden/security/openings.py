"""What a user may query: the streams her policies open, with which attributes, and a
query that works — for a person who has an account but has not read the catalog.

Computed from the catalog alone (her effective roles' policies, the streams' security
punctuations and levels), the same facts the security passes start from; it names only
her own roles' policies, as ``explain`` does. A stream no policy opens is not listed: the
listing never reveals more of the catalog than her queries could.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text('''
    ... streams: {Readings: {schema: {ts: timestamp, sensor: string, ward: string, value: double}},
    ...           Staff: {schema: {ts: timestamp, name: string}}}
    ... roles: {Nurse: {}}
    ... users: {ann: {roles: [Nurse], profile: {ward: w1}}}
    ... policies:
    ...   - {id: ward_read, subject: Nurse, streams: [Readings], attributes: [sensor, value, ward],
    ...      privilege: read, where: "Readings.ward = self.ward"}
    ... ''')
    >>> [(o.stream, o.attributes, o.example) for o in openings(cat, "ann")]
    [('Readings', ('ts', 'sensor', 'ward', 'value'), 'SELECT sensor, ward, value FROM Readings')]
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from streamwarden.catalog.model import Catalog, Policy
from streamwarden.errors import StreamwardenError
from streamwarden.security.passes import secure
from streamwarden.security.rewrite.algorithm import AuthorizedGraph


@dataclass(frozen=True)
class Opening:
    """A stream ``user`` may query: the attributes she may read (``ts`` always), how (each
    reason a sentence), and an example query that runs."""

    stream: str
    attributes: tuple[str, ...]
    reasons: tuple[str, ...]
    example: str
    aggregates_only: bool = False

    def as_json(self) -> dict[str, object]:
        return {"stream": self.stream, "attributes": list(self.attributes), "reasons": list(self.reasons),
                "example": self.example, "aggregates_only": self.aggregates_only}


def openings(catalog: Catalog, user: str) -> list[Opening]:
    """The streams ``user``'s policies, the providers' punctuations or her clearance open to
    her, in the catalog's order (see the module docstring). Each is checked by the security
    passes themselves: a stream is offered only when its example deploys for her.

    That is a rewriting per stream, so the answer is kept per catalog text and user (all it
    depends on: live action values change what a policy passes, not which streams it opens):
    asking again, as a console does at every sign-in, costs a lookup, and no user can make
    the service rewrite the catalog over and over."""
    if not catalog.text:  # a catalog built in code: nothing to key it by
        return _openings(catalog, user)
    key = (hashlib.sha256(catalog.text.encode()).hexdigest(), user)
    with _lock:
        known = _known.get(key)
        if known is not None:
            _known.move_to_end(key)
            return list(known)
    found = _openings(catalog, user)
    with _lock:
        _known[key] = tuple(found)
        while len(_known) > KNOWN:
            _known.popitem(last=False)
    return found


#: Answers kept (catalog text, user) at most: the most recently asked.
KNOWN = 4096
_known: OrderedDict[tuple[str, str], tuple[Opening, ...]] = OrderedDict()
_lock = threading.Lock()


def _openings(catalog: Catalog, user: str) -> list[Opening]:
    policies = catalog.policies_for(user)
    found = []
    for name, stream in catalog.streams.items():
        schema = [a for a, dtype in stream.schema if dtype != "level"]
        mine = [p for p in policies if name in p.streams]
        reads = [p for p in mine if p.privilege == "read"]
        aggregates = [p for p in mine if p.privilege == "aggregate"]
        granted = _attributes(reads, schema) if reads and not stream.punctuated else set(schema)
        shown = [a for a in schema if a in granted and a != "ts"] or ["ts"]
        example = f"SELECT {', '.join(shown)} FROM {name}"
        graphs = _deployed(catalog, user, example)
        aggregates_only = not graphs and bool(aggregates)
        if aggregates_only:
            example = _aggregate_example(aggregates[0], name, dict(stream.schema))
            graphs = _deployed(catalog, user, example)
        if not graphs:
            continue
        reasons = [_read_reason(p) for p in reads] + [_aggregate_reason(p) for p in aggregates]
        if stream.punctuated:
            reasons.append("its providers decide, tuple by tuple, with the security punctuations they send "
                           "(what a provider grants your roles)")
        if catalog.lattice is not None:
            reasons.append(f"you read it at your clearance, {catalog.clearance(user)}: tuples above it stay hidden")
        attributes = tuple(schema) if aggregates_only else tuple(a for a in schema if a in granted or a == "ts")
        found.append(Opening(name, attributes, tuple(reasons), example, aggregates_only=aggregates_only))
    return found


def _deployed(catalog: Catalog, user: str, query: str) -> tuple[AuthorizedGraph, ...]:
    """The graphs the security passes deploy for ``user``'s ``query`` (none when they refuse it)."""
    try:
        return tuple(secure(catalog, user, query).deployed)
    except StreamwardenError:
        return ()


def _attributes(reads: list[Policy], schema: list[str]) -> set[str]:
    granted: set[str] = {"ts"}
    for p in reads:
        granted |= set(schema) if p.attributes is None else set(p.attributes)
    return granted


def _read_reason(policy: Policy) -> str:
    what = "every attribute" if policy.attributes is None else ", ".join(policy.attributes)
    where = f" where {policy.where_text}" if policy.where_text else ""
    return f"policy {policy.id}: read {what}{where}"


def _aggregate_reason(policy: Policy) -> str:
    what = "every attribute" if policy.attributes is None else ", ".join(policy.attributes)
    window = f", over windows of at least {_seconds(policy.window[0])}" if policy.window else ""
    groups = f", grouped by {', '.join(policy.group_by)} only" if policy.group_by else ""
    return f"policy {policy.id}: aggregates of {what}{window}{groups}"


def _aggregate_example(policy: Policy, stream: str, types: dict[str, str]) -> str:
    numeric = [a for a in (policy.attributes or tuple(types)) if types.get(a) in ("int", "long", "double")]
    size = _seconds(policy.window[0]) if policy.window else "5 min"
    target = f"AVG({numeric[0]})" if numeric else "COUNT(*)"
    return f"SELECT {target} AS value FROM {stream} [RANGE {size}]"


def _seconds(seconds: float) -> str:
    for unit, length in (("hours", 3600), ("min", 60)):
        if seconds >= length and seconds % length == 0:
            return f"{int(seconds // length)} {unit}"
    return f"{seconds:g} seconds"


__all__ = ["Opening", "openings"]
