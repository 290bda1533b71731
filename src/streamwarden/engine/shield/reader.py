"""Read a punctuated stream and pass it through the Security Shield.

:func:`read_punctuated` parses every line of the input (read in arrival order by
:mod:`streamwarden.engine.shield.files`) in the JVM against the stream's schema plus the
SP fields, and says why a record is unusable (``_broken``): not JSON of the catalog's
types, an unknown ``kind``, no ``ts``, a malformed SP, a missing provider attribute.

:func:`shielded_input` is what the engine reads: a broken record stops the job with one
error naming the file, the line and the problem (in quarantine mode it is dropped and
counted, and its provider's shield hears of it, see :func:`shielded_input`); each SP record is encoded for the
user's roles in the JVM (a malformed pattern is a broken record too), and one shield per
provider (``punctuated_by``, else one for the stream) decides in the JVM which policy
governs each tuple and what it grants for the tuple's key
(:mod:`streamwarden.engine.shield.kernel`). The result has the stream's attributes,
unmasked, and ``_gov``, that decision; the plan's Shield operator masks by it. For a
``[ROWS n]`` window it also has ``_arrival``, each tuple's place in arrival order, which the
window orders ties in ``ts`` by (as the plain reader's :func:`streamwarden.engine.sources.ordered_input`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from streamwarden.catalog.model import StreamDef
from streamwarden.engine.jvm import sp_encoder
from streamwarden.engine.shield.decide import key_number, key_text, sp_problem
from streamwarden.engine.shield.files import line_place, parsed_once, punctuated_lines
from streamwarden.engine.quarantine import BROKEN, PLACE, OnBroken, checked, observed_broken, place_of, quarantined
from streamwarden.engine.shield.kernel import GOV, MALFORMED, QUARANTINED, SP_TEXT, apply_shield
from streamwarden.engine.sources import (ARRIVAL, CORRUPT, TIMESTAMPS, arrival_place, catalog_schema, micros_in_range,
                                         time_out_of_range)
from streamwarden.security.punctuation.encode import SpEncoder

_SP_FIELDS = StructType([
    StructField("kind", StringType()), StructField("streams", StringType()), StructField("tuples", StringType()),
    StructField("attributes", StringType()), StructField("roles", StringType()), StructField("sign", StringType()),
    StructField("immutable", BooleanType()), StructField("grant", BooleanType()), StructField("sn", IntegerType()),
    StructField("sp_ts", TimestampType()), StructField("sp_csn", IntegerType()), StructField("seq", LongType()),
])
SP_COLUMNS = (*SP_TEXT, "sn")


def read_punctuated(spark: SparkSession, stream: StreamDef, path: str | Path, *, streaming: bool = False,
                    on_broken: OnBroken = "fail") -> DataFrame:
    """Every record of ``path``: ``_file``, ``_block``, ``_line`` (see
    :func:`~streamwarden.engine.shield.files.punctuated_lines`), ``_text``, ``_is_sp``, ``_sp`` (the SP
    fields), ``_seq``, ``sp_ts``/``sp_csn``, the stream's attributes and ``_broken``. With
    ``on_broken="quarantine"`` a line that is not UTF-8 is a record too (``_text`` NULL, broken)."""
    lines = punctuated_lines(spark, path, streaming=streaming, stream=stream.name, on_broken=on_broken)
    base = catalog_schema(stream, corrupt_column=True)
    fields = StructType(list(base.fields) + [f for f in _SP_FIELDS.fields if f.name not in base.fieldNames()])
    frame = parsed_once(lines, fields, {"timestampFormat": TIMESTAMPS, "mode": "PERMISSIVE",
                                        "columnNameOfCorruptRecord": CORRUPT})
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
        lacks = F.lit(f"record lacks the provider attribute {provider}")
        broken = F.coalesce(broken, F.when(r[provider].isNull(), lacks))
    return frame.select(
        "_file", "_block", "_line", "_text", is_sp.alias("_is_sp"), sp.alias("_sp"), r["seq"].alias("_seq"),
        r["sp_ts"].alias("sp_ts"), r["sp_csn"].alias("sp_csn"),
        *[r[name].alias(name) for name, _ in stream.schema], broken.alias("_broken"),
    )


def failing_on_broken(frame: DataFrame, stream: StreamDef, on_broken: OnBroken = "fail") -> DataFrame:
    """Stop the job at a broken record with one message naming its file, line and problem (the
    record's text is not quoted: whoever reads the error may not be allowed to see it); in
    quarantine mode, mark it instead (see :func:`streamwarden.engine.quarantine.checked`)."""
    place = place_of(F.col("_file"), F.col("_line"), line_place())
    return checked(frame, F.col(BROKEN), place, stream.name, on_broken, joiner=" at ")


def shielded_input(spark: SparkSession, stream: StreamDef, path: str | Path, roles: Iterable[str], *,
                   streaming: bool, ordered: bool = False, on_broken: OnBroken = "fail",
                   metrics_tag: str = "") -> DataFrame:
    """The stream's tuples (attributes unmasked) with ``_gov``, the provider's decision on each (or NULL),
    and with ``ordered`` their ``_arrival`` (for ``[ROWS n]`` windows).

    With ``on_broken="quarantine"`` no broken record stops the job or leaves: each is counted
    (:func:`~streamwarden.engine.quarantine.observed_broken`), and one its provider can be told
    from (its ``punctuated_by`` attribute reads, or the stream has one shield) reaches that
    provider's shield as a marker with no payload (:func:`quarantine_markers`), so that a
    lost SP makes its policy grant nothing rather than leave the remaining SPs to grant more
    than the provider declared. A record no provider can be told from reaches no shield: a
    broken record never touches another provider's state.
    """
    roles = frozenset(roles)
    SpEncoder(stream.name, stream.attributes, roles)  # a schema SP masks cannot hold fails here, with its reason
    frame = read_punctuated(spark, stream, path, streaming=streaming, on_broken=on_broken)
    is_sp = F.col("_is_sp")
    fields = [F.col(f"_sp.{name}") for name in SP_TEXT]
    code = sp_encoder(spark, stream.name, stream.attributes, roles, fields)
    frame = frame.withColumn("_code", F.when(is_sp, code))
    malformed = F.when(F.col("_code").startswith(MALFORMED), F.expr(f"substring(_code, {len(MALFORMED) + 1})"))
    frame = frame.withColumn("_broken", F.coalesce("_broken", F.when(is_sp, sp_problem()), malformed))
    frame = failing_on_broken(frame, stream, on_broken)
    provider = stream.punctuated_by
    assert stream.key is not None  # the catalog requires a key of every punctuated stream
    key, key_dtype = stream.key, dict(stream.schema)[stream.key]
    payload = [F.col(name) for name, _ in stream.schema]
    if ordered:
        payload.append(arrival_place(F.col("_seq"), F.col("_file"), F.col("_line")))
    group = (F.col(provider).cast("string") if provider else F.lit("")).alias("_g")
    if on_broken == "quarantine":
        frame = observed_broken(frame, stream.name, streaming=streaming, tag=metrics_tag)
        control = quarantine_markers(frame, group, key, key_dtype, payload)
    else:
        control = frame.select(
            group, F.col("_seq").cast("long").alias("_seq"), "_file", F.col("_line").cast("long").alias("_line"),
            "_is_sp", F.unix_micros("ts").alias("_pts"), F.col("_sp.sn").cast("int").alias("_sn"), "_code",
            F.unix_micros("sp_ts").alias("_tts"), F.col("sp_csn").cast("int").alias("_tcsn"),
            key_text(F.col(key)).alias("_ktext"), key_number(F.col(key), key_dtype).alias("_knum"),
            F.struct(*payload).alias("_payload"),
        )
    shielded = apply_shield(control)
    return shielded.select(*[F.col(f"_payload.{name}").alias(name) for name, _ in stream.schema], GOV,
                           *([F.col(f"_payload.{ARRIVAL}").alias(ARRIVAL)] if ordered else []))


def quarantine_markers(frame: DataFrame, group: Column, key: str, key_dtype: str, payload: list[Column]) -> DataFrame:
    """The shield's control columns (:data:`~streamwarden.engine.shield.kernel.CONTROL`) in quarantine
    mode: a good record's as in fail mode; a broken record's as a marker (``_code``
    :data:`~streamwarden.engine.shield.kernel.QUARANTINED`, NULL payload and key), dropped
    here when no provider can be told from it.

    A marker is an SP's (it taints its policy: ``_pts`` its readable ts, else NULL for the
    policy in force) unless the record reads as a tuple: a JSON object with no ``kind``
    field. A line that is not JSON, or not UTF-8, could have been an SP, so it counts as
    one. A tuple's marker carries its ``sp_ts``/``sp_csn`` (a tuple that names another
    policy drops the current one)."""
    broken = F.col(PLACE).isNotNull()
    declared_tuple = ~F.coalesce(F.array_contains(F.json_object_keys("_text"), "kind"), F.lit(True))
    marker_is_sp = F.when(broken, ~declared_tuple).otherwise(F.col("_is_sp"))
    control = frame.select(
        group, F.col("_seq").cast("long").alias("_seq"), "_file", F.col("_line").cast("long").alias("_line"),
        marker_is_sp.alias("_is_sp"),
        F.when(broken, micros_in_range(F.col("ts"))).otherwise(F.unix_micros("ts")).alias("_pts"),
        F.when(~broken, F.col("_sp.sn").cast("int")).alias("_sn"),
        F.when(broken, F.lit(QUARANTINED)).otherwise(F.col("_code")).alias("_code"),
        F.unix_micros("sp_ts").alias("_tts"), F.col("sp_csn").cast("int").alias("_tcsn"),
        F.when(~broken, key_text(F.col(key))).alias("_ktext"),
        F.when(~broken, key_number(F.col(key), key_dtype)).alias("_knum"),
        F.when(~broken, F.struct(*payload)).alias("_payload"),
        broken.alias("_marker"),
    )
    # A marker no provider can be told from reaches no shield: it may not touch another's state.
    return control.filter(~F.col("_marker") | F.col("_g").isNotNull()).drop("_marker")


def unshielded_input(spark: SparkSession, stream: StreamDef, path: str | Path, *, streaming: bool,
                     ordered: bool = False, on_broken: OnBroken = "fail", metrics_tag: str = "") -> DataFrame:
    """The stream's tuples with the SP records dropped and no shield (the unsecured baseline),
    with ``ordered`` their ``_arrival``; a broken record handled by ``on_broken``."""
    frame = failing_on_broken(read_punctuated(spark, stream, path, streaming=streaming, on_broken=on_broken), stream,
                              on_broken)
    if on_broken == "quarantine":
        frame = quarantined(frame, stream.name, streaming=streaming, tag=metrics_tag)
    places = [arrival_place(F.col("_seq"), F.col("_file"), F.col("_line"))] if ordered else []
    return frame.filter(~F.col("_is_sp")).select(*[F.col(name) for name, _ in stream.schema], *places)


__all__ = ["failing_on_broken", "quarantine_markers", "read_punctuated", "shielded_input", "unshielded_input"]
