"""``streamwarden token`` and ``streamwarden audit`` (issue 13's first part), without Spark:
the token is the last line of stdout and nowhere else, every user error is one line and
exit 2, and ``audit verify`` exits 1 (a finding) naming the first bad record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import delete, update

from streamwarden.catalog import audit
from streamwarden.catalog.identity import authenticate, list_tokens, token_id
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.cli.main import main

CATALOG = """
streams:
  S: {schema: {ts: timestamp, v: int}}
  HeartRate: {schema: {ts: timestamp, Patient_id: int, bpm: int}, key: Patient_id, punctuated_by: Patient_id}
roles: {R: {}}
users: {ann: {roles: [R]}, bob: {roles: [R]}}
"""


@pytest.fixture
def store(tmp_path: Path, capsys) -> str:
    (tmp_path / "c.yaml").write_text(CATALOG)
    url = sqlite_url(tmp_path / "s.db")
    assert main(["check", str(tmp_path / "c.yaml"), "--store", url]) == 0
    capsys.readouterr()
    return url


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def token_records(store: str) -> list[audit.AuditRecord]:
    """The trail's token records (the store's first record is the catalog ``check`` loaded)."""
    return [r for r in audit.records(store) if r.action.startswith("token.")]


def created(capsys) -> tuple[str, str]:
    out, err = capsys.readouterr()
    token = out.splitlines()[-1]
    return token, err


# -- token create / revoke ----------------------------------------------------------------------
def test_token_create_prints_the_token_last_and_only_there(store, capsys) -> None:
    assert main(["token", "create", "--user", "ann", "--admin", "--expires", "30 days", "--store", store]) == 0
    token, err = created(capsys)
    principal = authenticate(store, token)
    assert principal is not None and (principal.name, principal.admin) == ("ann", True)
    assert token not in err and token_id(token) in err and "admin" in err and "30 days" in err
    trail = token_records(store)
    assert [(r.action, r.object, r.outcome) for r in trail] == [("token.create", "user:ann", "ok")]
    assert trail[0].principal.startswith("cli:") and trail[0].detail["token_id"] == token_id(token)
    assert token not in json.dumps([r.to_json() for r in trail])
    raw = Path(store.removeprefix("sqlite:///")).read_bytes()
    assert token.encode() not in raw and token.split("_", 2)[2].encode() not in raw


def test_provider_tokens_with_and_without_a_key(store, capsys) -> None:
    assert main(["token", "create", "--provider", "HeartRate", "--key", "7", "--store", store]) == 0
    keyed, _ = created(capsys)
    assert main(["token", "create", "--provider", "S", "--store", store]) == 0
    whole, _ = created(capsys)
    assert authenticate(store, keyed).label == "provider:HeartRate/7" and authenticate(store, whole).key is None
    assert [r.object for r in token_records(store)] == ["provider:HeartRate/7", "provider:S"]


def test_revoke_says_how_many_and_the_tokens_stop_working(store, capsys) -> None:
    tokens = []
    for _ in range(2):
        assert main(["token", "create", "--user", "bob", "--store", store]) == 0
        tokens.append(created(capsys)[0])
    assert main(["token", "create", "--provider", "HeartRate", "--key", "7", "--store", store]) == 0
    provider, _ = created(capsys)
    assert main(["token", "revoke", "--user", "bob", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("revoked 2 tokens of user:bob")
    assert main(["token", "revoke", "--provider", "HeartRate", "--key", "8", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("revoked 0 tokens of provider:HeartRate/8")
    assert main(["token", "revoke", "--provider", "HeartRate", "--key", "7", "--store", store]) == 0
    assert capsys.readouterr().out.startswith("revoked 1 token of provider:HeartRate/7")
    assert all(authenticate(store, t) is None for t in tokens + [provider])
    revokes = [r for r in audit.records(store) if r.action == "token.revoke"]
    assert [(r.object, r.detail["revoked"]) for r in revokes] == [("user:bob", 2), ("provider:HeartRate/8", 0),
                                                                   ("provider:HeartRate/7", 1)]


@pytest.mark.parametrize("args, message", [
    (["create", "--user", "zed"], "error: unknown user 'zed'"),
    (["create", "--provider", "Nope"], "error: unknown stream 'Nope'"),
    (["create", "--provider", "S", "--key", "1"], "has no punctuated_by attribute"),
    (["create", "--provider", "HeartRate", "--key", "seven"], "is not an int"),
    (["revoke", "--user", "zed"], "error: unknown user 'zed'"),
])
def test_refusals_after_the_store_opened_are_one_line_and_audited(store, capsys, args, message) -> None:
    assert main(["token", *args, "--store", store]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert message in line and not {"ann", "bob"} & set(re.findall(r"\w+", line))  # known names are not revealed
    trail = token_records(store)
    assert len(trail) == 1 and trail[0].outcome == "refused" and audit.verify(store).ok
    assert list_tokens(store) == []


@pytest.mark.parametrize("args, message", [
    (["create", "--user", "ann", "--key", "7"], "use it with --provider"),
    (["create", "--provider", "HeartRate", "--admin"], "use it with --user"),
    (["create", "--user", "ann", "--expires", "400 days"], "at most 366 days"),
    (["create", "--user", "ann", "--expires", "0 seconds"], "at least 1 second"),
    (["create", "--user", "ann", "--expires", "tomorrow"], "not a duration"),
    (["create", "--provider", "HeartRate", "--key", "a\tb"], "printable characters on one line"),
    (["create", "--user", "../ann"], "not a valid name"),
    (["create", "--provider", "S\nforged"], "not a valid name"),
    (["revoke", "--provider", "S", "--key", ""], "printable characters"),
])
def test_usage_errors_are_one_line_exit_2(store, capsys, args, message) -> None:
    assert main(["token", *args, "--store", store]) == 2
    assert message in one_error_line(capsys.readouterr().err)
    assert list_tokens(store) == []


@pytest.mark.parametrize("args", [["create"], ["create", "--user", "ann", "--provider", "S"], ["revoke"]])
def test_a_token_needs_exactly_one_holder(store, capsys, args) -> None:
    with pytest.raises(SystemExit) as info:
        main(["token", *args, "--store", store])
    assert info.value.code == 2 and "--user" in capsys.readouterr().err


def test_a_missing_store_is_refused_and_not_created(tmp_path: Path, capsys) -> None:
    missing = sqlite_url(tmp_path / "none.db")
    for args in (["token", "create", "--user", "ann"], ["token", "revoke", "--user", "ann"], ["audit", "verify"],
                 ["audit", "show"]):
        assert main([*args, "--store", missing]) == 2
        assert "no store at" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "none.db").exists()


def test_a_token_whose_creation_cannot_be_audited_is_not_made_nor_printed(store, capsys) -> None:
    with CatalogStore(store).engine.begin() as conn:  # the store itself refuses every new record
        conn.exec_driver_sql("CREATE TRIGGER full BEFORE INSERT ON audit_trail "
                             "BEGIN SELECT RAISE(ABORT, 'the audit trail is full'); END")
    assert main(["token", "create", "--user", "ann", "--store", store]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "the audit trail is full" in one_error_line(err)
    assert list_tokens(store) == []  # the token and its record were one transaction: neither is there


# -- audit verify / show ------------------------------------------------------------------------
def make_trail(store: str, capsys) -> None:
    for user in ("ann", "bob", "ann"):
        assert main(["token", "create", "--user", user, "--store", store]) == 0
    assert main(["token", "revoke", "--user", "bob", "--store", store]) == 0
    capsys.readouterr()


def test_audit_verify_is_0_on_an_intact_trail_and_prints_its_head(store, capsys) -> None:
    make_trail(store, capsys)
    assert main(["audit", "verify", "--store", store]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("audit trail intact: 5 records; head 5:")  # the catalog, 3 creations, 1 revocation
    head = out.split("head ", 1)[1].split()[0]
    assert main(["audit", "verify", "--anchor", head, "--store", store]) == 0


@pytest.mark.parametrize("tamper, seq, reason", [
    (lambda t: update(t).where(t.c.seq == 2).values(object="user:bob"), 2, "changed"),
    (lambda t: delete(t).where(t.c.seq == 2), 2, "deleted"),
    (lambda t: delete(t).where(t.c.seq == 5), 5, "deleted"),
    (lambda t: delete(t).where(t.c.seq == 1), 1, "deleted"),
])
def test_audit_verify_is_1_naming_the_first_bad_record(store, capsys, tamper, seq, reason) -> None:
    make_trail(store, capsys)
    with CatalogStore(store).engine.begin() as conn:
        conn.execute(tamper(audit._audit))
    assert main(["audit", "verify", "--store", store]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(f"audit trail broken: record {seq} was {reason}: ") and err == ""


def test_audit_verify_with_a_malformed_anchor_is_a_usage_error(store, capsys) -> None:
    assert main(["audit", "verify", "--anchor", "head", "--store", store]) == 2
    assert "SEQ:HASH" in one_error_line(capsys.readouterr().err)


def test_audit_show_prints_one_line_per_record_or_json(store, capsys) -> None:
    make_trail(store, capsys)
    assert main(["audit", "show", "--store", store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[0].startswith("#1 ") and " catalog.update catalog ok " in lines[0]
    assert lines[1].startswith("#2 ") and " token.create user:ann ok " in lines[1]
    assert main(["audit", "show", "--format", "json", "--store", store]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5] and rows[4]["action"] == "token.revoke"
    principal = rows[0]["principal"]
    assert main(["audit", "show", "--principal", principal, "--since", rows[3]["time"], "--store", store]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["#4", "#5"]
    assert main(["audit", "show", "--principal", "user:nobody", "--store", store]) == 0
    assert capsys.readouterr().out == ""
    assert main(["audit", "show", "--since", "last week", "--store", store]) == 2
    assert "not an ISO-8601 timestamp" in one_error_line(capsys.readouterr().err)
