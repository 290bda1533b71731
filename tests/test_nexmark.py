"""NEXMark under policies: the generator, the catalog and queries, the benchmark's pipelines.

The oracle for the unsecured CQL queries is the same query written by hand in plain PySpark
(bench/nexmark_plain.py): on a tiny input (4,000 events over 100 s of event time, so windows
open and close), every query's unsecured replay returns the same multiset of rows.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT))  # bench/ is a package of the repository, not of the installed project

import streamwarden as sw  # noqa: E402
from bench import nexmark as experiment  # noqa: E402
from bench.nexmark_plain import plain_frame  # noqa: E402
from bench.suite import report, runner  # noqa: E402
from bench.suite.experiment import Command, Experiment, Pipeline, Workload, ratio_at_least  # noqa: E402
from streamwarden.catalog.registry import load_queries  # noqa: E402
from streamwarden.datagen.__main__ import main as datagen  # noqa: E402
from streamwarden.datagen.nexmark import (BIDDER_POLICIES, FIRST_AUCTION_ID, FIRST_PERSON_ID, market_of,  # noqa: E402
                                          nexmark_tables, punctuated_bids)

EVENTS, RATE, SEED = 4_000, 40.0, 11


@pytest.fixture(scope="module")
def tables():
    return nexmark_tables(EVENTS, seed=SEED, rate=RATE)


@pytest.fixture(scope="module")
def catalog():
    return sw.load_catalog(experiment.CATALOG)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nexmark")
    datagen(["nexmark", "--events", str(EVENTS), "--rate", str(RATE), "--seed", str(SEED), "--out", str(root),
             "--format", "parquet"])
    return root


# ------------------------------------------------------------------ the generator


def test_the_generator_is_deterministic_for_a_seed(tmp_path: Path):
    one, two, other = (nexmark_tables(3_000, seed=s) for s in (5, 5, 6))
    assert all(one[name].equals(two[name]) for name in one)
    assert not one["Bid"].equals(other["Bid"])
    assert punctuated_bids(one["Bid"], seed=5) == punctuated_bids(two["Bid"], seed=5)
    for run in ("a", "b"):  # the files too, byte for byte
        datagen(["nexmark", "--events", "600", "--seed", "5", "--format", "jsonl", "--out", str(tmp_path / run)])
    for stream in ("Person", "Auction", "Bid", "PunctuatedBid"):
        assert (tmp_path / "a" / stream / "part-00000.jsonl").read_bytes() == \
            (tmp_path / "b" / stream / "part-00000.jsonl").read_bytes()


def test_the_streams_follow_the_model_and_every_reference_exists(tables):
    person, auction, bid = (tables[n].to_pandas() for n in ("Person", "Auction", "Bid"))
    assert (len(person), len(auction), len(bid)) == (EVENTS // 50, EVENTS * 3 // 50, EVENTS * 46 // 50)
    assert list(person["id"]) == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + len(person)))
    assert list(auction["id"]) == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + len(auction)))
    assert set(auction["seller"]) <= set(person["id"])
    assert set(bid["bidder"]) <= set(person["id"]) and set(bid["auction"]) <= set(auction["id"])
    assert set(auction["category"]) <= set(range(10, 15)) and (auction["reserve"] > auction["initialBid"]).all()
    assert (auction["expires"] > auction["ts"]).all() and bid["ts"].is_monotonic_increasing
    assert (bid["price"] >= 100).all() and (bid["price"] <= 100_000_000).all()
    seconds = (bid["ts"].iloc[-1] - bid["ts"].iloc[0]).total_seconds()
    assert seconds == pytest.approx(EVENTS / RATE, abs=5 / RATE)  # the first bid is event 4
    # Hot entities: 3 bids in 4 by the hot bidder of the time (id 100k + 1), 1 in 2 on the hot auction.
    assert ((bid["bidder"] - FIRST_PERSON_ID) % 100 == 1).mean() == pytest.approx(0.75, abs=0.05)
    assert ((bid["auction"] - FIRST_AUCTION_ID) % 100 == 0).mean() >= 0.45
    # Markets: a person's by id, an auction on its seller's, a bid on its auction's; both occur.
    assert list(person["market"]) == list(market_of(person["id"].to_numpy()))
    assert list(auction["market"]) == list(market_of(auction["seller"].to_numpy()))
    assert list(bid["market"]) == list(auction.set_index("id")["market"].loc[bid["auction"]])
    assert set(bid["market"]) == {"eu", "us"}


def test_each_bidder_sends_their_own_policy_ahead_of_their_bids(tables):
    records = punctuated_bids(tables["Bid"], seed=SEED)
    assert len([r for r in records if "kind" not in r]) == tables["Bid"].num_rows
    current: dict[int, dict[int, dict]] = {}  # bidder -> sn -> SP of their newest policy
    for record in records:
        who = record["bidder"]
        if record.get("kind") == "sp":
            assert record["tuples"] == str(who) and record["streams"] == "PunctuatedBid"
            if record["sn"] == 1:
                current[who] = {}
            current[who][record["sn"]] = record
            continue
        policy = current[who]  # a bidder's first record is their policy
        assert {sp["ts"] for sp in policy.values()} == {record["sp_ts"]} and record["sp_csn"] == len(policy)
        assert tuple((sp["attributes"], sp["roles"]) for sp in policy.values()) in BIDDER_POLICIES.values()


# ------------------------------------------------------------------ catalog and queries


def test_the_catalog_clears_each_user_for_their_own_market(catalog):
    for name, user in catalog.users.items():
        if "person" in user.profile:
            assert str(catalog.clearance(name)) == f"[{market_of(user.profile['person'])}]", name
    assert str(catalog.clearance("auditor")) == "[T]"


def test_every_query_parses_and_is_authorized_for_the_auditor_and_its_users(catalog):
    registered = load_queries(experiment.QUERIES, catalog)
    assert [q.id for q in registered] == list(experiment.SECURED_USERS)
    for query in registered:
        assert "auditor" in query.users
        for user in query.users:
            assert sw.authorize(catalog, user, query.query).deployed, (query.id, user)
    listed = yaml.safe_load(experiment.QUERIES.read_text())["queries"]
    assert all(set(experiment.SECURED_USERS[q["id"]]) <= set(q["users"]) for q in listed)


# ------------------------------------------------------------------ on Spark


def _rows(frame, drop=("_policies", "_graph", "level")) -> tuple[list[str], Counter]:
    from streamwarden.engine.execute import iso_timestamp

    columns = [c for c in frame.columns if c not in drop]
    typed = dict(frame.dtypes)
    frame = frame.select(*[iso_timestamp(frame[c]).alias(c) if typed[c] == "timestamp" else frame[c]
                           for c in columns])
    return columns, Counter(tuple(row) for row in frame.collect())


@pytest.mark.spark
@pytest.mark.parametrize("query", list(experiment.SECURED_USERS))
def test_the_unsecured_replay_returns_the_rows_of_plain_pyspark(spark, data, query):
    columns, unsecured = _rows(experiment.unsecured_frame(spark, query, str(data)))
    plain_columns, plain = _rows(plain_frame(spark, query, data))
    assert columns == plain_columns
    assert unsecured == plain
    assert sum(unsecured.values()) > 0, "the tiny input should give every query some rows"


@pytest.mark.spark
def test_a_bidder_reads_exactly_their_own_bids_on_their_market(spark, data, tables):
    columns, rows = _rows(experiment.secured_frame(spark, "q0", "bidder_1001", str(data)))
    bid = tables["Bid"].to_pandas()
    mine = bid[(bid["bidder"] == 1001) & (bid["market"] == market_of(1001))]
    assert len(mine) > 0 and (bid["bidder"] != 1001).any()
    assert sum(rows.values()) == len(mine)
    assert {row[columns.index("bidder")] for row in rows} == {1001}
    assert sorted(row[columns.index("price")] for row in rows.elements()) == sorted(mine["price"])


@pytest.mark.spark
def test_bidders_own_policies_decide_what_an_analyst_sees_of_the_punctuated_bids(spark, data, tables, catalog):
    query = "SELECT auction, bidder, price FROM PunctuatedBid"
    bids = [r for r in punctuated_bids(tables["Bid"], seed=SEED) if "kind" not in r]
    analyst = sw.replay(catalog, "analyst_eu", query, {"PunctuatedBid": data / "PunctuatedBid"}, spark=spark)
    # "open" bidders (two SPs) let analysts see what was bid, never who; "private" ones nothing.
    expected = Counter((b["auction"], None, b["price"]) for b in bids if b["sp_csn"] == 2 and b["market"] == "eu")
    assert Counter((r["auction"], r["bidder"], r["price"]) for r in analyst) == expected
    assert 0 < sum(expected.values()) < sum(b["market"] == "eu" for b in bids)  # both kinds of bidder occur


@pytest.mark.spark
def test_a_seller_sees_aggregates_of_their_own_auctions_only(spark, data, tables):
    columns, rows = _rows(experiment.secured_frame(spark, "q4", "seller_1000", str(data)))
    auction = tables["Auction"].to_pandas()
    assert columns == ["window_start", "window_end", "id", "category", "final"]
    assert rows and {row[2] for row in rows} <= set(auction[auction["seller"] == 1000]["id"])


# ------------------------------------------------------------------ the suite's runner and report


def test_the_runner_times_whole_processes_and_the_report_gives_verdicts(tmp_path: Path):
    def child(rows: int) -> Command:
        code = f"import json; sum(range(200_000)); print(json.dumps({{'rows_out': {rows}, 'startup_s': 0.01}}))"
        return Command(lambda work, out: [sys.executable, "-c", code])

    smoke = Experiment(
        "smoke", "smoke test", Workload("two counts", lambda work: {"events": 1000, "lines": 10}),
        (Pipeline("a/fast", child(3), "a", "fast", ("lines",)), Pipeline("a/slow", child(4), "a", "slow", ("lines",))),
        (ratio_at_least("fast >= 0.1x slow", "a/fast", "a/slow", 0.1),
         ratio_at_least("fast >= 100x slow", "a/fast", "a/slow", 100.0)), per_core="events")
    results = runner.run(smoke, repeats=2, workdir=tmp_path / "work", results_dir=tmp_path, log=lambda _: None)
    saved = json.loads((tmp_path / "smoke.json").read_text())
    assert saved["versions"]["python"] and saved["facts"] == {"events": 1000, "lines": 10}
    fast = saved["pipelines"][0]["runs"]
    assert len(fast) == 2 and all(r["rows_out"] == 3 and r["rows_in"] == 10 and r["cpu_s"] > 0 for r in fast)
    assert [t["met"] for t in saved["targets"]] == [True, False]
    written = report.render(results, tmp_path)
    text = (tmp_path / "smoke.md").read_text()
    assert "| fast >= 100x slow |" in text and "**not met**" in text and "start-up s" in text
    assert all(p.exists() for p in written) and len(written) == 3


def test_the_benchmark_declares_three_kinds_of_pipeline_per_query():
    declared = experiment.experiment(events=1000)
    by_query = Counter(p.group for p in declared.pipelines)
    assert set(by_query) == set(experiment.SECURED_USERS) and min(by_query.values()) == 3
    assert set(declared.reference.values) == set(experiment.SECURED_USERS)
    argv = declared.pipeline("q4/secured:seller_1000").run.argv(Path("/w"), Path("/o"))
    assert argv[argv.index("--frame") + 1] == "bench.nexmark:secured_frame" and "user=seller_1000" in argv
