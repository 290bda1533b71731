"""A console's timer does not bury what a person did: its repeated metadata reads are
counted, not written one by one, and every one of them is still in the trail's counts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from streamwarden.catalog.audit import records
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.service.trail import AuditTrail


def _trail(tmp_path: Path) -> tuple[AuditTrail, CatalogStore]:
    store = CatalogStore(sqlite_url(tmp_path / "c.db"))
    return AuditTrail(store), store


def test_repeated_polls_are_one_record_and_the_repeats_are_counted_on_close(tmp_path) -> None:
    trail, store = _trail(tmp_path)
    for _ in range(6):
        trail.record("user:ann", "query.list", "queries", "ok", request_id="r", poll=True)
    trail.record("user:ann", "query.create", "query:q1", "ok", request_id="p")  # what she did: its own record
    trail.close()
    written = [(r.action, (r.detail or {}).get("polls")) for r in records(store.engine)]
    assert written == [("query.list", 1), ("query.create", None), ("query.list", 5)]  # 1 + 5 = every poll


def test_rows_failures_and_undeclared_reads_are_never_coalesced(tmp_path) -> None:
    trail, store = _trail(tmp_path)
    for _ in range(3):
        trail.record("user:ann", "query.rows", "query:q1", "ok", request_id="r", poll=True, policies=("p1",))
        trail.record("user:ann", "query.list", "queries", "forbidden", request_id="f", poll=True)
        trail.record("user:bob", "query.list", "queries", "ok", request_id="b")  # not declared a poll
    trail.close()
    actions = [(r.principal, r.action, r.outcome) for r in records(store.engine)]
    assert actions.count(("user:ann", "query.rows", "ok")) == 3
    assert actions.count(("user:ann", "query.list", "forbidden")) == 3
    assert actions.count(("user:bob", "query.list", "ok")) == 3


def test_the_repeats_are_written_when_their_window_ends_not_only_on_close(tmp_path, monkeypatch) -> None:
    """A poller that stops polling (a closed tab) leaves no count waiting for the service's end:
    a crash before it would lose them."""
    import streamwarden.service.trail as trail_module

    clock = [1000.0]
    monkeypatch.setattr(trail_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))  # the trail's clock only
    trail, store = _trail(tmp_path)
    for _ in range(4):
        trail.record("user:ann", "query.list", "queries", "ok", request_id="r", poll=True)
    clock[0] += trail_module.POLL_WINDOW  # the window ends; the writer's next look writes the count
    trail._sweep_polls()
    assert trail.flush()
    written = [(r.action, (r.detail or {}).get("polls")) for r in records(store.engine)]
    assert written == [("query.list", 1), ("query.list", 3)]
    trail.close()
    assert [(r.detail or {}).get("polls") for r in records(store.engine)] == [1, 3]  # nothing left to write
