"""Class 5 of issue 11: reports that describe data above the user's level.

The attack: a replay at a low level printed how many tuples from unknown sources had been
put at the top level -- a count of data that level does not dominate (how much traffic
came from outside every company, and when, by repeating it over time ranges). Whatever a
user is shown (messages, counters, explain) now describes only data their level dominates
and policies of their own roles: the count is made and shown only for a query at the top
level, and explain names only the user's own roles' policies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.cli.main import main
from streamwarden.explain import explain_json, explain_text

LEVELS = """\
lattice:
  classes: {COI1: ["1", "2"], COI2: [A, B, C]}
streams:
  MessageLog:
    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, outcome: string}
    level: {from: sender}
roles: {Auditor: {}}
users:
  cm: {roles: [Auditor], clearance: "[T, T]"}
  c1: {roles: [Auditor], clearance: "[1, ⊥]"}
  low: {roles: [Auditor]}
"""


def message(second: int, sender: str) -> dict:
    return {"ts": f"2026-03-01T10:00:{second:02d}Z", "serviceId": "s1", "msgType": "send", "sender": sender,
            "receiver": "CompanyB", "outcome": "success"}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    (tmp_path / "cloud.yaml").write_text(LEVELS)
    return write_jsonl(tmp_path / "MessageLog.jsonl", [message(1, "Company1"), message(2, "CompanyA"),
                                                       message(3, "Mallory"), message(4, "Eve"),
                                                       message(5, "Company2")])


@pytest.mark.spark
@pytest.mark.parametrize(("user", "level"), [("c1", None), ("cm", "[1, ⊥]"), ("cm", "[T, ⊥]"), ("low", None)])
def test_a_replay_below_the_top_says_nothing_about_unknown_sources(spark, log, capsys, user: str,
                                                                    level: str | None) -> None:
    tmp_path = log.parent
    extra = ["--level", level] if level else []
    code = main(["replay", "--catalog", str(tmp_path / "cloud.yaml"), "--user", user, "--query",
                 "SELECT sender FROM MessageLog", "--input", f"MessageLog={log}",
                 "--output", str(tmp_path / "out.jsonl"), *extra])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 0 and len(lines) == 1 and re.fullmatch(r"\d+ rows written to .*out\.jsonl", lines[0]), err
    assert "unknown source" not in err and "top level" not in err and "Mallory" not in err
    senders = {json.loads(line)["sender"] for line in (tmp_path / "out.jsonl").read_text().splitlines()}
    assert not senders & {"Mallory", "Eve"}


@pytest.mark.spark
def test_the_count_is_not_even_made_below_the_top(spark, log) -> None:
    catalog = load_catalog_text(LEVELS)
    low = api.replay_to_file(catalog, "c1", "SELECT sender FROM MessageLog", {"MessageLog": str(log)},
                             log.parent / "c1.jsonl", spark=spark)
    assert low.unknown_sources == {}
    top = api.replay_to_file(catalog, "cm", "SELECT sender FROM MessageLog", {"MessageLog": str(log)},
                             log.parent / "cm.jsonl", spark=spark)
    assert top.unknown_sources == {"MessageLog": 2}  # at the top the tuples are the query's own data


@pytest.mark.spark
def test_at_the_top_the_count_is_reported(spark, log, capsys) -> None:
    tmp_path = log.parent
    assert main(["replay", "--catalog", str(tmp_path / "cloud.yaml"), "--user", "cm", "--query",
                 "SELECT sender FROM MessageLog", "--input", f"MessageLog={log}",
                 "--output", str(tmp_path / "out.jsonl")]) == 0
    assert "MessageLog: 2 tuples from an unknown source were put at the top level" in capsys.readouterr().err


def test_explain_at_a_level_describes_no_data_above_it(log) -> None:
    catalog = load_catalog_text(LEVELS)
    rewriting = api.authorize(catalog, "c1", "SELECT sender FROM MessageLog")
    text, data = explain_text(rewriting, catalog), json.dumps(explain_json(rewriting), ensure_ascii=False)
    for shown in (text, data):
        assert "[1, ⊥]" in shown
        assert "unknown" not in shown.lower() and "Mallory" not in shown and "[T, T]" not in shown
        assert "cm" not in shown.split() and "clearance" not in shown


ROLES = """\
streams:
  S: {schema: {ts: timestamp, sid: int, pos: double, secret: string}}
roles:
  Medic: {}
  Surgeon: {inherits: [Medic]}
  Spy: {}
users:
  mia: {roles: [Medic]}
  sam: {roles: [Surgeon]}
  zed: {roles: [Spy]}
policies:
  - {id: medic_read, subject: Medic, streams: [S], attributes: [sid, pos], privilege: read, where: "pos > 0"}
  - {id: surgeon_read, subject: Surgeon, streams: [S], attributes: [sid, pos], privilege: read, where: "pos < 0"}
  - {id: spy_secret, subject: Spy, streams: [S], attributes: [sid, secret], privilege: read, where: "sid >= 70"}
  - {id: spy_avg, subject: Spy, streams: [S], attributes: [pos], privilege: avg, window: {size: 1 hour}}
"""


@pytest.mark.parametrize(("user", "own", "others"), [
    ("mia", {"medic_read"}, {"surgeon_read", "spy_secret", "spy_avg", "Surgeon", "Spy", ">= 70"}),
    ("sam", {"medic_read", "surgeon_read"}, {"spy_secret", "spy_avg", "Spy", ">= 70"}),
    ("zed", {"spy_secret", "spy_avg"}, {"medic_read", "surgeon_read", "Medic", "Surgeon", "pos > 0", "pos < 0"}),
])
@pytest.mark.parametrize("query", ["SELECT sid, pos FROM S", "SELECT AVG(pos) FROM S [RANGE 1 hour]",
                                   "SELECT secret FROM S WHERE sid = 7"])
def test_explain_names_only_the_users_own_roles_policies(tmp_path: Path, capsys, user: str, own: set[str],
                                                         others: set[str], query: str) -> None:
    """Whatever the query, explain (text and JSON, API and CLI) never names a policy, role or
    condition of a role the user does not hold."""
    catalog = load_catalog_text(ROLES)
    rewriting = api.authorize(catalog, user, query)
    (tmp_path / "roles.yaml").write_text(ROLES)
    shown = [explain_text(rewriting, catalog), json.dumps(explain_json(rewriting))]
    for fmt in ("text", "json"):
        assert main(["explain", "--catalog", str(tmp_path / "roles.yaml"), "--user", user, "--query", query,
                     "--format", fmt]) == 0
        shown.append(capsys.readouterr().out)
    for text in shown:
        leaked = sorted(name for name in others if name in text)
        assert leaked == [], (user, query, leaked)
    decided = {d["policy"] for d in explain_json(rewriting)["decisions"]}
    assert decided <= own
