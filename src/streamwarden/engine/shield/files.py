"""JSON-lines files as (file, line, text) rows, in the JVM, keeping every line's place.

A punctuated stream is only meaningful in arrival order (an SP governs the tuples after
it), and a ``[ROWS n]`` window orders ties by it. Spark's line reader forgets where a line
was, and ``monotonically_increasing_id`` is not allowed in a streaming query; but a task
reads each split of a file in order, so a small JVM operator
(:func:`streamwarden.engine.jvm.line_numbers`) numbers the lines of each split as they
pass, and the split's first byte (``_metadata.file_block_start``) orders the splits. No
line crosses into Python, large files are read in parallel splits, and no file has to fit
in memory. Records end at LF only (a CRLF's CR goes with it) and blank lines are skipped,
as :func:`streamwarden.records.split_records` does.

Arrival order is the file order, then the line order: in a replay, files by name; in a
continuous run, files in the micro-batch that picked them up, then by name (name files
with a sequence number or a timestamp, as providers do). A line that is not UTF-8 stops
the job; :func:`streamwarden.engine.execute.readable_place` names its file's first bad
byte by line and column. In quarantine mode its ``_text`` is NULL instead (the readers
then call it broken, and nothing of it is parsed).

    >>> # punctuated_lines(spark, "data/HeartRate", streaming=False, stream="HeartRate")
    >>> # -> _file (the file's URI), _block, _line (1-based), _text
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamwarden.engine.quarantine import OnBroken
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


def punctuated_lines(spark: SparkSession, path: str | Path, *, streaming: bool, stream: str | None = None,
                     on_broken: OnBroken = "fail") -> DataFrame:
    """Every non-blank line of a JSON-lines input (a file, or a folder's ``.jsonl``/``.json``
    files; hidden and ``_`` files skipped, as Spark's file sources do): ``_file`` (its URI),
    ``_block`` (the first byte of the file split it was read in), ``_line`` (the line number
    when ``_block`` is 0; beyond, a number that still sorts the file's lines in order, see
    :func:`line_place`) and ``_text``. ``stream`` names the stream in the error about a line
    that is not UTF-8; with ``on_broken="quarantine"`` such a line's ``_text`` is NULL instead."""
    from streamwarden.engine.jvm import line_numbers

    path = Path(path)
    if streaming:
        path.mkdir(parents=True, exist_ok=True)  # a live source may start empty
    else:
        punctuated_files(path)  # a missing input is an error now, not inside a Spark task
    reader = (spark.readStream if streaming else spark.read).option("lineSep", "\n")  # LF only, as split_records
    if path.is_dir():
        reader = reader.option("pathGlobFilter", "*.{jsonl,json}")
    raw = reader.text(str(path.resolve())).select(
        F.col("_metadata.file_path").alias("_file"), F.col("_metadata.file_block_start").alias("_block"),
        F.col("value").cast("binary").alias("_bytes"))  # undecoded through the JVM operator, checked after it
    numbered = line_numbers(raw).filter(~F.col("_blank"))
    label = stream or path.name
    number = F.col("_block") + F.col("_index") + 1
    if on_broken == "quarantine":  # not decoded, so not parsed: the reader's check calls it broken
        text = F.when(F.col("_utf8"), F.col("_bytes").cast("string"))
        return numbered.select("_file", "_block", number.alias("_line"), text.alias("_text"))
    message = F.concat(F.lit(f"broken record in stream {label} ({INVALID_UTF8}) at "), line_place(number))
    checked = numbered.filter(F.when(~F.col("_utf8"), F.raise_error(message)).otherwise(F.lit(True)))
    return checked.select("_file", "_block", number.alias("_line"), F.col("_bytes").cast("string").alias("_text"))


def parsed_once(lines: DataFrame, schema: StructType, options: dict[str, str], name: str = "_r") -> DataFrame:
    """``lines`` with ``name``: each ``_text`` parsed by ``from_json`` against ``schema``, once.

    A projection's ``from_json`` referenced field by field would be copied into every
    reference by Spark's optimizer (CollapseProject treats field access as free), parsing
    each line again per field used: a generator is not collapsed into the operators above
    it, so ``explode(array(...))`` keeps the parse a column computed once."""
    return lines.select("*", F.explode(F.array(F.from_json("_text", schema, options))).alias(name))


def line_place(line: Column | None = None) -> Column:
    """Where a line of :func:`punctuated_lines` is, for an error message: ``FILE:LINE``, or in a
    later split of a large file ``FILE:@BLOCK+INDEX``, which
    :func:`streamwarden.engine.execute.readable_place` turns into the line number on the driver."""
    # A line's _line is block + index + 1: each line of a split starts at or after the split's
    # first byte and takes at least one byte, so these grow through the whole file, and are the
    # line numbers in the first split.
    line = F.col("_line") if line is None else line
    file = F.regexp_replace("_file", "^file:", "")
    index = (line - F.col("_block") - 1).cast("string")
    return F.when(F.col("_block") == 0, F.concat(file, F.lit(":"), line.cast("string"))).otherwise(
        F.concat(file, F.lit(":@"), F.col("_block").cast("string"), F.lit("+"), index))


__all__ = ["INVALID_UTF8", "SUFFIXES", "line_place", "parsed_once", "punctuated_files", "punctuated_lines"]
