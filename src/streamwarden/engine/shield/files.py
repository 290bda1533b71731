"""JSON-lines files as (file, line, text) rows, in Spark SQL, keeping every line's place.

A punctuated stream is only meaningful in arrival order (an SP governs the tuples after
it), and a ``[ROWS n]`` window orders ties by it. Spark's line-based readers forget where
a line was (and ``monotonically_increasing_id`` is not allowed in a streaming query), so
each file is read whole (``text`` with ``wholetext``: one row per file, which Spark never
splits) and cut into lines by ``posexplode(split(...))``: the line number is the
position, and no line ever crosses into Python. Records end at LF only (a CRLF's CR goes
with it) and blank lines are skipped, as :func:`streamwarden.records.split_records` does.

Arrival order is the file order, then the line order: in a replay, files by name; in a
continuous run, files in the micro-batch that picked them up, then by name (name files
with a sequence number or a timestamp, as providers do). A file that is not UTF-8 stops
the job; :func:`streamwarden.engine.execute.broken_record` names its first bad byte's line
and column.

    >>> # punctuated_lines(spark, "data/HeartRate", streaming=False, stream="HeartRate")
    >>> # -> _file (the file's URI), _line (1-based), _text
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.errors import InputError

SUFFIXES = (".jsonl", ".json")
#: What a file's invalid UTF-8 is reported as, before the driver finds the line and column.
INVALID_UTF8 = "invalid UTF-8"


def punctuated_files(path: str | Path) -> list[Path]:
    """The files of a punctuated input in arrival order (one file, or a folder's by name)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"punctuated input not found: {path}")
    return sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and not p.name.startswith((".", "_")))


def punctuated_lines(spark: SparkSession, path: str | Path, *, streaming: bool, stream: str | None = None) -> DataFrame:
    """Every non-blank line of a JSON-lines input (a file, or a folder's ``.jsonl``/``.json``
    files; hidden and ``_`` files skipped, as Spark's file sources do) with its file and
    1-based line number. ``stream`` names the stream in the error about a file that is not UTF-8."""
    path = Path(path)
    if streaming:
        path.mkdir(parents=True, exist_ok=True)  # a live source may start empty
    else:
        punctuated_files(path)  # a missing input is an error now, not inside a Spark task
    reader = spark.readStream if streaming else spark.read
    if path.is_dir():
        reader = reader.option("pathGlobFilter", "*.{jsonl,json}")
    files = reader.text(str(path.resolve()), wholetext=True).select(F.col("_metadata.file_path").alias("_file"), "value")
    label = stream or path.name
    where = F.concat(F.lit(f"broken record in stream {label} ({INVALID_UTF8}) at "), F.col("_file"))
    checked = files.filter(F.when(~F.is_valid_utf8("value"), F.raise_error(where)).otherwise(F.lit(True)))
    lines = checked.select("_file", F.posexplode(F.split("value", "\n")).alias("_pos", "_raw"))
    text = F.regexp_replace("_raw", r"\r\z", "")  # \z: the very end (Java's $ also matches before a final CR)
    return (lines.select("_file", (F.col("_pos") + 1).cast("long").alias("_line"), text.alias("_text"))
            .filter(F.btrim("_text", F.lit(" \t\r")) != ""))


__all__ = ["INVALID_UTF8", "SUFFIXES", "punctuated_files", "punctuated_lines"]
