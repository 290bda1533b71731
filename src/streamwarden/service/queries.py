"""Each user's queries in the shared network: ids per user, registration, explanation, removal.

**Ids belong to their owner.** Two users may both call a query ``q1``, and neither may learn
that the other's exists: a user's own query is registered in the store under the internal
id ``u<NN><user>_<id>`` (:func:`~streamwarden.catalog.registry.own_id`), which is also its
folder name in the output and checkpoints, and never shown. Queries an admin registers for
a list of users (``"users": [...]``), and those registered with ``streamwarden network
register``, keep their id as given and are *shared*: each listed user sees them under that
id. A user's own query takes precedence over a shared one of the same id, and registering
an id a shared query of theirs already has is refused (409). Admins name another user's own
query by that user and the id she gave it (``?owner=ann``, or ``user`` in a grant).

**Registering for oneself** secures the query for the caller first (every security pass,
no Spark), exactly as ``streamwarden replay --user`` would: her role policies, the
providers' SPs and her clearance decide, and grants open nothing. Bad CQL, or a query over
a stream no policy opens to her, is refused (422, naming the stream) and nothing is
stored; so is a query beyond her :data:`MAX_OWN_QUERIES`. Otherwise it is registered and
granted to the caller for every event time from
:data:`~streamwarden.catalog.registry.ALL_TIME` on; an admin may revoke that grant, which
also closes the query's streams to her other own queries (see
:mod:`streamwarden.catalog.registry`). A new registration starts with nothing: rows,
state or grants left by an earlier query of that id are not its own.

    >>> Entry("q1", "u03ann_q1", "ann", RegisteredQuery("u03ann_q1", ("ann",), "SELECT a FROM S", owner="ann")).ref
    'ann/q1'
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from streamwarden.api import (AuthorizationServer, Catalog, GenerationCache, Principal, RegisteredQuery, Rewriting,
                              UnknownName, access_periods, authorize_registered, check_cql, delivered_rows,
                              explain_json, forget_query, format_timestamp, own_id, parse_own_id)
from streamwarden.errors import SourceError, StreamwardenError
from streamwarden.names import MAX_NAME_LENGTH, name_problem
from streamwarden.service.errors import ApiError, not_found

MAX_QUERY_TEXT = 20_000  # characters of CQL in one registration
#: Own queries one user may have registered at once: each is a pipeline of its own (a Spark
#: streaming query), so without a bound one user's registrations would slow everyone's micro-batches.
MAX_OWN_QUERIES = 20
_registering = threading.Lock()  # one registration at a time: two requests cannot both take an id


@dataclass(frozen=True)
class Entry:
    """A query as one caller addresses it: ``id`` is what they call it, ``internal`` the store's."""

    id: str
    internal: str
    owner: str | None  # None: shared
    registered: RegisteredQuery

    @property
    def ref(self) -> str:
        """How the audit trail and admins name it: ``owner/id`` for an own query, else the id."""
        return self.id if self.owner is None else f"{self.owner}/{self.id}"

    def summary(self, output: Path, user: str | None) -> dict[str, Any]:
        listed = [user] if user is not None else list(self.registered.users)
        rows = {u: delivered_rows(output, u, self.internal) for u in listed}
        summary: dict[str, Any] = {"id": self.id, "query": self.registered.query, "level": self.registered.level,
                                   "shared": self.owner is None}
        if user is None:
            summary.update(owner=self.owner, users=list(self.registered.users), rows_delivered=rows)
        else:
            summary["rows_delivered"] = rows[user]
        return summary


@dataclass(frozen=True)
class _Looked:
    """A registration looked up by id, as kept: the registration, or None for none (an absence
    is kept too, so that a shared query's id, which is never an own query's, is answered at once)."""

    registration: RegisteredQuery | None


class _NotKept(Exception):
    """:meth:`QueryBook.find_kept` needs the store."""


class QueryBook:
    """The store's registered queries as the service's callers see them."""

    def __init__(self, server: AuthorizationServer, output: Path):
        self.server = server
        self.output = output
        # each registration looked up by id (or its absence), while the store's generation stays:
        # every GET of rows asks; one object per query, however many users address it
        self._looked: GenerationCache[str, _Looked] = GenerationCache(server.store.engine)

    # -- finding -----------------------------------------------------------------------------
    def visible(self, caller: Principal) -> list[Entry]:
        """The caller's queries: her own and those shared with her, a user's own one hiding a
        shared one of the same id. An admin sees every query: shared ones, hers, and every other
        user's own ones (each with its owner)."""
        entries: dict[tuple[str | None, str], Entry] = {}
        for q in self.server.registrations():
            if q.owner is not None:
                public = parse_own_id(q.id)
                if public is None or public[0] != q.owner:
                    continue  # not an id this service made: never addressable by a public id
                if q.owner == caller.name or caller.admin:
                    entries[(q.owner, public[1])] = Entry(public[1], q.id, q.owner, q)
            elif caller.admin or caller.name in q.users:
                entries[(None, q.id)] = Entry(q.id, q.id, None, q)
        own = {id_ for owner, id_ in entries if owner == caller.name}
        shown = [e for (owner, id_), e in entries.items() if owner is not None or id_ not in own]
        return sorted(shown, key=lambda e: (e.id, e.owner or ""))

    def find(self, caller: Principal, public: str, owner: str | None = None) -> Entry:
        """The caller's query ``public`` (an admin: ``owner``'s own query of that id, when given);
        404 for anything the caller cannot see, whether or not it exists."""
        if name_problem("query id", public) is None and (owner is None or name_problem("user", owner) is None):
            if owner is not None and owner != caller.name and not caller.admin:
                raise not_found(f"you have no query {public[:64]!r}")
            found = self._resolve(caller, public, owner, self._look)
            if found is not None:
                return found
        raise not_found(f"you have no query {public[:64]!r}" + (f" of {owner}" if owner and caller.admin else ""))

    def find_kept(self, caller: Principal, public: str) -> Entry | None:
        """:meth:`find` (without ``owner``) answered from what is kept only, without waiting for the
        store, for a route on an event loop: the entry, or None when only :meth:`find` can say
        (not kept, or no such query: :meth:`find` answers 404)."""
        if name_problem("query id", public) is not None:
            return None
        try:
            return self._resolve(caller, public, None, self._peek)
        except _NotKept:
            return None

    def _resolve(self, caller: Principal, public: str, owner: str | None,
                 look: Callable[[str], "_Looked"]) -> Entry | None:
        """The two registrations it could be, not every query: an own query before a shared one."""
        wanted = owner if owner is not None else caller.name
        found = self._own_entry(wanted, public, look)
        if found is None and (owner is None or owner == caller.name):
            found = self._shared_entry(caller, public, look)
        return found

    def _look(self, query: str) -> "_Looked":
        looked = self._looked.get(query, lambda: _Looked(self.server.registration(query)))
        assert looked is not None  # compute never answers None
        return looked

    def _peek(self, query: str) -> "_Looked":
        looked = self._looked.peek(query)
        if looked is None:
            raise _NotKept(query)
        return looked

    def for_user(self, public: str, user: str) -> Entry:
        """The query ``user`` calls ``public`` (her own first, else one shared with her): what an
        admin's grant names. 404 if she has none."""
        return self.find(Principal("user", user), public)

    # -- registering ---------------------------------------------------------------------------
    def prepare_own(self, caller: Principal, public: str, text: str, level: str | None,
                    catalog: Catalog) -> tuple[Entry, Rewriting]:
        """The caller's query ``public`` secured for her (see the module docstring), not stored yet."""
        _check_id(public)
        text = _check_text(text)  # the language's own bounds (a window's cost, ...) before counting her queries
        self._check_room(caller.name, self._own(caller.name))  # before compiling anything
        internal = own_id(caller.name, public)
        if len(internal) > MAX_NAME_LENGTH:
            raise ApiError(422, f"the query id {public!r} is too long for user {caller.name} (the user name and "
                                f"the id together must stay within {MAX_NAME_LENGTH - 4} characters)",
                           field="id")
        registered = RegisteredQuery(internal, (caller.name,), text, level, owner=caller.name, opens=())
        return Entry(public, internal, caller.name, registered), explain_for(catalog, registered, caller.name)

    def register_own(self, entry: Entry, settle: Callable[[], None], checkpoint_root: Path | None) -> None:
        """Store a prepared own query with its owner's grant. Anything an earlier query of that
        internal id left (a registration of an earlier identity of the user, rows, state) is
        removed first: ``settle`` applies the store to the running network, so that no pipeline
        of the old one still writes when its folders go."""
        assert entry.owner is not None
        with _registering:  # what it reads here is the owner's own rows, not every query's (1,000 register at once)
            mine = self._own(entry.owner)
            owner = Principal("user", entry.owner)
            if any(e.id == entry.id for e in mine) or self._shared_entry(owner, entry.id) is not None:
                raise ApiError(409, f"you already have a query {entry.id!r}")
            self._check_room(entry.owner, mine)
            if self.server.is_registered(entry.internal):  # hidden: made by an earlier identity of this user
                self.server.unregister(entry.internal)
                settle()
            self.forget(entry, checkpoint_root)
            self.server.register([entry.registered])
            self.server.open_own(entry.internal, entry.owner)

    def _own_entry(self, user: str, public: str, look: Callable[[str], "_Looked"] | None = None) -> Entry | None:
        """``user``'s own query ``public``, as :meth:`visible` lists it (None: she has none)."""
        found = (look or self._look)(own_id(user, public)).registration
        if found is None or found.owner != user or parse_own_id(found.id) != (user, public):
            return None
        return Entry(public, found.id, user, found)

    def _shared_entry(self, caller: Principal, public: str,
                      look: Callable[[str], "_Looked"] | None = None) -> Entry | None:
        """The shared query ``public``, if :meth:`visible` lists it for ``caller``."""
        found = (look or self._look)(public).registration
        if found is None or found.owner is not None or not (caller.admin or caller.name in found.users):
            return None
        return Entry(public, public, None, found)

    def _own(self, user: str) -> list[Entry]:
        """``user``'s own queries, as :meth:`visible` lists them for her."""
        return [Entry(public[1], q.id, user, q) for q in self.server.owned_by(user)
                if (public := parse_own_id(q.id)) is not None and public[0] == user]

    def _check_room(self, user: str, own_queries: list[Entry]) -> None:
        """422 when ``user`` already has :data:`MAX_OWN_QUERIES` own queries."""
        own = len(own_queries)
        if own >= MAX_OWN_QUERIES:
            raise ApiError(422, f"you have {own} queries, the most one user may register: delete one first", field="id")

    def register_shared(self, public: str, text: str, level: str | None, users: list[str], catalog: Catalog, *,
                        check: Callable[[RegisteredQuery, Catalog], None] | None = None
                        ) -> tuple[Entry, dict[str, Rewriting | str]]:
        """An admin's query for ``users`` (no grant until one is given); each user's explanation or
        denial. ``check`` refuses (raises) a query the network could not run."""
        _check_id(public)
        if parse_own_id(public) is not None:
            raise ApiError(422, f"query ids of the form u<NN><user>_<id> are users' own queries: choose another id "
                                f"than {public!r}", field="id")
        text = _check_text(text)  # once, with its line and column, not once per listed user
        if not users or len(users) > 10_000:
            raise ApiError(422, "users must list the users the query is registered for", field="users")
        declared = catalog.users
        for user in users:
            if not isinstance(user, str) or name_problem("user", user) is not None or user not in declared:
                raise ApiError(422, f"unknown user {str(user)[:64]!r}: the catalog declares "
                                    f"{', '.join(sorted(declared)) or 'no users'}", field="users")
        registered = RegisteredQuery(public, tuple(dict.fromkeys(users)), text, level)
        outcomes: dict[str, Rewriting | str] = {}
        for user in registered.users:
            try:
                outcomes[user] = explain_for(catalog, registered, user)
            except ApiError as exc:
                outcomes[user] = exc.message
        if not any(isinstance(o, Rewriting) for o in outcomes.values()):
            first = next(iter(outcomes.values()))
            raise ApiError(422, f"nothing of this query is authorized for any listed user: {first}")
        if check is not None:
            check(registered, catalog)
        with _registering:
            if public in self.server.registered():
                raise ApiError(409, f"a query {public!r} is already registered")
            self.server.register([registered])
        stored = self.server.registration(public)
        assert stored is not None
        return Entry(public, public, None, stored), outcomes

    def unregister(self, entry: Entry, settle: Callable[[], None], checkpoint_root: Path | None) -> None:
        """Remove a query: unregistered, its pipeline stopped (``settle`` applies the store to the
        running network), then its rows and state removed. Under the registration lock, so a
        registration of the same id cannot slip in between and lose its state to the removal."""
        with _registering:
            try:
                self.server.unregister(entry.internal)
            except UnknownName:  # removed meanwhile by another request: nothing left to do
                raise not_found(f"you have no query {entry.id!r}") from None
            settle()
            self.forget(entry, checkpoint_root)

    def forget(self, entry: Entry, checkpoint_root: Path | None) -> None:
        """Remove the rows and state of a query no pipeline runs (unregistered, its pipeline
        stopped), so that a query registered again under the same id starts afresh: the
        network's own removal (:func:`streamwarden.api.forget_query`), which knows its folders;
        ``checkpoint_root`` is the running network's (None: no network, rows only)."""
        forget_query(self.output, entry.internal, entry.registered.users, checkpoint_root)

    def grants(self, entry: Entry, user: str) -> list[list[str | None]]:
        """The user's access periods for the query, as ISO-8601 pairs (end None: open)."""
        return periods_json(access_periods(self.server.changes(), entry.registered, user))


def explain_for(catalog: Catalog, query: RegisteredQuery, user: str) -> Rewriting:
    """Every security pass for ``user`` (as the network will run it); 422 when it cannot run,
    naming the streams nothing opens to her."""
    try:
        rewriting = authorize_registered(catalog, query, user)
    except SourceError as exc:
        raise ApiError(422, exc.message, line=exc.line, column=exc.column, field="query") from None
    except StreamwardenError as exc:
        raise ApiError(422, str(exc).splitlines()[0]) from None
    if not rewriting.deployed:
        closed = [note.split(":", 1)[0] for note in rewriting.notes if "has a policy on this stream" in note]
        why = (f"no policy opens {' or '.join(closed)} to you" if closed
               else "no role policy of yours authorizes any part of it")
        raise ApiError(422, f"nothing of this query is authorized for you: {why}", field="query",
                       explanation=explanation(rewriting))
    return rewriting


def explanation(rewriting: Rewriting) -> dict[str, Any]:
    """The explanation a caller sees: authorized graphs, what is withheld and why (no SQL)."""
    explained = explain_json(rewriting, sql=False)
    for graph in explained["graphs"]:
        graph.pop("sql", None)
    return explained


def _check_id(public: Any) -> None:
    problem = name_problem("query id", public)
    if problem is not None:
        raise ApiError(422, problem, field="id")


def _check_text(text: Any) -> str:
    """The CQL text, if it parses within the language's bounds (:func:`streamwarden.api.check_cql`:
    no catalog, no security pass); else 422 naming its line and column."""
    if not isinstance(text, str) or not text.strip():
        raise ApiError(422, "query must be the CQL text of a query", field="query")
    if len(text) > MAX_QUERY_TEXT:
        raise ApiError(422, f"the query is longer than {MAX_QUERY_TEXT} characters", field="query")
    try:
        check_cql(text)
    except SourceError as exc:
        raise ApiError(422, exc.message, line=exc.line, column=exc.column, field="query") from None
    return text


def periods_json(periods: list[tuple[datetime, datetime | None]]) -> list[list[str | None]]:
    """Grant periods as ISO-8601 pairs (an open period ends in None)."""
    return [[format_timestamp(a), None if b is None else format_timestamp(b)] for a, b in periods]


__all__ = ["Entry", "QueryBook", "explain_for", "explanation", "own_id", "periods_json"]
