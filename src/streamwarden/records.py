"""JSON-lines records as streamwarden reads them: split at LF only, UTF-8 errors with positions.

Every reader of records (punctuated streams, access changes) splits the same way, so a
record means the same thing to all of them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from streamwarden.errors import InputError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.plan.expr import format_timestamp

_JSON_BLANK = " \t\r"  # whitespace JSON allows around a record (LF ends it)


def record_lines(data: bytes, path: str) -> list[tuple[int, str]]:
    r"""(1-based line number, text) of the non-blank lines of a JSON-lines file's bytes.

    Records end at LF (a CRLF's CR goes with it); nothing else ends one. Python's
    ``str.splitlines`` also splits at U+2028, U+2029, U+0085, form feeds and more, which
    JSON allows inside strings, so it would cut a valid record in two. Invalid UTF-8 raises
    :class:`InputError` naming the file, line and column of the first bad byte.

        >>> record_lines(b'{"a": "x\xe2\x80\xa8y"}\r\n\n {"b": 1}', "f.jsonl")
        [(1, '{"a": "x\u2028y"}'), (3, ' {"b": 1}')]
        >>> record_lines(b'{"a": 1}\n{"a": "\xff"}', "f.jsonl")
        Traceback (most recent call last):
        streamwarden.errors.InputError: f.jsonl:2:8: invalid UTF-8 (byte 0xff)
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}:{utf8_position(data, exc.start)}: {bad_byte(data, exc.start)}") from None
    return split_records(text)


def split_records(text: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of the non-blank lines of ``text``, split at LF only."""
    lines = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if line.strip(_JSON_BLANK):
            lines.append((number, line))
    return lines


def utf8_position(data: bytes, offset: int) -> str:
    """``line:column`` (1-based, column in characters) of byte ``offset``, all bytes before it valid UTF-8."""
    line = data.count(b"\n", 0, offset) + 1
    column = len(data[data.rfind(b"\n", 0, offset) + 1 : offset].decode("utf-8")) + 1
    return f"{line}:{column}"


def bad_byte(data: bytes, offset: int) -> str:
    return f"invalid UTF-8 (byte 0x{data[offset]:02x})"

# -- values of the catalog's types -----------------------------------------------------------
#: The ranges of the catalog's integer types (an ``int`` is 32 bits, a ``long`` 64), as Spark holds them.
INT_RANGES = {"int": 2 ** 31, "long": 2 ** 63}
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    r"""Why a decoded JSON string cannot be written as UTF-8 (None: it can).

    JSON's ``\ud800`` escape decodes to a lone surrogate, which is not a character: no
    UTF-8 file, database or answer can hold it.

        >>> text_problem("w\u00e9"), text_problem("w\ud800")
        (None, 'holds a lone surrogate (\\ud800), which is not a character')
    """
    found = _SURROGATE.search(text)
    return None if found is None else f"holds a lone surrogate (\\u{ord(found.group()):04x}), which is not a character"


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


__all__ = ["INT_RANGES", "bad_byte", "record_lines", "shown", "split_records", "text_problem", "typed_value",
           "utf8_position"]
