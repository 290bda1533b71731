"""``network register`` / ``unregister`` and ``network run``'s argument checks, without Spark."""

from __future__ import annotations

from pathlib import Path

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.store import sqlite_url
from streamwarden.cli.main import main

CATALOG = """
lattice: {classes: {COI1: ["1", "2"]}}
streams: {S: {schema: {ts: timestamp, v: int, sender: string}, level: {from: sender}}}
users: {ann: {clearance: "[1]"}, bob: {clearance: "[T]"}}
"""
QUERIES = """
queries:
  - {id: q1, users: [ann, bob], query: "SELECT v FROM S", level: "[1]"}
  - {id: q2, users: [bob], query: "SELECT COUNT(*) AS n FROM S [ROWS 5]"}
"""


def files(tmp_path: Path) -> tuple[str, str, str]:
    (tmp_path / "c.yaml").write_text(CATALOG)
    (tmp_path / "q.yaml").write_text(QUERIES)
    return str(tmp_path / "c.yaml"), str(tmp_path / "q.yaml"), sqlite_url(tmp_path / "s.db")


def test_register_keeps_text_and_level_and_unregister_removes_a_query(tmp_path, capsys) -> None:
    catalog, queries, store = files(tmp_path)
    assert main(["network", "register", queries, "--catalog", catalog, "--store", store]) == 0
    registered = {q.id: q for q in AuthorizationServer(store).registrations()}
    assert registered["q1"].level == "[1]" and registered["q2"].query.startswith("SELECT COUNT")
    assert main(["network", "unregister", "--query", "q2", "--store", store]) == 0
    assert [q.id for q in AuthorizationServer(store).registrations()] == ["q1"]
    capsys.readouterr()
    assert main(["network", "unregister", "--query", "q2", "--store", store]) == 2
    assert "unknown query 'q2'" in capsys.readouterr().err


def test_unregister_on_a_missing_store_creates_nothing(tmp_path, capsys) -> None:
    assert main(["network", "unregister", "--query", "q1", "--store", sqlite_url(tmp_path / "none.db")]) == 2
    assert not (tmp_path / "none.db").exists()


def test_network_run_needs_a_catalog_for_its_queries_and_registered_queries(tmp_path, capsys) -> None:
    catalog, queries, store = files(tmp_path)
    (tmp_path / "in").mkdir()
    base = ["network", "run", "--input", f"S={tmp_path / 'in'}", "--output-dir", str(tmp_path / "out"),
            "--store", store, "--available-now"]
    assert main(base + ["--queries", queries]) == 2
    assert "--queries needs --catalog" in capsys.readouterr().err
    assert main(base) == 2
    assert "holds no catalog" in capsys.readouterr().err
    assert main(["check", catalog, "--store", store]) == 0
    capsys.readouterr()
    assert main(base) == 2
    assert "has no registered query" in capsys.readouterr().err


def test_a_query_level_the_lattice_cannot_parse_names_its_line(tmp_path, capsys) -> None:
    catalog, _, store = files(tmp_path)
    (tmp_path / "bad.yaml").write_text('queries:\n  - {id: q, users: [ann], query: "SELECT v FROM S", level: "[9]"}\n')
    assert main(["network", "register", str(tmp_path / "bad.yaml"), "--catalog", catalog, "--store", store]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:2:" in err and "Traceback" not in err


def test_a_grant_time_without_a_zone_is_said_to_be_utc(tmp_path, capsys) -> None:
    catalog, queries, store = files(tmp_path)
    assert main(["network", "register", queries, "--catalog", catalog, "--store", store]) == 0
    capsys.readouterr()
    assert main(["grant", "--query", "q1", "--user", "ann", "--ts", "2026-03-01 10:00",
                 "--until", "2026-03-01T12:00:00+01:00", "--store", store]) == 0
    said = capsys.readouterr().err
    assert "from 2026-03-01T10:00:00Z (no zone given: taken as UTC) until 2026-03-01T11:00:00Z," in said
    assert main(["revoke", "--query", "q1", "--user", "ann", "--ts", "2026-03-01T13:00:00Z", "--store", store]) == 0
    said = capsys.readouterr().err
    assert "as of 2026-03-01T13:00:00Z," in said and "no zone" not in said
    first = AuthorizationServer(store).changes()[0]
    assert first.grant and first.ts.isoformat() == "2026-03-01T10:00:00+00:00"
