"""Experiment 3: security punctuations on Spark (Nehme et al. §6, Figs. 13-16).

* Fig. 13 — overhead of the Security Shield per 1,000 tuples: (a) against the SP ratio
  (tuples per policy), (b) against the role count (the user's roles; every SP names as
  many). Query ``SELECT oid, speed, x, y FROM Objects``; the shield filters ~50 %.
* Fig. 14 — shield pushed down (right above the stream) or up (above ``speed > X``),
  for 10 and 100 roles, X set for the target selectivity.
* Fig. 15 — the same query with and without the shield.
* Fig. 16 — SCJoin of A and B on ``dest`` with windows of ~100 tuples each:
  probe-and-filter, filter-and-probe and adaptive against (a) the SP ratio, (b) the
  policy similarity of the two streams, (c) the join selectivity.

"With the shield" is ``build_job(...).union()`` (the secured replay); "without" is
``unsecured_frame`` (the same query; SP records are parsed and dropped, no shield).
Every pipeline is evaluated by one aggregate over its result (row count, max key and a
sum of row hashes, so every column of every row is computed), planned once, warmed up
once per configuration, then executed at least three times (more when a configuration
is cheap, see :class:`Repetitions`) with the pipelines of a configuration interleaved
(their order rotates per repetition); medians are kept.
Execution wall time is the headline (rows/s, ms per 1,000 tuples). CPU time of the
Spark JVM and its Python workers is kept too: the machine is shared, and CPU time
moves less with other load.

Tuples per second and ms per 1,000 tuples count input tuples, not SP records.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.engine.execute import build_job, unsecured_frame
from streamwarden.engine.shield.reader import shielded_input
from streamwarden.plan.nodes import Shield, walk
from streamwarden.security.passes import SecurityOptions, secure
from streamwarden.security.rewrite.algorithm import Rewriting

from bench import punctuation_workload as W
from bench.pipelines import EXCLUDED_RULES, NO_PUSHDOWN
from bench.spark_probe import process_tree_cpu_s, sql_conf
from bench.stats import median, ratio
from bench.workdir import scratch_dir

#: The paper's numbers (ms per 1,000 tuples), where its text gives them.
PAPER_FIG13A_RATIO1_MS = 4.0
PAPER_FIG13B_MS = {1: 1.31, 500: 11.31}
STRATEGIES = ("probe-and-filter", "filter-and-probe", "adaptive")
#: Diagnostic: probe-and-filter planned without Spark's filter push-down, so it joins first.
PF_NO_PUSHDOWN = "probe-and-filter, no push-down"
HASH_MODULUS = 2**31 - 1  # row hashes are summed modulo this, so the sum never overflows a long


@dataclass(frozen=True)
class Repetitions:
    """How often to run a configuration: at least ``least`` rounds of every pipeline, more
    (up to ``most``) while the rounds so far took less than ``budget_s``, so cheap
    configurations get more samples for the same time."""

    least: int = 3
    most: int = 7
    budget_s: float = 6.0


@dataclass(frozen=True)
class Settings:
    """Sizes of experiment 3; ``quick`` is the smoke version.

    Sizes are smaller than the paper's streams: with the shield this engine processes
    5-10 thousand tuples per second at SP ratio 1 (see the report), so 50,000 tuples per
    configuration would not fit the 10-minute budget. ``role_budget`` caps policies ×
    roles per configuration: every SP's record carries its role names through the reader
    and the shuffle (the shield decides each distinct role list once).
    """

    tuples: int = 10_000  # per configuration of Fig. 13
    role_budget: int = 5_000_000
    fixed_tuples: int = 200  # a near-empty input: what a job costs whatever its size (0: not measured)
    ratios: tuple[int, ...] = (1, 10, 100)  # Fig. 13a
    ratio_roles: int = 10
    roles: tuple[int, ...] = (1, 10, 100, 500)  # Fig. 13b
    roles_ratio: int = 1
    stage_roles: tuple[int, ...] = (10, 500)  # where the shield's cost is split into stages
    placement_roles: tuple[int, ...] = (10, 100)  # Figs. 14 and 15
    placement_selectivities: tuple[float, ...] = (0.1, 0.5, 0.9)
    placement_ratio: int = 10
    placement_tuples: int = 5_000
    join_tuples: int = 5_000  # per stream, Fig. 16
    join_roles: int = 10
    window_tuples: int = 100
    join_ratio: int = 10  # the values the other two sweeps hold fixed
    join_similarity: float = 0.5
    join_selectivity: float = 0.1
    join_ratios: tuple[int, ...] = (1, 10, 100)
    join_similarities: tuple[float, ...] = (0.25, 0.5, 1.0)
    join_selectivities: tuple[float, ...] = (0.01, 0.1, 0.5)
    diagnostic_sweeps: tuple[str, ...] = ("selectivity",)  # where PF_NO_PUSHDOWN is measured too
    reps: Repetitions = Repetitions()
    warmup_per_configuration: bool = True
    warmup_tuples: int = 500

    @classmethod
    def quick(cls) -> "Settings":
        return cls(tuples=5_000, role_budget=500_000, fixed_tuples=0, ratios=(1, 100), roles=(500,), stage_roles=(),
                   placement_roles=(100,), placement_selectivities=(0.5,), placement_tuples=3_000,
                   join_tuples=1_500, join_ratios=(1,), join_similarities=(), join_selectivities=(),
                   reps=Repetitions(1, 1, 0.0), warmup_per_configuration=False, warmup_tuples=500)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# -- measuring -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One execution of a pipeline: wall and CPU seconds, and what it returned."""

    wall_s: float
    cpu_s: float
    rows: int
    checksum: int


class Pipeline:
    """A result DataFrame, evaluated by one aggregate: the row count, the max ``key`` and a
    sum of row hashes of ``columns`` (a multiset checksum), so every column of every row
    is computed.

    The aggregate is planned once (``plan_s``: analysis, optimization, physical planning);
    each run executes a fresh copy of that physical plan. A copy has its own exchanges, so
    nothing is reused from an earlier run (re-running one plan object would reuse its
    shuffle files and skip the work before them), and repetitions time execution only, as
    a continuous query is planned once too.
    """

    def __init__(self, frame: DataFrame, key: str, columns: tuple[str, ...], excluded_rules: str | None = None):
        self.frame, self.key, self.columns = frame, key, columns
        checksum = F.sum(F.pmod(F.xxhash64(*columns), F.lit(HASH_MODULUS)))
        self.action = frame.agg(F.count(F.lit(1)), F.max(key), checksum)
        self.excluded_rules = excluded_rules  # optimizer rules left out while planning (a diagnostic)
        self._plan: Any = None
        self.plan_s = math.nan

    def physical_plan(self) -> Any:
        if self._plan is None:
            with sql_conf(self.action.sparkSession, EXCLUDED_RULES, self.excluded_rules):
                start = time.perf_counter()
                self._plan = self.action._jdf.queryExecution().executedPlan()
                self.plan_s = time.perf_counter() - start
        return self._plan

    def execute(self) -> tuple[int, int]:
        """(row count, checksum) from one execution of a fresh copy of the physical plan."""
        row = self.physical_plan().clone().executeCollect()[0]
        return int(row.getLong(0)), 0 if row.isNullAt(2) else int(row.getLong(2))


class Meter:
    """Executes pipelines and times them (wall clock, CPU of the JVM and its workers)."""

    def __init__(self, spark: SparkSession):
        self.pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]

    def run(self, pipeline: Pipeline) -> Run:
        pipeline.physical_plan()
        cpu0, start = process_tree_cpu_s(self.pid), time.perf_counter()
        rows, checksum = pipeline.execute()
        wall, cpu = time.perf_counter() - start, process_tree_cpu_s(self.pid) - cpu0
        return Run(wall, cpu, rows, checksum)


def measure(meter: Meter, pipelines: Mapping[str, Pipeline], reps: Repetitions, *, warm_up: bool = True
            ) -> dict[str, dict[str, Any]]:
    """Warm each pipeline up once, then interleaved rounds (see :class:`Repetitions`);
    medians per pipeline."""
    names = list(pipelines)
    for name in names if warm_up else ():
        meter.run(pipelines[name])
    runs: dict[str, list[Run]] = {name: [] for name in names}
    started, rep = time.perf_counter(), 0
    while rep < reps.least or (rep < reps.most and time.perf_counter() - started < reps.budget_s):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(meter.run(pipelines[name]))
        rep += 1
    return {name: _summary(r, pipelines[name].plan_s) for name, r in runs.items()}


def _summary(runs: list[Run], plan_s: float) -> dict[str, Any]:
    return {
        "wall_s": median([r.wall_s for r in runs]), "cpu_s": median([r.cpu_s for r in runs]), "plan_s": plan_s,
        "runs": len(runs), "wall_s_all": [round(r.wall_s, 3) for r in runs],
        "cpu_s_all": [round(r.cpu_s, 2) for r in runs], "rows": runs[0].rows,
        "checksum": runs[0].checksum,
        "stable": all((r.rows, r.checksum) == (runs[0].rows, runs[0].checksum) for r in runs),
    }


def _spread(measured: Mapping[str, dict[str, Any]]) -> float:
    """Run-to-run spread of a configuration: the largest (max − min) / median of its pipelines
    (NaN with a single run)."""
    if any(len(m["wall_s_all"]) < 2 for m in measured.values()):
        return math.nan
    return max(ratio(max(m["wall_s_all"]) - min(m["wall_s_all"]), m["wall_s"]) for m in measured.values())


def per_1000(seconds: float, tuples: int) -> float:
    """Milliseconds per 1,000 input tuples."""
    return 1e6 * ratio(seconds, tuples)


# -- pipelines -------------------------------------------------------------------------------
def _secured(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, inputs: Mapping[str, Path],
             columns: tuple[str, ...]) -> Pipeline:
    frame = build_job(spark, catalog, rewriting, inputs, streaming=False).union()
    if frame is None:
        raise ValueError("the rewriting deploys no graph: nothing to run")
    return Pipeline(frame, columns[0], columns)


def _unsecured(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, inputs: Mapping[str, Path],
               columns: tuple[str, ...]) -> Pipeline:
    return Pipeline(unsecured_frame(spark, catalog, rewriting, inputs), columns[0], columns)


def stage_pipelines(spark: SparkSession, catalog: Catalog, path: Path) -> dict[str, Pipeline]:
    """Cumulative stages of the shield pipeline: the kernel (which encodes each SP), then masking."""
    kernel = shielded_input(spark, catalog.streams["Objects"], path, catalog.effective_roles(W.USER),
                            streaming=False)
    return {
        "read + shield kernel": Pipeline(kernel.filter(F.col("_gov").isNotNull()), "oid",
                                                       ("oid", "speed", "x", "y")),
    }


# -- the experiment ----------------------------------------------------------------------------
class Experiment:
    """Generates the data (cached per configuration) and measures every figure."""

    def __init__(self, spark: SparkSession, settings: Settings, workdir: Path, log: Callable[[str], None]):
        self.spark, self.settings, self.workdir, self.log = spark, settings, workdir, log
        self.meter = Meter(spark)
        self.streams: dict[tuple[int, int, int], W.StreamFile] = {}

    def objects(self, tuples: int, ratio_: int, roles: int) -> W.StreamFile:
        key = (tuples, ratio_, roles)
        if key not in self.streams:
            self.streams[key] = W.objects(self.workdir / f"objects-{tuples}-{ratio_}-{roles}", tuples=tuples,
                                          sp_ratio=ratio_, roles=roles)
        return self.streams[key]

    def catalog(self, roles: int, streams: tuple[str, ...] = ("Objects",)) -> Catalog:
        return load_catalog_text(W.catalog_text(roles, streams), f"<punctuation, {roles} roles>")

    # Figs. 13 and 15: shield vs no shield ------------------------------------------------
    def shield_point(self, ratio_: int, roles: int, *, stages: bool = False, tuples: int | None = None
                     ) -> dict[str, Any]:
        s = self.settings
        tuples = tuples or W.capped_tuples(s.tuples, ratio_, roles, s.role_budget)
        data = self.objects(tuples, ratio_, roles)
        catalog = self.catalog(roles)
        rewriting = secure(catalog, W.USER, W.SELECT_QUERY, SecurityOptions())
        inputs = {"Objects": data.path}
        pipelines = {"shield": _secured(self.spark, catalog, rewriting, inputs, W.SELECT_COLUMNS),
                     "no shield": _unsecured(self.spark, catalog, rewriting, inputs, W.SELECT_COLUMNS)}
        if stages:
            pipelines.update(stage_pipelines(self.spark, catalog, data.path))
        measured = measure(self.meter, pipelines, s.reps, warm_up=s.warmup_per_configuration)
        point = _shield_summary(measured, data, tuples)
        point.update(sp_ratio=ratio_, roles=roles)
        self.log(f"  shield  ratio={ratio_:>3} roles={roles:>3} tuples={tuples:>6}: "
                 f"{point['shield_ms_per_1000']:.1f} vs {point['no_shield_ms_per_1000']:.1f} ms/1000 tuples "
                 f"(no shield), {point['relative_throughput']:.2f}× rows/s")
        return point

    # Fig. 14: shield placement -------------------------------------------------------------
    def placement_point(self, roles: int, selectivity: float) -> dict[str, Any]:
        s = self.settings
        tuples = W.capped_tuples(s.placement_tuples, s.placement_ratio, roles, s.role_budget)
        data = self.objects(tuples, s.placement_ratio, roles)
        threshold = W.speed_threshold(data.tuples, selectivity)
        catalog = self.catalog(roles)
        query = W.filter_query(threshold)
        inputs = {"Objects": data.path}
        pipelines, placements = {}, {}
        for placement in ("down", "up"):
            rewriting = secure(catalog, W.USER, query, SecurityOptions(placement=placement))
            placements[placement] = [n.placement for g in rewriting.deployed for n in walk(g.root)
                                     if isinstance(n, Shield)]
            pipelines[f"pushed {placement}"] = _secured(self.spark, catalog, rewriting, inputs, W.SELECT_COLUMNS)
        auto = secure(catalog, W.USER, query, SecurityOptions())
        pipelines["no shield"] = _unsecured(self.spark, catalog, auto, inputs, W.SELECT_COLUMNS)
        measured = measure(self.meter, pipelines, s.reps, warm_up=s.warmup_per_configuration)
        expected = W.expected_select(data.tuples, threshold)
        point: dict[str, Any] = {
            "roles": roles, "target_selectivity": selectivity, "threshold": threshold, "tuples": tuples,
            "sp_ratio": s.placement_ratio, "policies": data.policies,
            "selectivity": float((data.tuples.speed > threshold).mean()),
            "expected_rows": expected, "expected_rows_no_shield": int((data.tuples.speed > threshold).sum()),
            "placements": placements,
            "auto_placement": [n.placement for g in auto.deployed for n in walk(g.root) if isinstance(n, Shield)],
            "pipelines": measured,
            "ms_per_1000": {name: per_1000(m["wall_s"], tuples) for name, m in measured.items()},
            "cpu_ms_per_1000": {name: per_1000(m["cpu_s"], tuples) for name, m in measured.items()},
            "spread": _spread(measured),
        }
        point["ok"] = (measured["pushed down"]["rows"] == measured["pushed up"]["rows"] == expected
                       and measured["pushed down"]["checksum"] == measured["pushed up"]["checksum"]
                       and measured["no shield"]["rows"] == point["expected_rows_no_shield"])
        ms = point["ms_per_1000"]
        self.log(f"  placement roles={roles:>3} s={selectivity:.1f}: down {ms['pushed down']:.1f}, "
                 f"up {ms['pushed up']:.1f}, no shield {ms['no shield']:.1f} ms/1000 tuples")
        return point

    # Fig. 16: SCJoin strategies ------------------------------------------------------------
    def join_point(self, sweeps: list[str], ratio_: int, similarity: float, selectivity: float) -> dict[str, Any]:
        s = self.settings
        folder = self.workdir / f"pair-{ratio_}-{similarity}-{selectivity}"
        a, b = W.pair(folder, tuples=s.join_tuples, sp_ratio=ratio_, roles=s.join_roles, similarity=similarity,
                      selectivity=selectivity)
        catalog = self.catalog(s.join_roles, ("A", "B"))
        inputs = {"A": a.path, "B": b.path}
        query = W.join_query(W.window_ms(s.window_tuples))
        pipelines, chosen, features = {}, "", {}
        for strategy in STRATEGIES:
            rewriting = secure(catalog, W.USER, query, SecurityOptions(join_strategy=strategy))
            if strategy == "adaptive":
                chosen = _strategy_of(rewriting)
            pipelines[strategy] = _secured(self.spark, catalog, rewriting, inputs, W.JOIN_COLUMNS)
            features[strategy] = scjoin_plan_features(pipelines[strategy])
            if strategy == "probe-and-filter" and set(sweeps) & set(s.diagnostic_sweeps):
                pf = pipelines[strategy]
                pipelines[PF_NO_PUSHDOWN] = Pipeline(pf.frame, pf.key, pf.columns, NO_PUSHDOWN)
                features[PF_NO_PUSHDOWN] = scjoin_plan_features(pipelines[PF_NO_PUSHDOWN])
        measured = measure(self.meter, pipelines, s.reps, warm_up=s.warmup_per_configuration)
        expected, unsecured_rows = W.expected_join(a.tuples, b.tuples, s.window_tuples)
        tuples = a.tuples.count + b.tuples.count
        wall = {name: m["wall_s"] for name, m in measured.items()}
        better = min(("probe-and-filter", "filter-and-probe"), key=lambda n: wall[n])
        cpu_better = min(("probe-and-filter", "filter-and-probe"), key=lambda n: measured[n]["cpu_s"])
        point: dict[str, Any] = {
            "sweeps": sweeps, "sp_ratio": ratio_, "similarity": similarity, "target_selectivity": selectivity,
            "tuples": tuples, "policies": a.policies + b.policies, "adaptive_choice": chosen,
            "expected_rows": expected, "unsecured_rows": unsecured_rows,
            "measured_selectivity": ratio(unsecured_rows, a.tuples.count * (2 * s.window_tuples + 1)),
            "pipelines": measured,
            "ms_per_1000": {name: per_1000(w, tuples) for name, w in wall.items()},
            "cpu_ms_per_1000": {name: per_1000(m["cpu_s"], tuples) for name, m in measured.items()},
            "better_fixed": better,
            "adaptive_vs_better": ratio(wall["adaptive"], wall[better]),
            "adaptive_vs_better_cpu": ratio(measured["adaptive"]["cpu_s"], measured[cpu_better]["cpu_s"]),
            "same_rows": len({(measured[n]["rows"], measured[n]["checksum"]) for n in STRATEGIES}) == 1,
            "spread": _spread(measured),
            "plan_features": features,
        }
        point["ok"] = (measured["adaptive"]["rows"] == expected
                       and len({(m["rows"], m["checksum"]) for m in measured.values()}) == 1)
        ms = point["ms_per_1000"]
        self.log(f"  scjoin ratio={ratio_:>3} sim={similarity:.2f} sel={selectivity:.2f}: "
                 f"PF {ms['probe-and-filter']:.1f}, FP {ms['filter-and-probe']:.1f}, adaptive ({chosen}) "
                 f"{ms['adaptive']:.1f} ms/1000 tuples; {measured['adaptive']['rows']:,} rows")
        shutil.rmtree(folder, ignore_errors=True)
        return point

    def join_plan(self) -> list[tuple[list[str], int, float, float]]:
        """(sweeps, ratio, similarity, selectivity) of every Fig. 16 point; a point that
        several sweeps share (their fixed values) is measured once."""
        s = self.settings
        wanted = [("sp ratio", (r, s.join_similarity, s.join_selectivity)) for r in s.join_ratios]
        wanted += [("similarity", (s.join_ratio, x, s.join_selectivity)) for x in s.join_similarities]
        wanted += [("selectivity", (s.join_ratio, s.join_similarity, x)) for x in s.join_selectivities]
        points: dict[tuple[int, float, float], list[str]] = {}
        for sweep, key in wanted:
            points.setdefault(key, []).append(sweep)
        return [(sweeps, *key) for key, sweeps in points.items()]

    def warm_up(self) -> None:
        """JIT-compile the main code paths on small data, results thrown away (the first
        runs in a JVM are several times slower than later ones)."""
        n = self.settings.warmup_tuples
        data = self.objects(n, 1, 10)
        catalog = self.catalog(10)
        rewriting = secure(catalog, W.USER, W.filter_query(17.5), SecurityOptions(placement="up"))
        pipelines = [_secured(self.spark, catalog, rewriting, {"Objects": data.path}, W.SELECT_COLUMNS),
                     _unsecured(self.spark, catalog, rewriting, {"Objects": data.path}, W.SELECT_COLUMNS)]
        a, b = W.pair(self.workdir / "warm-pair", tuples=n, sp_ratio=10, roles=10, similarity=0.5, selectivity=0.1)
        pair_catalog = self.catalog(10, ("A", "B"))
        rw = secure(pair_catalog, W.USER, W.join_query(100), SecurityOptions(join_strategy="filter-and-probe"))
        pipelines.append(_secured(self.spark, pair_catalog, rw, {"A": a.path, "B": b.path}, W.JOIN_COLUMNS))
        for p in pipelines:
            self.meter.run(p)


def _strategy_of(rewriting: Rewriting) -> str:
    """Which strategy the SCJoin pass chose: shields above the join are probe-and-filter."""
    placements = {n.placement for g in rewriting.deployed for n in walk(g.root) if isinstance(n, Shield)}
    return "probe-and-filter" if "probe-and-filter" in placements else "filter-and-probe"


def scjoin_plan_features(pipeline: Pipeline) -> dict[str, object]:
    """Where Spark's physical plan applies the shields' filter (below or above the join)
    and how many times it decodes the governing SPs (``from_json`` of ``_gov``)."""
    plan = pipeline.physical_plan().toString()
    lines = plan.splitlines()
    join = next((i for i, line in enumerate(lines) if "Join" in line.split("[")[0]), len(lines))
    masks_below = sum(1 for line in lines[join:] if line.lstrip(" :+-*()0123456789").startswith("Filter")
                      and "aggregate(" in line)
    return {"shield_filters_below_join": masks_below, "gov_decodings": plan.count("from_json(ArrayType")}


def _shield_summary(measured: dict[str, dict[str, Any]], data: W.StreamFile, tuples: int) -> dict[str, Any]:
    shield, bare = measured["shield"], measured["no shield"]
    expected = W.expected_select(data.tuples)
    point: dict[str, Any] = {
        "tuples": tuples, "policies": data.policies, "records": data.records, "expected_rows": expected,
        "pipelines": measured,
        "shield_ms_per_1000": per_1000(shield["wall_s"], tuples),
        "no_shield_ms_per_1000": per_1000(bare["wall_s"], tuples),
        "overhead_ms_per_1000": per_1000(shield["wall_s"] - bare["wall_s"], tuples),
        "shield_cpu_ms_per_1000": per_1000(shield["cpu_s"], tuples),
        "no_shield_cpu_ms_per_1000": per_1000(bare["cpu_s"], tuples),
        "overhead_cpu_ms_per_1000": per_1000(shield["cpu_s"] - bare["cpu_s"], tuples),
        "shield_rows_per_s": ratio(tuples, shield["wall_s"]),
        "no_shield_rows_per_s": ratio(tuples, bare["wall_s"]),
        "relative_throughput": ratio(bare["wall_s"], shield["wall_s"]),
        "relative_throughput_cpu": ratio(bare["cpu_s"], shield["cpu_s"]),
        "ok": shield["rows"] == expected and bare["rows"] == tuples,
        "spread": _spread(measured),
    }
    if "read + shield kernel" in measured:
        point["stages_ms_per_1000"] = _stages(measured, tuples)
    return point


def _add_marginal(point: dict[str, Any], fixed: dict[str, Any]) -> None:
    """The shield's cost per 1,000 tuples without the fixed cost of a job: each pipeline's
    time minus its time over a near-empty input (closest to the paper's SS cost, which
    leaves out scheduling and queues)."""
    base = {name: fixed["pipelines"][name]["wall_s"] for name in ("shield", "no shield")}
    with_shield = point["pipelines"]["shield"]["wall_s"] - base["shield"]
    without = point["pipelines"]["no shield"]["wall_s"] - base["no shield"]
    point["marginal_overhead_ms_per_1000"] = per_1000(with_shield - without, point["tuples"] - fixed["tuples"])


def _stages(measured: dict[str, dict[str, Any]], tuples: int) -> dict[str, float]:
    """Each stage's own cost (ms per 1,000 tuples, wall): the difference to the stage before."""
    order = [("no shield", "read, SPs dropped (no shield)"),
             ("read + shield kernel", "shield kernel (shuffle, Arrow, SP encoding, Python)"),
             ("shield", "masking and output")]
    out, previous = {}, 0.0
    for name, label in order:
        wall = measured[name]["wall_s"]
        out[label] = per_1000(wall - previous, tuples)
        previous = wall
    return out


def run(spark: SparkSession, settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement of experiment 3, as plain data for the report and the plots."""
    with scratch_dir("streamwarden-sp-bench-") as workdir:
        return _run(Experiment(spark, settings, workdir, log))


def _run(x: Experiment) -> dict[str, Any]:
    s = x.settings
    load_before = os.getloadavg()
    started = time.perf_counter()
    x.warm_up()
    x.log(f"  warm-up: {time.perf_counter() - started:.0f} s")
    # Fig. 13a and 13b share the point (roles_ratio, ratio_roles) when both sweeps contain it.
    by_ratio = [x.shield_point(r, s.ratio_roles, stages=r == s.roles_ratio and s.ratio_roles in s.stage_roles)
                for r in s.ratios]
    shared = {p["roles"]: p for p in by_ratio if p["sp_ratio"] == s.roles_ratio}
    by_roles = [shared.get(roles) or x.shield_point(s.roles_ratio, roles, stages=roles in s.stage_roles)
                for roles in s.roles]
    fixed = x.shield_point(1, s.ratio_roles, tuples=s.fixed_tuples) if s.fixed_tuples else None  # JVM warm by now
    for point in {id(p): p for p in by_ratio + by_roles}.values() if fixed else ():
        _add_marginal(point, fixed)
    placement = [x.placement_point(r, sel) for r in s.placement_roles for sel in s.placement_selectivities]
    joins = [x.join_point(*p) for p in x.join_plan()]
    return {
        "settings": {**s.as_dict(), "window_ms": W.window_ms(s.window_tuples)},
        "load_average": {"before": [round(v, 2) for v in load_before],
                         "after": [round(v, 2) for v in os.getloadavg()], "cpus": len(os.sched_getaffinity(0))},
        "fixed": fixed,
        "by_ratio": by_ratio,
        "by_roles": by_roles,
        "placement": placement,
        "joins": joins,
    }
