"""Attacks on the grant model through the service's HTTP contract (issue 24, findings 1-5).

Deny by default: a user's own query sees at most what her role policies allow (grants open
nothing); only a shared query an admin registered opens the plain streams no policy named
when it was registered, and that set never grows. An admin's revocation of an own query
holds for that user whatever id she registers next. Grants, tokens and rows are bound to
one registration and one identity. Admins name a user's own query by the user and her id.

Without Spark: what the network would deliver is read from the plan it would run
(:func:`streamwarden.runtime.plan.plan_network` over the store's registrations) and from
the access periods its terminal switches apply (:func:`access_periods`).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from streamwarden.catalog.identity import create_token
from streamwarden.catalog.registry import access_periods, own_id
from streamwarden.runtime.plan import plan_network
from streamwarden.service import app as app_module

from .conftest import CATALOG, Tokens, deliver

PAYROLL = CATALOG.replace("roles:", "  Payroll:\n    schema: {ts: timestamp, emp: string, salary: double}\nroles:", 1)
SALARIES = "SELECT emp, salary FROM Payroll"
Q = "SELECT sensor, value FROM Readings"
T = "2026-03-01T10:05:00Z"


def put_catalog(client: Any, tokens: Tokens, text: str) -> None:
    answer = client.put("/v1/catalog", content=text.encode(), headers=tokens.header("root"))
    assert answer.status_code == 200, answer.text


def plan_of(service: Any):  # type: ignore[no-untyped-def]
    """What the network would run now: its plan over the store's catalog and registrations."""
    return plan_network(service.store.load(), service.server.registrations())


def periods(service: Any, internal: str, user: str) -> list[tuple[str, str | None]]:
    query = service.server.registration(internal)
    assert query is not None, internal
    return [(a.isoformat(), b and b.isoformat()) for a, b in access_periods(service.server.changes(), query, user)]


# -- 1. an own query opens nothing -------------------------------------------------------------------
def test_an_own_query_over_a_stream_no_policy_opens_is_refused(client, tokens, service):
    put_catalog(client, tokens, PAYROLL)
    answer = client.post("/v1/queries", json={"id": "pay", "query": SALARIES}, headers=tokens.header("eve"))
    assert answer.status_code == 422, answer.text
    assert "Payroll" in answer.json()["error"]
    dry = client.post("/v1/queries?dry_run=true", json={"id": "pay", "query": SALARIES}, headers=tokens.header("eve"))
    assert dry.status_code == 422  # the preview says what registering would: nothing
    assert service.server.registered() == {}


def test_a_shared_query_opens_what_the_admin_granted_and_an_own_one_of_the_same_text_does_not(client, tokens,
                                                                                            service):
    put_catalog(client, tokens, PAYROLL)
    shared = client.post("/v1/queries", json={"id": "payroll", "query": SALARIES, "users": ["ann"]},
                         headers=tokens.header("root"))
    assert shared.status_code == 201, shared.text
    assert service.server.registration("payroll").opens == ("Payroll",)
    assert client.post("/v1/grants", json={"query": "payroll", "user": "ann", "sign": "+", "ts": T},
                       headers=tokens.header("root")).status_code == 201
    plan = plan_of(service)
    assert [(p.query.id, p.users) for p in plan.pipelines] == [("payroll", ("ann",))]
    assert plan.pipelines[0].rewriting.graphs[0].kind == "query grants"
    # eve, with no policy on Payroll, cannot get there by registering the text for herself
    assert client.post("/v1/queries", json={"id": "mine", "query": SALARIES},
                       headers=tokens.header("eve")).status_code == 422


def test_removing_the_only_policy_on_a_stream_never_widens_a_running_query(client, tokens, service):
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    shared = client.post("/v1/queries", json={"id": "low", "query": Q, "users": ["bob"]}, headers=tokens.header("root"))
    assert shared.status_code == 201 and service.server.registration("low").opens == ()
    client.post("/v1/grants", json={"query": "low", "user": "bob", "sign": "+"}, headers=tokens.header("root"))
    before = plan_of(service)
    assert {p.query.id for p in before.pipelines} == {own_id("bob", "q1"), "low"}
    assert all(g.policies == ("nurses_low",) for p in before.pipelines for g in p.rewriting.deployed)
    # The admin removes every policy on Readings: neither query may now see rows nurses_low withheld.
    put_catalog(client, tokens, CATALOG.split("policies:")[0])
    after = plan_of(service)
    assert after.pipelines == ()
    assert {(d.query, d.user) for d in after.denials} == {(own_id("bob", "q1"), "bob"), ("low", "bob")}


# -- 2. a revocation holds whatever id she registers next --------------------------------------------
def test_an_admins_revocation_of_an_own_query_holds_for_her_next_ids_until_lifted(client, tokens, service):
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    revoked = client.post("/v1/grants", json={"query": "q1", "user": "bob", "sign": "-", "ts": T},
                          headers=tokens.header("root"))
    assert revoked.status_code == 201, revoked.text
    assert revoked.json()["periods"] == [["1900-01-01T00:00:00Z", T]]
    # the same text, and another text over the same stream, under new ids
    for qid, text in (("q2", Q), ("q3", "SELECT sensor FROM Readings WHERE value > 0")):
        assert client.post("/v1/queries", json={"id": qid, "query": text},
                           headers=tokens.header("bob")).status_code == 201
        assert periods(service, own_id("bob", qid), "bob") == [("1900-01-01T00:00:00+00:00",
                                                                "2026-03-01T10:05:00+00:00")]
        shown = client.get(f"/v1/queries/{qid}", headers=tokens.header("bob")).json()
        assert shown["status"]["grants"] == [["1900-01-01T00:00:00Z", T]]
    # an admin lifts it by granting one of her own queries again: every one reopens
    lifted = client.post("/v1/grants", json={"query": "q2", "user": "bob", "sign": "+", "ts": "2026-03-01T11:00:00Z"},
                         headers=tokens.header("root"))
    assert lifted.status_code == 201
    assert periods(service, own_id("bob", "q3"), "bob")[-1] == ("2026-03-01T11:00:00+00:00", None)
    # another user's own queries are untouched
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    assert periods(service, own_id("ann", "q1"), "ann") == [("1900-01-01T00:00:00+00:00", None)]


def test_a_user_cannot_lift_her_own_revocation(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob"))
    client.post("/v1/grants", json={"query": "q1", "user": "bob", "sign": "-", "ts": T}, headers=tokens.header("root"))
    assert client.post("/v1/grants", json={"query": "q1", "user": "bob", "sign": "+"},
                       headers=tokens.header("bob")).status_code == 403
    client.delete("/v1/queries/q1", headers=tokens.header("bob"))
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    assert periods(service, own_id("bob", "q1"), "bob")[-1][1] is not None  # deleting and registering again: still


# -- 3. bound to one registration and one identity ------------------------------------------------------
def test_a_shared_query_registered_again_under_an_old_id_starts_with_no_grant(client, tokens, service):
    register = {"id": "shared1", "query": Q, "users": ["ann"]}
    assert client.post("/v1/queries", json=register, headers=tokens.header("root")).status_code == 201
    client.post("/v1/grants", json={"query": "shared1", "user": "ann", "sign": "+"}, headers=tokens.header("root"))
    assert periods(service, "shared1", "ann")
    assert client.delete("/v1/queries/shared1", headers=tokens.header("root")).status_code == 200
    other = {"id": "shared1", "query": "SELECT sensor, site FROM Readings", "users": ["ann"]}
    assert client.post("/v1/queries", json=other, headers=tokens.header("root")).status_code == 201
    assert periods(service, "shared1", "ann") == []
    grants = client.get("/v1/grants", headers=tokens.header("root")).json()["changes"]
    assert [c["live"] for c in grants] == [False]  # the old grant is in the log, bound to the old registration


def test_a_user_declared_again_is_a_new_identity(client, tokens, service):
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    shared = {"id": "shared1", "query": Q, "users": ["ann", "bob"]}
    assert client.post("/v1/queries", json=shared, headers=tokens.header("root")).status_code == 201
    client.post("/v1/grants", json={"query": "shared1", "user": "ann", "sign": "+"}, headers=tokens.header("root"))
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":99.0}'])
    without_ann = CATALOG.replace("  ann: {roles: [Doctor]}\n", "")
    put_catalog(client, tokens, without_ann)
    put_catalog(client, tokens, CATALOG)  # a new ann, who happens to have the same name
    assert client.get("/v1/queries", headers=tokens.header("ann")).status_code == 401  # the old token
    fresh = create_token(service.store.url, "ann", expires=timedelta(hours=1))
    header = {"Authorization": f"Bearer {fresh}"}
    assert [q["id"] for q in client.get("/v1/queries", headers=header).json()["queries"]] == ["shared1"]
    assert periods(service, "shared1", "ann") == []  # the old ann's grant is not hers
    assert periods(service, "shared1", "bob") == []
    again = client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=header)
    assert again.status_code == 201, again.text
    assert client.get("/v1/queries/q1/rows", headers=header).json()["rows"] == []  # not the old ann's rows


# -- 5. admins name a user's own query by the user and her id --------------------------------------------
def test_admins_address_own_queries_by_owner_and_public_id(client, tokens, service):
    for user in ("ann", "bob"):
        assert client.post("/v1/queries", json={"id": "q1", "query": Q},
                           headers=tokens.header(user)).status_code == 201
    revoked = client.post("/v1/grants", json={"query": "q1", "user": "bob", "sign": "-", "ts": T},
                          headers=tokens.header("root"))
    assert revoked.status_code == 201, revoked.text
    assert revoked.json() | {"periods": None} == {"query": "q1", "user": "bob", "sign": "-", "owner": "bob",
                                                   "periods": None}
    assert periods(service, own_id("ann", "q1"), "ann")[-1][1] is None  # ann's q1 is another query
    listing = client.get("/v1/queries", headers=tokens.header("root")).json()["queries"]
    assert sorted((q["id"], q["owner"]) for q in listing) == [("q1", "ann"), ("q1", "bob")]
    assert "u03" not in json.dumps(listing) and "internal" not in json.dumps(listing)
    shown = client.get("/v1/queries/q1", params={"owner": "bob"}, headers=tokens.header("root"))
    assert shown.status_code == 200 and shown.json()["owner"] == "bob"
    grants = client.get("/v1/grants", headers=tokens.header("root")).json()["changes"]
    assert "u03" not in json.dumps(grants)
    assert {(c.get("query"), c.get("owner"), c.get("stream")) for c in grants} >= {("q1", "bob", None),
                                                                                  (None, None, "Readings")}
    # a user cannot use the owner parameter to reach another's query
    assert client.get("/v1/queries/q1", params={"owner": "ann"}, headers=tokens.header("bob")).status_code == 404
    assert client.delete("/v1/queries/q1", params={"owner": "ann"}, headers=tokens.header("root")).status_code == 200
    assert client.get("/v1/queries/q1", headers=tokens.header("ann")).status_code == 404
    assert client.get("/v1/queries/q1", headers=tokens.header("bob")).status_code == 200
    audit = client.get("/v1/audit", headers=tokens.header("root")).json()["records"]
    assert "u03" not in json.dumps(audit)


def test_a_grant_naming_a_query_the_user_does_not_have_is_404(client, tokens, service):
    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    answer = client.post("/v1/grants", json={"query": "q1", "user": "bob", "sign": "+"}, headers=tokens.header("root"))
    assert answer.status_code == 404
    assert client.post("/v1/grants", json={"query": own_id("ann", "q1"), "user": "ann", "sign": "+"},
                       headers=tokens.header("root")).status_code == 404  # internal ids are not names


# -- 4. an SSE stream ends with its token, backlog or not --------------------------------------------------
class _Connected:
    async def is_disconnected(self) -> bool:
        return False


def test_an_sse_stream_with_a_backlog_ends_when_its_token_is_revoked(client, tokens, service):
    from streamwarden.catalog.identity import revoke_tokens

    client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    internal = own_id("ann", "q1")
    deliver(service, "ann", internal, 1, [json.dumps({"sensor": i}) for i in range(1200)])  # three pages
    header = tokens.header("ann")["Authorization"]
    principal = service.auth.principal(header)

    async def read() -> tuple[list[str], str]:
        events = app_module._events(service, internal, 0, _Connected(), header, principal, "q1")  # type: ignore[arg-type]
        seen: list[str] = []
        async for event in events:
            if isinstance(event, bytes):  # a page of rows, in one write
                seen += ["row"] * event.decode().count("event: row")
                revoke_tokens(service.store.url, "ann")  # the first page sent: the token is revoked now
                continue
            seen.append(event["event"])
            if event["event"] == "end":
                return seen, event["data"]
        return seen, ""

    seen, last = asyncio.run(read())
    assert seen == ["row"] * 500 + ["end"]
    assert "no longer valid" in last


def test_a_grant_to_a_user_the_shared_query_does_not_list_says_it_gives_nothing(client, tokens, service):
    shared = {"id": "shared1", "query": Q, "users": ["ann"]}
    assert client.post("/v1/queries", json=shared, headers=tokens.header("root")).status_code == 201
    answer = client.post("/v1/grants", json={"query": "shared1", "user": "bob", "sign": "+"},
                         headers=tokens.header("root"))
    assert answer.status_code == 201
    assert answer.json()["periods"] == [] and "not listed" in answer.json()["note"]
    assert plan_of(service).pipeline_of("shared1", "bob") is None


def test_deleting_a_query_takes_the_registration_lock(client, tokens, service, monkeypatch):
    """A registration of the same id cannot slip in between the removal and the cleanup of its
    rows and state (which would remove the new registration's)."""
    from streamwarden.service import queries

    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    held = []
    original = queries.QueryBook.forget

    def forget(book, entry, root):  # type: ignore[no-untyped-def]
        held.append(queries._registering.locked())
        return original(book, entry, root)

    monkeypatch.setattr(queries.QueryBook, "forget", forget)
    assert client.delete("/v1/queries/q1", headers=tokens.header("ann")).status_code == 200
    assert held == [True]
