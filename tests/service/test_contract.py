"""The REST contract of issue 13, without Spark: identity, queries, rows, admins, providers, audit."""

from __future__ import annotations

import json

import pytest

from streamwarden.catalog.audit import verify
from streamwarden.catalog.identity import revoke_tokens
from streamwarden.service.queries import own_id

from .conftest import deliver

Q = "SELECT sensor, value FROM Readings"
# The contract on both stores: SQLite by default, PostgreSQL by URL.
pytestmark = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)


def test_health_needs_no_token_and_everything_else_does(client, tokens):
    assert client.get("/health").json() == {"status": "ok"}
    for method, path in [("get", "/v1/queries"), ("post", "/v1/queries"), ("get", "/v1/audit"), ("get", "/metrics"),
                         ("put", "/v1/catalog"), ("post", "/v1/grants"), ("post", "/v1/streams/Vitals/records")]:
        answer = getattr(client, method)(path)
        assert answer.status_code == 401, (method, path, answer.text)
        assert set(answer.json()) == {"error"}
    bad = {"Authorization": "Bearer " + tokens["ann"][:-1] + ("A" if tokens["ann"][-1] != "A" else "B")}
    assert client.get("/v1/queries", headers=bad).status_code == 401


def test_register_explains_and_grants_the_caller(client, tokens, service):
    answer = client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["id"] == "q1" and any(g["deployed"] for g in body["explanation"]["graphs"])
    internal = own_id("ann", "q1")
    assert internal in service.server.registered()
    grants = [(c.query, c.user, c.grant) for c in service.server.changes()]
    assert grants == [(internal, "ann", True)]
    listed = client.get("/v1/queries", headers=tokens.header("ann")).json()["queries"]
    assert [q["id"] for q in listed] == ["q1"] and listed[0]["rows_delivered"] == 0


def test_ids_are_per_user_and_others_queries_are_not_found(client, tokens):
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 409
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    missing = client.get("/v1/queries/q2", headers=tokens.header("bob"))
    foreign = client.get(f"/v1/queries/{own_id('ann', 'q1')}", headers=tokens.header("bob"))
    assert missing.status_code == foreign.status_code == 404
    assert client.get(f"/v1/queries/{own_id('ann', 'q1')}/rows", headers=tokens.header("bob")).status_code == 404


def test_bad_cql_and_nothing_authorized_are_422_and_register_nothing(client, tokens, service):
    bad = client.post("/v1/queries", json={"id": "q1", "query": "SELECT FROM"}, headers=tokens.header("ann"))
    assert bad.status_code == 422 and bad.json()["line"] == 1 and "column" in bad.json()
    none = client.post("/v1/queries", json={"id": "q2", "query": Q}, headers=tokens.header("eve"))
    assert none.status_code == 422, none.text
    assert service.server.registered() == {}


def test_rows_with_cursors_in_delivery_order(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    internal = own_id("ann", "q1")
    deliver(service, "ann", internal, 1, ['{"sensor":2}', '{"sensor":1}'])
    deliver(service, "ann", internal, 2, ['{"sensor":3}'])
    first = client.get("/v1/queries/q1/rows?limit=2", headers=tokens.header("ann")).json()
    assert first == {"rows": [{"sensor": 1}, {"sensor": 2}], "next": "2", "event_time": None}  # no network: no state
    rest = client.get(f"/v1/queries/q1/rows?after={first['next']}", headers=tokens.header("ann")).json()
    assert rest == {"rows": [{"sensor": 3}], "next": "3", "event_time": None}
    assert client.get("/v1/queries/q1/rows?after=3", headers=tokens.header("ann")).json() == {
        "rows": [], "next": "3", "event_time": None}
    assert client.get("/v1/queries/q1/rows?after=-1", headers=tokens.header("ann")).status_code == 422
    shown = client.get("/v1/queries/q1", headers=tokens.header("ann")).json()
    assert shown["status"]["rows_delivered"] == 3 and shown["status"]["last_batch"]["rows"] == 1


def test_sse_stream_resumes_with_last_event_id(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1}', '{"sensor":2}', '{"sensor":3}'])
    headers = {**tokens.header("ann"), "Last-Event-ID": "1"}
    events = []
    with client.stream("GET", "/v1/queries/q1/stream", headers=headers) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("id:"):
                events.append(line.split(":", 1)[1].strip())
            if line.startswith("data:"):
                events.append(json.loads(line.split(":", 1)[1]))
            if len(events) == 4:
                break
    assert events == ["2", {"sensor": 2}, "3", {"sensor": 3}]


def test_users_cannot_do_admin_things(client, tokens):
    for method, path, kwargs in [("put", "/v1/catalog", {"content": "streams: {}"}), ("get", "/v1/audit", {}),
                                 ("post", "/v1/grants", {"json": {"query": "q", "user": "ann", "sign": "+"}}),
                                 ("put", "/v1/actions/a", {"json": {"target": 1}}), ("get", "/metrics", {}),
                                 ("post", "/v1/queries", {"json": {"id": "s", "query": Q, "users": ["bob"]}})]:
        answer = getattr(client, method)(path, headers=tokens.header("ann"), **kwargs)
        assert answer.status_code == 403, (path, answer.text)


def test_admin_shares_a_query_and_grants_it(client, tokens, service):
    answer = client.post("/v1/queries", json={"id": "shared1", "query": Q, "users": ["ann", "bob"]},
                         headers=tokens.header("root"))
    assert answer.status_code == 201, answer.text
    assert set(answer.json()["users"]) == {"ann", "bob"}
    assert service.server.changes() == ()  # no grant until one is given
    assert [q["id"] for q in client.get("/v1/queries", headers=tokens.header("bob")).json()["queries"]] == ["shared1"]
    grant = client.post("/v1/grants", json={"query": "shared1", "user": "bob", "sign": "+",
                                            "ts": "2026-03-01T10:00:00Z", "until": "2026-03-01T11:00:00Z"},
                        headers=tokens.header("root"))
    assert grant.status_code == 201, grant.text
    assert grant.json()["periods"] == [["2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z"]]
    unknown = client.post("/v1/grants", json={"query": "nope", "user": "bob", "sign": "+"},
                          headers=tokens.header("root"))
    assert unknown.status_code in (404, 422) and "nope" in unknown.json()["error"]


def test_catalog_update_reports_the_first_error_with_its_position(client, tokens, service):
    bad = client.put("/v1/catalog", content="streams:\n  S: {schema: {ts: timestamp, a: integer}}\n",
                     headers=tokens.header("root"))
    assert bad.status_code == 422, bad.text
    assert bad.json()["line"] == 2 and "integer" in bad.json()["error"]
    text = service.store.load().text.replace("ann: {roles: [Doctor]}", "ann: {roles: [Nurse]}")
    ok = client.put("/v1/catalog", content=text, headers=tokens.header("root"))
    assert ok.status_code == 200, ok.text
    roles = service.store.load().users["ann"].roles
    assert roles == ("Nurse",) or list(roles) == ["Nurse"]


def test_provider_records_all_or_nothing_and_only_its_own_substream(client, tokens, service):
    folder = service.inputs["Vitals"]
    good = ('{"ts": "2026-03-01T10:00:00Z", "patient": 7, "ward": "w1", "pulse": 80, '
            '"sp_ts": "2026-03-01T09:00:00Z", "sp_csn": 1}\n')
    sp = ('{"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor", '
          '"ts": "2026-03-01T09:00:00Z", "sn": 1, "patient": 7}\n')
    answer = client.post("/v1/streams/Vitals/records", content=sp + good, headers=tokens.header("provider7"))
    assert answer.status_code == 201, answer.text
    assert answer.json()["accepted"] == 2
    files = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    assert len(files) == 1
    other = good.replace('"patient": 7', '"patient": 8')
    refused = client.post("/v1/streams/Vitals/records", content=good + other, headers=tokens.header("provider7"))
    assert refused.status_code == 403 and refused.json()["line"] == 2
    broken = client.post("/v1/streams/Vitals/records", content=good + '{"ts": "x", "patient": 7}\n',
                         headers=tokens.header("provider7"))
    assert broken.status_code == 422 and broken.json()["line"] == 2
    assert len(sorted(p for p in folder.iterdir() if not p.name.startswith("."))) == 1  # nothing more
    posted = client.post("/v1/streams/Readings/records", content=good, headers=tokens.header("provider7"))
    assert posted.status_code == 403
    assert client.post("/v1/streams/Vitals/records", content=good, headers=tokens.header("ann")).status_code == 403


def test_revoked_and_unknown_tokens_are_401(client, tokens, store_url):
    assert client.get("/v1/queries", headers=tokens.header("bob")).status_code == 200
    revoke_tokens(store_url, "bob")
    assert client.get("/v1/queries", headers=tokens.header("bob")).status_code == 401


def test_every_request_is_audited_without_tokens(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    client.get("/v1/queries/zz", headers=tokens.header("bob"))
    client.get("/v1/queries", headers={"Authorization": "Bearer " + tokens["eve"] + "x"})
    trail = client.get("/v1/audit", headers=tokens.header("root")).json()["records"]
    seen = [(r["principal"], r["action"], r["outcome"]) for r in trail]
    assert ("user:ann", "query.create", "ok") in seen
    assert ("user:bob", "query.show", "not-found") in seen
    assert ("anonymous", "query.list", "unauthenticated") in seen
    created = next(r for r in trail if r["action"] == "query.create")
    assert created["policies"] == ["doctors_read"] and created["request_id"]
    text = json.dumps(trail)
    assert not any(token in text for token in tokens.values())
    service.trail.flush()
    assert verify(service.store).ok


def test_metrics_for_admins(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1}'])
    text = client.get("/metrics", headers=tokens.header("root")).text
    assert 'streamwarden_rows_out_total{query="ann/q1",user="ann"} 1' in text  # own queries by owner/id
    assert 'streamwarden_requests_total{action="query.create",outcome="ok"} 1' in text


def test_delete_forgets_rows(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1}'])
    assert client.delete("/v1/queries/q1", headers=tokens.header("ann")).status_code == 200
    assert client.get("/v1/queries/q1", headers=tokens.header("ann")).status_code == 404
    again = client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    assert again.status_code == 201
    assert client.get("/v1/queries/q1/rows", headers=tokens.header("ann")).json()["rows"] == []
