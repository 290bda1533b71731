"""The smart-healthcare workload of experiments 6 and 7: catalog, queries, readings, plain PySpark twins.

* :data:`CATALOG_TEXT`: the streams and users of ``streamwarden/demo/network.yaml`` with
  one read policy per stream for their common role, so that a single-query
  ``api.run`` authorizes exactly the plan a network pipeline runs (without role policies
  only the network's grants decide, and ``api.run`` has no grants).
* :data:`QUERIES_TEXT`: Zaki et al.'s CQ1 (Stream1 ⋈ Stream2), CQ2 (CQ1's join ⋈ Stream3
  on location) and CQ3 (the same prefix ⋈ Stream3 on the device id), two users each;
  :data:`SELECTIONS_TEXT`: three one-stream selections for three users (latency).
* :func:`readings`: seeded readings of the three streams, minute by minute (the same
  minute always holds the same tuples, so a run can be fed in parts).
* :func:`plain_frame`: each query written by hand with ``readStream`` (no security), and
  :func:`start_plain` writing it with ``writeStream`` to a JSON sink.
* :func:`query_rows` / :func:`sink_rows` / :func:`network_rows`: what a run delivered,
  projected on the query's columns, to compare runs of different kinds.

    >>> sorted(readings(Sizes(per_minute=2, stream3_per_minute=1), 0, 1))
    ['Stream1', 'Stream2', 'Stream3']
    >>> [len(v) for v in readings(Sizes(per_minute=2, stream3_per_minute=1), 0, 2).values()]
    [4, 4, 2]
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery, load_queries_text

START = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
WINDOW = "[RANGE 5 min SLIDE 1 min]"
STREAMS = ("Stream1", "Stream2", "Stream3")
SCHEMAS = {  # as in network.yaml; the plain queries read with these
    "Stream1": "ts TIMESTAMP, streamid INT, location STRING, heartRate INT",
    "Stream2": "ts TIMESTAMP, streamid INT, location STRING, speed DOUBLE",
    "Stream3": "ts TIMESTAMP, streamid INT, location STRING, screentime DOUBLE, category STRING",
}
CATALOG_TEXT = """
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, location: string, heartRate: int}}
  Stream2: {schema: {ts: timestamp, streamid: int, location: string, speed: double}}
  Stream3: {schema: {ts: timestamp, streamid: int, location: string, screentime: double, category: string}}
roles: {staff: {}}
users:
  dr_lee: {roles: [staff]}
  nurse_kim: {roles: [staff]}
  wellness_app: {roles: [staff]}
policies:
  - {id: read_s1, subject: staff, streams: [Stream1], privilege: read}
  - {id: read_s2, subject: staff, streams: [Stream2], privilege: read}
  - {id: read_s3, subject: staff, streams: [Stream3], privilege: read}
"""
QUERIES_TEXT = f"""
queries:
  - id: CQ1
    users: [dr_lee, nurse_kim]
    query: >-
      SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {WINDOW}, Stream2 AS s2 {WINDOW}
      WHERE s1.location = s2.location AND s1.ts > 6:00am AND s1.ts < 7:00pm AND s2.speed < 30
  - id: CQ2
    users: [dr_lee, wellness_app]
    query: >-
      SELECT s1.streamid, s1.heartRate, s3.screentime FROM Stream1 AS s1 {WINDOW},
      Stream2 AS s2 {WINDOW}, Stream3 AS s3 {WINDOW}
      WHERE s1.location = s2.location AND s2.location = s3.location AND s1.ts > 6:00am AND s1.ts < 7:00pm
      AND s2.speed < 30 AND s3.screentime > 5
  - id: CQ3
    users: [nurse_kim, wellness_app]
    query: >-
      SELECT s1.streamid, s2.speed, s3.category FROM Stream1 AS s1 {WINDOW},
      Stream2 AS s2 {WINDOW}, Stream3 AS s3 {WINDOW}
      WHERE s1.location = s2.location AND s1.streamid = s3.streamid AND s1.ts > 6:00am AND s1.ts < 7:00pm
      AND s2.speed < 30 AND s3.category = "social"
"""
SELECTIONS_TEXT = """
queries:
  - {id: SEL1, users: [dr_lee, nurse_kim], query: "SELECT streamid, heartRate FROM Stream1 WHERE heartRate > 100"}
  - {id: SEL2, users: [dr_lee, wellness_app], query: "SELECT streamid, speed FROM Stream2 WHERE speed < 30"}
  - {id: SEL3, users: [nurse_kim, wellness_app], query: "SELECT streamid, screentime FROM Stream3 WHERE screentime > 5"}
"""
#: Each query's output columns (what runs of different kinds are compared on).
COLUMNS = {"CQ1": ("streamid", "heartRate"), "CQ2": ("streamid", "heartRate", "screentime"),
           "CQ3": ("streamid", "speed", "category"), "SEL1": ("streamid", "heartRate"),
           "SEL2": ("streamid", "speed"), "SEL3": ("streamid", "screentime")}


@dataclass(frozen=True)
class Sizes:
    """Readings per minute (Stream1 and Stream2 each ``per_minute``, Stream3 ``stream3_per_minute``)
    and the key domains that set how many tuples each join pairs."""

    per_minute: int = 60
    stream3_per_minute: int = 10
    locations: int = 40
    devices: int = 60
    seed: int = 2021


def catalog() -> Catalog:
    return load_catalog_text(CATALOG_TEXT, "<bench network catalog>")


def queries(cat: Catalog, text: str = QUERIES_TEXT) -> tuple[RegisteredQuery, ...]:
    return load_queries_text(text, cat, "<bench network queries>")


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def readings(sizes: Sizes, first_minute: int, last_minute: int) -> dict[str, list[dict]]:
    """Readings of minutes ``[first_minute, last_minute)`` after :data:`START`; each minute is
    drawn from its own seed. Locations and device ids are uniform, so the join of Stream1
    and Stream2 pairs each Stream1 tuple with ~per_minute·10·½ / locations Stream2 tuples
    (±5 minutes, speed < 30)."""
    s = sizes
    places = [f"place-{i:02d}" for i in range(s.locations)]
    out: dict[str, list[dict]] = {stream: [] for stream in STREAMS}
    for minute in range(first_minute, last_minute):
        rng = random.Random(s.seed * 100_003 + minute)
        for k in range(s.per_minute):
            ts = iso(START + timedelta(minutes=minute, seconds=60 * k / s.per_minute))
            out["Stream1"].append({"ts": ts, "streamid": rng.randrange(s.devices), "location": rng.choice(places),
                                   "heartRate": rng.randint(55, 140)})
            out["Stream2"].append({"ts": ts, "streamid": rng.randrange(s.devices), "location": rng.choice(places),
                                   "speed": round(rng.uniform(0, 60), 1)})
        for k in range(s.stream3_per_minute):
            ts = iso(START + timedelta(minutes=minute, seconds=60 * k / s.stream3_per_minute))
            out["Stream3"].append({"ts": ts, "streamid": rng.randrange(s.devices), "location": rng.choice(places),
                                   "screentime": round(rng.uniform(0, 9), 1),
                                   "category": rng.choice(["social", "work"])})
    return out


def land(folder: Path, name: str, rows: Iterable[Mapping[str, object]]) -> None:
    """Write ``folder/name`` atomically: staged under a hidden name (the file source skips
    those), then renamed, so a micro-batch never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f".{name}.partial"
    staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(staged, folder / name)


def land_all(inputs: Mapping[str, Path], name: str, data: Mapping[str, list[dict]]) -> None:
    for stream, rows in data.items():
        land(inputs[stream], name, rows)


def grant_all(store_url: str, registered: Iterable[RegisteredQuery], lost: Iterable[str] = ()) -> None:
    """Every user granted an hour before the input starts; the users of the ``lost`` queries
    revoked at its first timestamp (the paper's "queries lose access")."""
    server = AuthorizationServer(store_url)
    gone = set(lost)
    for q in registered:
        for user in q.users:
            server.grant(q.id, user, START - timedelta(hours=1))
            if q.id in gone:
                server.revoke(q.id, user, START)


# -- plain PySpark: the same queries by hand, no security -----------------------------------
def _read(spark: SparkSession, inputs: Mapping[str, str | Path], stream: str, prefix: str,
          watermark: bool = True) -> DataFrame:
    """``stream`` with its columns prefixed (``s1_ts``, ...), watermarked on its ``ts`` (0 s late)."""
    frame = spark.readStream.schema(SCHEMAS[stream]).json(str(inputs[stream]))
    frame = frame.select(*[F.col(c).alias(f"{prefix}_{c}") for c in frame.columns])
    return frame.withWatermark(f"{prefix}_ts", "0 seconds") if watermark else frame


def _daytime(ts: Column) -> Column:
    seconds = F.hour(ts) * 3600 + F.minute(ts) * 60 + F.second(ts)
    return (seconds > 6 * 3600) & (seconds < 19 * 3600)


def _near(a: str, b: str) -> Column:
    """``b``'s ts within the 5-minute window of ``a``'s (the interval join the engine plans)."""
    ta = F.col(f"{a}_ts")
    return F.col(f"{b}_ts").between(ta - F.expr("INTERVAL 5 MINUTES"), ta + F.expr("INTERVAL 5 MINUTES"))


def plain_frame(spark: SparkSession, query: str, inputs: Mapping[str, str | Path]) -> DataFrame:
    """Query ``query`` (an id of :data:`COLUMNS`) written by hand over ``inputs``. As in any
    chain of stream-stream joins, the second join keeps one event-time column (Stream1's):
    Stream2's ``ts`` loses its watermark after the first join (Spark allows one per side)."""
    if query.startswith("SEL"):
        stream = {"SEL1": "Stream1", "SEL2": "Stream2", "SEL3": "Stream3"}[query]
        frame = spark.readStream.schema(SCHEMAS[stream]).json(str(inputs[stream]))
        keep = {"SEL1": F.col("heartRate") > 100, "SEL2": F.col("speed") < 30, "SEL3": F.col("screentime") > 5}
        return frame.filter(keep[query]).select(*COLUMNS[query])
    s1 = _read(spark, inputs, "Stream1", "s1").filter(_daytime(F.col("s1_ts")))
    s2 = _read(spark, inputs, "Stream2", "s2").filter(F.col("s2_speed") < 30)
    pair = s1.join(s2, (F.col("s1_location") == F.col("s2_location")) & _near("s1", "s2"))
    if query == "CQ1":
        return pair.select(F.col("s1_streamid").alias("streamid"), F.col("s1_heartRate").alias("heartRate"))
    pair = pair.withColumn("s2_ts", F.col("s2_ts").alias("s2_ts", metadata={}))
    s3 = _read(spark, inputs, "Stream3", "s3")
    if query == "CQ2":
        s3 = s3.filter(F.col("s3_screentime") > 5)
        on = F.col("s2_location") == F.col("s3_location")
        columns = ("s1_streamid", "s1_heartRate", "s3_screentime")
    else:
        s3 = s3.filter(F.col("s3_category") == "social")
        on = F.col("s1_streamid") == F.col("s3_streamid")
        columns = ("s1_streamid", "s2_speed", "s3_category")
    joined = pair.join(s3, on & _near("s1", "s3") & _near("s2", "s3"))
    return joined.select(*[F.col(c).alias(c.split("_", 1)[1]) for c in columns])


def start_plain(frame: DataFrame, sink: Path, checkpoint: Path, *, trigger: str | None = None,
                available_now: bool = False, name: str | None = None) -> StreamingQuery:
    """``frame`` written as JSON lines to ``sink`` (append mode), as a hand-written job would."""
    writer = frame.writeStream.format("json").option("path", str(sink)).option("checkpointLocation", str(checkpoint))
    if name:
        writer = writer.queryName(name)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


# -- what a run delivered ------------------------------------------------------------------
def _lines(paths: Iterable[Path]) -> Iterable[dict]:
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def query_rows(rows: Iterable[dict], query: str) -> Counter:
    """The multiset of ``rows`` projected on ``query``'s columns."""
    return Counter(tuple(r.get(c) for c in COLUMNS[query]) for r in rows)


def sink_rows(sink: Path, query: str) -> Counter:
    """Rows a JSON sink (``api.run`` or a plain query) holds, projected on ``query``'s columns."""
    return query_rows(_lines(sorted(sink.glob("part-*"))), query)


def network_rows(output: Path, user: str, query: str) -> Counter:
    """Rows a network delivered to ``user`` for ``query`` (``OUT/<user>/<query>/batch=*/part-*``)."""
    return query_rows(_lines(sorted((output / user / query).glob("batch=*/part-*"))), query)


__all__ = ["CATALOG_TEXT", "COLUMNS", "QUERIES_TEXT", "SELECTIONS_TEXT", "START", "STREAMS", "Sizes", "catalog",
           "grant_all", "iso", "land", "land_all", "network_rows", "plain_frame", "queries", "query_rows",
           "readings", "sink_rows", "start_plain"]
