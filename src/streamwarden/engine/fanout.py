"""One micro-batch's rows fanned out to many recipients by one write.

A group's rows (the event time, the member, the row as JSON: what
:func:`~streamwarden.engine.shared.group_rows` gives) go to every recipient whose member
emitted them within one of her periods (a grant's span). Spark's partitioned write
(``partitionBy``) would make a folder per recipient inside the job: at a thousand
recipients with a few rows each, 7-8 s of file commits a micro-batch on two cores. Instead
the rows are laid out once, sorted by recipient, in a handful of large files (one per
*slot*, a hash of the recipient), their sizes per recipient counted by Spark in the same
pass, and each recipient's rows are then a byte range that the driver copies into a file of
her own (``copy_file_range``: no row passes through Python).

A micro-batch of a few rows (at most :data:`FEW_ROWS`, what a stream at a few thousand
rows a second brings in a trigger, none longer than :data:`SHORT_ROW_BYTES`) is not laid
out: laying out takes four Spark jobs with two shuffles, about half a second on two cores
whatever the rows, where collecting the rows to the driver takes one job (30-50 ms). The
driver then sorts them per recipient and writes each recipient's file from memory. The
probe is the collect itself (of at most ``FEW_ROWS + 1`` rows, a long row's text left
out): a larger batch pays one small job more and is laid out. The two bounds cap what a
batch can put in the driver's memory (80 MiB of text), whatever a provider's records hold.

Within a recipient's file the rows are in event-time order, then by their text (in both
ways: Spark orders strings by their UTF-8 bytes, which is Python's order of code points):
the same rows give the same bytes whatever Spark's partitioning, which is what lets a
micro-batch Spark runs again after a crash rewrite exactly what it wrote before.

    >>> # with write_per_recipient(rows, [(0, 3, since, None)], Path("scratch")) as out:
    >>> #     out.received == {0: 12}; out.copy(0, Path("her-rows.txt"))
"""

from __future__ import annotations

import os
import shutil
from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from streamwarden.engine.columns import MEMBER
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.execute import iso_timestamp
from streamwarden.engine.shared import ROW
from streamwarden.names import PRIVATE_FILE

TO = "_to"  # the recipient's number
#: The name of a recipient's file in a batch folder of her own.
PART = "part-00000.txt"
#: Threads that write recipients' files and delivery logs side by side.
IO_THREADS = 4
#: Up to this many rows, a fan-out collects the rows to the driver instead of laying them out...
FEW_ROWS = 20_000
#: ... when none of them is longer than this (UTF-8 bytes): at most 80 MiB of text in memory.
SHORT_ROW_BYTES = 4096
_SLOT = "_slot"  # the laid-out file a recipient's rows are in
_TIMESTAMP = TimestampType()


class FanOutError(RuntimeError):
    """The laid-out files do not hold what Spark counted: nothing is delivered from them."""


class FannedOut:
    """One fan-out's rows, until closed: each recipient's row count (``received``; none:
    absent), when asked each member's rows whoever received them (``emitted``: how many, and the
    latest event time in ISO 8601), and :meth:`copy` to put a recipient's rows in a file."""

    def __init__(self, received: dict[int, int], emitted: dict[int, tuple[int, str]]):
        self.received = received
        self.emitted = emitted

    def copy(self, recipient: int, target: Path) -> None:
        """Recipient's rows (she has some) into the new file ``target`` (0600). Safe from threads:
        a file per recipient is the file system's latency, which a few threads overlap."""
        raise KeyError(f"recipient {recipient} received no rows")  # a fan-out with none: no one to copy

    def close(self) -> None:
        """Let go of what holds the rows (files, memory)."""

    def __enter__(self) -> "FannedOut":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _LaidOut(FannedOut):
    """Rows laid out by Spark in a file per slot: a recipient's rows are a byte range of one."""

    def __init__(self, received: dict[int, int], emitted: dict[int, tuple[int, str]],
                 ranges: dict[int, tuple[Path, int, int]], scratch: Path):
        super().__init__(received, emitted)
        self._ranges = ranges  # recipient -> (slot file, offset, bytes)
        self._scratch = scratch
        self._handles: dict[Path, int] = {}
        try:
            for path, _, _ in ranges.values():
                if path not in self._handles:
                    self._handles[path] = os.open(path, os.O_RDONLY)
        except OSError:
            self.close()  # the files opened so far, and the scratch folder
            raise

    def copy(self, recipient: int, target: Path) -> None:
        path, offset, size = self._ranges[recipient]
        _copy_range(self._handles[path], offset, size, target)

    def close(self) -> None:
        for handle in self._handles.values():
            os.close(handle)
        self._handles.clear()
        shutil.rmtree(self._scratch, ignore_errors=True)


class _Collected(FannedOut):
    """A few rows, collected: each recipient's file is bytes in memory."""

    def __init__(self, received: dict[int, int], emitted: dict[int, tuple[int, str]], texts: dict[int, bytes]):
        super().__init__(received, emitted)
        self._texts = texts

    def copy(self, recipient: int, target: Path) -> None:
        text = self._texts[recipient]
        fd = _create(target)
        try:
            written = 0
            while written < len(text):
                written += os.write(fd, text[written:])
        finally:
            os.close(fd)

    def close(self) -> None:
        self._texts.clear()


def write_per_recipient(rows: DataFrame, periods: Sequence[tuple[int, int, datetime, datetime | None]],
                        scratch: Path, *, emitted: bool = False, few_rows: int = FEW_ROWS) -> FannedOut:
    """Each recipient's rows ready for :meth:`FannedOut.copy` (laid out in ``scratch`` until
    the result is closed, or, up to ``few_rows`` rows none of them long, in memory).

    ``periods`` lists ``(r, member, from, until)``: recipient ``r`` receives the rows of
    ``member`` whose event time is in ``[from, until)`` (``until`` None: open). A recipient
    may have several periods; they must not overlap (a row would be received twice).
    ``emitted``: count each member's rows too (``rows`` is read more than once: persist it)."""
    if not periods and not emitted:
        return FannedOut({}, {})
    short = F.when(F.octet_length(ROW) <= SHORT_ROW_BYTES, F.col(ROW))  # a long row: NULL, and laid out
    # sorted by Spark (each member's rows in the files' order), the bound kept per partition
    few = (rows.select(F.col(MEMBER), F.unix_micros(EVENT).alias(EVENT), iso_timestamp(F.col(EVENT)).alias("_at"),
                       short.alias(ROW))
           .orderBy(MEMBER, EVENT, ROW).limit(few_rows + 1).collect())
    if len(few) <= few_rows and all(row[3] is not None for row in few):
        return _collect(few, periods, emitted)
    return _lay_out(rows, periods, scratch, emitted)


def _collect(few: list[Row], periods: Sequence[tuple[int, int, datetime, datetime | None]],
             emitted: bool) -> FannedOut:
    """The fan-out of rows collected as (member, event time in microseconds, its ISO text, row),
    in that order (each member's rows sorted by Spark): each recipient's rows are slices of her
    member's, one per period, found by bisection and joined in the periods' order (they do not
    overlap, so the joined slices keep the order)."""
    by_member: dict[int, list[tuple[int, str, str]]] = {}
    for member, micros, at, text in few:
        by_member.setdefault(int(member), []).append((int(micros), text, at))
    members = {member: (len(items), items[-1][2]) for member, items in by_member.items()}
    spans: dict[int, list[tuple[int, str, str]]] = {}
    for r, member, start, until in sorted(periods, key=lambda p: (p[0], _micros(p[2]))):
        items = by_member.get(member, [])
        begin = bisect_left(items, (_micros(start),))
        end = len(items) if until is None else bisect_left(items, (_micros(until),))
        if begin < end:
            spans.setdefault(r, []).extend(items[begin:end])
    texts = {r: "".join(f"{text}\n" for _, text, _ in items).encode("utf-8") for r, items in spans.items()}
    return _Collected({r: len(items) for r, items in spans.items()}, members if emitted else {}, texts)


def _micros(at: datetime) -> int:
    """``at`` in microseconds since the epoch, as Spark stores a timestamp (a naive time is local)."""
    micros: int = _TIMESTAMP.toInternal(at)
    return micros


def _lay_out(rows: DataFrame, periods: Sequence[tuple[int, int, datetime, datetime | None]], scratch: Path,
             emitted: bool) -> FannedOut:
    """The fan-out of many rows: laid out by Spark, sorted by recipient, in a file per slot."""
    spark = rows.sparkSession
    schema = StructType([StructField("_r", LongType()), StructField("_m", LongType()),
                         StructField("_from", TimestampType()), StructField("_until", TimestampType())])
    table = F.broadcast(spark.createDataFrame(list(periods), schema))
    matched = rows.join(table, (rows[MEMBER] == table["_m"]) & (rows[EVENT] >= table["_from"])
                        & (table["_until"].isNull() | (rows[EVENT] < table["_until"])), "inner")
    slots = max(1, spark.sparkContext.defaultParallelism)
    # The slot is a function of the recipient, not Spark's partition number: the folder a
    # slot's file lands in names it, so no recipient's range is ever read from another file.
    laid = (matched.select(F.col("_r").alias(TO), F.col(EVENT), F.col(ROW))
            .withColumn(_SLOT, F.pmod(F.xxhash64(TO), F.lit(slots)))
            .repartition(slots, _SLOT).sortWithinPartitions(_SLOT, TO, EVENT, ROW)
            .persist())
    try:
        stats = laid.groupBy(_SLOT, TO).agg(F.count(F.lit(1)).alias("rows"),
                                            F.sum(F.octet_length(ROW) + 1).alias("bytes"),
                                            F.lit(None).cast("string").alias("latest"))
        if emitted:  # one job for both: each Spark job costs a quarter second of scheduling on two cores
            stats = stats.unionByName(rows.groupBy(F.col(MEMBER).alias(TO)).agg(
                F.count(F.lit(1)).alias("rows"), F.lit(None).cast("long").alias("bytes"),
                iso_timestamp(F.max(EVENT)).alias("latest")).withColumn(_SLOT, F.lit(None).cast("long")))
        counted = stats.collect()
        sizes = sorted((int(r[_SLOT]), int(r[TO]), int(r["rows"]), int(r["bytes"])) for r in counted
                       if r[_SLOT] is not None)
        members = {int(r[TO]): (int(r["rows"]), str(r["latest"])) for r in counted if r[_SLOT] is None}
        if not sizes:
            return FannedOut({}, members)
        shutil.rmtree(scratch, ignore_errors=True)
        # the writer's order is the laid-out one (its partition column leads the sort)
        laid.select(_SLOT, ROW).write.mode("overwrite").partitionBy(_SLOT).text(str(scratch))
    finally:
        laid.unpersist()
    try:
        ranges = _ranges(scratch, sizes)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return _LaidOut({r: n for _, r, n, _ in sizes}, members, ranges, scratch)


def _ranges(scratch: Path, sizes: list[tuple[int, int, int, int]]) -> dict[int, tuple[Path, int, int]]:
    """Each recipient's byte range in its slot's file (``sizes``: slot, recipient, rows, bytes,
    in the files' order), once every file is checked to hold exactly what Spark counted."""
    files = {slot: _only_part(scratch / f"{_SLOT}={slot}") for slot in {s for s, _, _, _ in sizes}}
    for slot, path in files.items():
        expected = sum(b for s, _, _, b in sizes if s == slot)
        if path.stat().st_size != expected:
            raise FanOutError(f"{path} holds {path.stat().st_size} bytes where {expected} were counted")
    ranges = {}
    offsets = dict.fromkeys(files, 0)
    for slot, recipient, _, size in sizes:
        ranges[recipient] = (files[slot], offsets[slot], size)
        offsets[slot] += size
    return ranges


def _only_part(slot: Path) -> Path:
    parts = [p for p in slot.iterdir() if p.name.startswith("part-")]
    if len(parts) != 1:
        raise FanOutError(f"{slot} holds {len(parts)} part files where one was written")
    return parts[0]


def _no_copy_file_range(source: int, target: int, count: int, offset: int) -> int:
    raise OSError("copy_file_range is Linux's")


_LARGE = 1 << 20
_copy_file_range = getattr(os, "copy_file_range", _no_copy_file_range)


def _create(target: Path) -> int:
    """A new private file (or one emptied) at ``target``, never through a symbolic link."""
    return os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)


def _copy_range(source: int, offset: int, size: int, target: Path) -> None:
    fd = _create(target)
    try:
        copied = 0
        while copied < size:
            if size - copied < _LARGE:  # a few rows: one read and one write are quicker
                n = os.write(fd, os.pread(source, size - copied, offset + copied))
            else:
                try:
                    n = _copy_file_range(source, fd, size - copied, offset + copied)
                except OSError:  # a file system (or a system) without it: read and write
                    n = os.write(fd, os.pread(source, min(size - copied, _LARGE), offset + copied))
            if n <= 0:
                raise FanOutError(f"{target}: the laid-out file ended {size - copied} bytes early")
            copied += n
    finally:
        os.close(fd)


__all__ = ["FEW_ROWS", "SHORT_ROW_BYTES", "FanOutError", "FannedOut", "IO_THREADS", "PART", "TO", "write_per_recipient"]
