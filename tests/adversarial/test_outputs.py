"""Class 9 of issue 11: outputs anyone can read.

Per-user output folders and files were created world-readable, and the shared network's
default checkpoint lay inside the output tree (``DIR/_checkpoint``), holding every
user's raw tuples and everyone's grants. Now every folder the engine creates is 0700 and
every file 0600 (Python writes with explicit modes; Spark's Hadoop file system with
umask 077), checked on disk here; default checkpoints lie next to the store; a
checkpoint (or a store) inside an output folder is refused; and a checkpoint that
outlived its output is refused instead of silently resuming into nothing.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import write_jsonl
from streamwarden.catalog.store import sqlite_url
from streamwarden.cli.main import main

CATALOG = """\
streams:
  S: {schema: {ts: timestamp, v: int}}
roles: {R: {}}
users: {ann: {roles: [R]}, bob: {roles: [R]}}
policies:
  - {id: p1, subject: R, streams: [S], attributes: [v], privilege: read}
"""
QUERIES = """\
queries:
  - {id: q1, users: [ann, bob], query: "SELECT v FROM S WHERE v > 0"}
  - {id: q2, users: [ann], query: "SELECT v FROM S WHERE v > 1"}
"""
ACCESS = ('{"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "ann", "sign": "+"}\n'
          '{"ts": "2026-03-01T10:00:00Z", "query": "q2", "user": "ann", "sign": "+"}\n'
          '{"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "bob", "sign": "+"}\n')
RECORDS = [{"ts": f"2026-03-01T10:00:{s:02d}Z", "v": s % 4} for s in range(1, 30)]


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "c.yaml").write_text(CATALOG)
    (tmp_path / "q.yaml").write_text(QUERIES)
    (tmp_path / "access.jsonl").write_text(ACCESS)
    write_jsonl(tmp_path / "in" / "S" / "part-0.jsonl", RECORDS)
    return {"root": tmp_path, "catalog": tmp_path / "c.yaml", "queries": tmp_path / "q.yaml"}


def loose(root: Path) -> list[str]:
    """Everything under ``root`` that someone other than its owner may read, write or enter."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in [folder, *[os.path.join(folder, n) for n in dirs + files]]:
            mode = os.lstat(name).st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{name}: {stat.filemode(mode)}")
    return sorted(set(found))


@pytest.mark.spark
def test_network_replay_outputs_are_private(spark, setup, capsys) -> None:
    root = setup["root"]
    out = root / "out"
    assert main(["network", "replay", "--catalog", str(setup["catalog"]), "--queries", str(setup["queries"]),
                 "--access", str(root / "access.jsonl"), "--input", f"S={root / 'in' / 'S'}",
                 "--output-dir", str(out)]) == 0
    assert (out / "ann" / "q2.jsonl").read_text()
    assert loose(out) == []
    assert stat.S_IMODE((out / "ann").stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "ann" / "q1.jsonl").stat().st_mode) == 0o600


@pytest.mark.spark
def test_a_user_folder_left_world_readable_is_tightened(spark, setup) -> None:
    root = setup["root"]
    (root / "out" / "ann").mkdir(parents=True)
    os.chmod(root / "out" / "ann", 0o755)  # from an older run
    assert main(["network", "replay", "--catalog", str(setup["catalog"]), "--queries", str(setup["queries"]),
                 "--access", str(root / "access.jsonl"), "--input", f"S={root / 'in' / 'S'}",
                 "--output-dir", str(root / "out")]) == 0
    assert stat.S_IMODE((root / "out" / "ann").stat().st_mode) == 0o700


@pytest.mark.spark
def test_replay_output_file_is_private(spark, setup) -> None:
    root = setup["root"]
    assert main(["replay", "--catalog", str(setup["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                 "--input", f"S={root / 'in' / 'S'}", "--output", str(root / "res" / "out.jsonl")]) == 0
    assert stat.S_IMODE((root / "res" / "out.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "res").stat().st_mode) == 0o700


@pytest.mark.spark
def test_network_run_writes_private_outputs_and_keeps_its_checkpoint_outside(spark, setup, capsys) -> None:
    """Spark writes these files (the network's sink, its checkpoint): permissions on disk."""
    root = setup["root"]
    store = sqlite_url(root / "state" / "auth.db")
    assert main(["network", "register", str(setup["queries"]), "--catalog", str(setup["catalog"]),
                 "--store", store]) == 0
    for user, query in (("ann", "q1"), ("ann", "q2"), ("bob", "q1")):
        assert main(["grant", "--query", query, "--user", user, "--ts", "2026-03-01T10:00:00Z", "--store", store]) == 0
    out = root / "out"
    assert main(["network", "run", "--catalog", str(setup["catalog"]), "--queries", str(setup["queries"]),
                 "--input", f"S={root / 'in' / 'S'}", "--output-dir", str(out), "--store", store,
                 "--available-now"]) == 0
    assert any((out / "ann" / "q2").glob("batch=*/part-*"))  # something was delivered
    assert loose(out) == []
    checkpoints = list((root / "state" / "checkpoints").iterdir())
    assert len(checkpoints) == 1 and checkpoints[0].name.startswith("network-")  # next to the store
    assert not any(p.name in ("_checkpoint", "network-state", "staging") for p in out.rglob("*"))
    assert loose(root / "state") == []  # the store, the access SPs, the checkpoint: their owner's only
    assert "checkpoint " + str(checkpoints[0]) in capsys.readouterr().err


def test_a_checkpoint_inside_the_output_folder_is_refused(setup, capsys) -> None:
    root = setup["root"]
    code = main(["network", "run", "--catalog", str(setup["catalog"]), "--queries", str(setup["queries"]),
                 "--input", f"S={root / 'in' / 'S'}", "--output-dir", str(root / "out"),
                 "--store", sqlite_url(root / "s.db"), "--checkpoint", str(root / "out" / "_checkpoint")])
    err = capsys.readouterr().err
    assert code == 2 and "keep it out of any output folder" in err and err.count("\n") == 1
    assert not (root / "out").exists()


def test_a_run_checkpoint_inside_its_sink_is_refused(setup, capsys) -> None:
    root = setup["root"]
    code = main(["run", "--catalog", str(setup["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                 "--input", f"S={root / 'in' / 'S'}", "--sink", str(root / "sink"),
                 "--checkpoint", str(root / "sink" / "cp"), "--store", sqlite_url(root / "s.db")])
    assert code == 2 and "keep it out of any output folder" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["network", "run"])
def test_a_store_inside_the_output_folder_is_refused(setup, capsys, command: str) -> None:
    root = setup["root"]
    store = sqlite_url(root / "out" / "auth.db")
    if command == "network":
        args = ["network", "run", "--catalog", str(setup["catalog"]), "--queries", str(setup["queries"]),
                "--input", f"S={root / 'in' / 'S'}", "--output-dir", str(root / "out"), "--store", store]
    else:
        args = ["run", "--catalog", str(setup["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
                "--input", f"S={root / 'in' / 'S'}", "--sink", str(root / "out"), "--store", store]
    assert main(args) == 2
    assert "holds every user's grants" in capsys.readouterr().err


@pytest.mark.spark
def test_a_checkpoint_that_outlived_its_network_output_is_refused(spark, setup, capsys) -> None:
    root = setup["root"]
    checkpoint = root / "cp"
    (checkpoint / "q1" / "3fa2" / "spark" / "commits").mkdir(parents=True)  # a pipeline's checkpoint
    (checkpoint / "q1" / "3fa2" / "spark" / "commits" / "0").write_text("v1\n{}\n")  # committed batches ...
    code = main(["network", "run", "--catalog", str(setup["catalog"]), "--queries", str(setup["queries"]),
                 "--input", f"S={root / 'in' / 'S'}", "--output-dir", str(root / "out"),  # ... to an output now gone
                 "--store", sqlite_url(root / "s.db"), "--checkpoint", str(checkpoint), "--available-now"])
    err = capsys.readouterr().err
    assert code == 2 and "Remove the checkpoint to start over, or pass a new one with --checkpoint" in err


@pytest.mark.spark
def test_a_checkpoint_that_outlived_its_sink_is_refused(spark, setup, capsys) -> None:
    root = setup["root"]
    args = ["run", "--catalog", str(setup["catalog"]), "--user", "ann", "--query", "SELECT v FROM S",
            "--input", f"S={root / 'in' / 'S'}", "--sink", str(root / "sink"), "--store", sqlite_url(root / "s.db"),
            "--available-now"]
    assert main(args) == 0  # the default checkpoint: next to the store
    rows = sum(len(p.read_text().splitlines()) for p in (root / "sink").glob("part-*"))
    assert rows == len(RECORDS)
    assert loose(root / "sink") == []
    import shutil

    shutil.rmtree(root / "sink")  # the user starts over by deleting the output only
    capsys.readouterr()
    assert main(args) == 2
    assert "is gone or empty" in capsys.readouterr().err and not (root / "sink").exists()


def test_default_checkpoints_differ_per_output_folder(tmp_path: Path) -> None:
    from streamwarden.runtime.network import default_checkpoint_root

    one = default_checkpoint_root(tmp_path / "state", tmp_path / "out")
    assert one.parent == tmp_path / "state" / "checkpoints"  # next to the store, never in an output
    assert one != default_checkpoint_root(tmp_path / "state", tmp_path / "out2")
    assert json.dumps(str(one))  # a plain path
