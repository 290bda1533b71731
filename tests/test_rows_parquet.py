"""[ROWS n] windows over Parquet: a row's index in its file is its place in arrival order,
so the window sees exactly what it sees over the same records as JSON lines."""

from __future__ import annotations

import json

import pytest

from conftest import ts
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text

pytestmark = pytest.mark.spark

CATALOG = """
streams:
  Msg: {schema: {ts: timestamp, sender: string, size: long}}
roles: {R: {}}
users: {u: {roles: [R]}}
policies:
  - {id: r, subject: R, streams: [Msg], attributes: '*', privilege: read, where: "size < 90"}
"""


def test_rows_window_over_parquet_equals_json_lines(spark, tmp_path) -> None:
    # Ties in ts on purpose: only the arrival order breaks them, and it differs from size order.
    records = [{"ts": ts(i // 3), "sender": f"s{i % 2}", "size": (37 * i) % 100} for i in range(30)]
    as_json = tmp_path / "json"
    as_json.mkdir()
    (as_json / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    as_parquet = tmp_path / "parquet"
    spark.read.json(str(as_json)).selectExpr("CAST(ts AS timestamp) AS ts", "sender", "size").coalesce(1) \
        .write.parquet(str(as_parquet))
    catalog = load_catalog_text(CATALOG)
    for query in ("SELECT COUNT(*) AS n, MAX(size) AS top FROM Msg [ROWS 4]",
                  "SELECT sender, SUM(size) AS total FROM Msg [ROWS 5] GROUP BY sender"):
        rows = {name: sorted(map(str, api.replay(catalog, "u", query, {"Msg": str(folder)}, spark=spark)))
                for name, folder in (("json", as_json), ("parquet", as_parquet))}
        assert rows["parquet"] == rows["json"] and rows["json"], query


ONE_POLICY = '''  - {id: r, subject: R, streams: [Msg], attributes: '*', privilege: read, where: "size < 90"}'''
TWO_POLICIES = CATALOG.replace(ONE_POLICY, ONE_POLICY + '''
  - {id: s, subject: R, streams: [Msg], attributes: '*', privilege: read, where: "sender = 's0'"}''')


def test_a_window_lists_the_policies_of_its_counted_tuples(spark, tmp_path, monkeypatch) -> None:
    """A replay's [ROWS n] row names the policies that let its qualifying tuples in, whether
    the window flags them over its own frame (a small n) or by a running maximum (a large n)."""
    from streamwarden.engine import rows as rows_module

    records = [{"ts": ts(i), "sender": f"s{i % 3}", "size": (37 * i) % 100} for i in range(24)]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    catalog = load_catalog_text(TWO_POLICIES)
    query = "SELECT COUNT(*) AS n FROM Msg [ROWS 4] WHERE size > 30"
    # The window is over the tuples the user may see (the secure view's), its WHERE picks what counts.
    visible = [r for r in records if r["size"] < 90 or r["sender"] == "s0"]
    expected = []
    for i in range(len(visible)):
        counted = [r for r in visible[max(0, i - 3):i + 1] if r["size"] > 30]
        names = sorted({"r" for r in counted if r["size"] < 90} | {"s" for r in counted if r["sender"] == "s0"})
        expected.append((len(counted), names))
    for small_window in (64, 0):
        monkeypatch.setattr(rows_module, "SMALL_WINDOW", small_window)
        got = sorted((r["ts"], r["n"], list(r["_policies"]))
                     for r in api.replay(catalog, "u", query, {"Msg": str(folder)}, spark=spark))
        assert [(n, names) for _, n, names in got] == expected, small_window
