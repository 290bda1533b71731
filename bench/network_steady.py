"""Experiment 6, steady state: the shared network as it runs, fed file by file.

The one-shot runs of :mod:`bench.network_spark` process the whole input in one
micro-batch of a freshly started streaming query, so most of what they measure is paid
once per run (starting the query, planning, the checkpoint: its input-size diagnostic
shows it). A network is meant to run for long: here each configuration starts once,
takes a first file (not measured: the query's start and its first batch), then takes
``parts - 1`` more files, one micro-batch each, while the CPU of the whole process tree
is measured. The result is CPU milliseconds per micro-batch in steady state, which is
what the switches can save.

Unshared: one streaming query per query, all running at once, each fed the same files;
their CPU is summed (it is the process tree's).

    >>> # steady(x) -> {"configurations": [...], "loss": [...], "sharing": {...}, "overhead": {...}}
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.network_spark import (FULL, POST, SWITCHES, UNSHARED, Config, Experiment, START, _iso, delivered_rows,
                                 lost_queries)
from bench.spark_probe import process_tree_cpu_s
from bench.stats import median, ratio


def _parts(x: Experiment) -> list[dict[str, list[dict]]]:
    """The input split by event time into ``steady_parts`` files per stream."""
    s = x.settings
    step = timedelta(minutes=s.minutes / s.steady_parts)
    bounds = [START + k * step for k in range(s.steady_parts + 1)]
    bounds[-1] = START + timedelta(days=1)
    iso = [_iso(b) for b in bounds]
    return [{stream: [r for r in rows if iso[k] <= r["ts"] < iso[k + 1]] for stream, rows in x.data.items()}
            for k in range(s.steady_parts)]


def _feed(folder: Path, part: int, data: dict[str, list[dict]]) -> None:
    for stream, rows in data.items():
        (folder / stream).mkdir(parents=True, exist_ok=True)
        staged = folder / stream / f".part-{part:05d}.jsonl"  # the file source skips hidden files
        staged.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(staged, folder / stream / f"part-{part:05d}.jsonl")


def run_steady(x: Experiment, config: Config, parts: list[dict[str, list[dict]]]) -> dict[str, Any]:
    """One configuration, started once and fed file by file; CPU per micro-batch after the first."""
    folder, groups = x.prepare(config, "steady")
    networks, streams = [], []
    inputs = folder / "in"
    try:
        for i, group in enumerate(groups):
            sub = folder / f"net-{i}"
            network = x.network(group, config, sub)
            network.inputs = {stream: str(inputs / stream) for stream in parts[0]}
            networks.append(network)
            streams.append(network.start(trigger="100 milliseconds", name=f"steady {x.count} net {i}"))
        _feed(inputs, 0, parts[0])
        for stream in streams:
            stream.processAllAvailable()  # the query's start and first batch: not measured
        mark = x.counters.mark()
        cpu0, start = process_tree_cpu_s(os.getpid()), time.perf_counter()
        for k in range(1, len(parts)):
            _feed(inputs, k, parts[k])
            for stream in streams:
                stream.processAllAvailable()
        cpu, wall = process_tree_cpu_s(os.getpid()) - cpu0, time.perf_counter() - start
        jvm = x.counters.since(mark)
    finally:
        for stream in streams:
            stream.stop()
    delivered: dict[str, int] = {}
    for i in range(len(groups)):
        delivered.update(delivered_rows(folder / f"net-{i}" / "out"))
    counters = {f"{g[0].id}:{v}" if len(groups) > 1 else v: n for g, net in zip(groups, networks)
                for v, n in net.counters.items()}
    shutil.rmtree(folder, ignore_errors=True)
    batches = len(parts) - 1
    return {"cpu_ms_per_batch": 1000 * cpu / batches, "wall_ms_per_batch": 1000 * wall / batches,
            "jobs_per_batch": jvm["jobs"] / batches, "tasks_per_batch": jvm["tasks"] / batches,
            "delivered": dict(sorted(delivered.items())),
            "vertices_ran": sorted(v for v, n in counters.items() if n)}


def steady(x: Experiment, patterns: list[str]) -> dict[str, Any]:
    """Every configuration in steady state, ``steady_reps`` rounds (order reversed every other round)."""
    s = x.settings
    parts = _parts(x)
    configs = [Config(kind, p) for p in [FULL] + patterns for kind in (SWITCHES, POST)] + [Config(UNSHARED)]
    runs: dict[Config, list[dict[str, Any]]] = {c: [] for c in configs}
    run_steady(x, Config(SWITCHES), parts)  # warm-up
    for rep in range(s.steady_reps):
        began = time.perf_counter()
        for config in reversed(configs) if rep % 2 else configs:
            runs[config].append(run_steady(x, config, parts))
        x.log(f"  steady state, round {rep + 1}/{s.steady_reps}: {time.perf_counter() - began:.0f} s")

    def get(kind: str, pattern: str = FULL, key: str = "cpu_ms_per_batch") -> float:
        return median([r[key] for r in runs[Config(kind, pattern)]])

    def saved(pattern: str) -> float:
        return 100 * ratio(get(POST, pattern) - get(SWITCHES, pattern), get(POST, pattern))

    paired = [100 * ratio(a["cpu_ms_per_batch"] - b["cpu_ms_per_batch"], b["cpu_ms_per_batch"])
              for a, b in zip(runs[Config(SWITCHES)], runs[Config(POST)])]
    result = {
        "parts": s.steady_parts, "reps": s.steady_reps,
        "tuples_per_batch": {stream: round(sum(len(p[stream]) for p in parts[1:]) / (len(parts) - 1))
                             for stream in parts[0]},
        "configurations": [{"kind": c.kind, "pattern": c.pattern,
                            **{k: median([r[k] for r in rs]) for k in ("cpu_ms_per_batch", "wall_ms_per_batch",
                                                                      "jobs_per_batch", "tasks_per_batch")},
                            "cpu_ms_all": [round(r["cpu_ms_per_batch"], 1) for r in rs]}
                           for c, rs in runs.items()],
        "overhead": {"cpu_pct_paired": median(paired), "cpu_pct_rounds": paired},
        "loss": [{"pattern": p, "lost": len(lost_queries(p)), "switches_cpu_ms": get(SWITCHES, p),
                  "post_cpu_ms": get(POST, p), "saved_cpu_pct": saved(p),
                  "switches_jobs": get(SWITCHES, p, "jobs_per_batch"), "post_jobs": get(POST, p, "jobs_per_batch")}
                 for p in patterns],
        "sharing": {"shared_cpu_ms": get(SWITCHES), "unshared_cpu_ms": get(UNSHARED),
                    "cpu_ratio": ratio(get(SWITCHES), get(UNSHARED)),
                    "shared_jobs": get(SWITCHES, FULL, "jobs_per_batch"),
                    "unshared_jobs": get(UNSHARED, FULL, "jobs_per_batch")},
        "same_rows": all(r["delivered"] == runs[Config(POST, c.pattern)][0]["delivered"]
                         for c, rs in runs.items() if c.kind == SWITCHES for r in rs)
                     and all(r["delivered"] == runs[Config(SWITCHES)][0]["delivered"] for r in runs[Config(UNSHARED)]),
        "switched_off_operators_did_not_run": all(
            not set(x.placed.shut_off(lost_queries(p))) & set(r["vertices_ran"])
            for p in patterns for r in runs[Config(SWITCHES, p)]),
    }
    x.log(f"  steady state: {get(SWITCHES):.0f} ms CPU per batch with switches, {get(POST):.0f} post-filtering, "
          f"{get(UNSHARED):.0f} unshared")
    return result


__all__ = ["run_steady", "steady"]
