"""The README's five-minute tour, every command as written, in a folder laid out as ``make
demo`` leaves ``.streamwarden/demo`` (a smaller drill), with Spark: each exits 0 and says
what it should, and what the rows say of who authorized them is what the README shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamwarden.api import read_rows
from streamwarden.cli.main import main
from streamwarden.datagen import generate_drill
from streamwarden.demo.samples import write_samples
from test_demo_quick import README, _commands

pytestmark = pytest.mark.spark


@pytest.fixture
def tour(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "demo"
    generate_drill(folder / "data", soldiers=8, minutes=2.0, interval_seconds=5.0, health="uni", files_per_stream=2)
    write_samples(folder)
    monkeypatch.chdir(folder)
    return folder


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_command_of_the_tour_runs_as_written(spark, tour, capsys) -> None:
    said = {}
    for command in _commands(README.read_text()):
        assert main(command) == 0, (command, capsys.readouterr().err)
        out = capsys.readouterr()
        said[" ".join(command[:2])] = out.out + out.err
    # paul's positions, each naming the policy that let it through
    paul = _jsonl(tour / "out.jsonl")
    assert paul and all(r["_policies"] and set(r["_policies"]) <= {"p1", "p4"} for r in paul)
    # run: a progress line per micro-batch with rows, and the totals at the end
    run = said["run --catalog"]
    assert "rows in" in run and "done: " in run and "rows out" in run
    # each heart rate names its patient's policy
    hearts = _jsonl(tour / "hr.jsonl")
    assert hearts and all(r["_policies"][0].startswith("SP HeartRate of 2026-03-01T") for r in hearts)
    # c1 reads at [1, ⊥]: nothing of company 2, and each row says its level
    levelled = _jsonl(tour / "levels.jsonl")
    assert levelled and all(r["_policies"][-1].endswith("read at [1, ⊥]") for r in levelled)
    # the network: the store's catalog replaced (and said so), ann granted, bob not
    assert "replaced the catalog" in said["network register"]
    assert read_rows(tour / "out", "ann", "q1").rows and not read_rows(tour / "out", "bob", "q1").rows
    assert "rows delivered to 1 user" in said["network run"]


CLI_PAGE = README.parent / "docs" / "cli.md"


def test_every_command_of_the_command_line_page_runs_as_written(spark, tour, capsys) -> None:
    """docs/cli.md's commands in its order; a continuous ``run`` or ``network run`` (Ctrl-C to
    stop, as written) gets ``--available-now``, so that it stops once its input is processed."""
    ran = []
    for command in _commands(CLI_PAGE.read_text()):
        continuous = command[:1] == ["run"] or command[:2] == ["network", "run"]
        if continuous and "--available-now" not in command:
            command = [*command, "--available-now"]
        assert main(command) == 0, (command, capsys.readouterr().err)
        capsys.readouterr()
        ran.append(" ".join(command[:2]))
    assert {"network register", "network unregister", "network replay", "grant --query", "revoke --query"} <= set(ran)
    assert (tour / "replayed" / "ann" / "q1.jsonl").read_text().strip()  # ann's rows by ACCESS.jsonl's grants
