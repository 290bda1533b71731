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
    server.register([own(u, query(u)) for u in USERS], CATALOG)
    for user in USERS:
        server.open_own(own_id(user, "q1"), user)
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
    server.register([own(u, query(u)) for u in first], CATALOG)
    for user in first:
        server.open_own(own_id(user, "q1"), user)
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


def test_a_group_batch_run_again_after_a_crash_delivers_what_it_did(spark, tmp_path) -> None:
    from streamwarden.runtime.deliveries import deliveries

    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register([own(u, query(u)) for u in USERS], CATALOG)
    for user in USERS:
        server.open_own(own_id(user, "q1"), user)
    rt = NetworkRuntime(spark, store, {"Readings": str(tmp_path / "in" / "Readings")}, tmp_path / "out",
                        tmp_path / "cp")
    rt.poll(force=True)
    rt.stop()
    group = rt.groups["Readings"]
    write(tmp_path / "batch", "a.jsonl", readings(0, 100))
    from streamwarden.engine.sources import as_relation, read_input

    stream = CATALOG.streams["Readings"]
    batch = as_relation(read_input(spark, stream, tmp_path / "batch", streaming=False), stream, "Readings")
    group._batch(batch, 0)
    logged = {u: [d.rows for d in deliveries(tmp_path / "out" / u / own_id(u, "q1"))] for u in USERS}
    server.revoke(own_id("u0", "q1"), "u0", T0)  # access changes before Spark runs batch 0 again
    group._batch(batch, 0)
    assert {u: [d.rows for d in deliveries(tmp_path / "out" / u / own_id(u, "q1"))] for u in USERS} == logged
    for user in USERS:
        rows = read_user_rows(spark, tmp_path / "out", user, own_id(user, "q1"))
        assert len(rows) == sum(logged[user]), user
