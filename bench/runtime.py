"""Experiment 2: the cost of enforcing policies at run time, on the drill scenario.

Paper: Fig. 9 — relative joins vs policy selectivity (9a, uniHealth and normHealth),
relative CPU time (9b) and relative memory (9c) vs join window at selectivity 0.5,
where "relative" is rewritten / post-filtering × 100. Issue targets: the secured query
keeps ≥ 0.9× the unsecured query's rows per second, and rewriting is ≥ 1.5× faster than
post-filtering at selectivity 0.5 on the largest window.

"Rows per second" is input rows processed (rows of both input streams, all of which
every pipeline reads) per second of wall time.

Every point is measured ``reps`` times per pipeline, pipelines interleaved (their order
rotates from one repetition to the next, so drift does not favour one), and the median
is kept. The JVM is warmed up first with runs that are thrown away.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.security.passes import secure

from bench import pipelines as P
from bench.runtime_workload import (
    HEALTH_STREAMS, USER, DataSize, Drill, Policies, catalog_text, choose_policies, generate, pair_counts, query_text,
)
from bench.spark_probe import RunMetrics, SparkProbe, sql_conf
from bench.stats import median, ratio
from bench.workdir import scratch_dir

METRICS = ("wall_s", "process_cpu_s", "executor_cpu_s", "join_state_bytes", "join_input_rows", "join_output_rows",
           "peak_heap_bytes")


@dataclass(frozen=True)
class Settings:
    size: DataSize = DataSize(200, 10, 2.0)
    datasets: tuple[str, ...] = ("uni", "norm")
    selectivities: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    selectivity_window_s: int = 30
    windows_s: tuple[int, ...] = (10, 30, 60, 120)
    window_selectivity: float = 0.5
    reps: int = 3
    warmup_runs: int = 3
    warmup_s: float = 30.0

    @classmethod
    def quick(cls) -> "Settings":
        return cls(size=DataSize(60, 5, 2.0), selectivities=(0.1, 0.5, 0.9), windows_s=(10, 30, 120), reps=1,
                   warmup_runs=2, warmup_s=10.0)


def _evaluate(spark: SparkSession, probe: SparkProbe, pipeline: P.Pipeline) -> RunMetrics:
    def action() -> None:
        pipeline.frame.write.format("noop").mode("overwrite").save()

    with sql_conf(spark, P.EXCLUDED_RULES, pipeline.excluded_rules):
        return probe.measure(action)


def _medians(runs: list[RunMetrics]) -> dict[str, float]:
    out: dict[str, float] = {m: median([float(getattr(r, m)) for r in runs]) for m in METRICS}
    out["runs"] = len(runs)
    out["wall_s_all"] = [round(r.wall_s, 4) for r in runs]  # type: ignore[assignment]
    return out


def _build(spark: SparkSession, drill: Drill, dataset: str, selectivity: float, window_s: int,
           names: tuple[str, ...]) -> tuple[Policies, dict[str, P.Pipeline]]:
    policies = choose_policies(drill, dataset, selectivity)
    catalog = load_catalog_text(catalog_text(policies), f"<drill {dataset} s={selectivity}>")
    rewriting = secure(catalog, USER, query_text(policies.health_stream, window_s))  # the engine runs secured plans only
    paths = {"Position": drill.path("Position"), policies.health_stream: drill.path(policies.health_stream)}
    builders: dict[str, Callable[[], P.Pipeline]] = {
        "unsecured": lambda: P.unsecured(spark, catalog, rewriting, paths),
        "rewritten": lambda: P.rewritten(spark, catalog, rewriting, paths),
        "rewritten, no _policies": lambda: P.rewritten_without_provenance(spark, catalog, rewriting, paths),
        "post-filtering": lambda: P.post_filtering(spark, catalog, rewriting, paths, USER),
        "post-filtering, pushed down": lambda: P.post_filtering(spark, catalog, rewriting, paths, USER,
                                                                pushdown=True),
    }
    return policies, {name: builders[name]() for name in names}


def _measure_point(spark: SparkSession, probe: SparkProbe, pipelines: dict[str, P.Pipeline],
                   reps: int) -> dict[str, dict[str, float]]:
    runs: dict[str, list[RunMetrics]] = {name: [] for name in pipelines}
    order = list(pipelines)
    for rep in range(reps):
        shift = rep % len(order)
        for name in order[shift:] + order[:shift]:
            runs[name].append(_evaluate(spark, probe, pipelines[name]))
    return {name: _medians(r) for name, r in runs.items()}


def run(spark: SparkSession, settings: Settings, log=print) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Every runtime measurement, as plain data for the report and the plots."""
    probe = SparkProbe(spark)
    with scratch_dir("streamwarden-bench-") as workdir:
        drill = generate(workdir / "drill", settings.size)
        return _run(spark, probe, drill, settings, log)


def _run(spark: SparkSession, probe: SparkProbe, drill: Drill, settings: Settings, log) -> dict[str, object]:  # type: ignore[no-untyped-def]
    all_names = ("unsecured", "rewritten", "rewritten, no _policies", "post-filtering", "post-filtering, pushed down")
    # Warm-up: JIT-compile Spark's code paths for every pipeline, results thrown away. Early
    # runs are several times slower than later ones, so warm up for rounds *and* seconds.
    _, warm = _build(spark, drill, settings.datasets[0], settings.window_selectivity, max(settings.windows_s),
                     all_names)
    started, rounds = time.perf_counter(), 0
    while rounds < settings.warmup_runs or time.perf_counter() - started < settings.warmup_s:
        for pipeline in warm.values():
            _evaluate(spark, probe, pipeline)
        rounds += 1
    log(f"  warm-up: {rounds} rounds in {time.perf_counter() - started:.0f} s")
    features = {name: P.plan_features(spark, p) for name, p in warm.items()}

    plan: list[tuple[float, int, tuple[str, ...]]] = []
    for w in sorted(set(settings.windows_s) | {settings.selectivity_window_s}):
        # Window sweep at the fixed selectivity; the unsecured query is measured here.
        names = all_names if w in settings.windows_s else ("unsecured", "rewritten", "rewritten, no _policies",
                                                           "post-filtering")
        plan.append((settings.window_selectivity, w, names))
    for s in settings.selectivities:  # selectivity sweep at the fixed window
        if s != settings.window_selectivity:
            plan.append((s, settings.selectivity_window_s, ("rewritten", "rewritten, no _policies", "post-filtering")))

    points: list[dict[str, object]] = []
    unsecured: dict[tuple[str, int], dict[str, float]] = {}
    for s, w, names in plan:
        for dataset in settings.datasets:  # datasets interleaved, so drift hits both alike
            rows_in = drill.rows["Position"] + drill.rows[HEALTH_STREAMS[dataset]]
            policies, built = _build(spark, drill, dataset, s, w, names)
            measured = _measure_point(spark, probe, built, settings.reps)
            if "unsecured" in measured:
                unsecured[(dataset, w)] = measured.pop("unsecured")
            point = _describe(drill, dataset, policies, w, measured, unsecured[(dataset, w)], rows_in)
            points.append(point)
            log(f"  runtime {dataset:>4} s={s:.1f} w={w:>3}s: rewritten {point['rewritten']['wall_s']:.2f}s, "
                f"post-filtering {point['post-filtering']['wall_s']:.2f}s, "
                f"unsecured {point['unsecured']['wall_s']:.2f}s")
    validation = _validate(spark, drill, settings)
    return {
        "data": {"size": settings.size.describe(), "rows": drill.rows, "format": "Parquet"},
        "settings": {"reps": settings.reps, "warmup_rounds": rounds,
                     "selectivity_window_s": settings.selectivity_window_s,
                     "window_selectivity": settings.window_selectivity},
        "plan_features": features,
        "points": points,
        "validation": validation,
    }


def _describe(drill: Drill, dataset: str, policies: Policies, window_s: int, measured: dict[str, dict[str, float]],
              unsecured: dict[str, float], rows_in: int) -> dict[str, object]:
    secured_pairs = pair_counts(drill, policies, window_s)
    all_pairs = pair_counts(drill, None, window_s)
    rw, post = measured["rewritten"], measured["post-filtering"]
    point: dict[str, object] = {
        "dataset": dataset, "window_s": window_s, "target_selectivity": policies.target,
        "position_selectivity": policies.position_selectivity, "health_selectivity": policies.health_selectivity,
        "policy_conditions": f"Position.SID <= {policies.sid_max}; {policies.health_stream}.Heart <= {policies.heart_max}",
        "input_rows": rows_in,
        "pairs_rewritten": secured_pairs.__dict__, "pairs_post_filtering": all_pairs.__dict__,
        "relative_window_joins_pct": 100 * ratio(secured_pairs.window_pairs, all_pairs.window_pairs),
        "relative_key_joins_pct": 100 * ratio(secured_pairs.key_pairs, all_pairs.key_pairs),
        "relative_executor_cpu_pct": 100 * ratio(rw["executor_cpu_s"], post["executor_cpu_s"]),
        "relative_process_cpu_pct": 100 * ratio(rw["process_cpu_s"], post["process_cpu_s"]),
        "relative_wall_pct": 100 * ratio(rw["wall_s"], post["wall_s"]),
        "relative_join_state_pct": 100 * ratio(rw["join_state_bytes"], post["join_state_bytes"]),
        "relative_join_input_rows_pct": 100 * ratio(rw["join_input_rows"], post["join_input_rows"]),
        "relative_heap_pct": 100 * ratio(rw["peak_heap_bytes"], post["peak_heap_bytes"]),
        "speedup_vs_post_filtering": ratio(post["wall_s"], rw["wall_s"]),
        "provenance_cost": ratio(rw["wall_s"], measured["rewritten, no _policies"]["wall_s"]),
        "rows_per_s": {name: ratio(rows_in, m["wall_s"]) for name, m in
                       (("unsecured", unsecured), *measured.items())},
        "secured_vs_unsecured_throughput": ratio(unsecured["wall_s"], rw["wall_s"]),
        "unsecured": unsecured,
    }
    point.update(measured)
    return point


def _validate(spark: SparkSession, drill: Drill, settings: Settings) -> list[dict[str, object]]:
    """Rewritten and post-filtering must return exactly the rows the exact count predicts."""
    out = []
    w = max(settings.windows_s)
    for dataset in settings.datasets:
        policies, built = _build(spark, drill, dataset, settings.window_selectivity, w,
                                 ("rewritten", "post-filtering", "unsecured"))
        expected = pair_counts(drill, policies, w).output_rows
        expected_all = pair_counts(drill, None, w).output_rows
        counts = {}
        for name, pipeline in built.items():
            with sql_conf(spark, P.EXCLUDED_RULES, pipeline.excluded_rules):
                counts[name] = pipeline.frame.count()
        out.append({"dataset": dataset, "window_s": w, "expected_secured_rows": expected,
                    "expected_unsecured_rows": expected_all, "counted": counts,
                    "ok": counts["rewritten"] == counts["post-filtering"] == expected
                    and counts["unsecured"] == expected_all})
    return out
