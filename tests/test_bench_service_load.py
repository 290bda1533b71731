"""Experiment 8's declaration (bench.service_load): pipelines, targets, tables and observations,
checked on numbers made up here (no service is started)."""

from __future__ import annotations

import math
from collections import Counter

from bench import service_load as S
from bench.suite.experiment import Local, Measured


def _client_run(seconds: float = 60.0, errors: int = 0, slow_ms: float = 20.0) -> dict:
    """What the client process returns, made up: 100 GET rows, 3 SSE rows, 2 batches."""
    return {"seconds": seconds, "requests": 100 + errors, "rows_ms": [10.0] * 95 + [slow_ms] * 5,
            "rows_errors": Counter({"ReadTimeout": errors}) if errors else Counter(), "received": [50, 60, 70],
            "direct_ms": [0.1] * 10, "direct_received": [180], "health_ms": [2.0] * 10, "lag_ms": [0.5] * 10,
            "sse_delay_s": [0.2, 0.3, 0.4], "sse_events": 3, "sse_errors": Counter(), "sse_unresolved": 0,
            "sse_logged_s": [0.1] * 3, "logging_s": [0.1, 0.2], "sse_sensors": [(0, 101.0), (1, 101.5), (120, 102.0)],
            "cpu_s": 6.0, "wait_s": 1.0}


def _numbers(**client: float) -> dict[str, float]:
    cpu = {"tree": 90.0, "python": 30.0, "main": 9.0, "python_wait": 15.0, "main_wait": 6.0, "pressure": 30.0}
    posts = [(100.0, 100.03, 201), (100.5, 100.52, 201)]
    return {**S.summary(_client_run(**client), cpu, 60.0, posts, per_post=50), "load_start_1m": 1.0,
            "load_before_1m": 2.0, "load_after_1m": 3.0, "cpus": 2, "other_cores": 0.1, "audit_flush_s": 0.3,
            "pipelines": 10, "batches": 200, "last_batch_ms": 900.0, "served:ok": 100}


def test_the_quick_declaration_is_one_measured_life_of_the_service_run_once():
    quick = S.experiment(quick=True)
    assert [(p.name, p.group, p.variant) for p in quick.pipelines] == [("measured", "load", "measured run")]
    assert isinstance(quick.pipelines[0].run, Local)
    assert (quick.repeats, quick.warmup) == (1, False), "one life of the service each, no unrecorded warm-up"
    assert [p.name for p in S.experiment(events=123, quick=True).pipelines] == ["measured"], "events is ignored"
    assert [t.text for t in quick.targets] == [
        "issue 13: 50 concurrent clients reading rows and streams for 10 s: no errors",
        "issues 13 and 26: p99 of `GET rows` ≤ 50 ms",
        "issue 13: a row reaches an SSE client within 1 s of reaching its output",
        "issue 26: p99 from a provider's POST to the row at an SSE client ≤ 1 s"]


def test_the_full_declaration_has_the_three_diagnostics():
    full = S.experiment()
    assert [(p.name, p.group, p.variant) for p in full.pipelines] == [
        ("measured", "load", "measured run"), ("reniced", "diagnostic", "JVM at nice 19"),
        ("idle", "diagnostic", "no records"), ("quicker", "diagnostic", "trigger 0.25 seconds")]
    assert full.targets[0].text.endswith("for 60 s: no errors")
    assert {p.name for p in full.plots} == {"get_rows", "sse"}


def test_every_column_and_plot_reads_a_number_a_client_run_gives():
    numbers = _numbers()
    columns = [c for t in S.TABLES for c in t.columns] + [p.y for p in S.PLOTS]
    assert [c.metric for c in columns if c.metric not in numbers] == []
    assert numbers["rows_p99"] == 20.0 and numbers["requests_per_s"] == 100 / 60
    assert numbers["e2e_n"] == 2, "the third SSE row's POST was never sent"
    assert math.isclose(numbers["jvm_cores"], 1.0) and math.isclose(numbers["python_cores"], 0.5)


def test_targets_are_judged_on_a_full_run_only():
    targets = S.experiment().targets
    met = Measured({"measured": [_numbers()]})
    # the fake's rows of sensors 0 and 1 arrive 1.0 and 1.5 s after their POST: p99 1.50 s (rounded)
    assert [t.check(met).met for t in targets] == [True, True, True, False]
    assert targets[3].check(met).measured.startswith("p99 1.50 s over 3 rows (p50 1.25, max 1.50)")
    failed = Measured({"measured": [_numbers(errors=2, slow_ms=80.0)]})
    verdicts = [t.check(failed) for t in targets]
    assert [v.met for v in verdicts] == [False, False, True, False]
    assert "2 in 102 `GET rows` (ReadTimeout 2)" in verdicts[0].measured
    smoke = [t.check(Measured({"measured": [_numbers(seconds=10.0)]})) for t in targets]
    assert all(v.met is None and v.measured.endswith("(smoke run: not judged)") for v in smoke)
    assert targets[1].check(Measured({})).measured == "not measured"


def test_where_the_time_goes_is_explained_from_the_numbers():
    profile = {"gil_samples": 600, "gil_seconds": 20, "gil_rate": 100, "gil_loop:HTTP stack": 200,
               "gil_threads:token check (authenticate)": 400, "gil_leaf:token check (authenticate) | authenticate": 300}
    measured = Measured({"measured": [{**_numbers(), **profile}], "idle": [_numbers()]})
    notes = S.experiment().explain(measured, {})
    assert notes[0].startswith("HTTP against the files") and "reading the files is 1 % of the median" in notes[0]
    assert "the JVM with its Python workers 60.0 s" in notes[1] and "ok 100" in notes[1]
    assert any(n.startswith("Who holds the service's GIL under the same load") and "`authenticate` 50 %" in n
               for n in notes)
    assert notes[-1].startswith("With no records") and "300.0 ms of CPU per `GET rows`" in notes[-1]
