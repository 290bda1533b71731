"""A record's values checked against the catalog's types, exactly as Spark's JSON reader reads them.

The provider gateway and the engine's readers agree on what a value of each type is (see
:func:`typed_value`), so that a record the gateway accepts is never a broken record to
the engine.
"""

from __future__ import annotations

import json
import math
from typing import Any

from streamwarden.errors import InputError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.plan.expr import format_timestamp
from streamwarden.records import text_problem

#: The ranges of the catalog's integer types (an ``int`` is 32 bits, a ``long`` 64), as Spark holds them.
INT_RANGES = {"int": 2 ** 31, "long": 2 ** 63}


def typed_value(value: Any, dtype: str | None, name: str) -> Any:
    """A decoded JSON value as a field of catalog type ``dtype`` holds it, exactly as Spark's
    JSON reader reads it, or :class:`InputError` naming ``name`` (None stays None: NULL).

    Only the JSON type of ``dtype`` is taken: an ``int`` or ``long`` is a JSON integer in
    range (not ``1.0``, not ``true``), a ``double`` a finite number, a ``boolean`` true or
    false, a ``string`` a string, a ``timestamp`` an ISO-8601 string within years 1..9999,
    returned in the canonical text streamwarden writes.

        >>> typed_value(7, "int", "pulse"), typed_value(1, "double", "v")
        (7, 1.0)
        >>> typed_value("2026-03-01T11:00+01:00", "timestamp", "ts")
        '2026-03-01T10:00:00Z'
        >>> typed_value(1.0, "int", "pulse")
        Traceback (most recent call last):
        streamwarden.errors.InputError: pulse must be an int, not 1.0
    """
    if value is None:
        return None
    if dtype in INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputError(f"{name} must be {'an int' if dtype == 'int' else 'a long'}, not {shown(value)}")
        if not -INT_RANGES[dtype] <= value < INT_RANGES[dtype]:
            raise InputError(f"{name} is out of the range of an {dtype}")
        return value
    if dtype == "double":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not _finite(value):
            raise InputError(f"{name} must be a finite number, not {shown(value)}")
        return float(value)
    if dtype == "boolean":
        if not isinstance(value, bool):
            raise InputError(f"{name} must be true or false, not {shown(value)}")
        return value
    if dtype == "string":
        if not isinstance(value, str):
            raise InputError(f"{name} must be a string, not {shown(value)}")
        problem = text_problem(value)
        if problem is not None:
            raise InputError(f"{name} {problem}")
        return value
    if dtype == "timestamp":
        try:
            return format_timestamp(parse_timestamp(value)) if isinstance(value, str) else _no_time()
        except ValueError:
            raise InputError(f"{name} must be an ISO-8601 timestamp such as 2026-03-01T10:00:00Z") from None
    raise InputError(f"{name} has an unknown type {dtype}")


def shown(value: Any) -> str:
    """A short, printable and encodable view of a decoded JSON value, for an error message."""
    return json.dumps(value)[:40] if not isinstance(value, str) else ascii(value[:40])


def _finite(number: int | float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer of hundreds of digits is beyond every double
        return False


def _no_time() -> Any:
    raise ValueError("not a string")


__all__ = ["INT_RANGES", "shown", "typed_value"]
