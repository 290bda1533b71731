"""Every change made through the command line or the Python API is an audit record (issue 34):
the README tour's changes, run as written through the CLI, are one record each in the
service's hash chain, under the operator; a refused change is recorded ``refused``; an
operator's name that could forge a record is cleaned; and a record the store will not take
undoes its change. No Spark: these commands start none."""

from __future__ import annotations

import getpass
import re
import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from streamwarden.api import (OPERATOR_ENV, AuditError, AuthorizationServer, CatalogStore, RegisteredQuery,
                              audit_records, create_token, load_catalog, load_catalog_text, register, unregister,
                              update_catalog, verify_audit)
from streamwarden.cli.main import main
from streamwarden.demo.samples import NETWORK_CATALOG, NETWORK_QUERIES
from test_demo_quick import README, _commands

TOKEN_SHAPED = "swt_0123456789abcdef_" + "A" * 43
#: The README tour's commands that change the store (the others read it, or run Spark).
CHANGES = ("check", "action", "grant", "revoke", "network register")


@pytest.fixture
def tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tour's folder with its catalogs and queries; the store is the default one in it."""
    (tmp_path / "drill.yaml").write_text(resources.files("streamwarden.demo").joinpath("drill.yaml").read_text())
    (tmp_path / "c.yaml").write_text(NETWORK_CATALOG)
    (tmp_path / "QUERIES.yaml").write_text(NETWORK_QUERIES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STREAMWARDEN_STORE", raising=False)
    monkeypatch.setenv(OPERATOR_ENV, "olga")
    return tmp_path


def store_of(folder: Path) -> str:
    return f"sqlite:///{folder / '.streamwarden' / 'catalog.db'}"


def tour_changes() -> list[list[str]]:
    """README's change commands as written, then those of tokens and unregistering."""
    written = [c for c in _commands(README.read_text()) if c[0] in CHANGES or " ".join(c[:2]) in CHANGES]
    assert [c[0] for c in written] == ["check", "action", "network", "grant"]  # README's tour, in its order
    return written + [["revoke", "--query", "q1", "--user", "ann", "--ts", "2026-03-01T10:05:00Z"],
                      ["token", "create", "--user", "ann"], ["token", "revoke", "--user", "ann"],
                      ["network", "unregister", "--query", "q1"]]


def run(*argv: str) -> int:
    return main(list(argv))


def trigger(store: str, table: str, when: str = "INSERT") -> None:
    """Make the store refuse every ``when`` on ``table``: a real failure of the store, not a stand-in."""
    with sqlite3.connect(store.removeprefix("sqlite:///")) as conn:
        conn.execute(f"CREATE TRIGGER refuse_{table}_{when.lower()} BEFORE {when} ON {table} "
                     "BEGIN SELECT RAISE(ABORT, 'the disk refuses audit records'); END")


# -- the tour, through the command line ------------------------------------------------------------
def test_each_change_of_the_tour_is_one_record_and_verify_counts_them(tour, capsys) -> None:
    for command in tour_changes():
        assert main(command) == 0, (command, capsys.readouterr().err)
    capsys.readouterr()
    store = store_of(tour)
    found = [(r.principal, r.action, r.object, r.outcome) for r in audit_records(store)]
    assert found == [("cli:olga", action, object, "ok") for action, object in [
        ("catalog.update", "catalog"),  # check drill.yaml
        ("action.update", "action:a"),  # action a --start
        ("catalog.update", "catalog"), ("query.create", "query:q1"),  # network register QUERIES.yaml --catalog c.yaml
        ("grant.create", "query:q1"), ("grant.revoke", "query:q1"),
        ("token.create", "user:ann"), ("token.revoke", "user:ann"),
        ("query.delete", "query:q1")]]
    trail = audit_records(store)
    assert len({r.request_id for r in trail}) == len(trail)  # each change its own request id
    details = [r.detail for r in trail]
    assert details[1] == {"start": "2026-03-01T10:00:00Z"}
    assert details[2]["catalog"] == "c.yaml" and "streams_removed" in details[2]  # what it replaced
    assert details[3] == {"id": "q1", "level": None, "users": ["ann", "bob"], "registration": "new"}
    assert details[4] == {"user": "ann", "sign": "+", "query": "q1", "ts": "2026-03-01T10:00:00Z", "until": None}
    assert details[6]["token_id"] and details[7] == {"revoked": 1}
    assert run("audit", "verify") == 0
    assert capsys.readouterr().out.startswith(f"audit trail intact: {len(trail)} records; head {len(trail)}:")
    assert run("audit", "show", "--principal", "cli:olga") == 0
    assert len(capsys.readouterr().out.splitlines()) == len(trail)


def test_a_change_refused_is_recorded_refused(tour, capsys) -> None:
    assert run("network", "register", "QUERIES.yaml", "--catalog", "c.yaml") == 0
    assert run("grant", "--query", "q1", "--user", "zed") == 2  # no such user
    assert "unknown user 'zed'" in capsys.readouterr().err
    assert run("action", "nope", "--start", "2026-03-01T10:00:00Z") == 2  # c.yaml declares no such action
    refused = [r for r in audit_records(store_of(tour)) if r.outcome == "refused"]
    assert [(r.principal, r.action, r.object) for r in refused] == [("cli:olga", "grant.create", "query:q1"),
                                                                     ("cli:olga", "action.update", "action:nope")]
    assert refused[0].detail["user"] == "zed" and refused[0].detail["error"] == "UnknownName"
    assert AuthorizationServer(store_of(tour)).history() == ()  # and nothing was granted
    assert verify_audit(store_of(tour)).ok


def test_check_without_a_store_and_usage_errors_record_nothing(tour, capsys) -> None:
    assert run("check", "c.yaml", "--no-store") == 0
    assert run("grant", "--query", "q1", "--user", "ann") == 2  # no store: nothing to record into
    assert not (tour / ".streamwarden" / "catalog.db").exists()


# -- who: the operator, or whoever the program names ----------------------------------------------
def test_the_apis_default_principal_is_the_os_user_and_the_environment_overrides_it(tmp_path, monkeypatch) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    catalog = load_catalog_text(NETWORK_CATALOG, "c.yaml")
    monkeypatch.delenv(OPERATOR_ENV, raising=False)
    update_catalog(catalog, url)
    monkeypatch.setenv(OPERATOR_ENV, "alice")
    register([RegisteredQuery("q1", ("ann",), "SELECT s1.heartRate FROM Stream1 AS s1")], None, url)
    AuthorizationServer(url).grant("q1", "ann", "2026-03-01T10:00:00Z")
    register([RegisteredQuery("q2", ("ann",), "SELECT s1.heartRate FROM Stream1 AS s1")], None, url,
             actor="app:billing")
    AuthorizationServer(url, actor=None).grant("q2", "ann")  # a caller whose own trail records it: not here
    unregister("q2", url, actor=None)
    found = [(r.principal, r.action, r.object) for r in audit_records(url)]
    assert found == [(f"cli:{getpass.getuser()}", "catalog.update", "catalog"),
                     ("cli:alice", "query.create", "query:q1"), ("cli:alice", "grant.create", "query:q1"),
                     ("app:billing", "query.create", "query:q2")]
    with pytest.raises(ValueError, match="opened for actor None"):  # a handle's actor is not silently replaced
        create_token(CatalogStore(url, actor=None), "ann", actor="app:billing")


@pytest.mark.parametrize("name, principal, repaired", [
    ("eve\ncli:root catalog.update catalog ok", "cli:eve?cli:root catalog.update catalog ok", "one line"),
    ("eve\x1b[2J\x07", "cli:eve?[2J?", "one line"),
    (TOKEN_SHAPED, "cli:swt_…redacted", "holds a token"),
    ("e" * 300, "cli:" + "e" * 252, "longer than 256"),
])
def test_an_operator_name_that_could_forge_a_record_is_cleaned(tour, capsys, monkeypatch, name, principal,
                                                               repaired) -> None:
    monkeypatch.setenv(OPERATOR_ENV, name)
    assert run("check", "c.yaml") == 0
    assert run("token", "create", "--user", "ann") == 0
    token = capsys.readouterr().out.splitlines()[-1]
    trail = audit_records(store_of(tour))
    assert [r.principal for r in trail] == [principal, principal]
    assert all(repaired in r.detail["repaired"] for r in trail)
    assert trail[1].detail["given"]["token_id"]  # what the change said is kept, under "given"
    assert run("audit", "show") == 0
    shown = capsys.readouterr().out
    assert len(shown.splitlines()) == 2 and TOKEN_SHAPED not in shown and token not in shown  # no line forged
    assert verify_audit(store_of(tour)).ok


def test_a_token_shaped_or_multi_line_name_in_a_refused_change_is_redacted(tmp_path) -> None:
    store = CatalogStore(f"sqlite:///{tmp_path / 'c.db'}", actor="app:x")
    store.save(load_catalog_text(NETWORK_CATALOG, "c.yaml"))
    for name in (TOKEN_SHAPED, "a\nforged"):
        with pytest.raises(Exception, match="unknown action"):
            store.set_action(name, target=1.0)
    refused = audit_records(store)[1:]
    assert [(r.object, r.outcome) for r in refused] == [("action:swt_…redacted", "refused"),
                                                        ("action:a?forged", "refused")]
    assert TOKEN_SHAPED not in str([r.to_json() for r in refused]) and verify_audit(store).ok


# -- a record the store will not take undoes its change -------------------------------------------
@pytest.mark.parametrize("table, when", [("audit_trail", "INSERT"), ("audit_head", "UPDATE")])
def test_a_change_whose_record_cannot_be_written_is_not_made(tour, capsys, table, when) -> None:
    assert run("network", "register", "QUERIES.yaml", "--catalog", "c.yaml") == 0
    store = store_of(tour)
    before = audit_records(store)
    trigger(store, table, when)
    capsys.readouterr()
    for command in (["check", "drill.yaml"], ["action", "nope", "--start", "2026-03-01T10:00:00Z"],
                    ["grant", "--query", "q1", "--user", "ann"], ["token", "create", "--user", "ann"],
                    ["network", "unregister", "--query", "q1"]):
        assert main(command) == 2, command
        out, err = capsys.readouterr()
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in err and "the disk refuses audit records" in lines[0], err
        assert out == ""  # a token made unaudited is never shown
    assert CatalogStore(store).load().name == "c.yaml"  # check drill.yaml did not replace it
    server = AuthorizationServer(store)
    assert server.history() == () and not list(server.sp_folder.glob("sp-*"))  # no grant, none published
    assert set(server.registered()) == {"q1"}  # still registered
    from streamwarden.catalog.identity import list_tokens

    assert list_tokens(store) == []
    assert audit_records(store) == before and verify_audit(store).ok


def test_through_the_api_a_failing_record_raises_and_leaves_the_store_as_it_was(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = CatalogStore(url)
    store.save(load_catalog(resources.files("streamwarden.demo").joinpath("drill.yaml")))
    start = store.actions()["a"].start
    trigger(url, "audit_trail")
    with pytest.raises(AuditError, match=re.escape("the change was not made: its audit record could not be written")):
        store.set_action("a", start=None)
    assert CatalogStore(url).actions()["a"].start == start
