"""Security punctuations and the policies they form (Nehme et al., sections 4–4.2).

An SP is ``<DDP | SRP | sign | immutable | ts | sn>`` with DDP = (stream, tuple,
attribute) patterns and SRP = role pattern (plus the grant option of section 4.4).
Consecutive SPs with the same ``ts`` form one policy (an sp-batch); a policy whose SPs
1..k are not all present is incomplete and grants nothing (denial by default).

Access under a complete policy, for a user's effective roles (the contract of issue 3):
attribute ``a`` of tuple ``t`` is accessible when some positive SP matches
(stream, t's key, a) and one of the roles, and no negative SP does. The engine decides it
in Spark (:mod:`streamwarden.engine.shield`); the model of a policy the tests hold it to is
``SpPolicy`` in ``tests/oracles/shield.py``.

    >>> s = sp("HeartRate", "[120, 133]", "*", "{GP, C}")
    >>> s.matches_object("HeartRate", 125, "Beats_per_min"), s.matches_object("HeartRate", 140, "Beats_per_min")
    (True, False)
    >>> s.matches_roles({"GP"}), s.matches_roles({"ND"})
    (True, False)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping

from streamwarden.errors import InputError, StreamwardenError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.language.patterns import Pattern, parse_pattern
from streamwarden.plan.expr import format_timestamp
from streamwarden.catalog.values import shown, typed_value
from streamwarden.records import text_problem

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


# -- JSON-lines records --------------------------------------------------------------------
#: The largest sequence number an SP may carry: a policy is at most this many SPs, so a
#: provider cannot grow its shield's state (kept per provider) without bound.
MAX_SN = 4096
_SIGNS = {"+": True, "positive": True, "-": False, "negative": False}
#: The fields of an SP record, besides its provider attribute and ``seq`` (an arrival stamp).
SP_FIELDS = ("kind", "streams", "tuples", "attributes", "roles", "sign", "immutable", "grant", "ts", "sn")
_PATTERNS = ("streams", "tuples", "attributes", "roles")


def checked_sp_record(record: Mapping[str, object], where: str, provider_attribute: str | None = None,
                      provider_type: str | None = None) -> tuple[SecurityPunctuation, dict[str, object]]:
    """The one definition of a valid SP record: the SP it holds and the record in canonical form,
    or :class:`InputError` naming ``where`` (file and line) and the field.

    Every field has its JSON type only, so that no reader can take it another way (Spark's
    JSON reader turns ``true`` into the text ``"true"``, Python's ``str`` into ``"True"``;
    a ``null`` pattern is ``*`` to the engine and ``"None"`` to ``str``):

    * ``kind`` is ``"sp"``; no field beyond :data:`SP_FIELDS`, the provider attribute and ``seq``;
    * ``streams``, ``tuples``, ``attributes`` (default ``*``) and ``roles`` (required) are JSON
      strings that parse as patterns (:func:`~streamwarden.language.patterns.parse_pattern`,
      the grammar the engine's JVM reader is held to), of characters UTF-8 can hold;
    * ``sign`` is ``+``, ``-``, ``positive`` or ``negative`` (any case; default ``+``);
      ``immutable`` and ``grant`` are true or false (default false);
    * ``ts`` is an ISO-8601 string within years 1..9999; ``sn`` a JSON integer 1..:data:`MAX_SN`;
    * ``seq``, if present, a JSON integer 0..2**63-1;
    * the provider attribute (when the stream has one) is present, not null, and of
      ``provider_type`` (see :func:`streamwarden.catalog.values.typed_value`).

    The canonical record writes every field (sign as ``+``/``-``, ``ts`` in UTC), so whoever
    reads it gets this SP. Patterns stay the texts that parsed: printing a parsed pattern
    does not give it back (the quoted value ``'*'`` would print as ``*``, everything).

        >>> sp_, canonical = checked_sp_record({"kind": "sp", "roles": "{GP, C}", "sign": "NEGATIVE",
        ...     "ts": "2026-03-01T11:00:00+01:00", "sn": 1, "Patient_id": 7}, "f:1", "Patient_id", "int")
        >>> canonical["tuples"], canonical["sign"], canonical["immutable"], canonical["ts"], sp_.roles.matches("C")
        ('*', '-', False, '2026-03-01T10:00:00Z', True)
        >>> checked_sp_record({"kind": "sp", "roles": None, "ts": "2026-03-01T10:00:00Z", "sn": 1}, "f:2")
        Traceback (most recent call last):
        streamwarden.errors.InputError: f:2: roles must be a pattern in a JSON string, such as "{GP, C}", not null
    """
    def fail(message: str) -> InputError:
        return InputError(f"{where}: {message}")

    if record.get("kind") != "sp":
        raise fail(f"an SP record has kind \"sp\", not {shown(record.get('kind'))}")
    unknown = sorted(set(record) - set(SP_FIELDS) - {provider_attribute, "seq"}, key=str)
    if unknown:
        raise fail(f"an SP record has no field {shown(unknown[0])}")
    canonical: dict[str, object] = {"kind": "sp"}
    patterns = []
    for name in _PATTERNS:
        if name not in record and name != "roles":
            text: object = "*"
        elif name not in record:
            raise fail("SP record lacks 'roles'")
        else:
            text = record[name]
        if not isinstance(text, str):
            raise fail(f"{name} must be a pattern in a JSON string, such as \"{{GP, C}}\", not {shown(text)}")
        problem = text_problem(text)
        if problem is not None:
            raise fail(f"{name} {problem}")
        try:
            patterns.append(parse_pattern(text, f"{where} {name}"))
        except StreamwardenError as exc:
            raise InputError(str(exc).splitlines()[0]) from None
        canonical[name] = text
    sign = record.get("sign", "+")
    if not isinstance(sign, str) or sign.lower() not in _SIGNS:
        raise fail(f"sign must be '+' or '-', not {shown(sign)}")
    positive = _SIGNS[sign.lower()]
    flags = {}
    for name in ("immutable", "grant"):
        value = record.get(name, False)
        if not isinstance(value, bool):
            raise fail(f"{name} must be true or false, not {shown(value)}")
        flags[name] = value
    canonical.update(sign="+" if positive else "-", **flags)
    if "ts" not in record:
        raise fail("SP record lacks 'ts'")
    try:
        ts_text = typed_value(record["ts"], "timestamp", "ts")
    except InputError as exc:
        raise fail(str(exc)) from None
    if ts_text is None:
        raise fail("ts must be an ISO-8601 timestamp such as 2026-03-01T10:00:00Z, not null")
    sn = record.get("sn")
    if "sn" not in record:
        raise fail("SP record lacks 'sn'")
    if not isinstance(sn, int) or isinstance(sn, bool) or sn < 1:
        raise fail(f"sn must be a positive integer, not {shown(sn)}")
    if sn > MAX_SN:
        raise fail(f"sn must be at most {MAX_SN}, not {shown(sn)}")
    canonical.update(ts=ts_text, sn=sn)
    provider = None
    if provider_attribute is not None:
        try:
            provider = typed_value(record.get(provider_attribute), provider_type, provider_attribute) \
                if provider_type is not None else record.get(provider_attribute)
        except InputError as exc:
            raise fail(str(exc)) from None
        if provider is None:
            raise fail(f"SP record lacks the provider attribute {provider_attribute!r}")
        canonical[provider_attribute] = provider
    if "seq" in record:
        seq = record["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2 ** 63:
            raise fail("seq must be a non-negative 64-bit integer")
        canonical["seq"] = seq
    ts = parse_timestamp(str(ts_text))
    streams, tuples, attributes, roles = patterns
    punctuation = SecurityPunctuation(streams, tuples, attributes, roles, positive, flags["immutable"], flags["grant"],
                                      ts, sn, provider)
    return punctuation, canonical


def sp_from_record(record: Mapping[str, object], where: str, provider_attribute: str | None = None,
                   provider_type: str | None = None) -> SecurityPunctuation:
    """Parse an SP record (``{"kind": "sp", ...}``): the SP of :func:`checked_sp_record`."""
    return checked_sp_record(record, where, provider_attribute, provider_type)[0]


def sp_records_text(sps: Iterable[SecurityPunctuation], provider_attribute: str | None = None) -> str:
    return "".join(json.dumps(s.to_record(provider_attribute)) + "\n" for s in sps)


__all__ = ["MAX_SN", "SP_FIELDS", "SecurityPunctuation", "checked_sp_record", "sp",
           "sp_from_record", "sp_records_text"]
