"""Every output streamwarden writes, how a continuous one is triggered, and how it is read back.

* replay: :func:`write_replay` into one JSON-lines file (:func:`write_lines`, atomically,
  0600) or, for any other output name, a folder of JSON-lines part files that Spark writes
  in parallel (:func:`write_parts`: staged in a hidden private sibling, moved into place
  only once complete, folder 0700 and files 0600);
* one continuous query: :func:`start_stream` (one ``part-N.json`` file for each micro-batch
  with rows, exactly once, numbered by the sink's own sequence: :class:`RowFiles`;
  :func:`read_sink` reads what it committed);
* several outputs of one streaming query (the level processors, the network's terminal
  switch): :func:`stream_writer` gives the ``foreachBatch`` writer its checkpoint, name and
  trigger, :func:`start_writer` starts it, each batch lands as
  ``batch=N`` folders of JSON-lines parts, and :func:`read_parts` reads them back.

    >>> # query = start_stream(job, "out/alerts", "checkpoints/alerts", trigger="2 seconds")
    >>> # read_sink(spark, "out/alerts")
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from streamwarden.engine.execute import Job, input_errors, replay_rows
from streamwarden.errors import InputError, UnsupportedError
from streamwarden.names import inside, make_private, open_private, private_dir

#: Output names that mean one JSON-lines file; any other name is a folder of part files.
SINGLE_FILE_SUFFIXES = (".jsonl", ".json")
#: What a replay folder holds besides its part files: Hadoop's commit marker, and ours, which
#: tells a later replay that the folder is one it may replace (``{"rows": N}``).
SUCCESS = "_SUCCESS"
REPLAY_MARKER = "_streamwarden_replay.json"


def write_replay(job: Job, output: str | Path) -> int:
    """Write the replay result; returns the number of rows.

    An ``output`` ending in ``.jsonl`` or ``.json`` is one JSON-lines file, in a stable row
    order, written through the driver (:func:`write_lines`); any other is a folder of part
    files written by Spark's tasks in parallel (:func:`write_parts`). Both hold the same lines.

        >>> is_single_file("out.jsonl"), is_single_file("results/paul")
        (True, False)
    """
    if is_single_file(output):
        return write_lines(replay_rows(job), output)
    return write_parts(job, output)


def is_single_file(output: str | Path) -> bool:
    """Does ``output`` name one JSON-lines file (``.jsonl``, ``.json``), not a folder of parts?"""
    return Path(output).suffix.lower() in SINGLE_FILE_SUFFIXES


def check_replay_output(output: str | Path, *, on_result: bool = False) -> None:
    """Refuse, before anything runs, a replay folder that :func:`write_parts` would refuse
    (see :func:`check_replay_folder`), and ``ON RESULT`` into a folder. A single file is
    always accepted (:func:`write_lines` replaces it)."""
    if is_single_file(output):
        return
    if on_result:
        _refuse_on_result(output)
    check_replay_folder(output)


def _refuse_on_result(output: str | Path) -> None:
    raise UnsupportedError(f"ON RESULT puts SPGen's policy ahead of the rows it covers, which a folder of part "
                           f"files read in any order cannot promise: replay into one file instead (--output "
                           f"{Path(output).name}.jsonl)")


def check_replay_folder(output: str | Path) -> bool:
    """Raise :class:`InputError` unless ``output`` names a folder a replay may write: one plain
    name, not a symlink (never followed, whatever it points to), and either absent, empty,
    or an earlier replay's output (nothing but its marker, ``_SUCCESS`` and ``part-*`` regular
    files), which the new one replaces. A folder holding anything else is the user's: refused,
    never deleted. Returns whether something is there to replace.

        >>> check_replay_folder("/nowhere/results")
        False
    """
    folder = Path(output)
    if folder.name in ("", ".", ".."):
        raise InputError(f"--output {output}: name the folder to write (a replay creates it, or replaces its own "
                         "earlier output there)")
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise InputError(f"refusing --output {folder}: it is a symlink, which a replay never writes through "
                         "(remove it, or name another folder)")
    if not stat.S_ISDIR(mode):
        raise InputError(f"refusing --output {folder}: it exists and is not a folder (a name ending in .jsonl "
                         "writes one file)")
    entries = os.listdir(folder)
    if not entries:
        return True
    foreign = sorted(name for name in entries if not _replay_entry(folder, name))
    if foreign or REPLAY_MARKER not in entries:
        example = f" (such as {foreign[0]!r})" if foreign else ""
        raise InputError(f"refusing --output {folder}: the folder holds files a replay did not write{example}; a "
                         "replay replaces only its own earlier output: empty it, or name another folder")
    return True


def _replay_entry(folder: Path, name: str) -> bool:
    """Is ``folder/name`` something a replay writes: a regular file (never a link or a folder)
    named as its marker, ``_SUCCESS`` or a part file?"""
    if name not in (REPLAY_MARKER, SUCCESS) and not name.startswith("part-"):
        return False
    return stat.S_ISREG(os.lstat(folder / name).st_mode)


def write_parts(job: Job, output: str | Path) -> int:
    """Write the replay's rows into the folder ``output`` as JSON-lines part files, one per
    partition, written by Spark's tasks in parallel: the driver never holds a row. Each
    line is the line :func:`write_lines` writes for that row (same columns in the same
    order, same timestamp text, NULLs as ``null``); rows come in no particular order.
    Returns the number of rows, counted as they are written (a Spark observation on the
    written frame: no second pass over the data).

    Safety: the rows are written into a hidden sibling ``.NAME.partial-XXXXXXXX`` that
    :func:`tempfile.mkdtemp` creates with an unpredictable name, mode 0700 (nothing can be
    planted there in advance); made private (folders 0700, files 0600, whatever Spark's
    umask) and moved into place by ``rename`` only once the job succeeded. A failure (a
    broken record, Ctrl-C) removes it, leaving ``output`` as it was. An earlier replay's
    output at ``output`` is replaced: moved aside, the new one renamed in, the old deleted,
    so a reader sees the old rows, the new ones, or for an instant no folder, never a mix.
    A folder that is not a replay's, a symlink or a file at ``output`` is refused
    (:func:`check_replay_folder`). Only a process killed before it cleans up (SIGKILL, power
    loss), or rarely a Ctrl-C while cancelled tasks still write, leaves its private staging
    folder behind; no later replay reads or removes it.

        >>> # write_parts(job, "results/paul")  -> rows; then spark.read.json("results/paul")
    """
    if job.rewriting.on_result:
        _refuse_on_result(output)
    folder = Path(output)
    check_replay_folder(folder)
    private_dir(folder.parent)
    # Hidden (Spark's readers and check_inputs skip dot-names); the name cut so it stays under NAME_MAX.
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name[:100]}.partial-", dir=folder.parent))
    try:
        written = staging / "rows"
        rows = _spark_parts(job, written)
        with open_private(written / REPLAY_MARKER) as handle:
            handle.write(json.dumps({"rows": rows}) + "\n")
        _tidy(written)
        _move_into_place(written, folder, staging / "replaced")
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # what failed, or the replaced output
    return rows


def _spark_parts(job: Job, folder: Path) -> int:
    """Spark writes ``job``'s rows under ``folder`` (created by the write); returns their count."""
    frame = job.union()
    if frame is None:  # nothing authorized: an empty result, and nothing to read
        private_dir(folder)
        return 0
    counted = Observation()
    observed = frame.observe(counted, F.count(F.lit(1)).alias("rows"))
    with input_errors():
        # The session says NULLs stay visible keys; said again so a caller's own session cannot differ.
        observed.write.mode("errorifexists").option("ignoreNullFields", "false").json(str(folder))
    return int(counted.get["rows"])


def _tidy(folder: Path) -> None:
    """Drop Hadoop's hidden ``.crc`` checksums (a replay folder holds rows, markers, nothing
    else) and make the rest private: Spark's files get the umask of whoever configured it."""
    for name in os.listdir(folder):
        if name.startswith(".") and name.endswith(".crc"):
            os.unlink(folder / name)
    make_private(folder)


def _move_into_place(written: Path, folder: Path, aside: Path) -> None:
    """Rename ``written`` to ``folder``; an earlier replay's output there is first moved to
    ``aside`` (in the private staging folder, deleted with it). ``rename`` never follows a
    symlink: one planted at ``folder`` since the check makes it fail, not write elsewhere."""
    if check_replay_folder(folder):  # checked again: the folder may have changed while Spark ran
        os.rename(folder, aside)
        try:
            os.rename(written, folder)
        except BaseException:
            os.rename(aside, folder)  # put the earlier output back rather than leave nothing
            raise
        return
    try:
        os.rename(written, folder)
    except OSError as exc:
        raise InputError(f"refusing --output {folder}: it appeared while the replay ran ({exc.strerror}); nothing "
                         "was written") from None


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


def start_writer(writer: DataStreamWriter, spark: SparkSession) -> StreamingQuery:
    """Start ``writer``: the one place every continuous query starts. Every stateful operator
    is Spark's or streamwarden's own JVM operator, so any state store the session names works."""
    return writer.start()


#: Where a query's checkpoint keeps the numbers of its outputs' micro-batches (:class:`BatchNumbers`).
NUMBERS = "streamwarden_numbers"


class BatchNumbers:
    """Numbers for one output's micro-batches that hold rows: 0, 1, 2, ... in order.

    Spark's batch ids count every micro-batch, also those whose tuples the policies or a
    level's guard removed entirely: an output numbered by them (or written at every batch)
    counts, in its gaps, the arrivals of tuples its reader may not see. An output numbered
    here shows only its own rows. The record is one small private file in the query's
    checkpoint: the last batch id given a number and that number. Spark retries only its
    latest batch, with the same id and the same rows, so a retry gets the number it had and
    its output replaces itself (exactly once). Without a record, numbering starts at
    ``first()`` (after what an output already holds).

        >>> import tempfile
        >>> record = Path(tempfile.mkdtemp()) / "numbers.json"
        >>> numbers = BatchNumbers(record)
        >>> numbers.number(4), numbers.number(4), numbers.number(9), BatchNumbers(record).number(9)
        (0, 0, 1, 1)
    """

    def __init__(self, record: Path, first: Callable[[], int] = lambda: 0):
        self.record = record
        self.first = first

    def number(self, batch_id: int) -> int:
        """The number of Spark's batch ``batch_id`` (the same on a retry), recorded before any
        output is written under it."""
        last = self._last()
        if last is not None and last[0] == batch_id:
            return last[1]
        number = last[1] + 1 if last is not None else self.first()
        private_dir(self.record.parent)
        partial = self.record.with_name(f".{self.record.name}.partial")
        with open_private(partial) as handle:
            handle.write(json.dumps({"batch": batch_id, "number": number}) + "\n")
        partial.replace(self.record)  # atomically: a crash leaves the old record or the new one
        return number

    def _last(self) -> tuple[int, int] | None:
        try:
            record = json.loads(self.record.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return int(record["batch"]), int(record["number"])


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
        check_checkpoint(checkpoint, sink, sink_written=any((Path(sink) / name).exists()
                                                            for name in ("_spark_metadata", SINK_MARKER)))
    private_dir(checkpoint)
    # what each micro-batch gives the user, in its progress report (a foreachBatch sink reports none)
    frame = frame.observe(ROWS_OUT, F.count(F.lit(1)).alias("rows"))
    writer = stream_writer(frame, checkpoint, trigger=trigger, available_now=available_now,
                           query_name=query_name).outputMode("append")
    if sink == "console":
        writer = writer.format("console").option("truncate", "false")
    elif (Path(sink) / "_spark_metadata").is_dir():  # started by an earlier version: it keeps Spark's file sink
        writer = writer.format("json").option("ignoreNullFields", "false").option("path", str(sink))
    else:
        folder = private_dir(sink)  # the user's results: 0700 (files in it: 0600)
        marker = folder / SINK_MARKER
        if not marker.is_file():
            with open_private(marker) as handle:
                handle.write(json.dumps({"rows": "part-N.json, N = 0, 1, ... for each micro-batch with rows"}) + "\n")
        writer = writer.foreachBatch(RowFiles(folder, BatchNumbers(Path(checkpoint) / NUMBERS / "sink.json")))
    return start_writer(writer, frame.sparkSession)


#: The observation counting the rows a ``run`` micro-batch writes (its progress report's
#: ``observedMetrics``; streamwarden.runtime.progress reads it).
ROWS_OUT = "rows_out"

#: Written in a ``run`` sink when it starts: the folder is a sink (committed to, even before
#: any row), which a checkpoint that has committed batches needs to resume.
SINK_MARKER = "_streamwarden_sink"  # no .json: a reader of *.json files never takes it for rows


class RowFiles:
    """``foreachBatch`` of ``run``'s sink: each micro-batch's rows, if it has any, in one
    ``part-N.json`` file of JSON lines, ``N`` from :class:`BatchNumbers`.

    Spark's own file sink wrote ``_spark_metadata/<batch id>`` for every micro-batch, also one
    whose tuples the policies removed entirely: a user listing the sink learned when tuples
    they may not see arrived. Here a batch without rows leaves nothing, and how Spark split a
    batch does not show either (one file). Exactly once, as with Spark's sink: the rows are
    written into a hidden staging folder (readers, Spark's included, skip names starting with
    ``.``), given the batch's number, then moved into place in one rename; Spark retries only
    a batch it has not committed, with the same id and rows, which then replaces its own file.
    """

    def __init__(self, sink: Path, numbers: BatchNumbers):
        self.sink = sink
        self.numbers = numbers

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        staging = self.sink / f".partial-{batch_id}"
        shutil.rmtree(staging, ignore_errors=True)  # an earlier attempt's
        # One task writes (after a shuffle: the query's own stages keep their parallelism).
        batch.repartition(1).write.mode("overwrite").option("ignoreNullFields", "false").json(str(staging))
        parts = [part for part in sorted(staging.glob("part-*")) if part.stat().st_size > 0]
        if parts:
            (part,) = parts
            make_private(part)
            os.replace(part, self.sink / f"part-{self.numbers.number(batch_id):010d}.json")
        shutil.rmtree(staging, ignore_errors=True)


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
    """Rows a continuous run has committed to ``sink``: its ``part-N.json`` files (a batch's
    file appears whole, in one rename), or for a sink an earlier version started, what
    Spark's metadata log lists."""
    if not any(Path(sink).glob("*.json")):
        return []  # nothing committed yet (Spark cannot read a folder without a row)
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


__all__ = ["NUMBERS", "REPLAY_MARKER", "SINGLE_FILE_SUFFIXES", "SINK_MARKER", "BatchNumbers", "RowFiles",
           "check_checkpoint",
           "check_replay_folder", "check_replay_output", "committed_batches", "is_single_file", "read_parts",
           "read_sink", "start_stream", "start_writer", "stream_writer", "write_lines", "write_parts",
           "write_replay"]
