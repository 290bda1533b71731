"""Experiment 7's declaration (bench/network_engine.py): its pipelines, targets, tables and
observations, judged from made-up measurements (no Spark), and its workload prepared for real."""

from __future__ import annotations

from pathlib import Path

from bench import network_engine
from bench.engine_profile import PHASES
from bench.network_engine import QUICK, THREADS, experiment
from bench.suite.experiment import InProcess, Measured


def _numbers(group: str, variant: str) -> dict[str, float]:
    """Plausible numbers for one run of a pipeline: what its call returns."""
    if group == "latency":
        p50 = {"plain": 400.0, "run": 460.0, "network": 800.0, "plain ×3": 520.0}[variant]
        out = {"p50_ms": p50, "p90_ms": p50 * 1.4, "p95_ms": p50 * 1.5, "max_ms": p50 * 2, "samples": 10,
               "fastest_output_ms": p50 * 0.9, "slowest_output_ms": p50 * 1.1,
               **{f"phase ms: {p}": 50.0 for p in PHASES}}
        if variant == "network":
            out |= {"switch batches": 9, "switch ms": 360.0, "switch ms: readwriter.text": 190.0}
        return out
    if group == "steady":
        cpu = {"network": 11_000.0, "network, CQ2 off": 6_500.0, "network, CQ2 gone": 7_000.0, "separate": 9_400.0,
               "plain CQ1": 1_800.0, "plain CQ2": 3_400.0, "plain CQ3": 3_200.0}[variant]
        running = 3 if variant in ("network", "separate") else 2 if variant.startswith("network") else 1
        out = {"cpu_ms_per_file": cpu, "jvm_ms_per_file": cpu * 0.95, "driver_ms_per_file": cpu * 0.05,
               "workers_ms_per_file": 0.0, "jobs_per_file": 2.0 * running, "batches_per_file": 2.0 * running,
               "jobs_per_batch": 1.0, "queries_running": running, **{f"phase ms: {p}": 100.0 for p in PHASES},
               **{f"thread ms: {k}": cpu / len(THREADS) for k in THREADS}}
        if variant == "network, CQ2 off":
            out |= {"stops_by_itself": 1.0, "spawned": 3, "spawned: bash": 3}
        return out
    sec = variant == "secured network"
    out = {"records": 20_000, "records_per_s": 1_000.0 if sec else 3_000.0, "records_per_cpu_s": 1_100.0 if sec else
           5_400.0, "chunks_cpu_s": 18.0 if sec else 4.0, "chunks_wall_s": 20.0, "workers_cpu_s": 4.6 if sec else 0.0,
           "jobs": 21, "tasks": 33, "pipelines": 6 if sec else 3, "rows_out": 20_000, "delivered: gus/beats": 7_000,
           **{f"{q}: {k} ms": 800.0 for q in ("beats", "ward", "sends") for k in ("batch", "addBatch", "first batch")}}
    return out | {"other_cores": 0.2}


def _measured(quick: bool = False) -> Measured:
    e = experiment(quick=quick)
    return Measured({p.name: [_numbers(p.group, p.variant)] * 2 for p in e.pipelines},
                    {p.name: p.coordinates() for p in e.pipelines})


def test_every_configuration_is_one_in_process_pipeline():
    e = experiment()
    by_group: dict[str, list[str]] = {}
    for p in e.pipelines:
        by_group.setdefault(p.group, []).append(p.variant)
        assert isinstance(p.run, InProcess)
    assert by_group == {
        "latency": ["plain", "run", "network", "plain ×3"],
        "steady": ["network", "network, CQ2 off", "network, CQ2 gone", "separate", "plain CQ1", "plain CQ2",
                   "plain CQ3"],
        "mixed": ["secured network", "unsecured network", "plain"],
        "mixed alone": ["secured network", "unsecured network"] * 3}
    assert {p.params["query"] for p in e.pipelines if p.group == "mixed alone"} == {"beats", "ward", "sends"}
    assert (e.repeats, e.warmup) == (2, True), "each run measures many files: two rounds after a warm-up"
    quick = experiment(quick=True)
    assert (len(quick.pipelines), quick.repeats, quick.warmup) == (8, None, False)
    assert [p.name for p in experiment(events=123).pipelines] == [p.name for p in e.pipelines], "events: ignored"


def test_issue_12_targets_keep_their_claims_and_thresholds():
    texts = [t.text for t in experiment().targets]
    assert len(texts) == 8
    assert "`api.run` of the selection ≤ 1.5× a plain PySpark streaming query" in texts[0]
    assert "`NetworkRuntime`, three queries and three users (every user's output) ≤ 1.5×" in texts[1]
    assert "≤ 1.3× the CPU per micro-batch of its heaviest query" in texts[2]
    assert "≤ 0.5× the CPU of running its queries separately" in texts[3]
    assert "≤ 10 % of its cost when on" in texts[4]
    assert texts[5] == "at most 3 Spark jobs per micro-batch"
    assert "≥ 0.7× the throughput of the same queries unsecured" in texts[6]
    assert texts[7].startswith("a pipeline whose users were revoked stops by itself")


def test_targets_are_judged_from_what_the_pipelines_report():
    measured = _measured()
    verdicts = [t.check(measured) for t in experiment().targets]
    assert [v.met for v in verdicts] == [True, False, False, False, True, True, False, True]
    assert verdicts[0].measured == "1.15×: median 460 ms (p90 644) against 400 ms (p90 560)"
    assert "(plain CQ2, the heaviest of plain CQ1, plain CQ2, plain CQ3)" in verdicts[2].measured
    assert verdicts[4].measured.startswith("-12 %: CQ2 off -500 ms, on +4,000 ms")
    assert "against the plain queries 0.33×; per CPU second 0.20×" in verdicts[6].measured
    smoke = [t.check(_measured(quick=True)) for t in experiment(quick=True).targets]
    assert smoke[0].met is None and smoke[0].measured.endswith("(smoke run: not judged)")
    assert smoke[3].measured == "not measured", "no separate runs in the smoke version"
    assert "against the plain queries" not in smoke[6].measured
    assert smoke[7].met is True, "whether a revoked pipeline stops is judged in a smoke run too"


def test_tables_plots_and_observations_cover_the_three_parts():
    e = experiment()
    titles = [t.title for t in e.tables]
    assert titles[0] == "Latency" and "Each query alone in a network, secured and unsecured, over the same chunks" \
        in titles
    assert [p.name for p in e.plots] == ["latency", "steady", "mixed", "alone"]
    notes = e.explain(_measured(), {"cores": 2, "mixed chunks": 3})
    text = "\n".join(notes)
    for finding in ("With three selections at once, the plain queries' median was 520 ms against 400 ms",
                    "readwriter.text 190 ms", "as many as the separate runs (3)",
                    "the difference (-500 ms)", "the secured network ran 6 pipelines",
                    "beats 18.0 − 4.0 = +14.0 s", "kept 0.20 of its 2 cores busy"):
        assert finding in text, finding
    assert len(experiment(quick=True).explain(_measured(quick=True), {"cores": 2, "mixed chunks": 1})) >= 5


def test_the_quick_workload_is_prepared_in_files(tmp_path: Path):
    facts = experiment(quick=True).workload.prepare(tmp_path)
    assert facts["latency files"] == QUICK.latency_files and facts["Stream1 per steady file"] == 20
    assert facts["Ward per mixed chunk"] == 300
    assert len(list((tmp_path / "latency" / "Stream1").glob("part-*.jsonl"))) == 1 + 1 + 1
    assert len(list((tmp_path / "steady" / "Stream3").glob("part-*.jsonl"))) == 2 + QUICK.steady_files
    assert network_engine.heaviest_plain(Measured({}))[0] == "", "no plain query measured"
