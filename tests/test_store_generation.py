"""The store's generation (catalog/generation.py): every write of a watched table moves it, on
SQLite and PostgreSQL, and a store made before it gets it when opened."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.generation import generation
from streamwarden.catalog.identity import create_token, revoke_tokens
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore

CATALOG = "streams: {S: {schema: {ts: timestamp}}}\nusers: {ann: {roles: []}, bob: {roles: []}}\n"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    url = request.getfixturevalue("pg_store_url") if request.param == "postgres" else f"sqlite:///{tmp_path / 's.db'}"
    _save(url, CATALOG)
    return url


def _save(store_url: str, text: str) -> None:
    store = CatalogStore(store_url)
    store.save(load_catalog_text(text, "catalog.yaml"))
    store.engine.dispose()


def test_the_generation_moves_with_every_write_of_a_watched_table(store_url):
    engine = CatalogStore(store_url).engine
    seen = [generation(engine)]
    token = create_token(store_url, "ann")
    seen.append(generation(engine))
    revoke_tokens(store_url, "ann")
    seen.append(generation(engine))
    AuthorizationServer(store_url).register([])  # nothing registered: nothing written, nothing moves
    seen.append(generation(engine))
    _save(store_url, CATALOG.replace(", bob: {roles: []}", ""))
    seen.append(generation(engine))
    assert token and seen[0] is not None
    assert seen[0] < seen[1] < seen[2] == seen[3] < seen[4]
    engine.dispose()


def test_a_store_made_before_the_generation_gets_it_when_opened(tmp_path):
    store_url = f"sqlite:///{tmp_path / 'old.db'}"
    _save(store_url, CATALOG)
    legacy = create_engine(store_url)
    with legacy.begin() as conn:
        conn.exec_driver_sql("DROP TABLE store_generation")
        for (name,) in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'").all():
            conn.exec_driver_sql(f'DROP TRIGGER "{name}"')
    assert generation(legacy) is None
    legacy.dispose()
    store = CatalogStore(store_url)
    assert generation(store.engine) is not None  # opening the store put the counter and its triggers back
    before = generation(store.engine)
    create_token(store_url, "bob")  # the token table, opened afresh, has its trigger back too
    assert generation(store.engine) > before


def test_a_store_with_its_counter_and_triggers_opens_without_a_write(tmp_path):
    """A read-only store (or a writer holding the lock) must still open: what exists is looked at only."""
    from sqlalchemy import event

    from streamwarden.catalog.store import _metadata, create_tables

    url = f"sqlite:///{tmp_path / 's.db'}"
    _save(url, CATALOG)
    engine = create_engine(url)
    event.listen(engine, "connect", lambda connection, _: connection.execute("PRAGMA query_only = 1"))
    create_tables(engine, _metadata)  # raises "attempt to write a readonly database" if it wrote
    assert generation(engine) is not None
    engine.dispose()


def test_the_counter_is_read_outside_the_pool(store_url):
    """Requests that hold every pooled connection (a burst of slow routes) do not make the counter's
    read wait for one: it has a connection of its own."""
    import threading

    from streamwarden.catalog.generation import GenerationCache

    store = CatalogStore(store_url)
    engine = store.engine
    cache: GenerationCache[str, int] = GenerationCache(engine)
    assert cache.peek("k") is None  # its first read takes its connection (a service's first request)
    held = []
    try:
        for _ in range(engine.pool.size() + engine.pool._max_overflow):  # type: ignore[attr-defined]
            held.append(engine.raw_connection())
        answers = []
        reader = threading.Thread(target=lambda: answers.append((cache.get("k", lambda: 1), cache.peek("k"))))
        reader.start()
        reader.join(timeout=10)
        assert answers == [(1, 1)], "the read waited for the pool"
    finally:
        for connection in held:
            connection.close()
        engine.dispose()


def test_a_counter_that_goes_back_drops_what_was_kept(tmp_path):
    """A store restored from a backup, or made again, under a running service: its counter is lower
    than the one the answers were kept under, and may climb back to it; nothing kept survives."""
    from streamwarden.catalog.generation import GenerationCache

    url = f"sqlite:///{tmp_path / 's.db'}"
    _save(url, CATALOG)
    engine = CatalogStore(url).engine
    cache: GenerationCache[str, str] = GenerationCache(engine)
    assert cache.get("token", lambda: "ann") == "ann"
    kept_at = generation(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE store_generation SET n = n - 1")  # restored: an older counter
    assert cache.peek("token") is None
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE store_generation SET n = n + 1")  # and back to where it was
    assert generation(engine) == kept_at
    assert cache.get("token", lambda: "recomputed") == "recomputed"
    engine.dispose()
