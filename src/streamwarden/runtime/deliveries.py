"""Each user's rows of each query in delivery order, addressed by durable cursors.

A running network puts every micro-batch's rows for a user into a folder of its own,
``DIR/<user>/<query>/batch=<fingerprint>-<C>/`` (C: the cursor before the batch, ``g<C>``
for a shared group's: the names count nothing she did not receive; outputs of earlier
versions numbered her batches ``<N>`` instead), then appends one line to that query's
delivery log ``_delivered.jsonl`` (:func:`deliver_once`)::

    {"batch": "batch=3fa2b0c91d2e-000000000000028", "rows": 12, "end": 40, "key": "5f0c…:live-7"}

(``end``: the cursor after the batch; ``key``: the micro-batch that made it, so that a batch
Spark runs again is recognised.)

The log is the delivery order. A row's *cursor* is the number of rows delivered before
and including it: ``after=N`` resumes after the N-th row. Cursors stay valid across a
crash and a restart because nothing they count ever moves:

* Spark replays an unfinished micro-batch with the same id and the same input, so a
  batch written again (after ``kill -9`` between the move and Spark's commit) lands in
  the same folder with the same rows, and its log line is not appended twice.
* Within a batch, rows are read in the order of their JSON text, never by how Spark split
  them into part files (which differs between attempts).
* A line cut short by a crash is ignored by readers and removed by the next append.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> def place(name): (folder / name).mkdir(); _ = (folder / name / "part-0.txt").write_text('{"x":2}\\n{"x":1}\\n')
    >>> deliver_once(folder, "live-4", 2, "batch=a-", place), deliver_once(folder, "live-4", 2, "batch=a-", place)
    (True, False)
    >>> read_rows(folder, after=0, limit=10).rows, read_rows(folder, after=1, limit=10).next
    ([{'x': 1}, {'x': 2}], 2)
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import itertools
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streamwarden.names import PRIVATE_FILE

LOG = "_delivered.jsonl"
SPGEN_PART = "part-00000-0-spgen.txt"  # ON RESULT: SPGen's policy records ahead of the rows (not rows)
MAX_CURSOR = 10 ** 15

_cache_lock = threading.Lock()
_cache: dict[tuple[str, tuple[tuple[str, int, int], ...]], list[str]] = {}
_CACHE_LIMIT = 4096  # batches kept parsed (a batch never changes once logged, but for a replay rewriting it)


@dataclass(frozen=True)
class Delivery:
    """One logged batch: its folder name and how many rows it delivered."""

    batch: str
    rows: int
    end: int | None = None  # the cursor after it (logs of earlier versions: absent)
    key: str | None = None  # what made it, for a group's deliveries (``live-7`` of a group)


@dataclass(frozen=True)
class Page:
    """Rows after a cursor, as the JSON texts the network wrote (a service passes them on as
    they are): ``next`` is the cursor after the last of them (``after`` when none)."""

    lines: list[str]
    next: int
    total: int

    @property
    def rows(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]


def deliver_once(folder: str | os.PathLike[str], key: str, rows: int, prefix: str,
                 place: Callable[[str], None], *, sync: bool = True, whole_log: bool = False) -> bool:
    """Deliver ``rows`` rows made by ``key`` into ``folder`` once: unless a delivery of ``key`` is
    logged already (Spark runs its latest micro-batch again after a crash), the batch is named
    ``prefix`` and the cursor before it (a name counts only rows the user received), ``place``
    puts the rows in that folder, and the log records it. True when delivered now.

    One read of the log's tail and one append: the per-user cost of a group's micro-batch
    (``whole_log``: the whole log is searched for ``key``, for a delivery that may have been
    logged many batches ago, as a group's backfill done again after a crash). Deliveries into
    one folder from two threads (a group's micro-batch and its backfill) take turns.
    ``sync=False`` leaves the log's flush to the caller (a group flushes the file system once
    for all its recipients, instead of once each: each flush commits the file system's journal).

        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> put = lambda name: (folder / name).mkdir()
        >>> deliver_once(folder, "live-3", 2, "batch=g-", put), deliver_once(folder, "live-3", 2, "batch=g-", put)
        (True, False)
        >>> [(d.batch, d.end) for d in deliveries(folder)]
        [('batch=g-000000000000000', 2)]
    """
    log = Path(folder) / LOG
    with _FOLDER_LOCKS[hash(str(log)) % len(_FOLDER_LOCKS)]:
        entries, intact = _read_log(log, tail=None if whole_log else TAIL_BYTES)
        if any(e.key == key for e in entries):
            return False
        before = _end(log, entries)
        name = f"{prefix}{before:015d}"
        place(name)
        _append(log, Delivery(name, rows, before + rows, key), intact, sync=sync)
    for listener in tuple(_listeners):
        try:
            listener(Path(folder))
        except Exception:  # a listener's failure never fails a delivery
            pass
    return True


_listeners: list[Callable[[Path], None]] = []
#: Striped locks over the delivery logs: one folder's deliveries take turns (its cursor is read,
#: then the log appended), different folders' rarely meet.
_FOLDER_LOCKS = tuple(threading.Lock() for _ in range(64))


def on_delivery(listener: Callable[[Path], None]) -> Callable[[], None]:
    """Call ``listener(folder)`` after each batch this process delivers into ``folder`` (logged,
    readable; a service's streams wake at once instead of at their next look). Returns the call
    that stops it. ``listener`` runs on the delivering thread (Spark's callback): it must be quick
    and never raise (what it raises is ignored).

        >>> import tempfile
        >>> folder, seen = Path(tempfile.mkdtemp()), []
        >>> stop = on_delivery(seen.append)
        >>> deliver_once(folder, "live-1", 1, "batch=a-", lambda name: (folder / name).mkdir()), seen == [folder]
        (True, True)
        >>> stop()
    """
    _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def flush(folder: str | os.PathLike[str]) -> None:
    """Make every write so far to the file system holding ``folder`` durable, in one call: what
    ``deliver_once(..., sync=False)`` leaves to its caller. Linux's ``syncfs`` flushes that file
    system only; elsewhere ``sync`` flushes them all."""
    syncfs = _syncfs()
    if syncfs is not None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            if syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    os.sync()


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_int], ctypes.c_int
    return function


def _end(log: Path, tail: list[Delivery]) -> int:
    """The cursor at the log's end: the last entry's ``end``, or (a log an earlier version
    wrote) the sum of every entry's rows."""
    if tail and tail[-1].end is not None:
        return tail[-1].end
    return sum(e.rows for e in _read_log(log)[0])


def _append(log: Path, entry: Delivery, intact: bool, *, sync: bool = True) -> None:
    if not intact:  # a crash cut the last line: keep the whole lines only
        with open(log, "r+b") as handle:
            data = handle.read()
            handle.truncate(data.rfind(b"\n") + 1)
    record: dict[str, str | int] = {"batch": entry.batch, "rows": entry.rows}
    if entry.end is not None:
        record["end"] = entry.end
    if entry.key is not None:
        record["key"] = entry.key
    line = json.dumps(record) + "\n"
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
    try:
        os.write(fd, line.encode("utf-8"))  # one write of one short line: whole, or cut and repaired above
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def deliveries(folder: str | os.PathLike[str]) -> list[Delivery]:
    """The logged batches of a user's query, in delivery order (none yet: empty).

    A service reads the same logs many times a second (every poll of every user): each log's
    entries are kept parsed (:class:`_ParsedLogs`), and a read parses only the lines appended
    since. Sound because a log is append-only: the writer only ever cuts a torn last line,
    which was never parsed (only whole lines are)."""
    return _parsed_logs.entries(Path(folder) / LOG)


def delivered(folder: str | os.PathLike[str]) -> int:
    """How many rows the user has received of the query so far."""
    parsed = _parsed_logs.log(Path(folder) / LOG)
    return parsed.total if parsed is not None else 0


def read_rows(folder: str | os.PathLike[str], *, after: int = 0, limit: int = 1000) -> Page:
    """Up to ``limit`` rows after cursor ``after``, in delivery order. A batch logged but not
    readable at the moment (Spark is replaying it) ends the page early: the next read resumes there.
    The page's first batch is found by bisection: a read costs its page, not the log's length."""
    folder = Path(folder)
    page = _page(folder, _parsed_logs.log(folder / LOG), after, limit, batches=None)
    assert page is not None  # no bound on the batches read
    return page


def read_rows_quickly(folder: str | os.PathLike[str], *, after: int = 0, limit: int = 1000) -> Page | None:
    """:func:`read_rows` when it is quick, else None (ask :func:`read_rows` where waiting is
    allowed): the log is parsed already but for at most :data:`QUICK_LOG_BYTES` appended since,
    and the page spans at most :data:`QUICK_BATCHES` batches. A poller following a query's end
    reads this way, from memory and a file or two; a first read after a start, or a page deep
    in the history, does not.

        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> def place(name): (folder / name).mkdir(); _ = (folder / name / "part-0.txt").write_text('{"x":1}\\n')
        >>> _ = deliver_once(folder, "live-1", 1, "batch=a-", place)
        >>> read_rows_quickly(folder, after=0) is None, read_rows(folder).next, read_rows_quickly(folder).next
        (True, 1, 1)
    """
    folder = Path(folder)
    parsed = _parsed_logs.log(folder / LOG, known_only=True)
    if parsed is None:
        return None
    return _page(folder, parsed, after, limit, batches=QUICK_BATCHES)


#: What :func:`read_rows_quickly` reads at most: log bytes appended since the last parse (about
#: 400 entries), and batches in one page.
QUICK_LOG_BYTES = 64 * 1024
QUICK_BATCHES = 8


def _page(folder: Path, parsed: "_Parsed | None", after: int, limit: int, *, batches: int | None) -> Page | None:
    """The page after ``after`` from a parsed log (None: no log yet); None when it would read
    more than ``batches`` batches."""
    if parsed is None:
        return Page([], after, 0)
    ends, count, total = parsed.all_ends, parsed.count, parsed.total
    cursor = min(after, total)
    first = bisect.bisect_right(ends, cursor, 0, count)  # the first batch that ends after the cursor
    position = ends[first - 1] if first else 0  # the cursor before it
    if batches is not None:  # the batches this page spans, up to one more than allowed
        spanned = bisect.bisect_left(ends, cursor + limit, first, min(count, first + batches + 1)) - first + 1
        if spanned > batches and first + batches < count:
            return None
    rows: list[str] = []
    for entry in itertools.islice(parsed.all_entries, first, count):
        lines = _batch_lines(folder / entry.batch)
        if lines is None or len(lines) != entry.rows:
            break  # being rewritten: stop before it
        start = max(cursor, position) - position
        taken = lines[start:start + limit - len(rows)]
        rows.extend(taken)
        cursor = position + start + len(taken)
        position += entry.rows
        if len(rows) >= limit:
            break
    return Page(rows, max(cursor, after) if not rows else cursor, total)


def _batch_lines(batch: Path) -> list[str] | None:
    """A batch's rows as JSON texts in their canonical order (None: the folder is missing)."""
    try:
        parts = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in batch.iterdir()
                       if p.name.startswith("part-") and p.name != SPGEN_PART)
    except OSError:
        return None
    key = (str(batch), tuple(parts))
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    lines: list[str] = []
    try:
        for name, _, _ in parts:
            lines += [line for line in (batch / name).read_text(encoding="utf-8").split("\n") if line]
    except OSError:
        return None
    lines.sort()
    with _cache_lock:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[key] = lines
    return lines


#: How much of a delivery log's end :func:`deliver_once` reads: about twenty entries. A batch
#: Spark runs again is its latest, so what it delivered is among a user's last entries (one
#: per micro-batch of a query, two when late members were caught up in it). Every user with
#: rows pays this read and its parsing at every micro-batch: measured for a thousand users
#: whose logs hold 600 entries (ten minutes of one-second batches), 2.1 s of CPU a batch
#: with a 64 KiB tail, 0.07 s with this one.
TAIL_BYTES = 2 * 1024


@dataclass(frozen=True)
class _Parsed:
    """What :class:`_ParsedLogs` knows of one log: its file (device, inode), how many bytes of
    whole lines it parsed, its first ``count`` entries and the cursor after each, and the last
    such line (to tell the same file from another one that reused the inode).

    The lists only grow, at their end, and are shared by every later :class:`_Parsed` of the
    same file: a log's new lines cost what they are, not a copy of the whole log (a day-old
    query's log holds ~170,000 entries). A reader uses the first ``count`` of them only."""

    device: int
    inode: int
    offset: int
    all_entries: list[Delivery]
    last_line: bytes
    all_ends: list[int]  # the cursor after each entry: rows delivered up to and with it
    count: int

    @property
    def total(self) -> int:
        """Rows delivered in all."""
        return self.all_ends[self.count - 1] if self.count else 0


class _ParsedLogs:
    """Delivery logs parsed so far, by path: at most ``entries`` entries in all (a log grows by
    one a micro-batch, for as long as the network runs), the least recently read forgotten
    first; a log longer than that alone is parsed at every read, as before, and not kept."""

    def __init__(self, entries: int = 500_000):
        self.limit = entries
        self._logs: OrderedDict[Path, _Parsed] = OrderedDict()
        self._held = 0  # entries kept, over every log
        self._lock = threading.Lock()

    def entries(self, log: Path) -> list[Delivery]:
        parsed = self.log(log)
        return parsed.all_entries[:parsed.count] if parsed is not None else []

    def log(self, log: Path, *, known_only: bool = False) -> _Parsed | None:
        """The log parsed (none yet: no entries); with ``known_only``, None when it is not kept
        parsed already or more than :data:`QUICK_LOG_BYTES` were appended since."""
        try:
            handle = open(log, "rb")
        except FileNotFoundError:
            return _NO_LOG
        with handle:
            info = os.fstat(handle.fileno())
            with self._lock:
                known = self._logs.get(log)
            base = None  # what is kept of this file, to go on from
            if known is not None and (known.device, known.inode) == (info.st_dev, info.st_ino) \
                    and info.st_size >= known.offset:
                handle.seek(known.offset - len(known.last_line))
                if handle.read(len(known.last_line)) == known.last_line:  # the same file, grown
                    base = known
            offset = base.offset if base is not None else 0
            if known_only and (base is None or info.st_size - offset > QUICK_LOG_BYTES):
                return None
            if base is not None and offset == info.st_size:  # nothing appended: as kept
                with self._lock:
                    if self._logs.get(log) is base:
                        self._logs.move_to_end(log)
                return base
            handle.seek(offset)
            data = handle.read()
        whole = data.rfind(b"\n") + 1  # the part after the last LF is unfinished: read again next time
        lines = data[:whole].split(b"\n")[:-1]
        more = _parsed(lines)
        with self._lock:
            if base is not None and len(base.all_entries) == base.count:  # nobody went on from it: extend
                entries, ends = base.all_entries, base.all_ends
            else:  # a new file, or another reader extended the lists meanwhile: lists of its own
                entries = base.all_entries[:base.count] if base is not None else []
                ends = base.all_ends[:base.count] if base is not None else []
            running = ends[-1] if ends else 0
            for entry in more:
                running += entry.rows
                ends.append(running)
            entries.extend(more)
            last = lines[-1] + b"\n" if lines else (base.last_line if base is not None else b"")
            parsed = _Parsed(info.st_dev, info.st_ino, offset + whole, entries, last, ends, len(entries))
            replaced = self._logs.pop(log, None)
            self._held -= replaced.count if replaced is not None else 0
            if parsed.count <= self.limit:
                self._logs[log] = parsed
                self._held += parsed.count
            while self._held > self.limit:
                self._held -= self._logs.popitem(last=False)[1].count
        return parsed


_parsed_logs = _ParsedLogs()
_NO_LOG = _Parsed(0, 0, 0, [], b"", [], 0)


def _read_log(log: Path, *, tail: int | None = None) -> tuple[list[Delivery], bool]:
    """The whole lines of a delivery log (``tail``: of its last ``tail`` bytes only), and whether
    the file ends with one."""
    try:
        with open(log, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - tail) if tail is not None else 0
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return [], True
    lines = data.split(b"\n")[:-1]  # the part after the last LF is unfinished
    if start > 0 and lines:
        lines = lines[1:]  # the first line read may have begun before the tail
    return _parsed(lines), data.endswith(b"\n") or not data


def _parsed(lines: list[bytes]) -> list[Delivery]:
    """The entries of whole log lines (a line that is not one is skipped)."""
    entries = []
    for raw in lines:
        try:
            record = json.loads(raw)
            end, key = record.get("end"), record.get("key")
            entries.append(Delivery(str(record["batch"]), int(record["rows"]), None if end is None else int(end),
                                    None if key is None else str(key)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return entries


__all__ = ["LOG", "MAX_CURSOR", "QUICK_BATCHES", "QUICK_LOG_BYTES", "Delivery", "Page", "deliver_once", "deliveries",
           "delivered", "flush", "on_delivery", "read_rows", "read_rows_quickly"]
