"""A change made through the service is one audit record: the request's, written by the
service's trail. The store's methods record the changes the command line and the Python
API make (issue 34); the service opens its store for no actor, so the same change is
never recorded twice."""

from __future__ import annotations

from streamwarden.catalog.audit import records, verify
from tests.service.conftest import CATALOG

Q = "SELECT sensor, value FROM Readings"
WITH_ACTION = CATALOG + "actions:\n  drill: {target: 5}\n"


def test_each_change_a_request_makes_is_one_record_under_its_caller(client, tokens, service) -> None:
    root, ann = tokens.header("root"), tokens.header("ann")
    before = len(records(service.store))  # the fixture's own changes: the catalog and the tokens it made
    answers = [
        client.put("/v1/catalog", content=WITH_ACTION, headers=root),
        client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=ann),
        client.post("/v1/queries", json={"id": "shared", "query": Q, "users": ["ann", "bob"]}, headers=root),
        client.post("/v1/grants", json={"query": "shared", "user": "ann", "sign": "+",
                                        "ts": "2026-03-01T10:00:00Z", "until": "2026-03-01T11:00:00Z"}, headers=root),
        client.post("/v1/grants", json={"query": "q1", "user": "ann", "sign": "-"}, headers=root),
        client.post("/v1/grants", json={"query": "shared", "user": "zed", "sign": "+"}, headers=root),  # refused
        client.put("/v1/actions/drill", json={"target": 7}, headers=root),
        client.delete("/v1/queries/q1", headers=ann),
        client.delete("/v1/queries/shared", headers=root),
    ]
    assert [a.status_code for a in answers] == [200, 201, 201, 201, 201, 422, 200, 200, 200], \
        [a.text[:200] for a in answers]
    assert service.trail.flush()
    written = records(service.store)[before:]
    assert [r.request_id for r in written] == [a.headers["x-request-id"] for a in answers]  # one each, no other
    assert [(r.principal, r.action, r.outcome) for r in written] == [
        ("user:root", "catalog.update", "ok"), ("user:ann", "query.create", "ok"), ("user:root", "query.create", "ok"),
        ("user:root", "grant.create", "ok"), ("user:root", "grant.revoke", "ok"),
        ("user:root", "grant.create", "refused"),
        ("user:root", "action.update", "ok"), ("user:ann", "query.delete", "ok"), ("user:root", "query.delete", "ok")]
    assert verify(service.store).ok


def test_the_catalog_serve_loads_at_start_is_the_operators_change(tmp_path, monkeypatch) -> None:
    from streamwarden.service.server import ServeOptions, open_service

    (tmp_path / "c.yaml").write_text(WITH_ACTION)
    monkeypatch.setenv("STREAMWARDEN_OPERATOR", "olga")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    opened = open_service(ServeOptions(store_url=url, inputs={}, output_dir=str(tmp_path / "out"),
                                       catalog=str(tmp_path / "c.yaml")))
    try:
        opened.store.set_action("drill", target=9.0)  # the service's own handle: its trail records requests
    finally:
        opened.trail.close()
    assert [(r.principal, r.action) for r in records(url)] == [("cli:olga", "catalog.update")]
