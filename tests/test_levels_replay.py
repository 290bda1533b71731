"""Information flow on Spark (Ray et al., sections 3-4): Q1-Q7 and Qi/Qj at their levels,
non-interference, the ★-property for writes. Expected rows come from tests/level_oracle.py,
an independent implementation of the contract."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import level_oracle as LO
from pyspark.sql import functions as F

from streamwarden import api
from streamwarden.catalog.lattice import Lattice, LevelSource
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.engine.levels import columns as LC
from streamwarden.datagen.cloud import message_log, write_message_log
from streamwarden.errors import AuthorizationError, BindError, UnsupportedError

CLASSES = {"COI1": ["1", "2"], "COI2": ["A", "B", "C"]}
CATALOG = """
lattice:
  classes: {COI1: ["1", "2"], COI2: [A, B, C]}
streams:
  MessageLog:
    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, outcome: string}
    level: {from: sender}
  Company1Alerts:
    schema: {ts: timestamp, serviceId: string}
    level: "[1, ⊥]"
roles: {Auditor: {}}
users:
  cm: {roles: [Auditor], clearance: "[T, T]"}
  c1: {roles: [Auditor], clearance: "[1, ⊥]"}
"""
STREAMS = {"MessageLog": {"level": {"from": "sender"}}}
SEND_B = (LO.Cond("msgType", "=", "send"), LO.Cond("receiver", "=", "CompanyB"))


@pytest.fixture(scope="module")
def cloud(tmp_path_factory) -> tuple[Path, list[dict]]:
    audit = message_log(minutes=3, services=6, rate_per_s=1.5, unknown_fraction=0.02, seed=11)
    out = tmp_path_factory.mktemp("cloud")
    write_message_log(audit, out)
    records = [{**r, "ts": _parse(r["ts"])} for r in audit.records]
    return out / "MessageLog.jsonl", records


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def engine(spark, path: Path, query: str, level: str, user: str = "cm", catalog: str = CATALOG) -> list[dict]:
    rows = api.replay(load_catalog_text(catalog), user, query, {"MessageLog": str(path)}, spark=spark, level=level)
    return normalized(rows)


def normalized(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        clean = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()
                 if k not in ("_policies", "_graph")}
        out.append(clean)
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))


def oracle(records: list[dict], query: LO.Query, level: str) -> list[dict]:
    return normalized(LO.run(CLASSES, STREAMS, {"MessageLog": records}, query, level))


# -- the paper's queries (section 3), at their levels ---------------------------------------
GOLDEN = [
    ("Q1", "[1, ⊥]", LO.Select("MessageLog", ("ts",), (*SEND_B, LO.Cond("outcome", "=", "success")))),
    ("Q2", "[1, ⊥]", LO.Select("MessageLog", ("ts",), (*SEND_B, LO.Cond("outcome", "=", "failure")))),
    ("Q3", "[⊥, B]", LO.Select("MessageLog", ("ts",), (*SEND_B, LO.Cond("outcome", "=", "failure")))),
    ("Q5", "[1, B]", LO.RowsAggregate("MessageLog", 100, (LO.Cond("outcome", "=", "success"),
                                                          LO.Cond("serviceId", "=", "5")),
                                      (("MIN", "ts"), ("MAX", "ts")))),
    ("Q7", "[T, T]", LO.RowsAggregate("MessageLog", 100, (LO.Cond("outcome", "=", "success"),),
                                      (("MIN", "ts"), ("MAX", "ts")), "serviceId")),
]


@pytest.mark.parametrize(("name", "level", "query"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_the_papers_queries_at_their_levels(spark, cloud, name, level, query) -> None:
    path, records = cloud
    expected = oracle(records, query, level)
    # Q3's Session Manager at [⊥, B] sees only CompanyB's own records; the sends to CompanyB come
    # from COI1 companies (a service chain never joins two companies of one class), so: nothing.
    assert bool(expected) == (name != "Q3")
    assert engine(spark, path, query.cql(), level) == expected


def test_q4_the_session_manager_sees_all_of_coi2_and_nothing_of_coi1(spark, cloud) -> None:
    path, records = cloud
    query = ('SELECT ts FROM MessageLog WHERE msgType = "send" AND outcome = "failure" AND '
             '(receiver = "CompanyB" OR receiver = "CompanyA" OR receiver = "CompanyC")')
    expected = normalized([row for receiver in ("CompanyA", "CompanyB", "CompanyC") for row in LO.run(
        CLASSES, STREAMS, {"MessageLog": records},
        LO.Select("MessageLog", ("ts",), (LO.Cond("msgType", "=", "send"), LO.Cond("outcome", "=", "failure"),
                                          LO.Cond("receiver", "=", receiver))), "[⊥, T]")])
    rows = engine(spark, path, query, "[⊥, T]")
    assert rows == expected
    assert {r["level"] for r in rows} <= {"[⊥, A]", "[⊥, B]", "[⊥, C]"}  # never a COI1 company's data


def test_q6_delays_between_company1_and_companyb_over_a_rows_self_join(spark, cloud) -> None:
    path, records = cloud
    query = ('SELECT R.ts - S.ts AS delay FROM MessageLog AS R [ROWS 100], MessageLog AS S [ROWS 100] '
             'WHERE S.msgType = "send" AND S.outcome = "success" AND R.msgType = "receive" AND '
             'R.outcome = "success" AND R.receiver = "Company1" AND R.sender = "CompanyB" AND '
             'S.receiver = "CompanyB" AND S.sender = "Company1" AND S.serviceId = R.serviceId')
    visible = LO.visible_tuples("MessageLog", STREAMS, {"MessageLog": records}, CLASSES,
                                LO.parse_level("[1, B]", CLASSES))
    rank = {id(t): i for i, t in enumerate(visible)}
    sends = [t for t in visible if t.record["msgType"] == "send" and t.record["outcome"] == "success"
             and t.record["sender"] == "Company1" and t.record["receiver"] == "CompanyB"]
    replies = [t for t in visible if t.record["msgType"] == "receive" and t.record["outcome"] == "success"
               and t.record["sender"] == "CompanyB" and t.record["receiver"] == "Company1"]
    expected = normalized([
        {"delay": (r.record["ts"] - s.record["ts"]).total_seconds(), "level": LO.level_text(LO.lub(r.level, s.level))}
        for r in replies for s in sends
        if r.record["serviceId"] == s.record["serviceId"] and abs(rank[id(r)] - rank[id(s)]) < 100
    ])
    assert expected and engine(spark, path, query, "[1, B]") == expected


def test_qi_and_qj_differ_and_a_level_predicate_does_not_turn_qj_into_qi(spark, cloud) -> None:
    """Section 3's challenge: the window must be formed over the visible tuples only."""
    path, records = cloud
    base = LO.RowsAggregate("MessageLog", 100, (*SEND_B, LO.Cond("outcome", "=", "success")))
    rewritten = LO.RowsAggregate("MessageLog", 100, (*base.where, LO.Cond("level", "=", "[1, ⊥]")))
    qi = engine(spark, path, base.cql(), "[1, ⊥]", user="c1")
    qj = engine(spark, path, base.cql(), "[T, ⊥]")
    qj_rewritten = engine(spark, path, rewritten.cql(), "[T, ⊥]")
    assert qi == oracle(records, base, "[1, ⊥]") and qj == oracle(records, base, "[T, ⊥]")
    assert qj_rewritten == oracle(records, rewritten, "[T, ⊥]")
    assert qi != qj
    assert [r["COUNT(*)"] for r in qj_rewritten] != [r["COUNT(*)"] for r in qi]


def test_unknown_sources_are_top_and_counted(spark, cloud, tmp_path) -> None:
    path, records = cloud
    unknown = sum(1 for r in records if not str(r["sender"]).startswith("Company"))
    report = api.replay_to_file(load_catalog_text(CATALOG), "cm", "SELECT sender FROM MessageLog WHERE level = [T, T]",
                                {"MessageLog": str(path)}, tmp_path / "out.jsonl", spark=spark)
    senders = {json.loads(line)["sender"] for line in (tmp_path / "out.jsonl").read_text().splitlines()}
    assert unknown > 0 and report.unknown_sources == {"MessageLog": unknown} and report.rows == unknown
    assert senders == {r["sender"] for r in records if not str(r["sender"]).startswith("Company")}
    assert engine(spark, path, "SELECT sender FROM MessageLog WHERE level = [T, T]", "[T, ⊥]") == []


# -- non-interference (hypothesis) ------------------------------------------------------------
LATTICE = {"COI1": ["1", "2"], "COI2": ["A", "B"]}
SMALL_CATALOG = """
lattice: {classes: {COI1: ["1", "2"], COI2: [A, B]}}
streams:
  Log: {schema: {ts: timestamp, sender: string, kind: string, n: int}, level: {from: sender}}
users: {top: {clearance: "[T, T]"}}
"""
SMALL_STREAMS = {"Log": {"level": {"from": "sender"}}}
SENDERS = ["Company1", "Company2", "CompanyA", "CompanyB", "1", "Nobody"]
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
LEVELS = [LO.level_text(level) for level in LO.all_levels(LATTICE)]

records_strategy = st.lists(
    st.fixed_dictionaries({"second": st.integers(0, 40), "sender": st.sampled_from(SENDERS),
                           "kind": st.sampled_from(["send", "receive"]), "n": st.integers(0, 9)}),
    min_size=0, max_size=30)
where_strategy = st.lists(st.one_of(
    st.builds(LO.Cond, st.just("kind"), st.just("="), st.sampled_from(["send", "receive"])),
    st.builds(LO.Cond, st.just("n"), st.sampled_from(["<", ">=", "<>"]), st.integers(0, 9)),
    st.builds(LO.Cond, st.just("level"), st.sampled_from(["=", "<>"]), st.sampled_from(LEVELS)),
), max_size=2).map(tuple)
aggregates = st.lists(st.sampled_from([("COUNT", None), ("MIN", "n"), ("MAX", "n"), ("SUM", "n"), ("AVG", "n"),
                                       ("COUNT", "n")]), min_size=1, max_size=3, unique=True).map(tuple)
queries = st.one_of(
    st.builds(LO.Select, st.just("Log"), st.sampled_from([("ts", "sender", "n"), ("n", "level")]), where_strategy),
    st.builds(LO.RowsAggregate, st.just("Log"), st.integers(1, 6), where_strategy, aggregates,
              st.sampled_from([None, "kind"])),
    st.builds(LO.RangeAggregate, st.just("Log"), st.sampled_from([10, 20]), st.sampled_from([None, 5]),
              where_strategy, aggregates, st.sampled_from([None, "kind"])),
    st.builds(LO.Join, st.just("Log"), st.just("a"), st.just(5), st.just("Log"), st.just("b"), st.just(5),
              st.just((("n", "n"),)), st.just((LO.Cond("a.kind", "=", "send"),)), st.just(("a.ts", "b.sender"))),
)


def _records(raw: list[dict]) -> list[dict]:
    return [{"ts": T0 + timedelta(seconds=r["second"]), "sender": r["sender"], "kind": r["kind"], "n": r["n"]}
            for r in raw]


def _replay(spark, tmp: Path, name: str, records: list[dict], query: LO.Query, level: str) -> list[dict]:
    path = tmp / f"{name}.jsonl"
    path.write_text("".join(json.dumps({**r, "ts": LO.format_timestamp(r["ts"])}) + "\n" for r in records))
    rows = api.replay(load_catalog_text(SMALL_CATALOG), "top", query.cql(), {"Log": str(path)}, spark=spark,
                      level=level)
    return normalized(rows)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=records_strategy, noise=records_strategy, query=queries, level=st.sampled_from(LEVELS))
def test_invisible_tuples_never_change_the_output(spark, tmp_path, raw, noise, query, level) -> None:
    """Non-interference: tuples whose level the query's level does not dominate (added,
    removed or changed) change nothing a query at that level emits — rows, counts, times."""
    at = LO.parse_level(level, LATTICE)
    records = _records(raw)
    hidden = [r for r in _records(noise)
              if not LO.dominated_by(LO.tuple_level(r, SMALL_STREAMS["Log"]["level"], LATTICE), at)]
    visible_only = [r for r in records
                    if LO.dominated_by(LO.tuple_level(r, SMALL_STREAMS["Log"]["level"], LATTICE), at)]
    mixed = sorted(records + hidden, key=lambda r: r["ts"])  # interleaved; ties keep input order
    alone = _replay(spark, tmp_path, "alone", visible_only, query, level)
    assert alone == normalized(LO.run(LATTICE, SMALL_STREAMS, {"Log": visible_only}, query, level))
    assert _replay(spark, tmp_path, "mixed", mixed, query, level) == alone


# -- writes, levels and bad input --------------------------------------------------------------
def test_writes_go_only_into_a_stream_of_the_querys_level(spark, cloud, tmp_path) -> None:
    path, _ = cloud
    catalog = load_catalog_text(CATALOG)
    query = 'SELECT ts, serviceId FROM MessageLog WHERE receiver = "CompanyB"'
    with pytest.raises(AuthorizationError, match=r"level \[1, B\] may write only into a stream of level \[1, B\]"):
        api.replay_to_file(catalog, "cm", query, {"MessageLog": str(path)}, tmp_path / "x.jsonl", spark=spark,
                           level="[1, B]", into="Company1Alerts")
    with pytest.raises(AuthorizationError, match="has no single level"):
        api.replay_to_file(catalog, "cm", query, {"MessageLog": str(path)}, tmp_path / "x.jsonl", spark=spark,
                           level="[1, B]", into="MessageLog")
    assert not (tmp_path / "x.jsonl").exists()  # refused before anything ran
    report = api.replay_to_file(catalog, "c1", query, {"MessageLog": str(path)}, tmp_path / "ok.jsonl", spark=spark,
                                into="Company1Alerts")
    assert report.rows > 0


def test_a_query_cannot_run_above_its_users_clearance(cloud) -> None:
    catalog = load_catalog_text(CATALOG)
    with pytest.raises(AuthorizationError, match=r"c1 is cleared for \[1, ⊥\], which does not dominate \[1, B\]"):
        api.authorize(catalog, "c1", "SELECT ts FROM MessageLog", level="[1, B]")
    with pytest.raises(AuthorizationError, match="not a company of class COI2"):
        api.authorize(catalog, "cm", "SELECT ts FROM MessageLog", level="[1, Z]")
    plain = load_catalog_text("streams: {S: {schema: {ts: timestamp}}}\nusers: {u: {}}")
    with pytest.raises(AuthorizationError, match="declares no lattice"):
        api.authorize(plain, "u", "SELECT ts FROM S", level="[1, ⊥]")


@pytest.mark.parametrize(("query", "error", "message"), [
    ("SELECT ts FROM MessageLog WHERE level < [1, ⊥]", BindError, "compare with = or <> only"),
    ("SELECT ts FROM MessageLog WHERE level = [1, Q]", BindError, "not a company of class COI2"),
    ("SELECT sender AS level FROM MessageLog", BindError, "'level' is the row's security level"),
    ("SELECT COUNT(*) FROM MessageLog AS a [ROWS 5], MessageLog AS b [RANGE 5 seconds] WHERE a.serviceId = b.serviceId",
     None, None),
])
def test_bad_level_queries_are_named(spark, cloud, query, error, message) -> None:
    path, _ = cloud
    catalog = load_catalog_text(CATALOG)
    if error is None:
        with pytest.raises(UnsupportedError, match=r"\[ROWS n\] on both sides of one stream"):
            api.replay(catalog, "cm", query, {"MessageLog": str(path)}, spark=spark)
        return
    with pytest.raises(error, match=message) as info:
        api.authorize(catalog, "cm", query)
    assert "line 1, column" in str(info.value) or "1:" in str(info.value)


# -- levels as bits (one bigint): the Spark expressions against the lattice ------------------------
LONE = Lattice.of({"COI1": ["1"], "COI2": ["A", "B", "C"]})  # a lone company's class: T is not its bit


def test_the_spark_level_expressions_agree_with_the_lattice(spark) -> None:
    """Dominance, LUB of two rows and of a group, the text and the shepherd, as Spark evaluates
    them, against the lattice's own Python levels, over every level of a lattice with a class of
    one company (whose T a bit per company alone would confuse with the company)."""
    every = list(LONE.levels())
    pairs = spark.createDataFrame([(i, j, a.bits, b.bits) for i, a in enumerate(every) for j, b in enumerate(every)],
                                  "i int, j int, a bigint, b bigint")
    got = pairs.withColumn("ab", LC.lub([F.col("a"), F.col("b")])).select(
        "i", "j", LC.level_text("a", LONE).alias("text"), LC.level_text("ab", LONE).alias("lub"),
        *[LC.visible_at(F.col("a"), q).alias(f"at{k}") for k, q in enumerate(every)]).collect()
    for row in got:
        a, b = every[row["i"]], every[row["j"]]
        assert (row["text"], row["lub"]) == (str(a), str(LONE.lub(a, b)))
        assert [row[f"at{k}"] for k in range(len(every))] == [a <= q for q in every]
    groups = pairs.groupBy("i").agg(LC.lub_of_group(F.col("b")).alias("all"),
                                    LC.lub_of_group(F.when(F.col("j") < F.col("i"), F.col("b"))).alias("before"))
    for row in groups.select("i", LC.level_text("all", LONE).alias("all"),
                             LC.level_text("before", LONE).alias("before")).collect():
        assert (row["all"], row["before"]) == (str(LONE.top), str(LONE.lub(*every[:row["i"]])))
    senders = spark.createDataFrame([(s,) for s in ("1", "Company1", "CompanyB", "C", "Nobody", None)],
                                    "sender string")
    shepherd = senders.withColumn("lv", LC.shepherd_level(LevelSource("sender"), LONE)).select(
        LC.level_text("lv", LONE).alias("level"))
    assert [r["level"] for r in shepherd.collect()] == ["[1, ⊥]", "[1, ⊥]", "[⊥, B]", "[⊥, C]", "[T, T]", "[T, T]"]


LONE_CLASSES = {"COI1": ["1"], "COI2": ["A", "B"]}
LONE_CATALOG = SMALL_CATALOG.replace('COI1: ["1", "2"]', 'COI1: ["1"]')


@pytest.mark.parametrize("level", ["[1, ⊥]", "[1, T]", "[T, A]", "[T, T]"])
def test_a_lone_companys_class_keeps_its_top_out_of_the_companys_level(spark, tmp_path, level) -> None:
    """Tuples of unknown senders are at the top: at [1, T] (the lone company 1, all of COI2) they
    stay out of a selection, a [RANGE] and a [ROWS n] aggregate, as the oracle says."""
    raw = [{"second": s, "sender": sender, "kind": "send" if s % 3 else "receive", "n": s % 7}
           for s, sender in enumerate(["Company1", "Nobody", "CompanyA", "1", "CompanyB", "Nobody", "Company1"] * 3)]
    records = _records(raw)
    path = tmp_path / "Log.jsonl"
    path.write_text("".join(json.dumps({**r, "ts": LO.format_timestamp(r["ts"])}) + "\n" for r in records))
    streams = {"Log": {"level": {"from": "sender"}}}
    for query in (LO.Select("Log", ("ts", "sender", "level")),
                  LO.RangeAggregate("Log", 10, None, (), (("COUNT", None), ("MAX", "n")), "kind"),
                  LO.RowsAggregate("Log", 4, (LO.Cond("kind", "=", "send"),), (("COUNT", None), ("SUM", "n")))):
        rows = api.replay(load_catalog_text(LONE_CATALOG), "top", query.cql(), {"Log": str(path)}, spark=spark,
                          level=level)
        expected = normalized(LO.run(LONE_CLASSES, streams, {"Log": records}, query, level))
        assert expected and normalized(rows) == expected, query.cql()
