"""Persistent catalog store (SQLite by default, any SQLAlchemy URL otherwise).

The store keeps the validated catalog text, one row per policy (for inspection by other
tools), and the *live* action table. Running queries read actions from here at every
micro-batch, so ``store.set_action("a", start=...)`` takes effect without re-registering
anything.

**Live values survive a reload.** :meth:`CatalogStore.save` (what ``streamwarden check``
does) replaces the catalog text and the policies, but the action table is live state:
an action already in the store keeps its current start, end and target (set by
``streamwarden action`` while queries run), an action the file newly declares is added
with the file's values, and an action the file no longer declares is dropped. Only
``reset_actions=True`` (``check --reset-actions``) puts the file's values back.

**Users are identities, not names.** Each user the stored catalog declares has an
*incarnation*: a random id given when the user first appears in a saved catalog and
dropped when a saved catalog no longer declares them. A user declared again later is a
new identity with a new incarnation, and everything bound to the old one — tokens,
grants, own queries, delivered rows — no longer applies to her
(:meth:`CatalogStore.incarnations`).

**Changes need a store that exists and names that do.** :meth:`CatalogStore.existing`
opens a store for a command that changes live state and refuses when there is none
(it never creates one: a command run from another folder would silently change a new,
empty store), and :meth:`set_action` refuses an action the stored catalog does not
declare. The default store is ``sqlite:///.streamwarden/catalog.db``, relative to the
working directory, unless ``STREAMWARDEN_STORE`` names another (:func:`default_store`).

    >>> import tempfile, os
    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> store = CatalogStore(url)
    >>> text = "streams: {S: {schema: {ts: timestamp}}}\\nactions: {a: {target: 5}}"
    >>> store.save(load_catalog_text(text)).added
    ('a',)
    >>> store.set_action("a", target=7.0)
    >>> store.save(load_catalog_text(text)).kept, store.actions()["a"].target   # a reload keeps the live value
    (('a',), 7.0)
    >>> store.set_action("b", target=1.0)
    Traceback (most recent call last):
    streamwarden.catalog.store.UnknownName: unknown action 'b': the stored catalog declares a
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timezone
from pathlib import Path
from typing import overload

from sqlalchemy import (Column, DateTime, Float, MetaData, String, Table, Text, TypeDecorator, create_engine, delete,
                        event, insert, inspect, select, text, update)
from sqlalchemy.engine import Connection, Dialect, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.schema import CreateTable

from streamwarden.catalog.changes import OPERATOR, Actor, audited
from streamwarden.catalog.diff import diff_catalogs
from streamwarden.catalog.generation import install as install_generation
from streamwarden.catalog.generation import is_versioned
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Action, Catalog
from streamwarden.plan.expr import format_timestamp
from streamwarden.errors import StreamwardenError, UsageError
from streamwarden.names import PRIVATE_FILE, private_dir

DEFAULT_STORE = "sqlite:///.streamwarden/catalog.db"
STORE_ENV = "STREAMWARDEN_STORE"
STORE_HELP = (f"SQLAlchemy URL of the store, e.g. sqlite:///path/catalog.db (default: ${STORE_ENV} if set, else "
              f"{DEFAULT_STORE}, relative to the working directory)")


def default_store() -> str:
    """``$STREAMWARDEN_STORE`` when set, else :data:`DEFAULT_STORE` (relative to the working directory)."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


class NoStore(StreamwardenError):
    """A command that changes live state named a store that does not exist (or holds no catalog)."""


class UnknownName(StreamwardenError):
    """A change names an action, user or query the store does not know."""


@dataclass(frozen=True)
class ActionChanges:
    """What :meth:`CatalogStore.save` did to the live action table."""

    kept: tuple[str, ...] = ()  # already live: their current values stay
    added: tuple[str, ...] = ()  # newly declared: the file's values
    dropped: tuple[str, ...] = ()  # no longer declared: removed
    reset: tuple[str, ...] = ()  # reset_actions=True: the file's values replace the live ones


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp column that holds UTC: stored converted to UTC (a naive value taken as
    UTC), read back aware, in UTC. Each backend alone gets this wrong in its own way:
    SQLite keeps no offset (it would store an aware time's wall clock, so 11:00+01:00 came
    back as 11:00 UTC), PostgreSQL returns its session's time zone."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return _utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return _utc(value)


_metadata = MetaData()
_sources = Table(
    "catalog_source", _metadata,
    Column("name", String, primary_key=True),
    Column("text", Text, nullable=False),
    Column("loaded_at", UTCDateTime(), nullable=False),
    info={"generation": True},  # a service caches who tokens speak for: see catalog/generation.py
)
_policies = Table(
    "policies", _metadata,
    Column("id", String, primary_key=True),
    Column("subject", String, nullable=False),
    Column("streams", Text, nullable=False),
    Column("attributes", Text, nullable=False),
    Column("privilege", String, nullable=False),
    Column("where_text", Text),
    Column("time", Text),
    Column("window", Text),
)
_actions = Table(
    "actions", _metadata,
    Column("name", String, primary_key=True),
    Column("start", UTCDateTime()),
    Column("end", UTCDateTime()),
    Column("target", Float),
)


_identities = Table(
    "user_identities", _metadata,
    Column("user", String, primary_key=True),
    Column("incarnation", String(16), nullable=False),  # random: a user declared again never gets an old one back
    Column("since", UTCDateTime(), nullable=False),
    info={"generation": True},
)


_stream_identities = Table(
    "stream_identities", _metadata,
    Column("stream", String, primary_key=True),
    Column("incarnation", String(16), nullable=False),  # a stream declared again: its providers' tokens are not its
    Column("since", UTCDateTime(), nullable=False),
    info={"generation": True},
)


@lru_cache(maxsize=4)
def _parsed(text: str, name: str) -> Catalog:
    """A stored catalog's text, validated once per text (a service loads it on every request; a
    network's driver asks for its users and streams as often: one key, the row's, for all)."""
    return load_catalog_text(text, name)


def _sqlite_settings(connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
    """A SQLite store in write-ahead-log mode: the network reading the store at every
    micro-batch and the service's requests writing to it no longer wait for each other (a
    writer still waits for a writer, up to 30 s). Durable as before: each commit is synced."""
    cursor = connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=FULL")
    finally:
        cursor.close()


def sqlite_url(path: str | Path) -> str:
    return f"sqlite:///{Path(path).resolve()}"


def check_store_url(url: str) -> None:
    """Raise :class:`~streamwarden.errors.UsageError` (exit 2) unless ``url`` is a SQLAlchemy URL
    of a database SQLAlchemy knows: a mistyped ``--store`` is the caller's error, one line, not
    an unexpected failure with SQLAlchemy's words.

        >>> check_store_url("sqlite:///tmp/catalog.db")
        >>> check_store_url("notaurl")
        Traceback (most recent call last):
        ...
        streamwarden.errors.UsageError: --store 'notaurl' is not a database URL (examples: sqlite:///path/catalog.db, postgresql+psycopg://user@host/db)
    """
    shown = url if len(url) <= 80 else url[:77] + "..."
    try:
        make_url(url).get_dialect()
    except (NoSuchModuleError, ImportError):  # NoSuchModuleError is an ArgumentError: first
        raise UsageError(f"--store {shown!r} names a database SQLAlchemy has no driver for ({_URL_EXAMPLES})") from None
    except ArgumentError:
        raise UsageError(f"--store {shown!r} is not a database URL ({_URL_EXAMPLES})") from None


_URL_EXAMPLES = "examples: sqlite:///path/catalog.db, postgresql+psycopg://user@host/db"


# Any constant: the key of the PostgreSQL advisory lock that serialises the store's CREATE TABLEs.
_DDL_LOCK_KEY = 0x5357_4344  # "SWCD"


def create_tables(engine: Engine, metadata: MetaData) -> None:
    """``metadata``'s tables, if missing. IF NOT EXISTS, not check-then-create: several
    threads or processes may open a store for the first time at once. Tables marked
    ``info={"generation": True}`` get their triggers (:mod:`streamwarden.catalog.generation`),
    a store written before them included. On PostgreSQL that
    is not enough (two sessions' CREATE TABLE IF NOT EXISTS can still collide in its system
    catalog, a unique violation), so there the creates also wait for a transaction-scoped
    advisory lock."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _DDL_LOCK_KEY})
        for table in metadata.sorted_tables:
            conn.execute(CreateTable(table, if_not_exists=True))
        install_generation(conn, [t for t in metadata.sorted_tables if is_versioned(t)])


def add_missing_columns(engine: Engine, table: Table, names: tuple[str, ...]) -> list[str]:
    """Add the columns ``names`` of ``table`` that a store written by an older version lacks
    (as nullable TEXT); returns those added, so the caller can fill them in once."""
    present = {c["name"] for c in inspect(engine).get_columns(table.name)}
    missing = [name for name in names if name not in present]
    with engine.begin() as conn:
        for name in missing:
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {name} TEXT"))
    return missing


class CatalogStore:
    """A catalog database. ``url`` is a SQLAlchemy URL (default: :func:`default_store`);
    SQLite folders are created, private to their owner, unless ``create=False``. ``actor``:
    who the changes made through this handle are recorded under in the audit trail
    (:mod:`streamwarden.catalog.changes`: by default the operator; None records nothing)."""

    def __init__(self, url: str | None = None, *, create: bool = True, actor: Actor = OPERATOR):
        self.actor = actor
        url = url or default_store()
        check_store_url(url)
        self.path: Path | None = None  # the SQLite file, if it is one
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            self.path = Path(url.removeprefix("sqlite:///")).resolve()
            if create:
                private_dir(self.path.parent)
            url = sqlite_url(self.path)  # absolute, so Spark's Python workers find the same file
        self.url = url
        self._engine: Engine | None = None

    @classmethod
    def existing(cls, url: str | None = None, *, actor: Actor = OPERATOR) -> "CatalogStore":
        """The store at ``url`` for a command that changes live state: it must exist and hold a
        catalog; raises :class:`NoStore` (and creates nothing) otherwise."""
        store = cls(url, create=False, actor=actor)
        if not store.has_catalog():
            raise NoStore(f"no store at {store.url}: load a catalog first with "
                          f"`streamwarden check CATALOG --store {store.url}`")
        return store

    @property
    def home(self) -> Path:
        """The folder the store lives in (a SQLite file's folder; else ``.streamwarden``), where
        default checkpoints go: next to the store, never inside an output folder."""
        return self.path.parent if self.path is not None else Path(".streamwarden").resolve()

    def has_catalog(self) -> bool:
        """Does the store exist and hold a catalog? (Creates nothing.)"""
        if self.path is not None and not self.path.is_file():
            return False
        engine = self._engine or create_engine(self.url)
        try:
            if not inspect(engine).has_table(_sources.name):
                return False
            with engine.connect() as conn:
                return conn.execute(select(_sources.c.name)).first() is not None
        finally:
            if engine is not self._engine:
                engine.dispose()

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            created = self.path is not None and not self.path.exists()
            self._engine = create_engine(self.url)
            if self._engine.dialect.name == "sqlite":
                event.listen(self._engine, "connect", _sqlite_settings)
            create_tables(self._engine, _metadata)
            if created and self.path is not None and self.path.exists():
                os.chmod(self.path, PRIVATE_FILE)  # it holds grants and live state: its owner's only
        return self._engine

    def save(self, catalog: Catalog, *, reset_actions: bool = False,
             keep_live_actions: bool | None = None) -> ActionChanges:
        """Replace the stored catalog and its policies by ``catalog`` (validated).

        The action table is live state and survives: an action already in the store keeps
        its current values, a newly declared one is added with the file's values, and one
        the file no longer declares is dropped. ``reset_actions=True`` replaces the live
        values by the file's. (``keep_live_actions`` is accepted for compatibility: keeping
        them is what ``save`` always does.) Recorded in the audit trail as ``catalog.update``,
        its detail what the new catalog adds, removes and redefines.
        """
        with audited(self.engine, self.actor, "catalog.update", "catalog", {"catalog": catalog.name}) as change:
            def work(conn: Connection) -> ActionChanges:
                if change.recording:
                    change.detail = _replacing(conn, catalog) | ({"reset_actions": True} if reset_actions else {})
                return _save(conn, catalog, reset_actions)

            return change.commit(work)

    def load(self) -> Catalog:
        """The stored catalog, re-validated, with the live action values."""
        with self.engine.connect() as conn:
            row = conn.execute(select(_sources.c.name, _sources.c.text)).first()
        if row is None:
            from streamwarden.errors import CatalogError

            raise CatalogError(f"the store {self.url} holds no catalog: "
                               "load one with 'streamwarden check FILE --store URL'")
        catalog = _parsed(row.text, row.name)
        return Catalog(catalog.streams, catalog.roles, catalog.users, self.actions(), catalog.policies,
                       catalog.name, catalog.text, catalog.lattice)

    def actions(self) -> dict[str, Action]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(_actions)).all()
        return {r.name: Action(r.name, _utc(r.start), _utc(r.end), r.target) for r in rows}

    def users(self) -> frozenset[str]:
        """The users of the stored catalog (none when it holds no catalog)."""
        if not self.has_catalog():
            return frozenset()
        return frozenset(self.load().users)

    def incarnations(self) -> dict[str, str]:
        """Each declared user's incarnation (see the module docstring). A store written before
        incarnations existed gets them on first read, for the users its catalog declares.
        (Every micro-batch and registration asks: read without the times :meth:`identities` converts.)"""
        with self.engine.connect() as conn:
            users = _declared_users(conn)
            known = {r.user: r.incarnation for r in conn.execute(select(_identities.c.user, _identities.c.incarnation))}
        if users <= set(known):
            return {user: known[user] for user in users}
        return {user: identity for user, (identity, _) in self.identities().items()}

    def identities(self) -> dict[str, tuple[str, datetime]]:
        """Each declared user's incarnation and since when it holds (read only, in the common
        case: every micro-batch of a network asks; written once for a store that predates them)."""
        with self.engine.connect() as conn:
            users = _declared_users(conn)
            known = {r.user: (r.incarnation, _utc(r.since)) for r in conn.execute(select(_identities))}
        if users <= set(known):
            return {user: known[user] for user in users}
        with self.engine.begin() as conn:
            _sync_identities(conn, users, drop=False)
            return {r.user: (r.incarnation, _utc(r.since)) for r in conn.execute(select(_identities))
                    if r.user in users}

    def stream_incarnations(self) -> dict[str, str]:
        """Each declared stream's incarnation: a stream removed from the catalog and declared again
        is another stream, and its providers' earlier tokens are not its (given on first read to
        a store that predates them)."""
        with self.engine.begin() as conn:
            row = conn.execute(select(_sources.c.name, _sources.c.text)).first()
            streams = frozenset(_parsed(row.text, row.name).streams) if row is not None else frozenset()
            return _sync_identities(conn, streams, drop=False, table=_stream_identities)

    def set_action(self, name: str, **values: object) -> None:
        """Update an action's start, end or target (``None`` clears the value). An action the
        store does not hold (the stored catalog does not declare it) is refused: a mistyped
        name never creates a new action while the real one stays as it was. Recorded in the
        audit trail as ``action.update action:<name>``, with the values set."""
        unknown = set(values) - {"start", "end", "target"}
        if unknown:
            raise ValueError(f"unknown action fields: {', '.join(sorted(unknown))}")
        shown = {k: format_timestamp(v) if isinstance(v, datetime) else v for k, v in values.items()}

        def work(conn: Connection) -> None:
            result = conn.execute(update(_actions).where(_actions.c.name == name).values(**values))
            if result.rowcount == 0:
                known = sorted(row.name for row in conn.execute(select(_actions.c.name)))
                raise UnknownName(f"unknown action {name!r}: the stored catalog declares "
                                  f"{', '.join(known) or 'no actions'}")

        with audited(self.engine, self.actor, "action.update", f"action:{name}", shown) as change:
            change.commit(work)


#: Names of one kind a catalog change's audit record lists, then how many more (as the service's).
DETAIL_NAMES = 50
_NO_CATALOG = Catalog({}, {}, {}, {}, (), "(none)")


def _replacing(conn: Connection, catalog: Catalog) -> dict[str, object]:
    """What saving ``catalog`` replaces, for its audit record: the streams, roles, users,
    policies and actions it adds, removes or redefines (all added, in a store without one)."""
    row = conn.execute(select(_sources.c.name, _sources.c.text)).first()
    try:
        before = _parsed(row.text, row.name) if row is not None else _NO_CATALOG
    except StreamwardenError:  # a stored catalog that no longer loads is replaced whole
        return {"catalog": catalog.name, "replaced": "the stored catalog could not be read"}
    return diff_catalogs(before, catalog).detail(limit=DETAIL_NAMES)


def _save(conn: Connection, catalog: Catalog, reset_actions: bool) -> ActionChanges:
    """:meth:`CatalogStore.save`'s writes, in ``conn``."""
    declared = set(catalog.actions)
    live = {row.name for row in conn.execute(select(_actions.c.name))}
    for table in (_sources, _policies):
        conn.execute(delete(table))
    dropped = sorted(live - declared)
    if dropped:
        conn.execute(delete(_actions).where(_actions.c.name.in_(dropped)))
    if reset_actions:
        conn.execute(delete(_actions))
    conn.execute(insert(_sources).values(name=catalog.name, text=catalog.text, loaded_at=datetime.now(timezone.utc)))
    for p in catalog.policies:
        conn.execute(insert(_policies).values(
            id=p.id, subject=p.subject, streams=json.dumps(p.streams),
            attributes=json.dumps(p.attributes or "*"), privilege=p.privilege, where_text=p.where_text,
            time=json.dumps([str(b) for b in p.time]) if p.time else None,
            window=json.dumps(p.window) if p.window else None,
        ))
    for a in catalog.actions.values():
        if a.name in live and not reset_actions:
            continue
        conn.execute(insert(_actions).values(name=a.name, start=a.start, end=a.end, target=a.target))
    _sync_identities(conn, frozenset(catalog.users), drop=True)
    _sync_identities(conn, frozenset(catalog.streams), drop=True, table=_stream_identities)
    kept = () if reset_actions else tuple(sorted(live & declared))
    return ActionChanges(kept, tuple(sorted(declared - live)), tuple(dropped),
                         tuple(sorted(live & declared)) if reset_actions else ())


def incarnation_of(conn: Connection, user: str) -> str | None:
    """The user's current incarnation, read in ``conn`` (None: not declared, or never saved)."""
    return conn.execute(select(_identities.c.incarnation).where(_identities.c.user == user)).scalar()


def stream_incarnation_of(conn: Connection, stream: str) -> str | None:
    """The stream's current incarnation, read in ``conn``: a stream removed from the catalog and
    declared again is another stream, and its providers' tokens were made for the earlier one."""
    return conn.execute(select(_stream_identities.c.incarnation)
                        .where(_stream_identities.c.stream == stream)).scalar()


def _sync_identities(conn: Connection, names: frozenset[str], *, drop: bool, table: Table = _identities
                     ) -> dict[str, str]:
    """Give every name in ``names`` (users, or streams with ``table``) an incarnation if it has
    none; with ``drop``, forget those of names no longer declared (so that declaring them again
    makes new ones)."""
    key = table.c[table.primary_key.columns.keys()[0]]
    known = {row[0]: row[1] for row in conn.execute(select(key, table.c.incarnation))}
    gone = sorted(set(known) - names)
    if drop and gone:
        conn.execute(delete(table).where(key.in_(gone)))
    now = datetime.now(timezone.utc)
    for name in sorted(names - set(known)):
        known[name] = secrets.token_hex(8)
        conn.execute(insert(table).values({key.name: name, "incarnation": known[name], "since": now}))
    return {name: known[name] for name in names}


def _declared_users(conn: Connection) -> frozenset[str]:
    """The users the stored catalog declares (none stored: none)."""
    row = conn.execute(select(_sources.c.name, _sources.c.text)).first()
    return frozenset(_parsed(row.text, row.name).users) if row is not None else frozenset()


@overload
def _utc(value: datetime) -> datetime: ...
@overload
def _utc(value: None) -> None: ...
@overload
def _utc(value: datetime | None) -> datetime | None: ...
def _utc(value: datetime | None) -> datetime | None:
    # SQLite returns naive datetimes; everything streamwarden stores is UTC.
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
