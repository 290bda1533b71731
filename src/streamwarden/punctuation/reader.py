"""Read a punctuated stream (SP records interleaved with tuples) in arrival order.

Arrival order is the line order, files in name order, unless every record carries an
explicit integer ``seq``. Spark's JSON reader forgets line positions, so files are read
as text, ordered by their hidden ``_metadata`` (file, split start) and row ids, and
parsed with ``from_json``: the per-record work stays in the JVM. Every row keeps its
file and line, so a broken record can be named.

The result has ``_order`` (arrival order), ``_file``, ``_line``, ``_is_sp``, the SP
fields (``sp_streams``, ``sp_tuples``, ``sp_attributes``, ``sp_roles``, ``sp_sign``,
``sp_immutable``, ``sp_grant``, ``sp_policy_ts``, ``sp_sn``), the stream's attributes,
``sp_ts``/``sp_csn`` (a tuple's ts.csn_sp) and ``_broken`` (why a record is unusable).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window
from pyspark.sql.types import (BooleanType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from streamwarden.catalog.model import StreamDef
from streamwarden.engine.sources import CORRUPT, catalog_schema
from streamwarden.errors import InputError

_SP_FIELDS = StructType([
    StructField("kind", StringType()), StructField("streams", StringType()), StructField("tuples", StringType()),
    StructField("attributes", StringType()), StructField("roles", StringType()), StructField("sign", StringType()),
    StructField("immutable", BooleanType()), StructField("grant", BooleanType()), StructField("sn", IntegerType()),
    StructField("sp_ts", TimestampType()), StructField("sp_csn", IntegerType()), StructField("seq", LongType()),
])


def punctuated_files(path: str | Path) -> list[Path]:
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.exists():
        raise InputError(f"punctuated input not found: {path}")
    return sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".json") and not p.name.startswith("."))


def _numbered_lines(spark: SparkSession, files: list[Path]) -> DataFrame:
    """Lines with their file, 1-based line number and a sortable arrival position.

    Everything stays in the JVM: a line's position is (file, start of its split, its
    row id), since row ids grow in line order within a split and splits of a file are
    ordered by their start offset. Files sort by path, i.e. by name in one folder.
    """
    lines = spark.read.text([str(f) for f in files]).select(
        F.col("_metadata.file_path").alias("_file"),
        F.struct(F.col("_metadata.file_path"), F.col("_metadata.file_block_start"),
                 F.monotonically_increasing_id()).alias("_position"),
        F.col("value").alias("_text"),
    )
    line = F.row_number().over(Window.partitionBy("_file").orderBy("_position"))
    return lines.select("_file", line.cast("long").alias("_line"), "_position", "_text")


def read_punctuated(spark: SparkSession, stream: StreamDef, path: str | Path) -> DataFrame:
    """Every record of ``path`` with its arrival order, parsed against ``stream``'s schema."""
    files = punctuated_files(path)
    if not files:
        frame = spark.createDataFrame([], "_file string, _line long, _position struct<a:string,b:long,c:long>, "
                                          "_text string")
    else:
        frame = _numbered_lines(spark, files)
    frame = frame.filter(F.trim("_text") != "")
    base = catalog_schema(stream, corrupt_column=True)
    fields = StructType(list(base.fields) + [f for f in _SP_FIELDS.fields if f.name not in base.fieldNames()])
    parsed = F.from_json("_text", fields, {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS][XXX]",
                                           "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    frame = frame.withColumn("_r", parsed)
    is_sp = F.col("_r.kind") == F.lit("sp")
    # An explicit seq orders records only when every record has one (else line order).
    has_seq = frame.agg(F.min(F.col("_r.seq").isNotNull().cast("int"))).first()
    use_seq = bool(has_seq and has_seq[0] == 1)
    order = F.struct(F.lit(""), F.col("_r.seq"), F.lit(0).cast("long")) if use_seq else F.col("_position")
    columns = [
        order.alias("_order"), F.col("_file"), F.col("_line"), F.coalesce(is_sp, F.lit(False)).alias("_is_sp"),
        F.col("_r.streams").alias("sp_streams"), F.col("_r.tuples").alias("sp_tuples"),
        F.col("_r.attributes").alias("sp_attributes"), F.col("_r.roles").alias("sp_roles"),
        F.col("_r.sign").alias("sp_sign"), F.col("_r.immutable").alias("sp_immutable"),
        F.col("_r.grant").alias("sp_grant"), F.when(is_sp, F.col("_r.ts")).alias("sp_policy_ts"),
        F.col("_r.sn").alias("sp_sn"), F.col("_r.sp_ts").alias("sp_ts"), F.col("_r.sp_csn").alias("sp_csn"),
        *[F.col(f"_r.`{name}`").alias(name) for name, _ in stream.schema],
    ]
    broken = (
        F.when(F.col("_r").isNull() | F.col(f"_r.{CORRUPT}").isNotNull(), F.lit("not valid JSON of the catalog's types"))
        .when(F.col("_r.kind").isNotNull() & ~is_sp, F.concat(F.lit("unknown kind "), F.col("_r.kind")))
        .when(F.col("_r.ts").isNull(), F.lit("record has no ts"))
    )
    return frame.select(*columns, broken.alias("_broken"), F.col("_text"))


def check_records(frame: DataFrame, stream: StreamDef) -> None:
    """Raise one :class:`InputError` naming the first broken record (file, line, text)."""
    first = frame.filter(F.col("_broken").isNotNull()).orderBy("_order").select("_file", "_line", "_broken", "_text").first()
    if first is not None:
        name = first["_file"].removeprefix("file:")
        raise InputError(f"broken record in punctuated stream {stream.name} ({first['_broken']}) at "
                         f"{name}:{first['_line']}: {first['_text']}")
