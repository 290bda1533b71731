"""Experiment 7, steady state: what each micro-batch of a running network costs.

Each configuration (:data:`CONFIGS`) is a pipeline of :mod:`bench.network_engine` that starts
it with a processing-time trigger and feeds it the smart-healthcare readings file by file
(one file per stream, prepared once): a warm-up file that is not measured, then ``files``
files, each landed, processed by every query (``processAllAvailable``), followed by the
network's ``poll()`` (as ``network run`` does between micro-batches) and a wait until every
query is idle (the no-data micro-batch a stateful query runs after its watermark moved
included). Measured over those files (:class:`~bench.cost_meter.CostMeter`), per file: CPU
of every process, Spark jobs and tasks, micro-batches (Spark's progress reports).

* *network*: the three-query network (CQ1–CQ3, three users), every user granted;
* *network, CQ2 off*: the same, then CQ2's users revoked as of the input's start (the
  runtime stops its pipeline) before the measured files. First, with ``probe``, CQ2's users
  are revoked as of the next file's first minute and that file is processed: does the
  runtime stop CQ2 by itself once CQ2 has emitted rows past the revocation
  (``stops_by_itself``)? Meanwhile the processes the JVM starts are counted
  (:func:`~bench.cost_meter.spawned_processes`, ``spawned: <program>``);
* *network, CQ2 gone*: the same, then CQ2 unregistered (the network without it). The
  branch costs *network − CQ2 gone* when on and *CQ2 off − CQ2 gone* when off;
* *separate*: the same queries as three ``api.run`` side by side;
* *plain CQn*: each query written by hand, alone (the heaviest one is the baseline).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from streamwarden.catalog.authorization import AuthorizationServer

from bench.cost_meter import CostMeter, spawned_processes
from bench.deployments import Deployment, start_network, start_plain, start_separate
from bench.engine_profile import (input_folders, land_prepared, last_batches, median_phases, progress_since,
                                  write_prepared)
from bench.network_workload import START, STREAMS, Sizes, catalog, plain_frame, queries, readings
from bench.stats import ratio

NETWORK, OFF, GONE, SEPARATE = "network", "network, CQ2 off", "network, CQ2 gone", "separate"
BRANCH = "CQ2"  # the pipeline whose users lose access
PLAINS = ("plain CQ1", "plain CQ2", "plain CQ3")
CONFIGS = (NETWORK, OFF, GONE, SEPARATE, *PLAINS)


def prepare(folder: Path, files: int, minutes_per_file: int, sizes: Sizes) -> dict[str, int]:
    """Files ``0 .. files - 1`` of the readings, ``minutes_per_file`` minutes each; the tuples per file."""
    for k in range(files):
        write_prepared(folder, k, readings(sizes, k * minutes_per_file, (k + 1) * minutes_per_file))
    return {stream: len(rows) for stream, rows in readings(sizes, 0, minutes_per_file).items()}


def _running(d: Deployment, query: str) -> bool:
    """Is a pipeline of ``query`` running in the network ``d``?"""
    assert d.runtime is not None
    return any(r.pipeline.query.id == query and r.stream is not None and r.stream.isActive
               for r in d.runtime.running.values())


def _start(spark: SparkSession, config: str, folder: Path, inputs: Mapping[str, Path], trigger: str) -> Deployment:
    cat = catalog()
    if config in (NETWORK, OFF, GONE):
        return start_network(spark, folder, inputs, cat, queries(cat), trigger=trigger)
    if config == SEPARATE:
        return start_separate(spark, folder, inputs, cat, queries(cat), trigger=trigger)
    qid = config.split()[-1]
    return start_plain(folder, {qid: lambda: plain_frame(spark, qid, inputs)}, trigger=trigger)


def steady_call(config: str, prepared: str, *, files: int, trigger_ms: int, minutes_per_file: int,
                probe: bool) -> Callable[[SparkSession, Path, Path], dict[str, float]]:
    """The pipeline of ``config`` over the readings prepared under ``work/prepared``: its cost per
    measured file (see the module)."""
    def call(spark: SparkSession, work: Path, out: Path) -> dict[str, float]:
        meter, inputs, trigger_s = CostMeter(spark), input_folders(out, STREAMS), trigger_ms / 1000
        d = _start(spark, config, out, inputs, f"{trigger_ms} milliseconds")

        def feed(k: int) -> None:
            land_prepared(work / prepared, inputs, k)
            d.process_all_available()
            d.poll()
            d.settle(trigger_s)

        found: dict[str, float] = {}
        try:
            feed(0)  # warm-up: not measured
            first = 1
            if config in (OFF, GONE):
                server = AuthorizationServer(d.store_url)
                users = next(q for q in queries(catalog()) if q.id == BRANCH).users
                if config == OFF and probe:  # every row of file 1 is past this revocation
                    for user in users:
                        server.revoke(BRANCH, user, START + timedelta(minutes=minutes_per_file))
                    d.poll()
                    spawned = spawned_processes(meter.jvm_pid, lambda: feed(1))  # a diagnostic: not measured
                    found = {"stops_by_itself": float(not _running(d, BRANCH)), "spawned": sum(spawned.values()),
                             **{f"spawned: {name}": n for name, n in spawned.items()}}
                    first = 2
                for user in users if config == OFF else ():
                    server.revoke(BRANCH, user, START)  # a change the runtime sees: its switch stops CQ2 now
                if config == GONE:
                    server.unregister(BRANCH)
                d.poll()
            since, mark = last_batches(d), meter.mark()
            for k in range(first, first + files):
                feed(k)
            cost = meter.since(mark)
            reports = progress_since(d, since)
            running = len([s for s in d.streams if s.isActive])
        finally:
            d.stop()
        per_file = {key: value / files for key, value in cost.as_dict().items() if isinstance(value, (int, float))}
        return {
            "cpu_ms_per_file": 1000 * per_file["cpu_s"], "wall_ms_per_file": 1000 * per_file["wall_s"],
            "jvm_ms_per_file": 1000 * per_file["jvm_cpu_s"], "driver_ms_per_file": 1000 * per_file["driver_cpu_s"],
            "workers_ms_per_file": max(1000 * per_file["workers_cpu_s"], 0.0), "jobs_per_file": per_file["jobs"],
            "tasks_per_file": per_file["tasks"], "codegen_per_file": per_file["codegen_compiles"],
            "jit_ms_per_file": 1000 * per_file["jit_s"], "batches_per_file": len(reports) / files,
            "data_batches_per_file": sum(bool(r["numInputRows"]) for r in reports) / files,
            "jobs_per_batch": ratio(cost.jobs, len(reports)), "python_workers": cost.python_workers,
            "queries_running": running, **median_phases(reports),
            **{f"thread ms: {kind}": 1000 * s / files for kind, s in cost.jvm_threads_s.items()}, **found}
    return call


__all__ = ["BRANCH", "CONFIGS", "GONE", "NETWORK", "OFF", "PLAINS", "SEPARATE", "prepare", "steady_call"]
