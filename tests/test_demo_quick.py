"""The demo without running it: how it counts the network's rows, and the files README names.

No Spark: the network's micro-batches are stubbed, and README's commands that need no
Spark (check, explain, action, sp, network explain) run in-process in a folder laid out
as ``make demo`` leaves ``.streamwarden/demo``.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from streamwarden.cli.main import main
from streamwarden.datagen import generate_drill
from streamwarden.demo.samples import write_samples

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The README and every page of docs/ whose commands run in the demo's folder as written.
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory) -> Path:
    """A folder with what ``streamwarden demo`` leaves for README's commands (a smaller drill)."""
    folder = tmp_path_factory.mktemp("demo")
    generate_drill(folder / "data", soldiers=8, minutes=2.0, interval_seconds=5.0, health="uni", files_per_stream=2)
    write_samples(folder)
    return folder


def _commands(text: str) -> list[list[str]]:
    """README's shell commands (``streamwarden ...``), continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["streamwarden"]:
                commands.append(words[1:])
    return commands


READS = ("--catalog", "--queries", "--network", "--access")


def _files_read(command: list[str]) -> list[str]:
    """The paths a README command reads (not those it writes)."""
    paths = [command[1]] if command[0] == "check" else []
    for flag, value in zip(command, command[1:]):
        if flag in READS:
            paths.append(value)
        elif flag == "--input":
            paths.append(value.partition("=")[2])
    return paths


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_file_a_page_names_is_left_by_the_demo(demo_folder, page):
    text = page.read_text()
    commands = _commands(text)
    if page in (README, ROOT / "docs" / "cli.md"):
        assert any(c[0] == "check" for c in commands) and any(c[0] == "network" for c in commands)
    read = {path for command in commands for path in _files_read(command)}
    python = "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))
    read |= set(re.findall(r'"((?:data|in|incoming)/[\w./-]+|[\w.-]+\.(?:yaml|jsonl))"', python))
    missing = sorted(path for path in read if not (demo_folder / path).exists())
    assert not missing, f"{page.name} names files the demo does not leave: {missing}"
    assert any((demo_folder / "incoming" / "Position").iterdir())  # `run` has something to read


@pytest.mark.parametrize("page", [p for p in PAGES if _commands(p.read_text())], ids=lambda p: p.name)
def test_a_pages_commands_without_spark_run_as_written(demo_folder, tmp_path, monkeypatch, capsys, page):
    """check, explain, action, sp and explain --network (not drawn), in a fresh copy of the folder."""
    work = tmp_path / "demo"
    shutil.copytree(demo_folder, work)
    monkeypatch.chdir(work)
    commands = _commands(page.read_text())
    ran = []
    for command in commands:
        if command[0] in ("check", "action", "sp") or (command[0] == "explain" and "--input" not in command):
            if "--render" in command:
                at = command.index("--render")
                command = command[:at] + command[at + 2:]
            assert main(command) == 0, (page.name, command, capsys.readouterr().err)
            ran.append(command[0])
    if page == README:
        assert {"check", "action", "explain"} <= set(ran)
        assert (work / ".streamwarden" / "catalog.db").exists()  # `check` loaded it where README says


def test_samples_load(demo_folder):
    from streamwarden.catalog.loader import load_catalog
    from streamwarden.catalog.registry import load_access, load_queries

    for name in ("drill.yaml", "cloud.yaml", "c.yaml"):
        load_catalog(demo_folder / name)
    queries = load_queries(demo_folder / "QUERIES.yaml", load_catalog(demo_folder / "c.yaml"))
    assert [q.id for q in queries] == ["q1"] and queries[0].users == ("ann", "bob")
    assert {c.user for c in load_access(demo_folder / "ACCESS.jsonl", queries)} == {"ann", "bob"}
    assert (demo_folder / "data" / "MessageLog.jsonl").stat().st_size > 0


def test_check_in_the_demo_folder_finds_the_demos_store_and_says_what_another_catalog_replaces(
        demo_folder, tmp_path, monkeypatch, capsys):
    """The demo loads drill.yaml where the default store is, seen from its folder; loading
    another catalog there says what it takes away (the drill's streams, users and action)."""
    from streamwarden.catalog.loader import load_catalog
    from streamwarden.catalog.store import CatalogStore, sqlite_url

    work = tmp_path / "demo"
    shutil.copytree(demo_folder, work)
    CatalogStore(sqlite_url(work / ".streamwarden" / "catalog.db")).save(load_catalog(work / "drill.yaml"))
    monkeypatch.chdir(work)
    assert main(["check", "drill.yaml"]) == 0
    said = capsys.readouterr().out
    assert "unchanged: the same catalog as stored" in said and not (work / ".streamwarden" / ".streamwarden").exists()
    assert main(["check", "c.yaml"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("c.yaml: ok — ") and said[1].startswith("  replaced the catalog drill.yaml: removed ")
    assert "streams Health, Position" in said[1] and "users carla, paul, rick" in said[1] and "action a" in said[1]
