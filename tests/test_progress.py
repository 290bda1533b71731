"""The progress lines' totals: each micro-batch counted once, whether the listener or a query's
own recent progress told of it first, in memory that does not grow with the run's length."""

from __future__ import annotations

from types import SimpleNamespace

from streamwarden.runtime.progress import Progress, ProgressWatch


class FakeQuery:
    def __init__(self, progress: list[dict]) -> None:
        self.recentProgress = progress


def _watch() -> ProgressWatch:
    listeners: list[object] = []
    spark = SimpleNamespace(streams=SimpleNamespace(addListener=listeners.append, removeListener=listeners.remove))
    return ProgressWatch(spark)  # type: ignore[arg-type]


def _batch(run: str, batch: int, rows: int, out: int, latest: str) -> dict:
    return {"runId": run, "batchId": batch, "numInputRows": rows, "sink": {"numOutputRows": out},
            "eventTime": {"max": latest}}


def test_each_micro_batch_counts_once_from_either_source_and_no_data_batches_not_at_all() -> None:
    watch = _watch()
    first = [_batch("r1", 0, 10, 4, "2026-03-01T10:00:00.000Z"), _batch("r1", 1, 0, 0, "")]
    watch.attach(FakeQuery(first))  # batches that ended before the watch listened
    for b in [*first, _batch("r1", 2, 5, 1, "2026-03-01T10:01:00.000Z")]:  # the listener, late and in order
        watch.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(
            runId=b["runId"], batchId=b["batchId"], numInputRows=b["numInputRows"],
            sink=SimpleNamespace(numOutputRows=b["sink"]["numOutputRows"]), observedMetrics={},
            eventTime=b["eventTime"])))
    watch.attach(FakeQuery(first))  # told again: nothing new
    assert watch.final() == Progress(2, 15, 5, "2026-03-01T10:01:00.000Z")
    assert watch.changed() and not watch.changed()
    assert len(watch._last) == 1  # one number per run, however many batches
