"""The broken records a streaming query quarantined, read from its progress.

In quarantine mode (:mod:`streamwarden.engine.quarantine`) each stream a query reads
reports, per micro-batch, the observed metric ``quarantine_<stream><tag>``: how many of
its records were broken, and the place of the first. Spark keeps each micro-batch's
metrics in the query's progress (``StreamingQuery.recentProgress``, the last 100 by
default), recorded before the batch ends; :class:`QuarantineLog` reads the batches it has
not read yet, so each is reported once, whether it is read while the query runs or after
it stopped. A report names the place only, never the record: whoever reads it may not be
allowed to see that tuple.

    >>> progress = {"runId": "r", "batchId": 4, "observedMetrics": {"quarantine_S_p": {
    ...     "records": 2, "first": {"file": "file:/in/S/a.jsonl", "line": 3, "at": "/in/S/a.jsonl:3"}}}}
    >>> log = QuarantineLog("_p")
    >>> log.read([progress])
    [Quarantined(stream='S', batch=4, records=2, first='/in/S/a.jsonl:3')]
    >>> log.read([progress])  # read once
    []
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from streamwarden.engine.execute import readable_location
from streamwarden.engine.quarantine import metric_name


@dataclass(frozen=True)
class Quarantined:
    """One stream's quarantined records in one micro-batch."""

    stream: str
    batch: int
    records: int
    first: str | None  # where the first one is (file:line, or the file), never its text

    def line(self, pipeline: str) -> str:
        """One line for an operator (``network run`` prints it as a warning, ``serve`` logs it).

            >>> Quarantined("S", 4, 2, "/in/S/a.jsonl:3").line("q1-ann")
            'pipeline q1-ann, micro-batch 4: quarantined 2 broken records of stream S (the first at /in/S/a.jsonl:3)'
        """
        noun = "record" if self.records == 1 else "records"
        where = f" (the first at {self.first})" if self.first else ""
        return (f"pipeline {pipeline}, micro-batch {self.batch}: quarantined {self.records} broken {noun} of "
                f"stream {self.stream}{where}")


@dataclass
class QuarantineLog:
    """Reads the quarantine metrics of one query's progress (its metrics named with ``tag``),
    each micro-batch once."""

    tag: str = ""
    last: dict[str, int] = field(default_factory=dict)  # per run of the query: the latest batch read

    def read(self, progress: Iterable[Any]) -> list[Quarantined]:
        """The micro-batches of ``progress`` (StreamingQueryProgress objects, or their JSON as
        dicts) not read before that quarantined records, per stream, in batch order.

        Only a batch that ran carries its metrics: Spark also reports idle triggers, under
        the number of the batch still to come and with no metrics, so those mark nothing."""
        found = []
        for entry in progress:
            data = _as_dict(entry)
            run, batch = str(data.get("runId")), int(data.get("batchId", -1))
            counts = {stream: _as_dict(values) for name, values in (data.get("observedMetrics") or {}).items()
                      if (stream := _stream_of(name, self.tag)) is not None}
            if not counts or batch <= self.last.get(run, -1):
                continue
            self.last[run] = batch
            for stream, values in counts.items():
                if not values.get("records"):
                    continue
                at = _as_dict(values.get("first")).get("at")
                found.append(Quarantined(stream, batch, int(values["records"]),
                                         readable_location(at) if isinstance(at, str) else None))
        return sorted(found, key=lambda q: (q.batch, q.stream))

    def read_query(self, query: Any) -> list[Quarantined]:
        """:meth:`read` of a StreamingQuery's progress: its latest entry alone when it is the only
        one not read yet (reading all of them costs a Py4J call and a JSON parse each, and a
        service asks every second), else the whole history Spark keeps."""
        latest = _as_dict(query.lastProgress)
        if not latest:
            return []
        run, batch = str(latest.get("runId")), int(latest.get("batchId", -1))
        read = self.last.get(run, -1)
        if batch <= read:
            return []
        return self.read([latest] if batch == read + 1 else query.recentProgress)


def _stream_of(name: str, tag: str) -> str | None:
    """The stream a metric named ``name`` counts, if it is a quarantine metric of this tag."""
    prefix = metric_name("", "")
    if not name.startswith(prefix) or not name.endswith(tag):
        return None
    stream = name[len(prefix):len(name) - len(tag)] if tag else name[len(prefix):]
    return stream if stream and metric_name(stream, tag) == name else None


def _as_dict(value: Any) -> Mapping[str, Any]:
    """A progress entry, a metrics Row or a struct as a mapping (None: empty)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    if hasattr(value, "asDict"):  # a Row
        return value.asDict(recursive=True)
    if hasattr(value, "json"):  # a StreamingQueryProgress
        import json

        return json.loads(value.json)
    return {}


__all__ = ["QuarantineLog", "Quarantined"]
