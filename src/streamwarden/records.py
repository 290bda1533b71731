"""JSON-lines records as streamwarden reads them: split at LF only, UTF-8 errors with positions.

Every reader of records (punctuated streams, access changes) splits the same way, so a
record means the same thing to all of them.
"""

from __future__ import annotations

import re

from streamwarden.errors import InputError

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

# -- text a record may hold ---------------------------------------------------------------------
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


__all__ = ["bad_byte", "record_lines", "split_records", "text_problem", "utf8_position"]
