"""The public Python API: load a catalog, authorize a query, explain, replay, run.

    >>> import streamwarden as sw
    >>> catalog = sw.load_catalog("examples/drill.yaml")
    >>> rewriting = sw.authorize(catalog, "paul", "SELECT SID, Pos FROM Position")
    >>> [g.id for g in rewriting.deployed]
    ['ag1']
    >>> rows = sw.replay(catalog, "paul", "SELECT SID, Pos FROM Position",
    ...                  {"Position": "data/Position"})            # doctest: +SKIP

The CLI (:mod:`streamwarden.cli.main`) is a thin layer over these functions.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamwarden.catalog.loader import load_catalog
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.store import DEFAULT_STORE, CatalogStore
from streamwarden.engine.execute import build_job, replay_rows, start_stream, write_replay
from streamwarden.engine.session import get_spark
from streamwarden.passes import SecurityOptions, input_stats, secure
from streamwarden.rewrite.algorithm import Rewriting

__all__ = [
    "Catalog", "CatalogStore", "Rewriting", "authorize", "load_catalog", "replay", "replay_to_file", "run",
]


def authorize(catalog: Catalog, user: str, query: str, *, join_strategy: str = "adaptive",
              inputs: Mapping[str, str | Path] | None = None) -> Rewriting:
    """The authorized graphs ``user`` may run for ``query``: every security pass applied.

    ``inputs`` (stream → path), when given, feed the adaptive SCJoin its statistics.
    """
    stats = input_stats(catalog, inputs) if inputs else {}
    return secure(catalog, user, query, SecurityOptions(join_strategy, stats))


def replay(
    catalog: Catalog,
    user: str,
    query: str,
    inputs: Mapping[str, str | Path],
    *,
    spark: SparkSession | None = None,
    store_url: str | None = None,
    join_strategy: str = "adaptive",
) -> list[dict]:
    """Run the authorized plan over recorded files and return the result rows as dicts."""
    rewriting = authorize(catalog, user, query, inputs=inputs, join_strategy=join_strategy)
    job = build_job(spark or get_spark(), catalog, rewriting, inputs, streaming=False, store_url=store_url)
    return [json.loads(line) for line in replay_rows(job)]


def replay_to_file(
    catalog: Catalog,
    user: str,
    query: str,
    inputs: Mapping[str, str | Path],
    output: str | Path,
    *,
    spark: SparkSession | None = None,
    store_url: str | None = None,
    join_strategy: str = "adaptive",
) -> int:
    """Like :func:`replay`, writing JSON lines to ``output``; returns the row count."""
    rewriting = authorize(catalog, user, query, inputs=inputs, join_strategy=join_strategy)
    job = build_job(spark or get_spark(), catalog, rewriting, inputs, streaming=False, store_url=store_url)
    return write_replay(job, output)


def run(
    catalog: Catalog,
    user: str,
    query: str,
    inputs: Mapping[str, str | Path],
    sink: str,
    *,
    checkpoint: str | Path | None = None,
    store_url: str = DEFAULT_STORE,
    spark: SparkSession | None = None,
    lateness: str = "0 seconds",
    trigger: str | None = None,
    available_now: bool = False,
    max_files_per_trigger: int | None = None,
    join_strategy: str = "adaptive",
) -> StreamingQuery:
    """Start the authorized plan continuously over file streams; returns the Spark query.

    Action values are read from ``store_url`` at every micro-batch. The checkpoint
    (default: under ``.streamwarden/checkpoints``, keyed by user, query and sink) makes a
    restart neither lose nor duplicate results.
    """
    store = CatalogStore(store_url)
    if catalog.text:
        store.save(catalog, keep_live_actions=True)  # actions may have changed since the file was written
    rewriting = authorize(catalog, user, query, inputs=inputs, join_strategy=join_strategy)
    if checkpoint is None:
        key = hashlib.sha256(f"{user}\0{query}\0{sink}".encode()).hexdigest()[:16]
        checkpoint = Path(".streamwarden") / "checkpoints" / key
    job = build_job(spark or get_spark(), catalog, rewriting, inputs, streaming=True, store_url=store.url,
                    lateness=lateness, max_files_per_trigger=max_files_per_trigger)
    return start_stream(job, sink, checkpoint, trigger=trigger, available_now=available_now)
