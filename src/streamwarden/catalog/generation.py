"""The store's generation: one number that moves whenever a table a service caches from changes.

A service answers each request from what the store says now: who a token speaks for (the
token's row, the user's identity, the catalog's users) and which query a caller names (the
registrations). Reading all of that for every request is most of the request's cost, yet it
changes only when someone revokes a token, replaces the catalog or registers a query — from
this process or from another (``streamwarden token revoke`` on the same store). So the store
keeps a *generation*: tables marked ``info={"generation": True}`` carry triggers that add one
to a single-row counter in the same transaction as any insert, update or delete, whatever
process or tool writes them. A cache reads the counter first (one primary-key read) and keeps
its answers only while it has not moved: a revocation committed before a request starts is
seen by that request, exactly as without a cache.

Triggers are SQL of SQLite and PostgreSQL; on another database :func:`generation` is None
and :class:`GenerationCache` computes every answer afresh (correct, only slower).

    >>> import tempfile, os
    >>> from sqlalchemy import Column, MetaData, String, Table, create_engine, insert
    >>> engine = create_engine("sqlite:///" + os.path.join(tempfile.mkdtemp(), "g.db"))
    >>> names = Table("names", MetaData(), Column("name", String, primary_key=True), info={"generation": True})
    >>> names.metadata.create_all(engine)
    >>> with engine.begin() as conn: install(conn, [names])
    >>> before = generation(engine)
    >>> with engine.begin() as conn: _ = conn.execute(insert(names).values(name="ann"))
    >>> generation(engine) == before + 1
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sqlalchemy import Column, Integer, MetaData, Table, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.schema import CreateTable

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_metadata = MetaData()
_generation = Table(
    "store_generation", _metadata,
    Column("id", Integer, primary_key=True),  # always 1: one counter for the store
    Column("n", Integer, nullable=False),
)
_SUPPORTED = frozenset({"sqlite", "postgresql"})
_BUMP = "UPDATE store_generation SET n = n + 1 WHERE id = 1"
# SET search_path FROM CURRENT: the counter the function bumps is the one of the schema it was
# made in, whatever search path the session that writes a watched table has.
_PG_FUNCTION = ("CREATE OR REPLACE FUNCTION streamwarden_generation_bump() RETURNS trigger LANGUAGE plpgsql "
                f"SET search_path FROM CURRENT AS $$ BEGIN {_BUMP}; RETURN NULL; END $$")


def is_versioned(table: Table) -> bool:
    """Does a change of ``table`` move the store's generation?"""
    return bool(table.info.get("generation"))


def install(conn: Connection, tables: list[Table]) -> None:
    """Make every insert, update or delete of ``tables`` move the generation, in the caller's
    transaction (the counter and the triggers created if missing; idempotent, and safe for
    several processes at once on PostgreSQL under :func:`~streamwarden.catalog.store.create_tables`'s
    lock). A no-op on a database without triggers here: its caches never keep anything. What
    exists already is only looked at: a store that has its counter and triggers is opened
    without a write (a read-only store, a role without DDL rights, a writer holding the lock)."""
    dialect = conn.dialect.name
    if dialect not in _SUPPORTED or not tables:
        return
    conn.execute(CreateTable(_generation, if_not_exists=True))
    if conn.execute(select(_generation.c.n).where(_generation.c.id == 1)).first() is None:
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        conn.execute(insert(_generation).values(id=1, n=0).on_conflict_do_nothing(index_elements=["id"]))
    if dialect == "sqlite":
        present = {row[0] for row in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))}
        for table in tables:
            for event in ("INSERT", "UPDATE", "DELETE"):
                name = f"streamwarden_generation_{table.name}_{event.lower()}"
                if name not in present:
                    conn.execute(text(f'CREATE TRIGGER IF NOT EXISTS "{name}" AFTER {event} ON "{table.name}" '
                                      f'BEGIN {_BUMP}; END'))
        return
    if conn.execute(text("SELECT 1 FROM pg_proc WHERE proname = 'streamwarden_generation_bump' "
                         "AND pronamespace = CAST(current_schema() AS regnamespace)")).first() is None:
        conn.execute(text(_PG_FUNCTION))
    for table in tables:
        name = f"streamwarden_generation_{table.name}"
        if conn.execute(text("SELECT 1 FROM pg_trigger WHERE tgname = :name AND tgrelid = CAST(:table AS regclass)"),
                        {"name": name, "table": table.name}).first() is None:
            conn.execute(text(f'CREATE TRIGGER "{name}" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE '
                              f'ON "{table.name}" FOR EACH STATEMENT EXECUTE FUNCTION streamwarden_generation_bump()'))


def generation(engine: Engine) -> int | None:
    """The store's generation now (None: this database keeps none, it has no counter yet, or
    it cannot be read: whoever computes the answer next says why). A one-off read; a cache
    reads through a :class:`Counter` of its own."""
    counter = Counter(engine)
    try:
        return counter.read()
    finally:
        counter.close()


class Counter:
    """Reads of the generation on a connection of their own, taken out of the engine's pool at
    the first read (a service's first request): later reads never wait for a pooled connection
    that busy requests hold (the pool waits up to 30 s),
    and costs one driver call (8 us on SQLite; one round trip on PostgreSQL, in autocommit so
    that no transaction stays open between reads). A failed read closes the connection and
    says None; the next read connects again. Thread-safe (one read at a time)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._lock = threading.Lock()
        self._connection: DBAPIConnection | None = None

    def read(self) -> int | None:
        if self.engine.dialect.name not in _SUPPORTED:
            return None
        with self._lock:
            try:
                if self._connection is None:
                    self._connection = _own_connection(self.engine)
                cursor = self._connection.cursor()
                try:
                    cursor.execute(_READ)
                    row = cursor.fetchone()
                finally:
                    cursor.close()
            except Exception:  # the driver's errors, a closed server, a missing counter: nothing is kept
                self.close()
                return None
        return int(row[0]) if row is not None else None

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:  # already gone
                pass


def _own_connection(engine: Engine) -> DBAPIConnection:
    """A driver connection made as the engine makes them (its settings applied), then taken out
    of its pool for good."""
    proxied = engine.raw_connection()
    proxied.detach()
    connection = proxied.dbapi_connection
    assert connection is not None
    if engine.dialect.name == "postgresql":
        connection.autocommit = True  # psycopg and psycopg2 both have it
    return connection


_READ = "SELECT n FROM store_generation WHERE id = 1"


class GenerationCache(Generic[K, V]):
    """Answers computed from the store, kept while its generation stays where it was when they
    were computed (at most ``limit`` of them, the least recently used dropped first).

    ``get(key, compute)`` reads the generation (one query) and returns the kept answer, or
    ``compute()``'s, which it keeps unless ``compute`` returned None (misses are not kept: a
    flood of made-up keys cannot fill the cache). The generation is read *before* computing,
    so an answer computed while the store changed is kept under the older generation and never
    served again. Any other generation than the kept one, lower included (a store restored
    from a backup, or made again), drops everything kept. :meth:`peek` answers from what is
    kept only, for a caller that must not wait for ``compute`` (an event loop). Thread-safe.

        >>> import tempfile, os
        >>> from sqlalchemy import create_engine
        >>> engine = create_engine("sqlite:///" + os.path.join(tempfile.mkdtemp(), "g.db"))
        >>> cache: GenerationCache[str, int] = GenerationCache(engine)
        >>> cache.get("a", lambda: 1), cache.get("a", lambda: 2)  # no counter yet: nothing is kept
        (1, 2)
    """

    def __init__(self, engine: Engine, limit: int = 10_000):
        self.limit = limit
        self._counter = Counter(engine)
        self._lock = threading.Lock()
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._generation: int | None = None

    def get(self, key: K, compute: Callable[[], V | None]) -> V | None:
        now = self._counter.read()
        found = self._kept_at(now, key)
        if found is not None:
            return found
        value = compute()
        if value is not None and now is not None:
            with self._lock:
                if self._generation == now:  # else the store moved on meanwhile: keep nothing
                    self._kept[key] = value
                    if len(self._kept) > self.limit:
                        self._kept.popitem(last=False)
        return value

    def peek(self, key: K) -> V | None:
        """The answer kept for ``key`` if the generation still stands (one read of it), else None:
        :meth:`get` would compute it."""
        return self._kept_at(self._counter.read(), key)

    def _kept_at(self, now: int | None, key: K) -> V | None:
        with self._lock:
            if now != self._generation:
                self._kept.clear()
                self._generation = now
                return None
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found


__all__ = ["Counter", "GenerationCache", "generation", "install", "is_versioned"]
