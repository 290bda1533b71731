"""A review's attacks on the network's binding of rows to one identity (issue 24), without Spark.

No grant is open in these tests until a decision is asked for, so no pipeline starts and the
runtime needs no Spark session: what is checked is the runtime's bookkeeping (which folders
are moved aside, what a micro-batch's recorded decision delivers).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.deliveries import deliver_once, read_rows
from streamwarden.runtime.network import NetworkRuntime, _TerminalSwitch

WITH_EVE = "streams:\n  S: {schema: {ts: timestamp, a: int}}\nusers: {ann: {}, eve: {}}\n"
WITHOUT_EVE = "streams:\n  S: {schema: {ts: timestamp, a: int}}\nusers: {ann: {}}\n"
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def _network(tmp_path: Path) -> tuple[AuthorizationServer, NetworkRuntime]:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register([RegisteredQuery("q1", ("ann", "eve"), "SELECT a FROM S")], load_catalog_text(WITH_EVE))
    runtime = NetworkRuntime(None, store, {"S": str(tmp_path / "in" / "S")}, tmp_path / "out", tmp_path / "cp")  # type: ignore[arg-type]
    runtime.start()  # planned; no grant, so nothing runs
    return server, runtime


def _declare_eve_again(server: AuthorizationServer) -> None:
    """An admin removes eve from the catalog and declares her again (a new identity) between two polls."""
    server.store.save(load_catalog_text(WITHOUT_EVE))
    server.store.save(load_catalog_text(WITH_EVE))


def test_a_user_declared_again_between_two_polls_does_not_read_her_predecessors_rows(tmp_path):
    server, runtime = _network(tmp_path)
    folder = tmp_path / "out" / "eve" / "q1"
    folder.mkdir(parents=True, exist_ok=True)  # the network made it private when it planned

    def place(name: str) -> None:
        (folder / name).mkdir()
        (folder / name / "part-0.txt").write_text('{"a":1}\n')

    deliver_once(folder, "live-1", 1, "batch=abc-", place)  # rows the first eve received
    _declare_eve_again(server)
    runtime.poll()
    assert read_rows(tmp_path / "out" / "eve" / "q1", after=0, limit=10).lines == []


def test_a_replayed_decision_never_delivers_to_a_later_identity(tmp_path):
    """Spark replays a micro-batch after a crash; meanwhile eve was declared again. The first
    eve's recorded share of that batch must not go to the new one."""
    server, runtime = _network(tmp_path)
    server.grant("q1", "eve", T0)
    switch = _TerminalSwitch(runtime, next(iter(runtime.running.values())))
    assert [user for _, user, _ in switch._decide(7)] == ["eve"]  # the first attempt: recorded, then a crash
    _declare_eve_again(server)
    runtime.poll()
    assert [user for _, user, _ in switch._decide(7)] == []


def test_a_pipeline_of_an_earlier_registration_delivers_nothing_under_the_grants_of_the_next(tmp_path):
    """Between two polls an admin replaces q1 (unregistered, registered again with another text, as
    `network unregister` and `network register` do while `serve` runs) and grants the new one: the old
    query's pipeline, still running until the next poll, must not deliver its rows under that grant."""
    server, runtime = _network(tmp_path)
    switch = _TerminalSwitch(runtime, next(iter(runtime.running.values())))
    server.unregister("q1")
    server.register([RegisteredQuery("q1", ("ann", "eve"), "SELECT a FROM S WHERE a > 100")])
    server.grant("q1", "ann", T0)
    assert switch._decide(3) == []
