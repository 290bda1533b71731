"""The store: where the catalog, the live action values, tokens, registrations, grants and
the audit trail are kept (any SQLAlchemy URL, :data:`STORE_HELP`), and where it may lie.

    >>> import tempfile
    >>> url = f"sqlite:///{tempfile.mkdtemp()}/home/c.db"
    >>> store_log_dir(url).name, CatalogStore(url).url == url
    ('logs', True)
"""

from __future__ import annotations

import os
from pathlib import Path

from streamwarden.catalog.generation import GenerationCache
from streamwarden.catalog.store import STORE_HELP, CatalogStore, NoStore, UnknownName, default_store
from streamwarden.errors import StreamwardenError
from streamwarden.names import inside


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


__all__ = ["STORE_HELP", "CatalogStore", "GenerationCache", "NoStore", "UnknownName", "check_store_outside",
           "default_store", "store_log_dir"]
