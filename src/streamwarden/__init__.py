"""streamwarden: access control for continuous queries over data streams on Spark.

    >>> import streamwarden as sw
    >>> catalog = sw.load_catalog("examples/drill.yaml")
    >>> [g.id for g in sw.authorize(catalog, "paul", "SELECT SID, Pos FROM Position").deployed]
    ['ag1']
"""

from typing import Any

from streamwarden.errors import StreamwardenError

_API = ("Catalog", "CatalogStore", "RegisteredQuery", "Rewriting", "authorize", "load_catalog", "register", "replay",
        "replay_to_file", "run", "run_network", "unregister", "update_catalog")


def __getattr__(name: str) -> Any:
    # The API (and Spark with it) loads on first use, so a Spark Python worker that imports one
    # small module of streamwarden (the punctuated-files reader) does not pay for the whole package.
    if name in _API:
        from streamwarden import api

        return getattr(api, name)
    raise AttributeError(f"module 'streamwarden' has no attribute {name!r}")

__all__ = [
    "Catalog", "CatalogStore", "RegisteredQuery", "Rewriting", "StreamwardenError", "authorize", "load_catalog",
    "register", "replay", "replay_to_file", "run", "run_network", "unregister", "update_catalog",
]
__version__ = "0.1.0"
