"""Catalogs, registrations and grants: the data the network runs on.

A catalog (streams, roles, users, actions, policies) is loaded from YAML and kept in a
store (:mod:`streamwarden.api.store`) together with the live action values, the
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

from datetime import datetime
from pathlib import Path
from typing import Sequence

from streamwarden.catalog.authorization import AuthorizationServer, change_time
from streamwarden.catalog.changes import OPERATOR, Actor
from streamwarden.catalog.diff import CatalogDiff, capped_names, diff_catalogs
from streamwarden.catalog.loader import load_catalog, load_catalog_text
from streamwarden.catalog.model import Catalog, StreamDef
from streamwarden.security.openings import Opening, openings
from streamwarden.catalog.registry import (STREAM, AccessChange, RegisteredQuery, access_periods, load_access,
                                           load_queries, own_id, parse_own_id)
from streamwarden.catalog.store import CatalogStore
from streamwarden.errors import StreamwardenError


def access_time(ts: str | datetime | None) -> datetime:
    """The instant an access change applies from: ``ts`` (ISO-8601 text, or a datetime) in UTC,
    now when None. What :meth:`AuthorizationServer.grant` and ``revoke`` record.

        >>> access_time("2026-03-01T11:00:00+01:00").isoformat()
        '2026-03-01T10:00:00+00:00'
    """
    return change_time(ts)


def register(queries: Sequence[RegisteredQuery], catalog: Catalog | None = None, store_url: str | None = None, *,
             actor: Actor = OPERATOR) -> str:
    """Register queries (and store ``catalog``): a running network starts them at its next poll.
    Returns the store's URL. Each query (and the catalog) is an audit record under ``actor``
    (the operator by default: see :func:`~streamwarden.api.identity.operator_principal`)."""
    server = AuthorizationServer(store_url, actor=actor)
    server.register(queries, catalog)
    return server.store.url


def unregister(query_id: str, store_url: str | None = None, *, actor: Actor = OPERATOR) -> str:
    """Remove a registered query from a store that exists: a running network stops it at its next
    poll (its grants stay logged). Returns the store's URL. An audit record under ``actor``."""
    server = AuthorizationServer.existing(store_url, actor=actor)
    server.unregister(query_id)
    return server.store.url


def update_catalog(catalog: Catalog | str | Path, store_url: str | None = None, *, actor: Actor = OPERATOR) -> None:
    """Load a new catalog into the store (live action values kept). A running network recompiles at
    its next poll and restarts only the pipelines whose authorized plans it changed. An audit
    record under ``actor``."""
    CatalogStore(store_url, actor=actor).save(catalog if isinstance(catalog, Catalog) else load_catalog(catalog))


def replacing(store: CatalogStore, catalog: Catalog) -> CatalogDiff | None:
    """What saving ``catalog`` into ``store`` would change, by name, to say before or after it
    does (None: the store holds no catalog yet, or one that no longer loads)."""
    if not store.has_catalog():
        return None
    try:
        return diff_catalogs(store.load(), catalog)
    except StreamwardenError:
        return None


__all__ = [
    "STREAM", "AccessChange", "AuthorizationServer", "Catalog", "CatalogDiff", "RegisteredQuery", "StreamDef",
    "access_periods", "access_time", "capped_names", "diff_catalogs", "load_access", "load_catalog",
    "load_catalog_text", "load_queries", "Opening", "openings", "own_id", "parse_own_id", "register", "replacing",
    "unregister", "update_catalog",
]
