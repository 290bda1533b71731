"""Experiment 6: shared operator networks with privacy switches, measured on Spark (issue 5).

The same questions as the simulation (:mod:`bench.network_sim`, Zaki et al. §6), asked
of the engine: :class:`streamwarden.network.spark_runner.SharedNetworkRun` runs the
whole network as one Spark streaming query.

Network: the smart-healthcare streams of ``streamwarden/demo/network.yaml`` and three
registered queries with two users each: the paper's CQ1 (Stream1 ⋈ Stream2) and CQ2
(CQ1's join ⋈ Stream3 on location), and CQ3, which shares CQ1's selections and join
and joins Stream3 on the device id. The common prefix is the selections and the join
of Stream1 and Stream2; each query then has its own branch (CQ1 a projection, CQ2 and
CQ3 a selection of Stream3, a join and a projection). Input: a seeded, larger version
of the demo's readings (:func:`readings`), written once as JSON lines, one file per stream.

Configurations, each processing the same input files with ``available_now=True`` (one
micro-batch here) into fresh output, checkpoint and authorization-store folders:

* *switches*: the shared network with privacy switches (``switches=True``);
* *post-filtering*: the same network with ``switches=False`` (every branch runs, each
  user's rows are filtered at the output), the paper's "shared, no PrSs";
* each under every access pattern: full access (every user granted before the input
  starts), and every set of queries losing access (each user of those queries granted
  an hour before the input and revoked at its first timestamp: the paper's "queries
  lose access"; with a revocation the post-filter still evaluates the branch and
  delivers nothing, as post-filtering does);
* *unshared*: one ``SharedNetworkRun`` per query (a network of that query alone, full
  access), run one after the other; wall and CPU summed;
* *post-filtering, never granted* (a diagnostic, for ``diagnostic_patterns``, one run after
  the rounds): the lost queries' users never had a grant at all. The runner then skips
  their outputs, and Spark's lazy evaluation skips the branch with them, except what
  join state forces.

A warm-up runs each kind of shared network three times first (results thrown away). Then
``reps`` rounds of every configuration, in an order rotated per round and reversed every
other round (so each pair compared runs as often in both orders); medians are kept.
After the rounds, the input-size diagnostic runs the shared network (switches, full
access) over the first ``small_minutes`` of the input and over all of it, alternately:
the difference says how much of a run grows with the input.

A second part (:mod:`bench.network_steady`) measures the same configurations in steady
state: each started once and fed the input file by file, CPU per micro-batch.

CPU time is that of the whole process tree of this Python process: the Spark JVM
(driver and executor threads, JIT, GC), its Python workers and this driver process
(planning and ``foreachBatch``); each of the three shares is kept too, and per run the
Spark jobs and tasks, the classes Spark's code generation compiled and HotSpot's JIT
time (:class:`JvmCounters`). The machine is shared: the CPU the rest of it used
meanwhile is recorded. Rows delivered per (user, query) are counted from the output
files, so the configurations can be checked against one another.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from importlib import resources
from itertools import combinations
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.store import sqlite_url
from streamwarden.network.authorization import AuthorizationServer
from streamwarden.network.registry import RegisteredQuery, load_queries_text
from streamwarden.network.spark_runner import SharedNetworkRun
from streamwarden.network.optimizer import shared_network
from streamwarden.network.switches import SwitchKind, place_switches

from bench.levels import OtherWork, SparkJobs, driver_cpu_s
from bench.network_sim import PAPER_LOSS_SAVINGS_PCT, PAPER_SWITCH_OVERHEAD_PCT
from bench.spark_probe import process_tree_cpu_s
from bench.stats import median, ratio
from bench.workdir import scratch_dir

#: Issue 5's targets.
TARGET_OVERHEAD_PCT = 1.0  # switches with full access, against post-filtering
TARGET_SHARED_RATIO = 0.5  # shared network CPU / one Spark query per query
START = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
WINDOW = "[RANGE 5 min SLIDE 1 min]"
QUERIES_TEXT = f"""
queries:
  - id: CQ1
    users: [dr_lee, nurse_kim]
    query: >-
      SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {WINDOW}, Stream2 AS s2 {WINDOW}
      WHERE s1.location = s2.location AND s1.ts > 6:00am AND s1.ts < 7:00pm AND s2.speed < 30
  - id: CQ2
    users: [dr_lee, wellness_app]
    query: >-
      SELECT s1.streamid, s1.heartRate, s3.screentime FROM Stream1 AS s1 {WINDOW},
      Stream2 AS s2 {WINDOW}, Stream3 AS s3 {WINDOW}
      WHERE s1.location = s2.location AND s2.location = s3.location AND s1.ts > 6:00am AND s1.ts < 7:00pm
      AND s2.speed < 30 AND s3.screentime > 5
  - id: CQ3
    users: [nurse_kim, wellness_app]
    query: >-
      SELECT s1.streamid, s2.speed, s3.category FROM Stream1 AS s1 {WINDOW},
      Stream2 AS s2 {WINDOW}, Stream3 AS s3 {WINDOW}
      WHERE s1.location = s2.location AND s1.streamid = s3.streamid AND s1.ts > 6:00am AND s1.ts < 7:00pm
      AND s2.speed < 30 AND s3.category = "social"
"""
SWITCHES, POST, UNSHARED, NEVER = "switches", "post-filtering", "unshared", "post-filtering, never granted"
GUARDED = "switches, prefix guarded"  # beyond Algorithm 2: SharedNetworkRun(guard_prefix=True)
FULL = "none"  # the access pattern in which no query loses access


@dataclass(frozen=True)
class Settings:
    """Sizes of experiment 6; ``quick`` is the smoke version.

    ``per_minute`` tuples a minute in Stream1 and Stream2 each, ``stream3_per_minute`` in
    Stream3; ``locations`` and ``devices`` set how many tuples each join pairs (see
    :func:`readings`).
    """

    minutes: int = 60
    per_minute: int = 60
    stream3_per_minute: int = 10
    locations: int = 40
    devices: int = 60
    seed: int = 2021
    reps: int = 6  # even: with the order reversed every other round, each pair runs as often in both orders
    warm_up: bool = True
    loss_patterns: tuple[str, ...] | None = None  # None: every set of queries (see :func:`patterns`)
    diagnostic_patterns: tuple[str, ...] = ("CQ2+CQ3",)
    small_minutes: int = 15  # the input-size diagnostic: this many minutes against ``minutes`` (0: off)
    small_reps: int = 3
    steady_parts: int = 6  # steady state (bench.network_steady): the input in this many files, one batch each (0: off)
    steady_reps: int = 2

    @classmethod
    def quick(cls) -> "Settings":
        return cls(minutes=10, reps=1, warm_up=False, loss_patterns=("CQ2", "CQ2+CQ3"), diagnostic_patterns=(),
                   small_minutes=0, steady_parts=3, steady_reps=1)

    @property
    def judged(self) -> bool:
        """Whether the run can support performance verdicts: warmed up, at least three rounds."""
        return self.warm_up and self.reps >= 3

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# -- workload ---------------------------------------------------------------------------------
def network_catalog() -> Catalog:
    """The demo's smart-healthcare catalog (three streams, three users)."""
    return load_catalog_text(resources.files("streamwarden.demo").joinpath("network.yaml").read_text(),
                             "streamwarden/demo/network.yaml")


def network_queries(catalog: Catalog) -> tuple[RegisteredQuery, ...]:
    return load_queries_text(QUERIES_TEXT, catalog, "<bench network_spark queries>")


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def readings(settings: Settings, minutes: int | None = None) -> dict[str, list[dict]]:
    """Seeded readings of the three streams, ``minutes`` (default ``settings.minutes``) long
    from :data:`START` (the demo's generator, larger): Stream1 and Stream2 ``per_minute`` tuples a minute each, Stream3
    ``stream3_per_minute``; locations and device ids uniform, so the join of Stream1 and
    Stream2 pairs each Stream1 tuple with ~per_minute·10·½ / locations Stream2 tuples
    (±5 minutes, speed < 30), CQ2's join each of those with ~stream3_per_minute·10·0.44 /
    locations Stream3 tuples, and CQ3's with ~stream3_per_minute·10·½ / devices."""
    s = settings
    rng = random.Random(s.seed)
    places = [f"place-{i:02d}" for i in range(s.locations)]
    out: dict[str, list[dict]] = {"Stream1": [], "Stream2": [], "Stream3": []}
    for minute in range(s.minutes if minutes is None else minutes):
        for k in range(s.per_minute):
            ts = _iso(START + timedelta(minutes=minute, seconds=60 * k / s.per_minute))
            out["Stream1"].append({"ts": ts, "streamid": rng.randrange(s.devices), "location": rng.choice(places),
                                   "heartRate": rng.randint(55, 140)})
            out["Stream2"].append({"ts": ts, "streamid": rng.randrange(s.devices), "location": rng.choice(places),
                                   "speed": round(rng.uniform(0, 60), 1)})
        for k in range(s.stream3_per_minute):
            ts = _iso(START + timedelta(minutes=minute, seconds=60 * k / s.stream3_per_minute))
            out["Stream3"].append({"ts": ts, "streamid": rng.randrange(s.devices), "location": rng.choice(places),
                                   "screentime": round(rng.uniform(0, 9), 1),
                                   "category": rng.choice(["social", "work"])})
    return out


def write_inputs(folder: Path, data: dict[str, list[dict]]) -> dict[str, str]:
    inputs = {}
    for stream, rows in data.items():
        (folder / stream).mkdir(parents=True, exist_ok=True)
        (folder / stream / "part-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        inputs[stream] = str(folder / stream)
    return inputs


def patterns(queries: Sequence[str]) -> list[str]:
    """Every access pattern: ``none`` (full access), then each set of queries losing access."""
    return [FULL] + ["+".join(c) for k in range(1, len(queries) + 1) for c in combinations(queries, k)]


def lost_queries(pattern: str) -> set[str]:
    return set() if pattern == FULL else set(pattern.split("+"))


def grant_access(store_url: str, queries: Iterable[RegisteredQuery], lost: set[str], *, revoke: bool = True) -> None:
    """Every user granted an hour before the input starts; the users of ``lost`` queries
    revoked at its first timestamp (``revoke``) or never granted (not ``revoke``)."""
    server = AuthorizationServer(store_url)
    for q in queries:
        for user in q.users:
            if q.id in lost and not revoke:
                continue
            server.grant(q.id, user, START - timedelta(hours=1))
            if q.id in lost:
                server.revoke(q.id, user, START)


# -- measuring --------------------------------------------------------------------------------
def delivered_rows(output: Path) -> dict[str, int]:
    """Rows written per ``user/query`` (JSON lines under ``user/query/batch=N/``); empty
    outputs (a post-filter that delivered nothing) are left out."""
    counts: dict[str, int] = {}
    for part in sorted(output.glob("*/*/batch=*/part-*.json")):
        key = f"{part.parent.parent.parent.name}/{part.parent.parent.name}"
        with part.open("rb") as handle:
            counts[key] = counts.get(key, 0) + sum(1 for line in handle if line.strip())
    return {k: v for k, v in sorted(counts.items()) if v}


@dataclass(frozen=True)
class Config:
    """One configuration: ``kind`` (switches, post-filtering, unshared, never granted) and
    the access pattern (``none``: full access; ``CQ1+CQ2``: those queries lose access)."""

    kind: str
    pattern: str = FULL
    data: str = "full"  # which input: "full", or "small" (the input-size diagnostic)

    @property
    def name(self) -> str:
        return f"{self.kind} | {self.pattern}" + ("" if self.data == "full" else f" | {self.data} input")


def own_cpu_s(pid: int) -> float:
    """CPU time (user + system, seconds) of process ``pid`` alone, with its waited-for children
    (the JVM without its live Python workers, which :func:`process_tree_cpu_s` adds)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class JvmCounters:
    """JVM-wide counters read around a run: Spark jobs and tasks (the status store), classes
    Spark's whole-stage code generation compiled (Janino), and HotSpot's JIT time."""

    def __init__(self, spark: SparkSession):
        jvm = spark._jvm  # type: ignore[attr-defined]
        self.jobs = SparkJobs(spark)
        self.codegen = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        self.jit = jvm.java.lang.management.ManagementFactory.getCompilationMXBean()

    def mark(self) -> tuple[int, int, int]:
        return self.jobs.mark(), int(self.codegen.getCount()), int(self.jit.getTotalCompilationTime())

    def since(self, mark: tuple[int, int, int]) -> dict[str, float]:
        jobs, tasks = self.jobs.since(mark[0])
        return {"jobs": jobs, "tasks": tasks, "codegen_compiles": int(self.codegen.getCount()) - mark[1],
                "jit_s": (int(self.jit.getTotalCompilationTime()) - mark[2]) / 1000}


class Experiment:
    def __init__(self, spark: SparkSession, settings: Settings, workdir: Path, log: Callable[[str], None]):
        self.spark, self.settings, self.workdir, self.log = spark, settings, workdir, log
        self.jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
        self.counters = JvmCounters(spark)
        self.catalog = network_catalog()
        self.queries = network_queries(self.catalog)
        self.placed = place_switches(shared_network(self.catalog, self.queries).network)  # Algorithm 2
        started = time.perf_counter()
        self.data = readings(settings)  # kept for the steady state (bench.network_steady), which splits it
        self.tuples = {stream: len(rows) for stream, rows in self.data.items()}
        self.inputs = {"full": write_inputs(workdir / "in", self.data)}
        if settings.small_minutes:
            small = readings(settings, settings.small_minutes)
            self.inputs["small"] = write_inputs(workdir / "in-small", small)
            self.small_tuples = {stream: len(rows) for stream, rows in small.items()}
        self.generate_s = time.perf_counter() - started
        self.count = 0

    def network(self, queries: Sequence[RegisteredQuery], config: Config, folder: Path) -> SharedNetworkRun:
        return SharedNetworkRun(self.spark, self.catalog, queries, self.inputs[config.data], folder / "out",
                                sqlite_url(folder / "auth.db"), folder / "cp",
                                switches=config.kind in (SWITCHES, UNSHARED, GUARDED),
                                guard_prefix=config.kind == GUARDED)

    def prepare(self, config: Config, prefix: str) -> tuple[Path, list[list[RegisteredQuery]]]:
        """A new folder ``prefix-NNNN`` for a run of ``config`` and the query groups it runs as
        networks (one per query when unshared), each with its folder ``net-i`` and access log."""
        self.count += 1
        folder = self.workdir / f"{prefix}-{self.count:04d}"
        groups = [[q] for q in self.queries] if config.kind == UNSHARED else [list(self.queries)]
        for i, group in enumerate(groups):  # the access log: written before the clock starts
            (folder / f"net-{i}").mkdir(parents=True)
            grant_access(sqlite_url(folder / f"net-{i}" / "auth.db"), group, lost_queries(config.pattern),
                         revoke=config.kind != NEVER)
        return folder, groups

    def run(self, config: Config) -> dict[str, Any]:
        """Process the input once in ``config``: wall and CPU time, what ran, what was delivered.
        Unshared: one network per query, one after the other, summed."""
        folder, groups = self.prepare(config, "run")
        totals = {"wall_s": 0.0, "cpu_s": 0.0, "jvm_cpu_s": 0.0, "workers_cpu_s": 0.0, "driver_cpu_s": 0.0}
        counters: dict[str, int] = {}
        delivered: dict[str, int] = {}
        mark = self.counters.mark()
        for i, group in enumerate(groups):
            sub = folder / f"net-{i}"
            cpu0, driver0 = process_tree_cpu_s(os.getpid()), driver_cpu_s()
            jvm0, tree0 = own_cpu_s(self.jvm_pid), process_tree_cpu_s(self.jvm_pid)
            start = time.perf_counter()
            network = self.network(group, config, sub)  # planning and placing switches count too
            network.start(available_now=True).awaitTermination()
            totals["wall_s"] += time.perf_counter() - start
            totals["cpu_s"] += process_tree_cpu_s(os.getpid()) - cpu0
            jvm, tree = own_cpu_s(self.jvm_pid) - jvm0, process_tree_cpu_s(self.jvm_pid) - tree0
            totals["jvm_cpu_s"] += jvm
            totals["workers_cpu_s"] += tree - jvm
            totals["driver_cpu_s"] += driver_cpu_s() - driver0
            for vid, n in network.counters.items():
                counters[f"{group[0].id}:{vid}" if len(groups) > 1 else vid] = n
            delivered.update(delivered_rows(sub / "out"))
        shutil.rmtree(folder, ignore_errors=True)
        return {**totals, **self.counters.since(mark), "counters": dict(sorted(counters.items())),
                "delivered": dict(sorted(delivered.items()))}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of wall and CPU time; the CPU shares (JVM, Python workers, driver) and the JVM
    counters are those of the median run by CPU, so the shares add up to its CPU time."""
    first = runs[0]
    middle = sorted(runs, key=lambda r: r["cpu_s"])[(len(runs) - 1) // 2]
    keys = ("jvm_cpu_s", "workers_cpu_s", "driver_cpu_s", "jobs", "tasks", "codegen_compiles", "jit_s")
    return {
        "wall_s": median([r["wall_s"] for r in runs]), "cpu_s": median([r["cpu_s"] for r in runs]),
        **{key: middle[key] for key in keys},
        "runs": len(runs), "wall_s_all": [round(r["wall_s"], 3) for r in runs],
        "cpu_s_all": [round(r["cpu_s"], 3) for r in runs],
        "vertices_ran": sorted(v for v, n in first["counters"].items() if n),
        "delivered": first["delivered"], "rows": sum(first["delivered"].values()),
        "stable": all(r["delivered"] == first["delivered"] for r in runs),
    }


def _pct_saved(base: float, value: float) -> float:
    return 100 * ratio(base - value, base)


def run(spark: SparkSession, settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every configuration of experiment 6, as plain data for the report and the plot."""
    with scratch_dir("streamwarden-netspark-bench-") as workdir:
        return _run(Experiment(spark, settings, workdir, log))


def _run(x: Experiment) -> dict[str, Any]:
    s = x.settings
    others = OtherWork(os.getpid())
    ids = [q.id for q in x.queries]
    loss_patterns = list(s.loss_patterns) if s.loss_patterns is not None else patterns(ids)[1:]
    all_patterns = [FULL] + loss_patterns
    configs = [Config(kind, p) for p in all_patterns for kind in (SWITCHES, POST)] + [Config(UNSHARED)]
    everyone = next((p for p in loss_patterns if len(lost_queries(p)) == len(ids)), None)
    guarded_patterns = [FULL] + ([everyone] if everyone else [])
    configs += [Config(GUARDED, p) for p in guarded_patterns]
    x.log(f"  input: {', '.join(f'{k} {v:,}' for k, v in x.tuples.items())} tuples "
          f"({x.generate_s:.1f} s to generate); {len(configs)} configurations × {s.reps} rounds")
    started = time.perf_counter()
    if s.warm_up:  # JIT, streaming classes: the first runs in a JVM are several times slower
        for config in (Config(SWITCHES), Config(POST)) * 3:
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
    for p in s.diagnostic_patterns:  # a diagnostic: one run after the rounds
        runs[Config(NEVER, p)] = [x.run(Config(NEVER, p))]
    small, large = Config(SWITCHES, FULL, "small"), Config(SWITCHES, FULL, "full")
    scale_runs: dict[Config, list[dict[str, Any]]] = {small: [], large: []}
    for _ in range(s.small_reps if s.small_minutes else 0):  # the input-size diagnostic, after the rounds
        for config in (small, large):
            scale_runs[config].append(x.run(config))
    measured = {c: _summary(r) for c, r in runs.items()}

    def get(kind: str, pattern: str = FULL) -> dict[str, Any]:
        return measured[Config(kind, pattern)]

    def paired(a: Config, b: Config, key: str = "cpu_s") -> list[float]:
        """(a − b) / b in % per round: both ran in the same round, under the same load."""
        return [100 * ratio(ra[key] - rb[key], rb[key]) for ra, rb in zip(runs[a], runs[b])]

    loss = []
    for p in loss_patterns:
        sw, pf = get(SWITCHES, p), get(POST, p)
        loss.append({
            "pattern": p, "lost": len(lost_queries(p)),
            "switches_cpu_s": sw["cpu_s"], "post_cpu_s": pf["cpu_s"],
            "switches_wall_s": sw["wall_s"], "post_wall_s": pf["wall_s"],
            "saved_cpu_pct": _pct_saved(pf["cpu_s"], sw["cpu_s"]),
            "saved_wall_pct": _pct_saved(pf["wall_s"], sw["wall_s"]),
            "saved_cpu_pct_rounds": [-v for v in paired(Config(SWITCHES, p), Config(POST, p))],
            "saved_vs_full_cpu_pct": _pct_saved(get(POST)["cpu_s"], sw["cpu_s"]),
            "shut_off": sorted(x.placed.shut_off(lost_queries(p))),
            "switches_jobs": sw["jobs"], "post_jobs": pf["jobs"],
        })
        x.log(f"  {p} lost: switches {sw['cpu_s']:.2f} s CPU, post-filtering {pf['cpu_s']:.2f} s "
              f"(saved {loss[-1]['saved_cpu_pct']:.1f} %)")
    sw_full, pf_full, unshared = get(SWITCHES), get(POST), get(UNSHARED)
    overhead = {key: paired(Config(SWITCHES), Config(POST), key) for key in ("cpu_s", "wall_s")}
    listed = [f"{u}/{q.id}" for q in x.queries for u in q.users]
    checks = {
        "switches_match_post_filtering": all(get(SWITCHES, p)["delivered"] == get(POST, p)["delivered"]
                                             for p in all_patterns),
        "unshared_matches_shared": unshared["delivered"] == sw_full["delivered"],
        "lost_users_get_nothing": all(
            not get(kind, p)["delivered"].get(f"{u}/{q.id}") for kind in (SWITCHES, POST)
            for p in all_patterns for q in x.queries if q.id in lost_queries(p) for u in q.users),
        "others_keep_their_rows": all(
            get(SWITCHES, p)["delivered"].get(key) == sw_full["delivered"].get(key)
            for p in all_patterns for key in listed if key.split("/")[1] not in lost_queries(p)),
        "full_access_delivers_to_everyone": all(sw_full["delivered"].get(k, 0) > 0 for k in listed),
        "switched_off_operators_did_not_run": all(
            not set(x.placed.shut_off(lost_queries(p))) & set(get(SWITCHES, p)["vertices_ran"])
            for p in loss_patterns),
        "stable": all(m["stable"] for m in measured.values()),
        "prefix_guard_changes_no_row": all(get(GUARDED, p)["delivered"] == get(SWITCHES, p)["delivered"]
                                           for p in guarded_patterns),
    }
    result: dict[str, Any] = {
        "settings": s.as_dict(),
        "tuples": x.tuples,
        "network": network_summary(x),
        "configurations": [{"kind": c.kind, "pattern": c.pattern, **m} for c, m in measured.items()],
        "overhead": {
            "cpu_pct": -_pct_saved(pf_full["cpu_s"], sw_full["cpu_s"]),
            "wall_pct": -_pct_saved(pf_full["wall_s"], sw_full["wall_s"]),
            "cpu_pct_paired": median(overhead["cpu_s"]), "wall_pct_paired": median(overhead["wall_s"]),
            "cpu_pct_rounds": overhead["cpu_s"], "wall_pct_rounds": overhead["wall_s"],
            "driver_cpu_s": {"switches": sw_full["driver_cpu_s"], "post": pf_full["driver_cpu_s"]},
            "jobs": {"switches": sw_full["jobs"], "post": pf_full["jobs"]},
            "tasks": {"switches": sw_full["tasks"], "post": pf_full["tasks"]},
        },
        "loss": loss,
        "sharing": {
            "shared_cpu_s": sw_full["cpu_s"], "post_cpu_s": pf_full["cpu_s"], "unshared_cpu_s": unshared["cpu_s"],
            "shared_wall_s": sw_full["wall_s"], "unshared_wall_s": unshared["wall_s"],
            "cpu_ratio": ratio(sw_full["cpu_s"], unshared["cpu_s"]),
            "cpu_ratio_rounds": [ratio(a["cpu_s"], b["cpu_s"]) for a, b in zip(runs[Config(SWITCHES)],
                                                                              runs[Config(UNSHARED)])],
            "wall_ratio": ratio(sw_full["wall_s"], unshared["wall_s"]),
            "post_cpu_ratio": ratio(pf_full["cpu_s"], unshared["cpu_s"]),
            "shared_jobs": sw_full["jobs"], "unshared_jobs": unshared["jobs"],
            "shared_workers_cpu_s": sw_full["workers_cpu_s"], "unshared_workers_cpu_s": unshared["workers_cpu_s"],
            "shared_codegen_compiles": sw_full["codegen_compiles"],
            "unshared_codegen_compiles": unshared["codegen_compiles"],
        },
        "never_granted": [
            {"pattern": p, "cpu_s": get(NEVER, p)["cpu_s"], "wall_s": get(NEVER, p)["wall_s"],
             "jobs": get(NEVER, p)["jobs"], "post_cpu_s": get(POST, p)["cpu_s"], "post_jobs": get(POST, p)["jobs"],
             "switches_cpu_s": get(SWITCHES, p)["cpu_s"],
             "saved_cpu_pct": _pct_saved(get(NEVER, p)["cpu_s"], get(SWITCHES, p)["cpu_s"]),
             "same_rows": get(NEVER, p)["delivered"] == get(POST, p)["delivered"]}
            for p in s.diagnostic_patterns],
        "guarded": [
            {"pattern": p, "cpu_s": get(GUARDED, p)["cpu_s"], "wall_s": get(GUARDED, p)["wall_s"],
             "jobs": get(GUARDED, p)["jobs"], "switches_cpu_s": get(SWITCHES, p)["cpu_s"],
             "switches_jobs": get(SWITCHES, p)["jobs"], "post_cpu_s": get(POST, p)["cpu_s"],
             "saved_cpu_pct": _pct_saved(get(POST, p)["cpu_s"], get(GUARDED, p)["cpu_s"]),
             "operators_run": len([v for v in get(GUARDED, p)["vertices_ran"] if v.startswith("v")])}
            for p in guarded_patterns],
        "checks": checks,
        "paper": {"switch_overhead_pct": PAPER_SWITCH_OVERHEAD_PCT,
                  "loss_savings_pct": {str(k): v for k, v in PAPER_LOSS_SAVINGS_PCT.items()}},
        "load_average": others.load_average(),
        "measure_s": round(time.perf_counter() - started, 1),
    }
    if s.small_minutes:
        a, b = _summary(scale_runs[small]), _summary(scale_runs[large])
        # cost(m) = fixed + per_minute · m through the two medians: what a run costs whatever its input
        per_minute = ratio(b["cpu_s"] - a["cpu_s"], s.minutes - s.small_minutes)
        fixed = b["cpu_s"] - per_minute * s.minutes
        result["scale"] = {
            "small_minutes": s.small_minutes, "minutes": s.minutes, "small_tuples": x.small_tuples,
            "small_cpu_s": a["cpu_s"], "cpu_s": b["cpu_s"], "small_wall_s": a["wall_s"], "wall_s": b["wall_s"],
            "small_cpu_s_all": a["cpu_s_all"], "cpu_s_all": b["cpu_s_all"], "small_rows": a["rows"], "rows": b["rows"],
            "fixed_cpu_s": fixed, "fixed_share": ratio(fixed, b["cpu_s"]), "jobs": b["jobs"],
        }
    if s.steady_parts:
        from bench.network_steady import steady

        result["steady"] = steady(x, loss_patterns)
    x.log(f"  full access: switches {sw_full['cpu_s']:.2f} s CPU, post-filtering {pf_full['cpu_s']:.2f} s "
          f"({result['overhead']['cpu_pct_paired']:+.2f} % paired); unshared {unshared['cpu_s']:.2f} s "
          f"(shared/unshared {result['sharing']['cpu_ratio']:.2f}); checks "
          + ("ok" if all(checks.values()) else "FAILED: " + ", ".join(k for k, v in checks.items() if not v)))
    return result


def network_summary(x: Experiment) -> dict[str, Any]:
    """The network's operators (id, label, queries served, common prefix) and switches."""
    placed = x.placed
    net = placed.network
    return {
        "queries": [{"id": q.id, "users": list(q.users), "query": " ".join(q.query.split())} for q in x.queries],
        "operators": [{"id": v.id, "label": v.label, "queries": sorted(v.queries),
                       "common_prefix": v.id in net.common_prefix}
                      for v in (net.vertex(vid) for vid in net.topological_order()) if v.inputs],
        "switches": [sw.id for sw in placed.switches],
        "switch_counts": {k.value: placed.count(k) for k in SwitchKind},
    }
