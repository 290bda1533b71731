"""The CQL dialect: every query of the papers parses; errors point at line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamwarden.errors import BindError, QuerySyntaxError
from streamwarden.language.binder import bind_text
from streamwarden.language.parser import parse_duration, parse_query

GOLDEN = Path(__file__).parent / "golden" / "paper_queries.cql"


def paper_queries() -> list[str]:
    blocks = GOLDEN.read_text().split(";;")
    return [
        "\n".join(line for line in block.splitlines() if not line.startswith("--")).strip()
        for block in blocks
        if block.strip()
    ]


@pytest.mark.parametrize("text", paper_queries())
def test_every_paper_query_parses(text: str) -> None:
    query = parse_query(text)
    assert query.items and query.sources


def test_windows_durations_and_variants() -> None:
    q = parse_query("SELECT COUNT(*) AS n FROM S AS x [RANGE 2 hours, SLIDE 10 min] WHERE x.a = 'it''s'")
    window = q.sources[0].window
    assert (window.kind, window.size_seconds, window.slide_seconds) == ("range", 7200.0, 600.0)
    assert q.sources[0].alias == "x"
    assert parse_query("SELECT a FROM S [NOW]").sources[0].window.kind == "now"
    assert parse_query("SELECT a FROM S [UNBOUNDED]").sources[0].window.kind == "unbounded"
    assert parse_query("SELECT a FROM S [ROWS 7]").sources[0].window.rows == 7
    assert parse_duration("5 min") == 300.0


def test_time_of_day_literals() -> None:
    where = parse_query("SELECT a FROM S WHERE t > 6:00am AND t < 7:30pm").where
    assert where.left.right.value == 6 * 3600
    assert where.right.right.value == 19 * 3600 + 30 * 60


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("SELECT a b c FROM S", 1, 12, "expected FROM"),
        ("SELECT a\nFROM S [RANGE 5 parsecs]", 2, 17, "expected a time unit"),
        ("SELECT a FROM S WHERE a = 'oops", 1, 27, "unterminated string"),
        ("SELECT a FROM S WHERE", 1, 22, "expected an expression"),
        ("SELECT a FROM S [ROWS 0]", 1, 23, "positive whole number"),
    ],
)
def test_syntax_errors_name_line_and_column(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse_query(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert message in str(info.value)
    assert "^" in str(info.value)  # the offending line is shown with a caret


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT SID FROM Nowhere", "unknown stream 'Nowhere'"),
        ("SELECT Heartbeat FROM Health", "unknown attribute 'Heartbeat'"),
        ("SELECT SID FROM Position, Health", "'SID' is ambiguous"),
        ("SELECT Position.SID, Health.SID FROM Position, Health", "appears twice"),
        ("SELECT AVG(Platoon) FROM Position [RANGE 1 hour]", "AVG needs a number"),
        ("SELECT SID, AVG(Pos) FROM Position [RANGE 1 hour]", "must appear in GROUP BY"),
        ("SELECT SID FROM Position WHERE Platoon > 3", "cannot compare string with int"),
        ("SELECT SID FROM Position WHERE Pos >= target(b)", "unknown action 'b'"),
    ],
)
def test_bind_errors_are_clear(drill_catalog, text: str, message: str) -> None:
    with pytest.raises(BindError) as info:
        bind_text(text, drill_catalog)
    assert message in str(info.value)
    assert info.value.line == 1 and info.value.column >= 1


def test_output_column_names(drill_catalog) -> None:
    plan = bind_text("SELECT SID, Pos AS where_am_i, Pos * 2 FROM Position", drill_catalog)
    assert [f.name for f in plan.fields] == ["SID", "where_am_i", "Pos * 2"]
    agg = bind_text("SELECT Platoon, avg(Pos), COUNT(*) AS n FROM Position [RANGE 1 hour] GROUP BY Platoon",
                    drill_catalog)
    assert [f.name for f in agg.fields] == ["window_start", "window_end", "Platoon", "avg(Pos)", "n"]
