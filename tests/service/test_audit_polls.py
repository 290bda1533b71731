"""A timer's requests (``X-Streamwarden-Poll: 1``, the console refreshing its lists) are
audited one by one like any other: each is its own record, marked ``"poll": true`` so that a
reader can set them apart from what a person did. None is counted in memory, where a crash
(kill -9) would lose it: what was answered is in the store once the trail has flushed."""

from __future__ import annotations

from pathlib import Path

from streamwarden.catalog.audit import records, verify
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.service.trail import AuditTrail

POLL = {"X-Streamwarden-Poll": "1"}


def _trail(tmp_path: Path) -> tuple[AuditTrail, CatalogStore]:
    store = CatalogStore(sqlite_url(tmp_path / "c.db"))
    return AuditTrail(store), store


def test_every_poll_is_its_own_record_marked_a_poll(tmp_path) -> None:
    trail, store = _trail(tmp_path)
    for _ in range(6):
        trail.record("user:ann", "query.list", "queries", "ok", request_id="r", detail={"status": 200}, poll=True)
    trail.record("user:ann", "query.create", "query:q1", "ok", request_id="p")  # what she did: not a poll
    assert trail.flush()  # not close(): nothing waits in memory for the end of the process
    written = [(r.action, r.detail) for r in records(store.engine)]
    assert written == [("query.list", {"status": 200, "poll": True})] * 6 + [("query.create", None)]
    trail.close()
    assert len(records(store.engine)) == 7  # closing wrote nothing more: there was nothing kept back


def test_polls_of_rows_and_failed_polls_are_recorded_and_marked_too(tmp_path) -> None:
    trail, store = _trail(tmp_path)
    for _ in range(3):
        trail.record("user:ann", "query.rows", "query:q1", "ok", request_id="r", poll=True, policies=("p1",))
        trail.record("user:ann", "query.list", "queries", "forbidden", request_id="f", poll=True)
        trail.record("user:bob", "query.list", "queries", "ok", request_id="b")  # not declared a poll
    trail.close()
    found = [(r.principal, r.action, r.outcome, (r.detail or {}).get("poll")) for r in records(store.engine)]
    assert found.count(("user:ann", "query.rows", "ok", True)) == 3
    assert found.count(("user:ann", "query.list", "forbidden", True)) == 3
    assert found.count(("user:bob", "query.list", "ok", None)) == 3


def test_n_requests_with_the_poll_header_are_n_records(client, tokens, service) -> None:
    before = len(records(service.store))
    answers = [client.get("/v1/queries", headers={**tokens.header("ann"), **POLL}) for _ in range(30)]
    answers.append(client.get("/v1/queries", headers=tokens.header("ann")))  # the same read, by a person
    assert all(a.status_code == 200 for a in answers)
    assert service.trail.flush()
    written = records(service.store)[before:]
    assert [r.request_id for r in written] == [a.headers["x-request-id"] for a in answers]
    assert [(r.principal, r.action, (r.detail or {}).get("poll")) for r in written] == \
        [("user:ann", "query.list", True)] * 30 + [("user:ann", "query.list", None)]
    assert verify(service.store).ok
