"""One user's query: authorize it, explain it, replay it over recorded files, run it continuously.

    >>> import streamwarden as sw
    >>> catalog = sw.load_catalog("examples/drill.yaml")
    >>> rewriting = sw.authorize(catalog, "paul", "SELECT SID, Pos FROM Position")
    >>> [g.id for g in rewriting.deployed]
    ['ag1']
    >>> print(explain_text(rewriting, catalog, sql=False).splitlines()[0])
    Query for paul (roles: Doctor): SELECT SID, Pos FROM Position
    >>> rows = sw.replay(catalog, "paul", "SELECT SID, Pos FROM Position",
    ...                  {"Position": "data/Position"})            # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from streamwarden.catalog.lattice import query_level
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.changes import OPERATOR, Actor
from streamwarden.catalog.store import CatalogStore
from streamwarden.engine.execute import build_job, check_inputs, replay_rows
from streamwarden.engine.levels.processors import LevelProcessor, LevelQuery, check_outside_output, start_processors
from streamwarden.engine.levels.routing import SHEPHERD, route_tuples, shared_streams, start_shepherds
from streamwarden.engine.session import get_spark
from streamwarden.engine.sinks import check_checkpoint, check_replay_output, start_stream, write_replay
from streamwarden.explain import explain_json, explain_text
from streamwarden.names import check_name, check_names
from streamwarden.plan.nodes import sources
from streamwarden.security.levels.guard import check_write
from streamwarden.security.passes import SecurityOptions, secure
from streamwarden.security.rewrite.algorithm import Rewriting

if TYPE_CHECKING:  # pyspark lives in the engine and the runtime; the API only passes sessions on
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = [
    "LevelProcessor", "LevelQuery", "ReplayReport", "Rewriting", "authorize", "authorize_registered", "explain_json",
    "explain_text", "replay", "replay_to_file", "run", "run_levels",
]


@dataclass(frozen=True)
class ReplayReport:
    """What a replay wrote: the row count and, with security levels and a query at the top
    level, the tuples per stream the shepherd put at the top because their source is
    unknown (empty below the top: that count describes data a lower level does not dominate)."""

    rows: int
    unknown_sources: dict[str, int] = field(default_factory=dict)


def authorize(catalog: Catalog, user: str, query: str, *, join_strategy: str = "adaptive",
              level: str | None = None, into: str | None = None) -> Rewriting:
    """The authorized graphs ``user`` may run for ``query``: every security pass applied.

    ``level`` is the security level to run at (default: the user's clearance); ``into``
    names the stream the results are written into, which must be of that level.
    """
    check_name("user", user)
    if into is not None:
        check_name("stream", into)
    rewriting = secure(catalog, user, query, SecurityOptions(join_strategy, level=level))
    if into is not None:
        check_write(catalog, rewriting.level, into)
    return rewriting


def authorize_registered(catalog: Catalog, query: RegisteredQuery, user: str) -> Rewriting:
    """The authorized graphs a network deploys for ``user``'s share of the registered ``query``:
    every security pass at the query's level (``user`` must be cleared for it), the network's
    grants opening the streams no role policy governs (:meth:`RegisteredQuery.granted_streams`).
    Raises a :class:`~streamwarden.errors.StreamwardenError` naming what is wrong.

        >>> from streamwarden.catalog.loader import load_catalog_text
        >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
        >>> registered = RegisteredQuery("q1", ("ann",), "SELECT a FROM S")
        >>> [g.id for g in authorize_registered(cat, registered, "ann").deployed]
        ['ag1']
    """
    if query.level is not None:
        query_level(catalog, user, query.level)
    options = SecurityOptions(level=query.level, granted_streams=query.granted_streams(catalog))
    return secure(catalog, user, query.bind(catalog), options)


def replay(
    catalog: Catalog,
    user: str,
    query: str,
    inputs: Mapping[str, str | Path],
    *,
    spark: SparkSession | None = None,
    store_url: str | None = None,
    join_strategy: str = "adaptive",
    level: str | None = None,
) -> list[dict]:
    """Run the authorized plan over recorded files and return the result rows as dicts."""
    rewriting = authorize(catalog, user, query, join_strategy=join_strategy, level=level)
    _check_inputs(catalog, rewriting, inputs, recorded=True)
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
    level: str | None = None,
    into: str | None = None,
) -> ReplayReport:
    """Like :func:`replay`, writing the rows to ``output``; says how many rows it wrote.

    ``output`` is one of two forms (:func:`streamwarden.engine.sinks.write_replay`):

    * ``NAME.jsonl`` (or ``.json``): one JSON-lines file, rows in a stable order, written
      through the driver; replaced atomically.
    * any other name: a folder that Spark's tasks fill in parallel with JSON-lines part files
      (``part-*.json``, rows in no particular order; the driver never holds them), read back
      with any JSON-lines reader (``spark.read.json(output)``, ``cat output/part-*``). It
      appears complete or not at all; it replaces an earlier replay's folder, but a folder
      holding anything else, a symlink or a file there is refused before anything runs
      (:class:`~streamwarden.errors.InputError`), as is ``ON RESULT``, whose policy must
      come ahead of its rows.

    Both forms hold the same lines, private to their owner (folders 0700, files 0600).
    ``into`` names the stream the results are written into (checked before anything runs:
    a query at level l writes only into a stream of level l).

        >>> # api.replay_to_file(catalog, "paul", "SELECT SID, Pos FROM Position",
        >>> #                    {"Position": "data/Position"}, "results/paul").rows
    """
    rewriting = authorize(catalog, user, query, join_strategy=join_strategy, level=level, into=into)
    _check_inputs(catalog, rewriting, inputs, recorded=True)
    check_replay_output(output, on_result=bool(rewriting.on_result))  # before Spark reads anything
    job = build_job(spark or get_spark(), catalog, rewriting, inputs, streaming=False, store_url=store_url)
    rows = write_replay(job, output)
    return ReplayReport(rows, job.unknown_sources())


def run(
    catalog: Catalog,
    user: str,
    query: str,
    inputs: Mapping[str, str | Path],
    sink: str,
    *,
    checkpoint: str | Path | None = None,
    store_url: str | None = None,
    spark: SparkSession | None = None,
    lateness: str = "0 seconds",
    trigger: str | None = None,
    available_now: bool = False,
    max_files_per_trigger: int | None = None,
    join_strategy: str = "adaptive",
    level: str | None = None,
    into: str | None = None,
    actor: Actor = OPERATOR,
) -> StreamingQuery:
    """Start the authorized plan continuously over file streams; returns the Spark query.
    ``catalog`` is saved into the store first (an audit record under ``actor``).

    Action values are read from ``store_url`` (default: :func:`~streamwarden.catalog.store.default_store`)
    at every micro-batch. The checkpoint (default: ``checkpoints/<key>`` next to the store,
    keyed by user, query, sink and level; never inside the sink, nor the sink inside it) makes a
    restart neither lose nor duplicate results. Every input folder must exist. :func:`keep_running
    <streamwarden.api.spark.keep_running>` keeps the query going, applying nothing but what its
    source reads.
    """
    if checkpoint is not None and sink != "console":
        check_checkpoint(checkpoint, sink, sink_written=True)  # no overlap: before anything is written
    store = CatalogStore(store_url, actor=actor)
    if catalog.text:
        store.save(catalog)  # live action values stay (actions may have changed since the file was written)
    rewriting = authorize(catalog, user, query, join_strategy=join_strategy, level=level, into=into)
    _check_inputs(catalog, rewriting, inputs)
    if checkpoint is None:
        # The level is part of the key: queries of different levels never share a checkpoint.
        sink_key = sink if sink == "console" else str(Path(sink).resolve())
        key = hashlib.sha256(f"{user}\0{query}\0{sink_key}\0{rewriting.level}".encode()).hexdigest()[:16]
        checkpoint = store.home / "checkpoints" / key
    job = build_job(spark or get_spark(), catalog, rewriting, inputs, streaming=True, store_url=store.url,
                    lateness=lateness, max_files_per_trigger=max_files_per_trigger)
    return start_stream(job, sink, checkpoint, trigger=trigger, available_now=available_now)


def run_levels(
    catalog: Catalog,
    queries: Sequence[LevelQuery],
    inputs: Mapping[str, str | Path],
    output_dir: str | Path,
    *,
    store_url: str | None = None,
    spark: SparkSession | None = None,
    lateness: str = "0 seconds",
    trigger: str | None = None,
    available_now: bool = False,
    actor: Actor = OPERATOR,
) -> list[LevelProcessor]:
    """Run many users' continuous queries, one processor (Spark streaming query) per level.

    Queries of different security levels never share a stateful operator, a streaming
    query or a checkpoint; queries of one level share their processor. Every query is
    authorized before anything starts (a query above its user's clearance stops them
    all). A stream the processors read as it is (not through a shield or a ``[ROWS n]``
    window) is read once, by the trusted shepherd's own streaming query, which levels its
    tuples for all of them (:mod:`streamwarden.engine.levels.routing`); the shepherds come
    first in the list returned (level ``_shepherd <stream>``, no queries). Rows of query ``q`` land in
    ``output_dir/q/`` (:func:`streamwarden.engine.levels.processors.read_query_output`
    reads them).
    """
    check_names("query id", [q.id for q in queries])  # they name folders under output_dir
    for q in queries:
        check_name("user", q.user)
    store = CatalogStore(store_url, actor=actor)
    if catalog.text:
        store.save(catalog)  # live action values stay (an audit record under actor)
    session = spark or get_spark()
    rewritings = {q.id: authorize(catalog, q.user, q.query, level=q.level) for q in queries}
    for rewriting in rewritings.values():  # every query authorized first: a refusal stops them all
        _check_inputs(catalog, rewriting, inputs)
    # Outside the output tree (a checkpoint holds raw tuples), one per output folder.
    key = hashlib.sha256(str(Path(output_dir).resolve()).encode()).hexdigest()[:16]
    checkpoints = store.home / "checkpoints" / f"levels-{key}"
    check_outside_output(checkpoints, output_dir)
    shared = shared_streams(catalog, rewritings.values())  # none without a lattice
    lattice = catalog.lattice
    routed = {stream: route_tuples(checkpoints, catalog.streams[stream], lattice)
              for stream in shared if lattice is not None}
    jobs = {}
    for q in queries:
        jobs[q.id] = build_job(session, catalog, rewritings[q.id], inputs, streaming=True, store_url=store.url,
                               lateness=lateness, metrics_tag=f"_{q.id}", routed=routed)
    routes = start_shepherds(session, catalog, shared, inputs, checkpoints, trigger=trigger,
                             available_now=available_now)
    shepherds = [LevelProcessor(f"{SHEPHERD} {stream}", (), route.query) for stream, route in routes.items()]
    return shepherds + start_processors(session, jobs, queries, output_dir, checkpoints, trigger=trigger,
                                        available_now=available_now)


def _check_inputs(catalog: Catalog, rewriting: Rewriting, inputs: Mapping[str, str | Path], *,
                  recorded: bool = False) -> None:
    """Every stream the query reads has an existing input the reader can read (see
    :func:`streamwarden.engine.execute.check_inputs`; ``recorded``: a replay's)."""
    line_read = {s.stream for s in sources(rewriting.plan) if s.window is not None and s.window.kind == "rows"}
    check_inputs(catalog, {s.stream for s in sources(rewriting.plan)}, inputs, line_read=line_read, recorded=recorded)
