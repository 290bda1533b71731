"""The benchmark suite's contract: sweeps of pure-Python pipelines, declared tables and plots,
ratios between variants, observations computed from the measurements."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import pytest

from bench.suite import report, runner
from bench.suite.experiment import (Column, Command, Experiment, Local, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload, statistic)


def _work(n: int, slow: bool):
    def call(work: Path, out: Path) -> dict[str, float]:
        total = sum(range(n * (20 if slow else 1)))
        return {"rows_out": n, "work_ms": (3.0 if slow else 1.0) * n, "checksum": float(total % 7)}
    return Local(call)


def _sweep() -> Experiment:
    pipelines = tuple(Pipeline(f"n={n}/{variant}", _work(n, variant == "slow"), "sweep", variant, ("items",),
                               params={"n": n})
                      for n in (10, 100, 1000) for variant in ("fast", "slow"))

    def explain(measured: Measured, facts) -> list[str]:
        ratio = measured.value("work_ms", n=1000, variant="slow") / measured.value("work_ms", n=1000, variant="fast")
        return [f"at n = 1000 the slow variant did {ratio:.1f}× the work over {facts['items']} items"]

    def slow_is_slower(measured: Measured) -> Verdict:
        value = measured.value("work_ms", n=100, variant="slow") / measured.value("work_ms", n=100, variant="fast")
        return Verdict(value > 1, f"{value:.1f}×")

    return Experiment(
        "sweep", "a sweep", Workload("items", lambda work: {"items": 5}), pipelines,
        (Target("slow does more work", slow_is_slower),),
        tables=(Table("work against n", ("n",), (Column("fast ms", "work_ms", "fast"),
                                                 Column("slow / fast", "work_ms", "slow", over="fast", unit="×"),
                                                 Column("slow p95 ms", "work_ms", "slow", stat="p95"))),),
        plots=(Plot("work", "work against n", "n", Column("work ms", "work_ms"), log_x=True,
                    also=(Column("checksum", "checksum"),), references={"a bound": 2000.0}),
               Plot("ratio", "slow over fast", "n", Column("slow / fast", "work_ms", "slow", over="fast"),
                    series=(), kind="bars")),
        explain=explain, repeats=2)


def test_a_sweep_of_local_pipelines_is_measured_tabled_plotted_and_explained(tmp_path: Path):
    results = runner.run(_sweep(), repeats=5, workdir=tmp_path / "work", results_dir=tmp_path, log=lambda _: None)
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["repeats"] == 2, "the experiment's own repeats prevail"
    assert [p["params"] for p in saved["pipelines"][:2]] == [{"n": 10}, {"n": 10}]
    assert all(len(p["runs"]) == 2 and p["runs"][0]["cpu_s"] >= 0 for p in saved["pipelines"])
    assert saved["targets"][0]["met"] is True
    assert saved["observations"] == ["at n = 1000 the slow variant did 3.0× the work over 5 items"]
    written = report.render(results, tmp_path)
    text = (tmp_path / "sweep.md").read_text()
    assert "| n | fast ms | slow / fast | slow p95 ms |" in text
    assert "| 1,000 | 1,000 | 3.00× | 3,000 |" in text
    assert "## Observations" in text and "rows in/s" not in text, "declared tables replace the default one"
    assert sorted(p.name for p in written) == ["sweep.md", "sweep_ratio.png", "sweep_work.png"]


def test_a_cell_whose_pipeline_is_missing_or_ambiguous_shows_a_dash(tmp_path: Path):
    results = runner.run(_sweep(), workdir=tmp_path / "w", results_dir=tmp_path, log=lambda _: None)
    row = [p for p in results["pipelines"] if p["params"]["n"] == 10]
    any_variant = dataclasses.asdict(Column("work", "work_ms"))
    assert report.cell(row, any_variant) != report.cell(row[:1], any_variant)
    assert math.isnan(report.cell(row, any_variant)), "two pipelines in the row: ambiguous"
    assert report.cell(row[:1], any_variant) == 10.0, "the fast pipeline's own work"
    missing = dataclasses.asdict(Column("work", "work_ms", "fast", over="absent"))
    assert math.isnan(report.cell(row, missing)), "a ratio over a variant the row lacks"
    table = dataclasses.asdict(Table("t", ("n",), (Column("fast / absent", "work_ms", "fast", over="absent"),)))
    assert "| 10 | — |" in report._table(results, table)


def test_declarations_are_checked_when_made():
    with pytest.raises(ValueError, match="stat must be one of"):
        Column("x", "wall_s", stat="average")
    with pytest.raises(ValueError, match="kind must be"):
        Plot("p", "t", "n", Column("x", "wall_s"), kind="pie")
    assert statistic([{"t": 1.0}] * 19 + [{"t": 9.0}], "t", "p95") == 1.0
    assert statistic([{"t": float(i)} for i in range(1, 101)], "t", "p95") == 95.0


def test_saved_runs_are_judged_anew_by_a_changed_declaration_without_measuring(tmp_path: Path):
    results = json.loads(json.dumps(runner.json_safe(
        runner.run(_sweep(), workdir=tmp_path / "w", results_dir=tmp_path, log=lambda _: None))))
    changed = dataclasses.replace(_sweep(), targets=(Target("worded anew", lambda m: Verdict(
        m.value("work_ms", n=10, variant="fast") == 10.0, "10 ms")),))
    rejudged = runner.rejudge(changed, results)
    assert rejudged["targets"] == [{"text": "worded anew", "met": True, "measured": "10 ms"}]
    assert rejudged["pipelines"] == results["pipelines"], "the runs are the saved ones"
    with pytest.raises(ValueError, match="other pipelines than the declaration"):
        runner.rejudge(dataclasses.replace(changed, pipelines=changed.pipelines[:2]), results)


def test_a_whole_process_is_charged_for_what_it_leaves_running(tmp_path: Path):
    """As PySpark's JVM outlives the Python that started it: the orphan's CPU still counts."""
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    parent = ("import subprocess, sys, json\n"
              f"subprocess.Popen([sys.executable, '-c', {burn!r}])\n"  # not waited for
              "print(json.dumps({'rows_out': 1}))")
    leaver = Experiment("leaver", "leaves a process running", Workload("nothing", lambda work: {"n": 1}),
                        (Pipeline("leaves", Command(lambda work, out: [sys.executable, "-c", parent]), "g", "v"),),
                        warmup=False)
    results = runner.run(leaver, repeats=1, workdir=tmp_path / "w", results_dir=tmp_path, log=lambda _: None)
    (run,) = results["pipelines"][0]["runs"]
    assert run["rows_out"] == 1 and run["cpu_s"] >= 0.35, run


def test_a_check_reads_what_a_run_wrote_outside_its_timing(tmp_path: Path):
    def writes(work: Path, out: Path) -> int:
        out.mkdir(parents=True)
        (out / "rows.txt").write_text("a\nb\n")
        return 2

    def check(work: Path, out: Path) -> dict[str, float]:
        end = time.process_time() + 0.3  # a slow verification must not count as the run's work
        while time.process_time() < end:
            pass
        return {"lines": float(len((out / "rows.txt").read_text().splitlines()))}

    checked = Experiment("checked", "a checked run", Workload("nothing", lambda work: {"n": 1}),
                         (Pipeline("writes", Local(writes), "g", "v", check=check),), warmup=False)
    results = runner.run(checked, repeats=1, workdir=tmp_path / "w", results_dir=tmp_path, log=lambda _: None)
    (run,) = results["pipelines"][0]["runs"]
    assert run["lines"] == 2 and run["rows_out"] == 2
    assert run["cpu_s"] < 0.2 and run["wall_s"] < 0.2, run
    assert not (tmp_path / "w" / "out" / "writes").exists(), "the output is deleted after the check"
