"""Punctuated files as a Spark data source that keeps every line's place in arrival order.

A punctuated stream is only meaningful in arrival order: an SP governs the tuples after
it. Spark's own file sources forget where a line was (and ``monotonically_increasing_id``
is not allowed in a streaming query), so this small Python data source reads the files
itself and yields, for every non-blank line, ``_file`` (its path), ``_line`` (1-based)
and ``_text``. Lines leave as Arrow record batches, so no Python object is built per
line; parsing the JSON happens afterwards, in the JVM.

Arrival order is the file name order, then the line order. A live directory takes new
files in name order: a file whose name sorts before one already read is never read
(name files with a sequence number or a timestamp).

    >>> # spark.dataSource.register(PunctuatedFiles)
    >>> # spark.read.format("streamwarden_punctuated").option("path", "data/HeartRate").load()
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from streamwarden.errors import InputError
from streamwarden.records import bad_byte, split_records, utf8_position

SOURCE_NAME = "streamwarden_punctuated"
SCHEMA = "_file string, _line long, _text string"
SUFFIXES = (".jsonl", ".json")


def punctuated_files(path: str | Path) -> list[Path]:
    """The files of a punctuated input in arrival order (one file, or a folder's by name)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"punctuated input not found: {path}")
    return sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and not p.name.startswith((".", "_")))


# Raised inside a Spark task: streamwarden.engine.execute.input_errors() turns the first
# "broken record in stream ..." of a failed job into one InputError line.
BROKEN = "broken record in stream"
def read_lines(path: str, stream: str | None = None) -> Iterator[object]:
    """Arrow batches of (file, line, text) for the non-blank lines of one file.

    Runs in a Spark task: a file that is not UTF-8 fails the job with a message that
    :func:`streamwarden.engine.execute.input_errors` reports as one line naming the file,
    line and column (``stream`` names the stream in it; without it, the file's folder)."""
    import pyarrow as pa

    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"{path.removeprefix('file:')}:{utf8_position(data, exc.start)}"
        label = stream or Path(path).parent.name
        raise ValueError(f"{BROKEN} {label} ({bad_byte(data, exc.start)}) at {where}") from None
    lines = split_records(text)
    if not lines:
        return
    numbers = [number for number, _ in lines]
    kept = [text for _, text in lines]
    yield pa.RecordBatch.from_arrays(
        [pa.array([path] * len(kept), pa.string()), pa.array(numbers, pa.int64()), pa.array(kept, pa.string())],
        names=["_file", "_line", "_text"],
    )


class PunctuatedFiles(DataSource):
    """``format("streamwarden_punctuated").option("path", P)``: batch and streaming reads."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> DataSourceReader:  # type: ignore[no-untyped-def]
        return _BatchReader(self.options["path"], self.options.get("stream"))

    def streamReader(self, schema) -> DataSourceStreamReader:  # type: ignore[no-untyped-def]
        return _StreamReader(self.options["path"], self.options.get("stream"))


class _BatchReader(DataSourceReader):
    def __init__(self, path: str, stream: str | None = None):
        self.files = [str(p) for p in punctuated_files(path)]
        self.stream = stream

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(f) for f in self.files] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[object]:
        if partition.value is not None:
            yield from read_lines(partition.value, self.stream)


class _StreamReader(DataSourceStreamReader):
    """Offsets name the last file read; each micro-batch reads the files named after it."""

    def __init__(self, path: str, stream: str | None = None):
        self.path = path
        self.stream = stream

    def initialOffset(self) -> dict:
        return {"last": ""}

    def latestOffset(self) -> dict:
        names = [p.name for p in self._files()]
        return {"last": names[-1] if names else ""}

    def _files(self) -> list[Path]:
        Path(self.path).mkdir(parents=True, exist_ok=True)  # a live source may start empty
        return punctuated_files(self.path)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(str(p)) for p in self._files() if start["last"] < p.name <= end["last"]]

    def read(self, partition: InputPartition) -> Iterator[object]:
        yield from read_lines(partition.value, self.stream)

    def commit(self, end: dict) -> None:
        pass


_registered: set[int] = set()


def punctuated_lines(spark: SparkSession, path: str | Path, *, streaming: bool, stream: str | None = None) -> DataFrame:
    """Every non-blank line of a punctuated input with its file and line number (``stream``:
    the stream's name, for the message about a file that is not UTF-8)."""
    if id(spark) not in _registered:
        spark.dataSource.register(PunctuatedFiles)
        _registered.add(id(spark))
    path = Path(path)
    if not streaming:
        punctuated_files(path)  # a missing input is an error now, not inside a Spark task
    reader = (spark.readStream if streaming else spark.read).format(SOURCE_NAME).option("path", str(path.resolve()))
    if stream is not None:
        reader = reader.option("stream", stream)
    return reader.load()


__all__ = ["PunctuatedFiles", "punctuated_files", "punctuated_lines", "read_lines"]
