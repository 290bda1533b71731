"""Issue 24: a ``[ROWS n]`` self-join in replay ranked every tuple of the stream before the
secure view, so whether two visible tuples paired depended on how many hidden tuples lay
between them: ann, who may see only tuples with ``a < 5``, learned that a hidden tuple had
arrived between two of hers.

By Carminati et al. (secure read right after the stream's input, Definition 5.2; windows
and joins are evaluated over the views; a join policy, which would join the raw streams,
never applies to a self-join) a ``[ROWS n]`` window holds the last n tuples of the user's
view, as the ``[ROWS n]`` aggregate always did: tuples are ranked after the secure view (and
a level's guard and a provider's shield), before the query's own selections.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  S: {schema: {ts: timestamp, a: int, v: int}}
roles: {R: {}}
users: {ann: {roles: [R]}}
policies:
  - {id: low, subject: R, streams: [S], privilege: read, where: "a < 5"}
""", "ranks.yaml")
PAIRS = "SELECT x.a AS xa, y.a AS ya FROM S AS x [ROWS 2], S AS y [ROWS 2] WHERE x.v = y.v AND x.ts < y.ts"


def tuple_at(second: int, a: int) -> dict:
    return {"ts": f"2026-03-01T10:00:{second:02d}Z", "a": a, "v": 0}


def pairs(spark, tmp_path: Path, name: str, records: list[dict], query: str = PAIRS) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return sorted((r["xa"], r["ya"]) for r in api.replay(CATALOG, "ann", query, {"S": str(path)}, spark=spark))


def test_hidden_tuples_between_two_visible_ones_do_not_change_whether_they_pair(spark, tmp_path) -> None:
    mine = [tuple_at(0, 1), tuple_at(10, 2), tuple_at(20, 3)]
    hidden = [tuple_at(5, 7), tuple_at(6, 8), tuple_at(15, 9)]  # a >= 5: not ann's
    alone = pairs(spark, tmp_path, "alone", mine)
    assert alone == [(1, 2), (2, 3)]  # neighbours in her view: within [ROWS 2] of each other
    assert pairs(spark, tmp_path, "between", sorted(mine + hidden, key=lambda r: r["ts"])) == alone


def test_a_tuple_her_own_where_drops_still_holds_its_place_in_the_window(spark, tmp_path) -> None:
    """The query's selections pick pairs among the window's tuples; they do not decide which
    tuples enter it (as for a ``[ROWS n]`` aggregate): a 2 holds its place on y's side."""
    mine = [tuple_at(0, 1), tuple_at(10, 2), tuple_at(20, 3)]
    assert pairs(spark, tmp_path, "where", mine, PAIRS + " AND y.a <> 2") == [(2, 3)]
