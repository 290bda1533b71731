"""Experiment 2's declaration (bench/runtime.py): its sweep, targets, tables and plots, its workload's
point facts, and its targets and observations judged on made-up measurements (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import runtime
from bench.suite.experiment import Measured


def test_the_sweep_has_every_kind_on_the_window_sweep_and_all_but_push_down_on_the_selectivity_sweep():
    e = runtime.experiment()
    assert len({p.name for p in e.pipelines}) == len(e.pipelines) == 2 * (4 * 5 + 8 * 4)
    points = {(p.params["data"], p.params["s"], p.params["window s"]) for p in e.pipelines}
    assert ("uni", 0.5, 120) in points and ("norm", 0.9, 30) in points and ("uni", 0.9, 120) not in points
    pushed = {p.params["s"] for p in e.pipelines if p.variant == "post-filtering, pushed down"}
    assert pushed == {0.5}
    rewritten = e.pipeline("norm s=0.3 w=30/rewritten")
    assert rewritten.group == "norm" and rewritten.reads == ("Position", "normHealth") and e.warmup


def test_targets_tables_and_plots_keep_the_old_reports_claims():
    e = runtime.experiment()
    texts = [t.text for t in e.targets]
    assert "issue: secured ≥ 0.9× the unsecured query's input rows per second, at every point" in texts
    assert any("1.5× faster than post-filtering at s = 0.5, window 120 s" in t for t in texts)
    assert sum(t.startswith("paper, Fig. 9") for t in texts) == 4 and "exact count" in texts[-1]
    assert [dict(t.where) for t in e.tables] == [{"window s": 30}, {"s": 0.5}, {"window s": 30}]
    relative = [c for t in e.tables for c in t.columns if c.over == "post-filtering"]
    assert {c.metric for c in relative} >= {"window_pairs", "key_pairs", "executor_cpu_s", "join_state_bytes"}
    assert [p.name for p in e.plots] == ["relative_joins", "relative_cpu", "relative_memory", "throughput_window",
                                         "throughput_selectivity"]


def test_events_scale_the_soldiers_and_quick_is_small():
    assert "100 soldiers × 10 min" in runtime.experiment(events=30_000).workload.description
    quick = runtime.experiment(quick=True)
    assert len(quick.pipelines) == 28 and not quick.warmup and "window 30 s" in quick.targets[1].text


def test_the_workload_writes_each_points_policies_and_pair_counts(tmp_path: Path):
    e = runtime.experiment(events=3_000, quick=True)  # 20 soldiers × 5 min
    facts = e.workload.prepare(tmp_path)
    assert facts == {"Position": 3_000, "Health": 3_000, "normHealth": 3_000}
    points = json.loads((tmp_path / runtime.POINTS).read_text())
    point = points["norm s=0.5 w=10"]
    assert point["policies"]["health_stream"] == "normHealth" and point["rows"]["in"] == 6_000
    assert point["secured"]["window_pairs"] < point["everything"]["window_pairs"]


def _made_up(quick: runtime.Experiment, slow_post: float, rewritten_cpu: float) -> Measured:
    """Runs for every pipeline of ``quick``: post-filtering ``slow_post`` times slower than the others."""
    runs = {}
    for p in quick.pipelines:
        prunes = p.variant.startswith("rewritten")  # its join gets only the policies' survivors
        exec_s = 0.2 * (slow_post if p.variant == "post-filtering" else 1.0)
        runs[p.name] = [{
            "wall_s": exec_s + 0.5, "exec_s": exec_s, "exec_rows_per_s": 1000 / exec_s, "rows_out": 10.0,
            "expected_rows": 10.0, "window_pairs": 25.0 if prunes else 100.0,
            "key_pairs": 30.0, "executor_cpu_s": rewritten_cpu * p.params["window s"] / 30
            if p.variant == "rewritten" else 1.0, "join_state_bytes": 90.0 if prunes else 100.0,
            "join_input_rows": 40.0, "position_selectivity": 0.5, "health_selectivity": 0.5, "peak_heap_bytes": 1.0,
            "broadcast_joins": 1.0, "lambda_functions": 0.0}]
    return Measured(runs, {p.name: p.coordinates() for p in quick.pipelines})


def test_targets_and_observations_are_judged_from_the_measurements():
    quick = runtime.experiment(quick=True)
    verdicts = [t.check(_made_up(quick, 2.0, 0.5)) for t in quick.targets]
    assert [v.met for v in verdicts] == [True, True, True, True, False, True, True]
    assert verdicts[1].measured == "uni: 2.00×, norm: 2.00×"
    assert verdicts[2].measured == "max 25 % (window pairs)"
    assert verdicts[4].measured == "uni: 17 % → 50 %; norm: 17 % → 50 %", "rewritten CPU grows with the window"
    slow = quick.targets[1].check(_made_up(quick, 1.2, 0.5))
    assert slow.met is False and slow.measured.startswith("uni: 1.20×")
    notes = runtime.explain(_made_up(quick, 2.0, 0.5), {})
    assert any(n.startswith("Spark's optimizer on its own") for n in notes)
    assert any("rather than falling steadily" in n for n in notes) and "BroadcastHashJoin" in notes[-1]
    assert runtime.experiment(quick=True).targets[0].check(Measured({})).met is None
