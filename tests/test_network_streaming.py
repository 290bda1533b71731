"""A shared network as one Spark streaming query: switches follow grants and revocations
while it runs, branches without users do no work, every user gets what replay gives."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.errors import UnsupportedError
from streamwarden.network.authorization import AuthorizationServer
from streamwarden.network.registry import RegisteredQuery, load_queries_text
from streamwarden.network.replay import replay_network
from streamwarden.network.spark_runner import SharedNetworkRun, read_user_rows

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
  Stream3: {schema: {ts: timestamp, streamid: int, pressure: int}}
users: {ann: {}, bob: {}}
""")
W = "[RANGE 2 min]"
QUERIES = load_queries_text(f"""
queries:
  - {{id: CQ1, users: [ann, bob], query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {W}, Stream2 AS s2 {W} WHERE s1.location = s2.location AND s2.speed < 30"}}
  - {{id: CQ2, users: [ann], query: "SELECT a.streamid, c.pressure FROM Stream1 AS a {W}, Stream2 AS b {W}, Stream3 AS c {W} WHERE a.location = b.location AND b.speed < 30 AND c.streamid = a.streamid AND c.pressure > 120"}}
""", CATALOG)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S") + "Z"


def records(n: int) -> dict[str, list[dict]]:
    return {
        "Stream1": [{"ts": iso(T0 + timedelta(seconds=15 * i)), "streamid": i % 4, "heartRate": 60 + i % 50,
                     "location": "xy"[i % 2]} for i in range(n)],
        "Stream2": [{"ts": iso(T0 + timedelta(seconds=15 * i + 4)), "location": "xy"[i % 3 % 2],
                     "speed": float(10 + i % 40)} for i in range(n)],
        "Stream3": [{"ts": iso(T0 + timedelta(seconds=15 * i + 7)), "streamid": i % 4, "pressure": 100 + i % 40}
                    for i in range(n)],
    }


def feed(root: Path, part: int, data: dict[str, list[dict]], lo: int, hi: int) -> None:
    for stream, rows in data.items():
        (root / stream).mkdir(parents=True, exist_ok=True)
        (root / stream / f"part-{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[lo:hi]))


def comparable(rows) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(json.dumps({k: v for k, v in r.items() if k not in ("_graph", "_policies")}, sort_keys=True)
                  for r in rows)


def test_grants_and_revocations_take_effect_while_the_network_runs(spark, tmp_path) -> None:
    data, inputs = records(80), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2", "Stream3")}
    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    server.grant("CQ1", "ann", T0)
    server.grant("CQ1", "bob", T0 + timedelta(minutes=4))
    feed(tmp_path / "in", 0, data, 0, 40)  # minutes 0-10: CQ2 has no user yet
    run = SharedNetworkRun(spark, CATALOG, QUERIES, inputs, tmp_path / "out", store, tmp_path / "cp")
    stream = run.start(trigger="1 second")
    try:
        stream.processAllAvailable()
        cq2_only = {v.id for v in run.shared.network.operators} - set(run.placed.active_vertices({"CQ1"}))
        assert cq2_only and all(run.counters[v] == 0 for v in cq2_only)  # its branch did no work at all
        assert all(run.counters[v] >= 1 for v in run.placed.active_vertices({"CQ1"}) if v.startswith("v"))
        # While the same Spark query runs: ann gets CQ2 from minute 10, loses CQ1 at minute 14.
        server.grant("CQ2", "ann", T0 + timedelta(minutes=10))
        server.revoke("CQ1", "ann", T0 + timedelta(minutes=14))
        feed(tmp_path / "in", 1, data, 40, 80)
        stream.processAllAvailable()
        assert all(run.counters[v] >= 1 for v in cq2_only)
    finally:
        stream.stop()
    replay_network(spark, CATALOG, QUERIES, server.changes(), inputs, tmp_path / "replay")
    for user, query in (("ann", "CQ1"), ("bob", "CQ1"), ("ann", "CQ2")):
        expected = [json.loads(line) for line in (tmp_path / "replay" / user / f"{query}.jsonl").read_text().splitlines()]
        assert expected and comparable(read_user_rows(spark, tmp_path / "out", user, query)) == comparable(expected)
    assert read_user_rows(spark, tmp_path / "out", "bob", "CQ2") == []  # not listed for CQ2


def test_a_restart_resumes_the_networks_state(spark, tmp_path) -> None:
    data, inputs = records(40), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2", "Stream3")}
    store = sqlite_url(tmp_path / "auth.db")
    AuthorizationServer(store).grant("CQ2", "ann", T0)
    for part, (lo, hi) in enumerate(((0, 20), (20, 40))):
        feed(tmp_path / "in", part, data, lo, hi)
        run = SharedNetworkRun(spark, CATALOG, QUERIES, inputs, tmp_path / "out", store, tmp_path / "cp")
        run.start(available_now=True).awaitTermination()  # a new process each time: state from the checkpoint
    replay_network(spark, CATALOG, QUERIES, AuthorizationServer(store).changes(), inputs, tmp_path / "replay")
    expected = [json.loads(line) for line in (tmp_path / "replay" / "ann" / "CQ2.jsonl").read_text().splitlines()]
    assert expected and comparable(read_user_rows(spark, tmp_path / "out", "ann", "CQ2")) == comparable(expected)


def test_what_a_continuous_network_cannot_run_is_refused_before_it_starts(spark, tmp_path) -> None:
    aggregate = [RegisteredQuery("agg", ("ann",), "SELECT COUNT(*) FROM Stream2 [RANGE 1 min]")]
    with pytest.raises(UnsupportedError, match="aggregates run in 'network replay'"):
        SharedNetworkRun(spark, CATALOG, aggregate, {"Stream2": str(tmp_path)}, tmp_path / "o",
                         sqlite_url(tmp_path / "a.db"), tmp_path / "cp")
