"""Class 8 of issue 11: the event-time channel that remains, and its bound.

docs/security.md ("Channels that remain") explains why a continuous query's watermark
follows every tuple of its input, hidden ones included, and states the bound: a hidden
tuple can make a user's window close (and a later-arriving visible tuple late), so the
user learns that time moved on; it never puts a hidden value into a row. The attacker
here, paul, may see platoon X only; the hidden tuples are platoon Z with values chosen to
be recognisable. Both effects are demonstrated, and every value paul receives is
checked to come from his own tuples alone.
"""

from __future__ import annotations

import pytest

from conftest import ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url

pytestmark = pytest.mark.spark

CATALOG = """
streams: {Position: {schema: {ts: timestamp, SID: int, Pos: double, Platoon: string}}}
roles: {Soldier: {}}
users: {paul: {roles: [Soldier], profile: {Platoon: X}}}
policies:
  - {id: own, subject: Soldier, streams: [Position], privilege: read, where: "Position.Platoon = self.Platoon"}
"""
QUERY = "SELECT AVG(Pos) AS a, COUNT(*) AS n FROM Position [RANGE 1 min]"
SECRET = 31337.0  # a hidden position: it must never show in any row


def _rows(spark, sink) -> list[dict]:  # type: ignore[no-untyped-def]
    if not any(sink.glob("*.json")):
        return []
    return [r.asDict() for r in spark.read.json(str(sink)).collect()]


def test_hidden_time_closes_windows_but_never_shows_a_value(spark, tmp_path) -> None:
    catalog = load_catalog_text(CATALOG, "timing.yaml")
    incoming, sink = tmp_path / "Position", tmp_path / "sink"
    mine = [{"ts": ts(5), "SID": 1, "Pos": 10.0, "Platoon": "X"}, {"ts": ts(20), "SID": 2, "Pos": 30.0, "Platoon": "X"}]
    write_jsonl(incoming / "part-0.jsonl", mine)
    stream = api.run(catalog, "paul", QUERY, {"Position": incoming}, str(sink), checkpoint=tmp_path / "c",
                     store_url=sqlite_url(tmp_path / "s.db"), spark=spark)
    try:
        stream.processAllAvailable()
        assert _rows(spark, sink) == []  # nothing has moved time past paul's first window
        # The attack: hidden tuples hours later. The channel: paul's window closes now.
        write_jsonl(incoming / "part-1.jsonl", [{"ts": ts(3 * 3600 + k), "SID": 9, "Pos": SECRET, "Platoon": "Z"}
                                                for k in range(3)])
        stream.processAllAvailable()
        stream.processAllAvailable()
        closed = _rows(spark, sink)
        # A visible tuple that arrives now, inside that first window, is late: it counts nowhere.
        write_jsonl(incoming / "part-2.jsonl", [{"ts": ts(40), "SID": 3, "Pos": 50.0, "Platoon": "X"}])
        stream.processAllAvailable()
        stream.processAllAvailable()
        after = _rows(spark, sink)
    finally:
        stream.stop()
    # The bound: each row is computed from paul's own tuples (X) alone; no hidden value shows.
    assert [(r["a"], r["n"]) for r in closed] == [(20.0, 2)]
    assert after == closed
    assert all(r["a"] != SECRET for r in after)
