"""The authorization server: the policies P ⊆ CQ × U, kept as a log of access changes.

Every grant, revocation or expiry is one row (time, query, user, sign) in the catalog
store, in the order issued. A running network reads the log at every micro-batch, so
a change takes effect without restarting anything; the rows a user then receives follow
:func:`streamwarden.network.registry.grant_intervals` (by the rows' event time).

    >>> import tempfile, os
    >>> server = AuthorizationServer("sqlite:///" + os.path.join(tempfile.mkdtemp(), "auth.db"))
    >>> server.grant("q1", "ann", "2026-03-01T10:00:00Z"); server.revoke("q1", "ann", "2026-03-01T10:05:00Z")
    >>> [(c.user, c.grant) for c in server.changes()]
    [('ann', True), ('ann', False)]
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Boolean, Column, DateTime, Integer, MetaData, String, Table, insert, select

from streamwarden.catalog.store import CatalogStore, _utc
from streamwarden.errors import StreamwardenError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.network.registry import AccessChange

_metadata = MetaData()
_changes = Table(
    "access_changes", _metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("query", String, nullable=False),
    Column("user", String, nullable=False),
    Column("grant", Boolean, nullable=False),
)


class AuthorizationServer:
    """Access changes in a SQL store (SQLite by default; the catalog store's URL)."""

    def __init__(self, url: str):
        self.store = CatalogStore(url)
        _metadata.create_all(self.store.engine)

    def grant(self, query: str, user: str, ts: str | datetime | None = None) -> None:
        self._record(query, user, True, ts)

    def revoke(self, query: str, user: str, ts: str | datetime | None = None) -> None:
        self._record(query, user, False, ts)

    def load(self, changes: tuple[AccessChange, ...] | list[AccessChange]) -> None:
        """Append changes (e.g. an access-change file) in their order."""
        for c in sorted(changes, key=lambda c: c.line):
            self._record(c.query, c.user, c.grant, c.ts)

    def changes(self) -> tuple[AccessChange, ...]:
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(_changes).order_by(_changes.c.seq)).all()
        return tuple(AccessChange(_utc(r.ts), r.query, r.user, r.grant, r.seq) for r in rows)  # type: ignore[arg-type]

    def _record(self, query: str, user: str, grant: bool, ts: str | datetime | None) -> None:
        when = _time(ts)
        with self.store.engine.begin() as conn:
            conn.execute(insert(_changes).values(ts=when, query=query, user=user, grant=grant))


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
