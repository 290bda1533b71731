"""One Spark streaming query runs a whole shared-operator network, with privacy switches.

The inputs of every registered query are read as one stream (a union tagged by stream),
together with the authorization server's access SPs (:mod:`~streamwarden.network.authorization`),
and each micro-batch goes through :meth:`SharedNetworkRun.process` (``foreachBatch``):
the SPs of the batch join the switches' state, then the network's vertices are evaluated
in topological order on the batch's new tuples, each vertex once however many queries
share it (its result is cached for its consumers). Every operator is the engine's own
(:func:`~streamwarden.engine.compiler.compile_operator`); joins and windowed aggregates
run it over the new tuples and the ones they keep as explicit state, written with every
batch under the checkpoint (a restart resumes exactly): a join the tuples its windows
may still pair, an aggregate the tuples of its windows still open. An aggregate emits a
window once the watermark passes its end (the smallest, over its input streams, of the
latest ``ts`` read, less the lateness), as a single query's ``run`` does.

Privacy switches (Algorithm 2's placement) follow the access SPs, so grants and
revocations take effect without restarting anything:

* an initial or in-network switch is *on* for a batch when some user of its output holds
  a grant overlapping the batch's event times; when off, the branch behind it is not
  evaluated at all (no operator runs), and the switch keeps the tuples a window of the
  branch could still need, handing them over when it turns on again, so a regained
  grant misses nothing;
* a terminal switch delivers each output row to the users of the output whose latest
  access change at or before the row's event time is a grant, each into their own
  folder ``DIR/<user>/<query id>/``, written once per batch (idempotently), built by
  :func:`streamwarden.names.safe_path` and private to its owner (folders 0700, files 0600).

The checkpoint holds every user's raw tuples and everyone's grants: it may not lie
inside the output folder (nor the output inside it), and by default it lies next to the
store (:func:`default_checkpoint`). A checkpoint that has committed batches to an
output folder that is gone is refused (resuming from it would silently deliver nothing).
When the network starts, its queries are registered in the store, so grants and
revocations naming anything else are refused.

Role policies apply on top per user: users whose authorized plans differ get their own
outputs (see :mod:`~streamwarden.network.optimizer`), sharing every operator their plans
have in common. Streams with security punctuations or levels, policies that depend on
actions, and ``[ROWS n]`` windows run query by query (``replay``, ``run``); a continuous
network refuses them before starting.

    >>> # run = SharedNetworkRun(spark, catalog, queries, {"Stream1": "in/s1"}, "out", store_url, "cp")
    >>> # run.start(available_now=True).awaitTermination(); run.counters["v3"]
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamwarden.catalog.model import Catalog
from streamwarden.engine.columns import compile_expr, physical_name
from streamwarden.engine.compiler import EVENT, Inputs, action_names, compile_operator
from streamwarden.engine.execute import check_checkpoint, check_inputs, output_frame
from streamwarden.engine.sources import read_input
from streamwarden.errors import UnsupportedError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.names import check_name, make_private, private_dir, safe_path
from streamwarden.network.authorization import SP_SCHEMA, AuthorizationServer
from streamwarden.network.dag import Kind
from streamwarden.network.optimizer import SharedPlan, shared_network
from streamwarden.network.registry import AccessChange, RegisteredQuery, grant_intervals
from streamwarden.network.replay import within_periods
from streamwarden.network.switches import PlacedNetwork, SwitchKind, place_switches
from streamwarden.plan.nodes import Aggregate, Join, Source, sources, walk

STREAM, TS = "_stream", "_ts"
MARKER = ".streamwarden-network"  # in the output folder: which checkpoint writes into it
ACCESS = "_access"  # the _stream tag of access SPs in the network's input
_SP_COLUMNS = ("seq", "query", "user", "sign")


class SharedNetworkRun:
    """A shared network over file streams, ready to start as one Spark streaming query.

    ``switches=False`` is the post-filtering baseline: every branch runs and only the
    terminal switches filter. ``guard_prefix=True`` goes beyond Algorithm 2, which leaves
    the common prefix unguarded: each input edge of a shared operator gets a switch too,
    on while any output that operator serves is, so a prefix serving only queries that
    lost every user stops as well. ``lateness_seconds`` is how far behind the latest
    ``ts`` of a stream its tuples may still arrive before an aggregate's windows close.
    """

    def __init__(self, spark: SparkSession, catalog: Catalog, queries: Sequence[RegisteredQuery],
                 inputs: Mapping[str, str | Path], output_dir: str | Path, store_url: str,
                 checkpoint: str | Path, *, switches: bool = True, guard_prefix: bool = False,
                 lateness_seconds: float = 0.0, sp_folder: str | Path | None = None):
        self.spark = spark
        self.catalog = catalog
        self.queries = tuple(queries)
        for q in self.queries:
            check_name("query id", q.id)
            for user in q.users:
                check_name("user", user)
        self.shared: SharedPlan = shared_network(catalog, queries)
        self.placed: PlacedNetwork = place_switches(self.shared.network)
        self.store_url = store_url
        self.sp_folder = sp_folder  # None: the store's own (see AuthorizationServer)
        self.inputs = inputs
        check_inputs(catalog, [self.shared.network.vertex(v).label for v in self.shared.network.topological_order()
                               if self.shared.network.vertex(v).kind is Kind.SOURCE], inputs, must_exist=False)
        self.output = Path(output_dir)
        self.checkpoint = Path(checkpoint)
        check_checkpoint(self.checkpoint, self.output, sink_written=True)  # overlap only, here
        self.state_root = self.checkpoint / "network-state"
        self.switches = switches
        self.guard_prefix = guard_prefix and switches
        self.lateness = timedelta(seconds=lateness_seconds)
        self.counters: Counter[str] = Counter()  # vertex id -> micro-batches in which it ran
        self._cached: list[DataFrame] = []
        self._check_supported()
        self.horizon = self._horizon()
        vertex_of = {node: vid for vid, node in self.shared.nodes.items()}
        self._aggregates = {o: [vertex_of[n] for n in walk(out.graph.root) if isinstance(n, Aggregate)]
                            for o, out in self.shared.outputs.items()}
        self._context = Inputs({}, streaming=True, event_time=True)
        self._sources = {vid: {s.stream for s in sources(node)} for vid, node in self.shared.nodes.items()}

    # -- setup -----------------------------------------------------------------------------
    def _check_supported(self) -> None:
        for vid, node in self.shared.nodes.items():
            windows = ((node.left_window, node.right_window) if isinstance(node, Join)
                       else (node.window,) if isinstance(node, Aggregate) else ())
            if any(w is not None and w.kind == "rows" for w in windows):
                raise UnsupportedError(f"vertex {vid} ({node.label}): [ROWS n] windows need each stream's arrival "
                                       "order, which a continuous network does not keep; use 'network replay'")
            if isinstance(node, Aggregate) and (node.window is None or node.window.size_seconds is None):
                raise UnsupportedError(f"vertex {vid} ({node.label}): a continuous aggregate needs a [RANGE] window")
            if not isinstance(node, Source) and action_names(node):
                raise UnsupportedError(f"vertex {vid} ({node.label}) depends on actions, which a continuous network "
                                       "does not track; use 'network replay' or run the query alone")

    def _horizon(self) -> float:
        """Seconds a tuple may still be needed by some window of the network (what a closed switch keeps):
        the widest join window plus the widest aggregate window (an aggregate over a join)."""
        joins = [w.size_seconds or 0.0 for n in self.shared.nodes.values() if isinstance(n, Join)
                 for w in (n.left_window, n.right_window) if w is not None and w.kind == "range"]
        aggregates = [n.window.size_seconds or 0.0 for n in self.shared.nodes.values()
                      if isinstance(n, Aggregate) and n.window is not None]
        return max(joins, default=0.0) + max(aggregates, default=0.0) + self.lateness.total_seconds()

    def input_stream(self) -> DataFrame:
        """The union of the network's input streams and the access SPs, tagged by ``_stream``."""
        frames = []
        for vid in self.shared.network.topological_order():
            vertex = self.shared.network.vertex(vid)
            if vertex.kind is not Kind.SOURCE:
                continue
            stream = self.catalog.streams[vertex.label]
            raw = read_input(self.spark, stream, self.inputs[stream.name], streaming=True)
            frames.append(raw.select(F.lit(stream.name).alias(STREAM), F.col("ts").alias(TS),
                                     *[F.col(a).alias(physical_name(stream.name, a)) for a in stream.attributes]))
        server = AuthorizationServer(self.store_url, self.sp_folder)
        server.register(self.queries, self.catalog)  # from now on, changes naming anything else are refused
        server.publish()  # anything recorded but not yet published (a crash in between)
        sps = self.spark.readStream.schema(SP_SCHEMA).json(str(server.sp_folder))
        frames.append(sps.select(F.lit(ACCESS).alias(STREAM), F.col("ts").alias(TS),
                                 *[F.col(c).alias(physical_name(ACCESS, c)) for c in _SP_COLUMNS]))
        union = frames[0]
        for other in frames[1:]:
            union = union.unionByName(other, allowMissingColumns=True)
        return union

    def start(self, *, trigger: str | None = None, available_now: bool = False,
              name: str | None = None) -> StreamingQuery:
        """Start the network; ``name`` (unique among the session's active queries) defaults to its outputs'."""
        name = name or f"streamwarden network {', '.join(self.shared.outputs)}"
        marker = self.output / MARKER
        check_checkpoint(self.checkpoint / "spark", self.output, sink_written=marker.is_file())
        private_dir(self.checkpoint)
        private_dir(self.output)
        if not marker.is_file():
            marker.write_text(json.dumps({"checkpoint": str(self.checkpoint.resolve())}) + "\n", encoding="utf-8")
        writer = (self.input_stream().writeStream.foreachBatch(self.process)
                  .option("checkpointLocation", str(self.checkpoint / "spark")).queryName(name))
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger:
            writer = writer.trigger(processingTime=trigger)
        return writer.start()

    # -- one micro-batch --------------------------------------------------------------------
    def process(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            state = _State(self.spark, self.state_root, batch_id)
            arrived = self._arrivals(batch, state)
            if arrived is None:  # access SPs only (or nothing): the switches' state moves on
                state.commit(self.counters)
                return
            lo, hi = arrived
            changes = state.changes
            opened = {o: not self.switches or self._open(o, changes, self._earliest(o, lo, state), hi)
                      for o in self.shared.outputs}
            deltas: dict[str, DataFrame | None] = {}
            for vid in self.shared.network.topological_order():
                deltas[vid] = self._vertex(vid, batch, deltas, opened, state)
            for oid, out in self.shared.network.outputs:
                if deltas.get(out) is not None:
                    self._deliver(oid, deltas[out], changes, batch_id)  # type: ignore[arg-type]
            state.commit(self.counters)
        finally:
            for frame in self._cached:
                frame.unpersist()
            self._cached.clear()
            batch.unpersist()

    def _arrivals(self, batch: DataFrame, state: "_State") -> tuple[datetime, datetime] | None:
        """One small job: the batch's access SPs (into the state) and each stream's time span.
        Returns the data's [earliest, latest] ts, None when the batch holds no data."""
        sp = F.struct(*[F.col(physical_name(ACCESS, c)).alias(c) for c in _SP_COLUMNS], F.col(TS).alias("ts"))
        rows = (batch.groupBy(STREAM)
                .agg(F.min(TS).alias("lo"), F.max(TS).alias("hi"),
                     F.collect_list(F.when(F.col(STREAM) == ACCESS, sp)).alias("sps"))
                .collect())
        spans = {r[STREAM]: (_utc(r["lo"]), _utc(r["hi"])) for r in rows if r[STREAM] != ACCESS and r["lo"] is not None}
        for r in rows:
            if r[STREAM] == ACCESS:
                state.add_changes(AccessChange(_utc(sp["ts"]), sp["query"], sp["user"], sp["sign"] == "+", sp["seq"])
                                  for sp in r["sps"])
        for stream, (_, latest) in spans.items():
            state.advance(stream, latest)
        if not spans:
            return None
        return min(lo for lo, _ in spans.values()), max(hi for _, hi in spans.values())

    def _earliest(self, output: str, lo: datetime, state: "_State") -> datetime:
        """The earliest event time a row of ``output`` made in this batch can have: ``lo``, or for
        an aggregate the end of the first window it has not emitted yet (any, before its first)."""
        for vid in self._aggregates[output]:
            emitted = state.emitted(vid)
            lo = min(lo, emitted if emitted is not None else datetime.min.replace(tzinfo=timezone.utc))
        return lo

    def _open(self, output: str, changes: Sequence[AccessChange], lo: datetime, hi: datetime) -> bool:
        """Some user of ``output`` holds a grant overlapping [lo, hi], the event times of the rows it may get."""
        out = self.shared.outputs[output]
        for user in out.users:
            for start, end in grant_intervals(changes, out.query, user):
                if start <= hi and (end is None or end > lo):
                    return True
        return False

    def _vertex(self, vid: str, batch: DataFrame, deltas: dict[str, DataFrame | None], opened: Mapping[str, bool],
                state: "_State") -> DataFrame | None:
        vertex = self.shared.network.vertex(vid)
        if vertex.kind is Kind.SOURCE:
            stream = self.catalog.streams[vertex.label]
            return batch.filter(F.col(STREAM) == stream.name).select(
                *[F.col(physical_name(stream.name, a)).alias(a) for a in stream.attributes])
        node = self.shared.nodes[vid]
        # What this vertex's state may forget: tuples older than its streams' latest ts (the least of
        # them) less the horizon. Not the batch's latest: a stream whose files come later still pairs.
        now = state.watermark(self._sources[vid], self.lateness)
        inputs = []
        for child_id, child in zip(vertex.inputs, node.children()):
            delta = deltas.get(child_id)
            if delta is not None and isinstance(child, Source):
                delta = delta.select(*[F.col(a).alias(physical_name(child.relation, a)) for a, _ in child.schema
                                       if a in delta.columns])
            # Every input's gate runs, even once one is closed: each keeps its own tuples for
            # when the switch opens again (stopping at the first would drop the others').
            inputs.append(self._gate(child_id, vid, delta, opened, state, now))
        if any(delta is None for delta in inputs):
            return None  # behind a closed switch (or nothing upstream ran): no work at all
        self.counters[vid] += 1
        if isinstance(node, Join):
            result = self._join(vid, node, inputs[0], inputs[1], state, now)
        elif isinstance(node, Aggregate):
            result = self._aggregate(vid, node, inputs[0], state)
            if result is None:
                return None  # no window can close before every input stream has sent something
        else:
            result = compile_operator(node, inputs, self._context)
        if vid in self.shared.network.common_prefix:
            result = result.persist()  # computed once, read by every query's branch
            self._cached.append(result)
        return result

    def _gate(self, tail: str, head: str, delta: DataFrame | None, opened: Mapping[str, bool], state: "_State",
              now: datetime | None) -> DataFrame | None:
        guards = {s.query for s in self.placed.switches if s.kind is not SwitchKind.TERMINAL and s.tail == tail
                  and s.head == head}
        if not guards and self.guard_prefix and head in self.shared.network.common_prefix:
            guards = set(self.shared.network.vertex(head).queries)  # beyond Algorithm 2: the prefix, too
        if not guards or delta is None:
            return delta
        key = f"gate-{tail}-{head}"
        kept = state.load(key, delta.schema) if self.horizon else None
        if not any(opened[q] for q in guards):
            if self.horizon:
                state.save(key, _recent(delta if kept is None else kept.unionByName(delta), now, self.horizon))
            return None
        if kept is None:
            return delta
        state.drop(key)  # handed over once: joined now, never again
        return kept.unionByName(delta)  # hand over what was kept while off

    def _join(self, vid: str, node: Join, left: DataFrame, right: DataFrame, state: "_State",
              now: datetime | None) -> DataFrame:
        """New pairs: new left × (kept ∪ new) right, plus kept left × new right (each the engine's join)."""
        kept_left, kept_right = state.load(f"{vid}-left", left.schema), state.load(f"{vid}-right", right.schema)
        all_right = right if kept_right is None else kept_right.unionByName(right)
        pairs = compile_operator(node, [left, all_right], self._context)
        if kept_left is not None:
            pairs = pairs.unionByName(compile_operator(node, [kept_left, right], self._context))
        all_left = left if kept_left is None else kept_left.unionByName(left)
        state.save(f"{vid}-left", _recent(all_left, now, self.horizon, _ts_column(left)))
        state.save(f"{vid}-right", _recent(all_right, now, self.horizon, _ts_column(right)))
        return pairs

    def _aggregate(self, vid: str, node: Aggregate, delta: DataFrame, state: "_State") -> DataFrame | None:
        """The windows the watermark closed since the last batch, over the tuples kept for the
        windows still open and the new ones; late tuples count only in windows not yet emitted."""
        size = timedelta(seconds=node.window.size_seconds or 0.0)  # type: ignore[union-attr]
        watermark = state.watermark({s.stream for s in sources(node)}, self.lateness)
        emitted = state.emitted(vid)
        kept = state.load(f"{vid}-open", delta.schema)
        rows = delta if kept is None else kept.unionByName(delta)
        event_time = compile_expr(node.event_time)
        if watermark is None:
            state.save(f"{vid}-open", rows)
            return None
        state.save(f"{vid}-open", rows.filter(event_time > F.lit(watermark - size)))
        state.emit(vid, watermark)
        windows = compile_operator(node, [rows], self._context)
        closed = F.col(EVENT) <= F.lit(watermark)
        return windows.filter(closed if emitted is None else closed & (F.col(EVENT) > F.lit(emitted)))

    def _deliver(self, output: str, rows: DataFrame, changes: Sequence[AccessChange], batch_id: int) -> None:
        """The terminal switch: each user of the output gets the rows inside their grant periods."""
        out = self.shared.outputs[output]
        recipients = [(i, user, periods) for i, user in enumerate(out.users)
                      if (periods := grant_intervals(changes, out.query, user))]
        if not recipients:
            return
        name = f"batch={batch_id:010d}" + ("" if output == out.query else f"-{output.split('@')[-1]}")
        # One write for every user of the output, partitioned by user, then each part moved into the user's folder.
        to = F.array_compact(F.array(*[F.when(within_periods(p), F.lit(i)) for i, _, p in recipients]))
        staging = self.checkpoint / "staging" / f"{output}-{batch_id}"
        (output_frame(out.graph, rows).withColumn("_to", F.explode(to)).drop(EVENT)
         .write.mode("overwrite").option("ignoreNullFields", "false").partitionBy("_to").json(str(staging)))
        for i, user, _ in recipients:
            target = safe_path(self.output, user, out.query, name)  # never outside the output folder
            shutil.rmtree(target, ignore_errors=True)
            part = staging / f"_to={i}"
            if part.exists():
                private_dir(safe_path(self.output, user), tighten=True)  # the user's folder: 0700
                private_dir(target.parent)
                make_private(part)  # whatever Spark's umask was: 0700 folders, 0600 files
                shutil.move(str(part), str(target))
        shutil.rmtree(staging, ignore_errors=True)


class _State:
    """The network's explicit state for one micro-batch: read from the last committed batch,
    written under this batch's folder, committed by a marker (a retried batch starts over).

    Frames (join sides, open windows, what closed switches keep) are Parquet folders; the
    access SPs received so far, each stream's latest ``ts`` and each aggregate's last
    emitted watermark are one small JSON file.
    """

    def __init__(self, spark: SparkSession, root: Path, batch_id: int):
        self.spark = spark
        self.root = root
        self.folder = root / f"{batch_id:010d}"
        committed = sorted(int(p.parent.name) for p in root.glob("*/_COMMITTED") if int(p.parent.name) < batch_id)
        self.previous = root / f"{committed[-1]:010d}" if committed else None
        if self.folder.exists():
            shutil.rmtree(self.folder)
        known: dict[str, Any] = {}
        if self.previous is not None and (self.previous / "switches.json").exists():
            known = json.loads((self.previous / "switches.json").read_text())
        self.changes: list[AccessChange] = [
            AccessChange(parse_timestamp(ts), query, user, grant, seq) for seq, ts, query, user, grant in known.get("access", [])]
        self.latest: dict[str, str] = known.get("latest", {})
        self.watermarks: dict[str, str] = known.get("emitted", {})
        self.written: set[str] = set()  # keys this batch saved or consumed; the rest carry over

    def add_changes(self, changes: Any) -> None:
        seen = {c.line for c in self.changes}
        self.changes += [c for c in changes if c.line not in seen]
        self.changes.sort(key=lambda c: c.line)

    def advance(self, stream: str, latest: datetime) -> None:
        if stream not in self.latest or _iso(latest) > self.latest[stream]:
            self.latest[stream] = _iso(latest)

    def watermark(self, streams: set[str], lateness: timedelta) -> datetime | None:
        """The smallest latest ``ts`` over ``streams``, less the lateness (None: one has sent nothing yet)."""
        if any(s not in self.latest for s in streams):
            return None
        return min(parse_timestamp(self.latest[s]) for s in streams) - lateness

    def emitted(self, vid: str) -> datetime | None:
        return parse_timestamp(self.watermarks[vid]) if vid in self.watermarks else None

    def emit(self, vid: str, watermark: datetime) -> None:
        self.watermarks[vid] = _iso(watermark)

    def load(self, key: str, schema) -> DataFrame | None:  # type: ignore[no-untyped-def]
        """What the last committed batch kept under ``key`` (None: nothing, so no empty
        frame reaches a plan: PySpark builds those from Python lists, run by Python tasks)."""
        if self.previous is not None and (self.previous / key).exists():
            return self.spark.read.schema(schema).parquet(str(self.previous / key))
        return None

    def save(self, key: str, frame: DataFrame | None) -> None:
        if frame is not None:
            frame.write.mode("overwrite").parquet(str(self.folder / key))
            self.written.add(key)

    def drop(self, key: str) -> None:
        """What was kept under ``key`` has been handed on: do not carry it into this batch."""
        self.written.add(key)

    def commit(self, counters: Counter[str]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        # A vertex that did not run this batch (no new tuples, or its switch off) saved
        # nothing: its join sides, open windows and kept tuples carry over from the last
        # committed batch, or a batch with only access changes would lose them all. Copied,
        # not moved, so a retried batch still finds the previous folder intact.
        if self.previous is not None:
            for kept in sorted(p for p in self.previous.iterdir() if p.is_dir() and p.name not in self.written):
                shutil.copytree(kept, self.folder / kept.name, dirs_exist_ok=True)
        (self.folder / "counters.json").write_text(json.dumps(dict(counters)))
        (self.folder / "switches.json").write_text(json.dumps({
            "access": [[c.line, _iso(c.ts), c.query, c.user, c.grant] for c in self.changes],
            "latest": self.latest, "emitted": self.watermarks}))
        (self.folder / "_COMMITTED").write_text("")
        for old in sorted(p for p in self.root.iterdir() if p.is_dir() and p != self.folder):
            if old != self.previous:
                shutil.rmtree(old, ignore_errors=True)


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc(value: datetime) -> datetime:
    """Spark hands timestamps back naive, in the session's time zone (UTC here)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _ts_column(frame: DataFrame) -> list[str]:
    return [c for c in frame.columns if c in ("ts", EVENT) or c.endswith("__ts")]


def _recent(frame: DataFrame, now: datetime | None, horizon: float, ts_columns: list[str] | None = None) -> DataFrame:
    """The tuples a window may still need: every ts within ``horizon`` of ``now``, the time every
    input stream has reached (None: some stream has sent nothing yet, so everything)."""
    columns = ts_columns or _ts_column(frame)
    if not columns or now is None:
        return frame
    oldest = now - timedelta(seconds=horizon)
    newest = F.greatest(*[F.col(c) for c in columns]) if len(columns) > 1 else F.col(columns[0])
    return frame.filter(newest >= F.lit(oldest))


def read_user_rows(spark: SparkSession, output_dir: str | Path, user: str, query: str) -> list[dict]:
    """The rows a running network has delivered to ``user`` for ``query``."""
    folder = safe_path(output_dir, user, query)
    if not any(folder.glob("batch=*/part-*")):
        return []
    frame = spark.read.option("recursiveFileLookup", "true").json(str(folder))
    return [json.loads(line) for line in frame.toJSON().collect()]


def default_checkpoint(home: str | Path, output_dir: str | Path, queries: Sequence[RegisteredQuery]) -> Path:
    """Where a network keeps its checkpoint unless told: ``HOME/checkpoints/network-<hash>``,
    ``HOME`` being the store's folder (never an output folder), the hash of the output folder
    (resolved) and the queries, so another network or output gets a checkpoint of its own."""
    key = json.dumps([str(Path(output_dir).resolve()), [[q.id, list(q.users), q.query] for q in queries]])
    return Path(home) / "checkpoints" / f"network-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


__all__ = ["SharedNetworkRun", "default_checkpoint", "read_user_rows"]
