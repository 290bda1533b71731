"""The continuous [ROWS n] window (``RowsWindow.java``) against a brute-force oracle.

After each arriving tuple the window holds the last n tuples; the qualifying ones among
them give one row per group present (without groups exactly one row: COUNT 0 and NULL
aggregates when none qualifies), with the bitwise OR of their levels and the union of
their policies. The operator must give the same rows in one batch (a replay of the
operator itself) and across micro-batches, where only the last n - 1 tuples survive in
Spark's state store.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from streamwarden.engine.jvm import rows_window

pytestmark = pytest.mark.spark

FUNCS = ("count", "count", "min", "max", "sum", "avg")  # COUNT(*), COUNT(x), then x's
SCHEMA = "i long, q boolean, x long, g string, lv long, p array<string>"

# (qualifies, x, group, level bits, policies)
tuples = st.lists(st.tuples(st.booleans(), st.one_of(st.none(), st.integers(-5, 9)), st.sampled_from(["a", "b", None]),
                            st.sampled_from([1, 2, 4]), st.sampled_from([[], ["p1"], ["p2", "p1"]])), max_size=14)


def brute_force(rows: list[tuple], n: int, grouped: bool) -> list[tuple]:
    out = []
    for i in range(len(rows)):
        window = [r for r in rows[max(0, i - n + 1):i + 1] if r[0]]
        keys = sorted({r[2] for r in window}, key=lambda g: (g is None, str(g))) if grouped else [None]
        for key in keys:
            members = [r for r in window if r[2] == key] if grouped else window
            xs = [r[1] for r in members if r[1] is not None]
            level = 0
            for r in members:
                level |= r[3]
            out.append((i, key, len(members), len(xs), min(xs, default=None), max(xs, default=None),
                        float(sum(xs)) if xs else None, sum(xs) / len(xs) if xs else None, level,
                        tuple(sorted({p for r in members for p in r[4]}))))
    return sorted(out, key=repr)


def control(frame):
    return frame.select(
        F.col("i").alias("_t"), F.format_string("f:%012d", "i").alias("_a"), F.col("q").alias("_q"),
        F.array(F.lit(1.0), *[F.col("x").cast("double")] * 5).alias("_args"), F.struct("g").alias("_groups"),
        F.col("lv").alias("_lv"), F.col("p").alias("_policies"))


def emitted(rows, grouped: bool) -> list[tuple]:
    out = []
    for r in rows:
        aggs = r["_aggs"]
        out.append((r["ts"], r["_groups"]["g"] if grouped else None, int(aggs[0]), int(aggs[1]),
                    None if aggs[2] is None else int(aggs[2]), None if aggs[3] is None else int(aggs[3]), aggs[4],
                    aggs[5], r["_level"], tuple(r["_policies"])))
    return sorted(out, key=repr)


def close(got: list[tuple], expected: list[tuple]) -> bool:
    return len(got) == len(expected) and all(
        a[:7] == b[:7] and (a[7] == b[7] or abs(a[7] - b[7]) < 1e-9) and a[8:] == b[8:] for a, b in zip(got, expected))


@settings(max_examples=15, deadline=None, derandomize=True)
@given(rows=tuples, n=st.integers(1, 4), grouped=st.booleans())
def test_one_batch_gives_the_rows_of_the_definition(spark, rows, n, grouped) -> None:
    frame = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], SCHEMA)
    got = emitted(rows_window(control(frame), n, FUNCS, grouped).collect(), grouped)
    assert close(got, brute_force(rows, n, grouped)), (got, brute_force(rows, n, grouped))


@settings(max_examples=2, deadline=None, derandomize=True)
@given(rows=tuples, n=st.integers(2, 4), cuts=st.lists(st.integers(0, 14), min_size=2, max_size=2))
def test_micro_batches_give_the_rows_of_one_pass(spark, tmp_path_factory, rows, n, cuts) -> None:
    """The last n - 1 tuples cross micro-batches through Spark's state store (and its snapshot)."""
    source, checkpoint = tmp_path_factory.mktemp("rows-in"), tmp_path_factory.mktemp("rows-ckpt")
    frame = spark.readStream.schema(SCHEMA).parquet(str(source))
    name = f"rows_{checkpoint.name}".replace("-", "_")
    query = (rows_window(control(frame), n, FUNCS, True).writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(checkpoint)).outputMode("append").start())
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    try:
        for low, high in zip(bounds, bounds[1:]):
            if high > low:
                spark.createDataFrame([(i, *rows[i]) for i in range(low, high)], SCHEMA).write.mode("append") \
                    .parquet(str(source))
                query.processAllAvailable()
    finally:
        query.stop()
    got = emitted(spark.table(name).collect(), True)
    assert close(got, brute_force(rows, n, True)), (got, brute_force(rows, n, True))
