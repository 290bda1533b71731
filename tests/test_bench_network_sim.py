"""Experiment 5 as a suite declaration: its points, targets and tables, and a tiny real run."""

from __future__ import annotations

from pathlib import Path

from bench import network_sim
from bench.suite import report, runner


def test_every_point_is_a_pipeline_and_every_claim_a_target():
    e = network_sim.experiment()
    groups = [p.group for p in e.pipelines]
    assert (groups.count("fig8"), groups.count("fig9"), groups.count("sensitivity")) == (8, 4, 6)
    assert [p.params["sharing %"] for p in e.pipelines if p.group == "fig9"] == [20, 40, 60, 80]
    assert len(e.targets) == 8 and e.targets[-1].text.startswith("issue 5: 10,000 networks per point")
    assert [t.title.split(":")[0] for t in e.tables] == ["Fig. 8", "Fig. 9", "Fig. 9", "Sensitivity"]
    assert e.repeats == 1 and not e.warmup, "a seeded simulation gives the same numbers every run"
    assert network_sim.PAPER_LOSS_SAVINGS_PCT == {1: 19.0, 2: 38.0}  # bench/network_spark.py reads it


def test_a_tiny_run_gives_sane_numbers_and_verdicts(tmp_path: Path):
    results = runner.run(network_sim.experiment(events=20), workdir=tmp_path / "work", results_dir=tmp_path,
                         log=lambda _: None)
    runs = {p["name"]: p["runs"][0] for p in results["pipelines"]}
    point = runs["fig9/20%"]
    assert point["no_sharing_ms"] > point["switched_ms"] > point["shared_ms"] > 0
    assert 0 < point["lost 1 %"] < point["lost 2 %"] < point["loss q1+q2+q3 %"] < 100
    assert "loss q1 ms" not in runs["fig8/3 q, 15 ops/20%"], "Fig. 8's points price full access only"
    verdicts = [t["met"] for t in results["targets"]]
    assert all(v is not None for v in verdicts[:-1]) and verdicts[-1] is None, "20 networks: CPU target not judged"
    assert len(results["observations"]) == 2
    text = report.markdown(results)
    assert "| setting | sharing % | sharing realized |" in text and "| users | SPs paid |" in text


def test_runs_are_reproducible(tmp_path: Path):
    e = network_sim.experiment(events=5)
    first, second = (e.pipeline("fig8/5 q, 25 ops/60%").run.call(tmp_path, tmp_path) for _ in range(2))
    assert first == second


def test_the_simulators_docstring_examples():
    """bench/ is not among pytest's doctest paths: the simulator's examples run here."""
    import doctest

    from bench import network_simulator

    assert doctest.testmod(network_simulator).failed == 0
