"""The service keeps who a token speaks for and which query a caller names while the store's
generation stays (catalog/generation.py): every change that ends an answer, made from another
connection as the command line would make it, is seen by the very next request.

The attacks: a token revoked (all of a user's, or one by id), a user removed from the catalog,
removed and declared again (a new identity), a provider's stream removed, a query unregistered
by the command line; a token that expires while it is kept; made-up tokens that would fill the
cache; an answer computed while the store changed, kept under an older generation.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone

import pytest

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.generation import GenerationCache, generation
from streamwarden.catalog.identity import create_token, list_tokens, revoke_token, revoke_tokens
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import own_id
from streamwarden.catalog.store import CatalogStore
from streamwarden.service.auth import Authenticator

from .conftest import CATALOG, deliver

pytestmark = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
Q = "SELECT sensor, value FROM Readings"
WITHOUT_READINGS = """\
streams:
  Vitals: {schema: {ts: timestamp, patient: int, ward: string, pulse: int}, key: patient, punctuated_by: patient}
roles: {Doctor: {}, Nurse: {}, Analyst: {}}
users: {ann: {roles: [Doctor]}, bob: {roles: [Nurse]}, eve: {roles: [Analyst]}, root: {roles: []}}
"""


def _save(store_url: str, text: str) -> None:
    store = CatalogStore(store_url)  # an engine of its own: another process's writes, as far as the service knows
    store.save(load_catalog_text(text, "catalog.yaml"))
    store.engine.dispose()


def _revoke_all(store_url: str, tokens) -> None:
    revoke_tokens(store_url, "bob")


def _revoke_one(store_url: str, tokens) -> None:
    (info,) = [t for t in list_tokens(store_url) if t.kind == "user" and t.name == "bob"]
    assert revoke_token(store_url, info.id)


def _remove_user(store_url: str, tokens) -> None:
    _save(store_url, CATALOG.replace("  bob: {roles: [Nurse]}\n", ""))


def _declare_again(store_url: str, tokens) -> None:
    _remove_user(store_url, tokens)
    _save(store_url, CATALOG)  # bob is back, a new identity: his old token is not his


@pytest.mark.parametrize("change", [_revoke_all, _revoke_one, _remove_user, _declare_again])
def test_a_change_that_ends_a_kept_token_is_seen_by_the_next_request(client, tokens, store_url, change):
    for _ in range(2):  # the second answer is the kept one
        assert client.get("/v1/me", headers=tokens.header("bob")).status_code == 200
    change(store_url, tokens)
    assert client.get("/v1/me", headers=tokens.header("bob")).status_code == 401
    assert client.get("/v1/me", headers=tokens.header("ann")).status_code == 200  # others keep theirs


def test_a_providers_token_ends_with_its_stream(client, tokens, store_url):
    record = b'{"ts": "2026-01-01T00:00:00Z", "sensor": 1, "site": "a", "value": 1.0}\n'
    for _ in range(2):
        assert client.get("/v1/me", headers=tokens.header("readings")).status_code == 200
    _save(store_url, WITHOUT_READINGS)
    assert client.get("/v1/me", headers=tokens.header("readings")).status_code == 401
    assert client.post("/v1/streams/Readings/records", content=record,
                       headers=tokens.header("readings")).status_code == 401


def test_a_query_unregistered_elsewhere_is_not_found_at_once(client, tokens, service, store_url):
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":2.0}'])
    for _ in range(2):
        assert client.get("/v1/queries/q1/rows", headers=tokens.header("ann")).status_code == 200
    elsewhere = AuthorizationServer(store_url)
    elsewhere.unregister(own_id("ann", "q1"))
    elsewhere.store.engine.dispose()
    answer = client.get("/v1/queries/q1/rows", headers=tokens.header("ann"))
    assert answer.status_code == 404 and "you have no query" in answer.json()["error"]


def test_a_kept_token_expires_on_time(service, store_url):
    token = create_token(store_url, "ann", expires=timedelta(minutes=5))
    now = [datetime.now(timezone.utc)]
    auth = Authenticator(service.store, clock=lambda: now[0])
    assert auth.principal(f"Bearer {token}").name == "ann"
    assert auth.principal(f"Bearer {token}").name == "ann"  # kept
    now[0] += timedelta(minutes=5)
    assert auth.principal(f"Bearer {token}") is None  # the store did not change: the clock did


def test_made_up_tokens_are_not_kept(service, tokens):
    auth = Authenticator(service.store)
    for _ in range(200):
        assert auth.principal(f"Bearer swt_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}") is None
    assert auth.principal(f"Bearer {tokens['ann']}").name == "ann"
    assert len(auth._stored._kept) == 1  # only what a real token proved


def test_an_answer_computed_while_the_store_changed_is_not_kept(service, store_url):
    cache: GenerationCache[str, int] = GenerationCache(service.store.engine)
    before = generation(service.store.engine)

    def compute_while_revoking() -> int:
        revoke_tokens(store_url, "eve")  # the store moves on while the answer is computed
        return 1

    assert cache.get("k", compute_while_revoking) == 1
    assert generation(service.store.engine) > before
    assert cache.get("k", lambda: 2) == 2  # recomputed: the first answer was kept under the older generation
    assert cache.get("k", lambda: 3) == 2  # and this one is kept


def test_only_a_kept_store_token_is_answered_on_the_loop(service, tokens):
    """Authenticator.kept answers from memory only: a token not kept yet, an expired one and a JWT
    (whose issuer's keys may have to be fetched) are left to principal(), off the event loop."""
    auth = service.auth
    header = f"Bearer {tokens['ann']}"
    assert auth.kept(header) is None  # not asked yet
    assert auth.principal(header).name == "ann"
    assert auth.kept(header).name == "ann"
    assert auth.kept("Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2ln") is None
    assert auth.kept(None) is None and auth.kept("Basic abc") is None


def test_a_shared_query_is_kept_once_for_all_its_users(client, tokens, service):
    """The query lookups are kept by registration, not by caller: a query shared with 10,000 users
    is one object, however many of them poll it."""
    users = ["ann", "bob", "eve"]
    shared = client.post("/v1/queries", json={"id": "wide", "query": Q, "users": users}, headers=tokens.header("root"))
    assert shared.status_code == 201, shared.text
    found = [service.book.find(service.auth.principal(f"Bearer {tokens[u]}"), "wide") for u in users]
    assert len({id(entry.registered) for entry in found}) == 1
    kept = [service.book.find_kept(service.auth.principal(f"Bearer {tokens[u]}"), "wide") for u in users]
    assert all(entry is not None and entry.registered is found[0].registered for entry in kept)


def test_a_delivery_in_this_process_wakes_the_streams_of_that_user_and_query_only(service):
    """SSE streams wait for their user's deliveries (service/wakeups.py), not for their next look;
    the service listens only while a stream waits."""
    import asyncio

    from streamwarden.runtime import deliveries

    async def run() -> None:
        before = len(deliveries._listeners)
        hers = service.wakeups.watch("ann", own_id("ann", "q1"))
        his = service.wakeups.watch("bob", own_id("ann", "q1"))
        assert len(deliveries._listeners) == before + 1
        await asyncio.to_thread(deliver, service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1}'])
        await asyncio.wait_for(hers.wait(), timeout=10)  # woken, with no look due
        assert not his.is_set()
        service.wakeups.unwatch("ann", own_id("ann", "q1"), hers)
        service.wakeups.unwatch("bob", own_id("ann", "q1"), his)
        assert service.wakeups.watching() == 0 and len(deliveries._listeners) == before

    asyncio.run(run())
