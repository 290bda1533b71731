"""The scale curve's N users' queries written by hand: one plain PySpark batch pass, no streamwarden.

    python -m bench.network_scale_plain MODE READINGS_DIR QUERIES.json OUT_DIR SPARK_CONF.json

Each of ``QUERIES.json``'s entries ``{"user", "ward", "kind", "above"}`` is one user's query
over the readings of their ward (what the role policy ``Readings.ward = self.ward`` lets
them read): ``kind`` ``select`` is ``SELECT sensor, value FROM Readings WHERE value > above``,
``avg`` is ``SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]``. The pass reads the
JSON-lines files once (into Spark's cache), computes every user's rows and writes them in
one partitioned write, ``OUT_DIR/user=<user>/part-*.json`` (JSON lines, Spark's timestamp
format). Two ways of writing it by hand (``MODE``):

* ``per-query``: each query its own DataFrame over the cached readings, the N frames
  unioned (the straightforward transcription; the issue's "by hand" column);
* ``as-data``: the queries as a small table, broadcast and joined with the readings on the
  ward (selections: ``value > above`` in the join condition), the averages computed once
  per ward and window and joined with their users (what issue 25 asks the engine to do).

Only the windows a ``network run --available-now`` closes are written: those ending by the
latest reading's time (with lateness 0 the watermark is the latest event time, and the last
window is still open when the input ends). The settings are streamwarden's
(``SPARK_CONF.json``, computed by the caller: importing streamwarden here would cost the
plain side its import). Prints one JSON line: each phase's wall and process-tree CPU seconds.

    >>> _query_text({"kind": "select", "above": 95.5})
    'SELECT sensor, value FROM Readings WHERE value > 95.5'
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from bench.suite.job import process_tree_cpu_s

SCHEMA = "ts TIMESTAMP, sensor STRING, ward STRING, value DOUBLE"
WINDOW = "1 minute"
MODES = ("per-query", "as-data")
AVG_QUERY = "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]"


def _query_text(query: Mapping[str, Any]) -> str:
    """The CQL a user registers for ``query`` (the same text streamwarden runs)."""
    if query["kind"] == "avg":
        return AVG_QUERY
    return f"SELECT sensor, value FROM Readings WHERE value > {query['above']}"


class _Clock:
    """Wall and CPU seconds per phase (CPU of this process's tree: the Python, Spark's JVM)."""

    def __init__(self) -> None:
        self.numbers: dict[str, float] = {}
        self.last = (time.perf_counter(), process_tree_cpu_s(os.getpid()))

    def mark(self, phase: str) -> None:
        now = (time.perf_counter(), process_tree_cpu_s(os.getpid()))
        self.numbers[f"{phase}_s"] = round(now[0] - self.last[0], 3)
        self.numbers[f"{phase}_cpu_s"] = round(now[1] - self.last[1], 3)
        self.last = now


def _windows(frame: Any, latest: Any, F: Any, *keys: str) -> Any:
    """Average value per epoch-aligned one-minute window (and ``keys``), closed windows only."""
    averaged = frame.groupBy(*keys, F.window("ts", WINDOW).alias("w")).agg(F.avg("value").alias("avg"))
    return averaged.where(F.col("w.end") <= F.lit(latest)).select(
        *keys, F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "avg")


def per_query(readings: Any, queries: Sequence[Mapping[str, Any]], latest: Any, F: Any) -> Any:
    """Every query as its own DataFrame, unioned: one branch per user."""
    frames = []
    for q in queries:
        mine = readings.where(F.col("ward") == q["ward"])
        if q["kind"] == "avg":
            rows = _windows(mine, latest, F)
        else:
            rows = mine.where(F.col("value") > float(q["above"])).select("sensor", "value")
        frames.append(rows.select(F.lit(q["user"]).alias("user"), "*"))
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def as_data(spark: Any, readings: Any, queries: Sequence[Mapping[str, Any]], latest: Any, F: Any) -> Any:
    """The queries as a table joined with the readings: one selection join, one aggregate per ward."""
    table = spark.createDataFrame([(q["user"], q["ward"], q["kind"], float(q.get("above") or 0.0)) for q in queries],
                                  "user STRING, qward STRING, kind STRING, above DOUBLE")
    parts = []
    if any(q["kind"] == "select" for q in queries):
        selections = F.broadcast(table.where(F.col("kind") == "select"))
        matches = (readings.ward == selections.qward) & (readings.value > selections.above)
        parts.append(readings.join(selections, matches)
                     .select("user", "sensor", "value"))
    if any(q["kind"] == "avg" for q in queries):
        averages = F.broadcast(table.where(F.col("kind") == "avg"))
        per_ward = _windows(readings, latest, F, "ward")
        parts.append(per_ward.join(averages, per_ward.ward == averages.qward)
                     .select("user", "window_start", "window_end", "avg"))
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 5 or argv[0] not in MODES:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    mode, folder, queries_file, out, conf = argv
    clock = _Clock()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    clock.mark("import_pyspark")
    builder = SparkSession.builder.appName(f"plain {mode}")
    for key, value in json.loads(conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    clock.mark("spark_start")
    queries = json.loads(open(queries_file, encoding="utf-8").read())
    readings = spark.read.schema(SCHEMA).json(folder).cache()
    latest = readings.agg(F.max("ts")).first()[0]  # the one read of the files, into the cache
    clock.mark("read")
    frame = per_query(readings, queries, latest, F) if mode == "per-query" else as_data(spark, readings, queries,
                                                                                          latest, F)
    clock.mark("build")
    # A selection's rows have no window columns and an average's no sensor: leave them out, not null.
    frame.write.partitionBy("user").option("ignoreNullFields", "true").json(out)
    clock.mark("write")
    spark.stop()  # the JVM exits once this Python does; the launcher reaps it and counts its time
    clock.mark("stop")
    print(json.dumps(clock.numbers), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
