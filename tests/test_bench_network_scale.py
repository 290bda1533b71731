"""The network_scale experiment's declaration: its workload, processes, checks, targets and
observations (no Spark: the launcher is tried on small Python children)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import network_scale as S
from bench.suite.__main__ import main as suite_main
from bench.suite.experiment import Command, Measured
from bench.suite.registry import EXPERIMENTS, declaration
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.registry import own_id
from streamwarden.catalog.store import sqlite_url

REPO = Path(__file__).resolve().parent.parent


def test_sizes_pipelines_and_groups() -> None:
    assert EXPERIMENTS["network_scale"] == "bench.network_scale:experiment"
    assert declaration("network_scale") is S.experiment
    sizes = lambda e: sorted({int(p.params["queries"]) for p in e.pipelines})  # noqa: E731
    assert sizes(S.experiment()) == [1, 16, 64] and sizes(S.experiment(full=True)) == [1, 16, 64, 256, 1024]
    quick = S.experiment(quick=True)
    assert sizes(quick) == [1, 4] and "20,000 seeded readings" in quick.workload.description
    assert [(p.name, p.group, p.variant) for p in quick.pipelines[:4]] == [
        ("run-1", "run", "network run"), ("hand-1", "hand", "by hand"),
        ("hand-data-1", "hand-data", "by hand, queries as data"), ("replay-1", "replay", "network replay")]
    assert all(isinstance(p.run, Command) and p.reads == ("readings",) and p.check is not None
               for p in quick.pipelines)
    assert not quick.warmup and [p.name for p in quick.plots] == ["cpu", "wall"]
    assert quick.plots[0].log and quick.plots[0].log_x and quick.plots[0].x == "queries"
    assert [p.group for p in quick.only(["run", "hand"]).pipelines] == ["run", "hand"] * 2


def test_users_and_their_queries() -> None:
    listed = S.users(8)
    assert [u["kind"] for u in listed] == ["select"] * 3 + ["avg"] + ["select"] * 3 + ["avg"]
    assert [u["ward"] for u in listed[:3]] == ["w0", "w1", "w2"] and S.users(11)[10]["ward"] == "w0"
    assert {u["above"] for u in S.users(9)} == {94.0 + k / 2 for k in range(9)}
    assert S._query_text(listed[0]) == "SELECT sensor, value FROM Readings WHERE value > 94.0"
    assert S._query_text(listed[3]) == "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]"
    catalog = S.catalog_text(listed[:2])
    assert "u0001: {roles: [Reader], profile: {ward: w1}}" in catalog and "Readings.ward = self.ward" in catalog


def test_the_workload_registers_each_users_own_query(tmp_path: Path) -> None:
    e = S.experiment(events=2_000, quick=True)
    facts = e.workload.prepare(tmp_path)
    files = sorted((tmp_path / "in" / "Readings").iterdir())
    assert len(files) == S.FILES and sum(len(f.read_text().splitlines()) for f in files) == 2_000
    assert facts["readings"] == 2_000 and facts["expected rows 1"] > 0
    server = AuthorizationServer(sqlite_url(tmp_path / "n4" / "store" / "store.db"))
    registered = {q.id: q for q in server.registrations()}
    assert sorted(registered) == sorted(own_id(u["user"], "q1") for u in S.users(4))
    assert registered[own_id("u0003", "q1")].owner == "u0003" and registered[own_id("u0003", "q1")].opens == ()
    assert {(c.query, c.user, c.grant) for c in server.changes()} >= {(own_id("u0000", "q1"), "u0000", True)}
    access = [json.loads(line) for line in (tmp_path / "n4" / "access.jsonl").read_text().splitlines()]
    assert [a["query"] for a in access] == ["q_u0000", "q_u0001", "q_u0002", "q_u0003"]
    assert "id: q_u0003, users: [u0003]" in (tmp_path / "n4" / "queries.yaml").read_text()


def test_the_command_lines_are_what_a_user_types(tmp_path: Path) -> None:
    e = S.experiment(quick=True)
    work, out = tmp_path, tmp_path / "out" / "run-4"
    (work / "n4" / "store").mkdir(parents=True)
    (work / "n4" / "store" / "store.db").write_text("")
    run = [str(a) for a in e.pipeline("run-4").run.argv(work, out)]
    assert run[1:6] == ["-m", "bench.network_scale", "launch", str(out), "--"]
    assert run[6].endswith("streamwarden") and run[7:10] == ["network", "run", "--available-now"]
    assert run[run.index("--store") + 1] == sqlite_url(out / "store" / "store.db")
    assert (out / "store" / "store.db").exists(), "each run gets a copy of the prepared store"
    assert "--checkpoint" not in run and "--master" not in run and run[-2:] == ["--output-dir", str(out / "rows")]
    replay = [str(a) for a in e.pipeline("replay-4").run.argv(work, out)]
    assert replay[7:9] == ["network", "replay"] and str(work / "n4" / "queries.yaml") in replay
    hand = [str(a) for a in e.pipeline("hand-data-4").run.argv(work, out)]
    assert hand[7:10] == ["-m", "bench.network_scale_plain", "as-data"]
    assert json.loads(hand[-1])["spark.sql.session.timeZone"] == "UTC", "streamwarden's settings, for plain too"


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_check_reads_every_layout_alike(tmp_path: Path) -> None:
    (tmp_path / "n4").mkdir()
    (tmp_path / "n4" / "queries.json").write_text(json.dumps(S.users(4)))
    (tmp_path / S.LATEST).write_text(str(1772352000 + 150))  # 08:02:30: windows up to 08:02 closed
    sel = [{"sensor": "s00", "value": 95.0}, {"sensor": "s10", "value": 99.5}]
    avg = [{"window_start": f"2026-03-01T08:0{m}:00Z", "window_end": f"2026-03-01T08:0{m + 1}:00Z", "avg": 50.0 + m}
           for m in range(3)]
    run, plain = tmp_path / "run", tmp_path / "plain"
    _write(run / "rows" / "u0000" / "u05u0000_q1" / "batch=1" / "part-0.txt",
           [{**r, "_policies": ["ward"], "_graph": "ag1"} for r in reversed(sel)])
    _write(run / "rows" / "u0003" / "u05u0003_q1" / "batch=1" / "part-0.txt", avg[:2])
    (run / "rows" / "u0003" / "u05u0003_q1" / "_access.json").write_text("{}\n")
    (run / "store" / "checkpoints" / "p1" / "offsets").mkdir(parents=True)
    (run / "store" / "checkpoints" / "p1" / "offsets" / "0").write_text("")
    _write(plain / "rows" / "user=u0000" / "part-0.json", sel)
    _write(plain / "rows" / "user=u0003" / "part-1.json",
           [{**r, "window_start": r["window_start"].replace("Z", ".000Z")} for r in avg])  # one open window too
    (plain / "rows" / "_SUCCESS").write_text("")
    check = S.received(4)
    got, expected = check(tmp_path, run), check(tmp_path, plain)
    assert got["rows u0000"] == 2 and got["rows u0001"] == 0 and got["rows u0003"] == 2
    assert got["spark_queries"] == 1 and got["micro_batches"] == 1 and got["users_with_rows"] == 2
    assert expected["open_rows"] == 1 and got["open_rows"] == 0
    assert {k: v for k, v in got.items() if k.startswith(("rows ", "digest "))} == \
        {k: v for k, v in expected.items() if k.startswith(("rows ", "digest "))}
    _write(plain / "rows" / "user=u0000" / "part-0.json", [sel[0], {**sel[1], "value": 99.0}])
    assert check(tmp_path, plain)["digest u0000"] != got["digest u0000"]


def _runs(cpu: float, wall: float = 10.0, digest: float = 7.0, rows: float = 5.0, **more: float) -> list[dict]:
    return [{"cpu_s": cpu, "wall_s": wall, "rows_out": rows, "rows u0000": rows, "digest u0000": digest,
             "load": 1.0, **more}] * 3


def test_the_targets_judge_cpu_against_the_hand_written_pass_and_the_rows() -> None:
    e = S.experiment(quick=True)
    coordinates = {p.name: p.coordinates() for p in e.pipelines}
    runs = {"run-1": _runs(20.0), "hand-1": _runs(11.0), "hand-data-1": _runs(10.0), "replay-1": _runs(25.0)}
    measured = Measured(runs, coordinates, {"readings": 100, "expected rows 1": 5})
    run1, replay1 = (t.check(measured) for t in e.targets if t.text.startswith("N = 1"))
    assert run1.met is True and run1.measured.startswith("1.82× (20.0 s vs 11.0 s CPU")
    assert replay1.met is False and len(e.targets) == 5
    assert [t.check(measured).met for t in e.targets if t.text.startswith("N = 4")] == [None, None]
    rows = e.targets[-1]
    assert rows.check(measured).met is True and rows.check(measured).measured.startswith("all 4 pipelines agree")
    runs["replay-1"] = _runs(25.0, digest=8.0)
    assert rows.check(measured).met is False and "replay-1 differs from run-1 for 1 user(s) (u0000)" in \
        rows.check(measured).measured
    runs["replay-1"] = _runs(25.0)
    runs["hand-1"] = _runs(11.0, rows=4.0)
    assert "hand-1: 4 rows, expected 5" in rows.check(measured).measured
    runs["hand-1"] = _runs(11.0)[:1]
    assert e.targets[0].check(measured).met is None, "one run: not judged"


def test_the_observations_say_where_the_time_goes() -> None:
    e = S.experiment(quick=True)
    coordinates = {p.name: p.coordinates() for p in e.pipelines}
    runs = {}
    for n, scale in ((1, 1.0), (4, 2.5)):
        runs[f"run-{n}"] = _runs(10 * scale, spark_queries=n, micro_batches=n + 1, started_s=5.0,
                                 command_cpu_s=1.0, left_running_cpu_s=9.0)
        runs[f"hand-{n}"] = _runs(8 * scale, spark_start_cpu_s=5.0, read_cpu_s=1.0, build_cpu_s=0.1, write_cpu_s=1.0)
        runs[f"replay-{n}"] = _runs(9 * scale, open_rows=n // 4, command_cpu_s=1.0, left_running_cpu_s=8.0)
    said = e.explain(Measured(runs, coordinates, {"readings": 100}), {"readings": 100})
    assert said[0].startswith("CPU an added query costs") and "network run 1→4: 5.00 s" in said[0]
    assert "N = 4: Spark streaming queries 4" in said[1] and "Spark start 5.0" in said[2]
    assert any("still open when the input ends (0 row(s) at N = 1, 1 row(s) at N = 4)" in s for s in said)
    assert said[-1].startswith("Machine load")


def test_the_launcher_splits_the_cpu_and_reads_the_start(tmp_path: Path) -> None:
    out = tmp_path / "out"
    orphan = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.3: pass')"
    child = (f"import json, pathlib, subprocess, sys; d = pathlib.Path({str(out / 'rows' / 'u1')!r}); "
             "d.mkdir(parents=True); (d / 'part-0.txt').write_text('{}\\n{}\\n'); "
             "(d / '_access.json').write_text('{}'); "
             f"subprocess.Popen([sys.executable, '-c', {orphan!r}]); "
             "print('network of 2 queries running as 2 pipelines', file=sys.stderr); print(json.dumps({'x': 1.5}))")
    done = subprocess.run([sys.executable, "-m", "bench.network_scale", "launch", str(out), "--", sys.executable,
                           "-c", child], cwd=REPO, capture_output=True, text=True, check=True)
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["rows_out"] == 2 and line["x"] == 1.5 and line["pipelines"] == 2 and line["started_s"] > 0
    assert line["left_running_cpu_s"] >= 0.25, "the orphan's CPU is counted apart"
    failed = subprocess.run([sys.executable, "-m", "bench.network_scale", "launch", str(out), "--", sys.executable,
                             "-c", "import sys; print('error: no such input', file=sys.stderr); sys.exit(2)"],
                            cwd=REPO, capture_output=True, text=True)
    assert failed.returncode == 2 and "error: no such input" in failed.stderr


def test_full_is_refused_for_an_experiment_without_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        suite_main(["rewriting", "--full"])
    assert stopped.value.code == 2 and "has no --full size" in capsys.readouterr().err


def test_the_docstring_examples() -> None:
    import doctest

    from bench import network_scale_plain

    assert doctest.testmod(S).failed == 0 and doctest.testmod(network_scale_plain).failed == 0
