"""Every mechanism in one running network: role policies (one tied to a live action),
providers' security punctuations, security levels with a query's own ``level``, ``[ROWS n]``
windows; and live changes of the catalog and of the registrations. Each user's rows equal
``network replay`` (the replay contract, restricted to their grant periods)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import ts, write_jsonl
from test_levels_streaming import CATALOG as LEVEL_CATALOG  # MessageLog, levelled by sender; cm, c1, c2
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.datagen.cloud import message_log
from streamwarden.runtime.network import NetworkRuntime, read_status, read_user_rows
from streamwarden.runtime.network_replay import replay_network

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
HOSPITAL = """
streams:
  HeartRate:
    schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}
    key: Patient_id
    punctuated_by: Patient_id
  Ward: {schema: {ts: timestamp, bed: int, temp: double}}
roles: {GP: {}, Nurse: {}}
users: {gina: {roles: [GP]}, nick: {roles: [Nurse]}}
actions: {rounds: {}}
policies:
  - {id: nurses_on_rounds, subject: Nurse, streams: [Ward], privilege: read, time: ["start(rounds)", "end(rounds)"]}
  - {id: gps_ward, subject: GP, streams: [Ward], attributes: [bed], privilege: read}
"""
QUERIES = """
queries:
  - {id: beats, users: [gina], query: "SELECT Patient_id, Beats_per_min FROM HeartRate"}
  - {id: perpatient, users: [gina],
     query: "SELECT Patient_id, COUNT(*) AS n FROM HeartRate [RANGE 1 min] GROUP BY Patient_id"}
  - {id: ward, users: [gina, nick], query: "SELECT bed, temp FROM Ward WHERE bed < 2"}
"""


def sp(patient: int, second: int, roles: str) -> dict:
    return {"kind": "sp", "streams": "HeartRate", "tuples": "*", "attributes": "*", "roles": roles, "sign": "+",
            "ts": ts(second), "sn": 1, "Patient_id": patient}


def reading(patient: int, second: int, beats: int, policy_second: int) -> dict:
    return {"ts": ts(second), "Patient_id": patient, "Beats_per_min": beats, "sp_ts": ts(policy_second), "sp_csn": 1}


def full(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def replayed(spark, catalog, queries, store: str, inputs, folder: Path) -> dict[tuple[str, str], list[dict]]:  # type: ignore[no-untyped-def]
    replay_network(spark, catalog, queries, AuthorizationServer(store).changes(), inputs, folder)
    return {(u, q.id): [json.loads(line) for line in (folder / u / f"{q.id}.jsonl").read_text().splitlines()]
            for q in queries for u in q.users}


def test_shields_live_actions_and_role_policies_in_one_network(spark, tmp_path) -> None:
    catalog = load_catalog_text(HOSPITAL, "hospital.yaml")
    queries = load_queries_text(QUERIES, catalog)
    inputs = {"HeartRate": str(tmp_path / "in" / "HeartRate"), "Ward": str(tmp_path / "in" / "Ward")}
    write_jsonl(tmp_path / "in" / "HeartRate" / "p0.jsonl", [
        sp(120, 0, "{GP}"), sp(121, 0, "{C}"), reading(120, 1, 70, 0), reading(121, 2, 80, 0),
        reading(120, 30, 72, 0), reading(120, 200, 75, 0)])
    write_jsonl(tmp_path / "in" / "Ward" / "w0.jsonl",
                [{"ts": ts(s), "bed": s % 3, "temp": 36.5 + (s % 4) * 0.5} for s in range(0, 60, 10)])
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register(queries, catalog)
    for q in queries:
        for user in q.users:
            server.grant(q.id, user, T0)
    rt = NetworkRuntime(spark, store, inputs, tmp_path / "out", tmp_path / "cp", trigger="1 second").start()
    try:
        rt.process_all_available()
        # Live: the rounds start at second 60, before the tuples from then on arrive; nurses see those.
        CatalogStore(store).set_action("rounds", start=T0 + timedelta(seconds=60))
        write_jsonl(tmp_path / "in" / "Ward" / "w1.jsonl",
                    [{"ts": ts(s), "bed": s % 3, "temp": 36.5 + (s % 4) * 0.5} for s in range(60, 240, 10)])
        write_jsonl(tmp_path / "in" / "HeartRate" / "p1.jsonl", [
            sp(121, 210, "{GP, C}"), reading(121, 211, 85, 210), reading(120, 400, 76, 0)])
        rt.process_all_available()
    finally:
        rt.stop()
    expected = replayed(spark, CatalogStore(store).load(), queries, store, inputs, tmp_path / "replay")
    assert sorted((r["Patient_id"], r["Beats_per_min"]) for r in expected[("gina", "beats")]) == [
        (120, 70), (120, 72), (120, 75), (120, 76), (121, 85)]  # 121's first SP is for cardiologists only
    nick = expected[("nick", "ward")]
    assert nick and all(r["_policies"] == ["nurses_on_rounds"] for r in nick)
    for (user, query), rows in expected.items():
        got = read_user_rows(spark, tmp_path / "out", user, query)
        if query == "perpatient":  # replay closes every window; the run only those the watermark passed
            rows = [r for r in rows if r["window_end"] <= ts(400)]
        assert rows and full(got) == full(rows), (user, query)


LEVEL_QUERIES = """
queries:
  - {id: sends, users: [cm, c1, c2], query: "SELECT serviceId, sender, outcome FROM MessageLog WHERE msgType = 'send'"}
  - {id: last25, users: [c1, cm], query: "SELECT serviceId, COUNT(*) AS n FROM MessageLog [ROWS 25] GROUP BY serviceId"}
  - {id: ones, users: [cm, c1], query: "SELECT COUNT(*) AS n FROM MessageLog [RANGE 30 seconds]", level: "[1, ⊥]"}
"""


def test_levels_never_share_a_pipeline_and_a_query_may_fix_its_level(spark, tmp_path) -> None:
    catalog = LEVEL_CATALOG
    queries = load_queries_text(LEVEL_QUERIES, catalog)
    records = message_log(minutes=2, services=6, rate_per_s=1.5, seed=5).records
    inputs = {"MessageLog": str(tmp_path / "in")}
    write_jsonl(tmp_path / "in" / "m0.jsonl", records[: len(records) // 2])
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register(queries, catalog)
    for q in queries:
        for user in q.users:
            server.grant(q.id, user, T0 - timedelta(days=1))
    rt = NetworkRuntime(spark, store, inputs, tmp_path / "out", tmp_path / "cp").start(available_now=True)
    rt.await_termination()
    write_jsonl(tmp_path / "in" / "m1.jsonl", records[len(records) // 2:])
    rt.start(available_now=True).await_termination()  # again, from the checkpoints
    levels = {(p.query.id, p.level) for p in rt.plan.pipelines}
    assert levels == {("sends", "[T, T]"), ("sends", "[1, ⊥]"), ("sends", "[2, ⊥]"), ("last25", "[1, ⊥]"),
                      ("last25", "[T, T]"), ("ones", "[1, ⊥]")}  # cm and c1 share 'ones': the same level
    assert read_status(tmp_path / "out", "cm", "ones")["level"] == "[1, ⊥]"
    expected = replayed(spark, catalog, queries, store, inputs, tmp_path / "replay")
    for (user, query), rows in expected.items():
        got = read_user_rows(spark, tmp_path / "out", user, query)
        if query == "ones":  # the last windows stay open in a run
            closed = max(r["window_end"] for r in got)
            rows = [r for r in rows if r["window_end"] <= closed]
        assert rows and full(got) == full(rows), (user, query)
    assert {r["level"] for r in expected[("c2", "sends")]} <= {"[2, ⊥]", "[⊥, ⊥]"}


def test_a_query_level_above_a_users_clearance_is_refused_with_its_position(tmp_path) -> None:
    from streamwarden.errors import CatalogError

    catalog = LEVEL_CATALOG
    with pytest.raises(CatalogError, match=r"q\.yaml:2:.*c2 is cleared for \[2, ⊥\]"):
        load_queries_text('queries:\n  - {id: q, users: [c2], query: "SELECT ts FROM MessageLog", level: "[1, ⊥]"}\n',
                          catalog, "q.yaml")


def test_registrations_and_a_new_catalog_apply_while_the_network_runs(spark, tmp_path) -> None:
    """A query registered while the network runs starts; one unregistered stops; a catalog change
    restarts only the pipelines whose plans it changes, which deliver nothing twice."""
    catalog = load_catalog_text(HOSPITAL, "hospital.yaml")
    queries = load_queries_text(QUERIES, catalog)
    inputs = {"HeartRate": str(tmp_path / "in" / "HeartRate"), "Ward": str(tmp_path / "in" / "Ward")}
    write_jsonl(tmp_path / "in" / "HeartRate" / "p0.jsonl", [sp(120, 0, "{GP}"), reading(120, 1, 70, 0)])
    write_jsonl(tmp_path / "in" / "Ward" / "w0.jsonl",
                [{"ts": ts(s), "bed": s % 3, "temp": 38.0} for s in range(0, 60, 10)])
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register(queries[:1], catalog)  # only 'beats' to begin with
    server.grant("beats", "gina", T0)
    rt = NetworkRuntime(spark, store, inputs, tmp_path / "out", tmp_path / "cp", trigger="1 second").start()
    try:
        rt.process_all_available()
        server.register(queries[2:], catalog)  # 'ward' registered while it runs
        server.grant("ward", "gina", T0)
        assert rt.poll() and {p.query.id for p in rt.plan.pipelines} == {"beats", "ward"}
        rt.process_all_available()
        before = {name for name in rt.running if name.startswith("beats")}
        # A new catalog: GPs now also see the ward's temperature. Only 'ward' changes plan.
        CatalogStore(store).save(load_catalog_text(HOSPITAL.replace("attributes: [bed], ", ""), "hospital.yaml"))
        assert rt.poll()
        assert {n for n in rt.running if n.startswith("beats")} == before  # untouched, state and all
        write_jsonl(tmp_path / "in" / "Ward" / "w1.jsonl",
                    [{"ts": ts(s), "bed": s % 3, "temp": 38.0} for s in range(60, 120, 10)])
        rt.process_all_available()
        server.unregister("beats")
        assert rt.poll() and all(not n.startswith("beats") for n in rt.running)
    finally:
        rt.stop()
    ward = read_user_rows(spark, tmp_path / "out", "gina", "ward")
    assert sorted(r["bed"] for r in ward) == sorted(s % 3 for s in range(0, 120, 10) if s % 3 < 2)  # each once
    assert {r["temp"] for r in ward if r["_policies"]} == {None, 38.0}  # the old plan masked it, the new does not
    assert [r["Beats_per_min"] for r in read_user_rows(spark, tmp_path / "out", "gina", "beats")] == [70]


FIG6 = """
streams:
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}, key: Patient_id}
roles: {C: {}, GP: {}}
users: {carol: {roles: [C]}, cora: {roles: [C]}}
"""
ON_RESULT = ("SELECT Patient_id, Beats_per_min, ts FROM HeartRate WHERE Beats_per_min > 80 ON RESULT ("
             "INSERT SP AS r INTO STREAM LET r.DDP = TUPLES:ALL r.SRP = frbac:Cardiologist, r.SIGN = POSITIVE)")


def test_on_result_publishes_each_users_rows_behind_spgens_policy_as_replay_does(spark, tmp_path) -> None:
    catalog = load_catalog_text(FIG6, "fig6.yaml")
    queries = load_queries_text(f'queries:\n  - {{id: pub, users: [carol, cora], query: "{ON_RESULT}"}}\n', catalog)
    policy = [{"kind": "sp", "streams": "HeartRate", "tuples": "[120, 133]", "attributes": "*", "roles": "C",
               "sign": "+", "ts": ts(0), "sn": 1, "grant": True}]
    write_jsonl(tmp_path / "in" / "a.jsonl", policy + [reading(120, 5, 90, 0), reading(140, 6, 95, 0)])
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register(queries, catalog)
    server.grant("pub", "carol", T0)
    server.grant("pub", "cora", T0 + timedelta(seconds=20))  # cora only from second 20: her first row is later
    inputs = {"HeartRate": str(tmp_path / "in")}
    rt = NetworkRuntime(spark, store, inputs, tmp_path / "out", tmp_path / "cp").start(available_now=True)
    rt.await_termination()
    write_jsonl(tmp_path / "in" / "b.jsonl", [reading(121, 30, 99, 0)])
    rt.start(available_now=True).await_termination()
    expected = replayed(spark, catalog, queries, store, inputs, tmp_path / "replay")
    for user in ("carol", "cora"):
        got = read_user_rows(spark, tmp_path / "out", user, "pub")
        assert got[0]["kind"] == "sp" and got[0]["ts"] == ts(5)  # the policy first, dated by the earliest result
        assert full(got) == full(expected[(user, "pub")]), user
    assert [r["Patient_id"] for r in expected[("cora", "pub")] if "kind" not in r] == [121]
    assert {r["sp_ts"] for r in expected[("cora", "pub")] if "kind" not in r} == {ts(5)}
