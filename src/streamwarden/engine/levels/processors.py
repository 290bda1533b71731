"""The replicated architecture (Ray et al., section 2): one query processor per security level.

Queries of different levels never share a stateful operator, a Spark streaming query or
a checkpoint: each level's queries run together in their own streaming query, with its
own checkpoint and state, reading the inputs through their own level guard (so their
own watermark): for a stream read as it is, from the shepherd's levelled copy
(:mod:`streamwarden.engine.levels.routing`), so that it is read and parsed once. A
failure, a restart or the state of one level cannot reach another.
Queries of the same level share their processor. Each query's rows land in
``DIR/<query id>/batch=N/``, so users never see another query's columns: one folder for
each micro-batch that holds rows of that query, none for a batch without (whose tuples
were all above the query's level, or filtered), numbered 0, 1, 2, ... by the query's own
sequence (:class:`~streamwarden.engine.sinks.BatchNumbers`), not by Spark's batch ids: a
reader learns nothing of the micro-batches that tuples of other levels made the processor
run. A retried batch keeps its number and overwrites its own folder, with one part file
(how Spark split the batch, which depends on files holding other levels' tuples, does not
show either).

What isolation this gives, and what not: processors share the Spark driver and its
executors, so CPU contention between levels remains a timing channel at the JVM level.
For that, run one ``streamwarden`` process per level (the checkpoints already are).

    >>> queries = [LevelQuery("q1", "c1", "SELECT ts FROM MessageLog"),
    ...            LevelQuery("q2", "cm", "SELECT ts FROM MessageLog", level="[2, ⊥]")]
    >>> [q.id for q in queries]
    ['q1', 'q2']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamwarden.engine.execute import Job

from streamwarden.engine.sinks import NUMBERS, BatchNumbers, read_parts, start_writer, stream_writer
from streamwarden.errors import StreamwardenError, UnsupportedError
from streamwarden.names import inside, safe_path

QUERY = "_query"


@dataclass(frozen=True)
class LevelQuery:
    """One registered continuous query: its id, its user, its text and the level to run at
    (default: the user's clearance)."""

    id: str
    user: str
    query: str
    level: str | None = None


@dataclass(frozen=True)
class LevelProcessor:
    """A running processor: the level, the ids of its queries and its Spark streaming query.
    (``run_levels`` lists a stream's shepherd the same way: level ``_shepherd <stream>``, no queries.)"""

    level: str
    queries: tuple[str, ...]
    stream: StreamingQuery


def start_processors(spark: SparkSession, jobs: Mapping[str, Job], queries: Sequence[LevelQuery],
                     output_dir: str | Path, checkpoints: str | Path, *, trigger: str | None = None,
                     available_now: bool = False) -> list[LevelProcessor]:
    """Start one streaming query per level over the compiled ``jobs`` (by query id).

    Each level checkpoints under ``checkpoints/<level>``, which must lie outside
    ``output_dir``: a checkpoint holds raw tuples of its level, which no reader of one
    query's output may see.
    """
    output = Path(output_dir)
    check_outside_output(checkpoints, output)
    by_level: dict[str, list[LevelQuery]] = {}
    for q in queries:
        by_level.setdefault(str(jobs[q.id].rewriting.level), []).append(q)
    processors = []
    for level, members in sorted(by_level.items()):
        frames: dict[str, DataFrame] = {}
        for q in members:
            frame = jobs[q.id].union()
            if frame is None:
                raise UnsupportedError(f"query {q.id}: no authorized graph can be deployed (see explain)")
            frames[q.id] = frame.withColumn(QUERY, F.lit(q.id))
        combined = None
        for frame in frames.values():
            combined = frame if combined is None else combined.unionByName(frame, allowMissingColumns=True)
        assert combined is not None
        columns = {qid: [c for c in frame.columns if c != QUERY] for qid, frame in frames.items()}
        checkpoint = Path(checkpoints) / level_slug(level)
        writer = stream_writer(combined, checkpoint, trigger=trigger,
                               available_now=available_now, query_name=f"streamwarden level {level}",
                               each_batch=_writer(output, columns, checkpoint / NUMBERS))
        stream = start_writer(writer, spark)
        processors.append(LevelProcessor(level, tuple(q.id for q in members), stream))
    return processors


def check_outside_output(checkpoints: str | Path, output_dir: str | Path) -> None:
    """Refuse level checkpoints (and the shepherd's tuples beside them) inside the output
    folder: they hold raw tuples, which no reader of one query's output may see."""
    if inside(checkpoints, output_dir):
        raise StreamwardenError(f"the level checkpoints {checkpoints} lie inside the output folder {output_dir}: "
                                "they hold raw tuples; put them elsewhere")


def _writer(output: Path, columns: Mapping[str, list[str]], numbers: Path) -> Callable[[DataFrame, int], None]:
    """``foreachBatch``: each query's rows of the batch in its next ``batch=N`` folder, if it has any."""
    sequences = {qid: BatchNumbers(numbers / f"{qid}.json", partial(_after_existing, output / qid))
                 for qid in columns}

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            present = {row[0] for row in batch.select(QUERY).distinct().collect()}
            for qid, names in columns.items():
                if qid not in present:
                    continue  # no rows for it: no folder, no number
                folder = safe_path(output, qid, f"batch={sequences[qid].number(batch_id):010d}")
                rows = batch.filter(F.col(QUERY) == qid).select(*[F.col(f"`{n}`") for n in names])
                rows.coalesce(1).write.mode("overwrite").option("ignoreNullFields", "false").json(str(folder))
        finally:
            batch.unpersist()
    return write


def _after_existing(folder: Path) -> int:
    """The first free folder number of a query's output (0, or after the folders an earlier
    version wrote, numbered by Spark's batch ids)."""
    taken = [int(p.name.removeprefix("batch=")) for p in folder.glob("batch=*") if p.name[6:].isdigit()]
    return max(taken, default=-1) + 1


def read_query_output(spark: SparkSession, output_dir: str | Path, query_id: str) -> list[dict]:
    """The rows a processor has written for one query."""
    return read_parts(Path(output_dir) / query_id)


def level_slug(level: str) -> str:
    """A folder name for a level: ``[1, ⊥]`` -> ``1_bot``."""
    parts = [p.strip() for p in level.strip("[]").split(",")]
    return "_".join("bot" if p == "⊥" else "top" if p == "T" else re.sub(r"[^A-Za-z0-9]", "-", p) for p in parts)


__all__ = ["LevelProcessor", "LevelQuery", "check_outside_output", "level_slug", "read_query_output",
           "start_processors"]
