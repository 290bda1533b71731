"""The network's status files (``_access.json``) at many users, without Spark: a group moves
every member's event time at every micro-batch, so a status whose only news is the event time
is rewritten at most every EVENT_TIME_EVERY_S (and when the run ends); anything else a user
must know (receiving or not, why, her periods) is written at the next poll. A folder checked
once is not checked again, yet one that went meanwhile is made again, not a crash."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.network import STATUS, NetworkRuntime

CATALOG = "streams:\n  S: {schema: {ts: timestamp, a: int}}\nusers: {ann: {}}\n"
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def network(tmp_path: Path) -> tuple[AuthorizationServer, NetworkRuntime]:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register([RegisteredQuery("q1", ("ann",), "SELECT a FROM S")], load_catalog_text(CATALOG))
    runtime = NetworkRuntime(None, store, {"S": str(tmp_path / "in" / "S")}, tmp_path / "out", tmp_path / "cp")  # type: ignore[arg-type]
    runtime.start()  # planned; no grant, so nothing runs
    return server, runtime


def status(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((tmp_path / "out" / "ann" / "q1" / STATUS).read_text(encoding="utf-8"))


def test_only_the_event_time_moving_is_written_later_and_at_the_end(tmp_path: Path) -> None:
    server, runtime = network(tmp_path)
    running = next(iter(runtime.running.values()))
    running.emitted = T0
    runtime._write_status(server.changes(), final=True)
    assert status(tmp_path)["event_time"] == "2026-03-01T10:00:00Z"
    running.emitted = T0 + timedelta(minutes=1)
    runtime._write_status(server.changes())  # a poll a moment later: the event time alone moved
    assert status(tmp_path)["event_time"] == "2026-03-01T10:00:00Z"
    server.grant("q1", "ann", T0)  # news she must see now: written at the next poll, event time and all
    runtime._write_status(server.changes())
    assert status(tmp_path)["periods"] == [["2026-03-01T10:00:00Z", None]]
    assert status(tmp_path)["event_time"] == "2026-03-01T10:01:00Z"
    running.emitted = T0 + timedelta(minutes=2)
    runtime._write_status(server.changes(), final=True)  # the run ends: as the processed input leaves it
    assert status(tmp_path)["event_time"] == "2026-03-01T10:02:00Z"


def test_a_status_folder_that_went_is_made_again(tmp_path: Path) -> None:
    server, runtime = network(tmp_path)
    runtime._write_status(server.changes())
    folder = tmp_path / "out" / "ann" / "q1"
    (folder / STATUS).unlink()
    folder.rmdir()  # gone between two polls (an operator, an unregistration)
    server.grant("q1", "ann", T0)
    runtime._write_status(server.changes())
    assert status(tmp_path)["periods"] == [["2026-03-01T10:00:00Z", None]]
