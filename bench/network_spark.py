"""Experiment 6: the shared-network scenario on Spark, one run over a recorded input (issues 5 and 12).

The declaration (:func:`experiment`) for :mod:`bench.suite`. The questions of the simulation
(:mod:`bench.network_sim`, Zaki et al. §6) asked of the engine that runs networks,
:class:`streamwarden.runtime.network.NetworkRuntime` (issue 12): every pipeline (one
registered query with one plan) compiled once into its own Spark streaming query, a terminal
switch per pipeline delivering each user's rows in one partitioned write, and a pipeline none
of whose users can still receive rows stopped. The workload is :mod:`bench.network_workload`'s
(three registered queries, CQ1-CQ3, two users each; seeded readings, one JSON-lines file per
stream). Each configuration is one in-process pipeline on the runner's SparkSession; a run
starts its queries together with ``available_now`` (one micro-batch per query) into fresh
output and checkpoint folders under the runner's ``out`` and waits for them to end:

* ``network``: the runtime, every user granted before the input starts (full access), and
  ``network-CQ2-lost`` ... : the same with the users of those queries granted an hour before
  the input and revoked at its first timestamp (the paper's "queries lose access");
* ``separate``: each query as its own ``streamwarden.api.run`` (for its first user);
* ``plain``: the same queries written by hand with ``readStream``/``writeStream``, no security.

A run returns, next to the runner's wall and CPU time, :class:`bench.cost_meter.CostMeter`'s
breakdown (the JVM's, the Python workers' and this process's CPU, Spark jobs and tasks,
classes generated, JIT, the JVM's CPU by kind of thread), the cores other work kept busy,
and for every target (``user/query`` of a network, a query's sink otherwise) its rows and a
digest of their multiset, projected on the query's columns (the targets compare them).

    >>> e = experiment(quick=True)
    >>> [p.name for p in e.pipelines], len(e.targets)
    (['network', 'network-CQ2-lost', 'separate', 'plain'], 3)
"""

from __future__ import annotations

import math
import os
import json
import resource
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from pyspark.sql import SparkSession

from bench.cost_meter import THREAD_KINDS, CostMeter
from bench.deployments import NETWORK, PLAIN, SEPARATE, Deployment, start_network, start_plain, start_separate
from bench.network_sim import PAPER_LOSS_SAVINGS_PCT
from bench.network_workload import COLUMNS, STREAMS, Sizes, catalog, land_all, plain_frame, queries, readings
from bench.suite.experiment import (Column, Experiment, Facts, InProcess, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload)
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery

#: Issue 5's target for sharing: the network against one query per query.
TARGET_SHARED_RATIO = 0.5
FULL = "none"  # the access pattern in which no query loses access
PATTERNS, QUICK_PATTERNS = ("CQ2", "CQ2+CQ3"), ("CQ2",)
MINUTES, QUICK_MINUTES = 60, 10
#: Input tuples per minute of readings (Stream1 and Stream2 60 each, Stream3 10): ``events`` / this = minutes.
PER_MINUTE = 2 * Sizes().per_minute + Sizes().stream3_per_minute
#: Performance verdicts need this many runs per pipeline (a smoke run's single run is shown, not judged).
JUDGED_RUNS = 3
#: The JVM's CPU by kind of thread, as :class:`~bench.cost_meter.CostMeter` reads it.
KINDS = tuple(kind for kind, _ in THREAD_KINDS) + ("other", "ended threads", "child processes")
#: Each query's output columns as Arrow reads them (explicit: a target with no rows has no columns to infer).
TYPES = {"streamid": "int64", "heartRate": "int64", "screentime": "float64", "speed": "float64", "category": "string"}


@cache
def _registered() -> tuple[Catalog, tuple[RegisteredQuery, ...]]:
    cat = catalog()
    return cat, queries(cat)


def _listed() -> list[tuple[str, str]]:
    """Every (user, query) the queries are registered for."""
    return [(u, q.id) for q in _registered()[1] for u in q.users]


def _workload(minutes: int) -> Workload:
    def prepare(work: Path) -> Facts:
        data = readings(Sizes(), 0, minutes)
        land_all({s: work / "in" / s for s in STREAMS}, "part-00000.jsonl", data)
        _registered()  # parsed before any run is timed
        return {**{stream: len(rows) for stream, rows in data.items()}, "minutes": minutes}

    s = Sizes()
    return Workload(f"{minutes} minutes of seeded smart-healthcare readings ({s.per_minute}/min in Stream1 and "
                    f"Stream2, {s.stream3_per_minute}/min in Stream3; {s.locations} locations, {s.devices} devices, "
                    f"seed {s.seed}), one JSON-lines file per stream", prepare)


def _digest(files: Sequence[Path], query: str) -> tuple[int, int]:
    """Rows in ``files`` (JSON lines) and an order-free digest of their multiset on ``query``'s
    columns (a sum of row hashes, 48 bits: exact as a float). Arrow and pandas read and hash
    100,000 rows in about 0.1 s; Python's json and a Counter took ten times that, in the timing."""
    import pandas as pd
    import pyarrow as pa
    from pyarrow import json

    schema = pa.schema([(c, TYPES[c]) for c in COLUMNS[query]])
    options = json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    tables = [json.read_json(f, parse_options=options, read_options=json.ReadOptions(use_threads=False))
              for f in files if f.stat().st_size]
    if not tables:
        return 0, 0
    frame = pa.concat_tables(tables).to_pandas()
    return len(frame), int(pd.util.hash_pandas_object(frame, index=False).sum()) % (1 << 48)


def _start(kind: str, lost: Sequence[str], spark: SparkSession, work: Path, out: Path) -> Deployment:
    cat, registered = _registered()
    inputs = {s: work / "in" / s for s in STREAMS}
    if kind == NETWORK:
        return start_network(spark, out, inputs, cat, registered, available_now=True, lost=lost)
    if kind == SEPARATE:
        return start_separate(spark, out, inputs, cat, registered, available_now=True)
    frames = {q.id: (lambda q=q: plain_frame(spark, q.id, inputs)) for q in registered}
    return start_plain(out, frames, available_now=True)


def _configuration(kind: str, pattern: str = FULL) -> InProcess:
    """One run of ``kind`` under access ``pattern``: its costs, then what every target received."""
    lost = sorted(set() if pattern == FULL else set(pattern.split("+")))

    def call(spark: SparkSession, work: Path, out: Path) -> dict[str, float]:
        from bench.levels import OtherWork  # here: declaring the experiment needs none of experiment 4's module

        others, meter = OtherWork(os.getpid()), CostMeter(spark)
        mark = meter.mark()
        deployment = _start(kind, lost, spark, work, out)  # planning and starting count too
        started = len(deployment.streams)
        deployment.await_termination()
        cost = meter.since(mark)
        parts = "batch=*/part-*" if deployment.runtime is not None else "part-*"
        (out / TARGETS).write_text(json.dumps({t: [str(p), parts] for t, p in deployment.targets.items()}))
        return {"queries_started": started,
                **{k: getattr(cost, k) for k in ("jvm_cpu_s", "driver_cpu_s", "jobs", "tasks", "codegen_compiles",
                                                  "jit_s", "python_workers")},
                "workers_cpu_s": max(cost.workers_cpu_s, 0.0), "other_cores": others.cores(),
                **{f"jvm {kind_} s": cost.jvm_threads_s.get(kind_, 0.0) for kind_ in KINDS}}

    return InProcess(call)


#: Where a run lists its targets' folders for :func:`_received` (in the run's own output folder).
TARGETS = "targets.json"


def _received(work: Path, out: Path) -> dict[str, float]:
    """What every target of a run received (the pipeline's untimed check): rows and digest per
    target, rows out in all, and the CPU time the reading took."""
    checked = resource.getrusage(resource.RUSAGE_SELF)
    got = {}
    for target, (path, parts) in json.loads((out / TARGETS).read_text()).items():
        files = sorted(Path(path).glob(parts))
        got[f"rows {target}"], got[f"digest {target}"] = _digest(files, target.split("/")[-1])
    done = resource.getrusage(resource.RUSAGE_SELF)
    return {"rows_out": sum(v for k, v in got.items() if k.startswith("rows ")),
            "check_cpu_s": done.ru_utime + done.ru_stime - checked.ru_utime - checked.ru_stime, **got}


def _label(pattern: str) -> str:
    return NETWORK if pattern == FULL else f"network, {pattern.replace('+', ' & ')} lost"


def _pipelines(patterns: Sequence[str]) -> tuple[Pipeline, ...]:
    def made(name: str, kind: str, pattern: str = FULL) -> Pipeline:
        label = _label(pattern) if kind == NETWORK else kind
        return Pipeline(name, _configuration(kind, pattern), kind, label, STREAMS,
                        {"configuration": label, "queries lost": 0 if pattern == FULL else len(pattern.split("+"))},
                        check=_received)

    # Names become folder names under the runner's out: no commas, colons or spaces for Hadoop's paths.
    return (made(NETWORK, NETWORK), *(made(f"network-{p.replace('+', '-')}-lost", NETWORK, p) for p in patterns),
            made(SEPARATE, SEPARATE), made(PLAIN, PLAIN))


def _judged(measured: Measured, names: Sequence[str], met: bool, text: str) -> Verdict:
    runs = min(measured.runs(n) for n in names)
    return Verdict(met, text) if runs >= JUDGED_RUNS else Verdict(None, f"{text}; {runs} run(s): not judged")


def _sharing(measured: Measured) -> Verdict:
    net, sep = measured.median(NETWORK, "cpu_s"), measured.median(SEPARATE, "cpu_s")
    if math.isnan(net / sep):
        return Verdict(None, "not measured")
    rounds = ", ".join(f"{a['cpu_s'] / b['cpu_s']:.2f}×" for a, b in zip(measured.runs_by_pipeline[NETWORK],
                                                                          measured.runs_by_pipeline[SEPARATE]))
    return _judged(measured, (NETWORK, SEPARATE), net / sep < TARGET_SHARED_RATIO,
                   f"{net / sep:.2f}× ({net:.1f} s vs {sep:.1f} s; per round: {rounds})")


def _loss(name: str, pattern: str, paper: float) -> Target:
    def check(measured: Measured) -> Verdict:
        full, lossy = measured.median(NETWORK, "cpu_s"), measured.median(name, "cpu_s")
        if math.isnan(full - lossy):
            return Verdict(None, "not measured")
        saved = 100 * (full - lossy) / full
        started = f"{measured.median(name, 'queries_started'):.0f} of " \
                  f"{measured.median(NETWORK, 'queries_started'):.0f} pipelines started"
        return _judged(measured, (NETWORK, name), saved >= paper, f"{pattern} lost: {saved:.1f} % ({started})")

    lost = len(pattern.split("+"))
    return Target(f"at least the paper's saving when {lost} of {len(_registered()[1])} queries lose access (paper: "
                  f"about {paper:g} %; CPU against the network with full access)", check)


def _delivered(run: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in run.items() if k.startswith(("rows ", "digest "))}


def _rows(lossy: Sequence[tuple[str, str]]) -> Target:
    """The rows each user received agree across the kinds of run and the access patterns."""
    def check(measured: Measured) -> Verdict:
        runs = measured.runs_by_pipeline
        names = (NETWORK, SEPARATE, PLAIN, *(name for name, _ in lossy))
        if any(not runs.get(n) for n in names):
            return Verdict(None, "not measured")

        def got(name: str, target: str) -> tuple[float, float]:
            return runs[name][0][f"rows {target}"], runs[name][0][f"digest {target}"]

        listed = _listed()
        checks = {
            "network matches separate": all(got(NETWORK, f"{u}/{q}") == got(SEPARATE, q) for u, q in listed),
            "separate matches plain": all(got(SEPARATE, q) == got(PLAIN, q) for _, q in listed),
            "everyone gets rows": all(got(NETWORK, f"{u}/{q}")[0] > 0 for u, q in listed),
            "lost users get nothing": all(got(n, f"{u}/{q}")[0] == 0 for n, p in lossy for u, q in listed
                                          if q in p.split("+")),
            "others keep their rows": all(got(n, f"{u}/{q}") == got(NETWORK, f"{u}/{q}") for n, p in lossy
                                          for u, q in listed if q not in p.split("+")),
            "stable": all(_delivered(r) == _delivered(runs[n][0]) for n in names for r in runs[n]),
        }
        failed = [k for k, ok in checks.items() if not ok]
        return Verdict(not failed, ", ".join(failed) or "all rows as expected")

    return Target("every user receives the rows of their query: the network's equal one `api.run` per query's and "
                  "the plain queries'; users of lost queries get none, the others keep theirs", check)


def explain(measured: Measured, facts: Facts) -> list[str]:
    """Where the CPU goes: what sharing and losing access changed, from the medians."""
    def m(name: str, metric: str) -> float:
        return measured.median(name, metric)

    notes = []
    if all(measured.runs(n) for n in (NETWORK, SEPARATE, PLAIN)):
        pairs = [("Spark jobs", "jobs", ".0f"), ("tasks", "tasks", ".0f"),
                 ("classes generated", "codegen_compiles", ".0f"), ("JIT s", "jit_s", ".1f"),
                 ("this Python process (planning, `foreachBatch`) s", "driver_cpu_s", ".1f")]
        notes.append(
            f"Sharing: the network ran {m(NETWORK, 'queries_started'):.0f} Spark streaming queries, one per pipeline, "
            f"as `api.run` does per query ({m(SEPARATE, 'queries_started'):.0f}): the runtime shares no operator "
            "between queries (its documented design: one Spark query per pipeline), so it cannot cost less than the "
            f"queries run separately. Measured: {m(NETWORK, 'cpu_s') / m(SEPARATE, 'cpu_s'):.2f}× their CPU and "
            f"{m(NETWORK, 'cpu_s') / m(PLAIN, 'cpu_s'):.2f}× the plain queries' ({m(PLAIN, 'cpu_s'):.1f} s). Against "
            "the separate runs: " + ", ".join(f"{title} {m(NETWORK, k):{f}} / {m(SEPARATE, k):{f}}"
                                             for title, k, f in pairs) + ".")
    for name in measured.where(group=NETWORK) if measured.runs(NETWORK) else ():
        if not measured.coordinates[name]["queries lost"] or not measured.runs(name):
            continue
        started, all_started = m(name, "queries_started"), m(name, "queries_started") == m(NETWORK, "queries_started")
        lost = str(measured.coordinates[name]["configuration"]).removeprefix("network, ")
        notes.append(
            f"{lost} (users granted an hour before the input, revoked at its first timestamp): "
            f"{started:.0f} of {m(NETWORK, 'queries_started'):.0f} pipelines were started, "
            f"{100 * (m(NETWORK, 'cpu_s') - m(name, 'cpu_s')) / m(NETWORK, 'cpu_s'):.1f} % CPU saved against full "
            f"access ({m(name, 'rows_out'):,.0f} rows delivered against {m(NETWORK, 'rows_out'):,.0f}, "
            f"{m(name, 'jobs'):.0f} Spark jobs against {m(NETWORK, 'jobs'):.0f})."
            + (" Every pipeline ran: a fresh pipeline has emitted nothing, so the runtime starts any pipeline with a "
               "grant on record (its switch stops a pipeline only once it has emitted a row past its users' last "
               "grant, experiment 7), and the lost query's terminal switch filtered out all of its rows."
               if all_started else ""))
    return notes


def _notes() -> tuple[str, ...]:
    return (
        "The scenario of experiment 5, run by the engine: `NetworkRuntime` compiles each pipeline (a registered "
        "query with one plan) once into its own Spark streaming query; a terminal switch per pipeline writes each "
        "user's rows. Against it: *separate*, each query as its own `api.run` (for its first user), and *plain*, "
        "the same queries written by hand with `readStream`/`writeStream` and no security. Each run processes the "
        "recorded input with `available_now=True` (one micro-batch per query) into fresh output and checkpoint "
        "folders, every configuration's queries started together; planning and starting are timed too. *Full "
        "access*: every user granted before the input starts; *lost*: the users of those queries granted an hour "
        "before the input and revoked at its first timestamp.",
        "The queries: " + "; ".join(f"`{q.id}` (users {', '.join(q.users)}): `{' '.join(q.query.split())}`"
                                    for q in _registered()[1]) + ".",
        "Wall and CPU time are the runner's (CPU: this Python process and all its descendants: the Spark JVM, its "
        "Python workers, the processes either started and waited for). The JVM's, "
        "the Python workers' and this process's CPU shares, Spark jobs and tasks, classes generated (whole-stage "
        "code generation), JIT seconds and the JVM's CPU by kind of thread (native thread names under `/proc`, see "
        "`bench/cost_meter.py`; *ended threads*: the JVM's CPU not in a thread alive at the end, here also the "
        "streaming queries' own threads, which end with an `available_now` run; *child processes*: the processes "
        "the JVM started and reaped, Hadoop's `chmod` and `readlink` without its native library, counted in the "
        "runner's CPU time too) are `CostMeter`'s, from the start of the run to the end of its queries; "
        "*other work, cores*: the cores the rest of the machine kept busy meanwhile.",
        "Rows delivered: to all users together (separate and plain: one output per query). After its queries end, "
        "a run reads what every user received, projected on the query's columns, as a row count and a digest of "
        "the rows' multiset (a sum of row hashes) that the rows target compares across configurations; that "
        "reading is the pipeline's check, outside the runner's timing (*row check CPU s*).",
        f"Performance verdicts need at least {JUDGED_RUNS} runs of each pipeline (a smoke run is shown, not judged). "
        "The paper's savings (" + ", ".join(f"{v:g} % when {k} of 3 queries lose access"
                                            for k, v in PAPER_LOSS_SAVINGS_PCT.items()) + ") "
        "are averages over random networks in Zaki et al.'s simulation (§6), where lost queries' operators stop.",
    )


def experiment(events: int | None = None, quick: bool = False) -> Experiment:
    """Experiment 6 over ``events`` input tuples (rounded up to whole minutes of readings, 130 tuples a
    minute; default 60 minutes, 7,800 tuples; ``quick``: 10 minutes, one loss pattern, no warm-up)."""
    minutes = math.ceil(events / PER_MINUTE) if events else (QUICK_MINUTES if quick else MINUTES)
    patterns = QUICK_PATTERNS if quick else PATTERNS
    pipelines = _pipelines(patterns)
    lossy = [(p.name, pattern) for p, pattern in zip(pipelines[1:], patterns)]
    targets = (Target(f"the shared network uses < {TARGET_SHARED_RATIO:g}× the CPU of one Spark query per query "
                      "(full access; here: each query as its own `api.run`)", _sharing),
               *(_loss(name, pattern, PAPER_LOSS_SAVINGS_PCT[len(pattern.split("+"))]) for name, pattern in lossy
                 if len(pattern.split("+")) in PAPER_LOSS_SAVINGS_PCT), _rows(lossy))

    configurations = Table(
        "Every configuration", ("configuration",),
        (Column("wall s", "wall_s"), Column("CPU s", "cpu_s"), Column("CPU s min", "cpu_s", stat="min"),
         Column("CPU s max", "cpu_s", stat="max"), Column("JVM CPU s", "jvm_cpu_s"),
         Column("Python workers CPU s", "workers_cpu_s"), Column("driver CPU s", "driver_cpu_s"),
         Column("row check CPU s", "check_cpu_s"), Column("rows delivered", "rows_out"),
         Column("streaming queries started", "queries_started"), Column("Spark jobs", "jobs"),
         Column("tasks", "tasks"), Column("classes generated", "codegen_compiles"), Column("JIT s", "jit_s"),
         Column("other work, cores", "other_cores")),
        text="Medians over the runs (CPU s: also the lowest and highest run).")
    relative = Table(
        "Sharing and losing access: CPU against the other configurations", (),
        (Column("network / separate", "cpu_s", NETWORK, over=SEPARATE, unit="×"),
         Column("network / plain", "cpu_s", NETWORK, over=PLAIN, unit="×"),
         Column("network / separate, wall", "wall_s", NETWORK, over=SEPARATE, unit="×"),
         *(Column(f"{_label(p).removeprefix('network, ')}: CPU of full access", "cpu_s", _label(p), over=NETWORK,
                  scale=100, unit=" %") for p in patterns)),
        text=f"Issue 5's target: network / separate < {TARGET_SHARED_RATIO:g}×; the paper's savings when queries "
             "lose access, as CPU of full access: " + ", ".join(f"{100 - v:g} % ({k} of 3 lost)"
                                                               for k, v in PAPER_LOSS_SAVINGS_PCT.items()) + ".")
    threads = Table("The JVM's CPU seconds by kind of thread (medians)", ("configuration",),
                    tuple(Column(kind, f"jvm {kind} s") for kind in KINDS))
    return Experiment(
        name="network_spark", title=f"Shared operator networks on Spark, one run over a recorded input "
                                    f"({minutes} minutes of readings)",
        workload=_workload(minutes), pipelines=pipelines, targets=targets, notes=_notes(),
        tables=(configurations, relative, threads),
        plots=(Plot("cpu", "CPU s per run (median, min-max)",
                    "configuration", Column("CPU s", "cpu_s"), series=(), kind="bars",
                    also=(Column("JVM", "jvm_cpu_s"), Column("this Python process", "driver_cpu_s"))),
               Plot("loss", "The network's CPU per run as queries lose access (paper: "
                    + ", ".join(f"{v:g} % less with {k} of 3 lost" for k, v in PAPER_LOSS_SAVINGS_PCT.items()) + ")",
                    "queries lost", Column("CPU s", "cpu_s"), series=(), where={"group": NETWORK})),
        explain=explain, warmup=not quick)


__all__ = ["FULL", "TARGET_SHARED_RATIO", "experiment", "explain"]
