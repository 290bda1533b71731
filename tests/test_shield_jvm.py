"""The JVM shield (``streamwarden.jvm.SecurityShield``) against the Python reference shield
and against Spark SQL.

The state machine exists twice: in Python (:class:`oracles.shield.Shield` in
tests/oracles/shield.py, the reference, unit-tested rule by rule in test_shield.py) and in Java, which the engine
runs. Random sequences of SPs and tuples, in several providers and split over several
micro-batches (the state goes through its snapshot), must get the same decision for every
tuple from both: the same masks from the same governing SPs, or none.

The JVM also matches each governing SP's tuple pattern against the key; that replaced a
Spark SQL expression, which stays here as the oracle (:func:`sql_matches`): every pattern
the encoder makes, against keys chosen where Java and Spark differ (NaN, -0.0, infinities,
surrogate pairs, numbers as text, NULL), must match in both or in neither.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import Column
from pyspark.sql.types import (BooleanType, DoubleType, IntegerType, LongType, StringType, StructField, StructType)

from streamwarden.engine.shield.decide import key_number, key_text
from streamwarden.engine.shield.kernel import GOV, QUARANTINED, apply_shield
from streamwarden.security.punctuation.encode import SpEncoder, SpText

from oracles.shield import Shield

pytestmark = pytest.mark.spark


@dataclass(frozen=True)
class Sp:
    ts: int
    sn: int
    positive: bool = True

    @property
    def mask(self) -> int:  # a different attribute set per (ts, sn), so decisions name their SPs
        return 1 << (self.ts * 4 + self.sn)

    @property
    def code(self) -> str:  # an encoder's code whose tuple pattern matches every key
        return json.dumps({"p": self.positive, "i": self.sn == 3, "g": self.ts % 2 == 0, "m": self.mask, "k": "any",
                           "ls": None, "hs": None, "ld": None, "hd": None, "vs": [], "vd": []})


def decision(governing: list[Sp]) -> tuple[int, int, bool]:
    """(mask, grant, immutable) of the governing SPs, each matching the key."""
    denied = sum({s.mask for s in governing if not s.positive})
    granted = sum({s.mask for s in governing if s.positive})
    grantable = sum({s.mask for s in governing if s.positive and s.ts % 2 == 0})
    return granted & ~denied, grantable & ~denied, any(s.sn == 3 for s in governing)


@dataclass(frozen=True)
class Tuple:
    ts: int | None
    csn: int | None


@dataclass(frozen=True)
class BrokenSp:
    """A quarantined SP (quarantine mode): its policy ts, or None when unreadable."""

    ts: int | None


@dataclass(frozen=True)
class BrokenTuple:
    """A quarantined tuple: acts on the state as its tuple would, never decided."""

    ts: int | None
    csn: int | None


events = st.one_of(
    st.builds(Sp, st.integers(0, 3), st.integers(1, 3), st.booleans()),
    st.builds(Tuple, st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 3))),
    st.builds(BrokenSp, st.one_of(st.none(), st.integers(0, 3))),
    st.builds(BrokenTuple, st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 3))),
)
# Per provider: its records split into micro-batches (each a list of events).
providers = st.lists(st.lists(st.lists(events, max_size=6), min_size=1, max_size=3), min_size=1, max_size=3)

SCHEMA = StructType([
    StructField("_g", StringType()), StructField("_seq", LongType()), StructField("_file", StringType()),
    StructField("_line", LongType()), StructField("_is_sp", BooleanType()), StructField("_pts", LongType()),
    StructField("_sn", IntegerType()), StructField("_code", StringType()), StructField("_tts", LongType()),
    StructField("_tcsn", IntegerType()), StructField("_ktext", StringType()), StructField("_knum", DoubleType()),
    StructField("_id", LongType()),
])


def reference(batches: list[list[Sp | Tuple]]) -> list[tuple[int, int, bool] | None]:
    """Each tuple's decision by the Python shield, its state snapshotted between batches."""
    shield, decisions = Shield(), []
    for batch in batches:
        for event in batch:
            if isinstance(event, Sp):
                shield.on_sp(event)
            elif isinstance(event, BrokenSp):
                shield.on_quarantined_sp(event.ts)
            elif isinstance(event, BrokenTuple):
                shield.on_tuple(event.ts, event.csn)
            else:
                governing = shield.on_tuple(event.ts, event.csn)
                decisions.append(None if governing is None else decision(list(governing.sps)))
        shield = Shield.restore(shield.snapshot(lambda s: [s.ts, s.sn, s.positive]), lambda r: Sp(*r))
    return decisions


def rows(provider: str, batch: list[Sp | Tuple], start: int) -> list[tuple]:
    out = []
    for line, event in enumerate(batch, start=start):
        if isinstance(event, Sp):
            out.append((provider, None, "f", line, True, event.ts, event.sn, event.code, None, None, None, None, line))
        elif isinstance(event, BrokenSp):
            out.append((provider, None, "f", line, True, event.ts, None, QUARANTINED, None, None, None, None, line))
        elif isinstance(event, BrokenTuple):
            out.append((provider, None, "f", line, False, None, None, QUARANTINED, event.ts, event.csn, None, None,
                        line))
        else:
            out.append((provider, None, "f", line, False, None, None, None, event.ts, event.csn, "k", None, line))
    return out


def _decision(gov) -> tuple[int, int, bool] | None:
    return None if gov is None else (gov["mask"], gov["grant"], gov["immutable"])


@settings(max_examples=12, deadline=None, derandomize=True)
@given(providers)
def test_jvm_shield_decides_as_the_reference_in_a_replay(spark, streams) -> None:
    """One batch (a replay): every provider's records at once, in arrival order by line."""
    merged = [[event for batch in batches for event in batch] for batches in streams]
    control = spark.createDataFrame([row for p, events in enumerate(merged) for row in rows(f"p{p}", events, 0)],
                                    SCHEMA)
    control = control.withColumn("_payload", F.struct("_g", "_id")).drop("_id")
    got = {(row["_g"], row["_id"]): _decision(row[GOV])
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
        for batch_rows in per_round:
            spark.createDataFrame(batch_rows, SCHEMA).write.mode("append").parquet(str(source))
            query.processAllAvailable()
    finally:
        query.stop()
    got = {(row["_g"], row["_id"]): _decision(row[GOV]) for row in spark.table(name).collect()}
    for p, batches in enumerate(streams):
        ids = [i for i, e in enumerate(e for b in batches for e in b) if isinstance(e, Tuple)]
        assert [got[(f"p{p}", i)] for i in ids] == reference(batches), f"provider p{p}"


# -- tuple patterns: the JVM's matching against Spark SQL's ------------------------------------------
SP_CODE = ("struct<p:boolean,i:boolean,g:boolean,m:bigint,k:string,ls:string,hs:string,"
           "ld:double,hd:double,vs:array<string>,vd:array<double>>")


def sql_matches(p: Column, text: Column, number: Column) -> Column:
    """The Spark SQL expression the JVM's matching replaced: does code ``p`` match the key?"""
    inclusive = p["k"] == "closed"
    above = F.when(p["ld"].isNotNull() & number.isNotNull(),
                   F.when(inclusive, p["ld"] <= number).otherwise(p["ld"] < number)).otherwise(
                   F.when(inclusive, p["ls"] <= text).otherwise(p["ls"] < text))
    below = F.when(p["hd"].isNotNull() & number.isNotNull(),
                   F.when(inclusive, number <= p["hd"]).otherwise(number < p["hd"])).otherwise(
                   F.when(inclusive, text <= p["hs"]).otherwise(text < p["hs"]))
    in_set = (F.coalesce(F.array_contains(p["vs"], text), F.lit(False))
              | (number.isNotNull() & F.coalesce(F.array_contains(p["vd"], number), F.lit(False))))
    return (F.when(p["k"] == "any", True)
            .when(p["k"].isin("const", "set"), in_set)
            .when(p["k"].isin("closed", "open"), F.coalesce(above & below, F.lit(False)))
            .otherwise(False))


PATTERNS = ("*", "{}", "120", "120.0", "{120, abc, -0}", "[100, 200]", "(100, 200)", "[a, c]", "(a, c)",
            "[1, abc]", "[abc, 5]", "[-5, 1e300]", "{0.0}", "[-9223372036854775808, 9223372036854775807]",
            '["", "é"]', '["\ue000", "\U0001d11e"]', '("\U0001d11e", "\U0001d120")', '{"NaN", "Infinity"}',
            '{" 120"}', "[9007199254740992, 9007199254740993]", '["1e3", "2e3"]')
STRING_KEYS = ("120", " 120 ", "120.0", "1e3", "1500", "abc", "b", "ab", "", "é", "\U0001d11e", "\U0001d11f", "\ue000",
               "\uffff", "NaN", "Infinity", "-0", "0", "-0.0", "1e400", "\u0085120", "12\u00a0", None)
DOUBLE_KEYS = (120.0, -0.0, 0.0, math.nan, math.inf, -math.inf, 1e300, 150.5, None)
LONG_KEYS = (120, 0, -5, 2**63 - 1, -2**63, 2**53 + 1, 9007199254740993, None)


@pytest.mark.parametrize(("dtype", "keys"), [("string", STRING_KEYS), ("double", DOUBLE_KEYS), ("long", LONG_KEYS)])
def test_jvm_matches_tuple_patterns_as_spark_sql(spark, dtype, keys) -> None:
    """One provider per (pattern, key): an SP of the pattern, then a tuple with the key; the
    JVM's mask must be the SP's mask exactly when the Spark SQL expression matches."""
    encoder = SpEncoder("S", ("ts", "k"), {"R"})
    codes = [encoder(SpText("S", pattern, "k", "R")) for pattern in PATTERNS]
    records = []
    for i, code in enumerate(codes):
        for j, key in enumerate(keys):
            group = f"{i}/{j}"
            records += [(group, 0, True, code, None), (group, 1, False, None, key)]
    frame = spark.createDataFrame(records, f"_g string, _line long, _is_sp boolean, _code string, key {dtype}")
    key = F.col("key")
    control = frame.select(
        "_g", F.lit(None).cast("long").alias("_seq"), F.lit("f").alias("_file"), "_line", "_is_sp",
        F.lit(0).cast("long").alias("_pts"), F.lit(1).alias("_sn"), "_code",
        F.when(~F.col("_is_sp"), F.lit(0).cast("long")).alias("_tts"),
        F.when(~F.col("_is_sp"), F.lit(1)).alias("_tcsn"),
        key_text(key).alias("_ktext"), key_number(key, dtype).alias("_knum"), F.struct("_g", "key").alias("_payload"))
    jvm = apply_shield(control).select(F.col("_payload._g").alias("_g"), F.col(f"{GOV}.mask").alias("jvm"))
    sql = frame.filter(~F.col("_is_sp")).select("_g", "key").join(
        frame.filter("_is_sp").select("_g", F.from_json("_code", SP_CODE).alias("p")), "_g")
    sql = sql.select("_g", "key", sql_matches(F.col("p"), key_text(key), key_number(key, dtype)).alias("sql"))
    rows = sql.join(jvm, "_g").collect()
    assert len(rows) == len(codes) * len(keys)
    wrong = [(PATTERNS[int(r["_g"].split("/")[0])], r["key"], r["sql"], r["jvm"]) for r in rows
             if (r["jvm"] == 2) != r["sql"]]
    assert not wrong, wrong
