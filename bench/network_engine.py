"""Experiment 7: one engine for every mechanism (issue 12, Performance).

The declaration (:func:`experiment`) for :mod:`bench.suite`. Every configuration is an
in-process pipeline on the runner's SparkSession that starts its streaming queries into
fresh folders with the same processing-time trigger, feeds them files the workload
prepared once (a warm-up file first, not measured), measures, and stops them; the part
modules say how:

* latency (:mod:`bench.engine_latency`, group ``latency``): from a file landing in an
  input folder to its rows in each user's output, for ``api.run`` of a selection and a
  ``NetworkRuntime`` with three selections and three users, against a plain PySpark
  streaming query doing the same selection;
* steady state (:mod:`bench.engine_steady`, group ``steady``): CPU of every process and
  Spark jobs per micro-batch of the three-query network (CQ1–CQ3) against the plain query
  of its heaviest query alone and the three queries run separately; the network with one
  pipeline's users revoked and with that query unregistered;
* every mechanism at once (:mod:`bench.engine_mixed`, groups ``mixed`` and, each query
  alone, ``mixed alone``): a network mixing role policies (one tied to a live action), a
  punctuated stream behind shields and security levels, against the same queries unsecured.

What the targets judge is measured inside a pipeline, after its queries started: the
latencies of its measured files, its cost per measured file, its records per second over
the measured chunks. Those are the numbers a pipeline returns; the runner's ``wall_s`` and
``cpu_s`` time the whole pipeline (start, warm-up file, stop) and stay in the JSON only.

    >>> e = experiment(quick=True)
    >>> sorted({p.group for p in e.pipelines}), len(e.pipelines), len(e.targets), e.repeats
    (['latency', 'mixed', 'steady'], 8, 8, None)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from bench import engine_latency as latency
from bench import engine_mixed as mixed
from bench import engine_steady as steady
from bench.cost_meter import THREAD_KINDS
from bench.engine_latency import PLAIN3, RUN
from bench.engine_mixed import SECURED, UNSECURED_NETWORK, MixedSizes
from bench.engine_profile import PHASES
from bench.engine_steady import BRANCH, GONE, NETWORK, OFF, SEPARATE
from bench.levels import OtherWork
from bench.network_workload import Sizes as Readings
from bench.suite.experiment import (Column, Experiment, Facts, InProcess, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload)

#: Issue 12's targets (Performance).
TARGET_LATENCY_RATIO = 1.5  # median latency, run and network, against plain PySpark
TARGET_PLAIN_RATIO = 1.3  # three-query network CPU per micro-batch / its heaviest query, plain, alone
TARGET_SEPARATE_RATIO = 0.5  # network CPU / the same queries run separately
TARGET_OFF_SHARE = 0.10  # a branch whose users all lost access / the same branch on
TARGET_JOBS_PER_BATCH = 3.0
TARGET_MIXED_RATIO = 0.7  # secured mixed network throughput / the same queries unsecured
THREADS = (*(kind for kind, _ in THREAD_KINDS), "other", "ended threads", "child processes")
LAT, STEADY, MIX, ALONE = "latency", "steady", "mixed", "mixed alone"  # the groups
Call = Callable[[SparkSession, Path, Path], dict[str, float]]


@dataclass(frozen=True)
class Sizes:
    """Sizes of experiment 7 (:data:`QUICK`: the smoke version)."""

    trigger_ms: int = 500
    latency_files: int = 10  # measured per run, after a warm-up file
    rows_per_file: int = 40  # readings per stream and latency file
    poll_ms: int = 10
    profile_files: int = 3  # after the network's measured files: its terminal switch under cProfile
    steady_files: int = 4  # measured per run, after a warm-up file
    minutes_per_file: int = 2
    readings: Readings = Readings(per_minute=60, stream3_per_minute=10)
    mixed: MixedSizes = field(default_factory=MixedSizes)
    seed: int = 12


QUICK = Sizes(trigger_ms=250, latency_files=1, profile_files=1, steady_files=1, minutes_per_file=1,
              readings=Readings(per_minute=20, stream3_per_minute=5),
              mixed=MixedSizes(chunks=1, chunk_minutes=1, patients=4, policy_changes=1, log_rate_per_s=3.0))


def _workload(s: Sizes) -> Workload:
    def prepare(work: Path) -> Facts:
        latency.prepare(work / LAT, 1 + s.latency_files + s.profile_files, s.rows_per_file)
        per_file = steady.prepare(work / STEADY, 2 + s.steady_files, s.minutes_per_file, s.readings)
        per_chunk = mixed.prepare(work / MIX, s.mixed)
        return {"latency files": s.latency_files, "readings per latency file": s.rows_per_file,
                "steady files": s.steady_files, **{f"{k} per steady file": v for k, v in per_file.items()},
                "mixed chunks": s.mixed.chunks, **{f"{k} per mixed chunk": v for k, v in per_chunk.items()},
                "cores": len(os.sched_getaffinity(0))}

    return Workload("smart-healthcare readings (latency, steady state) and a hospital with a cloud audit (every "
                    "mechanism at once), landed file by file", prepare)


def _with_others(call: Call) -> InProcess:
    """``call``, with the cores the rest of the machine kept busy meanwhile (``other_cores``)."""
    def run(spark: SparkSession, work: Path, out: Path) -> dict[str, float]:
        others = OtherWork(os.getpid())
        return {**call(spark, work, out), "other_cores": others.cores()}
    return InProcess(run)


def _pipelines(s: Sizes, quick: bool) -> list[Pipeline]:
    def made(group: str, variant: str, call: Call, **params: str) -> Pipeline:
        return Pipeline("/".join((group, *params.values(), variant)), _with_others(call), group, variant,
                        params=params)

    trigger = s.trigger_ms
    return ([made(LAT, c, latency.latency_call(c, LAT, files=s.latency_files, trigger_ms=trigger, poll_ms=s.poll_ms,
                                               profile_files=s.profile_files, seed=s.seed))
             for c in (latency.CONFIGS[:3] if quick else latency.CONFIGS)]
            + [made(STEADY, c, steady.steady_call(c, STEADY, files=s.steady_files, trigger_ms=trigger,
                                                  minutes_per_file=s.minutes_per_file, probe=True))
               for c in ((NETWORK, OFF, "plain CQ2") if quick else steady.CONFIGS)]
            + [made(MIX, c, mixed.mixed_call(c, MIX, chunks=s.mixed.chunks, trigger_ms=trigger))
               for c in (mixed.CONFIGS[:2] if quick else mixed.CONFIGS)]
            + [made(ALONE, c, mixed.mixed_call(c, MIX, chunks=s.mixed.chunks, trigger_ms=trigger, only=q), query=q)
               for q in (() if quick else mixed.QUERIES) for c in (SECURED, UNSECURED_NETWORK)])


# -- targets ------------------------------------------------------------------------------------------
def _x(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}×"


def heaviest_plain(m: Measured) -> tuple[str, float]:
    """The plain query alone with the most CPU per file, and that CPU (ms)."""
    plains = {str(m.coordinates[n]["variant"]): m.median(n, "cpu_ms_per_file") for n in m.where(group=STEADY)
              if str(m.coordinates[n]["variant"]).startswith("plain ")}
    name = max(plains, key=lambda n: plains[n], default="")
    return name, plains.get(name, math.nan)


def _at(m: Measured, metric: str, variant: str, group: str = STEADY, stat: str = "median") -> float:
    """``stat`` of ``metric`` over the runs of the pipeline of ``group`` and ``variant`` (NaN when none ran)."""
    return m.value(metric, stat, group=group, variant=variant)


#: How a target reads the measurements: (the value deciding it, whether it is met, the measured text).
Measure = Callable[[Measured], tuple[float, bool, str]]


def _targets(s: Sizes, judged: bool) -> list[Target]:
    def target(text: str, measure: Measure) -> Target:
        def check(m: Measured) -> Verdict:  # a smoke run is not judged
            value, met, measured = measure(m)
            if math.isnan(value):
                return Verdict(None, "not measured")
            return Verdict(met, measured) if judged else Verdict(None, measured + " (smoke run: not judged)")
        return Target(text, check)

    def latency_ratio(config: str) -> Measure:
        def measure(m: Measured) -> tuple[float, bool, str]:
            (mine, p90), (plain, plain_p90) = [[_at(m, k, c, LAT) for k in ("p50_ms", "p90_ms")]
                                               for c in (config, "plain")]
            return mine / plain, mine / plain <= TARGET_LATENCY_RATIO, (
                f"{_x(mine / plain)}: median {mine:.0f} ms (p90 {p90:.0f}) against {plain:.0f} ms "
                f"(p90 {plain_p90:.0f})")
        return measure

    def against_plain(m: Measured) -> tuple[float, bool, str]:
        (name, heavy), net = heaviest_plain(m), _at(m, "cpu_ms_per_file", NETWORK)
        plains = ", ".join(str(m.coordinates[n]["variant"]) for n in m.where(group=STEADY)
                           if str(m.coordinates[n]["variant"]).startswith("plain "))
        return net / heavy, net / heavy <= TARGET_PLAIN_RATIO, (
            f"{_x(net / heavy)}: {net:,.0f} ms CPU per file against {heavy:,.0f} ms ({name}, the heaviest of {plains})")

    def separate(m: Measured) -> tuple[float, bool, str]:
        net, sep = _at(m, "cpu_ms_per_file", NETWORK), _at(m, "cpu_ms_per_file", SEPARATE)
        return net / sep, net / sep <= TARGET_SEPARATE_RATIO, (f"{_x(net / sep)}: {net:,.0f} ms against {sep:,.0f} "
                                                               "ms CPU per file")

    def branch(m: Measured) -> tuple[float, bool, str]:
        net, off, gone = (_at(m, "cpu_ms_per_file", c) for c in (NETWORK, OFF, GONE))
        share = (off - gone) / (net - gone) if net != gone else math.nan
        return share, share <= TARGET_OFF_SHARE, (
            f"{100 * share:.0f} %: {BRANCH} off {off - gone:+,.0f} ms, on {net - gone:+,.0f} ms CPU per file (the "
            f"network with {BRANCH} off, and on, minus the network without it: {off:,.0f}, {net:,.0f} and "
            f"{gone:,.0f} ms)")

    def jobs(m: Measured) -> tuple[float, bool, str]:
        per_batch, per_file, batches, running = (_at(m, k, NETWORK) for k in (
            "jobs_per_batch", "jobs_per_file", "batches_per_file", "queries_running"))
        return per_batch, per_batch <= TARGET_JOBS_PER_BATCH, (
            f"{per_batch:.2f} jobs per pipeline micro-batch ({per_file:.1f} jobs, {batches:.1f} micro-batches of "
            f"{running:.0f} pipelines per file)")

    def every_mechanism(m: Measured) -> tuple[float, bool, str]:
        sec, uns, plain = (_at(m, "records_per_s", c, MIX) for c in (SECURED, UNSECURED_NETWORK, mixed.PLAIN))
        per_cpu = _at(m, "records_per_cpu_s", SECURED, MIX) / _at(m, "records_per_cpu_s", UNSECURED_NETWORK, MIX)
        return sec / uns, sec / uns >= TARGET_MIXED_RATIO, (
            f"{_x(sec / uns)}: {sec:,.0f} against {uns:,.0f} input records/s (the same runtime and queries without "
            "security); " + ("" if math.isnan(plain) else f"against the plain queries {_x(sec / plain)}; ")
            + f"per CPU second {_x(per_cpu)}")

    def stops(m: Measured) -> Verdict:  # a behaviour, not a performance: judged in a smoke run too
        stopped = _at(m, "stops_by_itself", OFF, stat="min")  # every run's
        if math.isnan(stopped):
            return Verdict(None, "not measured")
        return Verdict(stopped == 1, f"{BRANCH} revoked as of a later file's first minute, that file processed, "
                       "`poll()`: " + ("stopped" if stopped == 1 else "still running"))

    selection = f"a plain PySpark streaming query doing the same selection (trigger {s.trigger_ms} ms)"
    return [
        target(f"latency, file landing → rows in each user's output: `api.run` of the selection ≤ "
               f"{TARGET_LATENCY_RATIO:g}× {selection}", latency_ratio(RUN)),
        target(f"latency, file landing → rows in each user's output: `NetworkRuntime`, three queries and three users "
               f"(every user's output) ≤ {TARGET_LATENCY_RATIO:g}× {selection}", latency_ratio(latency.NETWORK)),
        target(f"steady state: the three-query network ≤ {TARGET_PLAIN_RATIO:g}× the CPU per micro-batch of its "
               "heaviest query as a plain PySpark streaming query alone", against_plain),
        target(f"steady state: the shared network ≤ {TARGET_SEPARATE_RATIO:g}× the CPU of running its queries "
               "separately (three `api.run`)", separate),
        target(f"steady state: a branch whose users all lost access ≤ {100 * TARGET_OFF_SHARE:g} % of its cost when "
               "on", branch),
        target(f"at most {TARGET_JOBS_PER_BATCH:g} Spark jobs per micro-batch", jobs),
        target(f"a network mixing role policies, shields and levels ≥ {TARGET_MIXED_RATIO:g}× the throughput of the "
               "same queries unsecured", every_mechanism),
        Target("a pipeline whose users were revoked stops by itself once its rows pass the revocation (no other "
               "change in the store)", stops)]


# -- tables and plots ---------------------------------------------------------------------------------
def _tables(quick: bool) -> list[Table]:
    def columns(*pairs: str, variant: str | None = None) -> tuple[Column, ...]:
        """Columns from (title, metric) pairs, flattened."""
        return tuple(Column(t, k, variant) for t, k in zip(pairs[::2], pairs[1::2]))

    phases = tuple(Column(p, f"phase ms: {p}") for p in PHASES)
    threads = tuple(Column(k, f"thread ms: {k}") for k in THREADS)
    lat, std, mix = {"group": LAT}, {"group": STEADY}, {"group": MIX}
    tables = [
        Table("Latency", ("variant",), columns(
            "median ms", "p50_ms", "p90 ms", "p90_ms", "p95 ms", "p95_ms", "samples per run", "samples",
            "fastest output, median ms", "fastest_output_ms", "slowest output, median ms", "slowest_output_ms")
            + (Column("max ms", "max_ms", stat="max"),), lat,
            "File landing → its rows in an output, over every measured file and output of a run (a network has six "
            "outputs: each user of each query); medians over the runs, max over them."),
        Table("Latency against plain PySpark", ("group",),
              tuple(Column(f"{c} × plain", "p50_ms", c, over="plain", unit="×") for c in latency.CONFIGS[1:]), lat),
        Table("Latency: median micro-batch phases (ms, micro-batches with input)", ("variant",), phases, lat),
        Table("Steady state per file (one micro-batch with data per running query)", ("variant",), columns(
            "CPU ms", "cpu_ms_per_file", "wall ms", "wall_ms_per_file", "JVM", "jvm_ms_per_file",
            "this Python", "driver_ms_per_file", "Python workers", "workers_ms_per_file",
            "queries running", "queries_running", "micro-batches", "batches_per_file", "with data",
            "data_batches_per_file", "jobs", "jobs_per_file", "jobs per micro-batch", "jobs_per_batch",
            "tasks", "tasks_per_file", "classes generated", "codegen_per_file", "JIT ms", "jit_ms_per_file"), std,
            "CPU: this Python process and every descendant (the JVM, Spark's Python workers), medians over the runs."),
        Table("Steady state: median micro-batch phases (ms, every micro-batch)", ("variant",), phases, std),
        Table("Steady state: the JVM's CPU per file by kind of thread (ms)", ("variant",), threads, std,
              "Native thread names under `/proc` (see `bench/cost_meter.py`); *ended threads*: the JVM's CPU not in "
              "a thread alive at the end; *child processes*: processes the JVM started and reaped."),
        Table("Every mechanism at once", ("variant",), columns(
            "streaming queries", "pipelines", "input records", "records", "wall s", "chunks_wall_s",
            "CPU s", "chunks_cpu_s", "records/s", "records_per_s", "records per CPU s", "records_per_cpu_s",
            "Python workers CPU s", "workers_cpu_s", "Spark jobs", "jobs", "tasks", "tasks",
            "rows delivered", "rows_out"), mix,
            "Over the measured chunks of a run (the warm-up chunk left out), medians over the runs."),
        Table("Every mechanism at once against the unsecured network", ("group",), tuple(
            Column(f"{c} × unsecured, {what}", metric, c, over=UNSECURED_NETWORK, unit="×")
            for c, what, metric in ((SECURED, "records/s", "records_per_s"),
                                    (SECURED, "per CPU s", "records_per_cpu_s"),
                                    (mixed.PLAIN, "records/s", "records_per_s"))), mix),
        Table("Every mechanism at once: each query's micro-batches (ms)", ("variant",), tuple(
            Column(f"{q} {what}", f"{q}: {what} ms") for q in mixed.QUERIES for what in ("batch", "addBatch",
                                                                                           "first batch")), mix,
            "Per query, its slowest pipeline's median micro-batch with input and that pipeline's `addBatch`, and "
            "its slowest first micro-batch (which starts state stores and Python workers), from the progress reports."),
        Table("Every mechanism at once: the JVM's CPU over the measured chunks by kind of thread (ms)", ("variant",),
              threads, mix)]
    if not quick:
        sec, uns = SECURED, UNSECURED_NETWORK
        tables.append(Table(
            "Each query alone in a network, secured and unsecured, over the same chunks", ("query",),
            columns("secured pipelines", "pipelines", "secured CPU s", "chunks_cpu_s", variant=sec)
            + columns("unsecured CPU s", "chunks_cpu_s", variant=uns)
            + (Column("secured / unsecured CPU", "chunks_cpu_s", sec, over=uns, unit="×"),)
            + columns("secured: Python workers CPU s", "workers_cpu_s", "secured jobs", "jobs", "secured tasks",
                      "tasks", "secured records/s", "records_per_s", variant=sec)
            + columns("unsecured jobs", "jobs", "unsecured tasks", "tasks", "unsecured records/s", "records_per_s",
                      variant=uns), {"group": ALONE},
            "Input records/s counts all three streams' records, so only the CPU compares across queries."))
    return tables


def _plots(s: Sizes, quick: bool) -> list[Plot]:
    plots = [Plot(LAT, f"Latency, file landing → rows in each output (median per run; trigger {s.trigger_ms} ms)",
                  "variant", Column("median latency ms", "p50_ms"), (), {"group": LAT}, "bars"),
             Plot(STEADY, "Steady state: CPU of every process per file (one micro-batch with data per query)",
                  "variant", Column("CPU ms per file", "cpu_ms_per_file"), (), {"group": STEADY}, "bars"),
             Plot(MIX, "Role policies, shields and levels at once: input records per second",
                  "variant", Column("records/s", "records_per_s"), (), {"group": MIX}, "bars")]
    if not quick:
        plots.append(Plot("alone", "Each query alone in a network: CPU over the measured chunks", "query",
                          Column("CPU s", "chunks_cpu_s"), ("variant",), {"group": ALONE}, "bars"))
    return plots


# -- where the time goes ------------------------------------------------------------------------------
def explain(m: Measured, facts: Facts) -> list[str]:
    """Where the time goes, from the measurements (parts not measured are left out)."""
    def at(metric: str, variant: str, group: str = STEADY) -> float:
        return _at(m, metric, variant, group)

    def last(variant: str, group: str, prefix: str) -> dict[str, float]:
        """The numbers named ``prefix…`` of the last run of a pipeline, without the prefix."""
        runs = [r for n in m.where(group=group, variant=variant) for r in m.runs_by_pipeline[n]]
        return {k.removeprefix(prefix): v for k, v in (runs[-1] if runs else {}).items() if k.startswith(prefix)}

    def phases(variant: str, group: str = STEADY) -> str:
        return ", ".join(f"{p} {at(f'phase ms: {p}', variant, group):,.0f}" for p in PHASES[:3])

    notes = []
    if m.where(group=LAT):
        three, plain = at("p50_ms", PLAIN3, LAT), at("p50_ms", "plain", LAT)
        notes.append(
            "Latency, median micro-batch phases (ms, batches with input): " + "; ".join(
                f"{c} {phases(c, LAT)}" for c in latency.CONFIGS if m.where(group=LAT, variant=c))
            + ". `addBatch` of the network is its terminal switch (`foreachBatch`: reading the grants, the "
            "partitioned write, moving each user's part); `queryPlanning` is the plan of the micro-batch, made again "
            "for every micro-batch as for any streaming query." + ("" if math.isnan(three) else (
                f" With three selections at once, the plain queries' median was {three:.0f} ms against {plain:.0f} ms "
                f"for one: that much of the network's latency is three queries sharing {facts['cores']} cores.")))
        switch = last(latency.NETWORK, LAT, "switch ")
        if switch.get("batches"):
            notes.append(
                f"Inside the network's terminal switch (cProfile of {switch['batches']:.0f} micro-batches of the "
                f"latency network after its measured files, last run, {switch['ms']:.0f} ms per micro-batch in "
                "`foreachBatch`): " + ", ".join(f"{k.removeprefix('ms: ')} {v:.0f} ms" for k, v in switch.items()
                                                if k.startswith("ms: ")) + " per micro-batch.")
    if m.where(group=STEADY, variant=NETWORK):
        name, heavy = heaviest_plain(m)
        net, kids = at("cpu_ms_per_file", NETWORK), at("thread ms: child processes", NETWORK)
        notes.append("Steady state per file: " + "; ".join(
            f"{c} {at('cpu_ms_per_file', c):,.0f} ms CPU (JVM {at('jvm_ms_per_file', c):,.0f}, this Python process "
            f"{at('driver_ms_per_file', c):,.0f}, Python workers {at('workers_ms_per_file', c):,.0f}), median "
            f"micro-batch {phases(c)} ms" for c in (NETWORK, name, SEPARATE) if m.where(group=STEADY, variant=c))
            + " (the tables below break it down).")
        spawned = last(OFF, STEADY, "spawned: ")
        notes.append(
            f"Child processes (programs the JVM started and reaped): {kids:,.0f} ms of the network's {net:,.0f} ms "
            f"CPU per file ({100 * kids / net:.0f} %)" + (f", {at('thread ms: child processes', name):,.0f} of "
                                                         f"{name}'s {heavy:,.0f} ms" if name else "")
            + ("" if math.isnan(at("spawned", OFF)) else (
                f"; while the network processed one file, the JVM started {at('spawned', OFF):,.0f} processes"
                + (" (last name seen: " + ", ".join(f"{k} {n:,.0f}" for k, n in spawned.items()) + "; `jspawnhelper` "
                   "is Java's launcher, seen before it runs the program)" if spawned else "")))
            + (". Hadoop's local file system runs `chmod` and `readlink` as programs when its native library is not "
               "loaded: for the permissions of every file and folder a micro-batch writes (checkpoint, state store, "
               "output) and to resolve links when the checkpoint renames files." if kids >= 0.05 * net else "."))
        notes.append(
            f"Sharing: the network ran {at('queries_running', NETWORK):.0f} Spark streaming queries, one per pipeline"
            + ("" if math.isnan(at("queries_running", SEPARATE)) else
               f", as many as the separate runs ({at('queries_running', SEPARATE):.0f})")
            + ": the runtime compiles one Spark query per pipeline and shares no operator, state or scan between "
            "queries, so the network does the separate runs' work plus its terminal switches, and every stateful "
            "query also runs a no-data micro-batch after each batch that moved its watermark (micro-batches per "
            "file in the table).")
        off, gone = at("cpu_ms_per_file", OFF), at("cpu_ms_per_file", GONE)
        runs = {c: [r["cpu_ms_per_file"] for n in m.where(group=STEADY, variant=c) for r in m.runs_by_pipeline[n]]
                for c in (OFF, GONE)}
        if not math.isnan(off):
            notes.append(
                f"Switches: with {BRANCH}'s users revoked its pipeline is stopped ({at('queries_running', OFF):.0f} "
                f"queries running, against {at('queries_running', NETWORK):.0f}) and runs no Spark work; the network "
                f"then cost {off:,.0f} ms per file" + ("." if math.isnan(gone) else (
                    f", and {gone:,.0f} ms without {BRANCH} registered at all: the difference ({off - gone:+,.0f} ms) "
                    "is what the other two pipelines' cost varied by between the two configurations (per run, ms per "
                    "file: " + "; ".join(f"{c} " + " / ".join(f"{x:,.0f}" for x in xs) for c, xs in runs.items())
                    + ").")))
        if m.value("stops_by_itself", "min", group=STEADY, variant=OFF) == 0:
            notes.append(f"When {BRANCH}'s users were revoked as of a later event time, its pipeline kept running "
                         "after rows past the revocation had been emitted: `NetworkRuntime.poll()` did not stop it "
                         "while nothing else changed in the store.")
    if m.where(group=MIX, variant=SECURED) and m.where(group=MIX, variant=UNSECURED_NETWORK):
        def both(metric: str, scale: float = 1.0, digits: int = 1) -> str:
            return " against ".join(f"{at(metric, c, MIX) * scale:,.{digits}f}" for c in (SECURED, UNSECURED_NETWORK))

        chunk = 1 / max(facts["mixed chunks"], 1)
        notes.append(
            f"Every mechanism at once: the secured network ran {at('pipelines', SECURED, MIX):.0f} pipelines for the 3 "
            "queries (users with different roles or clearances get different plans, and levels share no operator), "
            f"the unsecured one {at('pipelines', UNSECURED_NETWORK, MIX):.0f}. Per measured chunk: "
            f"{both('jobs', chunk)} Spark jobs, {both('tasks', chunk, 0)} tasks; CPU {both('chunks_cpu_s')} s, of "
            "which Spark's Python workers (Python data sources: the punctuated files and the live action values; "
            f"the shields' `transformWithStateInPandas`) {both('workers_cpu_s')} s. Rows delivered, last run: "
            + "; ".join(f"{c} " + ", ".join(f"{t} {n:,.0f}" for t, n in last(c, MIX, "delivered: ").items())
                        for c in (SECURED, UNSECURED_NETWORK)) + ".")
        notes.append("Median micro-batch of each query's slowest pipeline, secured against unsecured (ms): "
                     + "; ".join(f"{q} {both(f'{q}: batch ms', digits=0)}" for q in mixed.QUERIES)
                     + " (the first micro-batch of each, which starts its state stores and Python workers, is shown "
                     "apart in the table).")
    if m.where(group=ALONE):
        cost = {q: [m.value(k, group=ALONE, variant=c, query=q) for k, c in (
            ("chunks_cpu_s", SECURED), ("chunks_cpu_s", UNSECURED_NETWORK), ("workers_cpu_s", SECURED))]
            for q in mixed.QUERIES}
        notes.append("Each query alone (secured − unsecured CPU over the same chunks): " + "; ".join(
            f"{q} {sec:.1f} − {uns:.1f} = {sec - uns:+.1f} s (Python workers {workers:.1f} s)"
            for q, (sec, uns, workers) in sorted(cost.items(), key=lambda item: item[1][1] - item[1][0])) + ".")
    others = [r["other_cores"] for runs in m.runs_by_pipeline.values() for r in runs if "other_cores" in r]
    if others:
        notes.append(f"Other work on the machine kept {sum(others) / len(others):.2f} of its {facts['cores']} cores "
                     f"busy on average during the runs (at most {max(others):.2f} in one run): wall times and "
                     "latencies include that contention, CPU times do not.")
    return notes


def _notes(s: Sizes, repeats: int, warmup: bool) -> tuple[str, ...]:
    return (
        f"All parts use a processing-time trigger of {s.trigger_ms} ms. Each pipeline starts its configuration into "
        "fresh folders, feeds it a warm-up file (not measured), then its measured files, and stops it; the runner "
        + ("runs every pipeline once unrecorded first (JIT, class loading), then " if warmup else "runs ")
        + f"{repeats} round(s), the order rotated every round. CPU: user + system time of this Python process and "
        "every descendant (the Spark JVM with its driver and executor threads, JIT and GC, Spark's Python workers), "
        "from `/proc`; Spark jobs and tasks from the status store; micro-batches and their phases from Spark's "
        "progress reports. The runner's `wall_s` and `cpu_s` per pipeline (start and stop included) are in the JSON "
        "only.",
        "Latency (`bench/engine_latency.py`): a plain PySpark query doing `SEL1` (`SELECT streamid, heartRate FROM "
        "Stream1 WHERE heartRate > 100`), `api.run` of it for dr_lee, a `NetworkRuntime` with `SEL1`–`SEL3` (one "
        "selection per stream) for three users (two per query), and the three selections by hand side by side. "
        f"{s.latency_files} file(s) of {s.rows_per_file} readings per stream per run, each file's rows marked; the "
        f"driver lists the output folders every {s.poll_ms} ms. Latency: from the input file's rename into place to "
        "the first completely written output file holding its rows, per output; after each file the driver waits "
        "until the queries are idle and a random part of a trigger interval. After its measured files the network "
        f"takes {s.profile_files} more with its terminal switch under cProfile.",
        f"Steady state (`bench/engine_steady.py`): the queries of experiment 6 (CQ1–CQ3), fed {s.minutes_per_file} "
        f"minute(s) of readings per file ({s.readings.per_minute} per minute on Stream1 and Stream2, "
        f"{s.readings.stream3_per_minute} on Stream3); {s.steady_files} measured file(s) per run, each landed, "
        "processed (`processAllAvailable`), followed by the network's `poll()` and a wait until every query is idle; "
        f"costs per file. *{OFF}*: after the warm-up file, {BRANCH}'s users revoked as of the next file's first "
        "minute and that file processed (does the pipeline stop by itself? the processes the JVM starts meanwhile "
        f"are counted), then revoked as of the input's start; *{GONE}*: {BRANCH} unregistered after the warm-up file. "
        f"The branch costs *{NETWORK} − {GONE}* when on and *{OFF} − {GONE}* when off. *separate*: three `api.run` "
        "side by side; *plain CQn*: each query by hand, alone.",
        "Every mechanism at once (`bench/engine_mixed.py`): a network of three queries over a punctuated `HeartRate` "
        f"(each patient's SPs, shields; {s.mixed.patients} patients, one reading per {s.mixed.heart_interval_s:g} s), "
        "a `Ward` stream under role policies (one tied to a live action) and a levelled `MessageLog` (two users "
        f"cleared for different levels). {s.mixed.chunks} measured chunk(s) of {s.mixed.chunk_minutes} minute(s) per "
        "run, each landed and processed until idle; throughput = input records / wall seconds. *unsecured network*: "
        "the same runtime and queries without SPs, policies, actions or levels; *plain*: the queries by hand; "
        "*mixed alone*: each query alone in a network, secured and unsecured.",
        "`events` is not used: the inputs are sized in files and minutes of readings (`bench.network_engine.Sizes`).")


def experiment(events: int | None = None, quick: bool = False) -> Experiment:
    """Experiment 7 (``events`` is ignored; ``quick``: one measured file or chunk per configuration, fewer
    configurations, one round, no warm-up, performance targets not judged)."""
    s = QUICK if quick else Sizes()
    repeats = None if quick else 2  # each run already measures many files or chunks; the suite's quick runs once
    return Experiment(
        "network_engine", "One engine: latency, steady state, every mechanism at once (issue 12)", _workload(s),
        tuple(_pipelines(s, quick)), tuple(_targets(s, judged=not quick)), notes=_notes(s, repeats or 1, not quick),
        tables=tuple(_tables(quick)), plots=tuple(_plots(s, quick)), explain=explain, repeats=repeats,
        warmup=not quick)


__all__ = ["QUICK", "Sizes", "experiment", "explain", "heaviest_plain"]
