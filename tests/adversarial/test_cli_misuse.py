"""Classes 14 and 15 of issue 11: silent loss and misuse of the CLI.

Each test is a mistake a user made or a failure that was reported as something else:
* ``ON RESULT`` over a query that selects no timestamp wrote nothing and exited 0;
* ``network run`` with a stream missing from ``--input``: a KeyError traceback;
* a mistyped input folder was created and waited on forever;
* an input folder whose files the reader skips (``.json``, ``.csv``) was waited on silently;
* any Spark failure whose plan text held the reader's check was called a "broken record"
  (two runs on one checkpoint, a full disk), hiding the real cause;
* an unexpected exception printed a traceback (now one line, exit 3; ``--debug`` for it);
* Ctrl-C during ``run`` printed Py4J tracebacks and exited 1 (now one line, exit 130);
* and the first-contact basics: ``--version``, help text with formats on every option,
  ``--format json`` that is JSON, drawing without the benchmark extras.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import write_jsonl
from streamwarden.catalog.store import sqlite_url
from streamwarden.cli import main as cli
from streamwarden.cli.main import main
from streamwarden.engine.execute import broken_record, describe_failure, input_errors
from streamwarden.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CATALOG = """\
streams:
  S: {schema: {ts: timestamp, v: int}}
  T: {schema: {ts: timestamp, w: int}}
roles: {R: {}}
users: {ann: {roles: [R]}}
policies:
  - {id: p1, subject: R, streams: [S], attributes: [v], privilege: read}
  - {id: p2, subject: R, streams: [T], attributes: [w], privilege: read}
"""
QUERIES = ("queries:\n  - {id: q1, users: [ann], query: 'SELECT s.v FROM S AS s [RANGE 1 min], T AS t [RANGE 1 min] "
           "WHERE s.v = t.w'}\n")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "c.yaml").write_text(CATALOG)
    (tmp_path / "q.yaml").write_text(QUERIES)
    write_jsonl(tmp_path / "in" / "S" / "a.jsonl", [{"ts": "2026-03-01T10:00:00Z", "v": 1}])
    write_jsonl(tmp_path / "in" / "T" / "a.jsonl", [{"ts": "2026-03-01T10:00:00Z", "w": 1}])
    return {"root": tmp_path, "catalog": tmp_path / "c.yaml", "queries": tmp_path / "q.yaml"}


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# -- class 14: ON RESULT without a timestamp -------------------------------------------------------------
PUNCTUATED = """\
streams:
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}, key: Patient_id}
roles: {C: {}}
users: {carol: {roles: [C]}}
"""


@pytest.mark.spark
def test_on_result_without_a_timestamp_is_refused_before_running(spark, tmp_path: Path, capsys) -> None:
    (tmp_path / "c.yaml").write_text(PUNCTUATED)
    write_jsonl(tmp_path / "hr.jsonl", [
        {"kind": "sp", "streams": "HeartRate", "tuples": "*", "attributes": "*", "roles": "C", "sign": "+",
         "ts": "2026-03-01T10:00:00Z", "sn": 1, "grant": True},
        {"ts": "2026-03-01T10:00:05Z", "Patient_id": 120, "Beats_per_min": 90, "sp_ts": "2026-03-01T10:00:00Z",
         "sp_csn": 1}])
    query = ("SELECT Patient_id, Beats_per_min FROM HeartRate ON RESULT (INSERT SP INTO STREAM LET DDP = TUPLES:ALL, "
             "SRP = C)")
    code = main(["replay", "--catalog", str(tmp_path / "c.yaml"), "--user", "carol", "--query", query,
                 "--input", f"HeartRate={tmp_path / 'hr.jsonl'}", "--output", str(tmp_path / "out.jsonl")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "ON RESULT needs a timestamp" in line
    assert not (tmp_path / "out.jsonl").exists() and not list(tmp_path.glob("*.partial"))


# -- class 15: inputs -----------------------------------------------------------------------------------
def test_network_run_with_a_stream_missing_from_input_names_it(files, capsys) -> None:
    root = files["root"]
    code = main(["network", "run", "--catalog", str(files["catalog"]), "--queries", str(files["queries"]),
                 "--input", f"S={root / 'in' / 'S'}", "--output-dir", str(root / "out"),
                 "--store", sqlite_url(root / "s.db")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "no input given for stream T (use --input T=PATH)" in line


@pytest.mark.parametrize("command", ["run", "network run", "replay", "network replay"])
def test_a_mistyped_input_folder_is_refused_not_created(files, capsys, command: str) -> None:
    root = files["root"]
    typo = root / "in" / "Ss"
    if command == "run":
        args = ["run", "--catalog", str(files["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                "--input", f"S={typo}", "--sink", str(root / "sink"), "--store", sqlite_url(root / "s.db")]
    elif command == "replay":
        args = ["replay", "--catalog", str(files["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                "--input", f"S={typo}", "--output", str(root / "o.jsonl"), "--store", sqlite_url(root / "s.db")]
    elif command == "network replay":
        (root / "access.jsonl").write_text("")
        args = ["network", "replay", "--catalog", str(files["catalog"]), "--queries", str(files["queries"]),
                "--access", str(root / "access.jsonl"), "--input", f"S={typo}", "--input", f"T={root / 'in' / 'T'}",
                "--output-dir", str(root / "out")]
    else:
        args = ["network", "run", "--catalog", str(files["catalog"]), "--queries", str(files["queries"]),
                "--input", f"S={typo}", "--input", f"T={root / 'in' / 'T'}", "--output-dir", str(root / "out"),
                "--store", sqlite_url(root / "s.db")]
    assert main(args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"input for stream S not found: {typo}" in line
    # a replay's inputs are recorded files: no advice to create a folder and wait
    replay = "replay" in command
    assert ("check the path" in line) == replay and ("create the folder" in line) != replay
    assert not typo.exists()


def test_a_folder_of_files_the_reader_skips_is_refused(files, capsys) -> None:
    root = files["root"]
    skipped = root / "in" / "json"
    write_jsonl(skipped / "a.json", [{"ts": "2026-03-01T10:00:00Z", "v": 1}])
    (skipped / "b.csv").write_text("ts,v\n")
    code = main(["run", "--catalog", str(files["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                 "--input", f"S={skipped}", "--sink", str(root / "sink"), "--store", sqlite_url(root / "s.db")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "holds no file the reader reads: it reads *.jsonl and *.parquet" in line
    assert ".csv, .json files" in line


def test_files_the_reader_skips_next_to_ones_it_reads_are_named_in_a_warning(files) -> None:
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.engine.execute import InputWarning, check_inputs

    folder = files["root"] / "in" / "S"
    (folder / "extra.json").write_text("{}\n")
    (folder / ".hidden").write_text("")
    with pytest.warns(InputWarning, match=r"files ending in \.json are skipped \(the reader reads \*\.jsonl and "):
        check_inputs(load_catalog_text(CATALOG), ["S"], {"S": str(folder)})


@pytest.mark.spark
def test_the_warning_reaches_the_cli_as_one_line(spark, files, capsys) -> None:
    root = files["root"]
    (root / "in" / "S" / "extra.json").write_text("{}\n")
    assert main(["replay", "--catalog", str(files["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                 "--input", f"S={root / 'in' / 'S'}", "--output", str(root / "o.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "warning: input folder" in err and "files ending in .json are skipped" in err and "Warning:" not in err


# -- class 15: failures named for what they are ----------------------------------------------------
PLAN = ("\n=== Streaming Query ===\nIdentifier: [id = 1, runId = 2]\n\nCurrent Logical Plan:\n"
        "Filter CASE WHEN isnotnull(_corrupt_record) THEN raise_error(concat(broken record in stream Position (, "
        "CASE WHEN ... END, ) in , input_file_name(), : , ...)) ELSE true END\n")


class FakeStreamingFailure(Exception):
    pass


@pytest.mark.parametrize(("cause", "expected"), [
    ("[STREAM_FAILED] Query terminated with exception: java.util.ConcurrentModificationException: Multiple "
     "streaming queries are concurrently using file:/tmp/cp/sources/0", "another query is running on the same "
     "checkpoint file:/tmp/cp/sources/0"),
    ("[STREAM_FAILED] Query terminated with exception: java.io.IOException: No space left on device",
     "the disk is full"),
])
def test_a_failure_whose_plan_mentions_the_reader_is_not_a_broken_record(cause: str, expected: str) -> None:
    exc = FakeStreamingFailure(cause + PLAN)
    assert broken_record(exc) is None
    with pytest.raises(FakeStreamingFailure):
        with input_errors():
            raise exc
    assert expected in describe_failure(exc) and "broken record" not in describe_failure(exc)


def test_a_real_broken_record_is_still_named() -> None:
    exc = FakeStreamingFailure("[STREAM_FAILED] Query terminated with exception: Job aborted: "
                               "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] broken record in "
                               "stream Position (not valid JSON of the catalog's types) in file:/in/a.jsonl: {\"x\"} "
                               "SQLSTATE: P0001" + PLAN)
    with pytest.raises(InputError, match=r"^broken record in stream Position \(not valid JSON.*a\.jsonl: \{\"x\"\}$"):
        with input_errors():
            raise exc
    python = FakeStreamingFailure("An exception was thrown from the Python worker.\nTraceback (most recent call "
                                  "last):\n  File \"k.py\", line 3\nValueError: broken record in stream HeartRate "
                                  "(malformed roles pattern) at /in/p.jsonl:3\n")
    assert broken_record(python) == "broken record in stream HeartRate (malformed roles pattern) at /in/p.jsonl:3"


# -- class 15: the top-level guard ------------------------------------------------------------------
def test_an_unexpected_exception_is_one_line_and_exit_3(monkeypatch, capsys) -> None:
    def boom(args: argparse.Namespace) -> int:
        raise RuntimeError("the engine fell over\nsecond line")

    monkeypatch.setattr(cli, "_dispatch", boom)
    assert main(["sp", "INSERT SP INTO STREAM S LET DDP = TUPLES:ALL, SRP = C"]) == 3
    err = capsys.readouterr().err
    assert err == "error: RuntimeError: the engine fell over (run with --debug for the trace)\n"
    assert main(["--debug", "sp", "x"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().endswith("error: RuntimeError: the engine fell over")
    assert main(["sp", "x", "--debug"]) == 3 and "Traceback" in capsys.readouterr().err  # after the command too


def test_bad_input_stays_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "c.yaml").write_text("streams: {S: {schema: {ts: nope}}}\n")
    assert main(["check", str(tmp_path / "c.yaml"), "--no-store"]) == 2
    assert "c.yaml:1:" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("url, says", [("notaurl", "is not a database URL"),
                                       ("nosuchdb://host/x", "names a database SQLAlchemy has no driver for")])
def test_a_store_that_is_not_a_database_url_is_bad_input_not_a_failure(files, capsys, url: str, says: str) -> None:
    assert main(["check", str(files["catalog"]), "--store", url]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"--store {url!r} {says}" in line and "sqlite:///" in line  # it shows what a URL looks like
    assert not (files["root"] / url).exists()


def test_a_zero_trigger_is_sparks_own_default_not_a_window_error(files, capsys) -> None:
    assert cli._trigger("0 seconds") == "0 milliseconds"  # the next micro-batch as soon as the last ends
    assert cli._trigger("2 seconds") == "2000 milliseconds" and cli._trigger("0.0001 seconds") == "1 milliseconds"
    assert main(["run", "--catalog", str(files["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                 "--input", f"S={files['root'] / 'in' / 'S'}",
                 "--sink", "console", "--trigger", "-1 seconds"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: --trigger:1:1:") and "window" not in line


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == "streamwarden 0.1.0"


def test_every_option_has_help_text() -> None:
    """Every option and argument of every command says what it is (and, for values, its format)."""
    missing = []

    def visit(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    visit(child, f"{path} {name}")
                continue
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            if not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
            elif action.option_strings and action.nargs != 0 and not (action.metavar or action.choices):
                missing.append(f"{path} {'/'.join(action.option_strings)}: no format (metavar)")

    visit(cli._parser(), "streamwarden")
    assert missing == []


def test_explain_network_format_json_is_json(files, capsys) -> None:
    for args in (["explain", "--catalog", str(files["catalog"]), "--network", str(files["queries"]),
                  "--format", "json"],
                 ["network", "explain", "--catalog", str(files["catalog"]), "--queries", str(files["queries"]),
                  "--format", "json"]):
        assert main(args) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["queries"] == ["q1"] and data["outputs"][0]["users"] == ["ann"]
        assert {v["kind"] for v in data["vertices"]} >= {"source", "join"} and data["switches"]


def test_drawing_a_network_works_without_the_bench_extras(files, capsys) -> None:
    """matplotlib is a main dependency now; and a missing drawer is one clear line, not a traceback."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("matplotlib") for d in project["dependencies"])
    picture = files["root"] / "net.png"
    assert main(["network", "explain", "--catalog", str(files["catalog"]), "--queries", str(files["queries"]),
                 "--render", str(picture)]) == 0
    assert picture.stat().st_size > 0


def test_a_missing_drawer_is_one_line(files, capsys, monkeypatch) -> None:
    import streamwarden.papers.network.draw as draw

    def no_matplotlib(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'matplotlib'")

    monkeypatch.setattr(draw, "draw", no_matplotlib)
    code = main(["network", "explain", "--catalog", str(files["catalog"]), "--queries", str(files["queries"]),
                 "--render", str(files["root"] / "net.png")])
    err = capsys.readouterr().err
    assert code == 2 and "needs Graphviz's `dot` on the PATH or the matplotlib package" in err


# -- class 15: Ctrl-C during run (a real process: its exit status and what it prints) -------------------
@pytest.mark.spark
def test_ctrl_c_during_run_stops_cleanly_with_exit_130(files) -> None:
    root = files["root"]
    env = {**os.environ, "STREAMWARDEN_STORE": sqlite_url(root / "s.db")}
    process = subprocess.Popen(
        [sys.executable, "-m", "streamwarden.cli.main", "run", "--catalog", str(files["catalog"]), "--user", "ann",
         "--query", "SELECT v FROM S", "--input", f"S={root / 'in' / 'S'}", "--sink", str(root / "sink"),
         "--trigger", "1 second"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_until_running(process)
        deadline = time.monotonic() + 60
        while not list((root / "sink").glob("part-*")) and time.monotonic() < deadline:
            time.sleep(0.5)  # a batch has been committed: the query is really running
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    # after the progress lines: the totals, then one line saying what stopped and that nothing is lost
    assert lines[-2].startswith("stopped: ") and lines[-1].startswith("interrupted: stopped the query"), err
    assert all(" rows in" in line for line in lines[:-1]), err
    assert "Traceback" not in err and "py4j" not in err.lower()


# -- issue 24, finding 12: SIGTERM to the process group (systemd, a container runtime) -------------------
def _continuous(files: dict[str, Path], command: str, *, available_now: bool = False) -> list[str]:
    """``run`` or ``network run`` of ann's ``SELECT v FROM S``, on a checkpoint kept across starts."""
    root = files["root"]
    tail = ["--checkpoint", str(root / "ck"), "--trigger", "0.5 seconds", *(["--available-now"] * available_now)]
    if command == "run":
        return ["run", "--catalog", str(files["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                "--input", f"S={root / 'in' / 'S'}", "--sink", str(root / "sink"), *tail]
    return ["network", "run", "--input", f"S={root / 'in' / 'S'}", "--output-dir", str(root / "out"), *tail]


def _values_out(files: dict[str, Path], command: str) -> list[int]:
    """Every ``v`` the command has written so far (repeats included)."""
    root = files["root"]
    if command == "run":
        lines = [line for part in sorted((root / "sink").glob("part-*")) for line in part.read_text().splitlines()]
        return [json.loads(line)["v"] for line in lines if line.strip()]
    from streamwarden.runtime.deliveries import read_rows

    folder = root / "out" / "ann" / "q1"
    return [row["v"] for row in read_rows(folder, after=0, limit=10 ** 6).rows] if folder.is_dir() else []


@pytest.mark.spark
@pytest.mark.parametrize("command", ["run", "network run"])
def test_sigterm_to_the_process_group_stops_cleanly_with_exit_0_and_loses_nothing(files, command: str) -> None:
    """A supervisor's stop (SIGTERM to the whole group, Spark's JVM included) while micro-batches
    run: one line, exit 0, and a restart on the same checkpoint writes every value exactly once."""
    import threading

    root = files["root"]
    env = {**os.environ, "STREAMWARDEN_STORE": sqlite_url(root / "s.db")}
    (root / "plain.yaml").write_text("queries:\n  - {id: q1, users: [ann], query: 'SELECT v FROM S'}\n")
    written, stop = [1], threading.Event()

    def provider() -> None:  # a file every 0.1 s, moved in whole (the reader never sees half a file)
        while not stop.wait(0.1) and len(written) < 600:
            value = written[-1] + 1
            staged = write_jsonl(root / "staging" / f"f{value:05d}.jsonl", [{"ts": "2026-03-01T10:00:01Z", "v": value}])
            os.replace(staged, root / "in" / "S" / staged.name)
            written.append(value)

    if command == "network run":  # registered and granted ahead, as an operator does
        assert main(["network", "register", str(root / "plain.yaml"), "--catalog", str(files["catalog"]),
                     "--store", env["STREAMWARDEN_STORE"]]) == 0
        assert main(["grant", "--query", "q1", "--user", "ann", "--ts", "2026-03-01T10:00:00Z",
                     "--store", env["STREAMWARDEN_STORE"]]) == 0
    process = subprocess.Popen([sys.executable, "-m", "streamwarden.cli.main", *_continuous(files, command)],
                               cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    sending = threading.Thread(target=provider)
    try:
        _wait_until_running(process)
        sending.start()
        deadline = time.monotonic() + 120
        while len(_values_out(files, command)) < 5 and time.monotonic() < deadline:
            time.sleep(0.2)  # polling a subprocess from outside: micro-batches are being committed
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        stop.set()
        if sending.is_alive():
            sending.join(30)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-2].startswith("stopped: ") and lines[-1].startswith("stopped the ") and "(SIGTERM)" in lines[-1], err
    assert all(" rows in" in line for line in lines[:-1]), err
    assert "Traceback" not in err and "py4j" not in err.lower()

    again = subprocess.run([sys.executable, "-m", "streamwarden.cli.main",
                            *_continuous(files, command, available_now=True)],
                           cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert sorted(_values_out(files, command)) == written  # every value exactly once


def _wait_until_running(process: subprocess.Popen[str]) -> None:
    """Read the command's stderr up to its "(... Ctrl-C to stop)" line: it runs from then on."""
    started = time.monotonic()
    line = process.stderr.readline()  # type: ignore[union-attr]
    while "Ctrl-C to stop" not in line and time.monotonic() - started < 180 and process.poll() is None:
        line = process.stderr.readline()  # type: ignore[union-attr]
    assert "Ctrl-C to stop" in line, line
