"""NEXMark's queries written by hand in plain PySpark (DataFrame API), no streamwarden.

Each function computes the same rows as the unsecured CQL query of the same id in
``examples/nexmark/queries.yaml`` (the baseline the benchmark compares against, and
the oracle ``tests/test_nexmark.py`` checks streamwarden's unsecured replay with),
over the same Parquet files the generator writes. The CQL semantics
they follow (docs/semantics.md): event-time windows aligned to the epoch, start
inclusive and end exclusive; ``FROM A [RANGE wa], B [RANGE wb]`` pairs ``a`` and ``b``
when ``a.ts - wb <= b.ts <= a.ts + wa``; an aggregate over a join is windowed on the
first input's ``ts``. Output columns are CQL's: ``window_start``/``window_end`` first
for aggregates, timestamps as Spark timestamps (the JSON writer formats them).

    >>> sorted(QUERIES)
    ['q0', 'q1', 'q2', 'q3', 'q4', 'q5', 'q7', 'q8']
    >>> # frame = plain_frame(spark, "q5", "data/nexmark"); frame.write.json("out/q5")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

WINDOW = "10 seconds"


@dataclass(frozen=True)
class Streams:
    """The three NEXMark streams as DataFrames, read lazily (a query reads only what it uses)."""

    spark: SparkSession
    root: Path

    def read(self, name: str) -> DataFrame:
        return self.spark.read.parquet(str(self.root / name))

    @property
    def person(self) -> DataFrame:
        return self.read("Person")

    @property
    def auction(self) -> DataFrame:
        return self.read("Auction")

    @property
    def bid(self) -> DataFrame:
        return self.read("Bid")


def _within(left_ts: Column, right_ts: Column, seconds: int) -> Column:
    """CQL's window join condition for two [RANGE seconds] inputs: |left - right| <= seconds."""
    return (right_ts >= left_ts - F.expr(f"INTERVAL {seconds} SECONDS")) & \
        (right_ts <= left_ts + F.expr(f"INTERVAL {seconds} SECONDS"))


def _windowed(frame: DataFrame, ts: Column, size: str, slide: str | None = None) -> DataFrame:
    """``frame`` with each row in every epoch-aligned window holding ``ts`` (``window_start``, ``window_end``)."""
    window = F.window(ts, size, slide) if slide else F.window(ts, size)
    return frame.withColumn("_w", window).withColumn("window_start", F.col("_w.start")) \
        .withColumn("window_end", F.col("_w.end")).drop("_w")


def q0(s: Streams) -> DataFrame:
    """Pass through."""
    return s.bid.select("auction", "bidder", "price", "ts", "extra")


def q1(s: Streams) -> DataFrame:
    """Currency conversion (a double, as CQL's 0.908 is)."""
    return s.bid.select("auction", "bidder", (F.lit(0.908) * F.col("price")).alias("price"), "ts", "extra")


def q2(s: Streams) -> DataFrame:
    """Selection: bids on every 123rd auction."""
    return s.bid.where(F.col("auction") % 123 == 0).select("auction", "price")


def q3(s: Streams) -> DataFrame:
    """Local item suggestion: Auction [RANGE 10 s] joined with Person [RANGE 10 s] on the seller."""
    a = s.auction.where(F.col("category") == 10).alias("A")
    p = s.person.where(F.col("state").isin("OR", "ID", "CA")).alias("P")
    pairs = a.join(p, (F.col("A.seller") == F.col("P.id")) & _within(F.col("A.ts"), F.col("P.ts"), 10))
    return pairs.select("P.name", "P.city", "P.state", "A.id")


def q4(s: Streams) -> DataFrame:
    """Each auction's highest bid while it was open, per 10 s window of the auction's ts."""
    a, b = s.auction.alias("A"), s.bid.alias("B")
    pairs = a.join(b, (F.col("A.id") == F.col("B.auction")) & _within(F.col("A.ts"), F.col("B.ts"), 10)
                   & (F.col("B.ts") >= F.col("A.ts")) & (F.col("B.ts") <= F.col("A.expires")))
    pairs = _windowed(pairs.select(F.col("A.ts").alias("ts"), "A.id", "A.category", "B.price"), F.col("ts"), WINDOW)
    return pairs.groupBy("window_start", "window_end", "id", "category").agg(F.max("price").alias("final"))


def q5(s: Streams) -> DataFrame:
    """Bids per auction per sliding window (10 s, every 2 s)."""
    bids = _windowed(s.bid.select("ts", "auction"), F.col("ts"), WINDOW, "2 seconds")
    return bids.groupBy("window_start", "window_end", "auction").agg(F.count(F.lit(1)).alias("num"))


def q7(s: Streams) -> DataFrame:
    """The highest price per 10 s tumbling window."""
    bids = _windowed(s.bid.select("ts", "price"), F.col("ts"), WINDOW)
    return bids.groupBy("window_start", "window_end").agg(F.max("price").alias("maxprice"))


def q8(s: Streams) -> DataFrame:
    """New people with the auctions they opened within 10 s, per 10 s window of their registration."""
    p, a = s.person.alias("P"), s.auction.alias("A")
    pairs = p.join(a, (F.col("P.id") == F.col("A.seller")) & _within(F.col("P.ts"), F.col("A.ts"), 10))
    pairs = _windowed(pairs.select(F.col("P.ts").alias("ts"), "P.id", "P.name"), F.col("ts"), WINDOW)
    return pairs.groupBy("window_start", "window_end", "id", "name").agg(F.count(F.lit(1)).alias("auctions"))


QUERIES: dict[str, Callable[[Streams], DataFrame]] = {
    "q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q7": q7, "q8": q8,
}


def plain_frame(spark: SparkSession, query: str, data: str | Path) -> DataFrame:
    """The plain PySpark DataFrame of NEXMark query ``query`` over the streams under ``data``."""
    return QUERIES[query](Streams(spark, Path(data)))
