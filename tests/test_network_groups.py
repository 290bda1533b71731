"""Shared groups (issue 25): many users' queries over one stream run as ONE Spark query, and
each user receives exactly what ``replay --user`` gives her over the same input, restricted
to her grant periods — whether she was there from the start or registered while it ran,
and when Spark runs a micro-batch again after a crash.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery, own_id
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.network import NetworkRuntime, read_user_rows

pytestmark = pytest.mark.spark

USERS = {f"u{i}": f"w{i % 3}" for i in range(6)}
CATALOG = load_catalog_text(
    "streams:\n  Readings: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}\n"
    "roles: {Reader: {}}\n"
    "users:\n" + "".join(f"  {u}: {{roles: [Reader], profile: {{ward: {w}}}}}\n" for u, w in USERS.items())
    + "policies:\n"
    "  - {id: by_ward, subject: Reader, streams: [Readings], privilege: read, where: \"ward = self.ward\"}\n")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def readings(first: int, count: int) -> list[dict]:
    return [{"ts": (T0 + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"), "sensor": i, "ward": f"w{i % 4}",
             "value": float(i % 50)} for i in range(first, first + count)]


def write(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def own(user: str, text: str) -> RegisteredQuery:
    return RegisteredQuery(own_id(user, "q1"), (user,), text, owner=user, opens=())


def register_own(server: AuthorizationServer, texts: dict[str, str], catalog: Catalog | None = None) -> None:
    """Each user's own query ``texts[user]`` registered (with ``catalog``), and opened to her, as the service does."""
    server.register([own(u, text) for u, text in texts.items()], catalog)
    for user in texts:
        server.open_own(own_id(user, "q1"), user)


def query(user: str) -> str:
    return f"SELECT sensor, value FROM Readings WHERE value > {5 * int(user[1:])}"


def expected(spark, tmp_path: Path, user: str) -> Counter:  # type: ignore[no-untyped-def]
    rows = api.replay(CATALOG, user, query(user), {"Readings": str(tmp_path / "in" / "Readings")}, spark=spark)
    assert rows, user  # every user sees something: the comparison means something
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def received(spark, tmp_path: Path, user: str) -> Counter:  # type: ignore[no-untyped-def]
    rows = read_user_rows(spark, tmp_path / "out", user, own_id(user, "q1"))
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def test_many_users_queries_run_as_one_spark_query_with_each_users_rows(spark, tmp_path) -> None:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register_own(server, {u: query(u) for u in USERS}, CATALOG)
    write(tmp_path / "in" / "Readings", "a.jsonl", readings(0, 400))
    rt = NetworkRuntime(spark, store, {"Readings": str(tmp_path / "in" / "Readings")}, tmp_path / "out",
                        tmp_path / "cp").start(available_now=True)
    try:
        assert [s.name for s in rt.streams] == ["group-Readings"]  # one Spark query for six users' queries
        assert all(r.group == "Readings" for r in rt.running.values())
        rt.await_termination()
    finally:
        rt.stop()
    for user in USERS:
        assert received(spark, tmp_path, user) == expected(spark, tmp_path, user), user


def test_a_query_registered_while_the_group_runs_gets_what_came_before_once(spark, tmp_path) -> None:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    first, late = list(USERS)[:3], list(USERS)[3:]
    register_own(server, {u: query(u) for u in first}, CATALOG)
    folder = tmp_path / "in" / "Readings"
    write(folder, "a.jsonl", readings(0, 200))
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, tmp_path / "out", tmp_path / "cp",
                        trigger="1 second").start()
    try:
        rt.process_all_available()
        server.register([own(u, query(u)) for u in late])  # registered while it runs: no restart
        for user in late:
            server.open_own(own_id(user, "q1"), user)
        group = rt.groups["Readings"].query
        assert rt.poll()
        write(folder, "b.jsonl", readings(200, 200))
        rt.process_all_available()
        assert rt.groups["Readings"].query is group  # the same Spark query all along
    finally:
        rt.stop()
    for user in USERS:
        assert received(spark, tmp_path, user) == expected(spark, tmp_path, user), user


def group_to_run_by_hand(spark, tmp_path: Path, server: AuthorizationServer, store: str, records: list[dict],
                         folder: Path):  # type: ignore[no-untyped-def]
    """Every user's query registered, the network planned, its group's Spark query started and
    stopped with nothing to read; then ``records`` written to ``folder`` and returned as the
    batch a test hands the group's ``_batch`` (as Spark would)."""
    from streamwarden.engine.sources import as_relation, read_input

    register_own(server, {u: query(u) for u in USERS}, CATALOG)
    rt = NetworkRuntime(spark, store, {"Readings": str(tmp_path / "in" / "Readings")}, tmp_path / "out",
                        tmp_path / "cp")
    rt.poll(force=True)
    rt.stop()
    write(folder, "a.jsonl", records)
    stream = CATALOG.streams["Readings"]
    return rt.groups["Readings"], as_relation(read_input(spark, stream, folder, streaming=False), stream, "Readings")


def test_a_group_batch_run_again_after_a_crash_delivers_what_it_did(spark, tmp_path) -> None:
    from streamwarden.runtime.deliveries import deliveries

    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    group, batch = group_to_run_by_hand(spark, tmp_path, server, store, readings(0, 100), tmp_path / "batch")
    group._batch(batch, 0)
    logged = {u: [d.rows for d in deliveries(tmp_path / "out" / u / own_id(u, "q1"))] for u in USERS}
    server.revoke(own_id("u0", "q1"), "u0", T0)  # access changes before Spark runs batch 0 again
    group._batch(batch, 0)
    assert {u: [d.rows for d in deliveries(tmp_path / "out" / u / own_id(u, "q1"))] for u in USERS} == logged
    for user in USERS:
        rows = read_user_rows(spark, tmp_path / "out", user, own_id(user, "q1"))
        assert len(rows) == sum(logged[user]), user


def test_a_group_batch_cut_short_halfway_through_its_users_delivers_each_once(spark, tmp_path, monkeypatch) -> None:
    """The process dies after some users' rows are logged and before the others': Spark runs the
    batch again, and each user has her rows exactly once (those logged are recognised by the
    group's micro-batch key, the others delivered under the names they would have had)."""
    from streamwarden.runtime import handout

    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    group, batch = group_to_run_by_hand(spark, tmp_path, server, store, readings(0, 400),
                                        tmp_path / "in" / "Readings")
    original, calls = handout.deliver_once, []

    def dies_at_the_fourth(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        if len(calls) == 4:
            raise OSError("the process died here")
        return original(*args, **kwargs)

    monkeypatch.setattr(handout, "deliver_once", dies_at_the_fourth)
    with pytest.raises(OSError):
        group._batch(batch, 0)
    monkeypatch.setattr(handout, "deliver_once", original)
    group._batch(batch, 0)  # Spark runs it again
    for user in USERS:
        assert received(spark, tmp_path, user) == expected(spark, tmp_path, user), user


AVERAGE = "SELECT AVG(value) AS avg, COUNT(value) AS n FROM Readings [RANGE 1 minute]"


def closer(folder: Path, name: str, seconds: int) -> None:
    """A reading of a ward no user sees, hours later: the next micro-batch's watermark closes every window."""
    write(folder, name, [{"ts": (T0 + timedelta(hours=2, seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "sensor": 0, "ward": "w9", "value": 0.0}])


def expected_average(spark, folder: Path, user: str) -> Counter:  # type: ignore[no-untyped-def]
    rows = api.replay(CATALOG, user, AVERAGE, {"Readings": str(folder)}, spark=spark)
    assert rows, user
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def test_users_averages_share_one_aggregate_per_ward_and_a_late_joiner_gets_the_closed_windows(spark, tmp_path):
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    first, late = list(USERS)[:2], list(USERS)[2:]  # u0, u1 (wards w0, w1) first; then w2, w0 again, ...
    register_own(server, {u: AVERAGE for u in first}, CATALOG)
    folder = tmp_path / "in" / "Readings"
    write(folder, "a.jsonl", readings(0, 200))
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, tmp_path / "out", tmp_path / "cp",
                        trigger="1 second").start()
    try:
        rt.process_all_available()
        assert [s.name for s in rt.streams] == [next(iter(rt.groups.values())).name]  # one query, one aggregate
        (name, group), = rt.groups.items()
        assert name.startswith("Readings_agg") and all(r.group == name for r in rt.running.values())
        write(folder, "b.jsonl", readings(200, 100))  # closes windows the late joiners did not see
        rt.process_all_available()
        server.register([own(u, AVERAGE) for u in late])  # registered while it runs: no restart
        for user in late:
            server.open_own(own_id(user, "q1"), user)
        assert rt.poll()
        write(folder, "c.jsonl", readings(300, 100))
        rt.process_all_available()
        closer(folder, "d.jsonl", 0)
        rt.process_all_available()
        closer(folder, "e.jsonl", 1)
        rt.process_all_available()
        assert rt.groups[name].query is group.query and len(rt.streams) == 1  # the same Spark query all along
    finally:
        rt.stop()
    for user in USERS:
        assert received(spark, tmp_path, user) == expected_average(spark, folder, user), user


def test_network_replay_runs_each_group_as_one_job_with_each_users_rows(spark, tmp_path, monkeypatch) -> None:
    from streamwarden.catalog.registry import AccessChange
    from streamwarden.runtime import network_replay

    folder = tmp_path / "in" / "Readings"
    write(folder, "a.jsonl", readings(0, 400))
    queries = [RegisteredQuery(f"sel_{u}", (u,), query(u)) for u in USERS]
    queries += [RegisteredQuery("avg", tuple(USERS), AVERAGE)]
    cut = T0 + timedelta(minutes=3)
    changes = [AccessChange(T0 - timedelta(days=1), q.id, u, True, i) for i, q in enumerate(queries) for u in q.users]
    changes.append(AccessChange(cut, "avg", "u1", False, len(changes)))  # u1's averages stop at 10:03

    def no_job_of_its_own(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a group hosts every query here: no job of its own")

    monkeypatch.setattr(network_replay, "build_job", no_job_of_its_own)
    written = network_replay.replay_network(spark, CATALOG, queries, changes, {"Readings": str(folder)},
                                            tmp_path / "out")
    for user in USERS:
        lines = (tmp_path / "out" / user / f"sel_{user}.jsonl").read_text().splitlines()
        assert Counter(json.dumps(json.loads(x), sort_keys=True) for x in lines) == expected(spark, tmp_path, user)
        averages = [json.loads(x) for x in (tmp_path / "out" / user / "avg.jsonl").read_text().splitlines()]
        want = [r for r in api.replay(CATALOG, user, AVERAGE, {"Readings": str(folder)}, spark=spark)
                if user != "u1" or r["window_end"] < cut.strftime("%Y-%m-%dT%H:%M:%SZ")]  # [from, until)
        assert Counter(json.dumps(r, sort_keys=True) for r in averages) == Counter(
            json.dumps(r, sort_keys=True) for r in want), user
        assert [r["window_end"] for r in averages] == sorted(r["window_end"] for r in averages)  # by event time
        assert written[(user, "avg")] == len(averages)


SHIELDED = load_catalog_text("""
lattice:
  classes: {Hospitals: [north, south]}
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, hospital: string, pulse: int}
    key: patient
    punctuated_by: patient
    level: {from: hospital}
roles: {Doctor: {}, Nurse: {}}
users:
  d1: {roles: [Doctor], clearance: "[north]"}
  d2: {roles: [Doctor], clearance: "[north]"}
  d3: {roles: [Doctor], clearance: "[south]"}
  n1: {roles: [Nurse], clearance: "[north]"}
""")


def vitals() -> list[dict]:
    """Each patient's monitor sends its policy, then its readings: patients 1-2 in the north, 3-4
    in the south; odd patients let doctors and nurses see them, even ones doctors only."""
    def at(second: int) -> str:
        return (T0 + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")

    records: list[dict] = []
    for patient in (1, 2, 3, 4):
        records.append({"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "sign": "+",
                        "roles": "{Doctor, Nurse}" if patient % 2 else "Doctor", "ts": at(0), "sn": 1,
                        "patient": patient})
    for second in range(1, 120):
        patient = 1 + second % 4
        records.append({"ts": at(second), "patient": patient, "hospital": "north" if patient <= 2 else "south",
                        "pulse": 60 + (second * 7) % 80, "sp_ts": at(0), "sp_csn": 1})
    return records


def test_a_shielded_levelled_stream_has_one_group_per_level_and_role_set_each_user_exact(spark, tmp_path) -> None:
    limits = {"d1": 70, "d2": 100, "d3": 80, "n1": 90}
    text = {u: f"SELECT patient, hospital, pulse FROM Vitals WHERE pulse > {c}" for u, c in limits.items()}
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register_own(server, text, SHIELDED)
    folder = tmp_path / "in" / "Vitals"
    write(folder, "a.jsonl", vitals())
    rt = NetworkRuntime(spark, store, {"Vitals": str(folder)}, tmp_path / "out", tmp_path / "cp").start(
        available_now=True)
    try:
        groups = {u: r.group for r in rt.running.values() for u in r.pipeline.users}
        # d1 and d2 share one Spark query (north, doctors); d3 (south) and n1 (nurses) each have their own
        assert groups["d1"] == groups["d2"] and len({groups["d1"], groups["d3"], groups["n1"]}) == 3
        assert None not in groups.values() and len(rt.streams) == 3
        rt.await_termination()
    finally:
        rt.stop()
    for user in limits:
        want = api.replay(SHIELDED, user, text[user], {"Vitals": str(folder)}, spark=spark)
        assert want, user
        assert received(spark, tmp_path, user) == Counter(json.dumps(r, sort_keys=True) for r in want), user
    seen = {u: {json.loads(r)["patient"] for r in received(spark, tmp_path, u)} for u in limits}
    assert seen["d3"] <= {3, 4} and seen["n1"] <= {1} and seen["d1"] <= {1, 2}  # levels and shields hold


def test_spark_checks_a_group_template_once_whatever_its_number_of_members(spark, tmp_path, monkeypatch) -> None:
    from streamwarden.runtime import network

    checked = []
    real = network._check_streaming
    monkeypatch.setattr(network, "_check_streaming", lambda frame: checked.append(1) or real(frame))
    rt = NetworkRuntime(spark, sqlite_url(tmp_path / "store.db"), {"Readings": str(tmp_path / "in")},
                        tmp_path / "out", tmp_path / "cp")
    for user in USERS:  # one template (value > ?1 under ward = ?0): Spark checks it for the first member
        assert rt.runnable_problem(own(user, query(user)), CATALOG) is None
    assert len(checked) == 1
    assert rt.runnable_problem(own("u0", "SELECT value FROM Readings WHERE value > 1"), CATALOG) is None
    assert len(checked) == 2  # another template: checked again


def test_a_member_leaving_a_running_aggregate_group_touches_no_other_members_rows(spark, tmp_path) -> None:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    users = list(USERS)[:4]  # wards w0, w1, w2, w0: u0 and u3 share a key
    register_own(server, {u: AVERAGE for u in users}, CATALOG)
    folder = tmp_path / "in" / "Readings"
    write(folder, "a.jsonl", readings(0, 200))
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, tmp_path / "out", tmp_path / "cp",
                        trigger="1 second").start()
    try:
        rt.process_all_available()
        (group,) = rt.groups.values()
        query = group.query
        before = received(spark, tmp_path, "u3")
        server.unregister(own_id("u3", "q1"))  # u3 leaves; u0 (the same ward) stays
        assert rt.poll()
        assert len(group.members) == 3 and group.query is query  # no restart
        write(folder, "b.jsonl", readings(200, 200))
        rt.process_all_available()
        closer(folder, "c.jsonl", 0)
        rt.process_all_available()
        closer(folder, "d.jsonl", 1)
        rt.process_all_available()
        assert group.query is query
    finally:
        rt.stop()
    for user in users[:3]:
        assert received(spark, tmp_path, user) == expected_average(spark, folder, user), user
    assert before and received(spark, tmp_path, "u3") == before  # nothing more after she left


STATISTICS = load_catalog_text(
    "streams:\n  Readings: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}\n"
    "roles: {Statistician: {}}\n"
    "users:\n" + "".join(f"  {u}: {{roles: [Statistician], profile: {{ward: {w}}}}}\n" for u, w in USERS.items())
    + "policies:\n"
    "  - {id: ward_means, subject: Statistician, streams: [Readings], attributes: [value], privilege: avg,\n"
    "     where: \"ward = self.ward\", window: {size: 2 minutes}, min_group: 3}\n")


def test_aggregate_only_privileges_hold_for_each_member_of_an_aggregate_group(spark, tmp_path) -> None:
    text = "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]"  # snapped up to the policy's 2 minutes
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register_own(server, {u: text for u in USERS}, STATISTICS)
    folder = tmp_path / "in" / "Readings"
    write(folder, "a.jsonl", readings(0, 400))
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, tmp_path / "out", tmp_path / "cp",
                        trigger="1 second").start()
    try:
        rt.process_all_available()
        closer(folder, "b.jsonl", 0)
        rt.process_all_available()
        closer(folder, "c.jsonl", 1)
        rt.process_all_available()
        assert len(rt.streams) == 1 and all(r.group is not None for r in rt.running.values())
    finally:
        rt.stop()
    for user in USERS:
        want = api.replay(STATISTICS, user, text, {"Readings": str(folder)}, spark=spark)
        assert want and all(r["_policies"] == ["ward_means"] for r in want), user
        got = received(spark, tmp_path, user)
        assert got == Counter(json.dumps(r, sort_keys=True) for r in want), user
        windows = [json.loads(r) for r in got]
        assert windows and all(int(w["window_end"][14:16]) % 2 == 0 for w in windows)  # on the policy's grid


def test_a_member_whose_plan_spark_refuses_fails_alone_and_tells_no_secret(spark, tmp_path, monkeypatch) -> None:
    """One member's template no longer compiles (as after a catalog change under it): its members
    fail, each reported as its own, without Spark's words (they may name what policies hide),
    and the group's other members receive every row as before."""
    from streamwarden.engine import shared
    from streamwarden.runtime.network import read_status

    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    odd = "u5"  # of another template than the others
    texts = {u: query(u) for u in USERS if u != odd} | {odd: "SELECT sensor FROM Readings WHERE sensor < 30"}
    register_own(server, texts, CATALOG)
    original = shared.template_rows

    def refused(batch, template, members, lattice=None):  # type: ignore[no-untyped-def]
        if "op='<'" in template.key:  # the odd one's: sensor < ?
            raise RuntimeError("[UNRESOLVED_COLUMN] A column `secret_diagnosis` cannot be resolved")
        return original(batch, template, members, lattice)

    monkeypatch.setattr(shared, "template_rows", refused)
    write(tmp_path / "in" / "Readings", "a.jsonl", readings(0, 200))
    rt = NetworkRuntime(spark, store, {"Readings": str(tmp_path / "in" / "Readings")}, tmp_path / "out",
                        tmp_path / "cp").start(available_now=True)
    try:
        rt.await_termination()
        assert list(rt.failures()) == [next(n for n, r in rt.running.items() if r.pipeline.users == (odd,))]
        rt.poll()
    finally:
        rt.stop()
    status = read_status(tmp_path / "out", odd, own_id(odd, "q1"))
    assert status["receiving"] is False and "no longer compiles" in status["reason"]
    assert "secret" not in json.dumps(status)
    for user in USERS:
        if user != odd:
            assert received(spark, tmp_path, user) == expected(spark, tmp_path, user), user


def test_stopping_a_group_whose_batch_waits_for_the_runtime_lock_does_not_wait_on_itself(spark, tmp_path,
                                                                                           monkeypatch) -> None:
    """A poll (or the runtime stopping) holds the runtime's lock and stops a group whose
    micro-batch is waiting for that lock to decide its recipients: the batch gives up, the stop
    returns. (It deadlocked: the stop waited for the batch, the batch for the lock.)"""
    import threading

    from streamwarden.runtime.groups import StreamGroup

    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register_own(server, {u: query(u) for u in USERS}, CATALOG)
    write(tmp_path / "in" / "Readings", "a.jsonl", readings(0, 100))
    waiting = threading.Event()
    original = StreamGroup._runtime_lock

    def spied(self):  # type: ignore[no-untyped-def]
        waiting.set()
        return original(self)

    monkeypatch.setattr(StreamGroup, "_runtime_lock", spied)
    rt = NetworkRuntime(spark, store, {"Readings": str(tmp_path / "in" / "Readings")}, tmp_path / "out",
                        tmp_path / "cp", trigger="1 second")
    try:
        with rt._lock:  # as a poll holds it
            rt.start()
            assert waiting.wait(120), "the group's first micro-batch never came to its decision"
            group = rt.groups["Readings"]
            stopper = threading.Thread(target=group.stop, daemon=True)
            stopper.start()
            stopper.join(120)
            assert not stopper.is_alive(), "stopping the group waited on its own batch"
    finally:
        rt.stop()
    assert not any((tmp_path / "out").glob("*/*/batch=*"))  # the batch gave up before delivering anything
