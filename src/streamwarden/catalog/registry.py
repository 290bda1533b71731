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

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
    >>> [q.id for q in load_queries_text("queries: [{id: q1, users: [ann], query: 'SELECT a FROM S'}]", cat)]
    ['q1']
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import yaml

from streamwarden.catalog.lattice import query_level
from streamwarden.catalog.loader import compose_yaml, read_text_file
from streamwarden.catalog.model import Catalog
from streamwarden.errors import CatalogError, InputError, SourceText, Span, StreamwardenError
from streamwarden.language.binder import BoundQuery, bind_query, bound_query
from streamwarden.language.expressions import parse_timestamp
from streamwarden.language.parser import parse_query
from streamwarden.names import check_name

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class RegisteredQuery:
    """A continuous query of the network: its id, the users listed for it, its CQL text and
    the security level it runs at (None: each user's clearance)."""

    id: str
    users: tuple[str, ...]
    query: str
    level: str | None = None

    def bind(self, catalog: Catalog) -> BoundQuery:
        """The query parsed and bound against ``catalog``, once for all its users."""
        return bound_query(self.query, catalog, f"query {self.id}")


@dataclass(frozen=True)
class AccessChange:
    """A grant (``grant`` True) or revocation of ``user``'s access to ``query`` from ``ts`` on."""

    ts: datetime
    query: str
    user: str
    grant: bool
    line: int = 0


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
        check_name("query id", qid, taken=[q.id for q in queries], fail=lambda m: fail(fields.get("id", item), m))
        if not qid or not _ID.fullmatch(qid):
            raise fail(fields.get("id", item), f"query id {qid!r} must be letters, digits, '_', '.' or '-'")
        if any(q.id == qid for q in queries):
            raise fail(fields["id"], f"query id {qid!r} is registered twice")
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
            bind_query(parse_query(query, f"{name} query {qid}"), catalog)
        except StreamwardenError as exc:
            raise fail(fields["query"], f"query {qid}: {str(exc).splitlines()[0]}") from None
        level = _scalar(fields.get("level")) if "level" in fields else None
        if level is not None:
            _check_level(catalog, qid, level, users, lambda m: fail(fields["level"], m))
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


def grant_intervals(changes: Sequence[AccessChange], query: str, user: str) -> list[tuple[datetime, datetime | None]]:
    """The [from, to) periods in which ``user`` may see ``query``'s rows (to None: still open)."""
    ordered = sorted((c for c in changes if c.query == query and c.user == user), key=lambda c: (c.ts, c.line))
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


__all__ = ["AccessChange", "RegisteredQuery", "grant_intervals", "load_access", "load_queries", "load_queries_text",
           "parse_access"]
