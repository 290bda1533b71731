"""Catalogs, the store, registrations and grants: the data the network runs on.

A catalog (streams, roles, users, actions, policies) is loaded from YAML and kept in a
store (any SQLAlchemy URL, :data:`STORE_HELP`) together with the live action values, the
registered queries and the log of access changes (grants and revocations) that an
:class:`AuthorizationServer` records.

    >>> import os, tempfile
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
    >>> store_url = register([RegisteredQuery("q1", ("ann",), "SELECT a FROM S")], cat, url)
    >>> [c.user for c in AuthorizationServer(store_url).grant("q1", "ann", "2026-03-01T10:00:00Z")]
    ['ann']
    >>> access_periods(AuthorizationServer(store_url).changes(), RegisteredQuery("q1", ("ann",), "-"), "ann")[0][0]
    datetime.datetime(2026, 3, 1, 10, 0, tzinfo=datetime.timezone.utc)
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Sequence

from streamwarden.catalog.authorization import AuthorizationServer, change_time
from streamwarden.catalog.loader import load_catalog, load_catalog_text
from streamwarden.catalog.model import Catalog, StreamDef
from streamwarden.catalog.registry import (STREAM, AccessChange, RegisteredQuery, access_periods, load_access,
                                           load_queries, own_id, parse_own_id)
from streamwarden.catalog.store import STORE_HELP, CatalogStore, NoStore, UnknownName, default_store
from streamwarden.errors import StreamwardenError
from streamwarden.names import inside


def access_time(ts: str | datetime | None) -> datetime:
    """The instant an access change applies from: ``ts`` (ISO-8601 text, or a datetime) in UTC,
    now when None. What :meth:`AuthorizationServer.grant` and ``revoke`` record.

        >>> access_time("2026-03-01T11:00:00+01:00").isoformat()
        '2026-03-01T10:00:00+00:00'
    """
    return change_time(ts)


def register(queries: Sequence[RegisteredQuery], catalog: Catalog | None = None, store_url: str | None = None) -> str:
    """Register queries (and store ``catalog``): a running network starts them at its next poll.
    Returns the store's URL."""
    server = AuthorizationServer(store_url)
    server.register(queries, catalog)
    return server.store.url


def unregister(query_id: str, store_url: str | None = None) -> str:
    """Remove a registered query from a store that exists: a running network stops it at its next
    poll (its grants stay logged). Returns the store's URL."""
    server = AuthorizationServer.existing(store_url)
    server.unregister(query_id)
    return server.store.url


def update_catalog(catalog: Catalog | str | Path, store_url: str | None = None) -> None:
    """Load a new catalog into the store (live action values kept). A running network recompiles at
    its next poll and restarts only the pipelines whose authorized plans it changed."""
    CatalogStore(store_url).save(catalog if isinstance(catalog, Catalog) else load_catalog(catalog))


def check_store_outside(store_url: str | None, folder: str | os.PathLike[str], what: str) -> None:
    """Refuse a SQLite store (every user's grants, the live state) that lies inside ``folder``,
    an output folder described by ``what`` (e.g. ``"the output folder"``). Creates nothing.

        >>> import tempfile
        >>> home = tempfile.mkdtemp()
        >>> check_store_outside(f"sqlite:///{home}/out/c.db", f"{home}/out", "the output folder")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        streamwarden.errors.StreamwardenError: the store .../out/c.db lies inside the output folder .../out: ...
    """
    store = CatalogStore(store_url, create=False)
    if store.path is not None and inside(store.path, folder):
        raise StreamwardenError(f"the store {store.path} lies inside {what} {folder}: it holds every user's grants, "
                                "so keep it out of any output folder (--store elsewhere)")


def store_log_dir(store_url: str | None = None) -> Path:
    """``logs/`` next to the store (default: :func:`default_store`), where Spark's own log goes
    unless told otherwise; creates nothing."""
    return CatalogStore(store_url, create=False).home / "logs"


__all__ = [
    "STORE_HELP", "STREAM", "AccessChange", "AuthorizationServer", "Catalog", "CatalogStore", "NoStore",
    "RegisteredQuery", "StreamDef", "UnknownName", "access_periods", "access_time", "check_store_outside",
    "default_store", "load_access", "load_catalog", "load_catalog_text", "load_queries", "own_id", "parse_own_id",
    "register", "store_log_dir", "unregister", "update_catalog",
]
