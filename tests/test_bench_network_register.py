"""The network_register experiment: its workload, the instrumented service's recorder, the driver's
numbers, and the driver end to end against a small Python service standing in for ``serve`` (one
that delivers a row twice too: the check must say so). No Spark here: ``python -m bench.suite
network_register --quick`` runs the real service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench import network_register as R
from bench import network_register_drive as D
from bench.network_latency_drive import Batch, Watch
from bench.network_register_serve import Recorder
from bench.suite.experiment import Command, Measured
from bench.suite.registry import EXPERIMENTS, declaration
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.identity import authenticate
from streamwarden.catalog.registry import own_id
from streamwarden.catalog.store import sqlite_url

REPO = Path(__file__).resolve().parent.parent
TINY = R.Sizes(registrations=6, early=2, clients=2, rate=4000, interval_s=0.1, warmup_files=2, steady_files=2,
               tail_files=2, max_files=400, drain_timeout_s=60.0, judged=False)


def test_the_declaration_full_and_quick() -> None:
    assert EXPERIMENTS["network_register"] == "bench.network_register:experiment"
    assert declaration("network_register") is R.experiment
    full = R.experiment()
    assert [(p.name, p.group, dict(p.params)) for p in full.pipelines] == [
        ("serve-1000", "register", {"registrations": 1000})]
    assert isinstance(full.pipelines[0].run, Command) and full.pipelines[0].check is R.received
    assert full.targets[0].text.startswith("1,000 registrations over HTTP from 8 clients in under 60 s")
    quick = R.experiment(quick=True)
    assert quick.pipelines[0].name == "serve-50" and "4 clients" in quick.workload.description
    assert "fed 500 readings per second" in R.experiment(events=500, quick=True).workload.description
    assert [p.name for p in quick.plots] == ["split", "first_row"] and len(quick.tables) == 5


def test_each_query_is_network_scales_selection_over_its_ward() -> None:
    listed = R.users(10, 1000)
    assert [u["role"] for u in listed].count("register") == 1000 and listed[-1]["role"] == "probe"
    assert {u["above"] for u in listed} == {94.0 + k / 2 for k in range(9)}
    assert listed[12]["text"] == "SELECT sensor, value FROM Readings WHERE value > 95.5" and listed[12]["ward"] == "w2"


def test_the_workload_prepares_a_feed_a_store_tokens_and_a_plan(tmp_path: Path) -> None:
    sizes = replace(TINY, max_files=5)
    facts = R._workload(sizes).prepare(tmp_path)
    assert facts["users"] == 9 and facts["files prepared"] == 5
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert len(plan["names"]) == 5 and (Path(plan["feed"]) / plan["names"][0]).is_file()
    assert [u["role"] for u in plan["users"]] == ["early"] * 2 + ["register"] * 6 + ["probe"]
    url = sqlite_url(tmp_path / "store" / "store.db")
    registered = {q.id: q for q in AuthorizationServer(url).registrations()}
    assert set(registered) == {own_id("u0000", "q1"), own_id("u0001", "q1")}, "the early users' queries only"
    assert registered[own_id("u0001", "q1")].owner == "u0001"
    for u in plan["users"][1:3]:
        principal = authenticate(url, u["token"])
        assert principal is not None and principal.name == u["user"]
    feed = [R._read_feed(Path(plan["feed"]) / n) for n in plan["names"]]
    u = plan["users"][3]
    assert plan["counts"][u["user"]] == [sum(1 for r in f if r["ward"] == u["ward"] and r["value"] > u["above"])
                                         for f in feed]


def test_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "store.db").write_text("")
    command = R.experiment(quick=True).pipelines[0].run
    assert isinstance(command, Command)
    argv = [str(a) for a in command.argv(tmp_path, tmp_path / "out")]
    assert argv[1:3] == ["-m", "bench.network_register_drive"] and argv[argv.index("--clients") + 1] == "4"
    serve = argv[argv.index("--") + 1:]
    assert serve[1:4] == ["-m", "bench.network_register_serve", str(tmp_path / "out" / "phases.jsonl")]
    assert serve[4] == "serve" and serve[serve.index("--port") + 1] == "0"
    assert serve[serve.index("--trigger") + 1] == "1 second"
    assert (tmp_path / "out" / "store" / "store.db").exists() and (tmp_path / "out" / "in" / "Readings").is_dir()


def test_the_recorder_times_a_registrations_phases_in_its_thread(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "phases.jsonl")

    class Caller:
        name = "ann"

    def load() -> str:
        return "catalog"

    auth = recorder.phase("auth", lambda header: Caller())
    catalog = recorder.phase("catalog", load)
    explain = recorder.phase("explain", lambda book, caller, public: catalog())  # its catalog read: inside it
    store = recorder.phase("store", lambda *a: None)
    poll = recorder.phase("poll", lambda service: catalog())
    host_poll = recorder.other("poll", lambda host: None)
    batch = recorder.other("batch", lambda group, frame, batch_id: None)

    caller = auth("Bearer x")
    catalog()
    explain(None, caller, "q1")
    store()
    poll(None)
    poll(None)  # a second poll (no registration under way): no record
    host_poll(None)
    batch(type("G", (), {"members": {"a": 1, "b": 2}})(), None, 7)
    lines = D.read_phases(tmp_path / "phases.jsonl")
    assert [line["kind"] for line in lines] == ["register", "poll", "batch"]
    assert lines[0]["user"] == "ann" and lines[0]["id"] == "q1"
    assert list(lines[0]["phases"]) == ["auth", "catalog", "explain", "store", "poll"]
    assert lines[2]["batch"] == 7 and lines[2]["members"] == 2


def test_the_registrations_numbers() -> None:
    posts = [D.Post(f"u{i}", float(i), i + 0.5, 100.0 + i, 201) for i in range(10)] + [
        D.Post("x", 10.0, 11.0, 5.0, 500, "the service failed")]
    n = D.post_numbers(posts)
    assert n["registrations"] == 11 and n["registered"] == 10 and n["post_errors"] == 1 and n["status:500"] == 1
    assert n["register_wall_s"] == 11.0 and n["post_first_tenth_p50_ms"] == 100.0
    assert n["post_last_tenth_p50_ms"] != n["post_last_tenth_p50_ms"], "the last tenth is the failed one: no 201"
    records = [{"kind": "register", "user": "u1", "phases": {"auth": [0.001, 0.001], "poll": [0.09, 0.02]}},
               {"kind": "poll", "start": 5.0, "wall": 0.2, "cpu": 0.1},
               {"kind": "backfill", "start": 5.5, "wall": 2.0, "cpu": 0.1, "batch": 3, "joiners": 4},
               {"kind": "batch", "start": 50.0, "wall": 1.0, "cpu": 0.1, "batch": 9, "members": 2}]
    phases = D.phase_numbers(records, posts)
    assert phases["phased"] == 1 and phases["phase_poll_p50_ms"] == 90.0 and phases["phase_rest_p50_ms"] == 10.0
    assert phases["phase_store_p50_ms"] == 0.0, "a phase not timed counts as none"
    background = D.background_numbers(records, 0.0, 10.0)
    assert background["polls"] == 1 and background["backfills"] == 1 and background["backfill_joiners_p50"] == 4
    assert background["batches"] == 0, "the batch started after the window"


def test_a_first_row_is_counted_in_the_groups_micro_batches() -> None:
    batches = {0: Batch(10.0, 11.0, ()), 1: Batch(12.0, 13.5, ()), 2: Batch(14.0, 15.0, ()), 3: Batch(15.1, None, ())}
    assert D.batches_to_first_row(batches, answered=12.5, written=13.0) == 1, "joined the batch under way"
    assert D.batches_to_first_row(batches, answered=11.5, written=14.5) == 2, "idle at the 201: the next, then one more"
    assert D.batches_to_first_row(batches, answered=10.5, written=15.2) == 4
    assert D.batches_to_first_row(batches, answered=10.5, written=None) != D.batches_to_first_row({}, 1.0, 2.0)


def test_a_files_latency_is_to_the_last_user_who_gets_rows_of_it() -> None:
    watch = Watch({"a": Path("a"), "b": Path("b")}, {"a": [1, 1, 1], "b": [0, 1, 1]})
    watch.seen = {"a": {0: 1.5, 1: 2.2, 2: 3.5}, "b": {1: 2.8}}
    n = D.file_latency(watch, [1.0, 2.0, 3.0], range(3))
    assert n == {"p50_s": 0.65, "max_s": 0.8, "files": 2.0, "missing": 1.0}, "file 2 never reached b"


#: A service standing in for ``serve``: registers POSTed queries (each user by her token), reads each
#: file landing in its input folder and delivers every live user's rows of it in the network's layout
#: (a user joining gets what came before too), logs a group checkpoint, serves GET rows; SIGTERM ends it.
#: With STANDIN_TWICE=<user>, that user's first delivery is made twice.
STANDIN = r"""
import json, os, pathlib, signal, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
plan_path, inp, out = map(pathlib.Path, sys.argv[1:4])
plan = json.loads(plan_path.read_text())
by_token = {u["token"]: u for u in plan["users"]}
live = {u["user"]: u for u in plan["users"] if u["role"] == "early"}
lock, stopping, twice = threading.Lock(), threading.Event(), os.environ.get("STANDIN_TWICE")
signal.signal(signal.SIGTERM, lambda *_: stopping.set())

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def caller(self):
        return by_token.get(self.headers.get("Authorization", "").removeprefix("Bearer "))
    def do_POST(self):
        user, body = self.caller(), json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if user is None:
            return self.send(401, {"error": "no such token"})
        time.sleep(0.1)  # the service's work
        with lock:  # as serve, answer once the network has it: its next batch delivers to her
            live[user["user"]] = dict(user, above=float(body["query"].rsplit(" ", 1)[1]))
        self.send(201, {"id": body["id"]})
    def do_GET(self):
        user = self.caller()
        folder = out / "rows" / user["user"] / user["query"]
        lines = [l for p in sorted(folder.glob("batch=*/part-*")) for l in p.read_text().splitlines()]
        self.send(200, {"rows": [json.loads(l) for l in lines[:1]], "next": str(min(1, len(lines)))})

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
cp = out / "checkpoint" / ".groups" / "Readings" / "spark"
for folder in ("offsets", "commits"):
    (cp / folder).mkdir(parents=True, exist_ok=True)
seen, history, members, batch = set(), [], set(), 0
while not stopping.is_set():
    new = sorted(p for p in inp.iterdir() if p.name not in seen)
    with lock:
        now = dict(live)
    if not new and set(now) <= members:
        time.sleep(0.02)
        continue
    (cp / "offsets" / str(batch)).write_text("v1\n")
    rows = [json.loads(l) for p in new for l in p.read_text().splitlines()]
    seen.update(p.name for p in new)
    for name, u in now.items():
        mine = [r for r in (rows if name in members else history + rows)
                if r["ward"] == u["ward"] and r["value"] > u["above"]]
        for copy in range(2 if name == twice and name not in members else 1):
            if mine:
                d = out / "rows" / name / u["query"]
                part = d / f"batch={batch:06d}-{copy}"
                part.mkdir(parents=True)
                (part / "part-0.txt").write_text("".join(json.dumps(
                    {"sensor": r["sensor"], "value": r["value"], "_policies": ["ward"]}) + "\n" for r in mine))
                with open(d / "_delivered.jsonl", "a") as log:
                    log.write(json.dumps({"batch": part.name, "rows": len(mine)}) + "\n")
    members |= set(now)
    history += rows
    (cp / "commits" / str(batch)).write_text("v1\n")
    batch += 1
server.shutdown()
"""


def _drive(tmp_path: Path, work: Path, name: str, env: dict[str, str]) -> tuple[dict[str, Any], Path]:
    out = tmp_path / name
    inputs = out / "in" / "Readings"
    inputs.mkdir(parents=True)
    standin = tmp_path / "standin.py"
    standin.write_text(STANDIN)
    done = subprocess.run(
        [sys.executable, "-m", "bench.network_register_drive", str(work / "plan.json"), "--input", str(inputs),
         "--out", str(out), "--clients", "2", "--settle", "0.3", "--drain-timeout", "60", "--start-timeout", "60",
         "--", sys.executable, str(standin), str(work / "plan.json"), str(inputs), str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), out


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("work")
    R._workload(TINY).prepare(work)
    return work


def test_the_driver_registers_probes_and_checks_every_users_rows(tmp_path: Path, prepared: Path) -> None:
    numbers, out = _drive(tmp_path, prepared, "ok", {})
    assert numbers["registered"] == 6 and numbers["post_errors"] == 0 and numbers["clients"] == 2
    assert numbers["first_rows"] == 6 and numbers["no_first_row"] == 0 and numbers["probe_status"] == 201
    assert numbers["first_row_batches_max"] <= 2 and numbers["probe_batches"] <= 2 and numbers["probe_first_row_s"] > 0
    assert numbers["drained"] == 1 and numbers["landed"] >= TINY.warmup_files + TINY.steady_files + TINY.tail_files
    assert numbers["phased"] == 0, "the stand-in times no phases"
    assert numbers["group_batches_during"] >= 1 and numbers["spark_queries"] == 1
    checked = R.received(prepared, out)
    assert checked["users_checked"] == 9 and checked["users_wrong"] == 0 and checked["stray_files"] == 0
    assert checked["rows_checked"] == checked["rows_expected"] == numbers["rows_out"] > 0
    measured = Measured({"serve-6": [{**numbers, **checked}]}, {"serve-6": {"registrations": 6}})
    e = R.experiment(sizes=TINY)
    verdicts = [t.check(measured) for t in e.targets]
    assert [v.met for v in verdicts] == [None, True, True], [v.measured for v in verdicts]
    assert "quick form: not judged" in verdicts[0].measured
    assert any("registrations from 2 clients" in note for note in R.explain(measured, {"cores": 2}))


def test_the_check_catches_a_row_delivered_twice(tmp_path: Path, prepared: Path) -> None:
    numbers, out = _drive(tmp_path, prepared, "twice", {"STANDIN_TWICE": "u0003"})
    checked = R.received(prepared, out)
    assert checked["register_wrong"] == 1 and checked["rows_extra"] > 0 and checked["rows_missing"] == 0
    verdict = R._rows_target(TINY).check(Measured({"serve-6": [{**numbers, **checked}]}))
    assert verdict.met is False and "1 registered user(s) with other rows" in verdict.measured
