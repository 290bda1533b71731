"""Experiment 4: security levels (Chinese-Wall information flow; issue 4, Performance).

Workload: the cloud audit stream ``MessageLog`` of :mod:`streamwarden.datagen.cloud`,
with three companies in each of two conflict-of-interest classes (25 levels), every
tuple at the level of its sender; one user cleared for the top ``[T, T]``.

* Throughput (replay): a selection, a ``[RANGE]`` aggregate and a ``[ROWS]`` aggregate,
  each secured at one level (``[T, T]``, which filters nothing: the fair comparison;
  and a narrow level such as ``[1, ⊥]``) against the same query unsecured. Input
  tuples per second of execution wall time; the issue's target is ≥ 0.9× for a
  single-level query. The two cheap queries run over a longer input, so that a run is
  not mostly the fixed cost of a Spark job.
* ROWS against RANGE: the same aggregate (without and with GROUP BY) over ``[ROWS n]``
  and ``[RANGE d]`` windows of several sizes, secured at ``[T, T]`` and unsecured; ms
  per 1,000 input tuples.
* Levels in use: ``run_levels`` with one continuous query per level for k = 1, 4, 16
  distinct levels over the same, larger input directory (``available_now``), one Spark
  streaming query (processor) per level, fed by the shepherd's own query,
  which reads and levels the input once. Wall time until every processor has stopped,
  CPU time (the Spark JVM, its Python workers and this driver process; the JVM's task
  threads and JIT compiler threads apart), peak memory (process-tree RSS, JVM heap, the
  processors' state stores) and the per-level cost from a fit ``cost(k) = a + b·k``;
  the targets: a cost that grows linearly in k, and 16 levels at most 4× one level. The
  control: as many queries at one level, which share one processor.

Replay pipelines are measured as in experiment 3 (:mod:`bench.punctuation`): one
aggregate over the result (row count, max key, checksum of every row), planned once, a
warm-up run per configuration, then interleaved repetitions; medians are kept. The
secured pipeline is ``build_job(...).union()`` (its rows carry ``level``, which the
checksum covers); the unsecured one is ``unsecured_frame`` through the same output
formatting (ISO timestamps), so both compute the query's columns the same way.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamwarden.api import run_levels
from streamwarden.catalog.lattice import BOTTOM, Lattice, Level
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.store import sqlite_url
from streamwarden.datagen.cloud import message_log, write_message_log
from streamwarden.engine.execute import build_job, output_frame, unsecured_frame
from streamwarden.engine.levels.processors import LevelQuery
from streamwarden.language.parser import parse_query
from streamwarden.security.passes import SecurityOptions, secure
from streamwarden.security.rewrite.algorithm import AuthorizedGraph, Rewriting

from bench.punctuation import Meter, Pipeline, Repetitions, measure, per_1000
from bench.cost_meter import cpu_by_kind, thread_ticks
from bench.spark_probe import jobs_since, last_job_id, process_tree_cpu_s
from bench.stats import median, ratio
from bench.workdir import scratch_dir

USER = "cm"
TOP = "[T, T]"
STREAM = "MessageLog"
#: Two COI classes of three companies each: (3 + 2)² = 25 levels.
CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (("COI1", ("1", "2", "3")), ("COI2", ("A", "B", "C")))
SELECTION = 'SELECT ts, sender FROM MessageLog WHERE msgType = "send"'
SHAPES = {  # the aggregate compared over [ROWS n] and [RANGE d]; {window} is the window
    "count": 'SELECT COUNT(*), MIN(ts) FROM MessageLog {window} WHERE outcome = "success"',
    "per service": ('SELECT serviceId, COUNT(*), MIN(ts) FROM MessageLog {window} WHERE outcome = "success" '
                    "GROUP BY serviceId"),
}


@dataclass(frozen=True)
class Settings:
    """Sizes of experiment 4; ``quick`` is the smoke version.

    ``rate_per_s`` counts invocations; each one writes 2-6 MessageLog records.
    """

    minutes: float = 10.0
    rate_per_s: float = 16.0
    #: A longer input for the throughput of the cheap queries (selection, [RANGE] aggregate),
    #: so that a run takes about a second, not the fixed cost of a job (None: the main input).
    large_minutes: float | None = 40.0
    services: int = 12
    seed: int = 4
    narrow_level: str = "[1, ⊥]"
    rows_n: int = 100  # the windows of the throughput comparison
    range_window: str = "1 min"
    windows: tuple[tuple[str, int | str], ...] = (  # ROWS against RANGE: (shape, window)
        ("count", 10), ("count", 100), ("count", 1000), ("count", "10 s"), ("count", "1 min"), ("count", "10 min"),
        ("per service", 100), ("per service", "1 min"))
    reps: Repetitions = Repetitions(5, 9, 6.0)  # the throughput comparison
    window_reps: Repetitions = Repetitions(3, 5, 3.0)  # ROWS against RANGE
    warmup_per_configuration: bool = True
    level_counts: tuple[int, ...] = (1, 4, 16)
    #: The input of the levels in use (None: the main input): large enough that reading and
    #: parsing it, which the shepherd does once for every level, shows beside each
    #: processor's fixed cost (planning its micro-batches, the JIT compiling Spark's code).
    in_use_minutes: float | None = 200.0
    level_query: str = "per service"  # the query every processor runs, over range_window
    level_reps: int = 3  # rounds over level_counts (order alternates), medians kept
    shared_queries: int = 4  # the control: this many queries at one level, sharing one processor (0: none)
    warm_up: bool = True  # run the main plans (and a few processors) first, results thrown away
    sample_period_s: float = 0.1

    @classmethod
    def quick(cls) -> "Settings":
        return cls(minutes=3.0, rate_per_s=8.0, large_minutes=None, in_use_minutes=None, windows=(("count", 100), ("count", "1 min")),
                   reps=Repetitions(1, 1, 0.0), window_reps=Repetitions(1, 1, 0.0), warmup_per_configuration=False,
                   level_counts=(1, 2, 4), level_reps=1, shared_queries=2, warm_up=False)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# -- workload ---------------------------------------------------------------------------------
def catalog_text(classes: Sequence[tuple[str, Sequence[str]]] = CLASSES) -> str:
    """The cloud catalog: the lattice, MessageLog levelled by its sender, one user cleared for the top."""
    lattice = ", ".join(f"{name}: {json.dumps(list(members))}" for name, members in classes)
    return (f"lattice:\n  classes: {{{lattice}}}\nstreams:\n  {STREAM}:\n"
            "    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, "
            "outcome: string}\n"
            "    level: {from: sender}\n"
            f'users:\n  {USER}: {{clearance: "{TOP}"}}\n')


def window_text(window: int | str) -> str:
    """``[ROWS n]`` for a count, ``[RANGE d]`` for a duration."""
    return f"[ROWS {window}]" if isinstance(window, int) else f"[RANGE {window}]"


def aggregate_query(shape: str, window: int | str) -> str:
    return SHAPES[shape].format(window=window_text(window))


@dataclass(frozen=True)
class Workload:
    """The generated MessageLog: its folder, records (arrival order), each record's level
    (an independent reading of the shepherd: the sender's company, else the top) and the catalog."""

    folder: Path
    records: list[dict]
    levels: list[Level]
    catalog: Catalog

    @property
    def tuples(self) -> int:
        return len(self.records)

    @property
    def lattice(self) -> Lattice:
        return self.catalog.lattice  # type: ignore[return-value]

    def visible(self, level: str | Level) -> list[dict]:
        """The records a query at ``level`` sees."""
        at = self.lattice.parse(level) if isinstance(level, str) else level
        return [r for r, own in zip(self.records, self.levels) if own <= at]


def generate(folder: Path, s: Settings, minutes: float) -> Workload:
    audit = message_log(classes={name: list(members) for name, members in CLASSES}, minutes=minutes,
                        services=s.services, rate_per_s=s.rate_per_s, seed=s.seed)
    write_message_log(audit, folder, files=1)
    catalog = load_catalog_text(catalog_text(), "<levels benchmark>")
    lattice: Lattice = catalog.lattice  # type: ignore[assignment]
    levels = [lattice.company(r["sender"]) or lattice.top for r in audit.records]
    return Workload(folder, audit.records, levels, catalog)


def _micros(ts: str) -> int:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1_000_000)


def expected_rows(records: Sequence[dict], shape: str, window: int | str | None) -> int:
    """The rows a query returns over ``records`` (those its level sees), counted in Python.

    Selection: the sends. ``[ROWS n]``: one row per arriving tuple without GROUP BY, else
    one per (arrival, service) among the qualifying tuples of the last n. ``[RANGE d]``
    (tumbling, epoch-aligned): one row per window (and service) with a qualifying tuple.
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
    size = round(parse_query(f"SELECT COUNT(*) FROM S {window_text(str(window))}").sources[0].window.size_seconds
                 * 1_000_000)
    return len({(_micros(r["ts"]) // size, service if grouped else None)
                for r, service in zip(records, qualifying) if service is not None})


# -- replay pipelines -------------------------------------------------------------------------
def query_columns(rewriting: Rewriting) -> tuple[str, ...]:
    return tuple(f.name for f in rewriting.plan.fields)


def secured_pipeline(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, inputs: Mapping[str, Path]
                     ) -> Pipeline:
    """``build_job(...).union()``: the query's columns and ``level`` (all hashed)."""
    frame = build_job(spark, catalog, rewriting, inputs, streaming=False).union()
    if frame is None:
        raise ValueError("the rewriting deploys no graph: nothing to run")
    columns = query_columns(rewriting)
    return Pipeline(frame, columns[0], (*columns, "level"))


def unsecured_pipeline(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, inputs: Mapping[str, Path]
                       ) -> Pipeline:
    """``unsecured_frame`` with the output formatting of a secured row (no level)."""
    raw = unsecured_frame(spark, catalog, rewriting, inputs)
    frame: DataFrame = output_frame(AuthorizedGraph("unsecured", rewriting.plan, "none", ()), raw)
    columns = query_columns(rewriting)
    return Pipeline(frame, columns[0], columns)


def window_functions(pipeline: Pipeline) -> int:
    """Window functions in the pipeline's physical plan (a [ROWS n] replay evaluates each
    over its sliding frame, for every row)."""
    return str(pipeline.physical_plan().toString()).count("windowspecdefinition(")


def _spread(measured: Mapping[str, dict[str, Any]]) -> float:
    """The largest (max − min) / median wall time of a configuration's pipelines (NaN with one run)."""
    if any(len(m["wall_s_all"]) < 2 for m in measured.values()):
        return float("nan")
    return max(ratio(max(m["wall_s_all"]) - min(m["wall_s_all"]), m["wall_s"]) for m in measured.values())


# -- continuous runs: one processor per level ---------------------------------------------------
class Heap:
    """The Spark JVM's heap: peak over a block (the heap pools' peak usage after a full GC
    and a reset, an upper bound dominated by young garbage, as in
    :class:`bench.spark_probe.SparkProbe`) and the heap left after the latest collection
    (what survived it: closer to the memory the processors hold)."""

    def __init__(self, spark: SparkSession):
        management = spark._jvm.java.lang.management.ManagementFactory  # type: ignore[attr-defined]
        self.pools = [p for p in management.getMemoryPoolMXBeans() if str(p.getType().toString()) == "Heap memory"]
        self.collectors = list(management.getGarbageCollectorMXBeans())
        self.system = spark._jvm.java.lang.System  # type: ignore[attr-defined]

    def reset(self) -> int:
        """Collect garbage and reset the peaks; the heap left after that collection."""
        self.system.gc()
        for pool in self.pools:
            pool.resetPeakUsage()
        return self.after_gc()

    def peak(self) -> int:
        return sum(int(pool.getPeakUsage().getUsed()) for pool in self.pools)

    def after_gc(self) -> int:
        """Heap in use right after the most recent collection (of any collector)."""
        latest, used = -1, 0
        for collector in self.collectors:
            info = collector.getLastGcInfo()  # com.sun.management.GcInfo, None before the first
            if info is not None and int(info.getEndTime()) > latest:
                after = info.getMemoryUsageAfterGc()
                latest, used = int(info.getEndTime()), sum(int(after.get(k).getUsed()) for k in after.keySet())
        return used


class MemorySampler:
    """Samples, every ``period_s`` in a background thread, the resident memory of a process
    tree (the Spark JVM, its Python workers, this process; from ``/proc``) and the JVM heap
    left after its latest collection; keeps the peaks."""

    def __init__(self, pid: int, heap: Heap, period_s: float):
        self.pid, self.heap, self.period_s = pid, heap, period_s
        self.peak_rss_bytes = self.peak_live_heap_bytes = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            self.peak_rss_bytes = max(self.peak_rss_bytes, tree_rss_bytes(self.pid))
            self.peak_live_heap_bytes = max(self.peak_live_heap_bytes, self.heap.after_gc())
            self.samples += 1
            if self._stop.wait(self.period_s):
                return


def tree_rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` and every live descendant."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/statm") as statm:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                resident = int(statm.read().split()[1])
        except (OSError, IndexError, ValueError):  # the process ended while we looked
            continue
        children.setdefault(parent, []).append(int(entry))
        rss[int(entry)] = resident * page
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        total += rss.get(current, 0)
        pending.extend(children.get(current, []))
    return total


def driver_cpu_s() -> float:
    """CPU time of this Python process (the driver's Python side: planning, ``foreachBatch``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def level_candidates(lattice: Lattice) -> list[Level]:
    """Levels with an entry other than ⊥ in every class (16 with 3 + 3 companies): each
    sees the tuples of at least two companies."""
    return [level for level in lattice.levels() if all(e != BOTTOM for e in level.entries)]


def spread_levels(visible: Mapping[str, int], candidates: Sequence[Level], k: int) -> list[Level]:
    """``k`` of the candidate levels, evenly spread over them sorted by how many tuples each
    sees (``visible``, by level), so the mean work per processor is about the same for every k."""
    ordered = sorted(candidates, key=lambda level: (visible[str(level)], str(level)))
    if k >= len(ordered):
        return ordered
    return [ordered[int((i + 0.5) * len(ordered) / k)] for i in range(k)]


class SparkJobs:
    """Spark jobs and the tasks they ran, since a mark (from the status store, kept with the UI off)."""

    def __init__(self, spark: SparkSession):
        self.store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[attr-defined]
        self.listener_bus = spark.sparkContext._jsc.sc().listenerBus()  # type: ignore[attr-defined]

    def mark(self) -> int:
        return last_job_id(self.store)

    def since(self, mark: int) -> tuple[int, int]:
        """(jobs, tasks run) after ``mark``; tasks of stages skipped for reused shuffles are not counted."""
        self.listener_bus.waitUntilEmpty()
        jobs = list(jobs_since(self.store, mark))
        return len(jobs), sum(int(job.numCompletedTasks()) for job in jobs)


def progress_totals(streams: Sequence[Any]) -> dict[str, Any]:
    """Micro-batches, their summed durations (by phase) and the state the processors hold
    once their last batch is committed, from Spark's progress reports."""
    batches = state_bytes = state_rows = 0
    phases: dict[str, int] = {}
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
    return {"batches": batches, "trigger_ms": phases.get("triggerExecution", 0), "phases_ms": phases,
            "state_bytes": state_bytes, "state_rows": state_rows}


# -- the experiment ---------------------------------------------------------------------------
class Experiment:
    """Holds the workloads and the Spark session; measures each part."""

    def __init__(self, spark: SparkSession, settings: Settings, workdir: Path, log: Callable[[str], None]):
        self.spark, self.settings, self.workdir, self.log = spark, settings, workdir, log
        self.meter = Meter(spark)
        self.work = generate(workdir / "MessageLog", settings, settings.minutes)
        self.large = (generate(workdir / "MessageLog-large", settings, settings.large_minutes)
                      if settings.large_minutes else self.work)
        self.inputs = {STREAM: self.work.folder}
        self.in_use = (generate(workdir / "MessageLog-in-use", settings, settings.in_use_minutes)
                       if settings.in_use_minutes else self.work)

    def rewrite(self, query: str, level: str) -> Rewriting:
        return secure(self.work.catalog, USER, query, SecurityOptions(level=level))

    def pipelines(self, query: str, levels: Sequence[str], work: Workload | None = None) -> dict[str, Pipeline]:
        """Unsecured, then secured at each of ``levels``, over ``work`` (default: the main input)."""
        catalog, inputs = self.work.catalog, {STREAM: (work or self.work).folder}
        out = {"unsecured": unsecured_pipeline(self.spark, catalog, self.rewrite(query, TOP), inputs)}
        for level in levels:
            out[f"secured {level}"] = secured_pipeline(self.spark, catalog, self.rewrite(query, level), inputs)
        return out

    def point(self, kind: str, shape: str, window: int | str | None, levels: Sequence[str], reps: Repetitions,
              work: Workload | None = None) -> dict[str, Any]:
        """One configuration: a query unsecured and secured at ``levels``, measured together."""
        s, work = self.settings, work or self.work
        query = SELECTION if shape == "selection" else aggregate_query(shape, window)  # type: ignore[arg-type]
        pipelines = self.pipelines(query, levels, work)
        measured = measure(self.meter, pipelines, reps, warm_up=s.warmup_per_configuration)
        n = work.tuples
        bare = measured["unsecured"]
        seen = {level: work.visible(level) for level in levels}
        expected = {"unsecured": expected_rows(work.records, shape, window or 0)}
        for level in levels:
            expected[f"secured {level}"] = expected_rows(seen[level], shape, window or 0)
        point: dict[str, Any] = {
            "kind": kind, "shape": shape, "window": window, "query": query, "tuples": n,
            "levels": list(levels), "pipelines": measured,
            "visible": {level: len(records) for level, records in seen.items()},
            "ms_per_1000": {name: per_1000(m["wall_s"], n) for name, m in measured.items()},
            "cpu_ms_per_1000": {name: per_1000(m["cpu_s"], n) for name, m in measured.items()},
            "rows_per_s": {name: ratio(n, m["wall_s"]) for name, m in measured.items()},
            "relative_throughput": {level: ratio(bare["wall_s"], measured[f"secured {level}"]["wall_s"])
                                    for level in levels},
            "relative_throughput_cpu": {level: ratio(bare["cpu_s"], measured[f"secured {level}"]["cpu_s"])
                                        for level in levels},
            "expected_rows": expected,
            "spread": _spread(measured),
            "window_functions": {name: window_functions(pipeline) for name, pipeline in pipelines.items()},
        }
        point["ok"] = all(measured[name]["rows"] == rows and measured[name]["stable"]
                          for name, rows in expected.items())
        ms = point["ms_per_1000"]
        self.log(f"  {kind:<10} {shape:<11} {window_text(window) if window else '':<14}: unsecured "
                 f"{ms['unsecured']:.1f}, " + ", ".join(f"{level} {ms[f'secured {level}']:.1f}" for level in levels)
                 + f" ms/1000 tuples{'' if point['ok'] else ' (ROW COUNT MISMATCH)'}")
        return point

    # levels in use ---------------------------------------------------------------------------
    def level_queries(self, levels: Sequence[Level]) -> list[LevelQuery]:
        """One query per entry of ``levels`` (the same level twice: two queries in one processor)."""
        query = aggregate_query(self.settings.level_query, self.settings.range_window)
        return [LevelQuery(f"q{i:02d}", USER, query, str(level)) for i, level in enumerate(levels)]

    def run_levels_once(self, levels: Sequence[Level], tag: str) -> dict[str, Any]:
        """Start the processors of ``levels`` over the input (available now); wait until all stop."""
        folder = self.workdir / f"run-{tag}"
        heap, spark_jobs = Heap(self.spark), SparkJobs(self.spark)
        heap_before = heap.reset()
        mark = spark_jobs.mark()
        rss_before = tree_rss_bytes(os.getpid())
        cpu0, jvm0, driver0 = process_tree_cpu_s(os.getpid()), process_tree_cpu_s(self.meter.pid), driver_cpu_s()
        threads0 = thread_ticks(self.meter.pid)
        start = time.perf_counter()
        with MemorySampler(os.getpid(), heap, self.settings.sample_period_s) as sampler:
            processors = run_levels(self.in_use.catalog, self.level_queries(levels), {STREAM: self.in_use.folder},
                                    folder / "out",
                                    store_url=sqlite_url(folder / "store.db"), spark=self.spark,
                                    available_now=True)
            started = time.perf_counter()
            for p in processors:
                p.stream.awaitTermination()
            wall = time.perf_counter() - start
        cpu = process_tree_cpu_s(os.getpid()) - cpu0
        jvm = process_tree_cpu_s(self.meter.pid) - jvm0
        by_kind = cpu_by_kind(threads0, thread_ticks(self.meter.pid))
        driver = driver_cpu_s() - driver0
        totals = progress_totals([p.stream for p in processors])
        jobs, tasks = spark_jobs.since(mark)
        shutil.rmtree(folder, ignore_errors=True)
        return {
            "queries": len(levels), "processors": sum(1 for p in processors if p.queries),
            "shepherds": sum(1 for p in processors if not p.queries), "wall_s": wall, "start_s": started - start,
            "task_cpu_s": by_kind["tasks"], "jit_cpu_s": by_kind["JIT"],
            "cpu_s": cpu, "jvm_cpu_s": jvm, "driver_cpu_s": driver, "peak_rss_bytes": sampler.peak_rss_bytes,
            "rss_before_bytes": rss_before, "peak_heap_bytes": heap.peak(),
            "live_heap_bytes": sampler.peak_live_heap_bytes, "heap_before_bytes": heap_before,
            "samples": sampler.samples, "jobs": jobs, "tasks": tasks, **totals,
        }

    def levels_in_use(self) -> dict[str, Any]:
        """k = each of ``level_counts`` levels, one query (and processor) each; and the control:
        ``shared_queries`` queries at one level, sharing one processor."""
        s = self.settings
        candidates = level_candidates(self.in_use.lattice)
        visible = {str(level): len(self.in_use.visible(level)) for level in candidates}
        chosen = {k: spread_levels(visible, candidates, k) for k in s.level_counts}
        shared = [chosen[min(s.level_counts)][0]] * s.shared_queries  # the median level, repeated
        if s.warm_up:  # JIT, streaming classes, with a few processors at once
            self.run_levels_once(chosen[sorted(s.level_counts)[len(s.level_counts) // 2]], "warm-up")
        runs: dict[int, list[dict[str, Any]]] = {k: [] for k in s.level_counts}
        control: list[dict[str, Any]] = []
        for rep in range(s.level_reps):
            order = list(s.level_counts) if rep % 2 == 0 else list(reversed(s.level_counts))
            for k in order:
                runs[k].append(self.run_levels_once(chosen[k], f"{k}-{rep}"))
                self._log_run(f"{k} level(s)", runs[k][-1])
            if shared:
                control.append(self.run_levels_once(shared, f"shared-{rep}"))
                self._log_run(f"{len(shared)} queries, 1 level", control[-1])
        points = [_level_point(k, runs[k], chosen[k], visible) for k in s.level_counts]
        return {"query": aggregate_query(s.level_query, s.range_window), "points": points,
                "shared": _level_point(1, control, shared, visible) if control else None,
                "fits": {metric: linear_fit([p["k"] for p in points], [p[metric] for p in points])
                         for metric in LEVEL_METRICS}}

    def _log_run(self, what: str, run: dict[str, Any]) -> None:
        self.log(f"  {what:<20}: {run['processors']:>2} processor(s), {run['wall_s']:.1f} s wall "
                 f"({run['start_s']:.1f} s starting), {run['cpu_s']:.1f} s CPU, peak RSS "
                 f"{run['peak_rss_bytes'] / 2**20:,.0f} MiB, heap after GC {run['live_heap_bytes'] / 2**20:,.0f} MiB, "
                 f"state {run['state_bytes'] / 2**10:,.0f} KiB")


LEVEL_METRICS = ("wall_s", "cpu_s", "jvm_cpu_s", "driver_cpu_s", "trigger_ms", "peak_rss_bytes", "peak_heap_bytes",
                 "live_heap_bytes", "state_bytes")


def _level_point(k: int, runs: list[dict[str, Any]], levels: Sequence[Level], visible: Mapping[str, int]
                 ) -> dict[str, Any]:
    """Medians over the runs of one k."""
    point: dict[str, Any] = {"k": k, "queries": len(levels), "levels": [str(level) for level in levels],
                             "visible_tuples": sum(visible[str(level)] for level in levels),
                             "processors": runs[0]["processors"], "runs": runs}
    for metric in (*LEVEL_METRICS, "start_s", "batches", "state_rows", "jobs", "tasks", "task_cpu_s", "jit_cpu_s",
                   "shepherds"):
        point[metric] = median([float(r[metric]) for r in runs])
    phases = sorted({phase for r in runs for phase in r["phases_ms"]})
    point["phases_ms"] = {phase: median([float(r["phases_ms"].get(phase, 0)) for r in runs]) for phase in phases}
    return point


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any]:
    """Least squares ``y = a + b·x`` and how far the points are from it.

    ``max_relative_residual``: the largest |y − fit| / fit; ``slope_growth``: the slope
    between the two largest x over the slope between the two smallest (1 for a straight
    line, > 1 when each added level costs more than the one before; NaN unless the first
    slope is positive); ``excess``: how far y at the largest x lies above the line
    through the two smallest points, as a share of that y (≤ 0 for linear or slower
    growth); ``growth``: y at the largest x over y at the one before, against
    ``proportional_growth`` (their ratio of x: what y would do were there no fixed cost).
    """
    nan = float("nan")
    points = sorted(zip(xs, ys))
    n = len(points)
    if n < 2:
        return {"a": nan, "b": nan, "residuals": [], "max_relative_residual": nan, "slope_growth": nan,
                "excess": nan, "growth": nan, "proportional_growth": nan}
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = ratio(sum((x - mx) * (y - my) for x, y in points), sxx)
    a = my - b * mx
    residuals = [ratio(y - (a + b * x), a + b * x) for x, y in points]
    (x0, y0), (x1, y1) = points[0], points[1]
    (xa, ya), (xb, yb) = points[-2], points[-1]
    return {"a": a, "b": b, "residuals": residuals, "max_relative_residual": max(abs(r) for r in residuals),
            "first_slope": ratio(y1 - y0, x1 - x0), "last_slope": ratio(yb - ya, xb - xa),
            "slope_growth": ratio(ratio(yb - ya, xb - xa), ratio(y1 - y0, x1 - x0)) if n >= 3 and y1 > y0 else nan,
            "excess": ratio(yb - (y0 + ratio(y1 - y0, x1 - x0) * (xb - x0)), yb) if n >= 3 else nan,
            "growth": ratio(yb, ya), "proportional_growth": ratio(xb, xa)}


def run(spark: SparkSession, settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement of experiment 4, as plain data for the report and the plots."""
    with scratch_dir("streamwarden-levels-bench-") as workdir:
        return _run(Experiment(spark, settings, workdir, log))


def _run(x: Experiment) -> dict[str, Any]:
    s = x.settings
    others = OtherWork(os.getpid())
    started = time.perf_counter()
    if s.warm_up:  # every kind of plan twice, results thrown away (the first runs in a JVM are slow)
        warm = [SELECTION, aggregate_query("count", s.range_window), aggregate_query("count", s.rows_n)]
        pipelines = [p for query in warm for p in x.pipelines(query, [TOP]).values()]
        for _ in range(2):
            for pipeline in pipelines:
                x.meter.run(pipeline)
        x.log(f"  warm-up: {time.perf_counter() - started:.0f} s; {x.work.tuples:,} tuples "
              f"({x.large.tuples:,} in the larger input)")
    levels = [TOP, s.narrow_level]
    throughput = [x.point("throughput", "selection", None, levels, s.reps, x.large),
                  x.point("throughput", "count", s.range_window, levels, s.reps, x.large),
                  x.point("throughput", "count", s.rows_n, levels, s.reps)]
    shared = {(p["shape"], p["window"]): p for p in throughput if p["tuples"] == x.work.tuples}
    windows = [shared.get((shape, window)) or x.point("windows", shape, window, [TOP], s.window_reps)
               for shape, window in s.windows]
    in_use = x.levels_in_use()
    visible = {level: len(x.work.visible(level)) for level in levels}
    return {
        "settings": s.as_dict(),
        "data": {"tuples": x.work.tuples, "in_use_tuples": x.in_use.tuples, "classes": {name: list(m) for name, m in CLASSES},
                 "lattice_levels": sum(1 for _ in x.work.lattice.levels()), "visible": visible,
                 "senders": _senders(x.work.records),
                 "jvm_max_heap_bytes": jvm_max_heap_bytes(x.spark)},
        "load_average": others.load_average(),
        "throughput": throughput,
        "windows": windows,
        "levels_in_use": in_use,
    }


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


def jvm_max_heap_bytes(spark: SparkSession) -> int:
    return int(spark._jvm.java.lang.Runtime.getRuntime().maxMemory())  # type: ignore[attr-defined]


def _senders(records: Sequence[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["sender"]] = counts.get(r["sender"], 0) + 1
    return dict(sorted(counts.items()))
