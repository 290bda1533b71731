"""Read a punctuated stream and pass it through the Security Shield.

:func:`read_punctuated` parses every line of the input (read in arrival order by
:mod:`streamwarden.engine.shield.files`) in the JVM against the stream's schema plus the
SP fields, and says why a record is unusable (``_broken``): not JSON of the catalog's
types, an unknown ``kind``, no ``ts``, a malformed SP, a missing provider attribute.

:func:`shielded_input` is what the engine reads: a broken record stops the job with one
error naming the file, the line and the record; then one shield per provider
(``punctuated_by``, else one for the stream) encodes each SP record for the user's
roles (:mod:`streamwarden.security.punctuation.encode`; a malformed pattern stops the job there,
naming file and line) and decides which policy governs each tuple
(:mod:`streamwarden.engine.shield.kernel`). The result has the stream's attributes,
unmasked, and ``_gov``; the plan's Shield operator turns ``_gov`` into masks. For a
``[ROWS n]`` window it also has ``_arrival``, each tuple's place in arrival order, which
the window orders ties in ``ts`` by (as the plain reader's
:func:`streamwarden.engine.sources.ordered_input`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from streamwarden.catalog.model import StreamDef
from streamwarden.engine.columns import SPARK_TYPES
from streamwarden.engine.shield.decide import sp_problem
from streamwarden.engine.shield.files import punctuated_lines
from streamwarden.engine.shield.kernel import GOV, SP_TEXT, ContinuousShield, ShieldConfig, replay_shield
from streamwarden.engine.sources import CORRUPT, arrival_place, catalog_schema, time_out_of_range

_SP_FIELDS = StructType([
    StructField("kind", StringType()), StructField("streams", StringType()), StructField("tuples", StringType()),
    StructField("attributes", StringType()), StructField("roles", StringType()), StructField("sign", StringType()),
    StructField("immutable", BooleanType()), StructField("grant", BooleanType()), StructField("sn", IntegerType()),
    StructField("sp_ts", TimestampType()), StructField("sp_csn", IntegerType()), StructField("seq", LongType()),
])
TIMESTAMPS = "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS][XXX]"
SP_COLUMNS = ("streams", "tuples", "attributes", "roles", "sign", "immutable", "grant", "sn")
#: A tuple's seq (as text), file and line on its way through the shield, rebuilt into ``_arrival`` after it.
PLACE = ("_arrival_seq", "_arrival_file", "_arrival_line")


def read_punctuated(spark: SparkSession, stream: StreamDef, path: str | Path, *, streaming: bool = False) -> DataFrame:
    """Every record of ``path``: ``_file``, ``_line``, ``_text``, ``_is_sp``, ``_sp`` (the SP
    fields), ``_seq``, ``sp_ts``/``sp_csn``, the stream's attributes and ``_broken``."""
    lines = punctuated_lines(spark, path, streaming=streaming, stream=stream.name)
    base = catalog_schema(stream, corrupt_column=True)
    fields = StructType(list(base.fields) + [f for f in _SP_FIELDS.fields if f.name not in base.fieldNames()])
    parsed = F.from_json("_text", fields, {"timestampFormat": TIMESTAMPS, "mode": "PERMISSIVE",
                                           "columnNameOfCorruptRecord": CORRUPT})
    frame = lines.withColumn("_r", parsed)
    r = F.col("_r")
    is_sp = F.coalesce(r["kind"] == F.lit("sp"), F.lit(False))
    sp = F.struct(*[r[c].alias(c) for c in SP_COLUMNS])
    provider = stream.punctuated_by
    broken = (
        F.when(r.isNull() | r[CORRUPT].isNotNull(), F.lit("not valid JSON of the catalog's types"))
        .when(r["kind"].isNotNull() & ~is_sp, F.concat(F.lit("unknown kind "), r["kind"]))
        .when(r["ts"].isNull(), F.lit("record has no ts"))
    )
    broken = F.coalesce(broken, time_out_of_range(stream, r))
    if provider is not None:
        broken = F.coalesce(broken, F.when(r[provider].isNull(), F.lit(f"record lacks the provider attribute {provider}")))
    return frame.select(
        "_file", "_line", "_text", is_sp.alias("_is_sp"), sp.alias("_sp"), r["seq"].alias("_seq"),
        r["sp_ts"].alias("sp_ts"), r["sp_csn"].alias("sp_csn"),
        *[r[name].alias(name) for name, _ in stream.schema], broken.alias("_broken"),
    )


def failing_on_broken(frame: DataFrame, stream: StreamDef) -> DataFrame:
    """Stop the job at a broken record with one message naming its file, line and problem."""
    where = F.concat(F.regexp_replace("_file", "^file:", ""), F.lit(":"), F.col("_line").cast("string"))
    # The record's text is not quoted: whoever reads the error may not be allowed to see it.
    message = F.concat(F.lit(f"broken record in stream {stream.name} ("), F.col("_broken"), F.lit(") at "), where)
    return frame.filter(F.when(F.col("_broken").isNotNull(), F.raise_error(message)).otherwise(F.lit(True)))


def shielded_input(spark: SparkSession, stream: StreamDef, path: str | Path, roles: Iterable[str], *,
                   streaming: bool, ordered: bool = False) -> DataFrame:
    """The stream's tuples (attributes unmasked) with ``_gov``, the SPs governing each (or NULL),
    and with ``ordered`` their ``_arrival`` (for ``[ROWS n]`` windows)."""
    frame = read_punctuated(spark, stream, path, streaming=streaming)
    frame = frame.withColumn("_broken", F.coalesce("_broken", F.when(F.col("_is_sp"), sp_problem())))
    frame = failing_on_broken(frame, stream)
    provider = stream.punctuated_by
    group: Column = F.col(provider).cast("string") if provider else F.lit("")
    # Integers cross Python as their decimal text: pandas would hold a column of longs with
    # NULLs (the SP records lack them) as float64, rounding values above 2^53 and failing
    # on 2^63 - 1, so a hidden provider's extreme value could stop every query.
    integers = frozenset(name for name, dtype in stream.schema if dtype in ("int", "long"))
    texts = integers | {name for name, dtype in stream.schema if dtype == "string"}
    # The tuples' places pass the shield as payload (it drops _file/_line/_seq); seq as text, as the integers.
    places = [F.col("_seq").cast("string").alias(PLACE[0]), F.col("_file").alias(PLACE[1]),
              F.col("_line").alias(PLACE[2])] if ordered else []
    if ordered:
        texts |= {PLACE[0], PLACE[1]}
    timestamps = frozenset(name for name, dtype in stream.schema if dtype == "timestamp")
    config = ShieldConfig(stream.name, stream.attributes, frozenset(roles), frozenset(texts), timestamps)
    config.encoder()  # fail here, not in a worker, on a schema SP masks cannot hold
    control = frame.select(
        group.alias("_g"), "_file", "_line", "_seq", "_is_sp",
        F.when(F.col("_is_sp"), F.unix_micros("ts")).alias("_pts"), F.col("_sp.sn").alias("_sn"),
        *[F.col(f"_sp.{name[1:]}").alias(name) for name in SP_TEXT],
        F.unix_micros("sp_ts").alias("_tts"), F.col("sp_csn").alias("_tcsn"),
        *[F.col(name).cast("string").alias(name) if name in integers else F.col(name) for name, _ in stream.schema],
        *places,
    )
    schema = ", ".join(f"`{name}` {'string' if name in integers else SPARK_TYPES[dtype]}"
                       for name, dtype in stream.schema)
    schema += "".join(f", {name} {dtype}" for name, dtype in zip(PLACE, ("string", "string", "bigint")) if ordered)
    schema += f", {GOV} string"
    grouped = control.groupBy("_g")
    if streaming:  # needs the RocksDB state store (see streamwarden.engine.sinks.start_writer)
        shielded = grouped.transformWithStateInPandas(ContinuousShield(tuple(control.columns), config), schema,
                                                      "Append", "None")
    else:
        shielded = grouped.applyInPandas(replay_shield(config), schema)
    return shielded.select(*[F.col(name).cast(SPARK_TYPES[dtype]).alias(name) if name in integers else F.col(name)
                             for name, dtype in stream.schema], GOV,
                           *([arrival_place(*[F.col(c) for c in PLACE])] if ordered else []))


def unshielded_input(spark: SparkSession, stream: StreamDef, path: str | Path, *, streaming: bool,
                     ordered: bool = False) -> DataFrame:
    """The stream's tuples with the SP records dropped and no shield (the unsecured baseline),
    with ``ordered`` their ``_arrival``."""
    frame = failing_on_broken(read_punctuated(spark, stream, path, streaming=streaming), stream)
    places = [arrival_place(F.col("_seq"), F.col("_file"), F.col("_line"))] if ordered else []
    return frame.filter(~F.col("_is_sp")).select(*[F.col(name) for name, _ in stream.schema], *places)


__all__ = ["failing_on_broken", "read_punctuated", "shielded_input", "unshielded_input"]
