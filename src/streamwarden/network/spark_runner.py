"""One Spark streaming query runs a whole shared-operator network, with privacy switches.

The inputs of every registered query are read as one stream (a union tagged by stream)
and each micro-batch goes through :meth:`SharedNetworkRun.process` (``foreachBatch``):
the network's vertices are evaluated in topological order on the batch's new tuples,
each vertex once however many queries share it (its result is cached for its
consumers). Joins keep, per side, the tuples their windows may still pair, as explicit
state written with every batch under the checkpoint (so a restart resumes exactly).

Privacy switches (Algorithm 2's placement) read the authorization server's access log
at every batch, so grants and revocations take effect without restarting anything:

* an initial or in-network switch is *on* for a batch when some user of its query holds
  a grant overlapping the batch's event times; when off, the branch behind it is not
  evaluated at all (no operator runs), and the switch keeps the tuples a window of the
  branch could still need, handing them over when it turns on again, so a regained
  grant misses nothing;
* a terminal switch delivers each output row to the query's listed users whose latest
  access change at or before the row's event time is a grant, each into their own
  folder ``DIR/<user>/<query id>/``, written once per batch (idempotently).

What runs continuously: selections, projections and joins over ``[RANGE]`` windows of
streams without role policies. Aggregates and role policies on top are available in
``network replay``; a continuous network refuses them before starting.

    >>> # run = SharedNetworkRun(spark, catalog, queries, {"Stream1": "in/s1"}, "out", store_url, "cp")
    >>> # run.start(available_now=True).awaitTermination(); run.counters["v3"]
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamwarden.catalog.model import Catalog
from streamwarden.engine.columns import compile_expr, physical_name
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.execute import iso_timestamp
from streamwarden.engine.sources import read_input
from streamwarden.errors import UnsupportedError
from streamwarden.network.authorization import AuthorizationServer
from streamwarden.network.dag import Kind
from streamwarden.network.optimizer import SharedPlan, shared_network
from streamwarden.network.registry import AccessChange, RegisteredQuery, grant_intervals
from streamwarden.network.replay import within_periods
from streamwarden.network.switches import PlacedNetwork, SwitchKind, place_switches
from streamwarden.plan.nodes import Filter, Join, Node, Project, Source

STREAM, TS = "_stream", "_ts"


class SharedNetworkRun:
    """A shared network over file streams, ready to start as one Spark streaming query."""

    def __init__(self, spark: SparkSession, catalog: Catalog, queries: Sequence[RegisteredQuery],
                 inputs: Mapping[str, str | Path], output_dir: str | Path, store_url: str,
                 checkpoint: str | Path, *, switches: bool = True):
        self.spark = spark
        self.catalog = catalog
        self.queries = {q.id: q for q in queries}
        self.shared: SharedPlan = shared_network(catalog, queries)
        self.placed: PlacedNetwork = place_switches(self.shared.network)
        self.server = AuthorizationServer(store_url)
        self.inputs = inputs
        self.output = Path(output_dir)
        self.checkpoint = Path(checkpoint)
        self.state_root = self.checkpoint / "network-state"
        self.switches = switches  # False: every branch runs, only the outputs are filtered (post-filtering)
        self.counters: Counter[str] = Counter()  # vertex id -> micro-batches in which it ran
        self._cached: list[DataFrame] = []
        self.horizon = self._horizon()
        self._check_supported()

    # -- setup -----------------------------------------------------------------------------
    def _check_supported(self) -> None:
        for vid, node in self.shared.nodes.items():
            if self.shared.network.vertex(vid).kind is Kind.AGGREGATE:
                raise UnsupportedError(f"vertex {vid} ({node.label}): a continuous shared network runs selections, "
                                       "projections and joins; aggregates run in 'network replay'")
            if isinstance(node, Join) and any(w is not None and w.kind == "rows"
                                              for w in (node.left_window, node.right_window)):
                raise UnsupportedError(f"vertex {vid}: joins over [ROWS n] windows run in replay only")
        streams = {s for q in self.shared.plans.values() for s in _streams(q)}
        ruled = sorted(s for s in streams if any(s in p.streams for p in self.catalog.policies))
        if ruled:
            raise UnsupportedError(f"stream {ruled[0]} has role policies, which apply per user: a continuous shared "
                                   "network cannot share their operators; use 'network replay'")

    def _horizon(self) -> float:
        """Seconds a tuple may still pair in some join of the network (what a closed switch keeps)."""
        sizes = [w.size_seconds or 0.0 for n in self.shared.nodes.values() if isinstance(n, Join)
                 for w in (n.left_window, n.right_window) if w is not None and w.kind == "range"]
        return max(sizes, default=0.0)

    def input_stream(self) -> DataFrame:
        frames = []
        for vid in self.shared.network.topological_order():
            vertex = self.shared.network.vertex(vid)
            if vertex.kind is not Kind.SOURCE:
                continue
            stream = self.catalog.streams[vertex.label]
            raw = read_input(self.spark, stream, self.inputs[stream.name], streaming=True)
            frames.append(raw.select(F.lit(stream.name).alias(STREAM), F.col("ts").alias(TS),
                                     *[F.col(a).alias(physical_name(stream.name, a)) for a in stream.attributes]))
        union = frames[0]
        for other in frames[1:]:
            union = union.unionByName(other, allowMissingColumns=True)
        return union

    def start(self, *, trigger: str | None = None, available_now: bool = False) -> StreamingQuery:
        writer = (self.input_stream().writeStream.foreachBatch(self.process)
                  .option("checkpointLocation", str(self.checkpoint / "spark")).queryName("streamwarden network"))
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger:
            writer = writer.trigger(processingTime=trigger)
        return writer.start()

    # -- one micro-batch --------------------------------------------------------------------
    def process(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            span = batch.agg(F.min(TS).alias("lo"), F.max(TS).alias("hi")).collect()[0]
            if span["lo"] is None:
                return
            lo, hi = _utc(span["lo"]), _utc(span["hi"])
            changes = self.server.changes()
            state = _State(self.spark, self.state_root, batch_id)
            opened = {q: not self.switches or self._open(q, changes, lo, hi) for q in self.queries}
            deltas: dict[str, DataFrame | None] = {}
            for vid in self.shared.network.topological_order():
                deltas[vid] = self._vertex(vid, batch, deltas, opened, state, hi)
            for q, out in self.shared.network.outputs:
                if deltas.get(out) is not None:
                    self._deliver(q, deltas[out], changes, batch_id)  # type: ignore[arg-type]
            state.commit(self.counters)
        finally:
            for frame in self._cached:
                frame.unpersist()
            self._cached.clear()
            batch.unpersist()

    def _open(self, query: str, changes: Sequence[AccessChange], lo: datetime, hi: datetime) -> bool:
        """Some user of ``query`` holds a grant overlapping [lo, hi] (the batch's event times)."""
        for user in self.queries[query].users:
            for start, end in grant_intervals(changes, query, user):
                if start <= hi and (end is None or end > lo):
                    return True
        return False

    def _vertex(self, vid: str, batch: DataFrame, deltas: dict[str, DataFrame | None], opened: Mapping[str, bool],
                state: "_State", now: datetime) -> DataFrame | None:
        vertex = self.shared.network.vertex(vid)
        if vertex.kind is Kind.SOURCE:
            stream = self.catalog.streams[vertex.label]
            return batch.filter(F.col(STREAM) == stream.name).select(
                *[F.col(physical_name(stream.name, a)).alias(a) for a in stream.attributes])
        node = self.shared.nodes[vid]
        inputs = []
        for child_id, child in zip(vertex.inputs, node.children()):
            delta = deltas.get(child_id)
            if delta is not None and isinstance(child, Source):
                delta = delta.select(*[F.col(a).alias(physical_name(child.relation, a)) for a, _ in child.schema
                                       if a in delta.columns])
            delta = self._gate(child_id, vid, delta, opened, state, now)
            if delta is None:
                return None  # behind a closed switch (or nothing upstream ran): no work at all
            inputs.append(delta)
        self.counters[vid] += 1
        result = self._operator(vid, node, inputs, state, now)
        if vid in self.shared.network.common_prefix:
            result = result.persist()  # computed once, read by every query's branch
            self._cached.append(result)
        return result

    def _gate(self, tail: str, head: str, delta: DataFrame | None, opened: Mapping[str, bool], state: "_State",
              now: datetime) -> DataFrame | None:
        sites = [s for s in self.placed.switches if s.kind is not SwitchKind.TERMINAL and s.tail == tail
                 and s.head == head]
        if not sites or delta is None:
            return delta
        key = f"gate-{tail}-{head}"
        kept = state.load(key, delta.schema) if self.horizon else None
        if not any(opened[s.query] for s in sites):
            if self.horizon:
                state.save(key, _recent(delta if kept is None else kept.unionByName(delta), now, self.horizon))
            return None
        return delta if kept is None else kept.unionByName(delta)  # hand over what was kept while off

    def _operator(self, vid: str, node: Node, inputs: list[DataFrame], state: "_State", now: datetime) -> DataFrame:
        if isinstance(node, Filter):
            return inputs[0].filter(F.coalesce(compile_expr(node.predicate), F.lit(False)))
        if isinstance(node, Project):
            times = [F.col(physical_name(f.relation, f.name)) for f in node.child.fields
                     if f.name == "ts" and f.dtype == "timestamp" and f.relation]
            event = F.greatest(*times) if len(times) > 1 else times[0]
            return inputs[0].select(*[compile_expr(e).alias(name) for name, e in node.items], event.alias(EVENT))
        if isinstance(node, Join):
            return self._join(vid, node, inputs[0], inputs[1], state, now)
        raise UnsupportedError(f"vertex {vid}: {type(node).__name__} does not run in a continuous network")

    def _join(self, vid: str, node: Join, left: DataFrame, right: DataFrame, state: "_State",
              now: datetime) -> DataFrame:
        """New pairs: new left × (kept ∪ new) right, plus kept left × new right."""
        kept_left, kept_right = state.load(f"{vid}-left", left.schema), state.load(f"{vid}-right", right.schema)
        condition = compile_expr(node.predicate) & _coexistence(node)
        all_right = right if kept_right is None else kept_right.unionByName(right)
        pairs = left.join(all_right, condition, "inner")
        if kept_left is not None:
            pairs = pairs.unionByName(kept_left.join(right, condition, "inner"))
        all_left = left if kept_left is None else kept_left.unionByName(left)
        state.save(f"{vid}-left", _recent(all_left, now, self.horizon, _ts_column(left)))
        state.save(f"{vid}-right", _recent(all_right, now, self.horizon, _ts_column(right)))
        return pairs

    def _deliver(self, query: str, rows: DataFrame, changes: Sequence[AccessChange], batch_id: int) -> None:
        node = self.shared.plans[query]
        out = rows.select(*[(iso_timestamp(F.col(f"`{f.name}`")) if f.dtype == "timestamp" else F.col(f"`{f.name}`"))
                            .alias(f.name) for f in node.fields],
                          F.array().cast("array<string>").alias("_policies"), F.lit("network").alias("_graph"),
                          F.col(EVENT)).persist()
        try:
            for user in self.queries[query].users:
                periods = grant_intervals(changes, query, user)
                target = self.output / user / query / f"batch={batch_id:010d}"
                if not periods:
                    continue
                (out.filter(within_periods(periods)).drop(EVENT).write.mode("overwrite").option("ignoreNullFields", "false")
                 .json(str(target)))
        finally:
            out.unpersist()


class _State:
    """The network's explicit state for one micro-batch: read from the last committed batch,
    written under this batch's folder, committed by a marker (a retried batch starts over)."""

    def __init__(self, spark: SparkSession, root: Path, batch_id: int):
        self.spark = spark
        self.root = root
        self.folder = root / f"{batch_id:010d}"
        committed = sorted(int(p.parent.name) for p in root.glob("*/_COMMITTED") if int(p.parent.name) < batch_id)
        self.previous = root / f"{committed[-1]:010d}" if committed else None
        if self.folder.exists():
            shutil.rmtree(self.folder)

    def load(self, key: str, schema) -> DataFrame | None:  # type: ignore[no-untyped-def]
        """What the last committed batch kept under ``key`` (None: nothing, so no empty
        frame reaches a plan: PySpark builds those from Python lists, run by Python tasks)."""
        if self.previous is not None and (self.previous / key).exists():
            return self.spark.read.schema(schema).parquet(str(self.previous / key))
        return None

    def save(self, key: str, frame: DataFrame | None) -> None:
        if frame is not None:
            frame.write.mode("overwrite").parquet(str(self.folder / key))

    def commit(self, counters: Counter[str]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "counters.json").write_text(json.dumps(dict(counters)))
        (self.folder / "_COMMITTED").write_text("")
        for old in sorted(p for p in self.root.iterdir() if p.is_dir() and p != self.folder):
            if old != self.previous:
                shutil.rmtree(old, ignore_errors=True)


def _utc(value: datetime) -> datetime:
    """Spark hands timestamps back naive, in the session's time zone (UTC here)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _coexistence(node: Join) -> Column:
    from streamwarden.plan.nodes import sources

    condition = F.lit(True)
    for a in sources(node.left):
        for b in sources(node.right):
            ta, tb = F.col(physical_name(a.relation, "ts")), F.col(physical_name(b.relation, "ts"))
            if b.window is not None and b.window.size_seconds is not None:
                condition = condition & (tb >= ta - F.expr(f"INTERVAL {int(b.window.size_seconds * 1e6)} MICROSECONDS"))
            if a.window is not None and a.window.size_seconds is not None:
                condition = condition & (tb <= ta + F.expr(f"INTERVAL {int(a.window.size_seconds * 1e6)} MICROSECONDS"))
    return condition


def _ts_column(frame: DataFrame) -> list[str]:
    return [c for c in frame.columns if c == "ts" or c.endswith("__ts")]


def _recent(frame: DataFrame, now: datetime, horizon: float, ts_columns: list[str] | None = None) -> DataFrame:
    """The tuples a window may still pair: every ts within ``horizon`` of the newest seen."""
    columns = ts_columns or _ts_column(frame)
    if not columns:
        return frame
    oldest = now - timedelta(seconds=horizon)
    newest = F.greatest(*[F.col(c) for c in columns]) if len(columns) > 1 else F.col(columns[0])
    return frame.filter(newest >= F.lit(oldest))


def _streams(plan: Node) -> set[str]:
    from streamwarden.plan.nodes import sources

    return {s.stream for s in sources(plan)}


def read_user_rows(spark: SparkSession, output_dir: str | Path, user: str, query: str) -> list[dict]:
    """The rows a running network has delivered to ``user`` for ``query``."""
    folder = Path(output_dir) / user / query
    if not any(folder.glob("batch=*/part-*")):
        return []
    frame = spark.read.option("recursiveFileLookup", "true").json(str(folder))
    return [json.loads(line) for line in frame.toJSON().collect()]


__all__ = ["SharedNetworkRun", "read_user_rows"]
