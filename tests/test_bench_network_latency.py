"""The network_latency experiment: its workload, its driver (fed, watched, reaped: tried on a small
Python pipeline standing in for Spark), its checks, targets and observations. No Spark here:
``python -m bench.suite network_latency --quick`` runs the real pipelines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench import network_latency as L
from bench import network_latency_drive as D
from bench.suite.experiment import Command, Measured
from bench.suite.registry import EXPERIMENTS, declaration
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.registry import own_id
from streamwarden.catalog.store import sqlite_url

REPO = Path(__file__).resolve().parent.parent
TINY = L.Sizes(users=(4,), compare=4, rate=10_000, interval_s=0.1, warmup_files=2, measured_s=1, judged=False)


def test_the_declaration_full_and_quick() -> None:
    assert EXPERIMENTS["network_latency"] == "bench.network_latency:experiment"
    assert declaration("network_latency") is L.experiment
    full = L.experiment()
    assert [(p.name, p.group, p.variant) for p in full.pipelines] == [
        ("network-10", "network", "network run"), ("plain-10", "plain", "plain PySpark"),
        ("network-1000", "network", "network run")]
    assert all(isinstance(p.run, Command) and p.check is not None for p in full.pipelines)
    assert "2,000 readings per second" in full.workload.description and not full.warmup
    quick = L.experiment(quick=True)
    assert [p.name for p in quick.pipelines] == ["network-20", "plain-20"]
    assert L.experiment(events=500, quick=True).title.endswith("(500 readings/s)")
    assert [p.name for p in quick.plots] == ["latency", "split"] and len(quick.targets) == 4
    with pytest.raises(ValueError, match="compared size 7"):
        L._pipelines(replace(TINY, compare=7))


def test_each_query_passes_about_one_percent_of_its_wards_readings() -> None:
    listed = L.users(22)
    assert {u["above"] for u in listed} == {round(98.95 + k / 100, 2) for k in range(11)}
    assert L.query_text(listed[0]) == "SELECT ts, sensor, value FROM Readings WHERE value > 98.95"
    rows = [r for k in range(20) for r in L.feed_file(k, 2000, 1.0)]
    ward = [r["value"] for r in rows if r["ward"] == "w0"]
    assert len(rows) == 40_000 and len(ward) == 4_000
    for above in (98.95, 99.05):
        assert 0.006 < sum(v > above for v in ward) / len(ward) < 0.015
    counts, digests = L.expected([L.feed_file(0, 2000, 1.0)], listed[:2])
    assert counts["u0000"][0] == sum(1 for r in L.feed_file(0, 2000, 1.0) if r["ward"] == "w0" and r["value"] > 98.95)
    assert digests["u0000"][0] == counts["u0000"][0]


def test_the_workload_prepares_files_plans_and_a_store(tmp_path: Path) -> None:
    facts = L._workload(TINY).prepare(tmp_path)
    assert facts["files"] == 12 and facts["readings per file"] == 1000 and facts["readings"] == 12_000
    plan = json.loads((tmp_path / "n4" / "plan.json").read_text())
    assert plan["warmup"] == 2 and plan["interval_s"] == 0.1 and len(plan["names"]) == 12
    assert [u["query"] for u in plan["users"]] == [own_id(f"u000{i}", "q1") for i in range(4)]
    assert sum(sum(c) for c in plan["counts"].values()) == facts["expected rows 4"] > 0
    server = AuthorizationServer(sqlite_url(tmp_path / "n4" / "store" / "store.db"))
    registered = {q.id: q for q in server.registrations()}
    assert registered[own_id("u0001", "q1")].query == "SELECT ts, sensor, value FROM Readings WHERE value > 98.96"
    assert registered[own_id("u0001", "q1")].owner == "u0001"


def test_the_command_lines(tmp_path: Path) -> None:
    e = L.experiment(quick=True)
    (tmp_path / "n20" / "store").mkdir(parents=True)
    (tmp_path / "n20" / "store" / "store.db").write_text("")
    out = tmp_path / "out" / "network-20"
    network, plain = (e.pipeline(name).run for name in ("network-20", "plain-20"))
    assert isinstance(network, Command) and isinstance(plain, Command)
    run = [str(a) for a in network.argv(tmp_path, out)]
    child = run[run.index("--") + 1:]
    assert run[1:4] == ["-m", "bench.network_latency_drive", str(tmp_path / "n20" / "plan.json")]
    assert child[0].endswith("streamwarden") and child[1:3] == ["network", "run"] and "--available-now" not in child
    assert child[child.index("--trigger") + 1] == "1000 milliseconds"
    assert (out / "in" / "Readings").is_dir() and (out / "store" / "store.db").exists()
    argv = [str(a) for a in plain.argv(tmp_path, tmp_path / "out" / "plain-20")]
    child = argv[argv.index("--") + 1:]
    assert child[1:3] == ["-m", "bench.network_latency_plain"] and child[-2] == "1000"
    assert json.loads(child[-1])["spark.sql.session.timeZone"] == "UTC", "streamwarden's settings, for plain too"


def _log(path: Path, *rows: int, partial: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write("".join(json.dumps({"batch": f"batch={i}", "rows": n}) + "\n" for i, n in enumerate(rows)))
        handle.write(partial)


def test_the_watch_notes_when_each_user_has_each_files_rows(tmp_path: Path) -> None:
    logs = {"a": tmp_path / "a" / D.LOG, "b": tmp_path / "b" / D.LOG}
    watch = D.Watch(logs, {"a": [2, 0, 1], "b": [0, 3, 1]})
    watch.sweep(3)
    assert watch.pending(3) == 2 and watch.pending(1) == 1, "b has no rows of file 0"
    _log(logs["a"], 2, partial='{"batch": "batch=1", "ro')  # a line being written is not read yet
    watch.sweep(3)
    assert set(watch.seen["a"]) == {0} and watch.pending(3) == 2
    _log(logs["b"], 3, 1)
    watch.sweep(2)  # only file 0 and 1 landed: b reaches file 1 now, file 2 is not looked for
    assert set(watch.seen["b"]) == {1, 2} and watch.pending(2) == 0
    with open(logs["a"], "a") as handle:
        handle.write('ws": 1}\n')
    assert watch.until(3, deadline=0.0) and set(watch.seen["a"]) == {0, 2} and watch.delivered() == 7


def test_the_checkpoint_says_when_each_batch_ran_and_what_it_read(tmp_path: Path) -> None:
    cp = tmp_path / "out" / "store" / "checkpoints" / "x" / ".groups" / "g" / "spark"
    for folder in ("offsets", "commits", "sources/0"):
        (cp / folder).mkdir(parents=True)
    for batch, start, end in ((0, 100.0, 101.0), (1, 102.0, None)):
        (cp / "offsets" / str(batch)).write_text("v1\n{}\n")
        os.utime(cp / "offsets" / str(batch), (start, start))
        if end is not None:
            (cp / "commits" / str(batch)).write_text("v1\n")
            os.utime(cp / "commits" / str(batch), (end, end))
    (cp / "sources" / "0" / "0").write_text('v1\n{"path":"file:///in/part-00000.jsonl","batchId":0}\n')
    (cp / "sources" / "0" / "1.compact").write_text(
        'v1\n{"path":"file:///in/part-00000.jsonl","batchId":0}\n{"path":"file:///in/part%2000001.jsonl","batchId":1}\n')
    (tmp_path / "out" / "rows" / "u" / "offsets").mkdir(parents=True)  # a user's folder is no checkpoint
    assert D.checkpoints(tmp_path / "out", tmp_path / "out" / "rows") == [cp]
    batches = D.spark_batches(cp)
    assert batches == {0: D.Batch(100.0, 101.0, ("part-00000.jsonl",)), 1: D.Batch(102.0, None, ("part 00001.jsonl",))}
    counted = D.batch_numbers(batches, 99.0, 200.0)
    assert counted["batches"] == 2 and counted["batch_p50_s"] == 1.0 and counted["batch_gap_p50_s"] == 1.0


def test_a_file_never_reaching_a_user_is_missing_not_fast() -> None:
    watch = D.Watch({"a": Path("a"), "b": Path("b")}, {"a": [1, 1, 0], "b": [1, 1, 0]})
    watch.seen = {"a": {0: 1.5, 1: 2.5}, "b": {0: 1.2}}
    s = D.summary(watch, {0: 1.0, 1: 2.0, 2: 3.0}, [0, 1, 2], {}, {})
    assert s["files"] == 2 and s["missing"] == 1 and s["p50_s"] == 0.5, "file 2 reaches nobody: no latency"
    assert D.summary(watch, {0: 1.0}, [0, 1], {}, {})["missing"] == 1, "a file that never landed is missing"


def test_the_feeder_stages_beside_the_folder_and_renames_in(tmp_path: Path) -> None:
    feed, target = tmp_path / "feed", tmp_path / "in" / "Readings"
    feed.mkdir()
    target.mkdir(parents=True)
    files = [feed / f"part-{k}.jsonl" for k in range(3)]
    for f in files:
        f.write_text('{"x": 1}\n')
    feeder = D.Feeder(files, [0.0, 0.0, 0.0], tmp_path / "in" / ".staged", target)  # moments past: no waiting
    feeder.run()
    assert feeder.failure is None and sorted(feeder.landed) == [0, 1, 2]
    assert sorted(p.name for p in target.iterdir()) == [f.name for f in files] and not list((tmp_path / "in" /
                                                                                             ".staged").iterdir())


#: A pipeline standing in for Spark: reads each file landing in its input folder, delivers every
#: user's rows of it in the network's layout and logs a Spark-like checkpoint; stops on SIGTERM.
FAKE = r"""
import json, pathlib, signal, sys, time
inp, queries, out = map(pathlib.Path, sys.argv[1:4])
qs = json.loads(queries.read_text())
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
cp = out.parent / "checkpoint"
for folder in ("offsets", "commits", "sources/0"):
    (cp / folder).mkdir(parents=True, exist_ok=True)
print("fake running as 1 pipelines", file=sys.stderr, flush=True)
seen, batch = set(), 0
while not stopping:
    new = sorted(p for p in inp.iterdir() if p.name not in seen)
    if new:
        (cp / "offsets" / str(batch)).write_text("v1\n")
        (cp / "sources" / "0" / str(batch)).write_text("v1\n" + "".join(
            json.dumps({"path": p.as_uri(), "batchId": batch}) + "\n" for p in new))
        rows = [json.loads(line) for p in new for line in p.read_text().splitlines()]
        seen.update(p.name for p in new)
        for q in qs:
            mine = [r for r in rows if r["ward"] == q["ward"] and r["value"] > q["above"]]
            if mine:
                d = out / q["user"] / q["query"]
                (d / f"batch={batch}").mkdir(parents=True)
                (d / f"batch={batch}" / "part-0.txt").write_text("".join(json.dumps(
                    {"ts": r["ts"], "sensor": r["sensor"], "value": r["value"], "_policies": ["ward"]}) + "\n"
                    for r in mine))
                with open(d / "_delivered.jsonl", "a") as log:
                    log.write(json.dumps({"batch": f"batch={batch}", "rows": len(mine)}) + "\n")
        (cp / "commits" / str(batch)).write_text("v1\n")
        batch += 1
    time.sleep(0.01)
print(json.dumps({"rows_out": 0}))
"""


def _drive(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    (out / "in" / "Readings").mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "bench.network_latency_drive", str(tmp_path / "n4" / "plan.json"),
                           "--input", str(out / "in" / "Readings"), "--out", str(out), "--start-timeout", "60",
                           "--drain-timeout", "30", "--", *command], cwd=REPO, capture_output=True, text=True,
                          timeout=180)


def test_the_driver_feeds_watches_stops_and_reaps_a_pipeline(tmp_path: Path) -> None:
    facts = L._workload(TINY).prepare(tmp_path)
    done = _drive(tmp_path, sys.executable, "-c", FAKE, str(tmp_path / "out" / "in" / "Readings"),
                  str(tmp_path / "n4" / "queries.json"), str(tmp_path / "out" / "rows"))
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["rows_out"] == facts["expected rows 4"] and line["drained"] == 1 and line["missing"] == 0
    assert line["files"] == 10 and line["pipelines"] == 1 and 0 < line["p50_s"] <= line["p99_s"] <= line["max_s"]
    assert line["spark_queries"] == 1 and line["batches"] >= 1 and line["files_per_batch"] >= 1
    assert line["wait_s"] >= 0 and line["command_cpu_s"] > 0 and line["subreaper"] == 1
    check = L.received(4)(tmp_path, tmp_path / "out")
    assert check["users_wrong"] == 0 and check["users_right"] == 4 and check["rows_checked"] == line["rows_out"]
    first = next((tmp_path / "out" / "rows").glob("*/*/batch=*/part-0.txt"))
    first.write_text(first.read_text().replace('"value": ', '"value": 1', 1))
    assert L.received(4)(tmp_path, tmp_path / "out")["users_wrong"] == 1, "a changed row is caught"
    (tmp_path / "out" / "rows" / "mallory" / "q" / "batch=0").mkdir(parents=True)
    (tmp_path / "out" / "rows" / "mallory" / "q" / "batch=0" / "part-0.txt").write_text("{}\n")
    assert L.received(4)(tmp_path, tmp_path / "out")["stray_files"] == 1


def test_the_driver_says_in_one_line_why_a_pipeline_did_not_start(tmp_path: Path) -> None:
    L._workload(TINY).prepare(tmp_path)
    done = _drive(tmp_path, sys.executable, "-c", "import sys; print('error: no such store', file=sys.stderr); "
                                                  "sys.exit(2)")
    assert done.returncode == 1 and "did not start" in done.stderr and "error: no such store" in done.stderr
    assert "Traceback" not in done.stderr


def _runs(**numbers: float) -> list[dict[str, float]]:
    base = {"p50_s": 1.5, "p99_s": 4.0, "files": 60.0, "missing": 0.0, "users_wrong": 0.0, "drained": 1.0}
    return [{**base, **numbers}] * 3


def test_the_targets_judge_the_full_form_only() -> None:
    e = L.experiment()
    coordinates = {p.name: p.coordinates() for p in e.pipelines}
    runs = {"network-1000": _runs(), "network-10": _runs(p50_s=1.2, p99_s=2.0), "plain-10": _runs(p50_s=1.0)}
    measured = Measured(runs, coordinates, {"cores": 2})
    p50, p99, ratio, rows = (t.check(measured) for t in e.targets)
    assert p50.met is True and p50.measured == "1.50 s (median of 3 runs, 1.50-1.50 s; 60 files per run)"
    assert p99.met is True and ratio.met is True and ratio.measured.startswith("1.20×: p50 1.20 s against 1.00 s")
    assert rows.met is True and rows.measured == "9 runs: every user got exactly her rows"
    runs["network-1000"] = _runs(p50_s=2.5, missing=1.0, users_wrong=3.0)
    p50, _, _, rows = (t.check(measured) for t in e.targets)
    assert p50.met is False and "1 never reached every user" in p50.measured
    assert rows.met is False and "network-1000 run 1: 3 user(s) with other rows" in rows.measured
    runs["network-1000"] = _runs(stray_files=2.0)
    assert "network-1000 run 1: 2 file(s) of rows for no known user" in e.targets[3].check(measured).measured
    quick = L.experiment(quick=True)
    coordinates = {p.name: p.coordinates() for p in quick.pipelines}
    verdicts = [t.check(Measured({"network-20": _runs(), "plain-20": _runs()}, coordinates)) for t in quick.targets]
    assert [v.met for v in verdicts] == [None, None, None, True] and "not judged" in verdicts[0].measured
    assert e.targets[0].check(Measured({}, coordinates)).met is None


def test_the_observations_say_where_the_time_goes() -> None:
    e = L.experiment()
    coordinates = {p.name: p.coordinates() for p in e.pipelines}
    parts = {"wait_s": 0.5, "to_first_s": 3.0, "fanout_s": 1.0, "batch_p50_s": 2.5, "files_per_batch": 3.0,
             "cores_used": 1.9, "watcher_cpu_s": 0.6, "window_s": 60.0, "load": 2.5}
    runs = {"network-1000": _runs(**parts), "plain-10": _runs(**parts),
            "network-10": _runs(**{**parts, "batch_p50_s": 0.8}, python_cpu_per_batch_s=0.25)}
    facts = {"cores": 2, "trigger ms": 1000, "interval ms": 1000}
    assert e.explain is not None
    said = e.explain(Measured(runs, coordinates, facts), facts)
    assert said[0].startswith("network run, 10 users: a file reached its first user after nan s and every user "
                              "after 1.50 s (p50; p99 4.00 s") and said[1].startswith("plain PySpark, 10 users")
    assert said[2].startswith("network run, 1,000 users:") and "3.00 s from the batch's start to its first" in said[2]
    assert said[3].startswith("At 1,000 users, the largest part is its micro-batch until the first user")
    assert "longer than the 1 s between files" in said[3] and "the 2 cores are saturated" in said[3]
    assert said[4].startswith("At 10 users, the network against plain PySpark: latency p50 1.50 s against 1.50 s; "
                              "a micro-batch 0.80 s against 2.50 s") and "Python 0.250 s against nan s" in said[4]
    assert "1.0 % of one core" in said[5] and said[-1].startswith("Machine load")
    runs["network-1000"] = _runs(**{**parts, "cores_used": 0.6, "load": 9.0})
    assert "kept only 0.60 of the 2 cores busy while the machine's load was 9.0: it waited for the CPU" in \
        e.explain(Measured(runs, coordinates, facts), facts)[3]


def test_the_docstring_examples() -> None:
    import doctest

    from bench import network_latency_plain

    for module in (L, D, network_latency_plain):
        assert doctest.testmod(module).failed == 0, module.__name__
