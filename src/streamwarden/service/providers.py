"""Records a provider appends to a stream: checked whole, then added in one atomic file.

A broken record in a stream's input stops every query that reads it (the engine fails
closed), so the gateway lets nothing through that the engine would call broken, and
rewrites what it accepts in the engine's own canonical form:

* the body is UTF-8 JSON lines (split at LF only, :mod:`streamwarden.records`); each line
  one JSON object, with no duplicate key and no ``NaN``/``Infinity``;
* a tuple has ``ts`` and only the stream's attributes (plus ``seq``, a provider's arrival
  stamp), each of its declared type and range (``int`` 32 bits, ``long`` 64, finite
  ``double``, timestamps in ISO-8601 within years 1..9999);
* a punctuated stream also takes SP records (``"kind": "sp"``), parsed as the shield does;
* a provider token for one sub-stream (``--key``) may only send tuples and SPs whose
  ``punctuated_by`` attribute is its own value: the gateway decides who may speak for whom.

Any fault refuses the whole body, naming the line and column of the first bad record;
otherwise the records become one new file in the stream's input folder, written under a
hidden name and renamed (a reader never sees half of it), named so that it sorts after
every file the gateway wrote before (arrival order).

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
    >>> check_records(b'{"ts": "2026-03-01T10:00:00Z", "a": 1}\\n', cat.streams["S"], None)
    ['{"ts":"2026-03-01T10:00:00Z","a":1}']
    >>> check_records(b'{"ts": "2026-03-01T10:00:00Z", "a": 1.5}', cat.streams["S"], None)
    Traceback (most recent call last):
    streamwarden.service.errors.ApiError: line 1: a must be an int, not 1.5
"""

from __future__ import annotations

import json
import math
import os
import secrets
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from streamwarden.catalog.identity import ProviderKey
from streamwarden.catalog.model import StreamDef
from streamwarden.catalog.punctuations import sp_from_record
from streamwarden.errors import InputError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.names import PRIVATE_FILE, private_dir
from streamwarden.plan.expr import format_timestamp
from streamwarden.records import record_lines
from streamwarden.service.errors import ApiError

MAX_BODY = 16 * 1024 * 1024  # bytes in one request: a bigger batch is several requests
MAX_RECORDS = 100_000
#: Fields a tuple of a punctuated stream may carry besides its attributes: the sp-batch that governs it.
TUPLE_SP_FIELDS = {"sp_ts": "timestamp", "sp_csn": "int"}
SP_FIELDS = ("kind", "streams", "tuples", "attributes", "roles", "sign", "immutable", "grant", "ts", "sn")
_RANGES = {"int": 2 ** 31, "long": 2 ** 63}
_lock = threading.Lock()
_last_name = [""]


class _Duplicate(ValueError):
    pass


def check_records(body: bytes, stream: StreamDef, key: ProviderKey | None, *,
                  keyed: bool = False) -> list[str]:
    """The body's records in canonical JSON, or :class:`ApiError` (422) for the first bad one.
    ``keyed``: the caller speaks for the sub-stream ``key`` only."""
    if len(body) > MAX_BODY:
        raise ApiError(413, f"the body is larger than {MAX_BODY} bytes: send it in several requests")
    try:
        lines = record_lines(body, "body")
    except InputError as exc:  # "body:LINE:COLUMN: invalid UTF-8 ..."
        text = str(exc).removeprefix("body:")
        line, column, message = text.split(":", 2)
        raise ApiError(422, f"line {line}: {message.strip()}", line=int(line), column=int(column)) from None
    if not lines:
        raise ApiError(422, "the body holds no record: send JSON lines, one record per line")
    if len(lines) > MAX_RECORDS:
        raise ApiError(413, f"more than {MAX_RECORDS} records in one request: send them in several")
    return [_canonical(_record(number, text, stream, key, keyed)) for number, text in lines]


def _record(number: int, text: str, stream: StreamDef, key: ProviderKey | None, keyed: bool) -> dict[str, Any]:
    def fail(message: str) -> ApiError:
        return ApiError(422, f"line {number}: {message}", line=number)

    try:
        record = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _Duplicate as exc:
        raise fail(f"the key {str(exc)[:64]!r} appears twice") from None
    except RecursionError:
        raise fail("not JSON this service reads (nested too deeply)") from None
    except ValueError as exc:
        column = getattr(exc, "colno", None)
        raise ApiError(422, f"line {number}: not JSON ({getattr(exc, 'msg', 'invalid')})", line=number,
                       column=column) from None
    if not isinstance(record, dict):
        raise fail("a record must be a JSON object")
    provider = stream.punctuated_by
    if record.get("kind") == "sp":
        if not stream.punctuated:
            raise fail(f"stream {stream.name} carries no security punctuations (it has no key)")
        extra = sorted(set(record) - set(SP_FIELDS) - ({provider} if provider else set()) - {"seq"})
        if extra:
            raise fail(f"an SP record has no field {extra[0][:64]!r}")
        try:
            sp_from_record(record, f"line {number}", provider)
        except InputError as exc:
            raise ApiError(422, str(exc).splitlines()[0], line=number) from None
        checked = dict(record)
        checked["ts"] = format_timestamp(parse_timestamp(str(record["ts"])))
        if provider is not None:
            checked[provider] = _typed(record.get(provider), provider, stream, fail)
    else:
        if "kind" in record:
            raise fail(f"kind must be \"sp\" or absent (a tuple), not {str(record['kind'])[:32]!r}")
        allowed = set(stream.attributes) | {"seq"} | (set(TUPLE_SP_FIELDS) if stream.punctuated else set())
        extra = sorted(set(record) - allowed)
        if extra:
            raise fail(f"stream {stream.name} has no attribute {extra[0][:64]!r}")
        if record.get("ts") is None:
            raise fail("a tuple needs its event time ts")
        checked = {name: _typed(record[name], name, stream, fail) for name in stream.attributes if name in record}
        for name, dtype in TUPLE_SP_FIELDS.items():  # the policy (sp_ts, sp_csn) a tuple says governs it
            if name in record:
                checked[name] = _typed_as(record[name], name, dtype, fail)
    if "seq" in record:
        seq = record["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2 ** 63:
            raise fail("seq must be a non-negative 64-bit integer")
        checked["seq"] = seq
    if provider is not None:
        value = checked.get(provider)
        if value is None:
            raise fail(f"the record lacks the provider attribute {provider}")
        if keyed and not _same(value, key):
            raise ApiError(403, f"line {number}: your token speaks for {provider} = {_shown(key)} only, "
                                f"not {_shown(value)}", line=number)
    return checked


def _typed(value: Any, name: str, stream: StreamDef, fail: Any) -> Any:
    """``value`` checked against the attribute's declared type (None stays NULL)."""
    return _typed_as(value, name, stream.type_of(name), fail)


def _typed_as(value: Any, name: str, dtype: str | None, fail: Any) -> Any:
    if value is None:
        return None
    if dtype in _RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise fail(f"{name} must be an {dtype}, not {_shown(value)}")
        if not -_RANGES[dtype] <= value < _RANGES[dtype]:
            raise fail(f"{name} is out of the range of an {dtype}")
        return value
    if dtype == "double":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise fail(f"{name} must be a finite number, not {_shown(value)}")
        return float(value)
    if dtype == "boolean":
        if not isinstance(value, bool):
            raise fail(f"{name} must be true or false, not {_shown(value)}")
        return value
    if dtype == "string":
        if not isinstance(value, str):
            raise fail(f"{name} must be a string, not {_shown(value)}")
        return value
    if dtype == "timestamp":
        try:
            when: datetime = parse_timestamp(value) if isinstance(value, str) else None  # type: ignore[assignment]
        except ValueError:
            when = None  # type: ignore[assignment]
        if when is None:
            raise fail(f"{name} must be an ISO-8601 timestamp such as 2026-03-01T10:00:00Z")
        return format_timestamp(when)
    raise fail(f"{name} has an unknown type {dtype}")


def append_records(folder: str | os.PathLike[str], lines: list[str]) -> Path:
    """Write ``lines`` as one new file of the stream's input folder, whole or not at all."""
    folder = private_dir(folder)
    name = _next_name()
    target = Path(folder) / name
    hidden = target.with_name("." + name + ".partial")  # readers skip names starting with '.'
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(hidden, target)
    except BaseException:
        Path(hidden).unlink(missing_ok=True)
        raise
    return target


def _next_name() -> str:
    """``sw-<ns since the epoch, 20 digits>-<random>.jsonl``: increasing within this process."""
    with _lock:
        name = f"sw-{time.time_ns():020d}-{secrets.token_hex(4)}.jsonl"
        if name <= _last_name[0]:  # the clock stepped back: keep the order anyway
            stamp = int(_last_name[0][3:23]) + 1
            name = f"sw-{stamp:020d}-{secrets.token_hex(4)}.jsonl"
        _last_name[0] = name
        return name


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _same(value: Any, key: ProviderKey | None) -> bool:
    return key is not None and type(value) is type(key) and value == key


def _shown(value: Any) -> str:
    return json.dumps(value)[:40] if not isinstance(value, str) else repr(value[:40])


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for k, v in pairs:
        if k in record:
            raise _Duplicate(k)
        record[k] = v
    return record


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


__all__ = ["MAX_BODY", "append_records", "check_records"]
