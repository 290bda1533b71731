"""Experiment 7, steady state: what each micro-batch of a running network costs.

Each configuration is started once with a processing-time trigger and fed the
smart-healthcare readings file by file (one file per stream, ``minutes_per_file``
minutes of readings each). A warm-up file is not measured (with ``warm_up``); then, for
each of ``steady_files`` files, the driver lands it, waits until every query has processed it
(``processAllAvailable``), lets the network apply the store's changes (``poll``, as
``network run`` does between micro-batches) and waits until the queries are idle
(the no-data micro-batch a stateful query runs after its watermark moved included).
Measured over those files (:class:`~bench.cost_meter.CostMeter`): CPU of every process,
Spark jobs and tasks, micro-batches (Spark's progress reports).

Configurations:

* *network*: the three-query network (CQ1–CQ3, three users), every user granted; then,
  in the same running network, *CQ2 off* (CQ2's users revoked as of the input's start:
  the runtime stops its pipeline) and *CQ2 gone* (CQ2 unregistered: the network without
  it). The branch's cost when on is *network − CQ2 gone*, when off *CQ2 off − CQ2 gone*.
  Between *network* and *CQ2 off*, a probe: CQ2's users are revoked as of the next
  file's first minute and that file is processed; does the runtime stop CQ2 by itself
  once CQ2 has emitted rows past the revocation (``switch_stops_by_itself``)? Then the
  revocation is moved to the input's start, a change the runtime sees, which stops it;
* *separate*: the same queries as three ``api.run`` queries running side by side;
* *plain CQn*: each query written by hand, alone (the heaviest one is the baseline).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamwarden.catalog.authorization import AuthorizationServer

from bench.cost_meter import CostMeter, spawned_processes
from bench.deployments import Deployment, start_network, start_plain, start_separate
from bench.network_workload import START, STREAMS, Sizes, catalog, land_all, plain_frame, queries, readings
from bench.stats import median, ratio

NETWORK, OFF, GONE, SEPARATE = "network", "network, CQ2 off", "network, CQ2 gone", "separate"
BRANCH = "CQ2"  # the pipeline whose users lose access


def plain_name(query: str) -> str:
    return f"plain {query}"


class Feeder:
    """Lands the readings file by file and measures what processing them cost."""

    def __init__(self, spark: SparkSession, settings: Any):
        self.settings = settings
        self.meter = CostMeter(spark)
        self.sizes = Sizes(per_minute=settings.per_minute, stream3_per_minute=settings.stream3_per_minute)
        self.trigger_s = settings.trigger_ms / 1000

    def file(self, k: int) -> dict[str, list[dict]]:
        m = self.settings.minutes_per_file
        return readings(self.sizes, k * m, (k + 1) * m)

    def feed(self, d: Deployment, inputs: Mapping[str, Path], k: int) -> None:
        land_all(inputs, f"part-{k:05d}.jsonl", self.file(k))
        d.process_all_available()
        d.poll()
        d.settle(self.trigger_s)

    def measure(self, d: Deployment, inputs: Mapping[str, Path], first: int) -> dict[str, Any]:
        """Feed one warm-up file (``first``; not in a run without warm-up), then measure
        ``settings.steady_files`` more."""
        if self.settings.warm_up:
            self.feed(d, inputs, first)
        since = {s.name: (s.lastProgress["batchId"] if s.lastProgress else -1) for s in d.streams}
        mark = self.meter.mark()
        n = self.settings.steady_files
        for k in range(first + 1, first + 1 + n):
            self.feed(d, inputs, k)
        cost = self.meter.since(mark)
        batches = data_batches = 0
        phases: dict[str, list[float]] = {}
        for stream in d.streams:
            for report in stream.recentProgress:
                if report["batchId"] > since.get(stream.name, -1):
                    batches += 1
                    data_batches += bool(report["numInputRows"])
                    for phase, ms in report["durationMs"].items():
                        phases.setdefault(phase, []).append(float(ms))
        per_file = {key: value / n for key, value in cost.as_dict().items() if isinstance(value, (int, float))}
        return {
            "cpu_ms_per_file": 1000 * per_file["cpu_s"], "wall_ms_per_file": 1000 * per_file["wall_s"],
            "jvm_ms_per_file": 1000 * per_file["jvm_cpu_s"], "workers_ms_per_file": 1000 * per_file["workers_cpu_s"],
            "driver_ms_per_file": 1000 * per_file["driver_cpu_s"], "jobs_per_file": per_file["jobs"],
            "tasks_per_file": per_file["tasks"], "codegen_per_file": per_file["codegen_compiles"],
            "jit_ms_per_file": 1000 * per_file["jit_s"], "batches_per_file": batches / n,
            "data_batches_per_file": data_batches / n, "jobs_per_batch": ratio(cost.jobs, batches),
            "python_workers": cost.python_workers, "queries_running": len([s for s in d.streams if s.isActive]),
            "phases_ms_per_batch": {p: median(v) for p, v in sorted(phases.items())},
            "threads_ms_per_file": {kind: 1000 * v / n for kind, v in cost.jvm_threads_s.items()},
        }


def _inputs(folder: Path) -> dict[str, Path]:
    inputs = {stream: folder / "in" / stream for stream in STREAMS}
    for path in inputs.values():
        path.mkdir(parents=True, exist_ok=True)
    return inputs


def _running(d: Deployment, query: str) -> bool:
    """Is a pipeline of ``query`` running in the network ``d``?"""
    assert d.runtime is not None
    return any(r.pipeline.query.id == query and r.stream is not None and r.stream.isActive
               for r in d.runtime.running.values())


def run_network(spark: SparkSession, feeder: Feeder, folder: Path
                ) -> tuple[dict[str, dict[str, Any]], tuple[bool | None, dict[str, int] | None]]:
    """The network on, then with CQ2's users revoked, then with CQ2 unregistered. Between the
    first two, CQ2's users are first revoked as of the next file's first minute: once CQ2 has
    emitted rows past that, does its switch stop it by itself? Returned with the processes
    the JVM started while processing that file (:func:`~bench.cost_meter.spawned_processes`).
    Without ``settings.steady_probe``, neither that probe (None, None) nor the phase without CQ2."""
    cat = catalog()
    registered = queries(cat)
    inputs = _inputs(folder)
    trigger = f"{feeder.settings.trigger_ms} milliseconds"
    d = start_network(spark, folder, inputs, cat, registered, trigger=trigger)
    step = feeder.settings.steady_files + 1
    users = next(q for q in registered if q.id == BRANCH).users
    out = {}
    stopped_by_itself = spawned = None
    try:
        out[NETWORK] = feeder.measure(d, inputs, 0)
        server = AuthorizationServer(d.store_url)
        if feeder.settings.steady_probe:
            ahead = START + timedelta(minutes=step * feeder.settings.minutes_per_file)
            for user in users:
                server.revoke(BRANCH, user, ahead)  # rows before it still go to them: keep running
            d.poll()
            # Every row of this file is after the revocation. Meanwhile (a diagnostic, not measured):
            # which processes the JVM starts for one file of the network.
            spawned = spawned_processes(feeder.meter.jvm_pid, lambda: feeder.feed(d, inputs, step))
            stopped_by_itself = not _running(d, BRANCH)
        for user in users:
            server.revoke(BRANCH, user, START)  # a change the runtime sees: its switch stops CQ2 now
        d.poll()
        out[OFF] = feeder.measure(d, inputs, step + 1)
        if feeder.settings.steady_probe:
            server.unregister(BRANCH)
            d.poll()
            out[GONE] = feeder.measure(d, inputs, 2 * step + 1)
    finally:
        d.stop()
    return out, (stopped_by_itself, spawned)


def run_other(spark: SparkSession, feeder: Feeder, config: str, folder: Path) -> dict[str, Any]:
    """``separate`` or ``plain CQn``, started, measured and stopped."""
    cat = catalog()
    registered = queries(cat)
    inputs = _inputs(folder)
    trigger = f"{feeder.settings.trigger_ms} milliseconds"
    if config == SEPARATE:
        d = start_separate(spark, folder, inputs, cat, registered, trigger=trigger)
    else:
        qid = config.split()[-1]
        d = start_plain(folder, {qid: lambda: plain_frame(spark, qid, inputs)}, trigger=trigger)
    try:
        return feeder.measure(d, inputs, 0)
    finally:
        d.stop()


def steady(spark: SparkSession, settings: Any, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Every configuration, ``settings.steady_rounds`` rounds (order reversed every other round); medians."""
    feeder = Feeder(spark, settings)
    others = ([SEPARATE] if settings.steady_separate else []) + [plain_name(q) for q in settings.plain_queries]
    names = [NETWORK, OFF] + ([GONE] if settings.steady_probe else []) + others
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    stops: list[bool] = []
    spawns: list[dict[str, int] | None] = []
    count = 0
    for rnd in range(settings.steady_rounds):
        order: list[str] = [NETWORK] + others  # NETWORK runs its three phases
        for config in reversed(order) if rnd % 2 else order:
            count += 1
            began = time.perf_counter()
            folder = workdir / f"steady-{count:03d}"
            if config == NETWORK:
                measured, (stopped, spawned) = run_network(spark, feeder, folder)
                if stopped is not None:
                    stops.append(stopped)
                    spawns.append(spawned)
            else:
                measured = {config: run_other(spark, feeder, config, folder)}
            for name, values in measured.items():
                runs[name].append(values)
            log(f"  steady state, {config}: " + ", ".join(f"{name} {values['cpu_ms_per_file']:.0f} ms CPU per file"
                                                            for name, values in measured.items())
                + f" ({time.perf_counter() - began:.0f} s)")
    configurations = {name: _median_of(rs) for name, rs in runs.items()}
    return {"trigger_ms": settings.trigger_ms, "files": settings.steady_files, "rounds": settings.steady_rounds,
            "minutes_per_file": settings.minutes_per_file,
            "tuples_per_file": {stream: len(rows) for stream, rows in feeder.file(1).items()},
            "configurations": configurations, "switch_stops_by_itself": all(stops) if stops else None,
            "spawned_per_file": spawns[-1] if spawns else None,
            "rounds_cpu_ms": {n: [r["cpu_ms_per_file"] for r in rs] for n, rs in runs.items()}}


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every number over the rounds (phases: those of the median run by CPU)."""
    middle = sorted(runs, key=lambda r: r["cpu_ms_per_file"])[(len(runs) - 1) // 2]
    out = {key: median([r[key] for r in runs]) for key, value in runs[0].items() if isinstance(value, (int, float))}
    out["phases_ms_per_batch"] = middle["phases_ms_per_batch"]
    out["threads_ms_per_file"] = {kind: median([r["threads_ms_per_file"][kind] for r in runs])
                                  for kind in runs[0]["threads_ms_per_file"]}
    return out


__all__ = ["BRANCH", "GONE", "NETWORK", "OFF", "SEPARATE", "Feeder", "plain_name", "steady"]
