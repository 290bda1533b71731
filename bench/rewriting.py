"""Experiment 1: how long Algorithm 1 (``streamwarden.security.rewrite.algorithm.rewrite``) takes.

Paper: Fig. 8a (rewriting time vs query complexity, Q1-Q5 of Table III: < 0.2 s) and
Fig. 8b (vs 10-50 policies on Q3: < 0.12 s). Issue targets: Q5 with 50 policies under
20 ms (median) and a 200-operator query with 1,000 policies under 1 s.

"Cold" runs clear streamwarden's two memo caches before every run — the implication
cache (``implies``, so every SMT proof is paid again) and the deployment check's
``visible`` cache — so a cold run costs what the first rewrite of a query costs.
"Warm" runs keep both caches, as a second rewrite of the same query in one process does.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from streamwarden.catalog.model import Catalog
from streamwarden.plan.nodes import Node
from streamwarden.security.rewrite import deploy
from streamwarden.security.rewrite.algorithm import Rewriting, rewrite
from streamwarden.security.rewrite.implication import implies

from bench.rewrite_workload import Q200, TABLE_III, USER, QueryShape, build_catalog, build_query, count_operators
from bench.stats import median, percentile


@dataclass(frozen=True)
class Settings:
    """How much to repeat; ``quick`` trims everything for a smoke run."""

    min_runs: int = 15
    max_runs: int = 50
    budget_s: float = 1.5  # per configuration and per mode (cold / warm)
    table_policies: tuple[int, ...] = (10, 50, 1000)
    sweep_policies: tuple[int, ...] = (10, 20, 30, 40, 50)
    blowup_q5: tuple[int, ...] = (0, 1, 2, 3, 4)
    blowup_q200: tuple[int, ...] = (0, 2, 4, 6, 8)
    blowup_runs: int = 3

    @classmethod
    def quick(cls) -> "Settings":
        return cls(min_runs=5, max_runs=15, budget_s=0.3, blowup_q5=(0, 2, 4), blowup_q200=(0, 2, 4), blowup_runs=1)


@dataclass(frozen=True)
class Measurement:
    """Timings (ms) and what the rewriting produced, for one query and one policy set."""

    query: str
    operators: int
    operator_mix: str
    policies: int
    applicable_aggregates: int | None
    cold_median_ms: float
    cold_p95_ms: float
    warm_median_ms: float
    warm_p95_ms: float
    runs: int
    graphs: int
    deployed: int
    applied: int  # policy decisions that applied (one policy may apply at several operators)
    implication_checks: int  # distinct implies() calls of a cold run (cache misses)
    solver_calls: int  # of which reached the z3 solver

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def clear_caches() -> None:
    """Forget every memoized implication and deployment check (a cold rewrite)."""
    implies.cache_clear()
    deploy.visible.cache_clear()


@contextmanager
def counting_solver_calls() -> Iterator[list[int]]:
    """Count ``z3.Solver.check`` calls inside the block (patched on the class, then restored)."""
    import z3

    counter = [0]
    original = z3.Solver.check

    def check(self, *args):  # type: ignore[no-untyped-def]
        counter[0] += 1
        return original(self, *args)

    z3.Solver.check = check  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        z3.Solver.check = original  # type: ignore[method-assign]


def _timed_runs(catalog: Catalog, plan: Node, settings: Settings, *, cold: bool) -> list[float]:
    times: list[float] = []
    if not cold:
        rewrite(catalog, USER, plan)  # fill the caches once
    gc.collect()
    # As timeit does: no cyclic garbage collection inside a timed run (it would land in
    # whichever run happens to cross the threshold); reference counting still frees memory.
    gc.disable()
    try:
        while len(times) < settings.max_runs and (len(times) < settings.min_runs or sum(times) < settings.budget_s):
            if cold:
                clear_caches()
            start = time.perf_counter()
            rewrite(catalog, USER, plan)
            times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return times


def measure(shape: QueryShape, policies: int, settings: Settings, *, applicable_aggregates: int | None = None,
            runs: int | None = None) -> Measurement:
    """Time rewriting ``shape`` with ``policies`` policies, cold and warm."""
    plan = build_query(shape)
    catalog = build_catalog(shape, policies, applicable_aggregates=applicable_aggregates)
    counts = count_operators(plan)
    clear_caches()
    with counting_solver_calls() as solver:
        result: Rewriting = rewrite(catalog, USER, plan)
    checks = implies.cache_info().misses
    if runs is not None:  # fixed, small repetition for the expensive blow-up points
        fixed = Settings(min_runs=runs, max_runs=runs, budget_s=0.0)
        cold, warm = _timed_runs(catalog, plan, fixed, cold=True), []
    else:
        cold = _timed_runs(catalog, plan, settings, cold=True)
        warm = _timed_runs(catalog, plan, settings, cold=False)
    ms = lambda xs, f: round(f(xs) * 1000, 3) if xs else float("nan")  # noqa: E731
    return Measurement(
        query=shape.name, operators=counts.total, operator_mix=counts.describe(), policies=policies,
        applicable_aggregates=applicable_aggregates,
        cold_median_ms=ms(cold, median), cold_p95_ms=ms(cold, lambda xs: percentile(xs, 95)),
        warm_median_ms=ms(warm, median), warm_p95_ms=ms(warm, lambda xs: percentile(xs, 95)),
        runs=len(cold), graphs=len(result.graphs), deployed=len(result.deployed),
        applied=sum(d.applied for d in result.decisions), implication_checks=checks, solver_calls=solver[0],
    )


def profile_hotspots(shape: QueryShape, policies: int, top: int = 8) -> dict[str, object]:
    """Where a cold rewrite spends its time: streamwarden functions with the most cumulative
    time, plus the builtin ``hash`` (hashing plan nodes for memo caches)."""
    plan = build_query(shape)
    catalog = build_catalog(shape, policies)
    clear_caches()
    profiler = cProfile.Profile()
    profiler.enable()
    rewrite(catalog, USER, plan)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = 0.0
    rows = []
    for (path, line, name), (_, _, own, cumulative, _) in stats.items():
        if path.endswith("rewrite/algorithm.py") and name == "rewrite":
            total = cumulative
            continue
        if "streamwarden" in path:
            where = "streamwarden/" + path.rsplit("streamwarden/", 1)[-1]
        elif name == "<built-in method builtins.hash>":
            where = "builtins"
        else:
            continue
        rows.append({"function": f"{where}:{line}({name})", "cumulative_s": round(cumulative, 4),
                     "own_s": round(own, 4)})
    rows.sort(key=lambda r: -float(r["cumulative_s"]))  # type: ignore[arg-type]
    return {"query": shape.name, "policies": policies, "total_s": round(total, 4), "rows": rows[:top]}


def warm_up() -> None:
    """Import z3 and JIT-free Python paths once, so the first measured run is not an outlier."""
    shape = TABLE_III[0]
    rewrite(build_catalog(shape, 10), USER, build_query(shape))


def run(settings: Settings, log=print) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """All rewriting measurements, as plain data for the report and the plots."""
    warm_up()
    shapes = TABLE_III + (Q200,)
    table = []
    for shape in shapes:
        for policies in settings.table_policies:
            m = measure(shape, policies, settings)
            log(f"  rewrite {shape.name} ({m.operators} ops) with {policies} policies: "
                f"cold median {m.cold_median_ms:.2f} ms, {m.graphs} graphs")
            table.append(m.as_dict())
    q3 = TABLE_III[2]
    sweep = []
    for policies in settings.sweep_policies:
        m = measure(q3, policies, settings)
        log(f"  rewrite Q3 with {policies} policies: cold median {m.cold_median_ms:.2f} ms")
        sweep.append(m.as_dict())
    q5 = TABLE_III[4]
    blowup = []
    for shape, ks in ((q5, settings.blowup_q5), (Q200, settings.blowup_q200)):
        for k in ks:
            m = measure(shape, 1000 if shape is Q200 else 50, settings, applicable_aggregates=k,
                        runs=settings.blowup_runs)
            log(f"  blow-up {shape.name}, {k} Σ with an applicable aggregate policy: {m.graphs} graphs, "
                f"cold median {m.cold_median_ms:.1f} ms")
            blowup.append(m.as_dict())
    hotspots = profile_hotspots(Q200, 1000)
    return {
        "shapes": [{"query": s.name, "paper": s.paper, "built": count_operators(build_query(s)).describe()}
                   for s in shapes],
        "table": table,
        "policy_sweep": sweep,
        "blowup": blowup,
        "hotspots": hotspots,
    }
