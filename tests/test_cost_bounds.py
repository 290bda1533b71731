"""Issue 34: what one query may cost, and names that cannot collide, refused in the language.

``[RANGE 1 day SLIDE 1 second]`` puts each tuple in 86,400 windows: every pass accepted it and
Spark's analysis of it outlasted a registration. A window is now held to
``MAX_WINDOWS_PER_TUPLE`` windows per tuple by the parser, so every road (the API, replay, run,
the network's QUERIES.yaml, the service) refuses it at once, with its position and before any
security pass or Spark. Output columns and FROM aliases named like the engine's own columns
(``_graph``, ``__carry_member``) are refused by the binder, and such stream attributes by the
catalog loader, each at file:line:col. No Spark here.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.cli.main import main
from streamwarden.errors import BindError, CatalogError, QuerySyntaxError
from streamwarden.language.binder import bind_text
from streamwarden.language.parser import MAX_WINDOWS_PER_TUPLE, parse_query, windows_per_tuple

CATALOG = """\
streams:
  Readings: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}
roles: {Nurse: {}}
users: {ann: {roles: [Nurse]}}
policies:
  - {id: nurses_read, subject: Nurse, streams: [Readings], privilege: read}
"""
DAY_BY_SECONDS = "SELECT AVG(value) AS v FROM Readings [RANGE 1 day SLIDE 1 second]"


@pytest.fixture(scope="module")
def catalog() -> api.Catalog:
    return load_catalog_text(CATALOG, "c.yaml")


# -- windows per tuple ------------------------------------------------------------------------------
def test_a_day_sliding_by_a_second_is_refused_at_once_with_its_position(catalog: api.Catalog) -> None:
    began = time.perf_counter()
    with pytest.raises(QuerySyntaxError) as refused:
        api.authorize(catalog, "ann", DAY_BY_SECONDS)  # every pass would follow: none runs
    assert time.perf_counter() - began < 0.5
    assert (refused.value.line, refused.value.column) == (1, 38)  # the '[' of the window
    assert refused.value.one_line() == (
        "<query>:1:38: RANGE 1 day SLIDE 1 second puts each tuple in 86,400 windows (at most 100 are allowed): "
        "make the SLIDE at least 14.4 min or the RANGE shorter")


@pytest.mark.parametrize(("window", "count"), [
    ("[RANGE 1 hour SLIDE 1 second]", 3600),
    ("[RANGE 1 hour, SLIDE 35 seconds]", 103),  # a slide that does not divide the size: rounded up
    ("[RANGE 101 seconds SLIDE 1 second]", 101),
    ("[RANGE 1 second SLIDE 1 ms]", 1000),
])
def test_windows_beyond_the_bound_are_refused(window: str, count: int) -> None:
    assert windows_per_tuple(*_seconds(window)) == count > MAX_WINDOWS_PER_TUPLE
    with pytest.raises(QuerySyntaxError, match=f"in {count:,} windows"):
        parse_query(f"SELECT COUNT(*) AS n FROM Readings {window}")


@pytest.mark.parametrize("window", [
    "[RANGE 1 day SLIDE 15 min]",  # 96: a day of quarter hours
    "[RANGE 100 seconds SLIDE 1 second]",  # exactly the bound
    "[RANGE 1 hour SLIDE 36 seconds]",
    "[RANGE 1 minute SLIDE 3 minutes]",  # windows with gaps: each tuple in one at most
    "[RANGE 1 day]",
])
def test_windows_within_the_bound_are_accepted(catalog: api.Catalog, window: str) -> None:
    assert windows_per_tuple(*_seconds(window)) <= MAX_WINDOWS_PER_TUPLE
    rewriting = api.authorize(catalog, "ann", f"SELECT AVG(value) AS v FROM Readings {window}")
    assert rewriting.deployed


def _seconds(window: str) -> tuple[float, float | None]:
    """Size and slide of a window as written (``[RANGE 1 hour, SLIDE 35 seconds]``)."""
    size, _, slide = window.strip("[]").removeprefix("RANGE ").replace(",", "").partition(" SLIDE ")
    return api.parse_duration(size), api.parse_duration(slide) if slide else None


def test_every_road_refuses_the_window_before_anything_runs(catalog: api.Catalog, tmp_path: Path, capsys) -> None:
    """replay and run (the CLI, exit 2 and one line), the network's QUERIES.yaml (file:line:col)."""
    (tmp_path / "c.yaml").write_text(CATALOG)
    for command in (["replay", "--output", str(tmp_path / "o.jsonl")], ["run", "--sink", str(tmp_path / "sink")]):
        began = time.perf_counter()
        code = main([command[0], "--catalog", str(tmp_path / "c.yaml"), "--user", "ann", "--query", DAY_BY_SECONDS,
                     "--input", f"Readings={tmp_path / 'in'}", *command[1:]])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and time.perf_counter() - began < 2, err
        assert err.startswith("error: <query>:1:38: RANGE 1 day SLIDE 1 second puts each tuple in 86,400 windows")
    queries = f"queries:\n  - id: q1\n    users: [ann]\n    query: \"{DAY_BY_SECONDS}\"\n"
    with pytest.raises(CatalogError) as refused:
        load_queries_text(queries, catalog, "q.yaml")
    assert refused.value.one_line().startswith("q.yaml:4:12: query q1: ") and "86,400 windows" in str(refused.value)


def test_a_policy_window_beyond_the_bound_is_a_catalog_error_at_its_place() -> None:
    policy = "  - {id: avg_day, subject: Nurse, streams: [Readings], attributes: [value], privilege: avg,\n" \
             "     window: {size: 1 day, offset: 1 second}}\n"
    with pytest.raises(CatalogError) as refused:
        load_catalog_text(CATALOG + policy, "c.yaml")
    assert (refused.value.line, refused.value.column) == (8, 14)
    assert "policy avg_day: a window of 1 day on a grid of 1 second puts each tuple in 86,400 windows" in \
        refused.value.one_line()
    quarter_hours = policy.replace("1 second", "15 min")
    assert load_catalog_text(CATALOG + quarter_hours).policies[-1].window == (86400.0, 900.0)


# -- reserved names ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("query", "column", "message"), [
    ("SELECT value AS _graph FROM Readings", 17, "output column '_graph' is reserved"),
    ("SELECT value AS __carry_member FROM Readings", 17, "output column '__carry_member' is reserved"),
    ("SELECT value _policies FROM Readings", 14, "output column '_policies' is reserved"),
    ("SELECT value AS _mine FROM Readings", 17, "output column '_mine' is reserved"),
    ("SELECT COUNT(*) AS _event FROM Readings [RANGE 1 min]", 20, "output column '_event' is reserved"),
    ("SELECT ward AS __action__a__start, COUNT(*) AS n FROM Readings [RANGE 1 min] GROUP BY ward", 16,
     "output column '__action__a__start' is reserved"),
    ("SELECT value FROM Readings AS __carry_p0", 31, "the alias '__carry_p0' is reserved"),
])
def test_names_of_the_engines_columns_are_refused_with_their_position(catalog: api.Catalog, query: str,
                                                                      column: int, message: str) -> None:
    with pytest.raises(BindError) as refused:
        bind_text(query, catalog)
    assert (refused.value.line, refused.value.column) == (1, column)
    assert message in refused.value.one_line()
    with pytest.raises(BindError):  # the API's road, before any pass
        api.authorize(catalog, "ann", query)


def test_the_cli_refuses_a_reserved_alias_in_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "c.yaml").write_text(CATALOG)
    code = main(["explain", "--catalog", str(tmp_path / "c.yaml"), "--user", "ann", "--query",
                 "SELECT value AS _graph FROM Readings"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: <query>:1:17: output column '_graph' is reserved ('_graph' is the column the "
                          "engine adds to every row for the authorized graph the row came from)")


def test_a_stream_attribute_named_like_an_engine_column_is_refused_at_file_line_col() -> None:
    text = CATALOG.replace("value: double}", "value: double, __carry_member: int}")
    with pytest.raises(CatalogError) as refused:
        load_catalog_text(text, "c.yaml")
    assert (refused.value.line, refused.value.column) == (2, 80)
    assert refused.value.one_line() == (
        "c.yaml:2:80: attribute '__carry_member' is not a valid name: names starting with '__carry_' are the "
        "engine's columns for a shared group's member and its constants")
    with pytest.raises(CatalogError, match="'_graph' is the column the engine adds"):
        load_catalog_text(CATALOG.replace("value: double}", "value: double, _graph: string}"), "c.yaml")
