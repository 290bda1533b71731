"""A running network's state outlives micro-batches that hold only access changes.

A grant or revocation published while the network runs makes a micro-batch with no data:
no vertex runs and nothing is saved, yet the join sides, the aggregates' open windows and
the tuples a closed switch keeps must reach the next batch intact (and what a switch has
handed over must not be handed over twice)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.network.authorization import AuthorizationServer
from streamwarden.network.registry import load_queries_text
from streamwarden.network.replay import replay_network
from streamwarden.network.spark_runner import SharedNetworkRun, read_user_rows
from test_network_streaming import feed, full, iso  # the same file feeding and row comparison

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
users: {ann: {}, bob: {}}
""")
W = "[RANGE 2 min]"
# 'late' is switched off until step 2: its initial switches (Stream1 -> its selection, the join's left
# input; Stream2 -> its join, the right input) keep tuples. Both must keep theirs: the join's vertex once
# stopped at its closed left input before its right switch could keep anything.
QUERIES = load_queries_text(f"""
queries:
  - {{id: CQ1, users: [ann, bob], query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {W}, Stream2 AS s2 {W} WHERE s1.location = s2.location AND s2.speed < 30"}}
  - {{id: slow, users: [ann], query: "SELECT location, COUNT(*) AS n, MAX(speed) AS top FROM Stream2 [RANGE 2 min SLIDE 1 min] WHERE speed < 30 GROUP BY location"}}
  - {{id: late, users: [bob], query: "SELECT s1.streamid, s2.speed FROM Stream1 AS s1 {W}, Stream2 AS s2 {W} WHERE s1.location = s2.location AND s1.heartRate > 70"}}
""", CATALOG)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
STREAMS = ("Stream1", "Stream2")


def records(n: int) -> dict[str, list[dict]]:
    """One tuple per stream every 15 s; the last, four hours on, closes every window (no query keeps it)."""
    late = T0 + timedelta(hours=4)
    return {
        "Stream1": [{"ts": iso(T0 + timedelta(seconds=15 * i)), "streamid": i % 4, "heartRate": 60 + i % 50,
                     "location": "xy"[i % 2]} for i in range(n)]
        + [{"ts": iso(late), "streamid": 9, "heartRate": 1, "location": "zz"}],
        "Stream2": [{"ts": iso(T0 + timedelta(seconds=15 * i + 4)), "location": "xy"[i % 3 % 2],
                     "speed": float(10 + i % 40)} for i in range(n)]
        + [{"ts": iso(late), "location": "zz", "speed": 99.0}],
    }


def committed(run: SharedNetworkRun) -> int:
    return max(int(p.parent.name) for p in run.state_root.glob("*/_COMMITTED"))


def test_a_batch_of_access_changes_only_keeps_joins_windows_and_switches(spark, tmp_path) -> None:
    data, inputs = records(60), {s: str(tmp_path / "in" / s) for s in STREAMS}
    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    server.grant("CQ1", "ann", T0)
    server.grant("slow", "ann", T0)
    feed(tmp_path / "in", 0, data, 0, 20)  # minutes 0-5; 'late' has no user yet: its switches keep tuples
    run = SharedNetworkRun(spark, CATALOG, QUERIES, inputs, tmp_path / "out", store, tmp_path / "cp")
    stream = run.start(trigger="1 second")
    try:
        stream.processAllAvailable()
        before, ran = committed(run), dict(run.counters)
        # A micro-batch holding only these access SPs: nothing runs, everything kept must carry over.
        server.grant("CQ1", "bob", T0 + timedelta(minutes=6))
        server.grant("late", "bob", T0 + timedelta(minutes=5))
        stream.processAllAvailable()
        assert committed(run) > before and dict(run.counters) == ran
        feed(tmp_path / "in", 1, data, 20, 40)  # minutes 5-10: pairs with minutes 3-5; 'late' takes its kept tuples
        stream.processAllAvailable()
        # minutes 10-15, then hour 4 (every window closes); 'late' must not hand step 1's tuples over again
        feed(tmp_path / "in", 2, data, 40, 61)
        stream.processAllAvailable()
        assert stream.exception() is None
    finally:
        stream.stop()
    replay_network(spark, CATALOG, QUERIES, server.changes(), inputs, tmp_path / "replay")
    for user, query in (("ann", "CQ1"), ("bob", "CQ1"), ("ann", "slow"), ("bob", "late")):
        lines = (tmp_path / "replay" / user / f"{query}.jsonl").read_text().splitlines()
        expected = [json.loads(line) for line in lines]
        assert expected and full(read_user_rows(spark, tmp_path / "out", user, query)) == full(expected), (user, query)
