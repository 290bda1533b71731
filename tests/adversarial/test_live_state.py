"""Class 7 of issue 11: live state reverted, changes not checked.

Attacks and mistakes:
* re-running ``streamwarden check`` (the documented validate-and-load step) while queries
  run put the YAML's action values back, so an action ended live became open again and
  rows outside it flowed;
* ``revoke``, ``grant`` and ``action`` accepted names that exist nowhere: a mistyped
  revocation "succeeded" and the grant stayed open;
* the default store is relative to the working directory: a command run from another
  folder silently created, and changed, a new empty store.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import write_jsonl
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.catalog.store import CatalogStore, UnknownName, sqlite_url
from streamwarden.cli.main import main

CATALOG = """\
streams:
  S: {schema: {ts: timestamp, v: int}}
roles: {R: {}}
users:
  ann: {roles: [R]}
  bob: {roles: [R]}
  cid: {roles: [R]}
actions:
  a: {start: "2026-03-01T10:00:00Z", end: null}
policies:
  - {id: p1, subject: R, streams: [S], attributes: [v], privilege: read, time: ["start(a)", "end(a)"]}
"""
QUERIES = "queries:\n  - {id: q1, users: [ann, bob], query: 'SELECT v FROM S'}\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "c.yaml").write_text(CATALOG)
    (tmp_path / "q.yaml").write_text(QUERIES)
    return {"catalog": str(tmp_path / "c.yaml"), "queries": str(tmp_path / "q.yaml"),
            "store": sqlite_url(tmp_path / "state" / "catalog.db")}


def test_reloading_the_catalog_keeps_an_action_ended_live(files, capsys) -> None:
    assert main(["check", files["catalog"], "--store", files["store"]]) == 0
    assert main(["action", "a", "--end", "2026-03-01T10:00:30Z", "--store", files["store"]]) == 0
    assert main(["check", files["catalog"], "--store", files["store"]]) == 0  # the attack: reload while running
    assert "live values kept for action a" in capsys.readouterr().out
    live = CatalogStore(files["store"]).load().actions["a"]
    assert live.end == datetime(2026, 3, 1, 10, 0, 30, tzinfo=timezone.utc)
    assert main(["check", files["catalog"], "--store", files["store"], "--reset-actions"]) == 0  # explicit only
    assert CatalogStore(files["store"]).load().actions["a"].end is None


def test_a_reload_adds_new_actions_and_drops_undeclared_ones(tmp_path: Path) -> None:
    store = CatalogStore(sqlite_url(tmp_path / "s.db"))
    store.save(load_catalog_text(CATALOG))
    store.set_action("a", target=3.0)
    renamed = CATALOG.replace("  a: {start", "  b: {target: 9}\n  a: {start")
    changes = store.save(load_catalog_text(renamed))
    assert changes.kept == ("a",) and changes.added == ("b",) and store.actions()["a"].target == 3.0
    changes = store.save(load_catalog_text(CATALOG.replace('["start(a)", "end(a)"]', '["2026-03-01T10:00:00Z", '
                                                           '"2026-03-01T11:00:00Z"]').replace(
        '  a: {start: "2026-03-01T10:00:00Z", end: null}', '  c: {}')))
    assert changes.dropped == ("a", "b") and set(store.actions()) == {"c"}


@pytest.mark.spark
def test_rows_outside_an_action_ended_live_stay_out_after_a_reload(spark, files, tmp_path: Path, capsys) -> None:
    """End to end: the policy holds during action a; a is ended live at 10:00:30; `check` runs
    again; a replay reading the store still stops at 10:00:30."""
    write_jsonl(tmp_path / "s.jsonl", [{"ts": "2026-03-01T10:00:10Z", "v": 1}, {"ts": "2026-03-01T10:00:40Z", "v": 2}])
    assert main(["check", files["catalog"], "--store", files["store"]]) == 0
    assert main(["action", "a", "--end", "2026-03-01T10:00:30Z", "--store", files["store"]]) == 0
    assert main(["check", files["catalog"], "--store", files["store"]]) == 0
    out = tmp_path / "out.jsonl"
    assert main(["replay", "--catalog", files["catalog"], "--user", "ann", "--query", "SELECT v FROM S",
                 "--input", f"S={tmp_path / 's.jsonl'}", "--output", str(out), "--store", files["store"]]) == 0
    assert [json.loads(line)["v"] for line in out.read_text().splitlines()] == [1]


@pytest.mark.parametrize("args", [
    ["action", "a", "--end", "2026-03-01T10:00:30Z"],
    ["grant", "--query", "q1", "--user", "ann"],
    ["revoke", "--query", "q1", "--user", "ann"],
])
def test_changes_to_a_store_that_does_not_exist_fail_and_create_nothing(tmp_path: Path, capsys, monkeypatch,
                                                                         args: list[str]) -> None:
    """Run from another folder: the default store (relative to the working directory) is not
    there, so the change fails with exit 2 instead of creating a new store."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STREAMWARDEN_STORE", raising=False)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no store at sqlite:///" in err and "load a catalog first with `streamwarden check CATALOG --store" in err
    assert list(tmp_path.iterdir()) == []  # not even .streamwarden/
    missing = sqlite_url(tmp_path / "elsewhere" / "c.db")
    assert main(args + ["--store", missing]) == 2 and not (tmp_path / "elsewhere").exists()


def test_the_store_comes_from_streamwarden_store_when_set(files, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STREAMWARDEN_STORE", files["store"])
    assert main(["check", files["catalog"]]) == 0
    assert main(["action", "a", "--target", "5"]) == 0
    assert CatalogStore(files["store"]).actions()["a"].target == 5.0
    assert not (tmp_path / ".streamwarden").exists()


def test_an_unknown_action_is_refused(files, capsys) -> None:
    assert main(["check", files["catalog"], "--store", files["store"]]) == 0
    assert main(["action", "aa", "--end", "2026-03-01T10:00:30Z", "--store", files["store"]]) == 2
    assert "unknown action 'aa': the stored catalog declares a" in capsys.readouterr().err
    assert set(CatalogStore(files["store"]).actions()) == {"a"}  # no action 'aa' was created
    with pytest.raises(UnknownName):
        CatalogStore(files["store"]).set_action("aa", start=None)  # the API refuses too


def test_grants_and_revocations_name_registered_queries_and_known_users(files, capsys) -> None:
    store = files["store"]
    assert main(["check", files["catalog"], "--store", store]) == 0
    assert main(["grant", "--query", "q1", "--user", "ann", "--store", store]) == 2  # nothing registered yet
    assert "has no registered query" in capsys.readouterr().err
    assert main(["network", "register", files["queries"], "--catalog", files["catalog"], "--store", store]) == 0
    assert main(["grant", "--query", "q1", "--user", "ann", "--store", store, "--ts", "2026-03-01T10:00:00Z"]) == 0
    capsys.readouterr()
    for args, message in ((["revoke", "--query", "q2", "--user", "ann"], "unknown query 'q2'"),  # the typo
                          (["revoke", "--query", "q1", "--user", "anne"], "unknown user 'anne'"),
                          (["grant", "--query", "Q1", "--user", "ann"], "unknown query 'Q1'")):
        assert main(args + ["--store", store]) == 2
        assert message in capsys.readouterr().err
    changes = AuthorizationServer(store).changes()
    assert [(c.query, c.user, c.grant) for c in changes] == [("q1", "ann", True)]  # the grant is still the only change


def test_grant_says_which_time_it_used_and_notes_an_unlisted_user(files, capsys) -> None:
    store = files["store"]
    assert main(["network", "register", files["queries"], "--catalog", files["catalog"], "--store", store]) == 0
    capsys.readouterr()
    assert main(["grant", "--query", "q1", "--user", "ann", "--store", store]) == 0
    err = capsys.readouterr().err
    recorded = AuthorizationServer(store).changes()[-1].ts
    assert f"from {recorded.strftime('%Y-%m-%dT%H:%M:%S')}" in err and "(now: no --ts given)" in err
    assert main(["grant", "--query", "q1", "--user", "cid", "--store", store]) == 0  # cid: in the catalog, not listed
    assert "note: cid is not listed for q1" in capsys.readouterr().err


def test_the_python_api_checks_once_queries_are_registered(tmp_path: Path) -> None:
    catalog = load_catalog_text(CATALOG)
    server = AuthorizationServer(sqlite_url(tmp_path / "auth.db"))
    server.grant("q1", "ann", "2026-03-01T10:00:00Z")  # before the network starts: nothing to check against
    server.register(load_queries_text(QUERIES, catalog), catalog)
    assert server.registered() == {"q1": ("ann", "bob")}
    with pytest.raises(UnknownName, match="unknown query 'q9'"):
        server.revoke("q9", "ann", "2026-03-01T10:05:00Z")
    with pytest.raises(UnknownName, match="unknown user 'zed'"):
        server.grant("q1", "zed", "2026-03-01T10:05:00Z")
    server.revoke("q1", "ann", "2026-03-01T10:05:00Z")
    assert [c.grant for c in server.changes()] == [True, False]


@pytest.mark.spark
def test_a_network_registers_its_queries_when_it_starts(spark, tmp_path: Path) -> None:
    from streamwarden.runtime.network import NetworkRuntime

    catalog = load_catalog_text(CATALOG.replace(', time: ["start(a)", "end(a)"]', ""))
    (tmp_path / "in").mkdir()
    store = sqlite_url(tmp_path / "auth.db")
    NetworkRuntime(spark, store, {"S": str(tmp_path / "in")}, tmp_path / "out", tmp_path / "cp",
                   queries=load_queries_text(QUERIES, catalog), catalog=catalog)  # registered before it starts
    server = AuthorizationServer(store)
    assert server.registered() == {"q1": ("ann", "bob")}
    with pytest.raises(UnknownName):
        server.revoke("q2", "ann")
