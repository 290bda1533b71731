"""``replay --output DIR``: Spark's tasks write the rows as JSON-lines part files in parallel.

The folder holds exactly the lines the single-file form (``--output FILE.jsonl``) holds, in
another order; it appears complete or not at all (a failed replay leaves neither the folder
nor its staging sibling); it is private (0700/0600, whatever Spark's umask); a symlink at
the output is never followed; and a folder a replay did not write is refused, never deleted.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import DRILL_CATALOG, ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.cli.main import main
from streamwarden.engine import sinks
from streamwarden.errors import InputError, UnsupportedError

pytestmark = pytest.mark.spark

NULLS = """\
streams:
  S: {schema: {ts: timestamp, v: int, name: string, at: timestamp, x: double, ok: boolean}}
roles: {R: {}}
users: {ann: {roles: [R]}}
policies:
  - {id: p1, subject: R, streams: [S], attributes: "*", privilege: read}
"""
NULL_RECORDS = [
    {"ts": ts(1), "v": 1, "name": "a", "at": "2026-03-01T10:00:00.000001Z", "x": 1.5, "ok": True},
    {"ts": ts(2.25), "v": None, "name": None, "at": None, "x": None, "ok": None},
    {"ts": ts(3), "v": -7, "name": "é \"q\"\n", "at": "1970-01-01T00:00:00Z", "x": -0.0, "ok": False},
    {"ts": ts(4), "v": 2_147_483_647, "at": "2026-03-01T10:00:00.5+02:00", "x": 1e300},  # absent keys: NULL
]
POSITION = [{"ts": ts(s), "SID": s % 5, "Pos": s * 10.5, "Platoon": "XY"[s % 2]} for s in range(40)]


@pytest.fixture(scope="module")
def drill():
    return api.load_catalog(DRILL_CATALOG)


@pytest.fixture
def position(tmp_path: Path) -> dict[str, str]:
    return {"Position": str(write_jsonl(tmp_path / "in" / "Position.jsonl", POSITION))}


def part_lines(folder: Path) -> list[str]:
    """Every line of the folder's part files (what ``cat DIR/part-*`` prints), sorted."""
    return sorted(line for part in folder.glob("part-*") for line in part.read_text().splitlines())


def both_forms(catalog, user: str, query: str, inputs: dict, root: Path, spark) -> tuple[list[str], list[str]]:
    """The same replay written as one file and as a folder: (file's lines sorted, folder's sorted)."""
    single = api.replay_to_file(catalog, user, query, inputs, root / "one.jsonl", spark=spark)
    parts = api.replay_to_file(catalog, user, query, inputs, root / "parts", spark=spark)
    assert single.rows == parts.rows == json.loads((root / "parts" / sinks.REPLAY_MARKER).read_text())["rows"]
    return sorted((root / "one.jsonl").read_text().splitlines()), part_lines(root / "parts")


def leftovers(root: Path) -> list[str]:
    """Staging folders a replay left behind (hidden ``.NAME.partial-*`` siblings)."""
    return sorted(p.name for p in root.iterdir() if ".partial" in p.name)


# -- the same lines as the single file ------------------------------------------------------------
def test_role_policy_rows_equal_the_single_file(spark, drill, position, tmp_path: Path) -> None:
    one, parts = both_forms(drill, "paul", "SELECT SID, Pos, ts FROM Position WHERE Pos > 50", position, tmp_path,
                            spark)
    assert one == parts and len(one) == 17  # platoon X only (p1), Pos > 50
    assert list(json.loads(one[0])) == ["SID", "Pos", "ts", "_policies", "_graph"]
    assert spark.read.json(str(tmp_path / "parts")).count() == 17  # any JSON-lines reader reads the folder


def test_the_driver_never_collects_the_rows(spark, drill, position, tmp_path: Path, monkeypatch) -> None:
    from pyspark import RDD
    from pyspark.sql.classic.dataframe import DataFrame

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("rows brought to the driver")

    for name in ("collect", "toLocalIterator", "toPandas", "take", "head", "first", "tail", "toJSON"):
        monkeypatch.setattr(DataFrame, name, refuse)
    for name in ("collect", "toLocalIterator", "take"):
        monkeypatch.setattr(RDD, name, refuse)
    query = "SELECT SID FROM Position"
    assert api.replay_to_file(drill, "paul", query, position, tmp_path / "out", spark=spark).rows == 20
    with pytest.raises(AssertionError, match="driver"):  # as the single file must
        api.replay_to_file(drill, "paul", query, position, tmp_path / "out.jsonl", spark=spark)


def test_nulls_and_timestamps_equal_the_single_file(spark, tmp_path: Path) -> None:
    inputs = {"S": str(write_jsonl(tmp_path / "s.jsonl", NULL_RECORDS))}
    one, parts = both_forms(load_catalog_text(NULLS), "ann", "SELECT ts, v, name, at, x, ok FROM S", inputs,
                            tmp_path, spark)
    assert one == parts and len(one) == 4
    rows = sorted((json.loads(line) for line in parts), key=lambda r: r["ts"])
    assert rows[1] == {"ts": "2026-03-01T10:00:02.250000Z", "v": None, "name": None, "at": None, "x": None,
                       "ok": None, "_policies": ["p1"], "_graph": rows[1]["_graph"]}
    assert [r["at"] for r in rows] == ["2026-03-01T10:00:00.000001Z", None, "1970-01-01T00:00:00Z",
                                       "2026-03-01T08:00:00.500000Z"]


def test_nothing_authorized_is_an_empty_folder(spark, drill, position, tmp_path: Path) -> None:
    report = api.replay_to_file(drill, "rick", "SELECT SID FROM Position", position, tmp_path / "out", spark=spark)
    assert report.rows == 0 and part_lines(tmp_path / "out") == []
    assert (tmp_path / "out" / sinks.REPLAY_MARKER).is_file()


# -- all or nothing ---------------------------------------------------------------------------------
def broken_input(root: Path) -> dict[str, str]:
    path = root / "bad" / "Position.jsonl"
    write_jsonl(path, POSITION[:3])
    with path.open("a") as handle:
        handle.write('{"ts": "2026-03-01T10:00:09Z", "SID": "nine", "Pos": 1.0, "Platoon": "X"}\n')
    return {"Position": str(path)}


def test_a_failed_replay_leaves_no_folder_and_no_staging(spark, drill, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="broken record in stream Position"):
        api.replay_to_file(drill, "paul", "SELECT SID FROM Position", broken_input(tmp_path), tmp_path / "out",
                           spark=spark)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_failed_replay_keeps_the_earlier_output(spark, drill, position, tmp_path: Path) -> None:
    out = tmp_path / "out"
    api.replay_to_file(drill, "paul", "SELECT SID FROM Position", position, out, spark=spark)
    before = part_lines(out)
    with pytest.raises(InputError):
        api.replay_to_file(drill, "paul", "SELECT SID FROM Position", broken_input(tmp_path), out, spark=spark)
    assert part_lines(out) == before and len(before) == 20 and leftovers(tmp_path) == []


def test_an_earlier_replay_is_replaced_whole(spark, drill, position, tmp_path: Path) -> None:
    out = tmp_path / "out"
    api.replay_to_file(drill, "paul", "SELECT SID FROM Position", position, out, spark=spark)
    report = api.replay_to_file(drill, "paul", "SELECT SID FROM Position WHERE SID = 1", position, out, spark=spark)
    assert report.rows == 4 and len(part_lines(out)) == 4 and leftovers(tmp_path) == []


# -- private, and never through a link --------------------------------------------------------------
def loose(root: Path) -> list[str]:
    """What under ``root`` anyone but its owner may read, write or enter."""
    found = []
    for folder, dirs, files in os.walk(root):
        for path in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            if os.lstat(path).st_mode & 0o077:
                found.append(f"{path}: {stat.filemode(os.lstat(path).st_mode)}")
    return found


def test_the_folder_is_private_whatever_sparks_umask(spark, drill, position, tmp_path: Path, monkeypatch) -> None:
    written = sinks._spark_parts

    def like_a_loose_umask(job, folder: Path) -> int:  # a caller's session with umask 022
        rows = written(job, folder)
        for path, _dirs, files in os.walk(folder):
            os.chmod(path, 0o755)
            for name in files:
                os.chmod(os.path.join(path, name), 0o644)
        return rows

    monkeypatch.setattr(sinks, "_spark_parts", like_a_loose_umask)
    api.replay_to_file(drill, "paul", "SELECT SID FROM Position", position, tmp_path / "out", spark=spark)
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").iterdir()} == {0o600}
    assert loose(tmp_path / "out") == []
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".crc")]  # rows and markers only


def test_a_symlink_at_the_output_is_refused_not_followed(spark, drill, position, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "out").symlink_to(victim)
    with pytest.raises(InputError, match="symlink"):
        api.replay_to_file(drill, "paul", "SELECT SID FROM Position", position, tmp_path / "out", spark=spark)
    assert list(victim.iterdir()) == [] and (tmp_path / "out").is_symlink()


def test_a_symlink_planted_while_spark_runs_is_not_followed(spark, drill, position, tmp_path: Path,
                                                            monkeypatch) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    written = sinks._spark_parts

    def then_plant(job, folder: Path) -> int:  # someone races the replay to its output's name
        rows = written(job, folder)
        (tmp_path / "out").symlink_to(victim)
        return rows

    monkeypatch.setattr(sinks, "_spark_parts", then_plant)
    with pytest.raises(InputError, match="symlink"):
        api.replay_to_file(drill, "paul", "SELECT SID FROM Position", position, tmp_path / "out", spark=spark)
    assert list(victim.iterdir()) == [] and leftovers(tmp_path) == []


def test_a_link_at_a_guessable_staging_name_is_left_alone(spark, drill, position, tmp_path: Path) -> None:
    """Staging names are drawn by mkdtemp: a link planted at the obvious name is neither used nor removed."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / ".out.partial").symlink_to(victim)
    assert api.replay_to_file(drill, "paul", "SELECT SID FROM Position", position, tmp_path / "out",
                              spark=spark).rows == 20
    assert list(victim.iterdir()) == [] and (tmp_path / ".out.partial").is_symlink()


def test_links_inside_an_earlier_output_make_it_foreign(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / sinks.REPLAY_MARKER).write_text('{"rows": 0}\n')
    (out / "part-00000.json").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="a replay did not write"):
        sinks.check_replay_folder(out)


@pytest.mark.parametrize("output", ["", ".", "..", "out/..", "/"])
def test_the_output_names_a_folder(output: str) -> None:
    with pytest.raises(InputError, match="name the folder"):
        sinks.check_replay_folder(output)


# -- the command line -------------------------------------------------------------------------------
def replay_cli(catalog: Path, inputs: dict[str, str], output: Path, query: str = "SELECT SID FROM Position") -> int:
    return main(["replay", "--catalog", str(catalog), "--user", "paul", "--query", query,
                 *[a for s, p in inputs.items() for a in ("--input", f"{s}={p}")], "--output", str(output)])


def test_cli_refuses_a_folder_it_did_not_write(spark, position, tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert replay_cli(DRILL_CATALOG, position, out) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error: refusing --output") and "notes.txt" in err
    assert (out / "notes.txt").read_text() == "keep me" and sorted(os.listdir(out)) == ["notes.txt"]


def test_cli_writes_into_an_empty_folder_and_says_how_many(spark, position, tmp_path: Path, capsys) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    assert replay_cli(DRILL_CATALOG, position, out) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"20 rows written to {out}"
    assert len(part_lines(out)) == 20


def test_on_result_into_a_folder_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="ON RESULT"):
        sinks.check_replay_output(tmp_path / "out", on_result=True)
    sinks.check_replay_output(tmp_path / "out.jsonl", on_result=True)  # one file: SPGen's policy comes first
    assert not (tmp_path / "out").exists()
