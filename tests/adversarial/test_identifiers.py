"""Class 6 of issue 11: identifiers that reach file paths.

The attack: a user named ``../x`` (or a query id like ``q/../../x``) made ``network
replay`` write outside ``--output-dir``. One grammar (streamwarden.names) is checked at
every entry point -- the catalog (at the name's file:line:col), QUERIES.yaml, the CLI's
arguments, the Python API -- and every per-user or per-query path is built by
``safe_path``, which refuses a result outside its root even for a name that slipped past
(a RegisteredQuery built in Python) or a symlink planted in the output tree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery, load_queries_text
from streamwarden.cli.main import main
from streamwarden.errors import CatalogError
from streamwarden.names import InvalidName, UnsafePath, check_name, safe_path

CATALOG = """\
streams:
  S: {schema: {ts: timestamp, v: int}}
roles: {R: {}}
users:
  ann: {roles: [R]}
actions:
  a: {start: "2026-03-01T10:00:00Z"}
policies:
  - {id: p1, subject: R, streams: [S], attributes: [v], privilege: read}
"""

HOSTILE = ["../x", "..", ".", "a/b", "a\\b", "x\n", "a.b", "a-b", "_spark_metadata", "", " ann", "ann ",
           "a\0b", "é", "1abc", "x" * 65, "~root", "$HOME", "a:b", "*"]


@pytest.mark.parametrize("value", HOSTILE)
def test_the_grammar_refuses_every_name_that_could_shape_a_path(value: str) -> None:
    """Separators, dot names, leading '_' (the system's own folders and columns), non-ASCII,
    too long: all refused, for every kind."""
    for kind in ("user", "query id", "role", "stream", "action", "attribute"):
        with pytest.raises(InvalidName, match=kind):
            check_name(kind, value)


@pytest.mark.parametrize("value", ["ann", "A", "q1", "Beats_per_min", "CQ2", "x" * 64, "dr_lee"])
def test_the_grammar_accepts_what_catalogs_use(value: str) -> None:
    assert check_name("user", value) == value


@pytest.mark.parametrize("value", [None, 7, True, ["ann"], {"a": 1}])
def test_names_that_are_not_text_are_refused_with_a_message(value: object) -> None:
    with pytest.raises(InvalidName, match="must be a name"):
        check_name("user", value)


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("  ann: {roles: [R]}", '  "../x": {roles: [R]}', 5, "user '../x'"),
    ("  ann: {roles: [R]}", '  "a/b": {roles: [R]}', 5, "user 'a/b'"),
    ("  ann: {roles: [R]}", "  ann: {roles: [R]}\n  Ann: {roles: [R]}", 6, "only in case"),
    ("  S: {schema", '  "../S": {schema', 2, "stream '../S'"),
    ("v: int}", '"../v": int}', 2, "attribute '../v'"),
    ("v: int}", "_policies: int}", 2, "attribute '_policies'"),
    ("roles: {R: {}}", 'roles: {"R/..": {}}', 3, "role 'R/..'"),
    ("  a: {start", '  "a b": {start', 7, "action 'a b'"),
    ("{id: p1,", '{id: "p/1",', 9, "policy id 'p/1'"),
    ("ann: {roles: [R]}", "ann: {roles: [R], profile: {'../p': 1}}", 5, "profile attribute '../p'"),
])
def test_the_catalog_refuses_hostile_names_at_their_line(old: str, new: str, line: int, message: str) -> None:
    """Each kind of catalog name, declared hostile: one CatalogError at the name's own line."""
    text = CATALOG.replace(old, new, 1)
    assert text != CATALOG
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog_text(text, "c.yaml")
    assert info.value.one_line().startswith(f"c.yaml:{line}:")


QUERIES = """\
queries:
  - {id: q1, users: [ann], query: "SELECT v FROM S"}
  - {id: q2, users: [ann], query: "SELECT v FROM S"}
"""


@pytest.mark.parametrize(("old", "new", "message"), [
    ("id: q2", 'id: "../q2"', "query id '../q2'"),
    ("id: q2", 'id: "q/../../x"', "query id 'q/../../x'"),
    ("id: q2", "id: Q1", "differs from 'q1' only in case"),
    ("id: q2", "id: q2.jsonl", "query id 'q2.jsonl'"),
])
def test_query_files_refuse_hostile_ids_at_their_line(old: str, new: str, message: str) -> None:
    with pytest.raises(CatalogError, match=message) as info:
        load_queries_text(QUERIES.replace(old, new), load_catalog_text(CATALOG), "queries.yaml")
    assert info.value.one_line().startswith("queries.yaml:3:")


def test_safe_path_refuses_dot_dot_separators_and_escaping_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    assert safe_path(root, "ann", "q1.jsonl") == (root / "ann" / "q1.jsonl").resolve()
    for parts in (("..",), ("..", "x"), ("a/../../x",), ("ann", ".."), ("/etc",), ("",)):
        with pytest.raises(UnsafePath):
            safe_path(root, *parts)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "mallory")  # planted in the output tree
    with pytest.raises(UnsafePath, match="symlink"):
        safe_path(root, "mallory", "q1.jsonl")
    (root / "bob").mkdir()
    (root / "ann").mkdir()
    os.symlink(root / "bob" / "q1.jsonl", root / "ann" / "q1.jsonl")  # inside the root, but another user's file
    with pytest.raises(UnsafePath, match="symlink"):
        safe_path(root, "ann", "q1.jsonl")


def test_network_replay_with_a_hostile_user_writes_nothing_outside(tmp_path: Path, capsys) -> None:
    """The attack as reported, through the CLI: refused when the catalog loads, exit 2, one line."""
    (tmp_path / "c.yaml").write_text(CATALOG.replace("  ann: {roles: [R]}", '  "../x": {roles: [R]}'))
    (tmp_path / "q.yaml").write_text("queries: [{id: q1, users: ['../x'], query: 'SELECT v FROM S'}]\n")
    (tmp_path / "access.jsonl").write_text('{"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "../x", '
                                           '"sign": "+"}\n')
    (tmp_path / "s.jsonl").write_text('{"ts": "2026-03-01T10:00:01Z", "v": 1}\n')
    before = set(tmp_path.iterdir())
    code = main(["network", "replay", "--catalog", str(tmp_path / "c.yaml"), "--queries", str(tmp_path / "q.yaml"),
                 "--access", str(tmp_path / "access.jsonl"), "--input", f"S={tmp_path / 's.jsonl'}",
                 "--output-dir", str(tmp_path / "out" / "inner")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "c.yaml:5:" in err and "user '../x'" in err
    assert set(tmp_path.iterdir()) == before  # nothing written, inside or out


def test_replay_network_refuses_a_hostile_name_built_in_python(tmp_path: Path) -> None:
    """A RegisteredQuery made in Python skips QUERIES.yaml: the path is still checked (no Spark
    is needed to refuse: the user has no grant, so only the empty file would be written)."""
    from streamwarden.runtime.network_replay import replay_network

    catalog = load_catalog_text(CATALOG)
    for query in (RegisteredQuery("q1", ("../x",), "SELECT v FROM S"),
                  RegisteredQuery("../../q", ("ann",), "SELECT v FROM S")):
        with pytest.raises(InvalidName):
            replay_network(None, catalog, [query], [], {"S": str(tmp_path)}, tmp_path / "out")  # type: ignore[arg-type]
    assert not any((tmp_path / "out").rglob("*.jsonl"))
    assert not (tmp_path / "x").exists() and not (tmp_path / "q.jsonl").exists()


def test_replay_network_refuses_a_symlink_planted_for_a_user(tmp_path: Path) -> None:
    from streamwarden.runtime.network_replay import replay_network

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "ann")
    queries = [RegisteredQuery("q1", ("ann",), "SELECT v FROM S")]
    with pytest.raises(UnsafePath):
        replay_network(None, load_catalog_text(CATALOG), queries, [],  # type: ignore[arg-type]
                       {"S": str(tmp_path)}, out)
    assert list(elsewhere.iterdir()) == []


def test_the_shared_network_refuses_hostile_names_before_anything_runs(tmp_path: Path) -> None:
    from streamwarden.runtime.network import NetworkRuntime

    catalog = load_catalog_text(CATALOG)
    queries = (RegisteredQuery("../q", ("ann",), "SELECT v FROM S"),)
    with pytest.raises(InvalidName):  # refused when registered, before anything reaches the store or Spark
        NetworkRuntime(None, f"sqlite:///{tmp_path}/s.db", {"S": str(tmp_path)}, tmp_path / "out",  # type: ignore[arg-type]
                       tmp_path / "cp", queries=queries, catalog=catalog)


@pytest.mark.parametrize("args", [
    ["grant", "--query", "../q1", "--user", "ann"],
    ["grant", "--query", "q1", "--user", "../ann"],
    ["revoke", "--query", "q1/..", "--user", "ann"],
    ["action", "../a", "--end", "2026-03-01T11:00:00Z"],
    ["explain", "--catalog", "CATALOG", "--user", "../ann", "--query", "SELECT v FROM S"],
    ["replay", "--catalog", "CATALOG", "--user", "ann", "--query", "SELECT v FROM S", "--input", "S=x.jsonl",
     "--output", "o.jsonl", "--into", "../S"],
])
def test_the_cli_refuses_hostile_names_in_its_arguments(tmp_path: Path, capsys, args: list[str]) -> None:
    (tmp_path / "c.yaml").write_text(CATALOG)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["check", str(tmp_path / "c.yaml"), "--store", store]) == 0
    args = [str(tmp_path / "c.yaml") if a == "CATALOG" else a for a in args]
    if args[0] in ("grant", "revoke", "action"):
        args += ["--store", store]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "is not a valid name" in err and err.count("\n") == 1


def test_the_api_refuses_hostile_names(tmp_path: Path) -> None:
    catalog = load_catalog_text(CATALOG)
    with pytest.raises(InvalidName):
        api.authorize(catalog, "../ann", "SELECT v FROM S")
    with pytest.raises(InvalidName):
        api.authorize(catalog, "ann", "SELECT v FROM S", into="../S")
    with pytest.raises(InvalidName):
        api.run_levels(catalog, [api.LevelQuery("../q", "ann", "SELECT v FROM S")], {"S": str(tmp_path)},
                       tmp_path / "out", store_url=f"sqlite:///{tmp_path}/s.db")
    with pytest.raises(InvalidName):
        api.run_levels(catalog, [api.LevelQuery("q", "ann", "SELECT v FROM S"),
                                 api.LevelQuery("Q", "ann", "SELECT v FROM S")], {"S": str(tmp_path)},
                       tmp_path / "out", store_url=f"sqlite:///{tmp_path}/s.db")
