"""Many users' registered queries on one shared network: run it, replay it, explain it, read its outputs.

The queries are registered in a store (:func:`~streamwarden.api.catalog.register`) with
the catalog; grants and revocations decide which user receives which rows, by event time.
:func:`run_network` keeps the network running over file streams (live changes applied at
each :meth:`~NetworkRuntime.poll`), :func:`replay_network` computes what it delivers over
recorded files, and each user's rows land in ``OUTPUT/<user>/<query>/``, which
:func:`read_rows`, :func:`delivery_summary` and :func:`read_status` read and
:func:`forget_query` removes: callers never need to know how those folders are laid out.

    >>> # rt = run_network({"S": "in/S"}, "out", catalog=cat, queries=qs, available_now=True)
    >>> # keep_running(rt, threading.Event()); read_rows("out", "ann", "q1").rows
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from streamwarden.api.store import check_store_outside
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.changes import OPERATOR, Actor
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import AccessChange, RegisteredQuery
from streamwarden.catalog.store import CatalogStore
from streamwarden.engine.execute import check_inputs
from streamwarden.engine.session import get_spark
from streamwarden.engine.sinks import check_checkpoint
from streamwarden.errors import StreamwardenError, UnsupportedError
from streamwarden.explain import network_json
from streamwarden.language.parser import parse_query
from streamwarden.names import safe_path
from streamwarden.papers.network.optimizer import SharedPlan, network_text, shared_network
from streamwarden.papers.network.switches import PlacedNetwork, place_switches
from streamwarden.plan.nodes import sources
from streamwarden.runtime import deliveries
from streamwarden.runtime.deliveries import MAX_CURSOR, Page
from streamwarden.runtime.layout import NetworkLayout, network_layout
from streamwarden.runtime.network import NetworkRuntime, default_checkpoint_root, forget_query
from streamwarden.runtime.network import read_status as _read_status
from streamwarden.runtime.network_replay import replay_network as _replay_network
from streamwarden.runtime.plan import plan_network

if TYPE_CHECKING:  # pyspark lives in the engine and the runtime; the API only passes sessions on
    from pyspark.sql import SparkSession


# -- running ---------------------------------------------------------------------------------------
def run_network(
    inputs: Mapping[str, str | Path],
    output_dir: str | Path,
    *,
    store_url: str | None = None,
    catalog: Catalog | None = None,
    queries: Sequence[RegisteredQuery] | None = None,
    checkpoint_root: str | Path | None = None,
    spark: SparkSession | None = None,
    lateness: str = "0 seconds",
    trigger: str | None = None,
    available_now: bool = False,
    actor: Actor = OPERATOR,
) -> NetworkRuntime:
    """Start the shared network of the queries registered in the store: ``queries`` (with
    ``catalog``) are registered first, or ``catalog`` alone is stored (audit records under
    ``actor``). Every mechanism applies
    at once: role policies (live actions included), security punctuations, security levels,
    ``[ROWS n]`` windows and ``ON RESULT``. The runtime applies the store's changes (grants,
    revocations, registrations, a new catalog) at each :meth:`~NetworkRuntime.poll`
    (:func:`~streamwarden.api.spark.keep_running` polls it).

    Checked before Spark starts, each refusal a :class:`~streamwarden.errors.StreamwardenError`:
    a SQLite store inside ``output_dir``; a store with no catalog or no registered query; an
    input missing or unreadable for a stream some query reads; a checkpoint (default:
    ``checkpoints/network-<hash of output_dir>`` next to the store) overlapping ``output_dir``.

        >>> # rt = run_network({"S": "in/S"}, "out", catalog=cat, queries=qs, available_now=True)
        >>> # rt.await_termination(); read_rows("out", "ann", "q1").rows
    """
    check_store_outside(store_url, output_dir, "the output folder")
    server = AuthorizationServer(store_url, actor=actor)
    store = server.store
    if queries is not None:
        server.register(queries, catalog)
    elif catalog is not None:
        store.save(catalog)
    if not store.has_catalog():
        raise StreamwardenError(f"the store {store.url} holds no catalog: give --catalog FILE.yaml")
    stored, registered = store.load(), server.registrations()
    if not registered:
        raise StreamwardenError(f"the store {store.url} has no registered query: give --queries QUERIES.yaml "
                                "(with --catalog), or `streamwarden network register` them first")
    read = [s for p in plan_network(stored, registered).pipelines for s in sources(p.rewriting.plan)]
    check_inputs(stored, {s.stream for s in read}, inputs,
                 line_read={s.stream for s in read if s.window is not None and s.window.kind == "rows"})
    root = Path(checkpoint_root) if checkpoint_root is not None else default_checkpoint_root(store.home, output_dir)
    check_checkpoint(root, output_dir, sink_written=True)  # no overlap
    return start_network(inputs, output_dir, store_url=store.url, checkpoint_root=root, spark=spark,
                         lateness=lateness, trigger=trigger, available_now=available_now)


def start_network(
    inputs: Mapping[str, str | Path],
    output_dir: str | Path,
    *,
    store_url: str | None = None,
    checkpoint_root: str | Path | None = None,
    spark: SparkSession | None = None,
    lateness: str = "0 seconds",
    trigger: str | None = None,
    available_now: bool = False,
    sp_folder: str | Path | None = None,
) -> NetworkRuntime:
    """Start the network of whatever the store holds now, none registered yet included (the
    service: users register later). Nothing is checked up front: a pipeline that cannot start
    (an input missing, a query Spark refuses) fails alone, and says why in its users' status.
    ``sp_folder``: where the store's access changes are published (default: next to a SQLite store).
    """
    store = CatalogStore(store_url)
    root = Path(checkpoint_root) if checkpoint_root is not None else default_checkpoint_root(store.home, output_dir)
    runtime = NetworkRuntime(spark or get_spark(), store.url, inputs, output_dir, root, lateness=lateness,
                             trigger=trigger, sp_folder=sp_folder)
    return runtime.start(available_now=available_now)


@dataclass(frozen=True)
class NetworkInfo:
    """What a running network is made of now."""

    queries: int  # registered queries it planned
    pipelines: int  # pipelines planned (a query per level and set of authorized graphs)
    spark_queries: int  # Spark streaming queries running them (a shared group runs many pipelines)
    checkpoint_root: Path
    store_url: str


def network_info(runtime: NetworkRuntime) -> NetworkInfo:
    """How many queries, pipelines and Spark queries ``runtime`` has now, and where its state is."""
    return NetworkInfo(len(runtime.plan.queries), len(runtime.running), len(runtime.streams), runtime.root,
                       runtime.store.url)


def runnable_problem(runtime: NetworkRuntime, query: RegisteredQuery, catalog: Catalog) -> str | None:
    """Why ``runtime`` could not run ``query`` for its users (None: it can), found by compiling it
    as the network would and asking Spark's checker of streaming plans, starting nothing."""
    return runtime.runnable_problem(query, catalog)


@dataclass(frozen=True)
class PipelineStatus:
    """What operators see of one pipeline."""

    name: str
    query: str
    users: tuple[str, ...]
    streams: tuple[str, ...]
    active: bool
    batches: int
    last_batch_ms: int | None
    input_rows: int | None
    rows: Mapping[str, int]  # delivered by this process (since it started)
    withheld: Mapping[str, int]  # emitted outside each user's grants, since this process started
    failure: str | None
    quarantined: int = 0  # broken input records dropped, since this process started
    last_quarantined: str | None = None  # where the latest micro-batch's first one was (file:line), never its text


def pipeline_statuses(runtime: NetworkRuntime) -> list[PipelineStatus]:
    """Each pipeline of ``runtime`` now: its users and streams, whether it runs, its progress,
    the rows it delivered and withheld, its failure and the broken records it quarantined."""
    statuses = []
    for name, running in runtime.pipelines():
        progress: Mapping[str, Any] | None = None
        active = False
        query = runtime.query_of(running)  # its own Spark query, or its shared group's
        if query is not None:
            try:
                active = query.isActive
                progress = query.lastProgress
            except Exception:  # stopping under us
                progress = None
        durations = (progress or {}).get("durationMs") or {}
        pipeline = running.pipeline
        streams = tuple(sorted({s.stream for s in sources(pipeline.rewriting.plan)}))
        statuses.append(PipelineStatus(
            name, pipeline.query.id, pipeline.users, streams, active, running.batches,
            durations.get("triggerExecution"), (progress or {}).get("numInputRows"), dict(running.rows),
            dict(running.withheld), running.failure, running.quarantined, running.last_quarantined))
    return statuses


def deployed_policies(runtime: NetworkRuntime, query: str, user: str) -> tuple[str, ...]:
    """The policy ids of the graphs deployed for ``user``'s pipeline of ``query`` (none: not running)."""
    pipeline = runtime.plan.pipeline_of(query, user)
    if pipeline is None:
        return ()
    return tuple(sorted({p for g in pipeline.rewriting.deployed for p in g.policies}))


# -- replaying and explaining ---------------------------------------------------------------------
def replay_network(catalog: Catalog, queries: Sequence[RegisteredQuery], changes: Sequence[AccessChange],
                   inputs: Mapping[str, str | Path], output_dir: str | Path, *, store_url: str | None = None,
                   spark: SparkSession | None = None, actor: Actor = OPERATOR) -> dict[tuple[str, str], int]:
    """Each listed user's rows of each query over recorded ``inputs``, by their access ``changes``
    (what the running network delivers), in ``output_dir/<user>/<query id>.jsonl``; returns the
    row count per (user, query). Every input is checked before Spark starts; with ``store_url``
    the queries are also registered there (a SQLite store inside ``output_dir`` is refused;
    audit records under ``actor``)."""
    parsed = [s for q in queries for s in parse_query(q.query).sources]
    over_kafka = sorted({s.stream for s in parsed if s.stream in catalog.streams
                         and catalog.streams[s.stream].source is not None})
    if over_kafka:  # fail closed: the network's groups read files only, so far
        raise UnsupportedError(f"stream {over_kafka[0]} is read from Kafka, and the network does not read Kafka yet "
                               "(docs/kafka.md)")
    check_inputs(catalog, {s.stream for s in parsed}, inputs, recorded=True,
                 line_read={s.stream for s in parsed if s.window is not None and s.window.kind == "rows"})
    if store_url:
        check_store_outside(store_url, output_dir, "the output folder")
        AuthorizationServer(store_url, actor=actor).register(queries, catalog)
    return _replay_network(spark or get_spark(), catalog, queries, changes, inputs, output_dir)


@dataclass(frozen=True)
class NetworkExplanation:
    """What a network of registered queries runs (``layout``: its groups, their templates and
    members, and the pipelines of their own, with why), and the paper's view of it (Zaki et
    al.'s shared-operator network: its common prefix and privacy switches), as text, JSON,
    Graphviz DOT or a drawing (the last two: the paper's view)."""

    layout: NetworkLayout
    placed: PlacedNetwork
    shared: SharedPlan

    def text(self) -> str:
        return (self.layout.text() + "\nThe paper's shared network (Zaki et al.: operators shared by a common "
                "prefix, privacy switches where users' grants apply), for comparison:\n\n"
                + network_text(self.placed, self.shared))

    def json(self) -> dict:
        return {"runs": self.layout.json(), **network_json(self.placed, self.shared)}

    def dot(self) -> str:
        return self.placed.to_dot()

    def draw(self, path: str | Path, *, title: str | None = None) -> Path:
        """Draw it into ``path`` (``.png`` or ``.svg``); returns the file written."""
        from streamwarden.papers.network import draw  # matplotlib or Graphviz: only when drawing

        try:
            return draw.draw(self.placed, path, title=title)
        except ImportError:
            raise StreamwardenError("drawing a network needs Graphviz's `dot` on the PATH or the matplotlib package "
                                    "(pip install matplotlib); `--format dot` prints it for Graphviz") from None


def explain_network(catalog: Catalog, queries: Sequence[RegisteredQuery]) -> NetworkExplanation:
    """The shared-operator network of ``queries``, each secured for each of its users (no Spark).

        >>> from streamwarden.catalog.loader import load_catalog_text
        >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}}")
        >>> explain_network(cat, [RegisteredQuery("q1", ("ann",), "SELECT a FROM S")]).json()["queries"]
        ['q1']
    """
    shared = shared_network(catalog, queries)
    return NetworkExplanation(network_layout(plan_network(catalog, queries)), place_switches(shared.network), shared)


# -- each user's outputs ----------------------------------------------------------------------------
def read_rows(output_dir: str | os.PathLike[str], user: str, query: str, *, after: int = 0,
              limit: int = 1000) -> Page:
    """Up to ``limit`` of ``user``'s rows of ``query`` after cursor ``after`` (the rows delivered
    before), in delivery order, as the JSON texts the network wrote; ``Page.next`` resumes."""
    return deliveries.read_rows(safe_path(output_dir, user, query), after=after, limit=limit)


def read_rows_quickly(output_dir: str | os.PathLike[str], user: str, query: str, *, after: int = 0,
                      limit: int = 1000) -> Page | None:
    """:func:`read_rows` when it is quick (from the log as parsed already and a few batches), else
    None: for an event loop, which then reads with :func:`read_rows` where waiting is allowed."""
    return deliveries.read_rows_quickly(safe_path(output_dir, user, query), after=after, limit=limit)


def on_delivery(output_dir: str | os.PathLike[str], listener: Callable[[str, str], None]) -> Callable[[], None]:
    """Call ``listener(user, query)`` after each batch a network in this process delivers to a user
    under ``output_dir`` (from Spark's callback thread: quick, and never raising). Returns the call
    that stops it. A network in another process announces nothing: readers still look."""
    root = Path(os.path.realpath(output_dir))

    def announce(folder: Path) -> None:
        if folder.parent.parent == root:
            listener(folder.parent.name, folder.name)

    return deliveries.on_delivery(announce)


def delivered_rows(output_dir: str | os.PathLike[str], user: str, query: str) -> int:
    """How many rows of ``query`` the network has delivered to ``user`` so far."""
    return deliveries.delivered(safe_path(output_dir, user, query))


@dataclass(frozen=True)
class DeliverySummary:
    """A user's deliveries of one query: rows so far, and the latest batch (None: none yet)."""

    rows: int
    last_batch: str | None = None
    last_rows: int | None = None
    last_at: datetime | None = None  # when that batch was written (None: not readable now)


def delivery_summary(output_dir: str | os.PathLike[str], user: str, query: str) -> DeliverySummary:
    """How many rows of ``query`` ``user`` has received, and her latest batch: its name, rows and time."""
    folder = safe_path(output_dir, user, query)
    logged = deliveries.deliveries(folder)
    if not logged:
        return DeliverySummary(0)
    last = logged[-1]
    try:
        at: datetime | None = datetime.fromtimestamp((folder / last.batch).stat().st_mtime, timezone.utc)
    except OSError:
        at = None
    return DeliverySummary(sum(d.rows for d in logged), last.batch, last.rows, at)


def read_status(output_dir: str | os.PathLike[str], user: str, query: str) -> dict:
    """What the network last reported on ``user``'s share of ``query``: ``receiving`` (bool),
    ``reason`` (why not), her grant periods, the event time reached. Raises :class:`OSError` or
    :class:`ValueError` when it has not reported yet."""
    return _read_status(Path(output_dir), user, query)


__all__ = [
    "MAX_CURSOR", "DeliverySummary", "NetworkExplanation", "NetworkInfo", "NetworkRuntime", "Page", "PipelineStatus",
    "delivered_rows", "delivery_summary", "deployed_policies", "explain_network", "forget_query", "network_info",
    "on_delivery", "pipeline_statuses", "read_rows", "read_rows_quickly", "read_status", "replay_network",
    "run_network", "runnable_problem", "start_network",
]
