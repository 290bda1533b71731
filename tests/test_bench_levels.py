"""Experiment 4's declaration (bench/levels.py): its pipelines, targets, tables and observations,
judged on made-up measurements; its workload prepared small. No Spark."""

from __future__ import annotations

import json
from pathlib import Path

from bench import levels
from bench.suite.experiment import Measured

TOP, NARROW = "secured [T, T]", "secured [1, ⊥]"


def _runs(experiment, metrics) -> Measured:
    """One run per pipeline, its numbers from ``metrics(pipeline)``."""
    return Measured({p.name: [metrics(p)] for p in experiment.pipelines},
                    {p.name: p.coordinates() for p in experiment.pipelines})


def _made_up(p) -> dict[str, float]:
    """Secured at [T, T] as fast as unsecured but [ROWS 1000] (0.5×); [ROWS n] slower than [RANGE d];
    one processor per level costs 4 s + 1 s per level; sharing one processor runs more tasks."""
    at = p.coordinates()
    if p.group == levels.IN_USE:
        k = float(at["queries"])
        shared = p.variant == levels.SHARED
        return {"run_wall_s": 1 + 0.5 * k, "run_cpu_s": 4 + k + shared, "task_cpu_s": 0.5 + 0.1 * k,
                "jit_cpu_s": 0.2 * k, "start_s": 0.3 * k, "tasks": 10 * k * (1 + 3 * shared),
                "phase_queryPlanning_ms": 100 * k, "phase_triggerExecution_ms": 1000 * k,
                "peak_rss_bytes": 2**30, "live_heap_bytes": 2**29 + k * 2**22, "state_bytes": 1024 * k,
                "machine_cpu_s": 4 + k, **{m: k for m in ("jvm_cpu_s", "driver_cpu_s", "peak_heap_bytes")}}
    n = at.get("[ROWS n]: n")
    rate = 1000.0 if n is None else 300.0 / (1 + n / 1000)
    if n == 1000 and p.variant == TOP:
        rate /= 2
    if n is not None and at["aggregate"] == "aggregate per service":
        rate /= 1 + n / 50
    rows_in = 20_000.0
    return {"rows_per_s": rate, "rows_in": rows_in, "wall_s": rows_in / rate, "cpu_s": rows_in / rate,
            "rows_out": 7.0, "rows_expected": 7.0, "checksum": 1.0, "tuples_visible": 5600.0 if NARROW in p.variant
            else rows_in, "window_functions": 9.0 if p.variant == TOP else 2.0,
            "machine_cpu_s": rows_in / rate}


def test_the_declaration_compares_three_queries_sweeps_eight_windows_and_runs_levels_in_use():
    e = levels.experiment()
    throughput = [p for p in e.pipelines if p.params.get("throughput") == "yes"]
    assert sorted({p.params["query"] for p in throughput}) == [
        "aggregate [RANGE 1 min]", "aggregate [ROWS 100]", "selection"]
    assert {p.variant for p in throughput} == {"unsecured", TOP, NARROW}
    assert {p.reads for p in throughput if p.params["query"] != "aggregate [ROWS 100]"} == {("tuples, long input",)}
    swept = [p for p in e.pipelines if p.params.get("sweep") == "yes"]
    assert len({(p.params["aggregate"], p.params["window"]) for p in swept}) == 8
    assert {p.variant for p in swept} == {"unsecured", TOP}, "the narrow level stays out of the sweep"
    in_use = [p for p in e.pipelines if p.group == levels.IN_USE]
    assert [(p.variant, p.params["queries"]) for p in in_use] == [
        (levels.EACH, 1), (levels.EACH, 4), (levels.EACH, 16), (levels.SHARED, 4)]
    texts = [t.text for t in e.targets]
    assert texts[0].startswith("a single-level query keeps ≥ 0.9× the unsecured rows/s")
    assert any("16 levels in use cost at most 4×" in t for t in texts)
    assert sum("grows linearly with the levels in use" in t for t in texts) == 2
    assert [t.title.split(":")[0] for t in e.tables] == [
        "Throughput", "[ROWS n] against [RANGE d]", "Levels in use", "Micro-batch time by phase, summed over the "
        "processors' batches (ms)"]
    assert [p.name for p in e.plots] == ["throughput", "relative", "rows", "range", "in_use_time", "in_use_memory"]
    assert e.warmup and not levels.experiment(quick=True).warmup


def test_targets_and_observations_read_the_measurements():
    e = levels.experiment()
    measured = _runs(e, _made_up)
    verdicts = {t.text: t.check(measured) for t in e.targets}
    assert all(v.met for v in verdicts.values()), verdicts
    narrow = next(v for t, v in verdicts.items() if t.startswith("… and at a narrow level"))
    assert narrow.measured.startswith("sees 28 % of the tuples")
    sixteen = next(v for t, v in verdicts.items() if "16 levels" in t)
    assert sixteen.measured.startswith("4.0× (20.0 s vs 5.0 s")
    notes = e.explain(measured, {"tuples": 20_000, "tuples, long input": 80_000, "tuples, levels in use": 400_000})
    text = "\n".join(notes)
    assert "[ROWS 100] as over [RANGE 1 min]" in text
    assert "fall behind as n grows: 1.00× the unsecured rows/s at n = 10, 0.50× at n = 1000" in text
    assert "the physical plan has 9 window functions against 2 unsecured." in text
    assert "With GROUP BY" not in text, "one [ROWS n] per service only: no growth with n to tell"
    assert "One processor per level costs about 1.0 s of CPU time per level" in text
    assert "Sharing a processor is not cheaper here" in text
    assert "Other processes kept" not in text


def test_a_missing_measurement_is_not_measured_and_a_wrong_row_count_fails():
    quick = levels.experiment(quick=True)
    verdicts = {t.text: t.check(_runs(quick, _made_up)) for t in quick.targets}
    assert next(v for t, v in verdicts.items() if "16 levels" in t).met is None
    wrong = _runs(quick, lambda p: {**_made_up(p), "rows_out": 6.0} if p.variant == NARROW else _made_up(p))
    rows = next(t for t in quick.targets if t.text.startswith("every replay pipeline"))
    assert rows.check(wrong).met is False and rows.check(wrong).measured.startswith("6/9 pipelines agree")


def test_the_quick_workload_is_prepared_with_its_expected_rows_and_levels(tmp_path: Path):
    e = levels.experiment(quick=True)
    facts = e.workload.prepare(tmp_path)
    assert facts["tuples"] == facts["tuples, long input"] == facts["tuples, levels in use"] > 2000
    plan = json.loads((tmp_path / levels.PLAN).read_text())
    names = [p.name for p in e.pipelines]
    assert set(plan["expected"]) == {n for n in names if not n.startswith(levels.IN_USE)}
    assert plan["expected"]["aggregate [ROWS 100]/unsecured"] == facts["tuples"], "[ROWS n]: a row per tuple"
    assert 0 < plan["visible"][f"selection/{NARROW}"] < facts["tuples"]
    assert [len(plan["levels"][levels.in_use_name(k)]) for k in (1, 2, 4)] == [1, 2, 4]
    assert len(set(plan["levels"][levels.in_use_name(2, shared=True)])) == 1
