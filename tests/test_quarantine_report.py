"""Reading a query's quarantine counts from its progress (no Spark): each micro-batch once."""

from __future__ import annotations

from streamwarden.runtime.quarantine import QuarantineLog, Quarantined


def progress(run: str, batch: int, records: int | None, at: str | None = None) -> dict:
    """A progress entry as Spark reports it; ``records`` None: an idle trigger (no metrics)."""
    metrics = {} if records is None else {
        "quarantine_S_p": {"records": records, "first": None if at is None else {"file": "f", "line": 1, "at": at}},
        "input_s_p": {"rows": 5}}
    return {"runId": run, "batchId": batch, "observedMetrics": metrics}


def test_idle_triggers_do_not_hide_the_batch_they_are_numbered_after() -> None:
    """Spark reports an idle trigger under the number of the batch still to come, without
    metrics; that batch, when it runs, must still be counted (and no batch twice)."""
    log = QuarantineLog("_p")
    assert log.read([progress("r", 0, 2, "file:/in/a%20b.jsonl:3"), progress("r", 1, None)]) == [
        Quarantined("S", 0, 2, "/in/a b.jsonl:3")]
    later = [progress("r", 0, 2, "x"), progress("r", 1, None), progress("r", 1, None), progress("r", 1, 1, "y:1"),
             progress("r", 2, 0)]
    assert log.read(later) == [Quarantined("S", 1, 1, "y:1")]
    assert log.read(later) == []
    assert log.read([progress("r2", 0, 3, "z:2")]) == [Quarantined("S", 0, 3, "z:2")]  # a new run of the query


def test_only_this_querys_tag_counts() -> None:
    entry = {"runId": "r", "batchId": 0, "observedMetrics": {"quarantine_S_other": {"records": 9, "first": None},
                                                             "quarantine_T_p": {"records": 1, "first": None}}}
    assert QuarantineLog("_p").read([entry]) == [Quarantined("T", 0, 1, None)]


class FakeQuery:
    """A StreamingQuery's progress, counting how often the whole history is fetched."""

    def __init__(self, entries: list[dict]):
        self.entries, self.fetched = entries, 0

    @property
    def lastProgress(self) -> dict | None:
        return self.entries[-1] if self.entries else None

    @property
    def recentProgress(self) -> list[dict]:
        self.fetched += 1
        return list(self.entries)


def test_a_query_is_read_from_its_latest_progress_unless_batches_were_missed() -> None:
    query, log = FakeQuery([]), QuarantineLog("_p")
    assert log.read_query(query) == []
    query.entries += [progress("r", 0, 1, "a:1"), progress("r", 1, 2, "b:2")]
    assert log.read_query(query) == [Quarantined("S", 0, 1, "a:1"), Quarantined("S", 1, 2, "b:2")]
    assert query.fetched == 1  # two new batches: the whole history
    query.entries += [progress("r", 2, None), progress("r", 2, None)]
    assert log.read_query(query) == [] and query.fetched == 1  # idle triggers: the latest entry is enough
    query.entries += [progress("r", 2, 4, "c:3")]
    assert log.read_query(query) == [Quarantined("S", 2, 4, "c:3")] and query.fetched == 1
    query.entries += [progress("r", 3, 0), progress("r", 4, None)]  # batch 3 ran, then an idle trigger
    assert log.read_query(query) == [] and query.fetched == 2
    assert log.last == {"r": 3}
