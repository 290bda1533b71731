"""Experiment 6's declaration (bench/network_spark.py): its configurations, targets, tables and
observations, judged on made-up measurements (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.network_spark import _digest, experiment, explain
from bench.suite.experiment import Measured

LISTED = [("dr_lee", "CQ1"), ("nurse_kim", "CQ1"), ("dr_lee", "CQ2"), ("wellness_app", "CQ2"),
          ("nurse_kim", "CQ3"), ("wellness_app", "CQ3")]


def _run(cpu: float, targets: dict[str, float]) -> dict[str, float]:
    got = {f"rows {t}": float(n) for t, n in targets.items()} | {f"digest {t}": 1000.0 + n for t, n in targets.items()}
    return {"cpu_s": cpu, "wall_s": cpu / 2, "queries_started": 3, "jobs": 6, "tasks": 24, "codegen_compiles": 30,
            "jit_s": 4.0, "driver_cpu_s": 1.0, "rows_out": sum(targets.values()), **got}


def _measured(runs: int = 3, lost_cq1_rows: int = 0) -> Measured:
    """Network 4 s CPU, CQ2 lost 3 s (25 % saved), CQ2+CQ3 lost 3.6 s (10 %), separate 10 s, plain 8 s."""
    per_query = {"CQ1": 5, "CQ2": 7, "CQ3": 9}
    network = {f"{u}/{q}": per_query[q] for u, q in LISTED}

    def lossy(lost: set[str]) -> dict[str, float]:
        return {t: (0 if t.split("/")[1] in lost else n) for t, n in network.items()} | (
            {"dr_lee/CQ1": lost_cq1_rows} if lost_cq1_rows else {})

    by_pipeline = {"network": _run(4.0, network), "network-CQ2-lost": _run(3.0, lossy({"CQ2"})),
                   "network-CQ2-CQ3-lost": _run(3.6, lossy({"CQ2", "CQ3"})),
                   "separate": _run(10.0, per_query), "plain": _run(8.0, per_query)}
    e = experiment()
    return Measured({name: [run] * runs for name, run in by_pipeline.items()},
                    {p.name: p.coordinates() for p in e.pipelines})


def test_every_configuration_is_a_pipeline_reading_the_three_streams():
    e = experiment()
    assert [p.name for p in e.pipelines] == ["network", "network-CQ2-lost", "network-CQ2-CQ3-lost", "separate",
                                             "plain"]
    assert [p.variant for p in e.pipelines][1:3] == ["network, CQ2 lost", "network, CQ2 & CQ3 lost"]
    assert [p.group for p in e.pipelines] == ["network", "network", "network", "separate", "plain"]
    assert [p.params["queries lost"] for p in e.pipelines] == [0, 1, 2, 0, 0]
    assert all(p.reads == ("Stream1", "Stream2", "Stream3") for p in e.pipelines)
    quick = experiment(quick=True)
    assert [p.name for p in quick.pipelines] == ["network", "network-CQ2-lost", "separate", "plain"]
    assert not quick.warmup and e.warmup and len(quick.targets) == 3


def test_targets_keep_the_issue_and_paper_thresholds():
    texts = [t.text for t in experiment().targets]
    assert texts[0].startswith("the shared network uses < 0.5× the CPU of one Spark query per query")
    assert "1 of 3 queries lose access (paper: about 19 %" in texts[1]
    assert "2 of 3 queries lose access (paper: about 38 %" in texts[2]
    assert texts[3].startswith("every user receives the rows of their query")


def test_targets_are_judged_from_the_measurements():
    verdicts = [t.check(_measured()) for t in experiment().targets]
    assert [v.met for v in verdicts] == [True, True, False, True]
    assert verdicts[0].measured.startswith("0.40× (4.0 s vs 10.0 s; per round: 0.40×, 0.40×, 0.40×)")
    assert verdicts[1].measured == "CQ2 lost: 25.0 % (3 of 3 pipelines started)"
    assert verdicts[3].measured == "all rows as expected"
    one_run = [t.check(_measured(runs=1)) for t in experiment().targets]
    assert [v.met for v in one_run] == [None, None, None, True], "a smoke run's performance is not judged"
    leaked = experiment().targets[3].check(_measured(lost_cq1_rows=3))
    assert leaked.met is False and leaked.measured == "others keep their rows"
    assert experiment().targets[0].check(Measured({})).met is None


def test_tables_and_plot_show_every_configuration_and_the_ratios():
    e = experiment()
    configurations, relative, threads = e.tables
    assert configurations.rows == ("configuration",) and threads.rows == ("configuration",)
    assert {"cpu_s", "jvm_cpu_s", "rows_out", "jobs", "codegen_compiles", "check_cpu_s"} <= {
        c.metric for c in configurations.columns}
    assert [(c.variant, c.over) for c in relative.columns][:2] == [("network", "separate"), ("network", "plain")]
    assert relative.columns[-1].variant == "network, CQ2 & CQ3 lost" and relative.columns[-1].over == "network"
    assert threads.columns[0].metric == "jvm tasks s" and threads.columns[-1].title == "child processes"
    cpu, loss = e.plots
    assert (cpu.x, cpu.y.metric) == ("configuration", "cpu_s")
    assert [c.metric for c in cpu.also] == ["jvm_cpu_s", "driver_cpu_s"]
    assert (loss.x, loss.y.metric, loss.where) == ("queries lost", "cpu_s", {"group": "network"})


def test_observations_say_where_the_cpu_goes():
    notes = explain(_measured(), {})
    assert len(notes) == 3
    assert "Measured: 0.40× their CPU and 0.50× the plain queries' (8.0 s)" in notes[0]
    assert notes[1].startswith("CQ2 lost (users granted") and "25.0 % CPU saved" in notes[1]
    assert "Every pipeline ran" in notes[2]


def test_the_workload_scales_with_events(tmp_path: Path):
    facts = experiment(events=200).workload.prepare(tmp_path)
    assert facts == {"Stream1": 120, "Stream2": 120, "Stream3": 20, "minutes": 2}
    assert (tmp_path / "in" / "Stream3" / "part-00000.jsonl").exists()


def test_the_digest_is_of_the_projected_multiset(tmp_path: Path):
    rows = [{"streamid": 1, "heartRate": 90}, {"streamid": 2, "heartRate": 80}, {"streamid": 1, "heartRate": 90}]
    a, b, empty = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "empty.json"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows))
    b.write_text("".join(json.dumps({**r, "_graph": "g"}) + "\n" for r in reversed(rows)))
    empty.write_text("")
    assert _digest([a], "CQ1") == _digest([b, empty], "CQ1") and _digest([a], "CQ1")[0] == 3
    assert _digest([a], "CQ1") != _digest([a, a], "CQ1")
    assert _digest([empty], "CQ1") == (0, 0)
