"""The authorization server's log as a SQL table, with nothing but SQLAlchemy around it.

Kept apart from :mod:`~streamwarden.network.authorization` so that the access-SP data
source, which Spark runs in its own Python processes, reads the log without importing
the rest of streamwarden.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator

from sqlalchemy import Boolean, Column, DateTime, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Engine

metadata = MetaData()
changes_table = Table(
    "access_changes", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("query", String, nullable=False),
    Column("user", String, nullable=False),
    Column("grant", Boolean, nullable=False),
)


def read_changes(engine: Engine, after: int = 0, upto: int | None = None) -> Iterator[tuple[int, datetime, str, str, bool]]:
    """(seq, ts in UTC, query, user, grant) in the order issued, ``after`` < seq <= ``upto``."""
    query = select(changes_table).where(changes_table.c.seq > after).order_by(changes_table.c.seq)
    if upto is not None:
        query = query.where(changes_table.c.seq <= upto)
    with engine.connect() as conn:
        for row in conn.execute(query):
            ts = row.ts if row.ts.tzinfo is not None else row.ts.replace(tzinfo=timezone.utc)  # SQLite: naive UTC
            yield row.seq, ts.astimezone(timezone.utc), row.query, row.user, bool(row.grant)


def last_seq(engine: Engine) -> int:
    """The ``seq`` of the latest change (0: none yet)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.max(changes_table.c.seq))).scalar() or 0)


__all__ = ["changes_table", "last_seq", "metadata", "read_changes"]
