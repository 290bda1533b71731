"""The information-flow level oracle itself, on hand-computed cases (no Spark).

Paper: Stream Processing with Secure Information Flow Constraints, sections 3-4
(the lattice of Fig. 2, the MessageLog queries, and the Qi / Qj / Qj' example).
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

import level_oracle as LO
from level_oracle import Cond, Join, RangeAggregate, RowsAggregate, Select

LAT = {"COI1": ["1", "2"], "COI2": ["A", "B", "C"]}
BASE = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
SHEPHERD = {"MessageLog": {"level": {"from": "sender"}}}


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def txt(seconds: float) -> str:
    return LO.format_timestamp(at(seconds))


def L(text: str) -> tuple:
    return LO.parse_level(text, LAT)


# --------------------------------------------------------------------------
# Lattice
# --------------------------------------------------------------------------
@pytest.mark.parametrize("text, canon", [
    ("[1, ⊥]", "[1, ⊥]"),
    ("[1,_]", "[1, ⊥]"),
    ("  [ 2 ,BOT ] ", "[2, ⊥]"),
    ("[bot, top]", "[⊥, T]"),
    ("[T,Top]", "[T, T]"),
    ("[⊥,B]", "[⊥, B]"),
])
def test_parse_and_canonical_text(text, canon):
    assert LO.level_text(L(text)) == canon
    assert LO.parse_level(canon, LAT) == L(text)


@pytest.mark.parametrize("text", ["[1]", "[1, ⊥, ⊥]", "1, ⊥", "[A, ⊥]", "[1, 2]", "[t, ⊥]", "[3, B]", "[]"])
def test_parse_rejects(text):
    with pytest.raises(ValueError):
        L(text)


def test_lattice_rejects_ambiguous_company_names():
    for bad in ({"C1": ["T"]}, {"C1": ["bot"]}, {"C1": ["1"], "C2": ["1"]}, {"C1": ["1", "Company1"]}):
        with pytest.raises(ValueError):
            LO.check_lattice(bad)


def test_paper_dominance_examples():
    assert LO.dominated_by(L("[1, ⊥]"), L("[1, B]"))
    assert LO.dominated_by(L("[1, ⊥]"), L("[1, T]"))
    assert LO.dominated_by(L("[⊥, B]"), L("[T, T]"))
    assert LO.dominates(L("[T, T]"), L("[⊥, B]")) and not LO.dominates(L("[⊥, B]"), L("[T, T]"))
    assert not LO.dominated_by(L("[⊥, B]"), L("[1, ⊥]"))
    assert not LO.dominated_by(L("[1, ⊥]"), L("[⊥, B]"))
    assert not LO.dominated_by(L("[1, ⊥]"), L("[2, T]"))
    assert not LO.dominated_by(L("[T, ⊥]"), L("[1, ⊥]"))
    for level in LO.all_levels(LAT):
        assert LO.dominated_by(LO.bottom(LAT), level) and LO.dominated_by(level, LO.top(LAT))


def test_lub_examples():
    assert LO.lub(L("[1, ⊥]"), L("[2, ⊥]")) == L("[T, ⊥]")
    assert LO.lub(L("[1, ⊥]"), L("[⊥, B]")) == L("[1, B]")
    assert LO.lub(L("[1, A]"), L("[1, B]")) == L("[1, T]")
    assert LO.lub(L("[1, ⊥]"), L("[1, ⊥]")) == L("[1, ⊥]")
    assert LO.lub_all([], LAT) == L("[⊥, ⊥]")
    assert LO.lub_all([L("[1, ⊥]"), L("[⊥, C]"), L("[1, ⊥]")], LAT) == L("[1, C]")


def test_lattice_laws_exhaustively():
    levels = LO.all_levels(LAT)
    assert len(levels) == 4 * 5
    le = LO.dominated_by
    for a, b in itertools.product(levels, repeat=2):
        if le(a, b) and le(b, a):
            assert a == b  # antisymmetric
        j = LO.lub(a, b)
        assert j == LO.lub(b, a) and le(a, j) and le(b, j)
        for c in levels:  # least: below every upper bound; transitive
            if le(a, c) and le(b, c):
                assert le(j, c)
            if le(a, b) and le(b, c):
                assert le(a, c)


# --------------------------------------------------------------------------
# Tuple levels (trusted stream shepherd)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("value, level", [
    ("Company1", "[1, ⊥]"), ("1", "[1, ⊥]"), ("CompanyB", "[⊥, B]"), ("C", "[⊥, C]"),
    ("company1", "[T, T]"), ("Company 1", "[T, T]"), ("CompanyZ", "[T, T]"), (None, "[T, T]"), (1, "[T, T]"),
])
def test_tuple_level_from_attribute(value, level):
    assert LO.tuple_level({"sender": value}, {"from": "sender"}, LAT) == L(level)


def test_tuple_level_missing_fixed_and_absent_spec():
    assert LO.tuple_level({}, {"from": "sender"}, LAT) == L("[T, T]")
    assert LO.tuple_level({"sender": "Company1"}, "[⊥, B]", LAT) == L("[⊥, B]")
    assert LO.tuple_level({"sender": "Company1"}, None, LAT) == L("[T, T]")


# --------------------------------------------------------------------------
# CQL rendering
# --------------------------------------------------------------------------
def test_cql_rendering():
    q = Select("MessageLog", ("timestamp", "level"),
               (Cond("msgType", "=", "send"), Cond("n", ">", 3), Cond("level", "=", "[1, ⊥]")))
    assert q.cql() == 'SELECT timestamp, level FROM MessageLog WHERE msgType = "send" AND n > 3 AND level = [1, ⊥]'
    assert Select("S", ("a",)).cql() == "SELECT a FROM S"
    assert Select("S", ("a",), (Cond("level", "<>", " [1,_] "), Cond("level", "=", "[top,bot]"))).cql() == \
        "SELECT a FROM S WHERE level <> [1, ⊥] AND level = [T, ⊥]"
    assert Select("S", ("a",), (Cond("s", "=", 'say "hi"'), Cond("x", "<=", 2.5))).cql() == \
        'SELECT a FROM S WHERE s = "say \\"hi\\"" AND x <= 2.5'
    r = RowsAggregate("MessageLog", 100, (Cond("outcome", "=", "success"),),
                      (("MIN", "timestamp"), ("MAX", "timestamp")), "serviceId")
    assert r.cql() == ('SELECT serviceId, MIN(timestamp), MAX(timestamp) FROM MessageLog [ROWS 100] '
                       'WHERE outcome = "success" GROUP BY serviceId')
    assert RowsAggregate("S", 3).cql() == "SELECT COUNT(*) FROM S [ROWS 3]"
    g = RangeAggregate("S", 10, 5, (Cond("x", "<>", "y"),), (("count", None), ("avg", "v")))
    assert g.cql() == 'SELECT COUNT(*), AVG(v) FROM S [RANGE 10 seconds SLIDE 5 seconds] WHERE x <> "y"'
    assert RangeAggregate("S", 2.5).cql() == "SELECT COUNT(*) FROM S [RANGE 2.5 seconds]"
    j = Join("L", "a", 5, "R", "b", 3, (("k", "k"),), (Cond("a.z", ">", 1), Cond("b.level", "<>", "[⊥, B]")),
             ("a.x", "b.y"))
    assert j.cql() == ('SELECT a.x, b.y FROM L AS a [RANGE 5 seconds], R AS b [RANGE 3 seconds] '
                       'WHERE a.k = b.k AND a.z > 1 AND b.level <> [⊥, B]')


def test_bad_shapes_rejected():
    with pytest.raises(ValueError):
        Cond("level", "<", "[1, ⊥]")
    with pytest.raises(ValueError):
        RowsAggregate("S", 0)
    with pytest.raises(ValueError):
        RowsAggregate("S", 1, aggregates=(("MIN", None),))
    with pytest.raises(ValueError):
        Join("L", "a", 1, "R", "b", 1, (), (), ("a.level",))


# --------------------------------------------------------------------------
# Select
# --------------------------------------------------------------------------
def message_log():
    rows = [
        ("Company1", "send", "success", "CompanyB"),
        ("Company2", "send", "success", "CompanyB"),
        ("CompanyB", "receive", "success", "Company1"),
        ("Company1", "send", "failure", "CompanyB"),
        ("Mallory", "send", "success", "CompanyB"),
        (None, "send", "success", "CompanyB"),
    ]
    return {"MessageLog": [
        {"ts": at(i), "timestamp": i, "sender": s, "msgType": m, "outcome": o, "receiver": r}
        for i, (s, m, o, r) in enumerate(rows)
    ]}


def test_select_sees_only_dominated_tuples():
    q = Select("MessageLog", ("timestamp", "sender"),
               (Cond("msgType", "=", "send"), Cond("receiver", "=", "CompanyB")))

    def run(level: str) -> list[dict]:
        return LO.run(LAT, SHEPHERD, message_log(), q, level)

    assert run("[1, ⊥]") == [
        {"timestamp": 0, "sender": "Company1", "level": "[1, ⊥]"},
        {"timestamp": 3, "sender": "Company1", "level": "[1, ⊥]"},
    ]
    assert sorted(r["timestamp"] for r in run("[T, ⊥]")) == [0, 1, 3]
    assert run("[⊥, B]") == []
    assert run("[⊥, ⊥]") == []
    assert sorted(r["timestamp"] for r in run("[T, T]")) == [0, 1, 3, 4, 5]


def test_select_level_item_and_level_condition():
    q = Select("MessageLog", ("ts", "level"), (Cond("level", "<>", "[1,_]"),))
    assert LO.run(LAT, SHEPHERD, message_log(), q, "[T, B]") == [
        {"ts": txt(1), "level": "[2, ⊥]"},
        {"ts": txt(2), "level": "[⊥, B]"},
    ]
    q = Select("MessageLog", ("timestamp",), (Cond("level", "=", "[T, T]"),))
    assert sorted(r["timestamp"] for r in LO.run(LAT, SHEPHERD, message_log(), q, "[T, T]")) == [4, 5]


def test_select_null_and_type_mismatch_are_not_true():
    recs = {"S": [{"ts": at(0), "x": None}, {"ts": at(1)}, {"ts": at(2), "x": "5"},
                  {"ts": at(3), "x": 5}, {"ts": at(4), "x": 5.0}, {"ts": at(5), "x": True}]}
    streams = {"S": {"level": "[⊥, ⊥]"}}
    q = Select("S", ("x",), (Cond("x", "=", 5),))
    assert LO.run(LAT, streams, recs, q, "[⊥, ⊥]") == [{"x": 5, "level": "[⊥, ⊥]"}, {"x": 5.0, "level": "[⊥, ⊥]"}]
    q = Select("S", ("x",), (Cond("x", "<>", 5),))
    assert LO.run(LAT, streams, recs, q, "[⊥, ⊥]") == []
    q = Select("S", ("ts",), (Cond("ts", ">=", at(4)),))
    assert LO.run(LAT, streams, recs, q, "[⊥, ⊥]") == [{"ts": txt(4), "level": "[⊥, ⊥]"},
                                                       {"ts": txt(5), "level": "[⊥, ⊥]"}]


def test_stream_without_spec_is_top():
    recs = {"S": [{"ts": at(0), "a": 1}]}
    q = Select("S", ("a",))
    assert LO.run(LAT, {"S": {"level": None}}, recs, q, "[T, B]") == []
    assert LO.run(LAT, {}, recs, q, "[T, T]") == [{"a": 1, "level": "[T, T]"}]


# --------------------------------------------------------------------------
# ROWS aggregate, including the paper's Qi / Qj / Qj'
# --------------------------------------------------------------------------
def qi_records():
    """150 sends to CompanyB; every third (i % 3 == 0) from Company1, the rest from Company2."""
    return {"MessageLog": [
        {"ts": at(i), "sender": "Company1" if i % 3 == 0 else "Company2", "msgType": "send",
         "outcome": "success", "receiver": "CompanyB"}
        for i in range(150)
    ]}


QI_WHERE = (Cond("msgType", "=", "send"), Cond("outcome", "=", "success"), Cond("receiver", "=", "CompanyB"))


def test_paper_qi_qj_differ():
    q = RowsAggregate("MessageLog", 100, QI_WHERE)
    qi = LO.run(LAT, SHEPHERD, qi_records(), q, "[1, ⊥]")
    qj = LO.run(LAT, SHEPHERD, qi_records(), q, "[T, ⊥]")
    # Qi: only Company1's 50 tuples exist for it; the k-th arrival counts k.
    assert qi == LO.sort_rows({"ts": at(3 * k), "COUNT(*)": k + 1, "level": "[1, ⊥]"} for k in range(50))
    # Qj: all 150 tuples; arrival i counts min(i + 1, 100); both companies are mixed in.
    assert len(qj) == 150
    by_ts = {r["ts"]: r for r in qj}
    assert by_ts[txt(0)] == {"ts": txt(0), "COUNT(*)": 1, "level": "[1, ⊥]"}
    assert by_ts[txt(1)] == {"ts": txt(1), "COUNT(*)": 2, "level": "[T, ⊥]"}
    assert by_ts[txt(149)] == {"ts": txt(149), "COUNT(*)": 100, "level": "[T, ⊥]"}
    assert qi != qj


def test_paper_qj_prime_does_not_reproduce_qi():
    qi = LO.run(LAT, SHEPHERD, qi_records(), RowsAggregate("MessageLog", 100, QI_WHERE), "[1, ⊥]")
    q_prime = RowsAggregate("MessageLog", 100, QI_WHERE + (Cond("level", "=", "[1, ⊥]"),))
    qjp = LO.run(LAT, SHEPHERD, qi_records(), q_prime, "[T, ⊥]")
    assert qjp != qi
    # Qj' emits at every arrival (150 rows), Qi only at Company1's (50 rows).
    assert len(qi) == 50 and len(qjp) == 150
    qi_by_ts = {r["ts"]: r["COUNT(*)"] for r in qi}
    qjp_by_ts = {r["ts"]: r["COUNT(*)"] for r in qjp}
    # Last Company1 arrival (i = 147): Qi counts all 50 of Company1's tuples; Qj's
    # window is i = 48..147 of every company, holding 34 of Company1's (48, 51, ..., 147).
    assert qi_by_ts[txt(147)] == 50
    assert qjp_by_ts[txt(147)] == 34
    # At the last arrival (i = 149, Company2): window 50..149 holds 33 of Company1's.
    assert qjp_by_ts[txt(149)] == 33
    # Even restricted to the instants Qi answers at, the counts differ from i = 99 on.
    assert [qjp_by_ts[t] for t in qi_by_ts] != list(qi_by_ts.values())
    assert all(qjp_by_ts[txt(3 * k)] == k + 1 for k in range(34))  # window not yet full: equal
    assert qjp_by_ts[txt(102)] == 34 and qi_by_ts[txt(102)] == 35
    assert {r["level"] for r in qjp} == {"[1, ⊥]"}


def test_rows_aggregate_empty_and_grouped():
    recs = {"S": [
        {"ts": at(0), "sender": "Company1", "g": "x", "v": 4},
        {"ts": at(1), "sender": "CompanyA", "g": "y", "v": None},
        {"ts": at(1), "sender": "Company2", "g": "x", "v": 7},   # same ts: input order breaks the tie
        {"ts": at(2), "sender": "CompanyB", "g": "x", "v": 1},
    ]}
    streams = {"S": {"level": {"from": "sender"}}}
    aggs = (("COUNT", None), ("COUNT", "v"), ("MIN", "v"), ("MAX", "v"), ("SUM", "v"), ("AVG", "v"))
    q = RowsAggregate("S", 2, (Cond("v", ">", 100),), aggs)
    empty = {"COUNT(*)": 0, "COUNT(v)": 0, "MIN(v)": None, "MAX(v)": None, "SUM(v)": None, "AVG(v)": None,
             "level": "[⊥, ⊥]"}
    assert LO.run(LAT, streams, recs, q, "[1, A]") == [{"ts": txt(0), **empty}, {"ts": txt(1), **empty}]
    q = RowsAggregate("S", 2, (), aggs, "g")
    got = LO.run(LAT, streams, recs, q, "[T, T]")
    want = [
        {"ts": txt(0), "g": "x", "COUNT(*)": 1, "COUNT(v)": 1, "MIN(v)": 4, "MAX(v)": 4, "SUM(v)": 4,
         "AVG(v)": 4.0, "level": "[1, ⊥]"},
        # arrival 2 (CompanyA): window = tuples 0, 1
        {"ts": txt(1), "g": "y", "COUNT(*)": 1, "COUNT(v)": 0, "MIN(v)": None, "MAX(v)": None, "SUM(v)": None,
         "AVG(v)": None, "level": "[⊥, A]"},
        {"ts": txt(1), "g": "x", "COUNT(*)": 1, "COUNT(v)": 1, "MIN(v)": 4, "MAX(v)": 4, "SUM(v)": 4,
         "AVG(v)": 4.0, "level": "[1, ⊥]"},
        # arrival 3 (Company2, same ts): window = tuples 1, 2
        {"ts": txt(1), "g": "y", "COUNT(*)": 1, "COUNT(v)": 0, "MIN(v)": None, "MAX(v)": None, "SUM(v)": None,
         "AVG(v)": None, "level": "[⊥, A]"},
        {"ts": txt(1), "g": "x", "COUNT(*)": 1, "COUNT(v)": 1, "MIN(v)": 7, "MAX(v)": 7, "SUM(v)": 7,
         "AVG(v)": 7.0, "level": "[2, ⊥]"},
        # arrival 4 (CompanyB): window = tuples 2, 3
        {"ts": txt(2), "g": "x", "COUNT(*)": 2, "COUNT(v)": 2, "MIN(v)": 1, "MAX(v)": 7, "SUM(v)": 8,
         "AVG(v)": 4.0, "level": "[2, B]"},
    ]
    assert got == LO.sort_rows(want)
    assert all(isinstance(r["SUM(v)"], int) for r in got if r["SUM(v)"] is not None)


# --------------------------------------------------------------------------
# RANGE aggregate
# --------------------------------------------------------------------------
def test_window_starts():
    epoch = LO.EPOCH
    t = epoch + timedelta(seconds=12)
    assert LO.window_starts(t, 10, 5) == [epoch + timedelta(seconds=5), epoch + timedelta(seconds=10)]
    assert LO.window_starts(epoch + timedelta(seconds=10), 10, 5) == [epoch + timedelta(seconds=5),
                                                                        epoch + timedelta(seconds=10)]
    assert LO.window_starts(epoch + timedelta(seconds=7), 5, 10) == []  # gap
    assert LO.window_starts(epoch + timedelta(seconds=3), 5, 10) == [epoch]
    assert LO.window_starts(epoch + timedelta(seconds=3), 4, 4) == [epoch]


def test_range_aggregate_visibility_before_windows():
    # BASE is a multiple of 10 s since the epoch.
    recs = {"S": [
        {"ts": at(1), "sender": "Company1", "v": 1},
        {"ts": at(6), "sender": "Company2", "v": 2},
        {"ts": at(12), "sender": "CompanyA", "v": 3},
        {"ts": at(13), "sender": "Company1", "v": 10},
    ]}
    streams = {"S": {"level": {"from": "sender"}}}
    q = RangeAggregate("S", 10, 5, (Cond("v", "<", 10),), (("COUNT", None), ("SUM", "v")))
    assert LO.run(LAT, streams, recs, q, "[1, A]") == LO.sort_rows([
        {"window_start": at(-5), "window_end": at(5), "COUNT(*)": 1, "SUM(v)": 1, "level": "[1, ⊥]"},
        {"window_start": at(0), "window_end": at(10), "COUNT(*)": 1, "SUM(v)": 1, "level": "[1, ⊥]"},
        {"window_start": at(5), "window_end": at(15), "COUNT(*)": 1, "SUM(v)": 3, "level": "[⊥, A]"},
        {"window_start": at(10), "window_end": at(20), "COUNT(*)": 1, "SUM(v)": 3, "level": "[⊥, A]"},
    ])
    got = LO.run(LAT, streams, recs, q, "[T, A]")
    assert {"window_start": txt(5), "window_end": txt(15), "COUNT(*)": 2, "SUM(v)": 5, "level": "[2, A]"} in got
    assert {"window_start": txt(0), "window_end": txt(10), "COUNT(*)": 2, "SUM(v)": 3, "level": "[T, ⊥]"} in got
    assert len(got) == 4


def test_range_aggregate_grouped_tumbling():
    recs = {"S": [{"ts": at(1), "g": "a", "v": 1.5}, {"ts": at(2), "g": None, "v": 2},
                  {"ts": at(3), "g": "a", "v": 2}]}
    q = RangeAggregate("S", 10, None, (), (("AVG", "v"),), "g")
    assert LO.run(LAT, {"S": {"level": "[⊥, C]"}}, recs, q, "[⊥, C]") == LO.sort_rows([
        {"window_start": at(0), "window_end": at(10), "g": "a", "AVG(v)": 1.75, "level": "[⊥, C]"},
        {"window_start": at(0), "window_end": at(10), "g": None, "AVG(v)": 2.0, "level": "[⊥, C]"},
    ])


# --------------------------------------------------------------------------
# Join
# --------------------------------------------------------------------------
def test_join_window_bounds_and_lub():
    recs = {
        "Req": [{"ts": at(10), "sender": "Company1", "sid": 5, "x": "r10"},
                {"ts": at(20), "sender": "Company2", "sid": 5, "x": "r20"}],
        "Resp": [{"ts": at(7), "sender": "CompanyB", "sid": 5, "y": "p7"},    # a.ts - 3 = 7: joins r10
                 {"ts": at(6), "sender": "CompanyB", "sid": 5, "y": "p6"},    # too early for r10
                 {"ts": at(15), "sender": "CompanyA", "sid": 5, "y": "p15"},  # a.ts + 5 = 15: joins r10
                 {"ts": at(16), "sender": "CompanyB", "sid": 6, "y": "p16"},  # sid differs
                 {"ts": at(18), "sender": "CompanyB", "sid": None, "y": "p18"}],
    }
    streams = {"Req": {"level": {"from": "sender"}}, "Resp": {"level": {"from": "sender"}}}
    q = Join("Req", "a", 5, "Resp", "b", 3, (("sid", "sid"),), (), ("a.x", "b.y"))
    # r20 at 20 needs 17 <= b.ts <= 25: only p18 is in range, and its sid is NULL.
    assert LO.run(LAT, streams, recs, q, "[T, T]") == LO.sort_rows([
        {"x": "r10", "y": "p7", "level": "[1, B]"},
        {"x": "r10", "y": "p15", "level": "[1, A]"},
    ])
    assert LO.run(LAT, streams, recs, q, "[1, B]") == [{"x": "r10", "y": "p7", "level": "[1, B]"}]
    q = Join("Req", "a", 5, "Resp", "b", 3, (("sid", "sid"),), (Cond("b.level", "=", "[⊥, A]"),), ("b.y",))
    assert LO.run(LAT, streams, recs, q, "[T, T]") == [{"y": "p15", "level": "[1, A]"}]
    assert LO.run(LAT, streams, recs, q, "[T, B]") == []


def test_self_join_lub():
    recs = {"Log": [{"ts": at(0), "sender": "Company1", "k": 1, "x": 1},
                    {"ts": at(1), "sender": "Company2", "k": 1, "y": 2}]}
    q = Join("Log", "r", 1, "Log", "s", 1, (("k", "k"),), (Cond("r.x", "=", 1), Cond("s.y", "=", 2)),
             ("r.ts", "s.y"))
    streams = {"Log": {"level": {"from": "sender"}}}
    assert LO.run(LAT, streams, recs, q, "[T, ⊥]") == [{"ts": txt(0), "y": 2, "level": "[T, ⊥]"}]
    assert LO.run(LAT, streams, recs, q, "[1, ⊥]") == []
