"""Compile authorized graphs into Spark DataFrames, one small function per operator.

The compiler is the same for replay (batch DataFrames over recorded files) and for a
continuous run (streaming DataFrames): only the inputs differ, so both produce the same
rows. Every intermediate DataFrame holds one column per plan field (``relation__attr``)
and, below the first secure view, an array ``_policies`` naming the policies that let the
row through.

    >>> # compile_graph(graph.root, Inputs(frames={"Position": df}))  -> DataFrame

Whoever needs the frame of every operator, not just the root's (``explain`` prints each
as one step of its Spark SQL), watches the compiler instead of compiling a second time:

    >>> with watching() as compiled:
    ...     pass  # build_job(...) here: every compile_graph call appends a Compiled
    >>> compiled
    []
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as F

from streamwarden.catalog.lattice import Lattice
from streamwarden.engine.levels.columns import LEVEL_TYPE, ROW_LEVEL, lub, lub_of_group, visible_at
from streamwarden.errors import UnsupportedError
from streamwarden.language.ast import Window
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import (AggCall, Aggregate, Filter, Join, LevelGuard, Node, Project, SecureView, Shield,
                                     Source, sources, walk)
from streamwarden.engine import rows
from streamwarden.engine.jvm import rows_window
from streamwarden.engine.columns import CARRIED, SPARK_TYPES, compile_expr, physical_name
from streamwarden.engine.plan_sql import quote
from streamwarden.engine.shield.decide import combined_mask, has_bit, server_mask
from streamwarden.engine.shield.kernel import GOV

POLICIES = "_policies"
#: What authorized a row besides role policies: each Security Shield's decision, as
#: ``SP <stream> of <policy ts>`` (the provider's policy that granted the tuple).
PROVENANCE = "_provenance"
BUCKET = "__time_bucket"
#: A row's event time, when asked for (Inputs.event_time): what access changes are timed against.
EVENT = "_event"
#: Arrival order of a relation's tuples (seq, file, line), for [ROWS n] windows: ``R___arrival``.
ARRIVAL = "_arrival"
#: A tuple's place among the stream's visible tuples (replay of joins over [ROWS n], see rank_points).
RANK = "_rank"
#: How many tuples an aggregate row is computed over (for a policy's ``min_group``).
GROUP_SIZE = "__group_size"


@dataclass
class Inputs:
    """The compiled inputs of a graph: one DataFrame per relation, already renamed.

    ``actions`` is a one-row frame of live action values. ``streaming`` says the inputs
    are continuous (already watermarked): their joins need no replay time buckets, and
    stateful operators are bounded by the watermark instead.
    """

    frames: dict[str, DataFrame]
    actions: DataFrame | None = None
    streaming: bool = False
    lattice: Lattice | None = None  # security levels in force: rows carry the LUB of their tuples' levels
    event_time: bool = False  # rows carry EVENT: the later ts of their tuples (a window's end for aggregates)


def compile_graph(root: Node, inputs: Inputs) -> DataFrame:
    """The DataFrame computing ``root`` (each shared node compiled once)."""
    needs_actions = bool(_graph_actions(root))
    compiler = _Compiler(inputs, needs_actions, {} if inputs.streaming else rank_points(root))
    frame = compiler.compile(root)
    for watcher in _watchers.get():
        watcher.append(Compiled(root, inputs, tuple(compiler.built)))
    return frame


@dataclass(frozen=True)
class Compiled:
    """One graph as :func:`compile_graph` built it: the frame of each operator it compiled,
    children before their parents (the root's last), over ``inputs``."""

    root: Node
    inputs: Inputs
    operators: tuple[tuple[Node, DataFrame], ...]


_watchers: ContextVar[tuple[list[Compiled], ...]] = ContextVar("streamwarden_compiler_watchers", default=())


@contextmanager
def watching() -> Iterator[list[Compiled]]:
    """Collect every graph compiled inside the block (in this thread or task).

    ``explain`` renders what the executor's own path (``build_job``) compiles, operator by
    operator, rather than compiling on a side path that could differ from it.
    """
    compiled: list[Compiled] = []
    token = _watchers.set((*_watchers.get(), compiled))
    try:
        yield compiled
    finally:
        _watchers.reset(token)


def policy_ids(root: Node) -> tuple[str, ...]:
    """Every policy id a row of ``root`` can carry in ``_policies``: its secure views' (sorted)."""
    return tuple(sorted({v.policy_id for n in walk(root) if isinstance(n, SecureView) for v in n.views}))


#: The operators that make a stream's tuples the user's view of it, each over that stream alone.
_SECURING = (LevelGuard, Shield, SecureView)


def rank_points(root: Node) -> dict[int, str]:
    """Where a replay ranks the tuples of each ``[ROWS n]`` relation a join counts (by node
    ``id()``: the relation): at the top of the operators that secure it (a level's guard, a
    provider's shield, the secure read view right after it, Carminati et al.'s Definition
    5.2), below the query's own selections. So a rank counts the tuples of the user's view,
    and a window the last n of them, as for a ``[ROWS n]`` aggregate: how many hidden tuples
    lie between two visible ones cannot decide whether they pair, and the query's WHERE picks
    pairs among the window's tuples without deciding which enter it."""
    counted = {id(s) for join in walk(root) if isinstance(join, Join) for s in sources(join) if _counted(s.window)}
    parents: dict[int, Node] = {id(child): node for node in walk(root) for child in node.children()}
    points = {}
    for node in walk(root):
        if isinstance(node, Source) and id(node) in counted:
            top: Node = node
            while isinstance(parents.get(id(top)), _SECURING) and len(sources(parents[id(top)])) == 1:
                top = parents[id(top)]
            points[id(top)] = node.relation
    return points


def _graph_actions(root: Node) -> set[str]:
    return {a.action for node in walk(root) for e in node.expressions() for a in E.action_refs(e)}


class _RowsWindows:
    """``[ROWS n]`` aggregates (see :mod:`streamwarden.engine.rows`), mixed into the compiler."""

    inputs: Inputs

    def compile(self, node: Node) -> DataFrame:
        raise NotImplementedError

    def row_level(self, node: Node, frame: DataFrame) -> SparkColumn:
        raise NotImplementedError

    def rows_aggregate(self, node: Aggregate) -> DataFrame:
        # The query's selections decide which tuples of the window count, not which enter it.
        predicates: list[E.Expr] = []
        base = node.child
        while isinstance(base, Filter):
            predicates.append(base.predicate)
            base = base.child
        frame = self.compile(base)
        qualifies = F.lit(True)
        for p in predicates:
            qualifies = qualifies & F.coalesce(compile_expr(p), F.lit(False))
        assert isinstance(node.event_time, E.Column) and node.window is not None  # a [ROWS n] window over a stream
        relation = node.event_time.relation
        arrival = physical_name(relation, ARRIVAL)
        args = [None if a.arg is None else (F.unix_micros(compile_expr(a.arg)) if a.arg.dtype == "timestamp"
                                            else compile_expr(a.arg)) for a in node.aggregates]
        groups = [(name, compile_expr(g)) for name, g in node.group_by]
        lattice = self.inputs.lattice
        level = self.row_level(base, frame) if lattice is not None else None
        spec = rows.RowsSpec(node.window.rows or 1, tuple(f"__agg{i}" for i in range(len(node.aggregates))),
                             tuple(a.func for a in node.aggregates), tuple(name for name, _ in groups),
                             levels=level is not None, policies=POLICIES in frame.columns,
                             policy_ids=policy_ids(base))
        ready = rows.prepared(frame, compile_expr(node.event_time),
                              rows.arrival_key(F.col(arrival) if arrival in frame.columns else None),
                              qualifies, args, groups, level)
        result = self.rows_stream(ready, spec, node) if self.inputs.streaming else rows.replay_rows(ready, spec)
        return result.select(
            F.timestamp_micros(F.col("ts")).alias("ts"),
            *[F.col(name) for name, _ in groups],
            *[_rows_value(a, f"__agg{i}").alias(a.name) for i, a in enumerate(node.aggregates)],
            *([F.col("_level").cast(LEVEL_TYPE).alias(ROW_LEVEL)] if lattice is not None else []),
            *([F.col(POLICIES)] if spec.policies else []),
            *([F.timestamp_micros(F.col("ts")).alias(EVENT)] if self.inputs.event_time else []),
            *shielded_provenance(base),
        )

    def rows_stream(self, ready: DataFrame, spec: "rows.RowsSpec", node: Aggregate) -> DataFrame:
        """The window over a continuous input: one stateful group holds the whole stream
        (``RowsWindow.java``; the last n - 1 tuples live in the state store)."""
        groups = [F.col(g) for g in spec.groups] or [F.lit(0).alias("__none")]
        control = ready.select(
            F.col(rows.T).alias("_t"), F.col(rows.ARRIVAL).alias("_a"), F.col(rows.QUALIFIES).alias("_q"),
            F.array(*[F.col(rows.arg(i)).cast("double") for i in range(len(spec.names))]).alias("_args"),
            F.struct(*groups).alias("_groups"),
            (F.col(rows.LEVEL_PART) if spec.levels else F.lit(None)).cast("long").alias("_lv"),
            (F.col(POLICIES) if spec.policies else F.lit(None)).cast("array<string>").alias("_policies"))
        window = rows_window(control, spec.n, spec.funcs, bool(spec.groups))
        aggregates = [(F.col("_aggs")[i].cast("long") if func == "count" else F.col("_aggs")[i]).alias(name)
                      for i, (name, func) in enumerate(zip(spec.names, spec.funcs))]
        return window.select("ts", *[F.col(f"_groups.`{g}`").alias(g) for g in spec.groups], *aggregates,
                             *(["_level"] if spec.levels else []), *([POLICIES] if spec.policies else []))


def _rows_value(call: AggCall, column: str) -> SparkColumn:
    """An aggregate of a [ROWS n] window, back in its type (timestamps travelled as µs)."""
    if not call.granted:
        return F.lit(None).cast(SPARK_TYPES.get(call.dtype, "double"))
    value = F.col(column)
    # try_cast: a continuous window's sums travel as doubles; one beyond a bigint is NULL (as
    # try_sum makes it in replay), never a CAST_OVERFLOW that stops the query.
    if call.arg is not None and call.arg.dtype == "timestamp" and call.func in ("min", "max"):
        return F.timestamp_micros(value.try_cast("bigint"))
    return value.try_cast(SPARK_TYPES.get(call.dtype, "double"))


class _Compiler(_RowsWindows):
    def __init__(self, inputs: Inputs, needs_actions: bool, ranked: dict[int, str] | None = None):
        self.inputs = inputs
        self.needs_actions = needs_actions
        self.ranked = ranked or {}  # see rank_points
        self.memo: dict[int, DataFrame] = {}
        self.built: list[tuple[Node, DataFrame]] = []  # every operator compiled, children first
        # By exact node type, so each handler gets its own node type (hence Any).
        self.handlers: dict[type[Node], Callable[[Any], DataFrame]] = {
            Source: self.source, Filter: self.filter, SecureView: self.secure_view,
            Project: self.project, Join: self.join, Aggregate: self.aggregate, Shield: self.shield,
            LevelGuard: self.level_guard,
        }

    def compile(self, node: Node) -> DataFrame:
        key = id(node)
        if key not in self.memo:
            handler = self.handlers.get(type(node))
            if handler is None:
                raise UnsupportedError(f"the Spark backend cannot run {type(node).__name__} (node {node.id})")
            frame = handler(node)
            if key in self.ranked:
                frame = self.rank(frame, self.ranked[key])
            self.memo[key] = frame
            self.built.append((node, frame))
        return self.memo[key]

    def rank(self, frame: DataFrame, relation: str) -> DataFrame:
        """``R___rank``: each tuple's place among ``frame``'s, by time then arrival (replay)."""
        order = [F.col(physical_name(relation, "ts")), F.col(physical_name(relation, ARRIVAL))]
        return frame.withColumn(physical_name(relation, RANK), F.row_number().over(SparkWindow.orderBy(*order)))

    # -- one function per operator ----------------------------------------------------------
    def source(self, node: Source) -> DataFrame:
        frame = self.inputs.frames[node.relation]
        if self.needs_actions and self.inputs.actions is not None:
            frame = frame.crossJoin(self.inputs.actions)
        return frame

    def filter(self, node: Filter) -> DataFrame:
        return self.compile(node.child).filter(compile_expr(node.predicate))

    def secure_view(self, node: SecureView) -> DataFrame:
        frame = self.compile(node.child)
        conditions = [f"__view{i}" for i in range(len(node.views))]
        # Evaluate each policy condition once; NULL (unknown) counts as not holding.
        frame = frame.select("*", *[
            F.coalesce(compile_expr(v.condition), F.lit(False)).alias(name) for v, name in zip(node.views, conditions)
        ])
        # concat/sort_array are code-generated; lambda-based array functions (filter,
        # array_sort with its default comparator) are interpreted row by row.
        if len(node.views) == 1:
            holding = F.array(F.lit(node.views[0].policy_id))  # the only view holds on every row left
        else:
            holding = F.concat(*[
                F.when(F.col(c), F.array(F.lit(v.policy_id))).otherwise(F.array().cast("array<string>"))
                for v, c in sorted(zip(node.views, conditions), key=lambda vc: vc[0].policy_id)
            ])
        passes = F.lit(False)
        for c in conditions:
            passes = passes | F.col(c)
        frame = frame.filter(passes)
        masked = []
        for f in node.fields:
            column = physical_name(f.relation, f.name)
            grantors = [F.col(c) for v, c in zip(node.views, conditions) if v.grants(f)]
            if f.name == "ts" or len(grantors) == len(conditions):
                masked.append(F.col(column))
            elif not grantors:
                masked.append(F.lit(None).cast(SPARK_TYPES.get(f.dtype, "string")).alias(column))
            else:
                visible = grantors[0]
                for g in grantors[1:]:
                    visible = visible | g
                masked.append(F.when(visible, F.col(column)).alias(column))
        extras = [c for c in frame.columns if c.startswith(("__action__", CARRIED)) or c == PROVENANCE
                  or c.endswith(f"__{ARRIVAL}") or c.endswith(f"__{RANK}")]
        return frame.select(*masked, *extras, holding.alias(POLICIES))

    def shield(self, node: Shield) -> DataFrame:
        """Mask one relation's attributes by the provider's decision on each tuple (``R___gov``)."""
        frame = self.compile(node.child)
        source = next(s for s in sources(node) if s.relation == node.relation)
        attributes = [name for name, dtype in source.schema if dtype != "level"]  # the level is never masked
        key_dtype = dict(source.schema)[node.key]
        key = physical_name(node.relation, node.key)
        gov = physical_name(node.relation, GOV)
        decision = F.col(gov)
        provider = F.coalesce(decision["grant" if node.grant_only else "mask"], F.lit(0).cast("bigint"))
        immutable = F.coalesce(decision["immutable"], F.lit(False))
        server = (server_mask(node.server, node.stream, attributes, node.roles, key, key_dtype)
                  if node.server else None)
        governed = decision.isNotNull()
        frame = frame.withColumn("__mask", combined_mask(provider, immutable, server, node.combine, governed))
        others = sum(1 << j for j, name in enumerate(attributes) if name != "ts")
        frame = frame.filter(F.col("__mask").bitwiseAND(F.lit(others).cast("bigint")) != 0)
        # the provider's policy that let this tuple through (a server policy decides only beside the
        # provider's: combined_mask), named by its timestamp, as the provider dated it
        policy_ts = iso_instant(f"timestamp_micros({quote(gov)}.policy_ts)")
        entry = F.array(F.concat(F.lit(f"SP {node.stream} of "), policy_ts))
        frame = frame.withColumn(PROVENANCE, merged_provenance(frame, entry))
        masked = {physical_name(node.relation, name): j for j, name in enumerate(attributes) if name != "ts"}
        frame = frame.select(*[
            F.when(has_bit(F.col("__mask"), masked[c]), F.col(c)).alias(c) if c in masked else F.col(c)
            for c in frame.columns if c not in (gov, "__mask")
        ])
        for predicate in node.rechecked:  # a lifted shield: the same rows as one right above the stream
            frame = frame.filter(compile_expr(predicate))
        return frame

    def level_guard(self, node: LevelGuard) -> DataFrame:
        """The shepherd ran while reading (before the watermark); the filter is re-stated here,
        so a plan compiled over unguarded inputs still never lets an invisible tuple through."""
        frame = self.compile(node.child)
        return frame.filter(visible_at(F.col(physical_name(node.relation, "level")), node.level))

    def row_level(self, node: Node, frame: DataFrame) -> SparkColumn:
        """The LUB of the levels of the tuples a row of ``node`` came from."""
        assert self.inputs.lattice is not None
        if ROW_LEVEL in frame.columns:
            return F.col(ROW_LEVEL)
        levels = [F.col(physical_name(f.relation, f.name)) for f in node.fields if f.dtype == "level"]
        return lub(levels)

    def project(self, node: Project) -> DataFrame:
        frame = self.compile(node.child)
        keep = [F.col(c) for c in (POLICIES, PROVENANCE) if c in frame.columns]
        keep += [F.col(c) for c in frame.columns if c.startswith(CARRIED)]  # a shared template's member
        if self.inputs.lattice is not None:
            keep.append(self.row_level(node.child, frame).alias(ROW_LEVEL))
        if self.inputs.event_time:
            times = [F.col(physical_name(f.relation, f.name)) for f in node.child.fields
                     if f.name == "ts" and f.dtype == "timestamp" and f.relation]
            keep.append((F.greatest(*times) if len(times) > 1 else times[0]).alias(EVENT))
        return frame.select(*[compile_expr(e).alias(name) for name, e in node.items], *keep)

    def join(self, node: Join) -> DataFrame:
        left, right = self.compile(node.left), self.compile(node.right)
        right = right.drop(*[c for c in right.columns if c.startswith("__action__")])
        if POLICIES in right.columns:
            right = right.withColumnRenamed(POLICIES, "__right_policies")
        if PROVENANCE in right.columns:
            right = right.withColumnRenamed(PROVENANCE, "__right_provenance")
        condition = compile_expr(node.predicate) & self.coexistence(node)
        buckets = None if self.inputs.streaming else _time_buckets(node)
        if buckets is not None:
            left_ts, right_ts, width = buckets
            left = left.withColumn(BUCKET, F.explode(F.array(*[
                F.floor(F.unix_micros(F.col(left_ts)) / width) + k for k in (-1, 0, 1)])))
            right = right.withColumn(BUCKET, F.floor(F.unix_micros(F.col(right_ts)) / width))
            condition = condition & (left[BUCKET] == right[BUCKET])
        joined = left.join(right, condition, "inner")
        if buckets is not None:
            joined = joined.drop(left[BUCKET]).drop(right[BUCKET])
        if self.inputs.streaming:
            # Spark allows one event-time column per stream: the left side's stays; the right's
            # times stay as values. The next join's window conditions relate them to the left's,
            # so its state is still bounded by the watermark.
            times = {physical_name(b.relation, "ts") for b in sources(node.right)}
            joined = joined.select(*[F.col(f"`{c}`").alias(c, metadata={}) if c in times else F.col(f"`{c}`")
                                     for c in joined.columns])
        if "__right_policies" in joined.columns:
            merged = (F.sort_array(F.array_distinct(F.concat(F.col(POLICIES), F.col("__right_policies"))))
                      if POLICIES in left.columns else F.col("__right_policies"))
            joined = joined.withColumn(POLICIES, merged).drop("__right_policies")
        if "__right_provenance" in joined.columns:
            joined = joined.withColumn(PROVENANCE, merged_provenance(joined, F.col("__right_provenance"))
                                       ).drop("__right_provenance")
        return joined

    def coexistence(self, node: Join) -> SparkColumn:
        """a.ts - wb <= b.ts <= a.ts + wa for every left input a and the right input b."""
        condition = F.lit(True)
        for a in sources(node.left):
            for b in sources(node.right):
                if _counted(a.window) or _counted(b.window):
                    condition = condition & self.counted_coexistence(a, b)
                    continue
                wa, wb = _range_seconds(a.window), _range_seconds(b.window)
                ta, tb = F.col(physical_name(a.relation, "ts")), F.col(physical_name(b.relation, "ts"))
                if wb is not None:
                    condition = condition & (tb >= ta - F.expr(f"INTERVAL {_micros(wb)} MICROSECONDS"))
                if wa is not None:
                    condition = condition & (tb <= ta + F.expr(f"INTERVAL {_micros(wa)} MICROSECONDS"))
        return condition

    def counted_coexistence(self, a: Source, b: Source) -> SparkColumn:
        """``[ROWS na]`` and ``[ROWS nb]`` over one stream: when the later of the two tuples
        arrives, the earlier is still among the last n visible tuples of its window."""
        if not (_counted(a.window) and _counted(b.window)) or a.stream != b.stream:
            raise UnsupportedError(
                f"a join over [ROWS n] windows needs [ROWS n] on both sides of one stream (a self-join such as "
                f"Ray et al.'s Q6); {a.relation} {a.window or ''} and {b.relation} {b.window or ''} are not")
        if self.inputs.streaming:
            raise UnsupportedError("joins over [ROWS n] windows run in replay only; use [RANGE] windows to join "
                                   "continuously")
        assert a.window is not None and b.window is not None  # _counted above
        ra, rb = F.col(physical_name(a.relation, RANK)), F.col(physical_name(b.relation, RANK))
        return (rb - ra < F.lit(a.window.rows)) & (ra - rb < F.lit(b.window.rows))

    def aggregate(self, node: Aggregate) -> DataFrame:
        window = node.window
        if window is not None and window.kind == "rows":
            return self.rows_aggregate(node)
        frame = self.compile(node.child)
        if window is None or window.kind != "range" or window.size_seconds is None:
            raise UnsupportedError(
                f"aggregation needs a [RANGE size [SLIDE offset]] or [ROWS n] window on Spark (node {node.id} "
                f"has {window or 'no window'})")
        event_time = compile_expr(node.event_time)
        size = window.size_seconds
        slide = window.slide_seconds or size
        if slide <= size:
            bucket = F.window(event_time, f"{_micros(size)} microseconds", f"{_micros(slide)} microseconds")
        else:
            # Hopping windows with gaps: tumble by the offset, keep the first `size` of each.
            frame = frame.filter(F.unix_micros(event_time) % F.lit(_micros(slide)) < F.lit(_micros(size)))
            bucket = F.window(event_time, f"{_micros(slide)} microseconds")
        groups = [compile_expr(g).alias(name) for name, g in node.group_by]
        # a shared template's carried columns group too: per member, or per key value (streamwarden.engine.shared)
        carried = [c for c in frame.columns if c.startswith(CARRIED)]
        groups += [F.col(c) for c in carried]
        aggs = [_aggregate(a).alias(a.name) for a in node.aggregates]
        if node.min_group:
            aggs.append(F.count(F.lit(1)).alias(GROUP_SIZE))
        ids = policy_ids(node.child)
        if POLICIES in frame.columns:
            aggs += [F.bool_or(F.array_contains(POLICIES, p)).alias(f"__policy{k}") for k, p in enumerate(ids)]
        if self.inputs.lattice is not None:
            aggs.append(lub_of_group(self.row_level(node.child, frame)).alias("__lub"))
        grouped = frame.groupBy(bucket.alias("__window"), *groups).agg(*aggs)
        if node.min_group:  # the policy's minimum group size: smaller groups are not delivered at all
            grouped = grouped.filter(F.col(GROUP_SIZE) >= F.lit(node.min_group))
        order = [F.col(name) for name in node.items]
        keep = [rows.policy_array(ids, [F.col(f"__policy{k}") for k in range(len(ids))]).alias(POLICIES)
                ] if POLICIES in frame.columns else []
        if self.inputs.lattice is not None:
            keep.append(F.col("__lub").alias(ROW_LEVEL))
        end = F.col("__window.start") + F.expr(f"INTERVAL {_micros(size)} MICROSECONDS")
        if self.inputs.event_time:
            keep.append(end.alias(EVENT))  # a window's rows happen at its end
        keep += shielded_provenance(node.child)
        return grouped.select(
            F.col("__window.start").alias("window_start"),
            end.alias("window_end"),
            *order, *keep, *[F.col(c) for c in carried],
        )


def iso_instant(timestamp_sql: str) -> SparkColumn:
    """``2026-03-01T10:00:00Z`` (``.ffffff`` when it has microseconds) of the SQL timestamp
    ``timestamp_sql``, as every output writes times: one SQL expression, built in one call to
    the JVM, where composing it from functions takes a dozen (a plan with many timestamp
    columns, or many plans, as a level per processor has, paid seconds for them)."""
    micros = f"pmod(unix_micros({timestamp_sql}), 1000000)"
    return F.expr(f"concat(date_format({timestamp_sql}, 'yyyy-MM-dd\\'T\\'HH:mm:ss'), CASE WHEN {micros} != 0 THEN "
                  f"concat('.', lpad(CAST({micros} AS STRING), 6, '0')) ELSE '' END, 'Z')")


def merged_provenance(frame: DataFrame, more: SparkColumn) -> SparkColumn:
    """``frame``'s provenance entries and ``more``, each once, sorted."""
    if PROVENANCE not in frame.columns:
        return more
    return F.sort_array(F.array_distinct(F.concat(F.col(PROVENANCE), more)))


def shielded_provenance(node: Node) -> list[SparkColumn]:
    """An aggregate's provenance: the streams whose providers' policies decided its tuples
    (one SP per tuple and many tuples per row: named by stream, each SP in the tuples' own
    rows). Empty when no Security Shield is below ``node``."""
    streams = sorted({n.stream for n in walk(node) if isinstance(n, Shield)})
    if not streams:
        return []
    return [F.array(*[F.lit(f"SP {stream}: each tuple under its provider's policy") for stream in streams]
                    ).alias(PROVENANCE)]


def _aggregate(call: AggCall) -> SparkColumn:
    if not call.granted:
        return F.lit(None).cast(SPARK_TYPES.get(call.dtype, "double"))
    if call.arg is None:
        return F.count(F.lit(1))
    arg = compile_expr(call.arg)
    # try_sum/try_avg: a provider's extreme values give NULL, never an overflow error that stops every
    # query reading the stream (or tells the user something about tuples they cannot see).
    return {"min": F.min, "max": F.max, "count": F.count, "avg": F.try_avg, "sum": F.try_sum}[call.func](arg)


def _time_buckets(node: Join) -> tuple[str, str, int] | None:
    """An equi-join key on time for a replay join, so Spark compares only nearby tuples.

    With buckets at least as wide as both windows, a pair with ``a.ts - wb <= b.ts <=
    a.ts + wa`` lies in the same or an adjacent bucket: each left tuple joins on its own
    bucket and both neighbours, each right tuple on its own bucket, so every pair is
    found exactly once. Without it Spark checks the window only after pairing every
    tuple of the same key, which is quadratic in the recording's length. Continuous runs
    need none: their join state is bounded by the watermark.
    """
    a, b = sources(node.left)[0], sources(node.right)[0]
    if _counted(a.window) or _counted(b.window):
        return None
    wa, wb = _range_seconds(a.window), _range_seconds(b.window)
    if wa is None or wb is None:
        return None
    width = max(_micros(max(wa, wb)), 1)
    return physical_name(a.relation, "ts"), physical_name(b.relation, "ts"), width


def _counted(window: Window | None) -> bool:
    return window is not None and window.kind == "rows"


def _range_seconds(window: Window | None) -> float | None:
    """Seconds a tuple stays in its window; None = unbounded (no window or UNBOUNDED)."""
    if window is None or window.kind == "unbounded":
        return None
    if window.kind == "now":
        return 0.0
    if window.kind == "rows":
        raise UnsupportedError("joins over count-based windows ([ROWS n]) are not supported by the Spark backend yet")
    return window.size_seconds


def _micros(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


def action_names(root: Node) -> set[str]:
    """Actions whose values the graph reads at run time."""
    return _graph_actions(root)
