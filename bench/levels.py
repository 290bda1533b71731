"""Experiment 4: security levels (Ray et al., DBSec 2015; issue 4's performance targets), for :mod:`bench.suite`.

Over the cloud audit stream ``MessageLog`` of :mod:`streamwarden.datagen.cloud` (two conflict-of-interest
classes of three companies, every tuple at the level of its sender; one user cleared for ``[T, T]``, no
role policies: the levels alone decide): the throughput of a selection, a ``[RANGE]`` and a ``[ROWS]``
aggregate secured at one level against unsecured (replays); the same aggregate over ``[ROWS n]`` and
``[RANGE d]`` windows of several sizes; and what one processor per level costs (``run_levels`` with k =
1, 4, 16 levels in use; the control: as many queries at one level). :data:`NOTES` says how each is measured.

    >>> e = experiment()
    >>> sorted({p.group for p in e.pipelines}), len(e.pipelines), len(e.targets)
    (['levels in use', 'throughput', 'windows'], 27, 8)
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from bench.spark_probe import process_tree_cpu_s
from bench.stats import ratio
from bench.suite.experiment import (Column, Experiment, Facts, InProcess, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload, ratio_at_least, statistic)

USER = "cm"
TOP = "[T, T]"
NARROW = "[1, ⊥]"
STREAM = "MessageLog"
#: Two COI classes of three companies each: (3 + 2)² = 25 levels.
CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (("COI1", ("1", "2", "3")), ("COI2", ("A", "B", "C")))
SERVICES, SEED = 12, 4
SELECTION = 'SELECT ts, sender FROM MessageLog WHERE msgType = "send"'
SHAPES = {  # the aggregate compared over [ROWS n] and [RANGE d]; {window} is the window
    "count": 'SELECT COUNT(*), MIN(ts) FROM MessageLog {window} WHERE outcome = "success"',
    "per service": ('SELECT serviceId, COUNT(*), MIN(ts) FROM MessageLog {window} WHERE outcome = "success" '
                    "GROUP BY serviceId"),
}
LABELS = {"selection": "selection", "count": "aggregate", "per service": "aggregate per service"}
ROWS_N, RANGE_WINDOW = 100, "1 min"  # the windows of the throughput comparison
WINDOWS: tuple[tuple[str, int | str], ...] = (  # ROWS against RANGE: (shape, window), in size order
    ("count", 10), ("count", 100), ("count", 1000), ("count", "10 s"), ("count", "1 min"), ("count", "10 min"),
    ("per service", 100), ("per service", "1 min"))
LEVEL_QUERY = ("per service", RANGE_WINDOW)  # the query every processor runs
UNSECURED = "unsecured"
EACH, SHARED = "one processor per level", "control: all at one level"
IN_USE = "levels in use"
#: A levels-in-use run's own wall time and CPU time of every process (the runner's also hold the
#: forced GC that resets the heap's peaks, and the reading of metrics afterwards).
WALL, CPU = "run_wall_s", "run_cpu_s"
THROUGHPUT_TARGET = 0.9  # issue 4: a single-level query keeps this share of the unsecured rows/s
#: "Linear, not worse": the cost at the largest k lies at most this share of it above the straight
#: line through the two smallest k (an allowance for run-to-run noise).
EXCESS_TOLERANCE = 0.2
PLAN = "levels-plan.json"  # written by prepare: input folders, expected rows, levels per k
HASH_MODULUS = 2**31 - 1  # row hashes are summed modulo this, so the sum never overflows a long
MIB, KIB = 2.0**-20, 2.0**-10  # bytes to MiB, KiB


@dataclass(frozen=True)
class Sizes:
    """Sizes of experiment 4 (``rate_per_s`` counts invocations; each writes 2-6 MessageLog
    records: 10 min give about 20,000 tuples). None: the main input."""

    minutes: float = 10.0
    long_minutes: float | None = 40.0  # the selection and the [RANGE] aggregate of the throughput comparison
    #: Large enough that reading and parsing the input, which the shepherd does once for every
    #: level, shows beside each processor's fixed cost (planning, the JIT compiling Spark's code).
    in_use_minutes: float | None = 200.0
    rate_per_s: float = 16.0
    windows: tuple[tuple[str, int | str], ...] = WINDOWS
    level_counts: tuple[int, ...] = (1, 4, 16)
    shared_queries: int = 4  # the control: this many queries at one level (one of level_counts)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(minutes=3.0, long_minutes=None, in_use_minutes=None, rate_per_s=8.0,
                   windows=(("count", ROWS_N), ("count", RANGE_WINDOW)), level_counts=(1, 2, 4), shared_queries=2)


# -- workload ---------------------------------------------------------------------------------------
def catalog_text(classes: Sequence[tuple[str, Sequence[str]]] = CLASSES) -> str:
    """The cloud catalog: the lattice, MessageLog levelled by its sender, one user cleared for the top."""
    lattice = ", ".join(f"{name}: {json.dumps(list(members))}" for name, members in classes)
    return (f"lattice:\n  classes: {{{lattice}}}\nstreams:\n  {STREAM}:\n"
            "    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, "
            "outcome: string}\n"
            "    level: {from: sender}\n"
            f'users:\n  {USER}: {{clearance: "{TOP}"}}\n')


@cache
def _catalog() -> Any:
    from streamwarden.catalog.loader import load_catalog_text

    return load_catalog_text(catalog_text(), "<levels benchmark>")


def window_text(window: int | str) -> str:
    """``[ROWS n]`` for a count, ``[RANGE d]`` for a duration.

    >>> window_text(100), window_text("1 min")
    ('[ROWS 100]', '[RANGE 1 min]')
    """
    return f"[ROWS {window}]" if isinstance(window, int) else f"[RANGE {window}]"


def aggregate_query(shape: str, window: int | str) -> str:
    """The aggregate ``shape`` over ``window``."""
    return SHAPES[shape].format(window=window_text(window))


def _seconds(window: str) -> float:
    from streamwarden.language.parser import parse_query

    return parse_query(f"SELECT COUNT(*) FROM S [RANGE {window}]").sources[0].window.size_seconds


def expected_rows(records: Sequence[dict], shape: str, window: int | str | None) -> int:
    """The rows a query returns over ``records`` (those its level sees), counted in Python.

    Selection: the sends. ``[ROWS n]``: one row per arriving tuple without GROUP BY, else
    one per (arrival, service) among the qualifying tuples of the last n. ``[RANGE d]``
    (tumbling, epoch-aligned): one row per window (and service) with a qualifying tuple.

    >>> rs = [{"msgType": "send", "outcome": "success", "serviceId": s, "ts": f"2026-01-01T00:00:0{i}Z"}
    ...       for i, s in enumerate("aab")]
    >>> expected_rows(rs, "selection", None), expected_rows(rs, "per service", 2), expected_rows(rs, "count", "1 min")
    (3, 4, 1)
    """
    if shape == "selection":
        return sum(r["msgType"] == "send" for r in records)
    grouped = shape == "per service"
    qualifying = [r["serviceId"] if r["outcome"] == "success" else None for r in records]
    if isinstance(window, int):
        if not grouped:
            return len(records)
        held: dict[str, int] = {}  # qualifying tuples per service among the last n
        total = 0
        for i, service in enumerate(qualifying):
            if service is not None:
                held[service] = held.get(service, 0) + 1
            leaving = qualifying[i - window] if i >= window else None
            if leaving is not None:
                held[leaving] -= 1
                if not held[leaving]:
                    del held[leaving]
            total += len(held)
        return total
    size = round(_seconds(str(window)) * 1_000_000)
    return len({(_micros(r["ts"]) // size, service if grouped else None)
                for r, service in zip(records, qualifying) if service is not None})


def _micros(ts: str) -> int:
    return round(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1_000_000)


def level_candidates(lattice: Any) -> list[Any]:
    """Levels with an entry other than ⊥ in every class (16 with 3 + 3 companies): each sees
    the tuples of at least two companies."""
    from streamwarden.catalog.lattice import BOTTOM

    return [level for level in lattice.levels() if all(e != BOTTOM for e in level.entries)]


def spread_levels(visible: Mapping[str, int], candidates: Sequence[Any], k: int) -> list[Any]:
    """``k`` of the candidate levels, evenly spread over them sorted by how many tuples each
    sees (``visible``, by level), so the mean work per processor is about the same for every k.

    >>> spread_levels({"a": 1, "b": 5, "c": 3, "d": 9}, ["a", "b", "c", "d"], 2)
    ['c', 'd']
    """
    ordered = sorted(candidates, key=lambda level: (visible[str(level)], str(level)))
    if k >= len(ordered):
        return ordered
    return [ordered[int((i + 0.5) * len(ordered) / k)] for i in range(k)]


@dataclass(frozen=True)
class Replay:
    """One replayed query: an aggregate ``shape`` (or the selection) over ``window``, on the
    ``main`` or the ``long`` input; in the throughput comparison (secured at [T, T] and at the
    narrow level) and/or the ROWS-against-RANGE sweep (at [T, T])."""

    shape: str
    window: int | str | None
    input: str = "main"
    throughput: bool = False
    sweep: bool = False

    @property
    def query(self) -> str:
        return SELECTION if self.window is None else aggregate_query(self.shape, self.window)

    @property
    def label(self) -> str:
        return LABELS[self.shape] + ("" if self.window is None else f" {window_text(self.window)}")

    def variants(self) -> list[str]:
        return [UNSECURED, f"secured {TOP}"] + ([f"secured {NARROW}"] if self.throughput else [])

    def name(self, variant: str) -> str:
        return f"{self.label}{' (long input)' if self.input == 'long' else ''}/{variant}"


def replays(sizes: Sizes) -> list[Replay]:
    """The replayed queries, each once: those of the throughput comparison not in the sweep
    first, then the sweep in size order (the others of the comparison among them)."""
    long = "long" if sizes.long_minutes else "main"
    compared = [Replay("selection", None, long), Replay("count", RANGE_WINDOW, long), Replay("count", ROWS_N)]
    swept = [Replay(shape, window) for shape, window in sizes.windows]
    out: dict[tuple[str, int | str | None, str], Replay] = {}
    for r in [r for r in compared if r not in swept] + swept:
        out[(r.shape, r.window, r.input)] = replace(r, throughput=r in compared, sweep=r in swept)
    return list(out.values())


@dataclass(frozen=True)
class Generated:
    """A generated MessageLog: its folder, records (arrival order) and each record's level (an
    independent reading of the shepherd's: the sender's company, else the top)."""

    folder: Path
    records: list[dict]
    levels: list[Any]

    def visible(self, level: str) -> list[dict]:
        at = _catalog().lattice.parse(level)
        return [r for r, own in zip(self.records, self.levels) if own <= at]


def generate(folder: Path, minutes: float, rate_per_s: float) -> Generated:
    """``minutes`` of MessageLog at ``rate_per_s`` invocations a second, written to ``folder`` (one file)."""
    from streamwarden.datagen.cloud import message_log, write_message_log

    audit = message_log(classes={name: list(members) for name, members in CLASSES}, minutes=minutes,
                        services=SERVICES, rate_per_s=rate_per_s, seed=SEED)
    write_message_log(audit, folder, files=1)
    lattice = _catalog().lattice
    return Generated(folder, audit.records, [lattice.company(r["sender"]) or lattice.top for r in audit.records])


def in_use_name(queries: int, shared: bool = False) -> str:
    """The pipeline of ``queries`` continuous queries, one level each or (``shared``) all at one."""
    return f"{IN_USE}/{queries} queries at one level" if shared else f"{IN_USE}/k={queries}"


def _workload(sizes: Sizes) -> Workload:
    def prepare(work: Path) -> Facts:
        _PLANNED.clear()  # plans made over an earlier workload read files that are gone
        inputs, by_minutes = {}, {}  # an input as long as another is the same input
        for name, minutes in (("main", sizes.minutes), ("long", sizes.long_minutes or sizes.minutes),
                              ("in use", sizes.in_use_minutes or sizes.minutes)):
            if minutes not in by_minutes:
                by_minutes[minutes] = generate(work / f"MessageLog-{name.replace(' ', '-')}", minutes,
                                               sizes.rate_per_s)
            inputs[name] = by_minutes[minutes]
        expected, visible = {}, {}
        for r in replays(sizes):
            records = inputs[r.input].records
            for variant in r.variants():
                seen = records if variant == UNSECURED else inputs[r.input].visible(variant.removeprefix("secured "))
                expected[r.name(variant)] = expected_rows(seen, r.shape, r.window)
                visible[r.name(variant)] = len(seen)
        in_use = inputs["in use"]
        counts = Counter(in_use.levels)  # a level sees the tuples whose level it dominates
        candidates = level_candidates(_catalog().lattice)
        sees = {str(c): sum(n for own, n in counts.items() if own <= c) for c in candidates}
        levels = {in_use_name(k): [str(x) for x in spread_levels(sees, candidates, k)] for k in sizes.level_counts}
        # The control: the median level of the smallest k, repeated (one processor for them all).
        levels[in_use_name(sizes.shared_queries, True)] = levels[in_use_name(min(sizes.level_counts))][:1] * \
            sizes.shared_queries
        plan = {"folders": {name: str(g.folder) for name, g in inputs.items()}, "expected": expected,
                "visible": visible | {name: sum(sees[x] for x in chosen) for name, chosen in levels.items()},
                "levels": levels}
        (work / PLAN).write_text(json.dumps(plan, ensure_ascii=False, indent=1), encoding="utf-8")
        return {"tuples": len(inputs["main"].records), "tuples, long input": len(inputs["long"].records),
                "tuples, levels in use": len(in_use.records)}

    long = f", {sizes.long_minutes:g} min" if sizes.long_minutes else ""
    in_use = f", {sizes.in_use_minutes:g} min" if sizes.in_use_minutes else ""
    return Workload(f"MessageLog ({sizes.minutes:g}{long}{in_use} of {SERVICES} services at {sizes.rate_per_s:g} "
                    f"invocations/s, seed {SEED}; JSON lines, one file each)", prepare)


def _plan(work: Path) -> dict[str, Any]:
    return json.loads((work / PLAN).read_text(encoding="utf-8"))


# -- replay pipelines -----------------------------------------------------------------------------
class _Planned:
    """A result evaluated by one aggregate: row count, max key and a sum of row hashes of
    ``columns`` (a multiset checksum), so every column of every row is computed. Planned once;
    each execution runs a fresh copy of the physical plan (a copy has its own exchanges, so
    nothing is reused from an earlier run), as a continuous query is planned once too."""

    def __init__(self, frame: Any, key: str, columns: Sequence[str], expected: int, visible: int):
        from pyspark.sql import functions as F

        checksum = F.sum(F.pmod(F.xxhash64(*columns), F.lit(HASH_MODULUS)))
        began = time.perf_counter()
        self.plan = frame.agg(F.count(F.lit(1)), F.max(key), checksum)._jdf.queryExecution().executedPlan()
        self.plan_s = time.perf_counter() - began
        # A [ROWS n] replay evaluates each window function over its sliding frame, for every row.
        self.window_functions = str(self.plan.toString()).count("windowspecdefinition(")
        self.expected, self.visible = expected, visible

    def execute(self) -> tuple[int, int]:
        row = self.plan.clone().executeCollect()[0]
        return int(row.getLong(0)), 0 if row.isNullAt(2) else int(row.getLong(2))


#: Planned replays by pipeline name: the runner's warm-up plans them, the measured runs execute.
_PLANNED: dict[str, _Planned] = {}


def _build(spark: Any, work: Path, replay: Replay, variant: str) -> _Planned:
    """Secured: ``build_job(...).union()`` (its rows carry ``level``, which the checksum covers);
    unsecured: ``unsecured_frame`` through the same output formatting (ISO timestamps)."""
    from streamwarden.engine.execute import build_job, output_frame, unsecured_frame
    from streamwarden.security.passes import SecurityOptions, secure
    from streamwarden.security.rewrite.algorithm import AuthorizedGraph

    plan, name, catalog = _plan(work), replay.name(variant), _catalog()
    level = TOP if variant == UNSECURED else variant.removeprefix("secured ")
    rewriting = secure(catalog, USER, replay.query, SecurityOptions(level=level))
    inputs = {STREAM: Path(plan["folders"][replay.input])}
    columns = tuple(f.name for f in rewriting.plan.fields)
    if variant == UNSECURED:
        raw = unsecured_frame(spark, catalog, rewriting, inputs)
        frame = output_frame(AuthorizedGraph("unsecured", rewriting.plan, "none", ()), raw)
    else:
        frame, columns = build_job(spark, catalog, rewriting, inputs, streaming=False).union(), (*columns, "level")
    return _Planned(frame, columns[0], columns, plan["expected"][name], plan["visible"][name])


def _replay(replay: Replay, variant: str) -> InProcess:
    def call(spark: Any, work: Path, out: Path) -> dict[str, float]:
        name = replay.name(variant)
        if name not in _PLANNED:
            _PLANNED[name] = _build(spark, work, replay, variant)
        planned = _PLANNED[name]
        busy = _machine_busy_s()
        rows, checksum = planned.execute()
        return {"rows_out": rows, "rows_expected": planned.expected, "checksum": checksum,
                "tuples_visible": planned.visible, "window_functions": planned.window_functions,
                "plan_s": planned.plan_s, "machine_cpu_s": _machine_busy_s() - busy}

    return InProcess(call)


# -- levels in use: one processor per level ------------------------------------------------------------
class Memory:
    """Peak memory over a block, sampled every ``period_s`` in a background thread: the resident
    memory of this process tree (the Spark JVM, its Python workers, this process), the JVM heap left
    after its latest collection (what survived it: closer to what the processors hold), and the heap
    pools' peak since a full GC and a reset (an upper bound dominated by young garbage)."""

    def __init__(self, spark: Any, period_s: float = 0.1):
        management = spark._jvm.java.lang.management.ManagementFactory
        self.pools = [p for p in management.getMemoryPoolMXBeans() if str(p.getType().toString()) == "Heap memory"]
        self.collectors, self.period_s = list(management.getGarbageCollectorMXBeans()), period_s
        spark._jvm.java.lang.System.gc()  # leftovers of the previous run are not this one's
        for pool in self.pools:
            pool.resetPeakUsage()
        self.heap_before_bytes, self.rss_before_bytes = self.after_gc(), tree_rss_bytes(os.getpid())
        self.peak_rss_bytes = self.peak_live_heap_bytes = self.peak_heap_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Memory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_heap_bytes = sum(int(pool.getPeakUsage().getUsed()) for pool in self.pools)

    def after_gc(self) -> int:
        """Heap in use right after the most recent collection (of any collector)."""
        latest, used = -1, 0
        for collector in self.collectors:
            info = collector.getLastGcInfo()  # com.sun.management.GcInfo, None before the first
            if info is not None and int(info.getEndTime()) > latest:
                after = info.getMemoryUsageAfterGc()
                latest, used = int(info.getEndTime()), sum(int(after.get(k).getUsed()) for k in after.keySet())
        return used

    def _loop(self) -> None:
        while True:
            self.peak_rss_bytes = max(self.peak_rss_bytes, tree_rss_bytes(os.getpid()))
            self.peak_live_heap_bytes = max(self.peak_live_heap_bytes, self.after_gc())
            if self._stop.wait(self.period_s):
                return


def tree_rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` and every live descendant."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/statm") as statm:
                children.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
                rss[int(entry)] = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):  # the process ended while we looked
            continue
    total, pending = 0, [pid]
    while pending:
        total += rss.get(pending[-1], 0)
        pending.extend(children.get(pending.pop(), []))
    return total


#: Micro-batch phases in Spark's progress reports, as the report names them.
PHASES = (("queryPlanning", "planning"), ("addBatch", "running the batch"), ("walCommit", "offset log"),
          ("commitOffsets", "commit log"), ("latestOffset", "listing the input"), ("getBatch", "getBatch"),
          ("triggerExecution", "whole trigger"))


def progress_totals(streams: Sequence[Any]) -> dict[str, float]:
    """Micro-batches, their summed durations by phase (``phase_<name>_ms``) and the state the
    processors hold once their last batch is committed, from Spark's progress reports."""
    batches = state_bytes = state_rows = 0
    phases = {phase: 0 for phase, _ in PHASES}
    for stream in streams:
        progress = stream.recentProgress
        batches += len(progress)
        for report in progress:
            for phase, ms in report.durationMs.items():
                phases[phase] = phases.get(phase, 0) + int(ms)
        with_state = [report for report in progress if report.stateOperators]
        if with_state:
            state_bytes += sum(int(op.memoryUsedBytes) for op in with_state[-1].stateOperators)
            state_rows += sum(int(op.numRowsTotal) for op in with_state[-1].stateOperators)
    return {"batches": batches, "state_bytes": state_bytes, "state_rows": state_rows,
            **{f"phase_{phase}_ms": phases.get(phase, 0) for phase, _ in PHASES}}


def _levels_in_use(name: str) -> InProcess:
    """``run_levels`` over the levels prepare chose for pipeline ``name``, until every processor has
    stopped (available now): the run's own wall and CPU time (not the forced GC before, nor the
    reading of metrics after, which the runner's times hold), by kind, and its memory."""

    def call(spark: Any, work: Path, out: Path) -> dict[str, float]:
        from streamwarden.api import run_levels
        from streamwarden.catalog.store import sqlite_url
        from streamwarden.engine.levels.processors import LevelQuery

        from bench.cost_meter import CostMeter

        plan = _plan(work)
        queries = [LevelQuery(f"q{i:02d}", USER, aggregate_query(*LEVEL_QUERY), level)
                   for i, level in enumerate(plan["levels"][name])]
        meter = CostMeter(spark)
        with Memory(spark) as memory:
            mark, busy = meter.mark(), _machine_busy_s()
            # Store, checkpoints and rows under ``out``: the runner deletes it after each run.
            processors = run_levels(_catalog(), queries, {STREAM: plan["folders"]["in use"]}, out / "rows",
                                    store_url=sqlite_url(out / "store.db"), spark=spark, available_now=True)
            start_s = time.perf_counter() - mark.wall
            for p in processors:
                p.stream.awaitTermination()
            machine_cpu_s = _machine_busy_s() - busy  # every process's, for the other processes' share
            cost = meter.since(mark)
        return {"queries": len(queries), "processors": sum(1 for p in processors if p.queries),
                "shepherds": sum(1 for p in processors if not p.queries), "visible_tuples": plan["visible"][name],
                WALL: cost.wall_s, CPU: cost.cpu_s, "start_s": start_s, "jvm_cpu_s": cost.jvm_cpu_s,
                "task_cpu_s": cost.jvm_threads_s["tasks"], "jit_cpu_s": cost.jvm_threads_s["JIT"],
                "driver_cpu_s": cost.driver_cpu_s, "machine_cpu_s": machine_cpu_s, "jobs": cost.jobs,
                "tasks": cost.tasks,
                "peak_rss_bytes": memory.peak_rss_bytes, "rss_before_bytes": memory.rss_before_bytes,
                "peak_heap_bytes": memory.peak_heap_bytes, "live_heap_bytes": memory.peak_live_heap_bytes,
                "heap_before_bytes": memory.heap_before_bytes, **progress_totals([p.stream for p in processors])}

    return InProcess(call)


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any]:
    """Least squares ``y = a + b·x`` and how far the points are from it.

    ``max_relative_residual``: the largest |y − fit| / fit; ``slope_growth``: the slope between
    the two largest x over the slope between the two smallest (1 for a straight line, > 1 when
    each added level costs more than the one before; NaN unless the first slope is positive);
    ``excess``: how far y at the largest x lies above the line through the two smallest points,
    as a share of that y (≤ 0 for linear or slower growth); ``growth``: y at the largest x over
    y at the one before, against ``proportional_growth`` (their ratio of x).

    >>> fit = linear_fit([1, 4, 16], [3.0, 6.0, 18.0])
    >>> round(fit["a"], 2), round(fit["b"], 2), round(fit["excess"], 2), fit["slope_growth"]
    (2.0, 1.0, 0.0, 1.0)
    """
    nan = float("nan")
    points = sorted(zip(xs, ys))
    n = len(points)
    if n < 2:
        return {"a": nan, "b": nan, "residuals": [], "max_relative_residual": nan, "slope_growth": nan,
                "excess": nan, "growth": nan, "proportional_growth": nan}
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = ratio(sum((x - mx) * (y - my) for x, y in points), sum((x - mx) ** 2 for x, _ in points))
    a = my - b * mx
    residuals = [ratio(y - (a + b * x), a + b * x) for x, y in points]
    (x0, y0), (x1, y1) = points[0], points[1]
    (xa, ya), (xb, yb) = points[-2], points[-1]
    return {"a": a, "b": b, "residuals": residuals, "max_relative_residual": max(abs(r) for r in residuals),
            "slope_growth": ratio(ratio(yb - ya, xb - xa), ratio(y1 - y0, x1 - x0)) if n >= 3 and y1 > y0 else nan,
            "excess": ratio(yb - (y0 + ratio(y1 - y0, x1 - x0) * (xb - x0)), yb) if n >= 3 else nan,
            "growth": ratio(yb, ya), "proportional_growth": ratio(xb, xa)}


# -- targets ------------------------------------------------------------------------------------------
def _throughput_ratios(m: Measured, level: str, metric: str = "rows_per_s") -> dict[str, float]:
    """Per compared query: secured at ``level`` over unsecured on ``metric`` (a CPU time: unsecured over secured)."""
    queries = dict.fromkeys(str(m.coordinates[n]["query"]) for n in m.where(throughput="yes"))
    values = {q: (m.value(metric, throughput="yes", query=q, variant=f"secured {level}"),
                  m.value(metric, throughput="yes", query=q, variant=UNSECURED)) for q in queries}
    return {q: (s / u if metric == "rows_per_s" else u / s) for q, (s, u) in values.items()}


def _single_level(level: str, text: str) -> Target:
    def check(m: Measured) -> Verdict:
        ratios = _throughput_ratios(m, level)
        if not ratios or any(r != r for r in ratios.values()):
            return Verdict(None, "not measured")
        cpu = _throughput_ratios(m, level, "cpu_s")
        at = {q: dict(throughput="yes", query=q) for q in ratios}
        measured = "; ".join(
            f"{q}: {r:.2f}× ({m.value('rows_per_s', variant=f'secured {level}', **at[q]):,.0f} vs "
            f"{m.value('rows_per_s', variant=UNSECURED, **at[q]):,.0f} tuples/s; CPU {cpu[q]:.2f}×)"
            for q, r in ratios.items())
        share = [m.value("tuples_visible", variant=f"secured {level}", **a) / m.value("rows_in", variant=UNSECURED, **a)
                 for a in at.values()]
        return Verdict(min(ratios.values()) >= THROUGHPUT_TARGET,
                       (f"sees {100 * share[0]:.0f} % of the tuples; " if level != TOP else "") + measured)

    return Target(text, check)


def _linear(metric: str, label: str, unit: str, scale: float, ks: Sequence[int]) -> Target:
    ends = f"k = {ks[0]} and {ks[1]}" if len(ks) > 1 else ""

    def check(m: Measured) -> Verdict:
        ys = [m.value(metric, group=IN_USE, variant=EACH, queries=k) for k in ks]
        if len(ks) < 3 or any(y != y for y in ys):
            return Verdict(None, "not measured")
        fit = linear_fit(ks, [y * scale for y in ys])
        excess = fit["excess"]
        return Verdict(excess <= EXCESS_TOLERANCE,
                       f"{label}: {fit['b']:.2f} {unit} per level + {fit['a']:.2f} {unit} (least squares, largest "
                       f"residual {100 * fit['max_relative_residual']:.0f} %); cost({ks[-1]}) is {100 * excess:.0f} % "
                       f"{'above' if excess > 0 else 'below'} the line through {ends}; a level added at k = "
                       f"{ks[-2]}→{ks[-1]} cost {_fmt(fit['slope_growth'], '.2f', '×')} one added at k = "
                       f"{ks[0]}→{ks[1]}")

    return Target(f"one processor per level: {label} grows linearly with the levels in use, not worse (k = "
                  f"{', '.join(map(str, ks))}; taken as: cost({ks[-1]}) at most {100 * EXCESS_TOLERANCE:.0f} % above "
                  f"the line through {ends})", check)


def _sixteen_levels(m: Measured) -> Verdict:
    at = {k: dict(group=IN_USE, variant=EACH, queries=k) for k in (1, 16)}
    cpu, tasks, jit = ({k: m.value(metric, **at[k]) for k in at} for metric in (CPU, "task_cpu_s", "jit_cpu_s"))
    if any(v != v for v in cpu.values()):
        return Verdict(None, "not measured")
    return Verdict(cpu[16] / cpu[1] <= 4, f"{cpu[16] / cpu[1]:.1f}× ({cpu[16]:.1f} s vs {cpu[1]:.1f} s; Spark's "
                   f"tasks {tasks[16] / tasks[1]:.1f}×, the JIT {jit[16] / max(jit[1], 1e-9):.1f}×)")


def _rows_as_predicted(m: Measured) -> Verdict:
    checked = {name: runs for name, runs in m.runs_by_pipeline.items() if runs and "rows_expected" in runs[0]}
    agree = [name for name, runs in checked.items()
             if all(r["rows_out"] == r["rows_expected"] and r["checksum"] == runs[0]["checksum"] for r in runs)]
    if not checked:
        return Verdict(None, "not measured")
    wrong = sorted(set(checked) - set(agree))
    return Verdict(not wrong, f"{len(agree)}/{len(checked)} pipelines agree" + (f" (not: {', '.join(wrong)})"
                                                                                 if wrong else ""))


def targets(sizes: Sizes, compared: Sequence[Replay]) -> list[Target]:
    """Issue 4's targets (and issue 14's on the cheap queries, quoted in the project's README)."""
    ks = sorted(sizes.level_counts)
    made = [_single_level(TOP, f"a single-level query keeps ≥ {THROUGHPUT_TARGET:g}× the unsecured rows/s (level "
                               f"{TOP}: every tuple visible, so both do the same work)"),
            _single_level(NARROW, f"… and at a narrow level, {NARROW}")]
    made += [ratio_at_least(f"level-secured {r.label} at {TOP} ≥ 0.95× the unsecured rows/s (issue 14)",
                            r.name(f"secured {TOP}"), r.name(UNSECURED), 0.95)
             for r in compared if not isinstance(r.window, int)]
    made += [_linear(CPU, "CPU time, all processes", "s", 1.0, ks),
             _linear("live_heap_bytes", "JVM heap after GC (max)", "MiB", MIB, ks),
             Target("16 levels in use cost at most 4× the CPU time of one (one processor per level and the "
                    "shepherd's query; issue 14)", _sixteen_levels),
             Target("every replay pipeline returns the rows an independent count of the generated data predicts "
                    "(secured at each level, and unsecured), the same rows in every run", _rows_as_predicted)]
    return made


# -- observations -------------------------------------------------------------------------------------
def _spread(m: Measured, **at: float | str) -> float:
    """The largest (max − min) / median wall time among the pipelines at ``at`` (NaN with one run)."""
    spreads = [ratio(statistic(runs, "wall_s", "max") - statistic(runs, "wall_s", "min"),
                     statistic(runs, "wall_s")) for runs in (m.runs_by_pipeline[n] for n in m.where(**at))]
    return max(spreads) if spreads and all(len(m.runs_by_pipeline[n]) > 1 for n in m.where(**at)) else float("nan")


def _throughput_notes(m: Measured) -> list[str]:
    rel = _throughput_ratios(m, TOP)
    if not rel or any(r != r for r in rel.values()):
        return []
    within = [q for q, r in rel.items() if abs(1 - r) <= _spread(m, throughput="yes", query=q) / 2]
    text = (f"At {TOP} the secured replays ran at {min(rel.values()):.2f}–{max(rel.values()):.2f}× the unsecured "
            "rows/s. The shepherd and the guard are plain Spark SQL (a map lookup of the sender giving an array of "
            "level codes, then a dominance predicate fixed by the query's level), compiled with the scan")
    if within:
        text += (f"; for {', '.join(within)} the difference is within half the configuration's run-to-run spread "
                 "(wall time, max − min over the median), so not a measured difference")
    first = next(iter(rel))  # every input has about the same share of each sender
    share = m.value("tuples_visible", throughput="yes", query=first, variant=f"secured {NARROW}") / m.value(
        "rows_in", throughput="yes", query=first, variant=UNSECURED)
    return [text + f". At {NARROW} ({100 * share:.0f} % of the tuples visible) the guard drops the rest before any "
                   "window."]


def _rows_swept(m: Measured, shape: str) -> list[tuple[float, str]]:
    """(n, window text) of the sweep's ``shape`` aggregates over [ROWS n] windows, by n."""
    return sorted({(float(m.coordinates[n]["[ROWS n]: n"]), str(m.coordinates[n]["window"]))
                   for n in m.where(sweep="yes", aggregate=LABELS[shape], **{"window type": "ROWS"})})


def _rows_notes(m: Measured) -> list[str]:
    notes = []

    def value(metric: str, shape: str, window: str, variant: str = UNSECURED) -> float:
        return m.value(metric, sweep="yes", aggregate=LABELS[shape], window=window, variant=variant)

    costlier = []
    rows, rng = window_text(ROWS_N), window_text(RANGE_WINDOW)
    for shape in SHAPES:
        times = value("rows_per_s", shape, rng) / value("rows_per_s", shape, rows)  # cost per tuple, ROWS over RANGE
        if times > 1.5:
            costlier.append(f"{times:.1f}× ({shape})")
    if costlier:
        notes.append(
            f"The same aggregate costs {' and '.join(costlier)} as much per tuple over {rows} as over {rng} "
            "(unsecured): a count-based window orders the whole stream by (ts, arrival place) with a window function "
            "that has no partition (`engine.rows.replay_rows`: `Window.orderBy(ts, arrival)`), which Spark runs in "
            "one task, on one core whatever the cluster, where an event-time window's aggregate is partitioned.")
    counted = _rows_swept(m, "count")
    if len(counted) > 1:
        (n0, w0), (n1, w1) = counted[0], counted[-1]
        a, b = (value("rows_per_s", "count", w, f"secured {TOP}") / value("rows_per_s", "count", w) for w in (w0, w1))
        ca, cb = (value("cpu_s", "count", w) / value("cpu_s", "count", w, f"secured {TOP}") for w in (w0, w1))
        if b < 0.9 and b < a - 0.15:
            notes.append(
                f"Secured [ROWS n] aggregates without GROUP BY fall behind as n grows: {a:.2f}× the unsecured rows/s "
                f"at n = {n0:g}, {b:.2f}× at n = {n1:g} (CPU time: {ca:.2f}× → {cb:.2f}×). The row's level is one "
                "more aggregate over the same `rowsBetween(-(n - 1), 0)` frame (`engine.rows.replay_rows`: the "
                "bitwise OR of the qualifying tuples' level bits, `lub_of_group`), and Spark re-aggregates a sliding "
                "frame for every row: the physical plan has "
                f"{value('window_functions', 'count', w1, f'secured {TOP}'):.0f} window functions against "
                f"{value('window_functions', 'count', w1):.0f} unsecured.")
    grouped = _rows_swept(m, "per service")
    if len(grouped) > 1:
        (n0, w0), (n1, w1) = grouped[0], grouped[-1]
        a, b = (1e6 / value("rows_per_s", "per service", w) for w in (w0, w1))
        if b > 1.3 * a:
            notes.append(
                f"With GROUP BY a [ROWS n] replay copies every qualifying tuple into the n windows that hold it "
                f"(`explode(sequence(rn, rn + n - 1))`, then a group-by per arrival), so its cost grows with n: "
                f"{a:.0f} ms per 1,000 tuples at n = {n0:g}, {b:.0f} at n = {n1:g} "
                f"({value('rows_out', 'per service', w0):,.0f} → {value('rows_out', 'per service', w1):,.0f} rows), "
                "where an event-time window's cost does not depend on its size.")
    return notes


#: Costs fitted against the levels in use: (metric, label, unit, scale).
FITTED = (
    (WALL, "wall time", "s", 1.0),
    (CPU, "CPU time, all processes", "s", 1.0),
    ("jvm_cpu_s", "CPU time, Spark JVM", "s", 1.0),
    ("driver_cpu_s", "CPU time, Python driver", "s", 1.0),
    ("phase_triggerExecution_ms", "micro-batch time, summed", "ms", 1.0),
    ("peak_rss_bytes", "peak RSS, process tree", "MiB", MIB),
    ("peak_heap_bytes", "peak JVM heap", "MiB", MIB),
    ("live_heap_bytes", "JVM heap after GC (max)", "MiB", MIB),
    ("state_bytes", "state store memory", "KiB", KIB),
)


def _fmt(value: float, spec: str = ".2f", suffix: str = "") -> str:
    """``value`` formatted, or ``—`` when it was not measured (NaN)."""
    return "—" if value != value else f"{value:{spec}}{suffix}"


def _fits_note(fits: Mapping[str, dict[str, Any]], ks: Sequence[int]) -> str:
    """The fits ``cost(k) = a + b·k`` of every :data:`FITTED` cost, in one paragraph."""
    return (
        "Fits `cost(k) = a + b·k` over the medians (b: the cost of one more level; *slope growth*: the slope between "
        "the two largest k over that between the two smallest, 1 on a straight line; *above the line*: how far the "
        "cost at the largest k lies above the line through the two smallest, as a share of it): "
        + "; ".join(f"{label}: b = {_fmt(fit['b'], ',.2f')} {unit}, a = {_fmt(fit['a'], ',.2f')} {unit}, largest "
                    f"residual {_fmt(100 * fit['max_relative_residual'], '.0f', ' %')}, slope growth "
                    f"{_fmt(fit['slope_growth'], '.2f', '×')}, {_fmt(100 * fit['excess'], '.0f', ' %')} above the "
                    f"line, cost({ks[-1]}) / cost({ks[-2]}) {_fmt(fit['growth'], '.2f', '×')} (proportional: "
                    f"{fit['proportional_growth']:g}×)"
                    for (metric, label, unit, _) in FITTED for fit in [fits[metric]]))


def _processor_notes(m: Measured, facts: Facts, ks: Sequence[int]) -> list[str]:
    ks = [k for k in ks if m.where(group=IN_USE, variant=EACH, queries=k)]
    if len(ks) < 2:
        return []
    at = {k: m.where(group=IN_USE, variant=EACH, queries=k)[0] for k in ks}
    fits = {metric: linear_fit(ks, [scale * m.median(at[k], metric) for k in ks]) for metric, _, _, scale in FITTED}
    last = at[ks[-1]]
    cpu, tasks, jit = ({k: m.median(at[k], metric) for k in ks} for metric in (CPU, "task_cpu_s", "jit_cpu_s"))
    each = ", ".join(map(str, ks))
    notes = [_fits_note(fits, ks) + ". CPU s per query: " + " → ".join(f"{cpu[k] / k:.2f}" for k in ks)
             + f" at k = {each}.",
             f"{ks[-1]} levels in use against {ks[0]}: {cpu[ks[-1]] / cpu[ks[0]]:.1f}× the CPU time "
             f"({cpu[ks[-1]]:.1f} s against {cpu[ks[0]]:.1f} s), {tasks[ks[-1]] / tasks[ks[0]]:.1f}× the time of "
             f"Spark's tasks ({tasks[ks[-1]]:.1f} s against {tasks[ks[0]]:.1f} s: the shepherd's query reads and "
             f"parses the input once, and each processor reads its Parquet), "
             f"{jit[ks[-1]] / max(jit[ks[0]], 1e-9):.1f}× the JIT compiler's ({jit[ks[-1]]:.1f} s against "
             f"{jit[ks[0]]:.1f} s: each processor's plans run Spark code the JVM has not compiled yet, a cost that "
             "fades as a long-running JVM warms up), and the rest is each processor's own micro-batches: planning, "
             "offset and commit logs, state and its `foreachBatch` writes."]
    # The processors' query replayed at [T, T] over the main input, scaled to the levels' input.
    replay = m.value("cpu_s", sweep="yes", aggregate=LABELS[LEVEL_QUERY[0]], window=window_text(LEVEL_QUERY[1]),
                     variant=f"secured {TOP}")
    scaled = replay * facts["tuples, levels in use"] / facts["tuples"]
    compared = ("" if replay != replay else f" ({fits[CPU]['b'] / scaled:.1f}× what a replay of the same query at "
                f"{TOP} takes over that input: {replay:.2f} s over the {facts['tuples']:,} tuples of the main input, "
                "scaled)")
    planning = m.median(last, "phase_queryPlanning_ms") / max(m.median(last, "phase_triggerExecution_ms"), 1)
    notes.append(
        f"One processor per level costs about {fits[CPU]['b']:.1f} s of CPU time per level here, by least squares "
        f"over k = {each}{compared}: every processor reads its input (the shepherd's Parquet: the input itself is "
        f"parsed once), plans each of its micro-batches ({100 * planning:.0f} % of the summed trigger time at k = "
        f"{ks[-1]}), checkpoints its offsets and state, and writes through its own `foreachBatch`. `run_levels` "
        "authorizes and compiles every query (`build_job`, DataFrames built through py4j), then starts the "
        f"processors one after the other, all on the driver: at k = {ks[-1]} the `run_levels` call took "
        f"{m.median(last, 'start_s'):.1f} s of the {m.median(last, WALL):.1f} s wall time, "
        + " → ".join(f"{m.median(at[k], 'start_s') / k:.2f} s" for k in ks) + f" per processor at k = {each}"
        + (", and the wall time grows faster than the CPU time." if fits[WALL]["excess"] > fits[CPU]["excess"]
           else "."))
    for shared in m.where(group=IN_USE, variant=SHARED):
        q = int(m.coordinates[shared]["queries"])
        twin = at.get(q)
        if twin and m.median(shared, "tasks") > m.median(twin, "tasks"):
            notes.append(
                f"Sharing a processor is not cheaper here: {q} queries at one level (one processor) took "
                f"{m.median(shared, CPU):.1f} s of CPU time and {m.median(shared, WALL):.1f} s wall against "
                f"{m.median(twin, CPU):.1f} s and {m.median(twin, WALL):.1f} s for {q} levels in {q} processors, and "
                f"ran {m.median(shared, 'tasks'):,.0f} Spark tasks against {m.median(twin, 'tasks'):,.0f}. The "
                "processor's writer (`levels.processors._writer`) persists the micro-batch, then runs one write job "
                "per query, each filtering every partition of the union of all the level's queries: q jobs over q × "
                "(shuffle partitions) partitions per micro-batch, so the tasks grow with the square of the queries "
                "sharing a level, and one streaming query runs them one after the other. Writing once, partitioned "
                "by `_query`, would make it one job.")
    rss_runs = [r["peak_rss_bytes"] * MIB for k in ks for r in m.runs_by_pipeline[at[k]]]
    live, rss, state = fits["live_heap_bytes"], fits["peak_rss_bytes"], fits["state_bytes"]
    notes.append(
        f"Memory per level: the heap left after a collection grew by about {live['b']:.0f} MiB per level and the "
        f"state stores by {state['b']:.0f} KiB (a few rows per service and window). The process tree's peak RSS "
        f"ranged {min(rss_runs):,.0f}–{max(rss_runs):,.0f} MiB over the runs (fit: {rss['b']:.0f} MiB per level), "
        "with no steady relation to k: it follows the JVM growing its heap and native arenas, which it does not give "
        "back, more than what the processors hold.")
    return notes


def explain(ks: Sequence[int]) -> Callable[[Measured, Facts], list[str]]:
    """The observations: what the level guard costs, where [ROWS n] spends its time, what one
    processor per level costs, and whether other processes shared the cores."""

    def observations(m: Measured, facts: Facts) -> list[str]:
        notes = _throughput_notes(m) + _rows_notes(m) + _processor_notes(m, facts, ks)
        # Other processes' CPU during each run: the machine's busy time less this process tree's.
        # (a levels-in-use run's own window where it has one, else the runner's)
        others = [{"cores": max(r["machine_cpu_s"] - (r[CPU] if CPU in r else r["cpu_s"]), 0)
                   / (r[WALL] if WALL in r else r["wall_s"])}
                  for runs in m.runs_by_pipeline.values() for r in runs if "machine_cpu_s" in r]
        if statistic(others, "cores") > 0.25:
            notes.append(f"Other processes kept {statistic(others, 'cores'):.2f} cores busy on average (median over "
                         f"the runs) of the {len(os.sched_getaffinity(0))}: wall times include waiting for a core.")
        return notes

    return observations


# -- the declaration ----------------------------------------------------------------------------------
NOTES = (
    "Replay pipelines (throughput, ROWS against RANGE): each result is evaluated by one aggregate (row count, max "
    "key, a checksum of every row), planned once, in the runner's warm-up run; every measured run executes a fresh "
    "copy of that physical plan, so the runner's wall and CPU time are execution alone, as a continuous query is "
    "planned once too (`plan_s`: the planning). *Secured* is `build_job(...).union()` at the level shown (its rows "
    "carry `level`, which the checksum covers); *unsecured* is `unsecured_frame` (same reader, no shepherd, no "
    f"level) through the same output formatting. At {TOP} the shepherd labels every tuple and the guard keeps all; "
    f"at {NARROW} it keeps the visible tuples (`tuples_visible`). Rows per second count input tuples.",
    "CPU is that of this process tree: this Python process, the Spark JVM and any Python workers it starts. "
    "A `[ROWS n]` aggregate emits a row per arriving tuple "
    "(per service present in its window with GROUP BY); a `[RANGE d]` one a row per tumbling window (and service).",
    "Levels in use: `run_levels` with one query per level, "
    f"`{aggregate_query(*LEVEL_QUERY)}`, over one input folder (one file, `available_now`): one Spark streaming "
    "query per level, started one after the other on the one session, each reading through its own level guard and "
    "writing through `foreachBatch`; the trusted shepherd's own streaming query reads and parses the input once, "
    "levels each tuple and writes them as Parquet, which the processors read. The levels are those with a company "
    "or T in both classes (16), sorted by how many tuples each sees and picked evenly from that order, so the mean "
    "work per processor is about the same for every k. The control: as many queries at one level, which "
    "`run_levels` puts in one shared processor.",
    "Levels in use, measured: *wall* from the `run_levels` call until every processor has stopped, *CPU* user + "
    "system time of this process and its children (the Spark JVM, its Python workers) meanwhile (`run_wall_s`, "
    "`run_cpu_s`; the runner's `wall_s` and `cpu_s` add a forced GC before, which resets the heap's peaks, and the "
    "reading of the metrics after); *start*: the `run_levels` call itself (authorizing, compiling and "
    "starting each processor); *JVM CPU*: the JVM tree, of which Spark's *task* threads and the HotSpot *JIT* "
    "compiler threads; *driver*: this Python process (planning, `foreachBatch`). *Peak RSS*: the process tree's "
    "resident memory, sampled every 0.1 s (much of it the JVM's native memory, which it does not give back); *peak "
    "heap*: the heap pools' peak after a GC (young garbage included); *heap after GC*: the most the heap held right "
    "after a collection during the run; *state*: the state stores' memory in each processor's last progress, summed. "
    "Phases are summed over the processors' micro-batches (they run at the same time, so the sums exceed the wall "
    "time).",
)


def _pipelines(sizes: Sizes) -> list[Pipeline]:
    made = []
    for r in replays(sizes):
        params: dict[str, float | str] = {"query": r.label, "aggregate": LABELS[r.shape],
                                          "window": "—" if r.window is None else window_text(r.window),
                                          "input": r.input, "throughput": "yes" if r.throughput else ""}
        if isinstance(r.window, int):
            params |= {"window type": "ROWS", "[ROWS n]: n": r.window}
        elif isinstance(r.window, str):
            params |= {"window type": "RANGE", "[RANGE d]: d in seconds": _seconds(r.window)}
        reads = ("tuples, long input",) if r.input == "long" else ("tuples",)
        group = "throughput" if r.throughput else "windows"
        # The sweep compares [T, T] with unsecured: the narrow level stays out of its table and plots.
        made += [Pipeline(r.name(v), _replay(r, v), group, v, reads,
                          params | {"sweep": "yes" if r.sweep and NARROW not in v else ""}) for v in r.variants()]
    made += [Pipeline(in_use_name(k), _levels_in_use(in_use_name(k)), IN_USE, EACH, params={"queries": k})
             for k in sizes.level_counts]
    if sizes.shared_queries:
        name = in_use_name(sizes.shared_queries, True)
        made.append(Pipeline(name, _levels_in_use(name), IN_USE, SHARED, params={"queries": sizes.shared_queries}))
    return made


def _tables() -> tuple[Table, ...]:
    top, narrow = f"secured {TOP}", f"secured {NARROW}"
    per_s = Column("", "rows_per_s")
    in_use = (("processors", "processors", 1.0), ("shepherds", "shepherds", 1.0),
              ("visible tuples (sum)", "visible_tuples", 1.0), ("wall s", WALL, 1.0), ("start s", "start_s", 1.0),
              ("CPU s", CPU, 1.0), ("JVM CPU s", "jvm_cpu_s", 1.0), ("of which tasks", "task_cpu_s", 1.0),
              ("of which JIT", "jit_cpu_s", 1.0), ("driver CPU s", "driver_cpu_s", 1.0),
              ("micro-batches", "batches", 1.0), ("Spark jobs", "jobs", 1.0), ("tasks", "tasks", 1.0),
              ("peak RSS MiB", "peak_rss_bytes", MIB), ("peak heap MiB", "peak_heap_bytes", MIB),
              ("heap after GC MiB", "live_heap_bytes", MIB), ("state KiB", "state_bytes", KIB))
    return (
        Table("Throughput: secured at one level against unsecured (replay)", ("query",), (
            Column("tuples", "rows_in", UNSECURED), Column(f"visible at {NARROW}", "tuples_visible", narrow),
            replace(per_s, title="unsecured tuples/s", variant=UNSECURED),
            replace(per_s, title=f"{TOP} tuples/s", variant=top), replace(per_s, title=f"{NARROW} tuples/s",
                                                                          variant=narrow),
            replace(per_s, title=f"{TOP} / unsecured", variant=top, over=UNSECURED, unit="×"),
            Column("same, CPU time", "cpu_s", UNSECURED, over=top, unit="×"),
            replace(per_s, title=f"{NARROW} / unsecured", variant=narrow, over=UNSECURED, unit="×"),
            Column(f"rows {TOP}", "rows_out", top), Column(f"rows {NARROW}", "rows_out", narrow)),
            where={"throughput": "yes"},
            text="Input tuples per second of wall time (medians). The selection and the [RANGE] aggregate run over "
                 "the long input, so that a run takes about a second rather than the fixed cost of a Spark job."),
        Table("[ROWS n] against [RANGE d]: the same aggregate", ("aggregate", "window"), (
            replace(per_s, title="unsecured tuples/s", variant=UNSECURED),
            replace(per_s, title="secured tuples/s", variant=top),
            replace(per_s, title="secured / unsecured", variant=top, over=UNSECURED, unit="×"),
            Column("unsecured CPU s", "cpu_s", UNSECURED), Column("secured CPU s", "cpu_s", top),
            Column("same, CPU time", "cpu_s", UNSECURED, over=top, unit="×"), Column("rows", "rows_out", top),
            Column("window functions, secured", "window_functions", top),
            Column("unsecured", "window_functions", UNSECURED)),
            where={"sweep": "yes"}, text=f"Secured at {TOP} and unsecured, over the main input."),
        Table("Levels in use: one processor per level (continuous runs)", ("variant", "queries"),
              tuple(Column(title, metric, scale=scale) for title, metric, scale in in_use), where={"group": IN_USE}),
        Table("Micro-batch time by phase, summed over the processors' batches (ms)", ("variant", "queries"),
              tuple(Column(label, f"phase_{phase}_ms") for phase, label in PHASES), where={"group": IN_USE}),
    )


def _plots() -> tuple[Plot, ...]:
    per_s, top, narrow = Column("input tuples per second", "rows_per_s"), f"secured {TOP}", f"secured {NARROW}"
    in_use = {"group": IN_USE}
    return (
        Plot("throughput", "Secured at one level vs unsecured (replay, higher is better)", "query", per_s,
             where={"throughput": "yes"}, kind="bars"),
        Plot("relative", "Secured over unsecured rows/s (replay; issue 4's target)", "query",
             Column(f"{TOP} / unsecured", "rows_per_s", top, over=UNSECURED), (), {"throughput": "yes"}, "bars",
             also=(Column(f"{NARROW} / unsecured", "rows_per_s", narrow, over=UNSECURED),),
             references={f"target: {THROUGHPUT_TARGET:g}×": THROUGHPUT_TARGET}),
        Plot("rows", "The same aggregate over [ROWS n] (higher is better)", "[ROWS n]: n", per_s,
             ("aggregate", "variant"), where={"sweep": "yes", "window type": "ROWS"}, log_x=True),
        Plot("range", "The same aggregate over [RANGE d], tumbling (higher is better)", "[RANGE d]: d in seconds",
             per_s, ("aggregate", "variant"), where={"sweep": "yes", "window type": "RANGE"}, log_x=True),
        Plot("in_use_time", "Time against the queries in use (s)", "queries", Column("CPU, all processes", CPU),
             where=in_use, also=(Column("wall", WALL), Column("Spark's tasks", "task_cpu_s"),
                                 Column("JIT", "jit_cpu_s"))),
        Plot("in_use_memory", "Memory against the queries in use (MiB)", "queries",
             Column("heap after GC (max)", "live_heap_bytes", scale=MIB), where=in_use,
             also=(Column("peak heap", "peak_heap_bytes", scale=MIB),
                   Column("peak RSS", "peak_rss_bytes", scale=MIB))),
    )


def experiment(events: int | None = None, quick: bool = False) -> Experiment:
    """Experiment 4; ``events`` scales every input's duration so the main input holds about that many
    tuples (default about 20,000, the long input 4× and the levels' input 20× that; ``quick``: a
    3-minute input for all, k = 1, 2, 4, no warm-up: replay times include planning)."""
    sizes = Sizes.quick() if quick else Sizes()
    if events:
        scale = events / (sizes.minutes * 60 * sizes.rate_per_s * 2.14)  # about 2.14 records per invocation
        sizes = replace(sizes, minutes=sizes.minutes * scale,
                        long_minutes=sizes.long_minutes and sizes.long_minutes * scale,
                        in_use_minutes=sizes.in_use_minutes and sizes.in_use_minutes * scale)
    compared = [r for r in replays(sizes) if r.throughput]
    return Experiment(
        "levels", "Security levels (Ray et al., issue 4)", _workload(sizes), tuple(_pipelines(sizes)),
        tuple(targets(sizes, compared)), notes=NOTES, tables=_tables(), plots=_plots(),
        explain=explain(sorted(sizes.level_counts)), warmup=not quick)


# -- kept for experiments 6 and 7 (bench.network_spark, bench.network_engine import it) ---------------
class OtherWork:
    """CPU time the rest of the machine used from now on (all CPU time in ``/proc/stat``
    minus this process tree's), as the mean number of cores it kept busy."""

    def __init__(self, pid: int):
        self.pid, self.load_before = pid, os.getloadavg()
        self.start, self.machine0, self.ours0 = time.perf_counter(), _machine_busy_s(), process_tree_cpu_s(pid)

    def cores(self) -> float:
        others = (_machine_busy_s() - self.machine0) - (process_tree_cpu_s(self.pid) - self.ours0)
        return max(others, 0.0) / (time.perf_counter() - self.start)

    def load_average(self) -> dict[str, Any]:
        """The load averages when this began and now, the cores this process may use and :meth:`cores`."""
        return {"before": [round(v, 2) for v in self.load_before],
                "after": [round(v, 2) for v in os.getloadavg()], "cpus": len(os.sched_getaffinity(0)),
                "other_cores": round(self.cores(), 2)}


def _machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (every state but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
