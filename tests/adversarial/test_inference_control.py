"""Class 4 of issue 11: aggregate privileges that reveal individual values.

The analyst may only see sums and counts of ``pos`` over windows of at least an hour.
Within the letter of Definition 4.2 she recovered single tuples by:
* aggregating expressions of the attribute (SUM(pos), SUM(pos*pos), SUM(pos*pos*pos)
  over one window are the power sums of its values: they solve for the values);
* grouping by the aggregated attribute itself (one group per distinct value);
* differencing two windows that both satisfy the minimum (1 h and 1 h + 1 s: their
  difference is the tuples of one second);
* windows, or groups, holding a single tuple (a MIN over one tuple is the tuple).
The rules that stop each (docs/semantics.md, "Inference control") are tested here, each
attack with its variants; the replay tests check the rows Spark delivers.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.errors import CatalogError, QuerySyntaxError
from streamwarden.language.parser import MAX_WINDOWS_PER_TUPLE, windows_per_tuple
from streamwarden.plan.nodes import Aggregate, walk
from streamwarden.security.passes import secure

CATALOG = """
streams:
  S: {schema: {ts: timestamp, sid: int, pos: double, platoon: string}}
roles: {Analyst: {}, Expert: {}}
users:
  ann: {roles: [Analyst]}
  eve: {roles: [Expert]}
policies:
  - {id: sums, subject: Analyst, streams: [S], attributes: [pos], privilege: sum,
     window: {size: 1 hour, offset: 1 hour}, group_by: [platoon], min_group: 3}
  - {id: counts, subject: Analyst, streams: [S], attributes: [pos, sid], privilege: count,
     window: {size: 1 hour, offset: 30 min}}
  - {id: moments, subject: Expert, streams: [S], attributes: [pos], privilege: sum,
     window: {size: 1 hour, offset: 1 hour}, aggregate_args: expressions}
"""


@pytest.fixture(scope="module")
def catalog():
    return load_catalog_text(CATALOG)


def aggregate_graphs(catalog, user: str, query: str) -> dict[str, Aggregate]:
    """The aggregate-policy graphs deployed for the query, by policy id."""
    r = secure(catalog, user, query)
    found = {}
    for g in r.deployed:
        if g.kind.startswith("aggregate policy "):
            found[g.kind.split()[-1]] = next(n for n in walk(g.root) if isinstance(n, Aggregate))
    return found


def reasons(catalog, user: str, query: str, policy: str) -> list[str]:
    return [d.reason for d in secure(catalog, user, query).decisions if d.policy_id == policy and not d.applied]


# -- aggregates of expressions ---------------------------------------------------------------
@pytest.mark.parametrize("call", ["SUM(pos * pos)", "SUM(pos * pos * pos)", "SUM(pos + 0)", "SUM(-pos)",
                                  "SUM(pos / 1000)", "SUM(pos - 1e9)"])
def test_power_sums_are_not_granted(catalog, call: str) -> None:
    """Power sums of one window solve for its values: only plain attributes are aggregated."""
    query = f"SELECT {call} AS v FROM S [RANGE 1 hour]"
    assert "sums" not in aggregate_graphs(catalog, "ann", query)
    assert any("plain attributes" in r for r in reasons(catalog, "ann", query, "sums"))


def test_plain_sum_is_granted_and_expressions_where_the_policy_allows(catalog) -> None:
    assert "sums" in aggregate_graphs(catalog, "ann", "SELECT SUM(pos) AS v FROM S [RANGE 1 hour]")
    assert "moments" in aggregate_graphs(catalog, "eve", "SELECT SUM(pos * pos) AS v FROM S [RANGE 1 hour]")


def test_an_expression_beside_a_plain_sum_is_null(catalog) -> None:
    """SUM(pos), SUM(pos*pos) in one query: the plain one is computed, the other is NULL."""
    agg = aggregate_graphs(catalog, "ann", "SELECT SUM(pos) AS a, SUM(pos * pos) AS b FROM S [RANGE 1 hour]")["sums"]
    assert [(a.name, a.granted) for a in agg.aggregates] == [("a", True), ("b", False)]


# -- grouping -----------------------------------------------------------------------------------
@pytest.mark.parametrize("query", [
    "SELECT pos, SUM(pos) AS v FROM S [RANGE 1 hour] GROUP BY pos",  # one group per value
    "SELECT sid, SUM(pos) AS v FROM S [RANGE 1 hour] GROUP BY sid",  # one group per soldier
    "SELECT platoon, sid, SUM(pos) AS v FROM S [RANGE 1 hour] GROUP BY platoon, sid",
])
def test_grouping_by_what_the_policy_does_not_list_is_refused(catalog, query: str) -> None:
    assert "sums" not in aggregate_graphs(catalog, "ann", query)
    assert any("groups by" in r for r in reasons(catalog, "ann", query, "sums"))


def test_grouping_by_a_listed_attribute_is_granted(catalog) -> None:
    query = "SELECT platoon, SUM(pos) AS v FROM S [RANGE 1 hour] GROUP BY platoon"
    assert "sums" in aggregate_graphs(catalog, "ann", query)
    # a policy without group_by allows no grouping at all
    counted = "SELECT platoon, COUNT(pos) AS n FROM S [RANGE 1 hour] GROUP BY platoon"
    assert "counts" not in aggregate_graphs(catalog, "ann", counted)


# -- one grid of windows --------------------------------------------------------------------------
def test_differencing_one_second_windows_is_impossible(catalog) -> None:
    """1 h and 1 h + 1 s both meet the minimum; under the grid the second becomes 2 h."""
    one = aggregate_graphs(catalog, "ann", "SELECT SUM(pos) AS v FROM S [RANGE 1 hour]")["sums"].window
    other = aggregate_graphs(catalog, "ann", "SELECT SUM(pos) AS v FROM S [RANGE 3601 seconds]")["sums"].window
    assert (one.size_seconds, one.slide_seconds) == (3600, 3600)
    assert (other.size_seconds, other.slide_seconds) == (7200, 7200)  # the slide defaults to the size


@settings(max_examples=200, deadline=None, derandomize=True)
@given(size=st.integers(1, 20_000), slide=st.one_of(st.none(), st.integers(1, 20_000)))
def test_every_authorized_window_lies_on_the_policy_grid(catalog, size: int, slide: int | None) -> None:
    """Whatever the request, size and slide are multiples of the policy's offset and at
    least its minimum; Spark aligns starts to the slide, so every window starts and ends
    on the grid, and two authorized windows differ by whole grid steps."""
    text = f"SELECT COUNT(pos) AS n FROM S [RANGE {size} seconds" + (f" SLIDE {slide} seconds]" if slide else "]")
    if windows_per_tuple(size, slide) > MAX_WINDOWS_PER_TUPLE:  # refused before any pass (test_limits.py)
        with pytest.raises(QuerySyntaxError, match="windows"):
            aggregate_graphs(catalog, "ann", text)
        return
    window = aggregate_graphs(catalog, "ann", text)["counts"].window
    grid = 1800
    assert window.size_seconds >= 3600 and window.size_seconds % grid == 0
    assert window.slide_seconds >= grid and window.slide_seconds % grid == 0
    assert window.size_seconds >= size and window.slide_seconds >= (slide or size)


def test_catalog_checks_the_inference_keys() -> None:
    bad = [
        ("privilege: read, group_by: [platoon]", "aggregate privileges only"),
        ("privilege: sum, group_by: [nothing]", "no stream"),
        ("privilege: sum, min_group: 0", "min_group"),
        ("privilege: sum, min_group: true", "min_group"),
        ("privilege: sum, aggregate_args: anything", "aggregate_args"),
    ]
    for keys, message in bad:
        text = CATALOG.split("policies:")[0] + f"policies:\n  - {{id: x, subject: Analyst, streams: [S], {keys}}}\n"
        with pytest.raises(CatalogError, match=message):
            load_catalog_text(text, "c.yaml")


# -- on Spark: minimum groups and the grid ----------------------------------------------------------
def _tuples() -> list[dict]:
    """Platoon A has 4 soldiers in the first hour, platoon B has 1 (its sum would be its value)."""
    rows = []
    for k in range(4):
        rows.append({"ts": f"2026-03-01T10:{10 + k:02d}:00Z", "sid": k, "pos": 10.0 * (k + 1), "platoon": "A"})
    rows.append({"ts": "2026-03-01T10:30:00Z", "sid": 9, "pos": 777.0, "platoon": "B"})
    rows.append({"ts": "2026-03-01T11:45:00Z", "sid": 5, "pos": 1.0, "platoon": "A"})
    return rows


@pytest.mark.spark
def test_groups_smaller_than_min_group_are_never_delivered(spark, catalog, tmp_path) -> None:
    from conftest import write_jsonl

    path = write_jsonl(tmp_path / "S.jsonl", _tuples())
    rows = api.replay(catalog, "ann", "SELECT platoon, SUM(pos) AS v FROM S [RANGE 1 hour] GROUP BY platoon",
                      {"S": path}, spark=spark)
    assert [(r["platoon"], r["v"], r["window_start"]) for r in rows] == [("A", 100.0, "2026-03-01T10:00:00Z")]
    assert all(r["v"] != 777.0 for r in rows)  # B's lone soldier, and A's lone tuple at 11:45, are withheld


@pytest.mark.spark
def test_replayed_windows_start_and_end_on_the_grid(spark, catalog, tmp_path) -> None:
    from conftest import write_jsonl

    path = write_jsonl(tmp_path / "S.jsonl", _tuples())
    rows = api.replay(catalog, "ann", "SELECT COUNT(pos) AS n FROM S [RANGE 3601 seconds SLIDE 37 seconds]",
                      {"S": path}, spark=spark)
    assert rows
    for row in rows:
        for key in ("window_start", "window_end"):
            moment = datetime.fromisoformat(row[key].replace("Z", "+00:00"))
            assert moment.astimezone(timezone.utc).timestamp() % 1800 == 0, row
