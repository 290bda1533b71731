"""``network replay``: each user receives a query's rows exactly while their latest access
change at or before the row's event time is a grant (the contract of issue 5)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import AccessChange, grant_intervals, load_access, load_queries_text
from streamwarden.cli.main import main
from streamwarden.errors import CatalogError, InputError
from streamwarden.runtime.network_replay import replay_network

CATALOG = """
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
users: {ann: {}, bob: {}, carl: {}}
"""
QUERIES = """queries:
  - {id: q1, users: [ann, bob], query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 [RANGE 5 min SLIDE 1 min],
     Stream2 AS s2 [RANGE 5 min SLIDE 1 min] WHERE s1.location = s2.location AND s2.speed < 30"}
  - {id: q2, users: [ann], query: "SELECT location, speed FROM Stream2 WHERE speed < 30"}
"""
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S") + (f".{value.microsecond:06d}" if value.microsecond else "") + "Z"


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps({**r, "ts": iso(r["ts"])}) + "\n" for r in records))
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def expected_q1(s1: list[dict], s2: list[dict], periods: list) -> list[tuple]:  # type: ignore[type-arg]
    out = []
    for a in s1:
        for b in s2:
            if a["location"] == b["location"] and b["speed"] < 30 and abs(a["ts"] - b["ts"]) <= timedelta(minutes=5):
                event = max(a["ts"], b["ts"])
                if any(start <= event and (end is None or event < end) for start, end in periods):
                    out.append((a["streamid"], a["heartRate"]))
    return sorted(out)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    s1=st.lists(st.fixed_dictionaries({"minute": st.integers(0, 30), "streamid": st.integers(1, 3),
                                       "heartRate": st.integers(50, 120), "location": st.sampled_from("xy")}),
                max_size=12),
    s2=st.lists(st.fixed_dictionaries({"minute": st.integers(0, 30), "location": st.sampled_from("xy"),
                                       "speed": st.sampled_from([10.0, 25.0, 40.0])}), max_size=12),
    changes=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["ann", "bob", "carl"]), st.booleans()),
                     max_size=6),
)
def test_each_user_receives_the_rows_of_their_grant_periods(spark, tmp_path, s1, s2, changes) -> None:
    catalog = load_catalog_text(CATALOG)
    queries = load_queries_text(QUERIES, catalog)
    s1 = [{"ts": at(r.pop("minute")), **r} for r in (dict(x) for x in s1)]
    s2 = [{"ts": at(r.pop("minute")), **r} for r in (dict(x) for x in s2)]
    access = tuple(AccessChange(at(m), "q1", user, grant, line) for line, (m, user, grant) in enumerate(changes))
    out = tmp_path / "out"
    replay_network(spark, catalog, queries, access, {"Stream1": write(tmp_path / "s1.jsonl", s1),
                                                     "Stream2": write(tmp_path / "s2.jsonl", s2)}, out)
    for user in ("ann", "bob"):
        rows = read(out / user / "q1.jsonl")
        assert sorted((r["streamid"], r["heartRate"]) for r in rows) == expected_q1(
            s1, s2, grant_intervals(access, "q1", user))
    assert not (out / "carl").exists()  # not listed for q1: never receives it, whatever it was granted
    assert read(out / "ann" / "q2.jsonl") == []  # no grant yet: no access


def test_grant_periods_follow_the_latest_change() -> None:
    changes = [AccessChange(at(0), "q", "u", True, 1), AccessChange(at(5), "q", "u", False, 2),
               AccessChange(at(5), "q", "u", True, 3), AccessChange(at(7), "q", "u", False, 4),
               AccessChange(at(9), "q", "u", True, 5), AccessChange(at(9), "q", "u", True, 6)]
    assert grant_intervals(changes, "q", "u") == [(at(0), at(7)), (at(9), None)]
    assert grant_intervals(changes, "q", "other") == []


def test_cli_network_replay(spark, tmp_path, capsys) -> None:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    (tmp_path / "queries.yaml").write_text(QUERIES)
    (tmp_path / "access.jsonl").write_text(
        json.dumps({"ts": "2026-03-01T10:00:00Z", "query": "q2", "user": "ann", "sign": "+"}) + "\n"
        + json.dumps({"ts": "2026-03-01T10:10:00Z", "query": "q2", "user": "ann", "sign": "-"}) + "\n")
    write(tmp_path / "s2.jsonl", [{"ts": at(m), "location": "x", "speed": 20.0} for m in (1, 9, 10, 12)])
    write(tmp_path / "s1.jsonl", [])
    code = main(["network", "replay", "--catalog", str(tmp_path / "catalog.yaml"), "--queries",
                 str(tmp_path / "queries.yaml"), "--access", str(tmp_path / "access.jsonl"), "--input",
                 f"Stream1={tmp_path / 's1.jsonl'}", "--input", f"Stream2={tmp_path / 's2.jsonl'}",
                 "--output-dir", str(tmp_path / "out")])
    assert code == 0
    rows = read(tmp_path / "out" / "ann" / "q2.jsonl")
    assert [r["speed"] for r in rows] == [20.0, 20.0] and set(rows[0]) == {"location", "speed", "_policies", "_graph"}


@pytest.mark.parametrize(("text", "message", "line"), [
    (QUERIES.replace("users: [ann]", "users: [zed]"), "unknown user 'zed'", 4),
    (QUERIES.replace("id: q2", "id: q1"), "registered twice", 4),
    (QUERIES.replace("FROM Stream2 WHERE", "FROM Stream9 WHERE"), "unknown stream 'Stream9'", 4),
    ("queries: []", "a list of {id, users, query}", 1),
])
def test_bad_query_files_name_the_line(text, message, line) -> None:
    with pytest.raises(CatalogError, match=message) as info:
        load_queries_text(text, load_catalog_text(CATALOG), "queries.yaml")
    assert f"queries.yaml:{line}:" in info.value.one_line()


@pytest.mark.parametrize(("line", "message"), [
    ('{"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "ann", "sign": "?"}', "sign must be"),
    ('{"ts": "2026-03-01T10:00:00Z", "query": "q9", "user": "ann", "sign": "+"}', "unknown query 'q9'"),
    ('{"ts": "soon", "query": "q1", "user": "ann", "sign": "+"}', "not an ISO-8601 timestamp"),
    ('{"query": "q1"', "not JSON"),
    ('{"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "anne", "sign": "-"}', "'anne' is not listed for query q1"),
])
def test_bad_access_changes_name_the_line(tmp_path, line, message) -> None:
    queries = load_queries_text(QUERIES, load_catalog_text(CATALOG))
    path = tmp_path / "access.jsonl"
    path.write_text('{"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "ann", "sign": "+"}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as info:
        load_access(path, queries)
    assert "access.jsonl:2" in str(info.value)
