"""What a running query or network has done so far, for a progress line per micro-batch.

Spark reports each micro-batch of each streaming query to its listeners (rows read, rows
written, the event time read). :class:`ProgressWatch` listens — pushed by Spark, so a
network of a thousand pipelines costs no polling — and sums it up with what only the
runtime knows (the rows each user was delivered, and those withheld outside her grants):

    >>> p = Progress(micro_batches=3, rows_in=1200, rows_out=37, event_time="2026-03-01T10:05:00Z")
    >>> p.line()
    '3 micro-batches · 1,200 rows in · 37 rows out · event time 2026-03-01T10:05:00Z'
    >>> Progress(1, 40, 12, None, users=3, withheld=2).line()
    '1 micro-batch · 40 rows in · 12 rows delivered to 3 users · 2 withheld'
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from streamwarden.engine.sinks import ROWS_OUT


@dataclass(frozen=True)
class Progress:
    """Totals since the watch began: micro-batches that read rows, rows read, rows written (or,
    for a network, delivered to ``users`` users, ``withheld`` outside their grants), and the
    latest event time read."""

    micro_batches: int
    rows_in: int
    rows_out: int
    event_time: str | None
    users: int | None = None
    withheld: int | None = None

    def line(self) -> str:
        parts = [_count(self.micro_batches, "micro-batch", "micro-batches"), f"{self.rows_in:,} rows in"]
        if self.users is None:
            parts.append(f"{self.rows_out:,} rows out")
        else:
            parts.append(f"{self.rows_out:,} rows delivered to {_count(self.users, 'user', 'users')}")
        if self.withheld:
            parts.append(f"{self.withheld:,} withheld")
        if self.event_time:
            parts.append(f"event time {self.event_time}")
        return " · ".join(parts)


class Deliveries(Protocol):
    """A runner that knows what it delivered per user (the shared network)."""

    def delivery_totals(self) -> tuple[int, int, int]:
        """(rows delivered, users who received rows, rows withheld outside grants)."""


class ProgressWatch(StreamingQueryListener):
    """Listens to every streaming query of ``spark`` from now on (until :meth:`close`) and keeps
    the totals; :meth:`changed` says whether a micro-batch with rows finished since it was last
    asked. ``runner``, when it knows its deliveries (:class:`Deliveries`), gives the rows out."""

    def __init__(self, spark: SparkSession, runner: object | None = None):
        self._spark = spark
        self._deliveries: Callable[[], tuple[int, int, int]] | None = None
        self._runner: object | None = None
        self._lock = threading.Lock()
        self._batches = self._rows_in = self._rows_out = 0
        self._event_time: str | None = None
        self._news = False
        # per run of a query, the last micro-batch counted: both the listener and a backfill see a
        # run's batches in order, so one number per run counts each once (a set of every batch
        # would grow by a thousand entries a second at a thousand pipelines, for as long as it runs)
        self._last: dict[str, int] = {}
        self.attach(runner)
        spark.streams.addListener(self)

    # -- Spark's listener calls (on its callback thread) --------------------------------------------
    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        self._count(str(progress.runId), int(progress.batchId), int(progress.numInputRows or 0),
                    _written(progress.sink.numOutputRows if progress.sink is not None else None,
                             progress.observedMetrics), (progress.eventTime or {}).get("max"))

    def _count(self, run: str, batch: int, rows: int, written: int | None, latest: str | None) -> None:
        if rows <= 0:
            return  # a no-data batch (a watermark moving): nothing for a person to see
        with self._lock:
            if batch <= self._last.get(run, -1):
                return
            self._last[run] = batch
            self._batches += 1
            self._rows_in += rows
            self._rows_out += max(0, int(written or 0))
            if latest and (self._event_time is None or latest > self._event_time):  # ISO-8601 UTC: sorts as text
                self._event_time = latest
            self._news = True

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    # -- the caller's ------------------------------------------------------------------------------
    def attach(self, runner: object | None) -> None:
        """Count ``runner``'s deliveries as the rows out, when it knows them (:class:`Deliveries`),
        and the micro-batches its queries finished before the watch listened (Spark keeps their
        recent progress): a query started just before may well have."""
        self._deliveries = getattr(runner, "delivery_totals", None)
        self._runner = runner
        self._settle()

    def _settle(self) -> None:
        """Count what the runner's queries report of themselves and the listener has not heard
        (yet: Spark's listener bus is asynchronous, and a query that just ended may not have told it)."""
        runner = self._runner
        streams = [runner] if hasattr(runner, "recentProgress") else list(getattr(runner, "streams", None) or [])
        for stream in streams:
            try:
                recent = stream.recentProgress
            except Exception:  # a query that has gone: its batches were counted, or are lost to us
                continue
            for p in recent:
                self._count(str(p.get("runId")), int(p.get("batchId", -1)), int(p.get("numInputRows") or 0),
                            _written((p.get("sink") or {}).get("numOutputRows"), p.get("observedMetrics")),
                            (p.get("eventTime") or {}).get("max"))

    def changed(self) -> bool:
        """Has a micro-batch with rows finished since the last call?"""
        with self._lock:
            news, self._news = self._news, False
        return news

    def totals(self) -> Progress:
        with self._lock:
            batches, rows_in, rows_out, event_time = self._batches, self._rows_in, self._rows_out, self._event_time
        if self._deliveries is None:
            return Progress(batches, rows_in, rows_out, event_time)
        delivered, users, withheld = self._deliveries()
        return Progress(batches, rows_in, delivered, event_time, users=users, withheld=withheld)

    def final(self) -> Progress:
        """The totals once the run has ended: what its queries report of themselves included."""
        self._settle()
        return self.totals()

    def close(self) -> None:
        try:
            self._spark.streams.removeListener(self)
        except Exception:  # a session already stopped has no listeners left to remove
            pass


def _written(sink_rows: int | None, observed: Any) -> int:
    """Rows a micro-batch wrote: its sink's count, else (a foreachBatch sink reports -1) the
    run's own observation (:data:`~streamwarden.engine.sinks.ROWS_OUT`), else 0."""
    if sink_rows is not None and sink_rows >= 0:
        return int(sink_rows)
    row = (observed or {}).get(ROWS_OUT)  # a Row of the observation's columns
    return int(row["rows"]) if row is not None else 0


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


__all__ = ["Deliveries", "Progress", "ProgressWatch"]
