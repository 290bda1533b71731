"""Persistent catalog store (SQLite by default, any SQLAlchemy URL otherwise).

The store keeps the validated catalog text, one row per policy (for inspection by other
tools), and the *live* action table. Running queries read actions from here at every
micro-batch, so ``store.set_action("a", start=...)`` takes effect without re-registering
anything.

    >>> import tempfile, os
    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> store = CatalogStore(url)
    >>> store.save(load_catalog_text("streams: {S: {schema: {ts: timestamp}}}\\nactions: {a: {target: 5}}"))
    >>> store.actions()["a"].start is None
    True
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Column, DateTime, Float, MetaData, String, Table, Text, create_engine, delete, insert, select, update
from sqlalchemy.engine import Engine

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Action, Catalog

DEFAULT_STORE = "sqlite:///.streamwarden/catalog.db"

_metadata = MetaData()
_sources = Table(
    "catalog_source", _metadata,
    Column("name", String, primary_key=True),
    Column("text", Text, nullable=False),
    Column("loaded_at", DateTime(timezone=True), nullable=False),
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
    Column("start", DateTime(timezone=True)),
    Column("end", DateTime(timezone=True)),
    Column("target", Float),
)


def sqlite_url(path: str | Path) -> str:
    return f"sqlite:///{Path(path).resolve()}"


class CatalogStore:
    """A catalog database. ``url`` is a SQLAlchemy URL; SQLite folders are created."""

    def __init__(self, url: str = DEFAULT_STORE):
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            db_path = Path(url.removeprefix("sqlite:///"))
            db_path.parent.mkdir(parents=True, exist_ok=True)
            url = sqlite_url(db_path)  # absolute, so Spark's Python workers find the same file
        self.url = url
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = create_engine(self.url)
            _metadata.create_all(self._engine)
        return self._engine

    def save(self, catalog: Catalog, *, keep_live_actions: bool = False) -> None:
        """Replace the stored catalog by ``catalog`` (validated).

        With ``keep_live_actions`` the actions already in the store keep their current
        values (a running system's state) and only new actions are added.
        """
        with self.engine.begin() as conn:
            live = {row.name for row in conn.execute(select(_actions.c.name))} if keep_live_actions else set()
            for table in (_sources, _policies) if keep_live_actions else (_sources, _policies, _actions):
                conn.execute(delete(table))
            conn.execute(insert(_sources).values(name=catalog.name, text=catalog.text, loaded_at=datetime.now(timezone.utc)))
            for p in catalog.policies:
                conn.execute(insert(_policies).values(
                    id=p.id, subject=p.subject, streams=json.dumps(p.streams),
                    attributes=json.dumps(p.attributes or "*"), privilege=p.privilege, where_text=p.where_text,
                    time=json.dumps([str(b) for b in p.time]) if p.time else None,
                    window=json.dumps(p.window) if p.window else None,
                ))
            for a in catalog.actions.values():
                if a.name in live:
                    continue
                conn.execute(insert(_actions).values(name=a.name, start=a.start, end=a.end, target=a.target))

    def load(self) -> Catalog:
        """The stored catalog, re-validated, with the live action values."""
        with self.engine.connect() as conn:
            row = conn.execute(select(_sources.c.name, _sources.c.text)).first()
        if row is None:
            from streamwarden.errors import CatalogError

            raise CatalogError(f"the store {self.url} holds no catalog: load one with 'streamwarden check FILE --store URL'")
        catalog = load_catalog_text(row.text, row.name)
        return Catalog(catalog.streams, catalog.roles, catalog.users, self.actions(), catalog.policies,
                       catalog.name, catalog.text, catalog.lattice)

    def actions(self) -> dict[str, Action]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(_actions)).all()
        return {r.name: Action(r.name, _utc(r.start), _utc(r.end), r.target) for r in rows}

    def set_action(self, name: str, **values: object) -> None:
        """Update an action's start, end or target (``None`` clears the value)."""
        unknown = set(values) - {"start", "end", "target"}
        if unknown:
            raise ValueError(f"unknown action fields: {', '.join(sorted(unknown))}")
        with self.engine.begin() as conn:
            result = conn.execute(update(_actions).where(_actions.c.name == name).values(**values))
            if result.rowcount == 0:
                conn.execute(insert(_actions).values(name=name, **values))


def _utc(value: datetime | None) -> datetime | None:
    # SQLite returns naive datetimes; everything streamwarden stores is UTC.
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
