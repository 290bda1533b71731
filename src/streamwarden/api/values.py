"""The texts streamwarden reads and writes: timestamps, durations, typed values, SP records.

One definition each, shared by the engine, the command line and the service, so that what
a gateway accepts is what the engine reads.

    >>> format_timestamp(parse_timestamp("2026-03-01T11:00:00+01:00")), parse_duration("2 minutes")
    ('2026-03-01T10:00:00Z', 120.0)
    >>> from datetime import datetime, timezone
    >>> print(sp_records(parse_sp_statements(["INSERT SP INTO STREAM S LET DDP = TUPLES:ALL, SRP = Doctor"]),
    ...                  datetime(2026, 3, 1, tzinfo=timezone.utc))[:63])
    {"kind": "sp", "streams": "S", "tuples": "*", "attributes": "*"
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from streamwarden.catalog.punctuations import MAX_SN, checked_sp_record, sp_records_text
from streamwarden.catalog.values import shown, typed_value
from streamwarden.language.expressions import names_no_zone, parse_timestamp
from streamwarden.language.insert_sp import InsertSp, parse_insert_sp
from streamwarden.language.parser import MAX_WINDOWS_PER_TUPLE, parse_duration, parse_query
from streamwarden.plan.expr import format_timestamp
from streamwarden.security.punctuation.generate import policy_from_statements


def check_cql(text: str, name: str = "<query>") -> None:
    """Refuse a CQL text that does not parse or goes beyond a limit of the language (its length,
    nesting, a window that puts each tuple in more than :data:`MAX_WINDOWS_PER_TUPLE` windows, ...),
    with no catalog and in microseconds: what a front end checks before anything costly. Raises a
    :class:`~streamwarden.errors.QuerySyntaxError` naming ``name``, line and column.

        >>> check_cql("SELECT a FROM S [RANGE 1 day SLIDE 15 min]")
        >>> check_cql("SELECT a FROM S [RANGE 1 day SLIDE 1 second]")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        streamwarden.errors.QuerySyntaxError: <query>:1:17: RANGE 1 day SLIDE 1 second puts each tuple in ...
    """
    parse_query(text, name)


def parse_sp_statements(texts: Sequence[str]) -> list[InsertSp]:
    """``INSERT SP ...`` statements, parsed; an error names the statement (``<statement 2>``),
    line and column."""
    return [parse_insert_sp(text, f"<statement {i}>") for i, text in enumerate(texts, start=1)]


def sp_records(statements: Sequence[InsertSp], ts: datetime, provider: tuple[str, object] | None = None) -> str:
    """The SP records (JSON lines) a data provider sends for ``statements``: one policy, dated
    ``ts``, sequence numbers 1..k. ``provider`` is ``(attribute, value)`` for a stream
    ``punctuated_by`` that attribute: the provider the SPs belong to."""
    attribute, value = provider if provider is not None else (None, None)
    return sp_records_text(policy_from_statements(statements, ts, value), attribute)


__all__ = [
    "MAX_SN", "MAX_WINDOWS_PER_TUPLE", "InsertSp", "check_cql", "checked_sp_record", "format_timestamp",
    "names_no_zone", "parse_duration", "parse_sp_statements", "parse_timestamp", "shown", "sp_records", "typed_value",
]
