"""The JVM shield (``streamwarden.jvm.SecurityShield``) against the Python reference shield.

The state machine exists twice: in Python (:class:`streamwarden.security.punctuation.shield.Shield`,
the reference, unit-tested rule by rule in test_shield.py) and in Java, which the engine
runs. Random sequences of SPs and tuples, in several providers and split over several
micro-batches (the state goes through its snapshot), must get the same decision for every
tuple from both: the same governing SPs in the same order, or none.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, IntegerType, LongType, StringType, StructField, StructType)

from streamwarden.engine.shield.kernel import GOV, apply_shield
from streamwarden.security.punctuation.shield import Shield

pytestmark = pytest.mark.spark


@dataclass(frozen=True)
class Sp:
    ts: int
    sn: int

    @property
    def code(self) -> str:  # what the engine carries as an SP's code: any JSON object
        return f'{{"ts":{self.ts},"sn":{self.sn}}}'


@dataclass(frozen=True)
class Tuple:
    ts: int | None
    csn: int | None


events = st.one_of(
    st.builds(Sp, st.integers(0, 3), st.integers(1, 3)),
    st.builds(Tuple, st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 3))),
)
# Per provider: its records split into micro-batches (each a list of events).
providers = st.lists(st.lists(st.lists(events, max_size=6), min_size=1, max_size=3), min_size=1, max_size=3)

SCHEMA = StructType([
    StructField("_g", StringType()), StructField("_seq", LongType()), StructField("_file", StringType()),
    StructField("_line", LongType()), StructField("_is_sp", BooleanType()), StructField("_pts", LongType()),
    StructField("_sn", IntegerType()), StructField("_code", StringType()), StructField("_tts", LongType()),
    StructField("_tcsn", IntegerType()), StructField("_id", LongType()),
])


def reference(batches: list[list[Sp | Tuple]]) -> list[str | None]:
    """Each tuple's governing codes by the Python shield, its state snapshotted between batches."""
    shield, decisions = Shield(), []
    for batch in batches:
        for event in batch:
            if isinstance(event, Sp):
                shield.on_sp(event)
            else:
                governing = shield.on_tuple(event.ts, event.csn)
                decisions.append(None if governing is None else "[" + ",".join(s.code for s in governing.sps) + "]")
        shield = Shield.restore(shield.snapshot(lambda s: [s.ts, s.sn]), lambda r: Sp(*r))
    return decisions


def rows(provider: str, batch: list[Sp | Tuple], start: int) -> list[tuple]:
    out = []
    for line, event in enumerate(batch, start=start):
        if isinstance(event, Sp):
            out.append((provider, None, "f", line, True, event.ts, event.sn, event.code, None, None, line))
        else:
            out.append((provider, None, "f", line, False, None, None, None, event.ts, event.csn, line))
    return out


@settings(max_examples=12, deadline=None, derandomize=True)
@given(providers)
def test_jvm_shield_decides_as_the_reference_in_a_replay(spark, streams) -> None:
    """One batch (a replay): every provider's records at once, in arrival order by line."""
    merged = [[event for batch in batches for event in batch] for batches in streams]
    control = spark.createDataFrame([row for p, events in enumerate(merged) for row in rows(f"p{p}", events, 0)],
                                    SCHEMA)
    control = control.withColumn("_payload", F.struct("_g", "_id")).drop("_id")
    got = {(row["_g"], row["_id"]): row[GOV]
           for row in apply_shield(control).select("_payload._g", "_payload._id", GOV).collect()}
    for p, events in enumerate(merged):
        ids = [i for i, e in enumerate(events) if isinstance(e, Tuple)]
        assert [got[(f"p{p}", i)] for i in ids] == reference([events]), f"provider p{p}"


@settings(max_examples=2, deadline=None, derandomize=True)
@given(providers)
def test_jvm_shield_decides_as_the_reference_across_micro_batches(spark, tmp_path_factory, streams) -> None:
    """Replay each provider's micro-batches through one streaming query (memory source, so the
    shield's state crosses batches through Spark's state store) and compare every decision."""
    checkpoint = tmp_path_factory.mktemp("shield-jvm")
    rounds = max(len(batches) for batches in streams)
    per_round: list[list[tuple]] = [[] for _ in range(rounds)]
    lines = {}
    for p, batches in enumerate(streams):
        for r, batch in enumerate(batches):
            per_round[r] += rows(f"p{p}", batch, lines.get(p, 0))
            lines[p] = lines.get(p, 0) + len(batch)
    source = tmp_path_factory.mktemp("shield-jvm-in")
    control = spark.readStream.schema(SCHEMA).parquet(str(source))
    control = control.withColumn("_payload", F.struct("_g", "_id")).drop("_id")
    name = f"shield_jvm_{checkpoint.name}".replace("-", "_")
    query = (apply_shield(control).select("_payload._g", "_payload._id", GOV).writeStream
             .format("memory").queryName(name).option("checkpointLocation", str(checkpoint)).start())
    try:
        for r, batch_rows in enumerate(per_round):
            spark.createDataFrame(batch_rows, SCHEMA).write.mode("append").parquet(str(source))
            query.processAllAvailable()
    finally:
        query.stop()
    got = {(row["_g"], row["_id"]): row[GOV] for row in spark.table(name).collect()}
    for p, batches in enumerate(streams):
        ids = [i for i, e in enumerate(e for b in batches for e in b) if isinstance(e, Tuple)]
        assert [got[(f"p{p}", i)] for i in ids] == reference(batches), f"provider p{p}"
