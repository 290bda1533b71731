"""The network runtime: pipelines on Spark's own streaming operators, grants and revocations
while it runs, pipelines nobody can receive do no work, every user gets what replay gives."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.errors import StreamwardenError
from streamwarden.runtime.network import NetworkRuntime, read_status, read_user_rows
from streamwarden.runtime.network_replay import replay_network

pytestmark = pytest.mark.spark

STREAMS = """
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
  Stream3: {schema: {ts: timestamp, streamid: int, pressure: int}}
"""
CATALOG = load_catalog_text(STREAMS + "users: {ann: {}, bob: {}}\n")
W = "[RANGE 2 min]"
QUERIES = load_queries_text(f"""
queries:
  - {{id: CQ1, users: [ann, bob],
     query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {W}, Stream2 AS s2 {W}
             WHERE s1.location = s2.location AND s2.speed < 30"}}
  - {{id: CQ2, users: [ann],
     query: "SELECT a.streamid, c.pressure FROM Stream1 AS a {W}, Stream2 AS b {W}, Stream3 AS c {W}
             WHERE a.location = b.location AND b.speed < 30 AND c.streamid = a.streamid AND c.pressure > 120"}}
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


def full(rows) -> list[str]:  # type: ignore[no-untyped-def]
    """Rows exactly as delivered, ``_graph`` and ``_policies`` included (run and replay must agree on all)."""
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def runtime(spark, store: str, inputs, root: Path, queries=None, catalog=None, **options) -> NetworkRuntime:  # type: ignore[no-untyped-def]
    return NetworkRuntime(spark, store, inputs, root / "out", root / "cp", queries=queries, catalog=catalog,
                          **options)


def test_grants_and_revocations_take_effect_while_the_network_runs(spark, tmp_path, caplog) -> None:
    data, inputs = records(80), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2", "Stream3")}
    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    server.register(QUERIES, CATALOG)
    server.grant("CQ1", "ann", T0)
    server.grant("CQ1", "bob", T0 + timedelta(minutes=4))
    feed(tmp_path / "in", 0, data, 0, 40)  # minutes 0-10: CQ2 has no user yet
    rt = runtime(spark, store, inputs, tmp_path, trigger="1 second").start()
    try:
        assert [s.name for s in rt.streams] == [n for n in rt.running if n.startswith("CQ1")]  # CQ2's is off
        rt.process_all_available()
        assert read_status(tmp_path / "out", "ann", "CQ2") | {"periods": None} == {
            "query": "CQ2", "user": "ann", "receiving": False, "reason": "no grant for this query yet",
            "periods": None, "event_time": None, "level": None, "graphs": ["ag1"]}
        # While the network runs: ann gets CQ2 from minute 10, loses CQ1 at minute 14.
        server.grant("CQ2", "ann", T0 + timedelta(minutes=10))
        server.revoke("CQ1", "ann", T0 + timedelta(minutes=14))
        with caplog.at_level("INFO", logger="streamwarden.network.access"):
            assert rt.poll() and len(rt.streams) == 2
        assert [r.getMessage() for r in caplog.records if r.name == "streamwarden.network.access"] == [
            "grant for ann on CQ2 from 2026-03-01T10:10:00Z: in effect from the next micro-batch",
            "revocation of ann on CQ1 from 2026-03-01T10:14:00Z: in effect from the next micro-batch"]
        feed(tmp_path / "in", 1, data, 40, 80)
        rt.process_all_available()
        rt.poll()  # the status follows the event time reached at each poll
        assert (read_status(tmp_path / "out", "ann", "CQ1")["reason"]
                == "access ended at 2026-03-01T10:14:00Z (event time)")
        # bob's access ends before what CQ1 has emitted: nobody can receive another row, so it stops
        server.revoke("CQ1", "bob", T0 + timedelta(minutes=15))
        assert rt.poll() and [s.name for s in rt.streams] == [n for n in rt.running if n.startswith("CQ2")]
    finally:
        rt.stop()
    replay_network(spark, CATALOG, QUERIES, server.changes(), inputs, tmp_path / "replay")
    for user, query in (("ann", "CQ1"), ("ann", "CQ2")):
        replayed = (tmp_path / "replay" / user / f"{query}.jsonl").read_text()
        expected = [json.loads(line) for line in replayed.splitlines()]
        assert expected and full(read_user_rows(spark, tmp_path / "out", user, query)) == full(expected)
    assert read_user_rows(spark, tmp_path / "out", "bob", "CQ2") == []  # not listed for CQ2


def test_a_restart_resumes_the_pipelines_state(spark, tmp_path) -> None:
    data, inputs = records(40), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2", "Stream3")}
    store = sqlite_url(tmp_path / "auth.db")
    AuthorizationServer(store).grant("CQ2", "ann", T0)
    for part, (lo, hi) in enumerate(((0, 20), (20, 40))):
        feed(tmp_path / "in", part, data, lo, hi)
        # a new runtime each time: the state comes from the checkpoint
        runtime(spark, store, inputs, tmp_path, QUERIES, CATALOG).start(available_now=True).await_termination()
    replay_network(spark, CATALOG, QUERIES, AuthorizationServer(store).changes(), inputs, tmp_path / "replay")
    expected = [json.loads(line) for line in (tmp_path / "replay" / "ann" / "CQ2.jsonl").read_text().splitlines()]
    assert expected and full(read_user_rows(spark, tmp_path / "out", "ann", "CQ2")) == full(expected)


def replayed(spark, catalog, queries, changes, inputs, folder: Path) -> dict[tuple[str, str], list[dict]]:  # type: ignore[no-untyped-def]
    replay_network(spark, catalog, queries, changes, inputs, folder)
    return {(u, q.id): [json.loads(line) for line in (folder / u / f"{q.id}.jsonl").read_text().splitlines()]
            for q in queries for u in q.users}


def run_network(spark, catalog, queries, inputs, root: Path, store: str) -> NetworkRuntime:  # type: ignore[no-untyped-def]
    rt = runtime(spark, store, inputs, root, queries, catalog).start(available_now=True)
    rt.await_termination()
    return rt


def test_a_grant_regained_later_still_finds_the_partners_its_windows_hold(spark, tmp_path) -> None:
    data, inputs = records(80), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2", "Stream3")}
    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    server.register(QUERIES, CATALOG)
    feed(tmp_path / "in", 0, data, 0, 40)
    rt = runtime(spark, store, inputs, tmp_path, trigger="1 second").start()
    try:
        assert rt.streams == []  # nobody holds a grant: no pipeline runs, nothing is read
        server.grant("CQ2", "ann", T0 + timedelta(minutes=9))  # granted while it runs
        rt.poll()
        feed(tmp_path / "in", 1, data, 40, 80)
        rt.process_all_available()
    finally:
        rt.stop()
    expected = replayed(spark, CATALOG, QUERIES, server.changes(), inputs, tmp_path / "replay")
    assert expected[("ann", "CQ2")]  # including pairs with tuples that arrived while nothing ran
    for (user, query), rows in expected.items():
        assert full(read_user_rows(spark, tmp_path / "out", user, query)) == full(rows), (user, query)


def test_a_stream_whose_files_come_later_still_finds_its_partners(spark, tmp_path) -> None:
    data, inputs = records(80), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2", "Stream3")}
    store = sqlite_url(tmp_path / "auth.db")
    AuthorizationServer(store).grant("CQ1", "ann", T0)
    feed(tmp_path / "in", 0, data, 0, 40)
    rt = runtime(spark, store, inputs, tmp_path, QUERIES, CATALOG, trigger="1 second").start()
    try:
        rt.process_all_available()
        feed(tmp_path / "in", 1, {"Stream1": data["Stream1"]}, 40, 80)  # Stream1 runs 10 minutes ahead
        rt.process_all_available()
        feed(tmp_path / "in", 1, {"Stream2": data["Stream2"], "Stream3": data["Stream3"]}, 40, 80)
        rt.process_all_available()
    finally:
        rt.stop()
    expected = replayed(spark, CATALOG, QUERIES, AuthorizationServer(store).changes(), inputs, tmp_path / "replay")
    assert full(read_user_rows(spark, tmp_path / "out", "ann", "CQ1")) == full(expected[("ann", "CQ1")])


def test_windowed_aggregates_run_in_the_network_and_close_with_the_watermark(spark, tmp_path) -> None:
    queries = load_queries_text(f"""
queries:
  - {{id: CQ1, users: [ann],
     query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {W}, Stream2 AS s2 {W}
             WHERE s1.location = s2.location AND s2.speed < 30"}}
  - {{id: slow, users: [ann, bob],
     query: "SELECT location, COUNT(*) AS n, MAX(speed) AS top FROM Stream2 [RANGE 2 min SLIDE 1 min]
             WHERE speed < 30 GROUP BY location"}}
  - {{id: pairs, users: [bob],
     query: "SELECT COUNT(*) AS pairs, AVG(s1.heartRate) AS hr FROM Stream1 AS s1 {W}, Stream2 AS s2 {W}
             WHERE s1.location = s2.location AND s2.speed < 30"}}
""", CATALOG)
    data, inputs = records(60), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2")}
    late = T0 + timedelta(hours=4)  # moves every stream's watermark past all windows; no query keeps it
    data = {"Stream1": data["Stream1"] + [{"ts": iso(late), "streamid": 9, "heartRate": 1, "location": "zz"}],
            "Stream2": data["Stream2"] + [{"ts": iso(late), "location": "zz", "speed": 99.0}]}
    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    server.grant("CQ1", "ann", T0)
    server.grant("slow", "ann", T0)
    server.grant("slow", "bob", T0 + timedelta(minutes=6), until=T0 + timedelta(minutes=11))
    server.grant("pairs", "bob", T0 + timedelta(minutes=3))
    for part, (lo, hi) in enumerate(((0, 30), (30, 61))):
        feed(tmp_path / "in", part, data, lo, hi)
        run = run_network(spark, CATALOG, queries, inputs, tmp_path, store)  # restart: open windows from the checkpoint
    assert len(run.running) == 3  # one pipeline per query: each its own state and watermark
    expected = replayed(spark, CATALOG, queries, server.changes(), inputs, tmp_path / "replay")
    for (user, query), rows in expected.items():
        assert rows, (user, query)
        assert full(read_user_rows(spark, tmp_path / "out", user, query)) == full(rows), (user, query)
    # bob's grant of 'slow' expired at minute 11: windows ending later reach only ann
    assert max(r["window_end"] for r in expected[("bob", "slow")]) <= iso(T0 + timedelta(minutes=11))


ROLES = load_catalog_text(STREAMS + """
roles: {Doctor: {}, Nurse: {}}
users: {ann: {roles: [Doctor]}, bob: {roles: [Nurse]}, cid: {roles: [Nurse]}, dan: {}}
policies:
  - {id: doctors, subject: Doctor, streams: [Stream1], privilege: read}
  - {id: ward_x, subject: Nurse, streams: [Stream1], attributes: [streamid, location],
     where: "Stream1.location = 'x'", privilege: read}
""")


def test_role_policies_apply_on_top_of_the_grants_in_a_running_network(spark, tmp_path) -> None:
    queries = load_queries_text(f"""
queries:
  - {{id: CQ1, users: [ann, bob, cid, dan],
     query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {W}, Stream2 AS s2 {W}
             WHERE s1.location = s2.location AND s2.speed < 30"}}
  - {{id: fast, users: [bob], query: "SELECT location, speed FROM Stream2 WHERE speed < 30"}}
""", ROLES)
    data, inputs = records(40), {s: str(tmp_path / "in" / s) for s in ("Stream1", "Stream2")}
    feed(tmp_path / "in", 0, {k: v for k, v in data.items() if k in inputs}, 0, 40)
    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    for user in ("ann", "bob", "cid", "dan"):
        server.grant("CQ1", user, T0)
    server.grant("fast", "bob", T0)
    run = run_network(spark, ROLES, queries, inputs, tmp_path, store)
    pipelines = run.plan.pipelines
    assert {p.users for p in pipelines if p.query.id == "CQ1"} == {("ann",), ("bob", "cid")}  # nurses share one
    assert [(d.query, d.user) for d in run.plan.denials] == [("CQ1", "dan")]  # no role, no policy: nothing
    assert "no role policy of yours" in read_status(tmp_path / "out", "dan", "CQ1")["reason"]
    expected = replayed(spark, ROLES, queries, server.changes(), inputs, tmp_path / "replay")
    for (user, query), rows in expected.items():
        assert full(read_user_rows(spark, tmp_path / "out", user, query)) == full(rows), (user, query)
    nurse = expected[("bob", "CQ1")]
    assert nurse and all(r["heartRate"] is None for r in nurse)  # the nurses' policy does not grant it
    assert len(nurse) < len(expected[("ann", "CQ1")]) and expected[("dan", "CQ1")] == []


def test_every_access_change_is_published_as_an_sp_in_the_order_issued(spark, tmp_path) -> None:
    from streamwarden.catalog.authorization import SP_SCHEMA

    store = sqlite_url(tmp_path / "auth.db")
    server = AuthorizationServer(store)
    server.grant("CQ1", "ann", T0, until=T0 + timedelta(minutes=5))  # an expiry is a revocation SP
    server.revoke("CQ2", "bob", T0 + timedelta(minutes=1))
    (server.sp_folder / "sp-000000000002.jsonl").unlink()  # as if the server stopped before writing it
    assert AuthorizationServer(store).publish() == 1
    rows = [r.asDict() for r in spark.read.schema(SP_SCHEMA).json(str(server.sp_folder)).orderBy("seq").collect()]
    assert [(r["seq"], r["ts"].replace(tzinfo=timezone.utc) if r["ts"].tzinfo is None else r["ts"], r["query"],
             r["user"], r["sign"]) for r in rows] == [
        (1, T0, "CQ1", "ann", "+"), (2, T0 + timedelta(minutes=5), "CQ1", "ann", "-"),
        (3, T0 + timedelta(minutes=1), "CQ2", "bob", "-")]
    with pytest.raises(StreamwardenError, match="must expire after it starts"):
        server.grant("CQ1", "ann", T0, until=T0)
    with pytest.raises(StreamwardenError, match="name the folder its access SPs go to"):
        _ = AuthorizationServer("sqlite:///:memory:").sp_folder


