"""Reading a stream from Kafka (its catalog ``source``, :mod:`streamwarden.catalog.sources`)
through Spark's own Kafka connector, typed and checked as a file's records are.

Each record's value is one JSON object of the stream's schema, parsed by a Spark SQL
expression (no Python per tuple). A record that is not JSON of the catalog's types, has no
value or no ``ts``, is broken: with ``on_broken="fail"`` it stops the job naming its topic,
partition and offset (never its text); with ``"quarantine"`` it is dropped and counted
(:mod:`streamwarden.engine.quarantine`). Offsets live in the query's checkpoint, as the
connector keeps them; an offset that aged out before it was read fails the query
(``failOnDataLoss``): data loss is said, never skipped.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.model import StreamDef
from streamwarden.catalog.sources import KafkaSource
from streamwarden.engine.jvm import kafka_available
from streamwarden.engine.quarantine import OnBroken, checked, kept, place_of
from streamwarden.errors import UsageError


def read_kafka(spark: SparkSession, stream: StreamDef, source: KafkaSource, *, streaming: bool,
               on_broken: OnBroken = "fail") -> DataFrame:
    """The records of ``stream`` from its Kafka ``source``: a continuous read from the
    declared starting offsets when ``streaming``, else every record the topic holds now."""
    from streamwarden.engine.sources import CORRUPT, TIMESTAMPS, catalog_schema, time_out_of_range

    if not kafka_available():
        raise UsageError(f"stream {stream.name} is read from Kafka, and Spark's Kafka connector is not installed "
                         "here: run 'make jars' (Maven fetches it into build/jvm/lib)")
    reader = spark.readStream if streaming else spark.read
    options = source.spark_options()
    if not streaming:
        options["startingOffsets"] = "earliest"  # a replay reads what the topic retains
    raw = reader.format("kafka").options(**options).load()
    schema = catalog_schema(stream, corrupt_column=True)
    value = F.col("value").cast("string")
    record = F.from_json(value, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT,
                                         "timestampFormat": TIMESTAMPS})
    fields = [F.col("timestamp").alias("ts") if name == "ts" and source.time == "record"
              else F.col("record")[name].alias(name) for name, _ in stream.schema]
    frame = raw.select(record.alias("record"), "topic", "partition", "offset", "timestamp", value.alias("_value"))
    frame = frame.select(*fields, F.col("record")[CORRUPT].alias(CORRUPT), "topic", "partition", "offset",
                         F.col("_value").isNull().alias("_no_value"))
    problem = F.coalesce(
        F.when(F.col("_no_value"), F.lit("record has no value"))
        .when(F.col(CORRUPT).isNotNull(), F.lit("not valid JSON of the catalog's types"))
        .when(F.col("ts").isNull(), F.lit("record has no ts")),
        time_out_of_range(stream),
    )
    at = F.concat(F.lit("topic "), F.col("topic"), F.lit(" partition "), F.col("partition").cast("string"),
                  F.lit(" offset "), F.col("offset").cast("string"))
    place = place_of(F.concat_ws("/", F.col("topic"), F.col("partition").cast("string")), F.col("offset"), at)
    frame = checked(frame, problem, place, stream.name, on_broken)
    return frame.select(*[F.col(n) for n, _ in stream.schema], *kept(on_broken))


__all__ = ["read_kafka"]
