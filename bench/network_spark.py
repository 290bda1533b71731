"""Experiment 6: the shared-network scenario on Spark, one run over a recorded input.

The questions of the simulation (:mod:`bench.network_sim`, Zaki et al. §6) asked of the
engine that runs networks, :class:`streamwarden.runtime.network.NetworkRuntime` (issue
12): every pipeline (one registered query with one plan) compiled once into its own
Spark streaming query, a terminal switch per pipeline delivering each user's rows in one
partitioned write, and a pipeline none of whose users can still receive rows stopped.

Workload (:mod:`bench.network_workload`): the smart-healthcare streams and users of
``streamwarden/demo/network.yaml`` (with a read policy per stream), three registered
queries with two users each: CQ1 (Stream1 ⋈ Stream2), CQ2 (CQ1's join ⋈ Stream3 on
location) and CQ3 (the same prefix ⋈ Stream3 on the device id). Input: ``minutes`` of
seeded readings, one JSON-lines file per stream, written once.

Configurations, each processing that input with ``available_now`` (one micro-batch per
query) into fresh output and checkpoint folders, its queries started together:

* *network*: the runtime, every user granted before the input starts (full access), and
  for each access pattern of ``loss_patterns`` the same with the users of those queries
  granted an hour before the input and revoked at its first timestamp (the paper's
  "queries lose access");
* *separate*: each query as its own ``streamwarden.api.run`` (for its first user);
* *plain*: the same queries written by hand with ``readStream``/``writeStream``, no security.

Warm-up: one run of the network and one of the plain queries (thrown away), when
``warm_up``. Then ``reps`` rounds of every configuration, in an order rotated per round
and reversed every other round; medians. Costs are those of :class:`bench.cost_meter.CostMeter`
(CPU of every process, Spark jobs and tasks, generated classes, JIT). The rows every
(user, query) received are compared across configurations, projected on the query's columns.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.cost_meter import CostMeter
from bench.deployments import NETWORK, PLAIN, SEPARATE, Deployment, start_network, start_plain, start_separate
from bench.levels import OtherWork
from bench.network_sim import PAPER_LOSS_SAVINGS_PCT
from bench.network_workload import (STREAMS, Sizes, catalog, land_all, network_rows, plain_frame, queries, readings,
                                    sink_rows)
from bench.stats import median, ratio
from bench.workdir import scratch_dir

#: Issue 5's target for sharing, kept: the network against one query per query.
TARGET_SHARED_RATIO = 0.5
FULL = "none"  # the access pattern in which no query loses access


@dataclass(frozen=True)
class Settings:
    """Sizes of experiment 6; ``quick`` is the smoke version."""

    minutes: int = 60
    per_minute: int = 60
    stream3_per_minute: int = 10
    locations: int = 40
    devices: int = 60
    seed: int = 2021
    reps: int = 3
    warm_up: bool = True
    loss_patterns: tuple[str, ...] = ("CQ2", "CQ2+CQ3")

    @classmethod
    def quick(cls) -> "Settings":
        return cls(minutes=10, reps=1, warm_up=False, loss_patterns=("CQ2",))

    @property
    def judged(self) -> bool:
        """Whether the run can support performance verdicts: warmed up, at least three rounds."""
        return self.warm_up and self.reps >= 3

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Config:
    """A kind (network, separate, plain) under an access pattern (``none``: full access;
    ``CQ1+CQ2``: those queries' users lose access; network only)."""

    kind: str
    pattern: str = FULL

    @property
    def name(self) -> str:
        return self.kind if self.pattern == FULL else f"{self.kind}, {self.pattern.replace('+', ' & ')} lost"

    @property
    def lost(self) -> set[str]:
        return set() if self.pattern == FULL else set(self.pattern.split("+"))


class Experiment:
    """The input, written once, and one run of any configuration over it."""

    def __init__(self, spark: SparkSession, settings: Settings, workdir: Path, log: Callable[[str], None]):
        self.spark, self.settings, self.workdir, self.log = spark, settings, workdir, log
        self.meter = CostMeter(spark)
        self.catalog = catalog()
        self.queries = queries(self.catalog)
        started = time.perf_counter()
        sizes = Sizes(settings.per_minute, settings.stream3_per_minute, settings.locations, settings.devices,
                      settings.seed)
        data = readings(sizes, 0, settings.minutes)
        self.tuples = {stream: len(rows) for stream, rows in data.items()}
        self.inputs = {stream: workdir / "in" / stream for stream in STREAMS}
        land_all(self.inputs, "part-00000.jsonl", data)
        self.generate_s = time.perf_counter() - started
        self.count = 0

    def start(self, config: Config, folder: Path) -> Deployment:
        if config.kind == NETWORK:
            return start_network(self.spark, folder, self.inputs, self.catalog, self.queries, available_now=True,
                                 lost=sorted(config.lost))
        if config.kind == SEPARATE:
            return start_separate(self.spark, folder, self.inputs, self.catalog, self.queries, available_now=True)
        frames = {q.id: (lambda q=q: plain_frame(self.spark, q.id, self.inputs)) for q in self.queries}
        return start_plain(folder, frames, available_now=True)

    def run(self, config: Config) -> dict[str, Any]:
        """Process the input once in ``config``: its cost, and the rows every target received."""
        self.count += 1
        folder = self.workdir / f"run-{self.count:04d}"
        mark = self.meter.mark()
        d = self.start(config, folder)  # planning and starting count too
        started = len(d.streams)
        d.await_termination()
        cost = self.meter.since(mark)
        rows = {}
        for target, path in d.targets.items():
            qid = target.split("/")[-1]
            rows[target] = (network_rows(path.parent.parent, target.split("/")[0], qid) if d.runtime is not None
                            else sink_rows(path, qid))
        shutil.rmtree(folder, ignore_errors=True)
        return {**cost.as_dict(), "queries_started": started, "rows": rows}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of wall and CPU time; the shares and counters are those of the median run by CPU."""
    middle = sorted(runs, key=lambda r: r["cpu_s"])[(len(runs) - 1) // 2]
    first = runs[0]
    keys = ("jvm_cpu_s", "workers_cpu_s", "driver_cpu_s", "jobs", "tasks", "codegen_compiles", "jit_s",
            "python_workers", "queries_started")
    return {"wall_s": median([r["wall_s"] for r in runs]), "cpu_s": median([r["cpu_s"] for r in runs]),
            **{key: middle[key] for key in keys}, "jvm_threads_s": middle["jvm_threads_s"], "runs": len(runs),
            "wall_s_all": [round(r["wall_s"], 2) for r in runs], "cpu_s_all": [round(r["cpu_s"], 2) for r in runs],
            "delivered": {t: sum(c.values()) for t, c in sorted(first["rows"].items())},
            "stable": all(r["rows"] == first["rows"] for r in runs), "_rows": first["rows"]}


def run(spark: SparkSession, settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every configuration of experiment 6, as plain data for the report and the plot."""
    with scratch_dir("streamwarden-netspark-bench-") as workdir:
        return _run(Experiment(spark, settings, workdir, log))


def _run(x: Experiment) -> dict[str, Any]:
    s = x.settings
    others = OtherWork(os.getpid())
    configs = ([Config(NETWORK)] + [Config(NETWORK, p) for p in s.loss_patterns]
               + [Config(SEPARATE), Config(PLAIN)])
    x.log(f"  input: {', '.join(f'{k} {v:,}' for k, v in x.tuples.items())} tuples "
          f"({x.generate_s:.1f} s to generate); {len(configs)} configurations × {s.reps} rounds")
    started = time.perf_counter()
    if s.warm_up:  # JIT, streaming classes: the first runs in a JVM are several times slower
        for config in (Config(NETWORK), Config(PLAIN)):
            x.run(config)
        x.log(f"  warm-up: {time.perf_counter() - started:.0f} s")
    runs: dict[Config, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(s.reps):
        shift = (rep * len(configs)) // s.reps
        began = time.perf_counter()
        order = configs[shift:] + configs[:shift]
        for config in reversed(order) if rep % 2 else order:
            runs[config].append(x.run(config))
        x.log(f"  round {rep + 1}/{s.reps}: {time.perf_counter() - began:.0f} s")
    measured = {c: _summary(r) for c, r in runs.items()}
    network, separate, plain = (measured[Config(k)] for k in (NETWORK, SEPARATE, PLAIN))
    checks = _checks(x, measured)
    loss = []
    for p in s.loss_patterns:
        m = measured[Config(NETWORK, p)]
        lost = len(Config(NETWORK, p).lost)
        loss.append({"pattern": p, "lost": lost, "cpu_s": m["cpu_s"], "wall_s": m["wall_s"], "jobs": m["jobs"],
                     "queries_started": m["queries_started"],
                     "saved_cpu_pct": 100 * ratio(network["cpu_s"] - m["cpu_s"], network["cpu_s"]),
                     "saved_wall_pct": 100 * ratio(network["wall_s"] - m["wall_s"], network["wall_s"]),
                     "paper_pct": PAPER_LOSS_SAVINGS_PCT.get(lost)})
    for m in measured.values():
        m.pop("_rows")
    result: dict[str, Any] = {
        "settings": s.as_dict(),
        "tuples": x.tuples,
        "queries": [{"id": q.id, "users": list(q.users), "query": " ".join(q.query.split())} for q in x.queries],
        "configurations": [{"kind": c.kind, "pattern": c.pattern, "name": c.name, **m} for c, m in measured.items()],
        "sharing": {"network_cpu_s": network["cpu_s"], "separate_cpu_s": separate["cpu_s"],
                    "plain_cpu_s": plain["cpu_s"], "cpu_ratio": ratio(network["cpu_s"], separate["cpu_s"]),
                    "plain_ratio": ratio(network["cpu_s"], plain["cpu_s"]),
                    "cpu_ratio_rounds": [ratio(a["cpu_s"], b["cpu_s"]) for a, b in
                                         zip(runs[Config(NETWORK)], runs[Config(SEPARATE)])],
                    "wall_ratio": ratio(network["wall_s"], separate["wall_s"])},
        "loss": loss,
        "checks": checks,
        "load_average": others.load_average(),
        "measure_s": round(time.perf_counter() - started, 1),
    }
    x.log(f"  network {network['cpu_s']:.1f} s CPU, separate {separate['cpu_s']:.1f} s, plain {plain['cpu_s']:.1f} s "
          f"(network/separate {result['sharing']['cpu_ratio']:.2f}); checks "
          + ("ok" if all(checks.values()) else "FAILED: " + ", ".join(k for k, v in checks.items() if not v)))
    return result


def _checks(x: Experiment, measured: dict[Config, dict[str, Any]]) -> dict[str, bool]:
    """The rows each user received agree across the kinds of run and the access patterns."""
    network = measured[Config(NETWORK)]["_rows"]
    separate, plain = measured[Config(SEPARATE)]["_rows"], measured[Config(PLAIN)]["_rows"]
    listed = [(u, q.id) for q in x.queries for u in q.users]
    patterns = [c for c in measured if c.kind == NETWORK and c.pattern != FULL]
    return {
        "network_matches_separate": all(network[f"{u}/{q}"] == separate[q] for u, q in listed),
        "separate_matches_plain": all(separate[q.id] == plain[q.id] for q in x.queries),
        "everyone_gets_rows": all(sum(network[f"{u}/{q}"].values()) > 0 for u, q in listed),
        "lost_users_get_nothing": all(measured[c]["_rows"][f"{u}/{q}"] == Counter() for c in patterns
                                      for u, q in listed if q in c.lost),
        "others_keep_their_rows": all(measured[c]["_rows"][f"{u}/{q}"] == network[f"{u}/{q}"] for c in patterns
                                      for u, q in listed if q not in c.lost),
        "stable": all(m["stable"] for m in measured.values()),
    }


__all__ = ["FULL", "TARGET_SHARED_RATIO", "Config", "Experiment", "Settings", "run"]
