"""Reading recorded or live input streams as DataFrames typed by the catalog.

A path is a ``.jsonl`` file, a ``.parquet`` file, or a directory holding either. JSON
lines carry ISO-8601 timestamps. The same function reads for replay (batch) and for a
continuous run (``readStream``, new files picked up as they land), so both see the same
typed columns.

A broken record is a line that is not JSON, has a value of the wrong type or out of its
type's range, a time outside the years 1..9999, or lacks ``ts``. By default (``on_broken=
"fail"``) it fails closed and loudly: it stops the job with an error naming the file and
the problem, raised by a Spark SQL expression (no Python per tuple). The error never
quotes the record: whoever reads it may not be allowed to see that tuple. Nothing already
written is lost: a continuous run resumes from its checkpoint once the file is fixed.
With ``on_broken="quarantine"`` it is dropped and counted instead
(:mod:`streamwarden.engine.quarantine`).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from streamwarden.catalog.model import StreamDef
from streamwarden.engine.columns import SPARK_TYPES, physical_name
from streamwarden.engine.quarantine import OnBroken, checked, kept, place_of, quarantined
from streamwarden.errors import InputError

CORRUPT = "_corrupt_record"
#: How JSON lines write timestamps (ISO 8601, optional microseconds and offset): every reader's.
TIMESTAMPS = "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS][XXX]"
ARRIVAL = "_arrival"
JSON_SUFFIXES = (".jsonl", ".json")
#: The file a record came from, named in a broken record's error. Not ``input_file_name()``:
#: that one is nondeterministic, so Spark would push none of the query's filters past the
#: check into the reader.
FILE_PATH = "_metadata.file_path"


#: Spark's readers accept "+10000-01-01T00:00:00Z"; Python, the output format and the
#: prover (years 1..9999) do not, so such a time is a broken record, not a crash later.
LAST_MICROSECOND = 253_402_300_799_999_999
FIRST_MICROSECOND = -62_135_596_800_000_000


def micros_in_range(time: Column) -> Column:
    """``time`` in microseconds since the epoch, or NULL when it lies outside the years 1..9999."""
    micros = F.unix_micros(time)
    return F.when((micros >= F.lit(FIRST_MICROSECOND)) & (micros <= F.lit(LAST_MICROSECOND)), micros)


def time_out_of_range(stream: StreamDef, record: Column | None = None) -> Column:
    """A problem text when a timestamp attribute of ``stream`` (a column, or a field of the
    parsed ``record``) lies outside the years 1..9999."""
    problem = None
    for name, dtype in reversed(stream.schema):
        if dtype == "timestamp":
            micros = F.unix_micros(F.col(name) if record is None else record[name])
            bad = (micros < F.lit(FIRST_MICROSECOND)) | (micros > F.lit(LAST_MICROSECOND))
            problem = F.when(bad, F.lit(f"{name} is outside the years 1 to 9999")).otherwise(problem)
    assert problem is not None, "every stream has its event time ts, a timestamp (the loader checks)"
    return problem


def catalog_schema(stream: StreamDef, *, corrupt_column: bool = False) -> StructType:
    fields = [StructField(name, _parse_datatype_string(SPARK_TYPES[dtype]), True) for name, dtype in stream.schema]
    if corrupt_column:
        fields.append(StructField(CORRUPT, _parse_datatype_string("string"), True))
    return StructType(fields)


def read_input(spark: SparkSession, stream: StreamDef, path: str | Path, *, streaming: bool,
               max_files_per_trigger: int | None = None, on_broken: OnBroken = "fail",
               metrics_tag: str = "") -> DataFrame:
    """The records of ``stream`` at ``path``, typed and checked, with catalog column names (a broken
    record handled by ``on_broken``, its count named with ``metrics_tag``). A stream whose
    catalog declares a Kafka source is read from it (:mod:`streamwarden.engine.kafka`), ``path`` unused."""
    if stream.source is not None:
        from streamwarden.engine.kafka import read_kafka  # the connector's reader: imported when a stream needs it

        frame = read_kafka(spark, stream, stream.source, streaming=streaming, on_broken=on_broken)
        return quarantined(frame, stream.name, streaming=streaming, tag=metrics_tag) \
            if on_broken == "quarantine" else frame
    path = Path(path)
    if not path.exists():
        if streaming:
            path.mkdir(parents=True, exist_ok=True)  # a live source may start empty
        else:
            raise InputError(f"input for stream {stream.name} not found: {path}")
    frames: list[DataFrame] = []
    if path.is_file():
        if path.suffix in JSON_SUFFIXES:
            frames.append(_json(spark, stream, str(path), streaming, None, max_files_per_trigger, on_broken))
        elif path.suffix == ".parquet":
            frames.append(_parquet(spark, stream, str(path), streaming, None, max_files_per_trigger, on_broken))
        else:
            raise InputError(f"input for stream {stream.name} must be .jsonl or .parquet: {path}")
    else:
        names = [p.name for p in path.iterdir()]
        has_json = any(n.endswith(".jsonl") for n in names)
        has_parquet = any(n.endswith(".parquet") for n in names)
        if has_json or streaming:
            frames.append(_json(spark, stream, str(path), streaming, "*.jsonl", max_files_per_trigger, on_broken))
        if has_parquet or streaming:
            frames.append(_parquet(spark, stream, str(path), streaming, "*.parquet", max_files_per_trigger,
                                   on_broken))
        if not frames:
            frames.append(spark.createDataFrame([], catalog_schema(stream)))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return quarantined(frame, stream.name, streaming=streaming, tag=metrics_tag) if on_broken == "quarantine" else frame


def _reader(spark: SparkSession, streaming: bool, glob: str | None,
            max_files: int | None) -> DataFrameReader | DataStreamReader:
    reader: DataFrameReader | DataStreamReader = spark.readStream if streaming else spark.read
    if glob:
        reader = reader.option("pathGlobFilter", glob)
    if streaming and max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    return reader


def _json(spark: SparkSession, stream: StreamDef, path: str, streaming: bool, glob: str | None,
          max_files: int | None, on_broken: OnBroken) -> DataFrame:
    schema = catalog_schema(stream, corrupt_column=True)
    frame = (
        _reader(spark, streaming, glob, max_files)
        .schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("timestampFormat", TIMESTAMPS)
        .json(path)
    )
    problem = F.coalesce(
        F.when(F.col(CORRUPT).isNotNull(), F.lit("not valid JSON of the catalog's types"))
        .when(F.col("ts").isNull(), F.lit("record has no ts")),
        time_out_of_range(stream),
    )
    place = place_of(F.col(FILE_PATH), None, F.col(FILE_PATH))
    frame = checked(frame, problem, place, stream.name, on_broken)
    return frame.select(*[F.col(n) for n, _ in stream.schema], *kept(on_broken))


def _parquet(spark: SparkSession, stream: StreamDef, path: str, streaming: bool, glob: str | None,
             max_files: int | None, on_broken: OnBroken, *, arrival: bool = False) -> DataFrame:
    reader = _reader(spark, streaming, glob, max_files)
    if streaming:
        frame = reader.schema(catalog_schema(stream)).parquet(path)
    else:
        frame = reader.parquet(path)
        missing = [n for n, _ in stream.schema if n not in frame.columns]
        if missing:
            raise InputError(f"parquet input {path} for stream {stream.name} lacks {', '.join(missing)}")
    # try_cast, then refuse what did not fit: a hidden row's value out of the catalog's type
    # must neither stop the job with Spark's CAST_OVERFLOW nor appear in the message.
    # Only a column whose file type differs from the catalog's can fail that way: the others
    # are read as they are, so Spark prunes the ones the query does not use and pushes the
    # query's filters on them into the Parquet reader.
    # A Parquet file keeps its rows' order: the row's index in its file is its place in arrival order.
    arrivals = [arrival_place(F.lit(None), F.col(FILE_PATH), F.col("_metadata.row_index") + 1)] if arrival else []
    file_types = {f.name: f.dataType for f in frame.schema.fields}
    cast = [n for n, t in stream.schema if file_types.get(n) != _parse_datatype_string(SPARK_TYPES[t])]
    typed = frame.select(*[F.col(n).try_cast(SPARK_TYPES[t]).alias(n) if n in cast else F.col(n)
                           for n, t in stream.schema],
                         *[F.col(n).isNotNull().alias(f"__had_{n}") for n in cast], *arrivals)
    problem = time_out_of_range(stream)
    for n, t in reversed(stream.schema):
        if n in cast:
            unfit = F.col(f"__had_{n}") & F.col(n).isNull()
            problem = F.when(unfit, F.lit(f"{n} does not fit a {t}")).otherwise(problem)
    no_ts = F.col("ts").isNull() & ~F.col("__had_ts") if "ts" in cast else F.col("ts").isNull()
    problem = F.when(no_ts, F.lit("record has no ts")).otherwise(problem)
    place = place_of(F.col(FILE_PATH), None, F.col(FILE_PATH))
    typed = checked(typed, problem, place, stream.name, on_broken)
    return typed.select(*[F.col(n) for n, _ in stream.schema], *([ARRIVAL] if arrival else []), *kept(on_broken))


def arrival_place(seq: Column, file: Column, line: Column) -> Column:
    """A tuple's place in arrival order, ``_arrival`` = (seq, file, line), for ``[ROWS n]``
    windows (see :func:`streamwarden.engine.rows.arrival_key`). As the Security Shield's
    :func:`~streamwarden.engine.shield.kernel.arrival_order`: a punctuated record's ``seq``
    first, then the file and the line (a record without ``seq`` before one with it; a
    plain stream's records have none)."""
    return F.struct(seq.cast("long").alias("seq"), file.alias("file"), line.cast("long").alias("line")).alias(ARRIVAL)


def ordered_input(spark: SparkSession, stream: StreamDef, path: str | Path, *, streaming: bool,
                  on_broken: OnBroken = "fail", metrics_tag: str = "") -> DataFrame:
    """Records with their place in arrival order, ``_arrival`` = (seq, file, line) (see
    :func:`arrival_place`; seq is NULL here): a JSON-lines record's line, a Parquet row's
    index in its file (+ 1). A broken record is handled by ``on_broken`` (see :func:`read_input`).

    Count-based windows need it: ``[ROWS n]`` orders tuples by ``ts``, ties by input
    order, which Spark's file sources do not keep (see :mod:`streamwarden.engine.shield.files`).
    """
    path = Path(path)
    if not path.exists() and not streaming:
        raise InputError(f"input for stream {stream.name} not found: {path}")
    names = [p.name for p in path.iterdir()] if path.is_dir() else []
    live = streaming and (path.is_dir() or not path.exists())
    frames = []
    if path.suffix in JSON_SUFFIXES or any(n.endswith(JSON_SUFFIXES) for n in names) or live:
        frames.append(_ordered_json(spark, stream, path, streaming, on_broken))
    if path.suffix == ".parquet" or any(n.endswith(".parquet") for n in names) or live:
        glob = "*.parquet" if path.is_dir() or live else None
        frames.append(_parquet(spark, stream, str(path), streaming, glob, None, on_broken, arrival=True))
    if not frames:
        return spark.createDataFrame([], catalog_schema(stream)).withColumn(
            ARRIVAL, arrival_place(F.lit(None), F.lit(None).cast("string"), F.lit(None)))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return quarantined(frame, stream.name, streaming=streaming, tag=metrics_tag) if on_broken == "quarantine" else frame


def _ordered_json(spark: SparkSession, stream: StreamDef, path: Path, streaming: bool,
                  on_broken: OnBroken) -> DataFrame:
    from streamwarden.engine.shield.files import line_place, parsed_once, punctuated_lines  # the same ordered reader

    lines = punctuated_lines(spark, path, streaming=streaming, stream=stream.name, on_broken=on_broken)
    options = {"timestampFormat": TIMESTAMPS, "mode": "PERMISSIVE",
               "columnNameOfCorruptRecord": CORRUPT}
    frame = parsed_once(lines, catalog_schema(stream, corrupt_column=True), options)
    r = F.col("_r")
    problem = F.coalesce(F.when(r.isNull() | r[CORRUPT].isNotNull(), F.lit("not valid JSON of the catalog's types"))
                         .when(r["ts"].isNull(), F.lit("record has no ts")), time_out_of_range(stream, r))
    place = place_of(F.col("_file"), F.col("_line"), line_place())
    frame = checked(frame, problem, place, stream.name, on_broken, joiner=" at ")
    return frame.select(*[r[n].alias(n) for n, _ in stream.schema],
                        arrival_place(F.lit(None), F.col("_file"), F.col("_line")), *kept(on_broken))


def as_relation(frame: DataFrame, stream: StreamDef, relation: str) -> DataFrame:
    """Rename the stream's columns (and a shield's ``_gov``, the shepherd's ``level``) to
    ``relation``'s physical names."""
    names = [n for n, _ in stream.schema] + [c for c in ("_gov", "level", "_arrival", "_rank") if c in frame.columns]
    return frame.select(*[F.col(n).alias(physical_name(relation, n)) for n in names])
