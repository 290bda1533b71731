"""The authorization server: the policies P ⊆ CQ × U, kept as a log of access changes.

Every grant, revocation or expiry is one row (time, query, user, sign) in the catalog
store, in the order issued (``seq``), and at once an *access SP*: one JSON line
``{"seq": 7, "ts": "...", "query": "q1", "user": "ann", "sign": "+"}`` (the access-change
format, with its place in the log) written as its own file into the SP folder. A running
network reads that folder as one more input stream, in the same Spark query as its data
(Spark's file source: Spark checkpoints which SPs it read, no Python process is
involved), so a change takes effect without restarting anything; the rows a user then
receives follow :func:`streamwarden.catalog.registry.grant_intervals` (by the rows'
event time). A grant with an expiry (``until``) is a grant and, at once, the revocation
that ends it.

The SP folder of a SQLite store ``dir/auth.db`` is ``dir/auth.db.sps/``; other stores
name one. A change recorded but not yet written as an SP (a crash in between) is written
by :meth:`AuthorizationServer.publish`, which a network calls when it starts.

A change must name what exists. The store knows the network's queries once they are
registered (:meth:`AuthorizationServer.register`: ``network run`` and ``network replay``
do it when they start, ``streamwarden network register`` ahead of time) and the users of
the catalog stored with them; from then on a change naming an unregistered query or a
user the catalog does not declare is refused (:class:`~streamwarden.catalog.store.UnknownName`),
so a mistyped revocation never succeeds while the grant stays open. A store with no
registered query accepts the Python API's changes unchecked (a program may grant before
it starts its network; the query's registration then claims them); the CLI (``grant``,
``revoke``) checks strictly and refuses then.

**Changes are bound to one registration and one identity.** Each change records the
registration it was made for (:attr:`~streamwarden.catalog.registry.RegisteredQuery.rid`)
and the identity of its user (:meth:`~streamwarden.catalog.store.CatalogStore.incarnations`).
:meth:`AuthorizationServer.changes` returns only the *live* ones: a query unregistered and
registered again (or registered again with another text or level), and a user removed
from the catalog and declared again, start with no grant. The log keeps every change
(:meth:`AuthorizationServer.history`). What grants open and how an admin's revocation of
a user's own query closes its streams to her other own queries:
:mod:`streamwarden.catalog.registry`.

    >>> import tempfile, os
    >>> server = AuthorizationServer("sqlite:///" + os.path.join(tempfile.mkdtemp(), "auth.db"))
    >>> granted = server.grant("q1", "ann", "2026-03-01T10:00:00Z")
    >>> [c.line for c in granted + server.revoke("q1", "ann", "2026-03-01T10:05:00Z")]
    [1, 2]
    >>> [(c.user, c.grant) for c in server.history()]
    [('ann', True), ('ann', False)]
    >>> sorted(p.name for p in server.sp_folder.iterdir())
    ['sp-000000000001.jsonl', 'sp-000000000002.jsonl']
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

from typing import TYPE_CHECKING, Any, Iterable

from sqlalchemy import (Boolean, Column, ColumnElement, Integer, MetaData, Row, String, Table, Text, bindparam, delete,
                        insert, select, update)
from sqlalchemy.engine import Connection

from streamwarden.catalog.changes import OPERATOR, Actor, AuditedChange, audited, check_actor
from streamwarden.catalog.diff import capped_names
from streamwarden.catalog.registry import (ALL_TIME, QUERY, STREAM, AccessChange, ChangeLog, RegisteredQuery,
                                           grant_openings, parse_own_id, query_streams)
from streamwarden.catalog.store import CatalogStore, UnknownName, UTCDateTime, _utc, add_missing_columns, create_tables
from streamwarden.errors import StreamwardenError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.names import check_name, open_private, private_dir
from streamwarden.plan.expr import format_timestamp

if TYPE_CHECKING:
    from streamwarden.catalog.model import Catalog

_metadata = MetaData()
_changes = Table(
    "access_changes", _metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("ts", UTCDateTime(), nullable=False),
    Column("query", String, nullable=False),
    Column("user", String, nullable=False),
    Column("grant", Boolean, nullable=False),
    Column("rid", Text, nullable=True),  # the registration it was made for (scope "query")
    Column("incarnation", Text, nullable=True),  # the identity of its user
    Column("scope", Text, nullable=True),  # "query" (NULL in older stores) or "stream"
)
_registered = Table(
    "registered_queries", _metadata,
    Column("id", String, primary_key=True),
    Column("users", Text, nullable=False),  # JSON list: the users QUERIES.yaml lists for it
    Column("registered_at", UTCDateTime(), nullable=False),
    Column("query", Text, nullable=True),  # the CQL text (NULL in stores written before it was kept)
    Column("level", String, nullable=True),  # the level it runs at; NULL: each user's clearance
    Column("owner", Text, nullable=True),  # a user's own query: that user; NULL: shared (an admin's)
    Column("opens", Text, nullable=True),  # JSON list: the streams its grants open (fixed at registration)
    Column("rid", Text, nullable=True),  # this registration's id: grants are bound to it
    Column("owner_incarnation", Text, nullable=True),  # an own query: the identity of its owner
    info={"generation": True},  # a service caches which query a caller names
)


#: The registration or identity of a change an upgraded store found bound to none that exists
#: now (a deleted query, a removed user): it matches no registration id or incarnation.
_GONE = "gone"

#: The schema of an access SP record, as a running network reads it.
SP_SCHEMA = "seq long, ts timestamp, query string, user string, sign string"


class AuthorizationServer:
    """Access changes in a SQL store (SQLite by default; the catalog store's URL), each
    published as an access SP into ``sp_folder``. Every change (a registration, a grant, a
    revocation, ...) is an audit record under ``actor``, the store's
    (:mod:`streamwarden.catalog.changes`: the operator by default; None records nothing, for
    a caller whose own trail records it); a ``store`` given brings its own."""

    def __init__(self, url: str | None = None, sp_folder: str | Path | None = None, *,
                 store: CatalogStore | None = None, actor: Actor = OPERATOR):
        if store is not None:
            check_actor(store.actor, actor)
        self.store = store or CatalogStore(url, actor=actor)
        create_tables(self.store.engine, _metadata)
        _migrate(self.store)
        self._sp_folder = Path(sp_folder).resolve() if sp_folder is not None else _default_sp_folder(self.store.url)

    @classmethod
    def existing(cls, url: str | None = None, sp_folder: str | Path | None = None, *,
                 actor: Actor = OPERATOR) -> "AuthorizationServer":
        """The server of a store that exists and holds a catalog (for the CLI's grant and
        revoke); raises :class:`~streamwarden.catalog.store.NoStore` and creates nothing otherwise."""
        return cls(sp_folder=sp_folder, store=CatalogStore.existing(url, actor=actor))

    @property
    def actor(self) -> Actor:
        """Who this server's changes are recorded under: its store's actor."""
        return self.store.actor

    def _audited(self, action: str, object: str, detail: dict[str, object] | None = None) -> AuditedChange:
        return audited(self.store.engine, self.store.actor, action, object, detail)

    @property
    def sp_folder(self) -> Path:
        """Where the access SPs go (one file each); created when first needed, private to its owner."""
        if self._sp_folder is None:
            raise StreamwardenError(f"the store {self.store.url} is not a SQLite file: name the folder its access "
                                    "SPs go to (sp_folder=...)")
        private_dir(self._sp_folder)
        return self._sp_folder

    # -- what changes may name ------------------------------------------------------------
    def register(self, queries: Iterable[RegisteredQuery], catalog: "Catalog | None" = None) -> None:
        """Record the network's queries (ids, listed users, text, level, owner), and store
        ``catalog`` with them (its live action values kept), so that changes can be checked
        against both. A query registered before with the same text, level and owner keeps its
        registration (and so its grants and what it opens); its listed users are replaced.
        Otherwise it is a new registration: earlier grants under its id no longer apply, and a
        shared query's :attr:`~streamwarden.catalog.registry.RegisteredQuery.opens` is fixed now,
        against the stored catalog. Changes recorded while nothing was registered are claimed
        by the registration of their query. Each query is an audit record, ``query.create``
        (and the catalog one of its own, ``catalog.update``)."""
        queries = list(queries)
        with self._audited("query.create", _query_object(queries[0]) if len(queries) == 1 else "queries",
                           {"ids": capped_names([q.id for q in queries], DETAIL_NAMES)}) as change:
            for q in queries:
                check_name("query id", q.id)
                for user in q.users:
                    check_name("user", user)
                if q.owner is not None and q.users != (q.owner,):
                    raise StreamwardenError(f"query {q.id}: a user's own query lists its owner only")
            if catalog is not None and catalog.text:
                self.store.save(catalog)
            stored = self.store.load() if self.store.has_catalog() else catalog
            identities = self.store.incarnations()
            change.commit(lambda conn: self._register(conn, queries, stored, identities, change))

    def _register(self, conn: Connection, queries: list[RegisteredQuery], stored: "Catalog | None",
                  identities: dict[str, str], change: AuditedChange) -> None:
        """:meth:`register`'s writes, in ``conn``; each query's audit record in ``change``."""
        now = datetime.now(timezone.utc)
        kept: list[dict[str, object]] = []  # registered before with the same text, level and owner
        replaced: list[dict[str, object]] = []
        added: list[dict[str, object]] = []
        c = _registered.c
        known_rows = select(c.id, c.query, c.level, c.owner, c.rid)
        if len(queries) <= 100:  # a registration over HTTP: its own rows, not every query's
            known_rows = known_rows.where(c.id.in_([q.id for q in queries]))
        known = {row.id: row for row in conn.execute(known_rows)}
        for q in queries:
            values = dict(users=json.dumps(list(q.users)), query=q.query, level=q.level)
            old = known.get(q.id)
            if old is not None and (old.query, old.level, old.owner) == (q.query, q.level, q.owner) and old.rid:
                kept.append(dict(values, b_id=q.id))
                continue
            opens = () if q.owner is not None else (
                q.opens if q.opens is not None else grant_openings(stored, q.streams) if stored else ())
            fresh = dict(values, registered_at=now, owner=q.owner, opens=json.dumps(sorted(opens)),
                         rid=secrets.token_hex(8),
                         owner_incarnation=identities.get(q.owner) if q.owner is not None else None)
            (replaced if old is not None else added).append(dict(fresh, b_id=q.id))
        if change.recording:
            how = {row["b_id"]: what for rows, what in ((kept, "kept"), (replaced, "replaced"), (added, "new"))
                   for row in rows}
            change.each = [("query.create", _query_object(q), _query_detail(q, registration=how[q.id]))
                           for q in queries]
        # each kind in one statement over many rows (100,000 own queries are registered at once)
        by_id = c.id == bindparam("b_id")
        for rows in (kept, replaced):
            if rows:
                conn.execute(update(_registered).where(by_id), rows)
        if added:
            conn.execute(insert(_registered).values(id=bindparam("b_id")), added)
        # changes recorded while nothing was registered: claimed by their query's new registration
        unbound = set(conn.execute(select(_changes.c.query).where(_changes.c.rid.is_(None), _scope_is(QUERY))
                                   .distinct()).scalars())
        for row in replaced + added:
            if row["b_id"] in unbound:
                conn.execute(update(_changes).where(_changes.c.query == row["b_id"], _changes.c.rid.is_(None),
                                                    _scope_is(QUERY)).values(rid=row["rid"]))
        nameless = set(conn.execute(select(_changes.c.user).where(_changes.c.incarnation.is_(None))
                                    .distinct()).scalars())
        for user, incarnation in identities.items():
            if user in nameless:
                conn.execute(update(_changes).where(_changes.c.user == user, _changes.c.incarnation.is_(None))
                             .values(incarnation=incarnation))

    def unregister(self, query: str) -> None:
        """Remove a registered query (a running network stops it at its next poll); its access
        changes stay in the log, bound to this registration: registering the id again starts
        with no grant. Recorded as ``query.delete``, with the query's level and users."""
        with self._audited("query.delete", f"query:{query}") as change:
            check_name("query id", query)
            registered = self.registration(query) if change.recording else None
            if registered is not None:
                change.object = _query_object(registered)
                change.detail = _query_detail(registered)

            def work(conn: Connection) -> None:
                if not conn.execute(delete(_registered).where(_registered.c.id == query)).rowcount:
                    ids = sorted(conn.execute(select(_registered.c.id)).scalars())
                    raise UnknownName(f"unknown query {query!r}: the store {self.store.url} has registered "
                                      f"{', '.join(ids) or 'no query'}")

            change.commit(work)

    def registered(self) -> dict[str, tuple[str, ...]]:
        """Registered query id -> the users listed for it."""
        with self.store.engine.connect() as conn:
            return {row.id: tuple(json.loads(row.users)) for row in conn.execute(select(_registered))}

    def is_registered(self, query: str) -> bool:
        """Whether ``query`` is registered, visible or not (an own query of an earlier identity
        of its owner is registered, and hidden)."""
        with self.store.engine.connect() as conn:
            return conn.execute(select(_registered.c.id).where(_registered.c.id == query)).first() is not None

    def owned_by(self, owner: str) -> tuple[RegisteredQuery, ...]:
        """``owner``'s own registered queries (of her current identity): what a registration of
        hers checks, without reading everyone's."""
        return self._registrations(None, owner=owner)

    def registrations(self) -> tuple[RegisteredQuery, ...]:
        """The registered queries with their text and level, by id (a registration from a store
        that predates query texts has none: it is skipped, to be registered again; a user's own
        query made by an earlier identity of its owner is skipped too)."""
        return self._registrations(None)

    def registration(self, query: str) -> RegisteredQuery | None:
        """The registration of ``query``, if it is registered now."""
        found = self._registrations(query)
        return found[0] if found else None

    def _registrations(self, query: str | None, *, owner: str | None = None) -> tuple[RegisteredQuery, ...]:
        """:meth:`registrations` (of ``query`` only, unless None; of ``owner``'s own queries only,
        unless None). A network of 100,000 queries reads them all whenever it replans: the
        columns it needs only, each distinct JSON list decoded once (most are ``[]`` or one user)."""
        identities = self.store.incarnations()
        c = _registered.c
        found = select(c.id, c.users, c.query, c.level, c.owner, c.opens, c.rid, c.owner_incarnation)
        found = found.order_by(c.id) if query is None else found.where(c.id == query)
        if owner is not None:
            found = found.where(c.owner == owner)
        with self.store.engine.connect() as conn:
            rows = conn.execute(found).all()
        decoded: dict[str, tuple[str, ...]] = {}

        def listed(text: str) -> tuple[str, ...]:
            value = decoded.get(text)
            if value is None:
                value = decoded[text] = tuple(json.loads(text))
            return value

        return tuple(RegisteredQuery(qid, listed(users), text, level, owner, None if opens is None else listed(opens),
                                     rid)
                     for qid, users, text, level, owner, opens, rid, incarnation in rows
                     if text and (owner is None or incarnation == identities.get(owner)))

    def check(self, query: str, user: str, *, strict: bool = False) -> list[str]:
        """Refuse a change naming an unregistered query or an unknown user (raises
        :class:`~streamwarden.catalog.store.UnknownName`); returns notes on what is accepted
        but has no effect (a user not listed for the query). With no query registered the
        check passes, unless ``strict`` (the CLI), which then refuses."""
        check_name("query id", query)
        check_name("user", user)
        registered = self.registered()
        if not registered:
            if strict:
                raise UnknownName(f"unknown query {query!r}: the store {self.store.url} has no registered query "
                                  f"(register them with `streamwarden network register QUERIES.yaml --catalog "
                                  f"CATALOG --store {self.store.url}`, or start the network)")
            return []
        if query not in registered:
            raise UnknownName(f"unknown query {query!r}: the store {self.store.url} has registered "
                              f"{', '.join(sorted(registered))}")
        users = self.store.users() or frozenset(u for listed in registered.values() for u in listed)
        if user not in users:
            raise UnknownName(f"unknown user {user!r}: the catalog in {self.store.url} declares "
                              f"{', '.join(sorted(users)) or 'no users'}")
        if user not in registered[query]:
            return [f"{user} is not listed for {query} (listed: {', '.join(registered[query])}): the change is "
                    "recorded, but gives no access unless QUERIES.yaml lists them"]
        return []

    def publish(self) -> int:
        """Write every recorded change that has no SP file yet (after a crash between the two); returns how many."""
        folder = self.sp_folder
        written = 0
        for change in self.history():
            if not (folder / _sp_name(change.line)).exists():
                self._publish(change)
                written += 1
        return written

    def grant(self, query: str, user: str, ts: str | datetime | None = None, *,
              until: str | datetime | None = None, strict: bool = False) -> list[AccessChange]:
        """Grant ``user`` access to ``query`` from ``ts`` (default: now), until ``until`` if given.
        For a user's own query this also lifts an admin's revocation of the streams it reads.
        Returns the changes recorded. ``strict``: as :meth:`check` (the CLI). Recorded in the
        audit trail as ``grant.create query:<id>``: the user, the start as applied, the end."""
        with self._audited("grant.create", f"query:{query}", _asked(user, "+", ts, until)) as change:
            if until is not None and change_time(until) <= change_time(ts):
                raise StreamwardenError(f"a grant must expire after it starts ({until} is not after {ts or 'now'})")
            self.check(query, user, strict=strict)
            return self._change(change, query, user, True, ts, until)

    def revoke(self, query: str, user: str, ts: str | datetime | None = None, *,
               strict: bool = False) -> list[AccessChange]:
        """Revoke ``user``'s access to ``query`` from ``ts`` (default: now). For a user's own
        query this closes the streams it reads to every own query of hers, whatever id she
        registers next, until an admin grants one of them again. Returns the changes recorded
        (and the audit trail a ``grant.revoke`` record)."""
        with self._audited("grant.revoke", f"query:{query}", _asked(user, "-", ts, None)) as change:
            self.check(query, user, strict=strict)
            return self._change(change, query, user, False, ts, None)

    def open_own(self, query: str, user: str) -> None:
        """The grant an own query gets when its owner registers it: from :data:`ALL_TIME` on
        (it never lifts an admin's revocation of its streams)."""
        self.open_owns([(query, user)])

    def open_owns(self, owned: Iterable[tuple[str, str]]) -> None:
        """:meth:`open_own` for many ``(query, owner)`` pairs, in order, in one transaction (a
        store of thousands of own queries registered at once: one commit, not one each), each
        a ``grant.create`` record."""
        wanted = [(query, user, True, ALL_TIME, QUERY) for query, user in owned]
        if not wanted:
            return
        with self._audited("grant.create", f"query:{wanted[0][0]}" if len(wanted) == 1 else "queries") as change:
            if change.recording:
                change.each = [("grant.create", f"query:{_ref(query, user)}",
                                {"user": user, "sign": "+", "ts": format_timestamp(ALL_TIME), "own": True})
                               for query, user, _, _, _ in wanted]
            self._record_all(change, wanted)

    def load(self, changes: tuple[AccessChange, ...] | list[AccessChange]) -> None:
        """Append changes (e.g. an access-change file) in their order, in one transaction, each
        a ``grant.create`` or ``grant.revoke`` record."""
        ordered = sorted(changes, key=lambda c: c.line)
        with self._audited("grant.load", "grants", {"changes": len(ordered)}) as change:
            for c in ordered:
                self.check(c.query, c.user)
            wanted = [w for c in ordered
                      for w in _wanted(self.registration(c.query), c.query, c.user, c.grant, change_time(c.ts))]
            if change.recording:
                change.each = [("grant.create" if grant else "grant.revoke", f"query:{query}",
                                {"user": user, "sign": "+" if grant else "-", "ts": format_timestamp(ts)})
                               for query, user, grant, ts, scope in wanted if scope != STREAM]
            self._record_all(change, wanted)

    def changes(self) -> ChangeLog:
        """The live changes, in the order issued: each made for its query's current registration
        and its user's current identity (see the module docstring)."""
        identities = self.store.incarnations()
        c = _changes.c
        with self.store.engine.connect() as conn:
            rids = dict(conn.execute(select(_registered.c.id, _registered.c.rid)).all())
            rows = conn.execute(select(c.ts, c.query, c.user, c.grant, c.seq, c.scope, c.incarnation, c.rid)
                                .order_by(c.seq)).all()
        return ChangeLog(AccessChange(_utc(ts), query, user, bool(grant), seq, scope or QUERY)
                         for ts, query, user, grant, seq, scope, incarnation, rid in rows
                         if incarnation is not None and incarnation == identities.get(user)
                         and (scope == STREAM or (rid is not None and rid == rids.get(query))))

    def history(self) -> tuple[AccessChange, ...]:
        """Every change ever recorded, live or not, in the order issued."""
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(_changes).order_by(_changes.c.seq)).all()
        return tuple(_change(r) for r in rows)

    def _change(self, change: AuditedChange, query: str, user: str, grant: bool, ts: str | datetime | None,
                until: str | datetime | None) -> list[AccessChange]:
        """An admin's change (and a grant's end, ``until``), in one transaction with its record:
        on an own query, the same change of its streams for its owner."""
        when = change_time(ts)  # one instant for the query and its streams
        registered = self.registration(query)
        wanted = _wanted(registered, query, user, grant, when)
        if until is not None:
            wanted += _wanted(registered, query, user, False, change_time(until))
        streams = sorted({w[0] for w in wanted if w[4] == STREAM})
        change.detail.update(query=_ref(query, registered.owner if registered else None), ts=format_timestamp(when),
                             until=None if until is None else format_timestamp(change_time(until)),
                             **({"streams": streams} if streams else {}))
        if registered is not None:
            change.object = f"query:{_ref(query, registered.owner)}"
        return self._record_all(change, wanted)

    def _record_all(self, change: AuditedChange, wanted: list[_Wanted]) -> list[AccessChange]:
        """Record changes ``(query, user, grant, ts, scope)`` in order, in one transaction with
        ``change``'s audit records, each bound to its query's registration and its user's
        identity, then publish each as an SP."""
        if not wanted:
            return []
        incarnations = self.store.incarnations()

        def work(conn: Connection) -> list[Any]:
            named = {query for query, _, _, _, scope in wanted if scope != STREAM}
            found = select(_registered.c.id, _registered.c.rid)
            if len(named) == 1:  # the common case, one change: its query's row only
                found = found.where(_registered.c.id == next(iter(named)))
            rids = {row.id: row.rid for row in conn.execute(found)} if named else {}
            rows = [dict(ts=ts, query=query, user=user, grant=grant,
                         rid=None if scope == STREAM else rids.get(query), incarnation=incarnations.get(user),
                         scope=scope) for query, user, grant, ts, scope in wanted]
            # one INSERT ... RETURNING for all (SQLAlchemy's "insertmanyvalues"), the keys in the rows' order
            return list(conn.execute(insert(_changes).returning(_changes.c.seq, sort_by_parameter_order=True),
                                     rows).scalars().all())

        seqs = change.commit(work)
        changes = [AccessChange(ts, query, user, grant, int(seq), scope)
                   for (query, user, grant, ts, scope), seq in zip(wanted, seqs, strict=True)]
        for recorded in changes:
            self._publish(recorded)
        return changes

    def _publish(self, change: AccessChange) -> None:
        """The SP as a file of its own, complete before it appears (a stream never reads half of one)."""
        record = {"seq": change.line, "ts": change.ts.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
                  "query": change.query, "user": change.user, "sign": "+" if change.grant else "-",
                  **({"scope": change.scope} if change.scope != QUERY else {})}
        target = self.sp_folder / _sp_name(change.line)
        hidden = target.with_name("." + target.name)  # Spark's file source skips names starting with '.'
        with open_private(hidden) as handle:  # 0600: everyone's grants are no user's to read
            handle.write(json.dumps(record) + "\n")
        os.replace(hidden, target)


#: Names of one kind an audit record's detail lists, then how many more (as the service's).
DETAIL_NAMES = 50


def _ref(query: str, owner: str | None) -> str:
    """A query as the service names it in the audit trail: ``owner/id`` for an own query."""
    own = parse_own_id(query) if owner is not None else None
    return f"{own[0]}/{own[1]}" if own is not None and own[0] == owner else query


#: One row of the access log to write: (query or stream, user, grant, ts, scope).
_Wanted = tuple[str, str, bool, datetime, str]


def _wanted(registered: RegisteredQuery | None, query: str, user: str, grant: bool, when: datetime) -> list[_Wanted]:
    """The rows of one change: of ``query``, and on ``user``'s own query, of its streams."""
    wanted = [(query, user, grant, when, QUERY)]
    if registered is not None and registered.owner == user:
        wanted += [(stream, user, grant, when, STREAM) for stream in registered.streams]
    return wanted


def _query_object(q: RegisteredQuery) -> str:
    return f"query:{_ref(q.id, q.owner)}"


def _query_detail(q: RegisteredQuery, **more: object) -> dict[str, object]:
    """A registration or deletion, as the service records it: the id, level and users."""
    own = parse_own_id(q.id) if q.owner is not None else None
    return {"id": own[1] if own is not None else q.id, "level": q.level, "users": capped_names(q.users, DETAIL_NAMES),
            **({"owner": q.owner} if q.owner is not None else {}), **more}


def _asked(user: str, sign: str, ts: str | datetime | None, until: str | datetime | None) -> dict[str, object]:
    """A grant or revocation as asked (what a refusal's record says), before it is applied."""
    def shown(value: str | datetime | None) -> str | None:
        return format_timestamp(value) if isinstance(value, datetime) else value

    return {"user": user, "sign": sign, "ts": shown(ts), "until": shown(until)}


def _migrate(store: CatalogStore) -> None:
    """A store written by an older version: the columns it lacks, filled in once. Its
    registrations get an id (those shaped like own queries' ids and listing that user only
    were own queries: their owner is set), a shared one the streams it opens now, against
    the stored catalog (so removing a policy later never widens it), and its changes are
    bound to the registrations and identities of now. A change no registration or identity
    of now claims was made for one that is gone (a deleted query, a removed user): it stays
    in the log bound to none, so registering that id or declaring that name again starts
    with nothing."""
    engine = store.engine
    add_missing_columns(engine, _registered, ("query", "level"))
    added = add_missing_columns(engine, _registered, ("owner", "opens", "rid", "owner_incarnation"))
    added += add_missing_columns(engine, _changes, ("rid", "incarnation", "scope"))
    if not added:
        return
    identities = store.incarnations()
    catalog = _stored_catalog(store)
    with engine.begin() as conn:
        for row in conn.execute(select(_registered)).all():
            if row.rid:
                continue
            own = parse_own_id(row.id)
            owner = own[0] if own is not None and json.loads(row.users) == [own[0]] else None
            opens: Iterable[str] | None = [] if owner else (grant_openings(catalog, query_streams(row.query))
                                                            if catalog is not None and row.query else None)
            conn.execute(update(_registered).where(_registered.c.id == row.id).values(
                rid=secrets.token_hex(8), owner=owner, opens=None if opens is None else json.dumps(sorted(opens)),
                owner_incarnation=identities.get(owner) if owner else None))
        rids = {row.id: row.rid for row in conn.execute(select(_registered.c.id, _registered.c.rid))}
        for query, rid in rids.items():
            conn.execute(update(_changes).where(_changes.c.query == query, _changes.c.rid.is_(None)).values(rid=rid))
        for user, incarnation in identities.items():
            conn.execute(update(_changes).where(_changes.c.user == user, _changes.c.incarnation.is_(None))
                         .values(incarnation=incarnation))
        # (a store with no registration, or no catalog, yet keeps them claimable: changes the
        # Python API records before a program registers its queries, as in a store written since)
        if rids:
            conn.execute(update(_changes).where(_changes.c.rid.is_(None)).values(rid=_GONE))
        if identities:
            conn.execute(update(_changes).where(_changes.c.incarnation.is_(None)).values(incarnation=_GONE))


def _stored_catalog(store: CatalogStore) -> "Catalog | None":
    """The stored catalog, or None when there is none or it no longer loads."""
    try:
        return store.load() if store.has_catalog() else None
    except StreamwardenError:
        return None


def _scope_is(scope: str) -> ColumnElement[bool]:
    """The SQL condition that a change has ``scope`` (NULL, in older stores, is a query's)."""
    return _changes.c.scope == scope if scope == STREAM else (_changes.c.scope.is_(None) | (_changes.c.scope == QUERY))


def _change(row: Row[Any]) -> AccessChange:
    return AccessChange(_utc(row.ts), row.query, row.user, bool(row.grant), row.seq,
                        row.scope or QUERY)


def _sp_name(seq: int) -> str:
    return f"sp-{seq:012d}.jsonl"


def _default_sp_folder(url: str) -> Path | None:
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        db = Path(url.removeprefix("sqlite:///"))
        return db.with_name(db.name + ".sps")
    return None


def change_time(ts: str | datetime | None) -> datetime:
    """The instant a change applies from: ``ts`` in UTC (ISO-8601 text or a datetime), now when None."""
    if ts is None:
        return datetime.now(timezone.utc)
    if isinstance(ts, datetime):
        return ts.astimezone(timezone.utc)
    try:
        return parse_timestamp(ts)
    except ValueError:
        raise StreamwardenError(f"{ts!r} is not an ISO-8601 timestamp") from None


__all__ = ["SP_SCHEMA", "AuthorizationServer", "change_time"]
