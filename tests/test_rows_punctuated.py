"""[ROWS n] windows over a punctuated stream, read through the Security Shield.

The window sees what the shield lets through, in arrival order (ties in ``ts`` by
``seq``, else file and line), as it sees what a secure view lets through: a denied tuple
(no policy, or one that refers to a replaced policy) never enters the last n; a tuple
whose attributes are partly masked does, with NULLs. The query's WHERE picks the
qualifying tuples of the window, so the shield is never lifted above it.
"""

from __future__ import annotations

import pytest

from conftest import ts, until_idle, write_jsonl
from test_punctuation_streaming import CATALOG  # HeartRate, punctuated by patient; gina is a GP
from streamwarden import api
from streamwarden.catalog.store import sqlite_url
from streamwarden.engine.sinks import read_sink
from streamwarden.plan.nodes import Shield, walk

pytestmark = pytest.mark.spark



def policy(patient: int, second: int, roles: str, attributes: str = "*", **extra: object) -> dict:
    return {"kind": "sp", "streams": "HeartRate", "tuples": "*", "attributes": attributes, "roles": roles,
            "sign": "+", "ts": ts(second), "sn": 1, "Patient_id": patient, **extra}


def reading(patient: int, second: int, beats: int, policy_second: int = 0, **extra: object) -> dict:
    return {"ts": ts(second), "Patient_id": patient, "Beats_per_min": beats, "sp_ts": ts(policy_second),
            "sp_csn": 1, **extra}


# Gina (GP) sees patient 1 in full and patient 3 without Beats_per_min; patient 2 is for
# cardiologists only. Patient 1's reading at 7 s refers to a policy never sent: it is denied
# and drops patient 1's policy, so the reading at 8 s is denied too, until the SP at 10 s;
# the last reading refers to the policy before it, which it drops.
FIRST = [
    policy(1, 0, "GP"), policy(2, 0, "C"), policy(3, 0, "GP", "Patient_id"),
    reading(1, 1, 70), reading(2, 2, 80), reading(3, 3, 90), reading(1, 4, 60), reading(2, 5, 85),
]
SECOND = [
    reading(1, 6, 65), reading(1, 7, 75, policy_second=5), reading(1, 8, 72), reading(3, 9, 91),
    policy(1, 10, "GP"), reading(2, 11, 50), reading(1, 11, 99, policy_second=10), reading(1, 11, 64),
]
# Visible to gina, in arrival order: (second, patient, beats); None where masked.
VISIBLE = [(1, 1, 70), (3, 3, None), (4, 1, 60), (6, 1, 65), (9, 3, None), (11, 1, 99)]

COUNT_MIN = "SELECT COUNT(*) AS n, MIN(Beats_per_min) AS low FROM HeartRate [ROWS 3]"
FILTERED = "SELECT COUNT(*) AS n, MIN(Beats_per_min) AS low FROM HeartRate [ROWS 3] WHERE Beats_per_min > 62"
GROUPED = "SELECT Patient_id, COUNT(*) AS n, MAX(Beats_per_min) AS high FROM HeartRate [ROWS 2] GROUP BY Patient_id"

# Worked out by hand from VISIBLE: one row per visible arrival (per group present with GROUP BY).
EXPECTED = {
    COUNT_MIN: [  # windows: {70} {70,-} {70,-,60} {-,60,65} {60,65,-} {65,-,99}
        (1, 1, 70), (3, 2, 70), (4, 3, 60), (6, 3, 60), (9, 3, 60), (11, 3, 65),
    ],
    FILTERED: [  # the same windows; only 70, 65 and 99 qualify
        (1, 1, 70), (3, 1, 70), (4, 1, 70), (6, 1, 65), (9, 1, 65), (11, 2, 65),
    ],
    GROUPED: [  # windows of two: {1:70} {1:70, 3:-} {3:-, 1:60} {1:60, 1:65} {1:65, 3:-} {3:-, 1:99}
        (1, 1, 1, 70), (3, 1, 1, 70), (3, 3, 1, None), (4, 1, 1, 60), (4, 3, 1, None), (6, 1, 2, 65),
        (9, 1, 1, 65), (9, 3, 1, None), (11, 1, 1, 99), (11, 3, 1, None),
    ],
}


def second(text: str) -> int:
    return int(text[17:19])


def values(rows: list[dict]) -> list[tuple]:
    """(second, [group,] aggregates...) per row, sorted."""
    out = []
    for row in rows:
        if "Patient_id" in row:
            out.append((second(row["ts"]), row["Patient_id"], row["n"], row["high"]))
        else:
            out.append((second(row["ts"]), row["n"], row["low"]))
    return sorted(out, key=lambda r: tuple((v is None, v) for v in r))


def strip(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows)


@pytest.fixture(scope="module")
def incoming(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rows_punctuated") / "HeartRate"
    write_jsonl(folder / "part-0.jsonl", FIRST)
    write_jsonl(folder / "part-1.jsonl", SECOND)
    return folder


@pytest.mark.parametrize("query", [COUNT_MIN, FILTERED, GROUPED])
def test_replay_counts_only_the_tuples_the_shield_lets_through(spark, incoming, query) -> None:
    rows = api.replay(CATALOG, "gina", query, {"HeartRate": incoming}, spark=spark)
    assert values(rows) == sorted(EXPECTED[query], key=lambda r: tuple((v is None, v) for v in r))


def test_the_shield_stays_below_the_where_of_a_rows_window() -> None:
    """Lifted above the selection (it would be, at this selectivity), the WHERE would decide
    which tuples enter the window instead of which of them qualify."""
    shields = [n for g in api.authorize(CATALOG, "gina", FILTERED).deployed for n in walk(g.root)
               if isinstance(n, Shield)]
    assert shields and {s.placement for s in shields} == {"down"}
    ranged = FILTERED.replace("[ROWS 3]", "[RANGE 1 min]")
    assert {n.placement for g in api.authorize(CATALOG, "gina", ranged).deployed for n in walk(g.root)
            if isinstance(n, Shield)} == {"up"}


@pytest.mark.parametrize("query", [FILTERED, GROUPED])
def test_run_across_files_and_a_restart_equals_replay(spark, tmp_path, query) -> None:
    folder = tmp_path / "HeartRate"
    write_jsonl(folder / "part-0.jsonl", FIRST)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def run_until_idle() -> None:
        stream = api.run(CATALOG, "gina", query, {"HeartRate": folder}, str(sink), checkpoint=checkpoint,
                         store_url=sqlite_url(tmp_path / "store.db"), spark=spark)
        until_idle(stream)

    run_until_idle()
    # The last n - 1 visible tuples and each provider's shield come back from the checkpoint.
    write_jsonl(folder / "part-1.jsonl", SECOND)
    run_until_idle()
    streamed = read_sink(spark, sink)
    replayed = api.replay(CATALOG, "gina", query, {"HeartRate": folder}, spark=spark)
    assert strip(streamed) == strip(replayed)
    assert values(streamed) == sorted(EXPECTED[query], key=lambda r: tuple((v is None, v) for v in r))


def test_ties_in_ts_follow_seq_when_every_record_has_one(spark, tmp_path) -> None:
    """Records with ``seq`` arrive in seq order (as the shield reads them), not line order:
    of the two readings at 5 s, 20 (seq 3) arrives before 10 (seq 4)."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [
        policy(1, 0, "GP", seq=1), reading(1, 5, 10, seq=4), reading(1, 5, 20, seq=3), reading(1, 1, 1, seq=2),
    ])
    query = "SELECT COUNT(*) AS n, MAX(Beats_per_min) AS high FROM HeartRate [ROWS 2]"
    replayed = api.replay(CATALOG, "gina", query, {"HeartRate": tmp_path / "in"}, spark=spark)
    # In seq order the windows are {1}, {1, 20}, {20, 10}; in line order they would be {1}, {1, 10}, {10, 20}.
    assert sorted((second(r["ts"]), r["high"]) for r in replayed) == [(1, 1), (5, 20), (5, 20)]
    stream = api.run(CATALOG, "gina", query, {"HeartRate": tmp_path / "in"}, str(tmp_path / "sink"),
                     checkpoint=tmp_path / "c", store_url=sqlite_url(tmp_path / "s.db"), spark=spark)
    until_idle(stream)
    assert strip(read_sink(spark, tmp_path / "sink")) == strip(replayed)
