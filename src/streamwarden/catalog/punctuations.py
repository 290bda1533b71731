"""Security punctuations and the policies they form (Nehme et al., sections 4–4.2).

An SP is ``<DDP | SRP | sign | immutable | ts | sn>`` with DDP = (stream, tuple,
attribute) patterns and SRP = role pattern (plus the grant option of section 4.4).
Consecutive SPs with the same ``ts`` form one policy (an sp-batch); a policy whose SPs
1..k are not all present is incomplete and grants nothing (denial by default).

Access under a complete policy, for a user's effective roles (the contract of issue 3):
attribute ``a`` of tuple ``t`` is accessible when some positive SP matches
(stream, t's key, a) and one of the roles, and no negative SP does.

    >>> p = SpPolicy.of([sp("HeartRate", "[120, 133]", "*", "{GP, C}")])
    >>> p.accessible("HeartRate", 125, "Beats_per_min", {"GP"}), p.accessible("HeartRate", 140, "Beats_per_min", {"GP"})
    (True, False)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Iterable, Mapping

from streamwarden.errors import InputError, StreamwardenError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.language.patterns import Pattern, parse_pattern
from streamwarden.plan.expr import format_timestamp

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SecurityPunctuation:
    """One SP (Definition 4.1). ``grant`` is the SRP's WITH GRANT OPTION (delegation)."""

    streams: Pattern
    tuples: Pattern
    attributes: Pattern
    roles: Pattern
    positive: bool = True
    immutable: bool = False
    grant: bool = False
    ts: datetime = EPOCH
    sn: int = 1
    provider: object = None  # the punctuated_by value of the sub-stream it belongs to

    def matches_object(self, stream: str, key: object, attribute: str) -> bool:
        """match() of section 4.2: does the DDP describe this attribute of this tuple?"""
        return self.streams.matches(stream) and self.tuples.matches(key) and self.attributes.matches(attribute)

    def matches_roles(self, roles: Iterable[str]) -> bool:
        return any(self.roles.matches(r) for r in roles)

    def __str__(self) -> str:
        flags = f"{'+' if self.positive else '-'} | {'T' if self.immutable else 'F'}"
        grant = " WITH GRANT OPTION" if self.grant else ""
        return (f"<{self.streams}, {self.tuples}, {self.attributes} | {self.roles}{grant} | {flags} | "
                f"{format_timestamp(self.ts)} | {self.sn}>")

    def to_record(self, provider_attribute: str | None = None) -> dict[str, object]:
        """The JSON-lines record a data provider sends for this SP."""
        record: dict[str, object] = {
            "kind": "sp", "streams": str(self.streams), "tuples": str(self.tuples),
            "attributes": str(self.attributes), "roles": str(self.roles), "sign": "+" if self.positive else "-",
            "immutable": self.immutable, "grant": self.grant, "ts": format_timestamp(self.ts), "sn": self.sn,
        }
        if provider_attribute is not None:
            record[provider_attribute] = self.provider
        return record


def sp(streams: str = "*", tuples: str = "*", attributes: str = "*", roles: str = "*", *, positive: bool = True,
       immutable: bool = False, grant: bool = False, ts: datetime = EPOCH, sn: int = 1) -> SecurityPunctuation:
    """Build an SP from pattern texts (tests, examples)."""
    return SecurityPunctuation(parse_pattern(streams), parse_pattern(tuples), parse_pattern(attributes),
                               parse_pattern(roles), positive, immutable, grant, ts, sn)


@dataclass(frozen=True)
class SpPolicy:
    """An sp-batch: the SPs sharing one policy timestamp."""

    ts: datetime
    sps: tuple[SecurityPunctuation, ...] = field(default=())

    @classmethod
    def of(cls, sps: Iterable[SecurityPunctuation]) -> "SpPolicy":
        sps = tuple(sps)
        return cls(sps[0].ts if sps else EPOCH, sps)

    def with_sp(self, new: SecurityPunctuation) -> "SpPolicy":
        """The policy with one more SP (a duplicate sequence number replaces the old one)."""
        kept = tuple(s for s in self.sps if s.sn != new.sn)
        return replace(self, sps=kept + (new,))

    @property
    def csn(self) -> int:
        """Largest k such that the SPs with sequence numbers 1..k are all present."""
        present = {s.sn for s in self.sps}
        k = 0
        while k + 1 in present:
            k += 1
        return k

    def complete_part(self) -> tuple[SecurityPunctuation, ...]:
        csn = self.csn
        return tuple(s for s in self.sps if s.sn <= csn)

    @property
    def immutable(self) -> bool:
        return any(s.immutable for s in self.sps)

    def accessible(self, stream: str, key: object, attribute: str, roles: Iterable[str]) -> bool:
        """Positive SP matches object and a role, and no negative SP does."""
        roles = tuple(roles)
        granted = denied = False
        for s in self.sps:
            if s.matches_object(stream, key, attribute) and s.matches_roles(roles):
                if s.positive:
                    granted = True
                else:
                    denied = True
        return granted and not denied


def combine(provider: bool, server: bool | None, mode: str, immutable: bool) -> bool:
    """Section 4.2: a provider's decision combined with the server's (``None``: no server policy)."""
    if server is None or immutable:
        return provider
    if mode == "union":
        return provider or server
    if mode == "intersect":
        return provider and server
    raise StreamwardenError(f"combine must be intersect or union, not {mode!r}")


# -- JSON-lines records --------------------------------------------------------------------
#: The largest sequence number an SP may carry: a policy is at most this many SPs, so a
#: provider cannot grow its shield's state (kept per provider) without bound.
MAX_SN = 4096
_SIGNS = {"+": True, "positive": True, "-": False, "negative": False}


def sp_from_record(record: Mapping[str, object], where: str, provider_attribute: str | None = None) -> SecurityPunctuation:
    """Parse an SP record (``{"kind": "sp", ...}``); errors name ``where`` (file and line)."""
    def field_(name: str, default: object = None) -> object:
        if name not in record and default is None:
            raise InputError(f"{where}: SP record lacks {name!r}")
        return record.get(name, default)

    try:
        patterns = [parse_pattern(str(field_(k, "*")), f"{where} {k}") for k in ("streams", "tuples", "attributes")]
        roles = parse_pattern(str(field_("roles")), f"{where} roles")
    except StreamwardenError as exc:
        raise InputError(str(exc).splitlines()[0]) from None
    sign = str(field_("sign", "+")).lower()
    if sign not in _SIGNS:
        raise InputError(f"{where}: sign must be '+' or '-', not {sign!r}")
    sn = field_("sn")
    if not isinstance(sn, int) or isinstance(sn, bool) or sn < 1:
        raise InputError(f"{where}: sn must be a positive integer, not {sn!r}")
    if sn > MAX_SN:
        raise InputError(f"{where}: sn must be at most {MAX_SN}, not {sn}")
    try:
        ts = parse_timestamp(str(field_("ts")))
    except ValueError:
        raise InputError(f"{where}: ts {record.get('ts')!r} is not an ISO-8601 timestamp") from None
    flags = {}
    for name in ("immutable", "grant"):
        value = record.get(name, False)
        if not isinstance(value, bool):
            raise InputError(f"{where}: {name} must be true or false, not {value!r}")
        flags[name] = value
    provider = record.get(provider_attribute) if provider_attribute else None
    if provider_attribute and provider is None:
        raise InputError(f"{where}: SP record lacks the provider attribute {provider_attribute!r}")
    return SecurityPunctuation(*patterns, roles, _SIGNS[sign], flags["immutable"], flags["grant"], ts, sn, provider)


def sp_records_text(sps: Iterable[SecurityPunctuation], provider_attribute: str | None = None) -> str:
    return "".join(json.dumps(s.to_record(provider_attribute)) + "\n" for s in sps)


__all__ = ["MAX_SN", "SecurityPunctuation", "SpPolicy", "combine", "sp", "sp_from_record", "sp_records_text"]
