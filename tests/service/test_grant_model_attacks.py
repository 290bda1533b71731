"""A review's attacks on the grant model (issue 24): ways around "deny by default" that the
first tests did not try, each written to fail on the code before its fix.

Without Spark, like tests/service/test_grant_model.py: what the network would deliver is read
from the access periods its terminal switches apply (:func:`access_periods`).
"""

from __future__ import annotations

from typing import Any


from streamwarden.catalog.registry import access_periods, own_id

from .conftest import Tokens

Q = "SELECT sensor, value FROM Readings"


def periods(service: Any, internal: str, user: str) -> list[tuple[str, str | None]]:
    query = service.server.registration(internal)
    assert query is not None, internal
    return [(a.isoformat(), b and b.isoformat()) for a, b in access_periods(service.server.changes(), query, user)]


def register(client: Any, tokens: Tokens, holder: str, body: dict[str, Any]) -> None:
    answer = client.post("/v1/queries", json=body, headers=tokens.header(holder))
    assert answer.status_code == 201, answer.text


def change(client: Any, tokens: Tokens, body: dict[str, Any]) -> Any:
    return client.post("/v1/grants", json=body, headers=tokens.header("root"))


# -- a revocation dated before 1900 ------------------------------------------------------------------
def test_a_revocation_dated_before_1900_still_closes_her_own_queries(client, tokens, service):
    """An admin revokes "from the beginning of time" (0001-01-01): an own query's grant starts in
    1900, so a revocation before it must not be outranked by that grant, on this query or her next."""
    register(client, tokens, "bob", {"id": "q1", "query": Q})
    revoked = change(client, tokens, {"query": "q1", "user": "bob", "sign": "-", "ts": "0001-01-01T00:00:00Z"})
    assert revoked.status_code == 201, revoked.text
    assert revoked.json()["periods"] == []
    assert periods(service, own_id("bob", "q1"), "bob") == []
    register(client, tokens, "bob", {"id": "q2", "query": Q})
    assert periods(service, own_id("bob", "q2"), "bob") == []


# -- an own query named like a shared one catches the admin's grant of the shared one -------------------
def test_an_admins_grant_of_a_shared_query_is_not_diverted_to_her_own_query_of_that_id(client, tokens, service):
    """bob's own queries over Readings are revoked. He registers an own query named like the shared
    one the admin is about to give him ("report"); the admin's grant of "report" must not land on
    his own query, where it would lift the revocation of every own query of his."""
    register(client, tokens, "bob", {"id": "q1", "query": Q})
    assert change(client, tokens, {"query": "q1", "user": "bob", "sign": "-"}).status_code == 201
    register(client, tokens, "bob", {"id": "report", "query": Q})
    register(client, tokens, "root", {"id": "report", "query": Q, "users": ["ann", "bob"]})
    granted = change(client, tokens, {"query": "report", "user": "bob", "sign": "+"})
    assert granted.status_code in (201, 409), granted.text
    assert periods(service, own_id("bob", "q1"), "bob")[-1][1] is not None  # still revoked
    assert periods(service, own_id("bob", "report"), "bob")[-1][1] is not None


# -- a store written before registrations and identities ------------------------------------------------
def _legacy_store(url: str, registered: list[tuple[str, list[str], str]],
                  changes: list[tuple[str, str, str, bool]]) -> None:
    """The tables as streamwarden wrote them before issue 24: no rid, owner, opens, incarnation or scope."""
    import json as json_
    from datetime import datetime, timezone

    from sqlalchemy import Boolean, Column, Integer, MetaData, String, Table, Text, create_engine, insert

    from streamwarden.catalog.store import UTCDateTime

    meta = MetaData()
    old_changes = Table("access_changes", meta, Column("seq", Integer, primary_key=True, autoincrement=True),
                        Column("ts", UTCDateTime(), nullable=False), Column("query", String, nullable=False),
                        Column("user", String, nullable=False), Column("grant", Boolean, nullable=False))
    old_registered = Table("registered_queries", meta, Column("id", String, primary_key=True),
                           Column("users", Text, nullable=False),
                           Column("registered_at", UTCDateTime(), nullable=False),
                           Column("query", Text), Column("level", String))
    engine = create_engine(url)
    meta.create_all(engine)
    now = datetime.now(timezone.utc)
    with engine.begin() as conn:
        for qid, users, text in registered:
            conn.execute(insert(old_registered).values(id=qid, users=json_.dumps(users), registered_at=now, query=text))
        for ts, query, user, grant in changes:
            conn.execute(insert(old_changes).values(ts=datetime.fromisoformat(ts), query=query, user=user, grant=grant))
    engine.dispose()


def _legacy(tmp_path: Any, catalog: str, registered: list[tuple[str, list[str], str]],
            changes: list[tuple[str, str, str, bool]]) -> Any:
    from streamwarden.catalog.authorization import AuthorizationServer
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.catalog.store import CatalogStore, sqlite_url

    url = sqlite_url(tmp_path / "legacy" / "store.db")
    CatalogStore(url).save(load_catalog_text(catalog, "catalog.yaml"))
    _legacy_store(url, registered, changes)
    return AuthorizationServer(url, tmp_path / "legacy-sps")  # opening it migrates it


def test_an_upgraded_store_binds_no_old_grant_to_a_later_registration_or_identity(tmp_path):
    """Before issue 24 a deleted query's grants stayed in the log under its id, and a removed user's
    under her name. After the upgrade, registering that id again, or declaring that name again,
    must start with nothing, as it does in a store written since."""
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.catalog.registry import RegisteredQuery

    from .conftest import CATALOG

    with_carl = CATALOG.replace("  root: {roles: []}\n", "  root: {roles: []}\n  carl: {roles: [Doctor]}\n")
    server = _legacy(tmp_path, CATALOG, [("other", ["ann"], Q)],
                     [("2026-03-01T10:00:00+00:00", "report", "ann", True),  # "report", deleted before the upgrade
                      ("2026-03-01T10:00:00+00:00", "other", "carl", True)])  # carl, removed before the upgrade
    server.register([RegisteredQuery("report", ("ann",), "SELECT sensor FROM Readings")])
    assert access_periods(server.changes(), server.registration("report"), "ann") == []
    server.register([RegisteredQuery("other", ("ann", "carl"), Q)], load_catalog_text(with_carl, "catalog.yaml"))
    assert access_periods(server.changes(), server.registration("other"), "carl") == []


def test_an_upgraded_store_fixes_what_its_shared_queries_open(tmp_path):
    """A shared query from before issue 24 opens, from the upgrade on, what it opened then: removing
    the only policy on its stream afterwards must not hand the stream to its grants."""
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.runtime.plan import plan_network

    from .conftest import CATALOG

    server = _legacy(tmp_path, CATALOG, [("low", ["bob"], Q)], [("2026-03-01T10:00:00+00:00", "low", "bob", True)])
    assert server.registration("low").opens == ()  # Readings had policies at the upgrade
    without_policies = load_catalog_text(CATALOG.split("policies:")[0], "catalog.yaml")
    server.store.save(without_policies)
    plan = plan_network(server.store.load(), server.registrations())
    assert plan.pipelines == ()  # nothing opens Readings to bob now


def test_an_upgraded_store_keeps_a_shared_query_with_an_own_shaped_id_shared(tmp_path):
    """`network register` accepted any id before issue 24. A shared query for ann and bob that an
    admin happened to call "u03eve_x" must not become eve's own query (hers to read and delete)."""
    from .conftest import CATALOG

    server = _legacy(tmp_path, CATALOG, [("u03eve_x", ["ann", "bob"], Q), ("u03eve_q1", ["eve"], Q)], [])
    assert server.registration("u03eve_x").owner is None
    assert server.registration("u03eve_q1").owner == "eve"  # the old service's own query of eve's


# -- a provider's token outlives its stream ----------------------------------------------------------
def test_a_stream_declared_again_does_not_take_its_predecessors_provider_tokens(client, tokens, service):
    """An admin removes Readings from the catalog (its providers' tokens stop working) and later
    declares a stream of that name again: the old providers must not write into the new one."""
    from .conftest import CATALOG

    readings = "  Readings:\n    schema: {ts: timestamp, sensor: int, site: string, value: double}\n"
    without = CATALOG.replace(readings, "")
    without = without.split("policies:")[0]
    for text in (without, CATALOG):
        answer = client.put("/v1/catalog", content=text.encode(), headers=tokens.header("root"))
        assert answer.status_code == 200, answer.text
    record = b'{"ts": "2026-03-01T10:00:00Z", "sensor": 1, "site": "x", "value": 1.0}\n'
    answer = client.post("/v1/streams/Readings/records", content=record, headers=tokens.header("readings"))
    assert answer.status_code == 401, answer.text


# -- one tenant, many pipelines --------------------------------------------------------------------------
def test_a_user_cannot_register_queries_without_bound(client, tokens, service):
    """Each own query is a pipeline of its own (a Spark streaming query, its micro-batches, the
    network's poll over it): a user who registers hundreds slows every micro-batch of everyone."""
    from streamwarden.service import queries
    from streamwarden.service.limits import RateLimit

    service.churn = RateLimit(100)  # the bound on queries held, not the rate of registering them (test_limits.py)
    MAX_OWN_QUERIES = getattr(queries, "MAX_OWN_QUERIES", 100)
    answers = [client.post("/v1/queries", json={"id": f"q{i}", "query": Q}, headers=tokens.header("ann")).status_code
               for i in range(MAX_OWN_QUERIES + 1)]
    assert answers == [201] * MAX_OWN_QUERIES + [422]
    assert client.delete("/v1/queries/q0", headers=tokens.header("ann")).status_code == 200
    assert client.post("/v1/queries", json={"id": "again", "query": Q}, headers=tokens.header("ann")).status_code == 201
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
