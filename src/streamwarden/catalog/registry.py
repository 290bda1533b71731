"""Registered queries (QUERIES.yaml) and access changes (JSON lines), validated with positions.

``QUERIES.yaml``::

    queries:
      - {id: q1, users: [ann, bob], query: "SELECT s1.streamid FROM Stream1 AS s1 WHERE s1.speed < 30"}
      - {id: q2, users: [cm], query: "SELECT ts FROM MessageLog", level: "[2, ⊥]"}

``level`` (with security levels in the catalog) runs the query at that level for every
listed user, each of whom must be cleared for it; without it each user runs the query
at their own clearance.

Access changes, one per line, in the order the authorization server issued them::

    {"ts": "2026-03-01T10:05:00Z", "query": "q1", "user": "ann", "sign": "+"}

A user receives a query's row exactly when their latest change for that query at or
before the row's event time is a grant (a change at time t applies to rows at t; of two
changes at the same time the later line wins). No grant yet means no access, and a user
not listed for a query never receives it.

**Grants only restrict, with one exception.** What a row may hold is decided by the
security passes (role policies, the providers' SPs, levels); a grant only says *when* a
user receives it. The exception is the privacy switch of the shared-network paper: a
*shared* query (registered by an admin, :attr:`RegisteredQuery.owner` None) may read a
plain stream that no role policy names, and then the admin's grant alone opens it. Which
streams it opens is fixed when the query is registered (:attr:`RegisteredQuery.opens`),
so removing or adding a policy later never widens it. A user's *own* query opens nothing:
it sees at most what her role policies allow, exactly what ``replay --user`` gives her.
An admin's revocation of an own query also closes the streams it reads to every own
query of that user (:func:`access_periods`), until an admin grants one again.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
    >>> [q.id for q in load_queries_text("queries: [{id: q1, users: [ann], query: 'SELECT a FROM S'}]", cat)]
    ['q1']
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import yaml

from streamwarden.catalog.lattice import query_level
from streamwarden.catalog.loader import compose_yaml, read_text_file
from streamwarden.catalog.model import Catalog
from streamwarden.errors import CatalogError, InputError, SourceText, Span, StreamwardenError
from streamwarden.language.binder import BoundQuery, bind_text, bound_query
from streamwarden.language.expressions import parse_timestamp
from streamwarden.language.parser import parse_query
from streamwarden.names import check_name

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: The start of the grant a user's own query gets, and of every user's self-service access to
#: a stream: every event time streams carry in practice (a later bound than 0001-01-01 because
#: pandas, in the Python workers, ends at 1677).
ALL_TIME = datetime(1900, 1, 1, tzinfo=timezone.utc)
_OWN = re.compile(r"u(\d\d)([A-Za-z][A-Za-z0-9_]*)")


def own_id(user: str, public: str) -> str:
    """The store's id of ``user``'s own query ``public``: ``u<NN><user>_<id>`` (``NN`` the user
    name's length, so no two pairs map to one id); also its folder name in outputs.

        >>> own_id("ann", "q1"), parse_own_id("u03ann_q1"), parse_own_id("q1")
        ('u03ann_q1', ('ann', 'q1'), None)
    """
    return f"u{len(user):02d}{user}_{public}"


def parse_own_id(internal: str) -> tuple[str, str] | None:
    """(owner, public id) of an id shaped like an own query's; None for any other id."""
    match = _OWN.fullmatch(internal)
    if match is None:
        return None
    size = int(match.group(1))
    rest = match.group(2)
    if len(rest) < size + 2 or rest[size] != "_":
        return None
    return rest[:size], rest[size + 1:]


#: AccessChange.scope: a change of one registered query's grant, or of a user's own queries over one stream.
QUERY, STREAM = "query", "stream"


@dataclass(frozen=True)
class RegisteredQuery:
    """A continuous query of the network: its id, the users listed for it, its CQL text and
    the security level it runs at (None: each user's clearance).

    ``owner`` is the user whose own query it is (None: a shared query an admin registered).
    ``opens`` are the plain streams a shared query's grants open because no role policy
    named them when it was registered (None: not registered yet, decided against the
    catalog it is planned with; always empty for an own query). ``rid`` names this
    registration: a query registered again under the same id is a new registration, and
    grants given to an earlier one do not apply to it."""

    id: str
    users: tuple[str, ...]
    query: str
    level: str | None = None
    owner: str | None = None
    opens: tuple[str, ...] | None = None
    rid: str | None = field(default=None, compare=False)

    def bind(self, catalog: Catalog) -> BoundQuery:
        """The query parsed and bound against ``catalog``, once for all its users."""
        return bound_query(self.query, catalog, f"query {self.id}")

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams the query reads, by name (from its text: no catalog needed)."""
        return query_streams(self.query)

    def granted_streams(self, catalog: Catalog) -> frozenset[str]:
        """The streams whose rows this query's grants alone open (see the module docstring).

            >>> from streamwarden.catalog.loader import load_catalog_text
            >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
            >>> sorted(RegisteredQuery("q1", ("ann",), "SELECT a FROM S").granted_streams(cat))
            ['S']
            >>> sorted(RegisteredQuery("q1", ("ann",), "SELECT a FROM S", owner="ann").granted_streams(cat))
            []
        """
        if self.owner is not None:
            return frozenset()
        if self.opens is not None:
            return frozenset(self.opens)
        return frozenset(grant_openings(catalog, self.streams))


def grant_openings(catalog: Catalog, streams: Sequence[str]) -> tuple[str, ...]:
    """Which of ``streams`` a shared query's grant would open if registered now: the plain
    streams no role policy names, in a catalog without security levels (a punctuated stream
    is decided by its providers' SPs, and with levels every stream by its level)."""
    if catalog.lattice is not None:
        return ()
    named = {s for p in catalog.policies for s in p.streams}
    return tuple(sorted(s for s in set(streams) if s in catalog.streams and s not in named
                        and not catalog.streams[s].punctuated))


@lru_cache(maxsize=4096)
def query_streams(text: str) -> tuple[str, ...]:
    """The stream names a CQL text reads (parsed, not bound; empty if it does not parse).

        >>> query_streams("SELECT a FROM S AS x, T [RANGE 1 minute] WHERE x.a = T.a")
        ('S', 'T')
    """
    try:
        parsed = parse_query(text)
    except StreamwardenError:
        return ()
    return tuple(sorted({item.stream for item in parsed.sources}))


@dataclass(frozen=True)
class AccessChange:
    """A grant (``grant`` True) or revocation of ``user``'s access to ``query`` from ``ts`` on.
    With ``scope`` :data:`STREAM`, ``query`` names a stream: the change opens or closes that
    stream to every own query of ``user`` (an admin's revocation of one of them)."""

    ts: datetime
    query: str
    user: str
    grant: bool
    line: int = 0
    scope: str = QUERY


def load_queries(path: str | Path, catalog: Catalog) -> tuple[RegisteredQuery, ...]:
    """Read QUERIES.yaml (at most 10 MiB of UTF-8: errors name the first bad byte's line and column)."""
    return load_queries_text(read_text_file(path, "query file"), catalog, str(path))


def load_queries_text(text: str, catalog: Catalog, name: str = "<queries>") -> tuple[RegisteredQuery, ...]:
    """Parse and check QUERIES.yaml: ids unique and usable as file names, users in the
    catalog, every query valid CQL over the catalog's streams. Errors name file:line:col."""
    source = SourceText(name, text)
    # Bounded like a catalog: no alias bombs, no recursive aliases, no deep nesting, plain keys.
    root = compose_yaml(source)

    def fail(node: yaml.Node | None, message: str) -> CatalogError:
        start = node.start_mark.index if node is not None else 0
        end = node.end_mark.index if node is not None else 1
        return CatalogError(message, source, Span(start, max(end, start + 1)))

    entries = _mapping(root).get("queries") if root is not None else None
    if not isinstance(entries, yaml.SequenceNode) or not entries.value:
        raise fail(root, "the file must hold 'queries:', a list of {id, users, query}")
    queries: list[RegisteredQuery] = []
    for item in entries.value:
        fields = _mapping(item)
        unknown = sorted(set(fields) - {"id", "users", "query", "level"})
        if unknown or not isinstance(item, yaml.MappingNode):
            raise fail(item, f"a query is {{id, users, query[, level]}}"
                             f"{'; unknown key ' + repr(unknown[0]) if unknown else ''}")
        qid = _scalar(fields.get("id"))
        check_name("query id", qid, taken=[q.id for q in queries], fail=partial(fail, fields.get("id", item)))
        if not qid or not _ID.fullmatch(qid):
            raise fail(fields.get("id", item), f"query id {qid!r} must be letters, digits, '_', '.' or '-'")
        if any(q.id == qid for q in queries):
            raise fail(fields["id"], f"query id {qid!r} is registered twice")
        if parse_own_id(qid) is not None:
            raise fail(fields["id"], f"query id {qid!r} has the form u<NN><user>_<id> of users' own queries: "
                                     "choose another id")
        users_node = fields.get("users")
        if not isinstance(users_node, yaml.SequenceNode) or not users_node.value:
            raise fail(users_node or item, f"query {qid} needs users: a list of user names")
        users = tuple(_scalar(u) or "" for u in users_node.value)
        for user, node in zip(users, users_node.value):
            if user not in catalog.users:
                raise fail(node, f"query {qid}: unknown user {user!r} (the catalog declares "
                                 f"{', '.join(catalog.users) or 'no users'})")
        query = _scalar(fields.get("query"))
        if not query:
            raise fail(fields.get("query", item), f"query {qid} needs its CQL text")
        try:
            bind_text(query, catalog, f"{name} query {qid}")
        except StreamwardenError as exc:
            raise fail(fields["query"], f"query {qid}: {str(exc).splitlines()[0]}") from None
        level = _scalar(fields.get("level")) if "level" in fields else None
        if level is not None:
            _check_level(catalog, qid, level, users, partial(fail, fields["level"]))
        queries.append(RegisteredQuery(qid, users, query, level))
    return tuple(queries)


def _check_level(catalog: Catalog, qid: str, level: str, users: Sequence[str],
                 fail: Callable[[str], StreamwardenError]) -> None:
    """A query's level must parse in the catalog's lattice and be within every listed user's clearance."""
    if catalog.lattice is None:
        raise fail(f"query {qid}: level {level!r} given, but the catalog declares no security levels")
    for user in users:
        try:
            query_level(catalog, user, level)
        except StreamwardenError as exc:
            raise fail(f"query {qid}: {str(exc).splitlines()[0]}") from None


def _mapping(node: yaml.Node | None) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): v for k, v in node.value}


def _scalar(node: yaml.Node | None) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def load_access(path: str | Path, queries: Sequence[RegisteredQuery]) -> tuple[AccessChange, ...]:
    """Read access changes; a broken line stops with its file:line and the record."""
    from streamwarden.records import record_lines  # LF-only lines, UTF-8 errors with line:column

    known = {q.id for q in queries}
    changes = []
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read access changes {path}: {exc.strerror or exc}") from None
    listed = {q.id: set(q.users) for q in queries}
    for number, line in record_lines(data, str(path)):
        where = f"{path}:{number}"
        change = parse_access(line, where, known, number)
        if change.user not in listed[change.query]:
            # A user the query does not list never receives it: such a line changes nothing,
            # and is most likely a mistyped name that leaves the intended grant or revocation undone.
            raise InputError(f"{where}: user {change.user!r} is not listed for query {change.query} "
                             f"(its users: {', '.join(sorted(listed[change.query]))})")
        changes.append(change)
    return tuple(changes)


def parse_access(line: str, where: str, known: Iterable[str], number: int = 0) -> AccessChange:
    shown = line if len(line) <= 200 else line[:200] + "..."  # a message is one readable line
    try:
        record: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not JSON ({exc.msg}): {shown}") from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, arrays nested too deep
        raise InputError(f"{where}: not a usable JSON record ({type(exc).__name__}): {shown}") from None
    if not isinstance(record, dict):
        raise InputError(f"{where}: an access change is a JSON object: {shown}")
    missing = [k for k in ("ts", "query", "user", "sign") if k not in record]
    if missing:
        raise InputError(f"{where}: access change lacks {', '.join(missing)}: {shown}")
    for key in ("ts", "query", "user"):
        if not isinstance(record[key], str):
            raise InputError(f"{where}: {key} must be a string, not {json.dumps(record[key])[:60]}")
    if record["sign"] not in ("+", "-"):
        raise InputError(f"{where}: sign must be '+' (grant) or '-' (revoke), not {record['sign']!r}")
    if str(record["query"]) not in set(known):
        raise InputError(f"{where}: unknown query {record['query']!r} (registered: {', '.join(sorted(known))})")
    try:
        ts = parse_timestamp(str(record["ts"]))
    except ValueError:
        raise InputError(f"{where}: ts {record['ts']!r} is not an ISO-8601 timestamp") from None
    return AccessChange(ts, str(record["query"]), str(record["user"]), record["sign"] == "+", number)


Period = tuple[datetime, datetime | None]


class ChangeLog(tuple[AccessChange, ...]):
    """Access changes (a tuple, in the order issued) indexed by scope, query and user, so that a
    network of thousands of queries finds each one's few changes without reading them all
    (:func:`grant_intervals` and :func:`access_periods` use the index when given one).

        >>> log = ChangeLog([AccessChange(ALL_TIME, "q1", "ann", True, 1)])
        >>> len(log), [c.line for c in log.of("q1", "ann")], log.of("q2", "ann")
        (1, [1], ())
    """

    _index: dict[tuple[str, str, str], tuple[AccessChange, ...]]

    def __new__(cls, changes: Iterable[AccessChange] = ()) -> "ChangeLog":
        log = super().__new__(cls, changes)
        index: dict[tuple[str, str, str], list[AccessChange]] = {}
        for change in log:
            index.setdefault((change.scope, change.query, change.user), []).append(change)
        log._index = {key: tuple(found) for key, found in index.items()}
        return log

    def of(self, query: str, user: str, scope: str = QUERY) -> tuple[AccessChange, ...]:
        """``user``'s changes of ``query`` (a stream, for :data:`STREAM`), in the order issued."""
        return self._index.get((scope, query, user), ())


def _of(changes: Sequence[AccessChange], query: str, user: str, scope: str) -> Sequence[AccessChange]:
    if isinstance(changes, ChangeLog):
        return changes.of(query, user, scope)
    return [c for c in changes if c.query == query and c.user == user and c.scope == scope]


def access_periods(changes: Sequence[AccessChange], query: RegisteredQuery, user: str) -> list[Period]:
    """The [from, to) event-time periods in which ``user`` receives ``query``'s rows: her grant
    periods for it, and for an own query also within her self-service access to every stream
    it reads (open from :data:`ALL_TIME` until an admin revokes an own query over it).

        >>> t = lambda h: datetime(2026, 3, 1, h, tzinfo=timezone.utc)
        >>> q = RegisteredQuery("u03eve_q2", ("eve",), "SELECT a FROM S", owner="eve")
        >>> changes = [AccessChange(ALL_TIME, "u03eve_q2", "eve", True, 1),
        ...            AccessChange(t(10), "S", "eve", False, 2, STREAM)]   # an admin revoked eve's q1 over S
        >>> [(a.hour, b and b.hour) for a, b in access_periods(changes, q, "eve")]
        [(0, 10)]
    """
    periods = grant_intervals(changes, query.id, user)
    if query.owner is None:
        return periods
    for stream in query.streams:
        # Open before any change of hers over the stream: an admin's revocation dated before
        # ALL_TIME (e.g. 0001-01-01, "from the start") must still close it, not be outranked.
        mine = _of(changes, stream, user, STREAM)
        start = min([ALL_TIME, *(c.ts for c in mine)])
        opened = [AccessChange(start, stream, user, True, 0, STREAM)]
        periods = _intersect(periods, grant_intervals([*opened, *mine], stream, user, scope=STREAM))
    return periods


def _intersect(a: list[Period], b: list[Period]) -> list[Period]:
    """The periods in both ``a`` and ``b`` (each sorted and disjoint; an end None is open)."""
    out: list[Period] = []
    for start_a, end_a in a:
        for start_b, end_b in b:
            start = max(start_a, start_b)
            ends = [e for e in (end_a, end_b) if e is not None]
            end = min(ends) if ends else None
            if end is None or start < end:
                out.append((start, end))
    return sorted(out)


def grant_intervals(changes: Sequence[AccessChange], query: str, user: str, *,
                    scope: str = QUERY) -> list[Period]:
    """The [from, to) periods in which ``user`` may see ``query``'s rows (to None: still open),
    by her changes of one ``scope``."""
    ordered = sorted(_of(changes, query, user, scope), key=lambda c: (c.ts, c.line))
    latest: dict[datetime, bool] = {}
    for change in ordered:  # of several changes at one instant, the last one issued holds
        latest[change.ts] = change.grant
    periods: list[tuple[datetime, datetime | None]] = []
    opened: datetime | None = None
    for ts, grant in sorted(latest.items()):
        if grant and opened is None:
            opened = ts
        elif not grant and opened is not None:
            periods.append((opened, ts))
            opened = None
    if opened is not None:
        periods.append((opened, None))
    return periods


__all__ = ["own_id", "parse_own_id", "ALL_TIME", "QUERY", "STREAM", "AccessChange", "ChangeLog", "Period",
           "RegisteredQuery", "access_periods", "grant_intervals", "grant_openings", "query_streams", "load_access",
           "load_queries", "load_queries_text", "parse_access"]
