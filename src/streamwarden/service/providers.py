"""Records a provider appends to a stream: checked whole, then added in one atomic file.

A broken record in a stream's input stops every query that reads it (the engine fails
closed), so the gateway lets nothing through that the engine would call broken, and
rewrites what it accepts in the engine's own canonical form:

* the body is UTF-8 JSON lines (split at LF only, :mod:`streamwarden.records`); each line
  one JSON object, with no duplicate key, no ``NaN``/``Infinity``, no number beyond a
  double (``1e400``) and no string holding a lone surrogate (``"\\ud800"``);
* a tuple has ``ts`` and only the stream's attributes (plus ``seq``, a provider's arrival
  stamp), each of its declared JSON type and range only
  (:func:`streamwarden.catalog.values.typed_value`: ``int`` 32 bits, ``long`` 64, finite
  ``double``, timestamps in ISO-8601 within years 1..9999);
* a punctuated stream also takes SP records (``"kind": "sp"``), valid by the one
  definition of an SP record, :func:`streamwarden.catalog.punctuations.checked_sp_record`,
  and written as its canonical record; its tuples name the policy they were sent under
  (``sp_ts``, ``sp_csn``): a tuple without them would be accepted and never delivered;
* no event time (``ts``, an SP's ``ts``, ``sp_ts``) lies ahead of the service's clock by
  more than the allowed skew (``serve --max-clock-skew``, default 5 minutes): one reading
  dated 9999 would move the stream's watermark past every other provider's readings;
* a provider token for one sub-stream (``--key``) may only send tuples and SPs whose
  ``punctuated_by`` attribute is its own value: the gateway decides who may speak for whom.

Any fault refuses the whole body, naming the line and column of the first bad record;
otherwise the records become one new file in the stream's input folder, written under a
hidden name and renamed (a reader never sees half of it), named so that it sorts after
every file the gateway wrote before (arrival order).

    >>> from streamwarden.api import load_catalog_text
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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from streamwarden.api import (MAX_SN, ProviderKey, StreamDef, checked_sp_record, format_timestamp, parse_timestamp,
                              shown, typed_value)
from streamwarden.errors import InputError
from streamwarden.names import PRIVATE_FILE, private_dir
from streamwarden.records import record_lines
from streamwarden.service.errors import ApiError

MAX_BODY = 16 * 1024 * 1024  # bytes in one request: a bigger batch is several requests
MAX_RECORDS = 100_000
#: How far ahead of the service's clock a record's event time may be (``serve --max-clock-skew``).
#: Providers' clocks drift and their devices batch, so a small lead must pass; any lead is also
#: how far one provider can move the stream's watermark past the others' on-time readings (with
#: ``--lateness`` at least this, none is dropped). Five minutes is the tolerance clock-checking
#: protocols commonly use (Kerberos's default): minutes of unsynchronized drift pass, a mistyped
#: year or a hostile 9999 does not.
MAX_CLOCK_SKEW = timedelta(minutes=5)
#: Fields a tuple of a punctuated stream carries besides its attributes: the sp-batch that governs it.
TUPLE_SP_FIELDS = {"sp_ts": "timestamp", "sp_csn": "int"}
_lock = threading.Lock()
_last_name = [""]


class _Duplicate(ValueError):
    pass


def check_records(body: bytes, stream: StreamDef, key: ProviderKey | None, *,
                  keyed: bool = False, latest: datetime | None = None) -> list[str]:
    """The body's records in canonical JSON, or :class:`ApiError` (422) for the first bad one.
    ``keyed``: the caller speaks for the sub-stream ``key`` only. ``latest``: the latest event
    time accepted (the service's clock plus the allowed skew; None: no bound)."""
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
    return [_canonical(_record(number, text, stream, key, keyed, latest)) for number, text in lines]


Fail = Callable[[str], ApiError]


def _record(number: int, text: str, stream: StreamDef, key: ProviderKey | None, keyed: bool,
            latest: datetime | None) -> dict[str, Any]:
    """Line ``number`` of a body as the canonical record to write, or the ApiError refusing it."""
    def fail(message: str) -> ApiError:
        return ApiError(422, f"line {number}: {message}", line=number)

    record = _json_object(number, text, fail)
    provider = stream.punctuated_by
    if record.get("kind") == "sp":
        if not stream.punctuated:
            raise fail(f"stream {stream.name} carries no security punctuations (it has no key)")
        try:  # the one definition of a valid SP record (the engine's reader is held to it)
            _, checked = checked_sp_record(record, f"line {number}", provider,
                                           stream.type_of(provider) if provider else None)
        except InputError as exc:
            raise ApiError(422, str(exc).splitlines()[0], line=number) from None
    else:
        checked = _tuple(record, stream, fail)
    if latest is not None:
        for name in ("ts", "sp_ts"):
            if name in checked and parse_timestamp(str(checked[name])) > latest:
                raise fail(f"{name} {checked[name]} is ahead of the service's clock by more than the allowed skew "
                           f"(at most {format_timestamp(latest)} now): event time cannot be in the future")
    if provider is not None:
        value = checked.get(provider)
        if value is None:
            raise fail(f"the record lacks the provider attribute {provider}")
        if keyed and not _same(value, key):
            raise ApiError(403, f"line {number}: your token speaks for {provider} = {shown(key)} only, "
                                f"not {shown(value)}", line=number)
    return checked


def _json_object(number: int, text: str, fail: Fail) -> dict[str, Any]:
    """One line as a JSON object: no duplicate key, no NaN/Infinity, no number beyond a double."""
    try:
        record = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _Duplicate as exc:
        raise fail(f"the key {shown(str(exc))} appears twice") from None
    except RecursionError:
        raise fail("not JSON this service reads (nested too deeply)") from None
    except ValueError as exc:
        column = getattr(exc, "colno", None)
        raise ApiError(422, f"line {number}: not JSON ({getattr(exc, 'msg', 'invalid')})", line=number,
                       column=column) from None
    if not isinstance(record, dict):
        raise fail("a record must be a JSON object")
    for name, value in record.items():  # json reads 1e400 as infinity, which no reader can be given back
        if isinstance(value, float) and not math.isfinite(value):
            raise fail(f"{shown(name)} is a number beyond the range of a double")
    return record


def _tuple(record: dict[str, Any], stream: StreamDef, fail: Fail) -> dict[str, Any]:
    """A tuple: the stream's attributes of their declared types, the policy it names, its ``seq``."""
    if "kind" in record:
        raise fail(f"kind must be \"sp\" or absent (a tuple), not {shown(record['kind'])}")
    allowed = set(stream.attributes) | {"seq"} | (set(TUPLE_SP_FIELDS) if stream.punctuated else set())
    extra = sorted(set(record) - allowed)
    if extra:
        raise fail(f"stream {stream.name} has no attribute {shown(extra[0])}")
    if record.get("ts") is None:
        raise fail("a tuple needs its event time ts")
    checked = {name: _typed(record[name], name, stream.type_of(name), fail)
               for name in stream.attributes if name in record}
    if stream.punctuated:
        checked.update(_policy_named(record, fail))
    if "seq" in record:
        seq = record["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2 ** 63:
            raise fail("seq must be a non-negative 64-bit integer")
        checked["seq"] = seq
    return checked


def _policy_named(record: dict[str, Any], fail: Fail) -> dict[str, Any]:
    """A punctuated stream's tuple names the policy it was sent under: ``sp_ts``, the policy's
    ``ts``, and ``sp_csn``, its complete sequence number. The shield denies a tuple without
    them (a tuple is never governed by a policy it does not name, not even its provider's
    latest), so it would be accepted and never delivered: it is refused instead."""
    named = {}
    for name, dtype in TUPLE_SP_FIELDS.items():
        if record.get(name) is None:
            raise fail(f"{name} is missing: a tuple of a punctuated stream names the policy it was sent under "
                       f"(sp_ts: its SPs' ts, sp_csn: how many SPs it has), or no one may ever read it")
        named[name] = _typed(record[name], name, dtype, fail)
    if not 1 <= named["sp_csn"] <= MAX_SN:
        raise fail(f"sp_csn must be the number of the policy's SPs, 1 to {MAX_SN}, not {named['sp_csn']}")
    return named


def _typed(value: Any, name: str, dtype: str | None, fail: Fail) -> Any:
    """``value`` checked against a declared type (None stays NULL), as :func:`typed_value`."""
    try:
        return typed_value(value, dtype, name)
    except InputError as exc:
        raise fail(str(exc)) from None


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


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for k, v in pairs:
        if k in record:
            raise _Duplicate(k)
        record[k] = v
    return record


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


__all__ = ["MAX_BODY", "MAX_CLOCK_SKEW", "append_records", "check_records"]
