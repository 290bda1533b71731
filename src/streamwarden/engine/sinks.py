"""Every output streamwarden writes, how a continuous one is triggered, and how it is read back.

* replay: :func:`write_lines` (JSON lines, atomically, 0600);
* one continuous query: :func:`start_stream` (Spark's JSON file sink, exactly once through
  its metadata log; :func:`read_sink` reads what it committed);
* several outputs of one streaming query (the level processors, the network's terminal
  switch): :func:`stream_writer` gives the ``foreachBatch`` writer its checkpoint, name and
  trigger, :func:`start_writer` starts it on the right state store, each batch lands as
  ``batch=N`` folders of JSON-lines parts, and :func:`read_parts` reads them back.

    >>> # query = start_stream(job, "out/alerts", "checkpoints/alerts", trigger="2 seconds")
    >>> # read_sink(spark, "out/alerts")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from streamwarden.engine.execute import Job, python_state, replay_rows
from streamwarden.engine.session import sql_conf
from streamwarden.errors import InputError, UnsupportedError
from streamwarden.names import inside, open_private, private_dir

# Shields and [ROWS n] windows keep Python state (transformWithState), which needs RocksDB.
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STATE_STORE = "spark.sql.streaming.stateStore.providerClass"


def write_replay(job: Job, output: str | Path) -> int:
    """Write the replay result as JSON lines; returns the number of rows."""
    return write_lines(replay_rows(job), output)


def write_lines(lines: Iterable[str], output: str | Path) -> int:
    """Write JSON lines to ``output`` atomically, readable by its owner only (0600; missing
    folders 0700); returns how many."""
    output = Path(output)
    private_dir(output.parent)
    count = 0
    tmp = output.with_name(output.name + ".partial")
    try:
        with open_private(tmp) as handle:  # never follows a link planted at the temporary name
            for line in lines:
                handle.write(line + "\n")
                count += 1
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(output)  # a failed replay never leaves a half-written result behind
    return count


def stream_writer(frame: DataFrame, checkpoint: str | Path, *, trigger: str | None = None,
                  available_now: bool = False, query_name: str | None = None,
                  each_batch: Callable[[DataFrame, int], None] | None = None) -> DataStreamWriter:
    """A streaming writer with its checkpoint, name and trigger (``available_now`` processes
    what is there and stops; else every ``trigger``, or as fast as data comes)."""
    writer = frame.writeStream.option("checkpointLocation", str(checkpoint))
    if each_batch is not None:
        writer = writer.foreachBatch(each_batch)
    if query_name:
        writer = writer.queryName(query_name)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer


def start_writer(writer: DataStreamWriter, spark: SparkSession, *, python_state: bool) -> StreamingQuery:
    """Start ``writer`` on the state store its operators need. A streaming query copies the
    session's settings when it starts (and its checkpoint keeps them), so the session is
    restored after."""
    with sql_conf(spark, STATE_STORE, ROCKSDB if python_state else None):
        return writer.start()


def start_stream(
    job: Job,
    sink: str,
    checkpoint: str | Path,
    *,
    trigger: str | None = None,
    available_now: bool = False,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start the continuous query writing JSON files to ``sink`` (or ``console``)."""
    if job.rewriting.on_result:
        raise UnsupportedError("ON RESULT is supported by replay; a continuous run cannot yet put SPGen's policy "
                               "ahead of its results, so it refuses rather than publish them unguarded")
    frame = job.union()
    if frame is None:
        raise UnsupportedError("nothing to run: no authorized graph can be deployed for this query (see explain)")
    if sink != "console":
        check_checkpoint(checkpoint, sink, sink_written=(Path(sink) / "_spark_metadata").is_dir())
    private_dir(checkpoint)
    writer = stream_writer(frame, checkpoint, trigger=trigger, available_now=available_now,
                           query_name=query_name).outputMode("append")
    if sink == "console":
        writer = writer.format("console").option("truncate", "false")
    else:
        private_dir(sink)  # the user's results: 0700 (Spark's files in it: 0600, see engine.session)
        writer = writer.format("json").option("ignoreNullFields", "false").option("path", str(sink))
    return start_writer(writer, frame.sparkSession, python_state=python_state(job))


def check_checkpoint(checkpoint: str | Path, output: str | Path, *, sink_written: bool) -> None:
    """Refuse a checkpoint inside the output folder (it holds every input tuple the query read
    and its state: no user's to read), or the output inside the checkpoint, and a checkpoint
    that has committed batches to an output that is gone (``sink_written`` False): resuming
    from it would silently write nothing for everything it already processed."""
    if inside(checkpoint, output) or inside(output, checkpoint):
        raise InputError(f"the checkpoint {checkpoint} and the output {output} overlap: a checkpoint holds raw input "
                         "and state, so keep it out of any output folder (--checkpoint elsewhere)")
    if committed_batches(checkpoint) and not sink_written:
        raise InputError(f"the checkpoint {checkpoint} has already committed results to {output}, which is gone or "
                         "empty: resuming from it would write nothing for what it already processed. Remove the "
                         "checkpoint to start over, or pass a new one with --checkpoint")


def committed_batches(checkpoint: str | Path) -> bool:
    """Has a Spark streaming query committed a batch under ``checkpoint`` (its ``commits`` log)?"""
    commits = Path(checkpoint) / "commits"
    return commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir())


def read_sink(spark: SparkSession, sink: str | Path) -> list[dict]:
    """Rows a continuous run has committed to ``sink`` (exactly once, via its metadata log)."""
    frame = spark.read.json(str(sink))
    return [json.loads(line) for line in frame.toJSON().collect()]


def read_parts(folder: str | Path) -> list[dict]:
    """Rows of an output written batch by batch: every ``batch=*/part-*`` file's JSON lines,
    in batch order. A batch folder appears whole (moved into place) or not at all."""
    rows = []
    for part in sorted(Path(folder).glob("batch=*/part-*")):
        with open(part, encoding="utf-8") as handle:
            rows += [json.loads(line) for line in handle if line.strip()]
    return rows


__all__ = ["ROCKSDB", "STATE_STORE", "check_checkpoint", "committed_batches", "read_parts", "read_sink",
           "start_stream", "start_writer", "stream_writer", "write_lines", "write_replay"]
