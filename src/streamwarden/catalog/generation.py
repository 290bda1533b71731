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
    >>> names.metadata.create_all(engine); watch_tables(engine, [names])
    True
    >>> before = generation(engine)
    >>> with engine.begin() as conn: _ = conn.execute(insert(names).values(name="ann"))
    >>> generation(engine) == before + 1
    True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from sqlalchemy import Column, Integer, MetaData, Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
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
_PG_FUNCTION = ("CREATE OR REPLACE FUNCTION streamwarden_generation_bump() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN {_BUMP}; RETURN NULL; END $$")


def is_versioned(table: Table) -> bool:
    """Does a change of ``table`` move the store's generation?"""
    return bool(table.info.get("generation"))


def watch_tables(engine: Engine, tables: Iterable[Table]) -> bool:
    """Make every insert, update or delete of ``tables`` move the generation (the counter and
    the triggers are created if missing; idempotent, safe for several processes at once on
    PostgreSQL, whose callers hold :func:`~streamwarden.catalog.store.create_tables`'s lock).
    False on a database without triggers here: its caches never keep anything."""
    if engine.dialect.name not in _SUPPORTED:
        return False
    with engine.begin() as conn:
        install(conn, list(tables))
    return True


def install(conn: Connection, tables: list[Table]) -> None:
    """:func:`watch_tables` inside the caller's transaction (a no-op on an unsupported database)."""
    dialect = conn.dialect.name
    if dialect not in _SUPPORTED or not tables:
        return
    conn.execute(CreateTable(_generation, if_not_exists=True))
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    conn.execute(insert(_generation).values(id=1, n=0).on_conflict_do_nothing(index_elements=["id"]))
    if dialect == "postgresql":
        conn.execute(text(_PG_FUNCTION))
    for table in tables:
        name = f"streamwarden_generation_{table.name}"
        if dialect == "sqlite":
            for event in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(text(f'CREATE TRIGGER IF NOT EXISTS "{name}_{event.lower()}" AFTER {event} '
                                  f'ON "{table.name}" BEGIN {_BUMP}; END'))
        elif conn.execute(text("SELECT 1 FROM pg_trigger WHERE tgname = :name AND tgrelid = CAST(:table AS regclass)"),
                          {"name": name, "table": table.name}).first() is None:
            conn.execute(text(f'CREATE TRIGGER "{name}" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE '
                              f'ON "{table.name}" FOR EACH STATEMENT EXECUTE FUNCTION streamwarden_generation_bump()'))


def generation(engine: Engine) -> int | None:
    """The store's generation now (None: this database keeps none, or it has no counter yet;
    a store that cannot be read says so to whoever computes the answer next)."""
    if engine.dialect.name not in _SUPPORTED:
        return None
    # the driver's own cursor on a pooled connection: a third of SQLAlchemy's cost for a read
    # every request makes (a pooled connection is rolled back when it returns to the pool)
    try:
        connection = engine.raw_connection()
    except DBAPIError:
        return None
    try:
        cursor = connection.cursor()
        try:
            cursor.execute(_READ)
            row = cursor.fetchone()
        finally:
            cursor.close()
    except engine.dialect.loaded_dbapi.Error:
        return None
    finally:
        connection.close()
    return int(row[0]) if row is not None else None


_READ = "SELECT n FROM store_generation WHERE id = 1"


class GenerationCache(Generic[K, V]):
    """Answers computed from the store, kept while its generation stays where it was when they
    were computed (at most ``limit`` of them, the least recently used dropped first).

    ``get(key, compute)`` reads the generation (one query) and returns the kept answer, or
    ``compute()``'s, which it keeps unless ``compute`` returned None (misses are not kept: a
    flood of made-up keys cannot fill the cache). The generation is read *before* computing,
    so an answer computed while the store changed is kept under the older generation and never
    served again. Thread-safe.

        >>> import tempfile, os
        >>> from sqlalchemy import create_engine
        >>> engine = create_engine("sqlite:///" + os.path.join(tempfile.mkdtemp(), "g.db"))
        >>> cache: GenerationCache[str, int] = GenerationCache(engine)
        >>> cache.get("a", lambda: 1), cache.get("a", lambda: 2)  # no counter yet: nothing is kept
        (1, 2)
    """

    def __init__(self, engine: Engine, limit: int = 10_000):
        self.engine = engine
        self.limit = limit
        self._lock = threading.Lock()
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._generation: int | None = None

    def get(self, key: K, compute: Callable[[], V | None]) -> V | None:
        now = generation(self.engine)
        if now is None:
            return compute()
        with self._lock:
            if self._generation is not None and now < self._generation:
                return compute()  # read before a newer one another thread saw: keep nothing
            if now != self._generation:
                self._kept.clear()
                self._generation = now
            elif key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = compute()
        if value is not None:
            with self._lock:
                if self._generation == now:  # else the store moved on meanwhile: keep nothing
                    self._kept[key] = value
                    if len(self._kept) > self.limit:
                        self._kept.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._generation = None


__all__ = ["GenerationCache", "generation", "install", "is_versioned", "watch_tables"]
