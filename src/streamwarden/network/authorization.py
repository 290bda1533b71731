"""The authorization server: the policies P ⊆ CQ × U, kept as a log of access changes.

Every grant, revocation or expiry is one row (time, query, user, sign) in the catalog
store, in the order issued (``seq``). Each row is also an access SP: a running network
reads the new ones as a stream alongside its data (:mod:`streamwarden.network.access_stream`),
so a change takes effect without restarting anything; the rows a user then receives
follow :func:`streamwarden.network.registry.grant_intervals` (by the rows' event time).
A grant with an expiry (``until``) is a grant and, at once, the revocation that ends it.

    >>> import tempfile, os
    >>> server = AuthorizationServer("sqlite:///" + os.path.join(tempfile.mkdtemp(), "auth.db"))
    >>> server.grant("q1", "ann", "2026-03-01T10:00:00Z"); server.revoke("q1", "ann", "2026-03-01T10:05:00Z")
    >>> [(c.user, c.grant) for c in server.changes()]
    [('ann', True), ('ann', False)]
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import insert

from streamwarden.catalog.store import CatalogStore
from streamwarden.errors import StreamwardenError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.network.access_log import changes_table, last_seq, metadata, read_changes
from streamwarden.network.registry import AccessChange

class AuthorizationServer:
    """Access changes in a SQL store (SQLite by default; the catalog store's URL)."""

    def __init__(self, url: str):
        self.store = CatalogStore(url)
        metadata.create_all(self.store.engine)

    def grant(self, query: str, user: str, ts: str | datetime | None = None, *,
              until: str | datetime | None = None) -> None:
        """Grant ``user`` access to ``query`` from ``ts`` (default: now), until ``until`` if given."""
        if until is not None and _time(until) <= _time(ts):
            raise StreamwardenError(f"a grant must expire after it starts ({until} is not after {ts or 'now'})")
        self._record(query, user, True, ts)
        if until is not None:
            self._record(query, user, False, until)

    def revoke(self, query: str, user: str, ts: str | datetime | None = None) -> None:
        self._record(query, user, False, ts)

    def load(self, changes: tuple[AccessChange, ...] | list[AccessChange]) -> None:
        """Append changes (e.g. an access-change file) in their order."""
        for c in sorted(changes, key=lambda c: c.line):
            self._record(c.query, c.user, c.grant, c.ts)

    def changes(self, *, after: int = 0, upto: int | None = None) -> tuple[AccessChange, ...]:
        """The changes in the order issued; ``after``/``upto`` bound their ``seq`` (an SP stream's offsets)."""
        return tuple(AccessChange(ts, query, user, grant, seq)
                     for seq, ts, query, user, grant in read_changes(self.store.engine, after, upto))

    def last_seq(self) -> int:
        """The ``seq`` of the latest change (0: none yet)."""
        return last_seq(self.store.engine)

    def _record(self, query: str, user: str, grant: bool, ts: str | datetime | None) -> None:
        when = _time(ts)
        with self.store.engine.begin() as conn:
            conn.execute(insert(changes_table).values(ts=when, query=query, user=user, grant=grant))


def _time(ts: str | datetime | None) -> datetime:
    if ts is None:
        return datetime.now(timezone.utc)
    if isinstance(ts, datetime):
        return ts.astimezone(timezone.utc)
    try:
        return parse_timestamp(ts)
    except ValueError:
        raise StreamwardenError(f"{ts!r} is not an ISO-8601 timestamp") from None


__all__ = ["AuthorizationServer"]
