"""Each user's queries in the shared network: ids per user, registration, explanation, removal.

**Ids belong to their owner.** Two users may both call a query ``q1``, and neither may learn
that the other's exists: a user's query is registered in the store under the internal id
``u<NN><user>_<id>`` (``NN``: the user name's length, two digits, so no two pairs map to
one id), which is also its folder name in the output and checkpoints. Queries an admin
registers for a list of users (``"users": [...]``), and those registered with
``streamwarden network register``, keep their id as given and are *shared*: each listed user
sees them under that id. A user's own query takes precedence over a shared one of the same
id, and registering an id a shared query of theirs already has is refused (409). Admins
address every query by its internal id.

**Registering for oneself** secures the query for the caller first (every security pass,
no Spark): bad CQL or a query nothing of which is authorized is refused (422) and nothing
is stored. Otherwise it is registered and granted to the caller for every event time from
:data:`ALL_TIME` on; role policies, security punctuations and levels still decide each row,
and an admin may revoke the grant.

    >>> own_id("ann", "q1"), parse_own_id("u03ann_q1"), parse_own_id("q1")
    ('u03ann_q1', ('ann', 'q1'), None)
"""

from __future__ import annotations

import re
import shutil
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.identity import Principal
from streamwarden.catalog.lattice import query_level
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery, grant_intervals
from streamwarden.errors import SourceError, StreamwardenError
from streamwarden.explain import explain_json
from streamwarden.plan.expr import format_timestamp
from streamwarden.names import MAX_NAME_LENGTH, name_problem, safe_path
from streamwarden.runtime.deliveries import deliveries
from streamwarden.security.passes import SecurityOptions, secure
from streamwarden.security.rewrite.algorithm import Rewriting
from streamwarden.service.errors import ApiError, not_found

#: The start of the grant a user's own query gets: every event time streams carry in practice
#: (a later bound than 0001-01-01 because pandas, in the Python workers, ends at 1677).
ALL_TIME = datetime(1900, 1, 1, tzinfo=timezone.utc)
MAX_QUERY_TEXT = 20_000  # characters of CQL in one registration
_OWN = re.compile(r"u(\d\d)([A-Za-z][A-Za-z0-9_]*)")
_registering = threading.Lock()  # one registration at a time: two requests cannot both take an id


def own_id(user: str, public: str) -> str:
    """The store's id of ``user``'s own query ``public``."""
    return f"u{len(user):02d}{user}_{public}"


def parse_own_id(internal: str) -> tuple[str, str] | None:
    """(owner, public id) of a user's own query's internal id; None for a shared query."""
    match = _OWN.fullmatch(internal)
    if match is None:
        return None
    size = int(match.group(1))
    rest = match.group(2)
    if len(rest) < size + 2 or rest[size] != "_":
        return None
    return rest[:size], rest[size + 1:]


@dataclass(frozen=True)
class Entry:
    """A query as one caller addresses it: ``id`` is what they call it, ``internal`` the store's."""

    id: str
    internal: str
    owner: str | None  # None: shared
    registered: RegisteredQuery

    def summary(self, output: Path, user: str | None) -> dict[str, Any]:
        listed = [user] if user is not None else list(self.registered.users)
        rows = {u: sum(d.rows for d in deliveries(safe_path(output, u, self.internal))) for u in listed}
        summary: dict[str, Any] = {"id": self.id, "query": self.registered.query, "level": self.registered.level,
                                   "shared": self.owner is None}
        if user is None:
            summary.update(internal=self.internal, owner=self.owner, users=list(self.registered.users),
                           rows_delivered=rows)
        else:
            summary["rows_delivered"] = rows[user]
        return summary


class QueryBook:
    """The store's registered queries as the service's callers see them."""

    def __init__(self, server: AuthorizationServer, output: Path):
        self.server = server
        self.output = output

    # -- finding -----------------------------------------------------------------------------
    def visible(self, caller: Principal) -> list[Entry]:
        """The caller's queries by id: their own and those shared with them (an admin: every query,
        other users' own ones by internal id)."""
        entries = []
        for q in self.server.registrations():
            own = parse_own_id(q.id)
            if own is not None and own[0] == caller.name:
                entries.append(Entry(own[1], q.id, caller.name, q))
            elif own is None and (caller.admin or caller.name in q.users):
                entries.append(Entry(q.id, q.id, None, q))
            elif caller.admin:  # another user's own query: admins address it by its internal id
                entries.append(Entry(q.id, q.id, own[0] if own else None, q))
        by_id: dict[str, Entry] = {}
        for entry in entries:  # a user's own query hides a shared one of the same id
            if entry.id not in by_id or entry.owner is not None:
                by_id[entry.id] = entry
        return [by_id[k] for k in sorted(by_id)]

    def find(self, caller: Principal, public: str) -> Entry:
        """The caller's query ``public``; 404 for anything they cannot see (whether or not it exists)."""
        if name_problem("query id", public) is None:
            for entry in self.visible(caller):
                if entry.id == public:
                    return entry
        raise not_found(f"you have no query {public[:64]!r}")

    # -- registering ---------------------------------------------------------------------------
    def register_own(self, caller: Principal, public: str, text: str, level: str | None,
                     catalog: Catalog) -> tuple[Entry, Rewriting]:
        """Register ``text`` as the caller's query ``public`` with their grant (see the module docstring)."""
        _check_id(public)
        internal = own_id(caller.name, public)
        if len(internal) > MAX_NAME_LENGTH:
            raise ApiError(422, f"the query id {public!r} is too long for user {caller.name} "
                                f"(the user name and the id together must stay within {MAX_NAME_LENGTH - 4} characters)",
                           field="id")
        registered = RegisteredQuery(internal, (caller.name,), _check_text(text), level)
        rewriting = explain_for(catalog, registered, caller.name)
        with _registering:
            if any(e.id == public for e in self.visible(caller)):
                raise ApiError(409, f"you already have a query {public!r}")
            self.server.register([registered])
            self.server.grant(internal, caller.name, ALL_TIME)
        return Entry(public, internal, caller.name, registered), rewriting

    def register_shared(self, public: str, text: str, level: str | None, users: list[str],
                        catalog: Catalog) -> tuple[Entry, dict[str, Rewriting | str]]:
        """An admin's query for ``users`` (no grant until one is given); each user's explanation or denial."""
        _check_id(public)
        if parse_own_id(public) is not None:
            raise ApiError(422, f"query ids of the form u<NN><user>_<id> are users' own queries: choose another id "
                                f"than {public!r}", field="id")
        if not users or len(users) > 10_000:
            raise ApiError(422, "users must list the users the query is registered for", field="users")
        declared = catalog.users
        for user in users:
            if not isinstance(user, str) or name_problem("user", user) is not None or user not in declared:
                raise ApiError(422, f"unknown user {str(user)[:64]!r}: the catalog declares "
                                    f"{', '.join(sorted(declared)) or 'no users'}", field="users")
        registered = RegisteredQuery(public, tuple(dict.fromkeys(users)), _check_text(text), level)
        outcomes: dict[str, Rewriting | str] = {}
        for user in registered.users:
            try:
                outcomes[user] = explain_for(catalog, registered, user)
            except ApiError as exc:
                outcomes[user] = exc.message
        if not any(isinstance(o, Rewriting) for o in outcomes.values()):
            first = next(iter(outcomes.values()))
            raise ApiError(422, f"nothing of this query is authorized for any listed user: {first}")
        with _registering:
            if public in {q.id for q in self.server.registrations()}:
                raise ApiError(409, f"a query {public!r} is already registered")
            self.server.register([registered])
        return Entry(public, public, None, registered), outcomes

    def forget(self, entry: Entry, checkpoint_root: Path | None) -> None:
        """After an unregistered query's pipeline stopped: remove its rows and state, so that a
        query registered again under the same id starts afresh."""
        for user in entry.registered.users:
            shutil.rmtree(safe_path(self.output, user, entry.internal), ignore_errors=True)
        if checkpoint_root is not None:
            shutil.rmtree(safe_path(checkpoint_root, entry.internal), ignore_errors=True)

    def grants(self, entry: Entry, user: str) -> list[list[str | None]]:
        """The user's grant periods for the query, as ISO-8601 pairs (end None: open)."""
        return periods_json(grant_intervals(self.server.changes(), entry.internal, user))


def explain_for(catalog: Catalog, query: RegisteredQuery, user: str) -> Rewriting:
    """Every security pass for ``user`` (as the network will run it); 422 when it cannot run."""
    try:
        if query.level is not None:
            query_level(catalog, user, query.level)
        rewriting = secure(catalog, user, query.bind(catalog), SecurityOptions(level=query.level, grants_decide=True))
    except SourceError as exc:
        raise ApiError(422, exc.message, line=exc.line, column=exc.column, field="query") from None
    except StreamwardenError as exc:
        raise ApiError(422, str(exc).splitlines()[0]) from None
    if not rewriting.deployed:
        raise ApiError(422, "nothing of this query is authorized for you: no role policy of yours authorizes any "
                            "part of it", explanation=explanation(rewriting))
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
    if not isinstance(text, str) or not text.strip():
        raise ApiError(422, "query must be the CQL text of a query", field="query")
    if len(text) > MAX_QUERY_TEXT:
        raise ApiError(422, f"the query is longer than {MAX_QUERY_TEXT} characters", field="query")
    return text


def periods_json(periods: list[tuple[datetime, datetime | None]]) -> list[list[str | None]]:
    """Grant periods as ISO-8601 pairs (an open period ends in None)."""
    return [[format_timestamp(a), None if b is None else format_timestamp(b)] for a, b in periods]


__all__ = ["ALL_TIME", "Entry", "QueryBook", "explain_for", "explanation", "own_id", "parse_own_id", "periods_json"]
