"""streamwarden: access control for continuous queries over data streams on Spark.

    >>> import streamwarden as sw
    >>> catalog = sw.load_catalog("examples/drill.yaml")
    >>> [g.id for g in sw.authorize(catalog, "paul", "SELECT SID, Pos FROM Position").deployed]
    ['ag1']
"""

from streamwarden.api import Catalog, CatalogStore, Rewriting, authorize, load_catalog, replay, replay_to_file, run
from streamwarden.errors import StreamwardenError

__all__ = [
    "Catalog", "CatalogStore", "Rewriting", "StreamwardenError", "authorize", "load_catalog", "replay",
    "replay_to_file", "run",
]
__version__ = "0.1.0"
