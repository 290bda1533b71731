"""Unit tests of the test oracle itself, on Table II of the paper
(Carminati et al., TISSEC 2010) and small hand-made tuples."""
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

try:  # tests/ as a package or as a plain directory on sys.path
    from . import oracle as O
except ImportError:
    import oracle as O

UTC = timezone.utc
T0 = datetime(2024, 1, 1, 8, tzinfo=UTC)  # epoch-aligned to every window used below (10 h)
H = 3600.0
DELTA = 10.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def A(name):
    return ("attr", name)


def C(value):
    return ("const", value)


def cmp(left, op, right):
    return ("cmp", left, op, right)


def AND(*ps):
    out = ps[0]
    for p in ps[1:]:
        out = ("and", out, p)
    return out


TARGET = ("action", "target", "a")

P1 = O.OPolicy("p1", "Doctor", ("Position",), ("Pos", "SID"),
               cmp(A("Position.Platoon"), "=", ("self", "Platoon")), "read")
P2 = O.OPolicy("p2", "Doctor", ("Position",), ("Pos",),
               cmp(A("Position.Platoon"), "<>", ("self", "Platoon")), "avg",
               time=(("action", "start", "a"), ("action", "end", "a")), window=(H, H))
P3 = O.OPolicy("p3", "Doctor", ("Health",), "*",
               cmp(A("Health.Platoon"), "=", ("self", "Platoon")), "read")
P4 = O.OPolicy("p4", "Doctor", ("Health", "Position"), ("BPressure", "SID", "Pos"),
               AND(cmp(A("Health.Platoon"), "<>", ("self", "Platoon")),
                   cmp(A("Position.SID"), "=", A("Health.SID")),
                   cmp(A("Position.Pos"), ">=", ("arith", "-", TARGET, C(DELTA))),
                   cmp(A("Position.Pos"), "<=", ("arith", "+", TARGET, C(DELTA)))),
               "read")

NOT_STARTED = O.OAction(None, None, None)
STARTED = O.OAction(at(2 * H), None, 500.0)  # action a under way, target 500


def catalog(action=NOT_STARTED, users=None, inherits=None):
    return O.OCatalog(
        inherits=inherits or {},
        users=users if users is not None else {"paul": (("Doctor",), {"Platoon": "X"})},
        actions={"a": action},
        policies=(P1, P2, P3, P4),
    )


def pos(t, sid, p, platoon):
    return {"ts": at(t), "SID": sid, "Pos": p, "Platoon": platoon}


def health(t, sid, platoon, heart, bp):
    return {"ts": at(t), "SID": sid, "Platoon": platoon, "Heart": heart, "BPressure": bp}


POSITION = [
    pos(0, 1, 100.0, "X"),
    pos(10, 2, 495.0, "Y"),
    pos(20, 3, 700.0, "Y"),
    pos(30, 4, 200.0, "X"),
]
HEALTH = [
    health(5, 1, "X", 70, 120),
    health(15, 2, "Y", 80, 130),
    health(25, 3, "Y", 90, 140),
    health(35, 4, "X", 60, 110),
]
POSITION_SCHEMA = ["ts", "SID", "Pos", "Platoon"]


def multiset(rows):
    return sorted(repr(sorted(r.items())) for r in rows)


def same(rows, expected):
    assert multiset(rows) == multiset(expected)


# ---------------------------------------------------------------- roles
def test_role_inheritance_is_transitive_and_cycle_safe():
    cat = catalog(users={"ann": (("Chief",), {"Platoon": "X"})},
                  inherits={"Chief": ("Cardiologist",), "Cardiologist": ("Doctor",),
                            "Doctor": ("Chief",)})
    assert O.effective_roles(cat, "ann") == {"Chief", "Cardiologist", "Doctor"}
    assert O.effective_roles(cat, "nobody") == frozenset()
    rows = O.select_rows(cat, "ann", "Position", POSITION, [("SID", "SID")], None)
    same(rows, [{"SID": 1, "_policies": ["p1"], "_kind": "read"},
                {"SID": 4, "_policies": ["p1"], "_kind": "read"}])


def test_unrelated_role_sees_nothing():
    cat = catalog(users={"eve": (("Nurse",), {"Platoon": "X"})}, inherits={"Nurse": ()})
    assert O.select_rows(cat, "eve", "Position", POSITION, "*", None) == []


# ---------------------------------------------------------------- Example 5.1
def test_example_5_1_secure_read_position():
    rows = O.select_rows(catalog(), "paul", "Position", POSITION, "*", None,
                         schema=POSITION_SCHEMA)
    # pi(Pos, SID)(sigma(Platoon = X)(Position)); Platoon masked, ts kept
    same(rows, [
        {"ts": at(0), "SID": 1, "Pos": 100.0, "Platoon": None, "_policies": ["p1"], "_kind": "read"},
        {"ts": at(30), "SID": 4, "Pos": 200.0, "Platoon": None, "_policies": ["p1"], "_kind": "read"},
    ])


def test_where_is_evaluated_on_the_masked_tuple():
    cat = catalog()
    # Platoon is masked (NULL), so Platoon = 'X' is not TRUE
    assert O.select_rows(cat, "paul", "Position", POSITION, [("SID", "s")],
                         cmp(A("Position.Platoon"), "=", C("X"))) == []
    rows = O.select_rows(cat, "paul", "Position", POSITION, [("SID", "s")],
                         cmp(A("Position.Pos"), ">", C(150.0)))
    same(rows, [{"s": 4, "_policies": ["p1"], "_kind": "read"}])


def test_merged_read_view_unions_attributes_and_policies():
    extra = O.OPolicy("p5", "Doctor", ("Position",), ("Platoon",),
                      cmp(A("Position.SID"), "<=", C(2)), "read")
    cat = replace(catalog(), policies=(P1, P2, P3, P4, extra))
    rows = O.select_rows(cat, "paul", "Position", POSITION, "*", None, schema=POSITION_SCHEMA)
    same(rows, [
        {"ts": at(0), "SID": 1, "Pos": 100.0, "Platoon": "X", "_policies": ["p1", "p5"], "_kind": "read"},
        {"ts": at(10), "SID": None, "Pos": None, "Platoon": "Y", "_policies": ["p5"], "_kind": "read"},
        {"ts": at(30), "SID": 4, "Pos": 200.0, "Platoon": None, "_policies": ["p1"], "_kind": "read"},
    ])


# ---------------------------------------------------------------- Example 5.2
AGG_TUPLES = [
    pos(0, 1, 100.0, "X"),         # read path
    pos(H, 2, 300.0, "Y"),         # before start(a): nobody may see it
    pos(2 * H, 2, 400.0, "Y"),     # during a: aggregate path
    pos(3 * H, 3, 600.0, "Y"),     # during a: aggregate path
    pos(4 * H, 4, 200.0, "X"),     # read path
    pos(6 * H, 1, 1000.0, "X"),    # read path, next 5h window
]


def test_example_5_2_secure_aggregate_during_action():
    rows = O.aggregate_rows(catalog(STARTED), "paul", "Position", AGG_TUPLES,
                            [("avg", "Pos", "AVG(Pos)")], [], None, 5 * H, 5 * H)
    same(rows, [
        {"window_start": at(0), "window_end": at(5 * H), "AVG(Pos)": 150.0,
         "_policies": ["p1"], "_kind": "read"},
        {"window_start": at(5 * H), "window_end": at(10 * H), "AVG(Pos)": 1000.0,
         "_policies": ["p1"], "_kind": "read"},
        {"window_start": at(0), "window_end": at(5 * H), "AVG(Pos)": 500.0,
         "_policies": ["p2"], "_kind": "agg:p2"},
    ])


def test_example_5_2_action_not_started_gives_no_aggregate_rows():
    rows = O.aggregate_rows(catalog(NOT_STARTED), "paul", "Position", AGG_TUPLES,
                            [("avg", "Pos", "a")], [], None, 5 * H, 5 * H)
    assert {r["_kind"] for r in rows} == {"read"}


def test_aggregate_policy_window_is_a_minimum():
    # query asks 10-minute tumbling windows; p2 forces at least 1 hour
    rows = O.aggregate_rows(catalog(STARTED), "paul", "Position", AGG_TUPLES,
                            [("avg", "Pos", "a")], [], None, 600.0, 600.0)
    agg = [r for r in rows if r["_kind"] == "agg:p2"]
    same(agg, [
        {"window_start": at(2 * H), "window_end": at(3 * H), "a": 400.0, "_policies": ["p2"], "_kind": "agg:p2"},
        {"window_start": at(3 * H), "window_end": at(4 * H), "a": 600.0, "_policies": ["p2"], "_kind": "agg:p2"},
    ])
    read = [r for r in rows if r["_kind"] == "read"]
    assert {r["window_end"] - r["window_start"] for r in read} == {timedelta(minutes=10)}


def test_aggregate_policy_requires_implication_of_query_predicate():
    cat = catalog(STARTED)
    aggs = [("avg", "Pos", "a")]
    # p2's condition (Platoon <> X during a) implies Platoon <> X: applies
    implied = cmp(A("Position.Platoon"), "<>", C("X"))
    rows = O.aggregate_rows(cat, "paul", "Position", AGG_TUPLES, aggs, [], implied, 5 * H, 5 * H)
    assert [r["a"] for r in rows if r["_kind"] == "agg:p2"] == [500.0]
    # Pos >= 450 selects a subset of beta(p2): finer statistics, refused
    narrower = cmp(A("Position.Pos"), ">=", C(450.0))
    rows = O.aggregate_rows(cat, "paul", "Position", AGG_TUPLES, aggs, [], narrower, 5 * H, 5 * H)
    assert all(r["_kind"] == "read" for r in rows)


def test_aggregate_other_functions_and_grants():
    cat = catalog(STARTED)
    aggs = [("avg", "Pos", "avg"), ("count", None, "n"), ("max", "SID", "m")]
    rows = O.aggregate_rows(cat, "paul", "Position", AGG_TUPLES, aggs, [], None, 5 * H, 5 * H)
    agg = [r for r in rows if r["_kind"] == "agg:p2"]
    # p2 grants only avg: count and max are NULL in its rows
    same(agg, [{"window_start": at(0), "window_end": at(5 * H), "avg": 500.0, "n": None,
                "m": None, "_policies": ["p2"], "_kind": "agg:p2"}])
    read = [r for r in rows if r["_kind"] == "read"]
    assert sorted((r["n"], r["m"]) for r in read) == [(1, 1), (2, 4)]
    # group by an attribute p2 does not grant: no aggregate path
    rows = O.aggregate_rows(cat, "paul", "Position", AGG_TUPLES, [("avg", "Pos", "a")],
                            ["SID"], None, 5 * H, 5 * H)
    assert all(r["_kind"] == "read" for r in rows)


def test_read_path_not_deployed_for_ungranted_attribute():
    # Platoon is granted by no read policy on Position
    rows = O.aggregate_rows(catalog(STARTED), "paul", "Position", AGG_TUPLES,
                            [("max", "Platoon", "m")], [], None, 5 * H, 5 * H)
    assert rows == []


def test_sliding_epoch_aligned_windows_and_nulls():
    cat = catalog()
    tuples = [pos(12, 1, 10.0, "X"), pos(13, 4, None, "X")]
    rows = O.aggregate_rows(cat, "paul", "Position", tuples,
                            [("count", None, "n"), ("count", "Pos", "c"), ("sum", "Pos", "s")],
                            [], None, 10.0, 5.0)
    same(rows, [
        {"window_start": at(5), "window_end": at(15), "n": 2, "c": 1, "s": 10.0,
         "_policies": ["p1"], "_kind": "read"},
        {"window_start": at(10), "window_end": at(20), "n": 2, "c": 1, "s": 10.0,
         "_policies": ["p1"], "_kind": "read"},
    ])


def test_group_by_on_read_path():
    cat = catalog()
    rows = O.aggregate_rows(cat, "paul", "Position", AGG_TUPLES, [("count", None, "n")],
                            ["SID"], None, 10 * H, 10 * H)
    assert sorted((r["SID"], r["n"]) for r in rows) == [(1, 2), (4, 1)]


# ---------------------------------------------------------------- Example 5.3
JOIN_ITEMS = [("Position.SID", "SID"), ("Position.Pos", "Pos"), ("Health.BPressure", "BP"),
              ("Health.Heart", "Heart"), ("Health.Platoon", "HPlatoon"), ("Position.ts", "pts")]
SID_EQ = cmp(A("Position.SID"), "=", A("Health.SID"))


def join(cat, where, wa=60.0, wb=60.0):
    return O.join_rows(cat, "paul", "Position", POSITION, wa, "Health", HEALTH, wb,
                       JOIN_ITEMS, where)


READ_PAIRS = [
    {"SID": 1, "Pos": 100.0, "BP": 120, "Heart": 70, "HPlatoon": "X", "pts": at(0),
     "_policies": ["p1", "p3"], "_kind": "read"},
    {"SID": 4, "Pos": 200.0, "BP": 110, "Heart": 60, "HPlatoon": "X", "pts": at(30),
     "_policies": ["p1", "p3"], "_kind": "read"},
]


def test_example_5_3_action_not_started_join_view_is_empty():
    rows = join(catalog(NOT_STARTED), SID_EQ)
    same(rows, READ_PAIRS)  # only the read path (own platoon)


def test_example_5_3_action_started_pairs_near_target():
    rows = join(catalog(STARTED), SID_EQ)
    # SID 2 at 495 is within 500 +- 10 and not in platoon X; SID 3 at 700 is not
    same(rows, READ_PAIRS + [
        {"SID": 2, "Pos": 495.0, "BP": 130, "Heart": None, "HPlatoon": None, "pts": at(10),
         "_policies": ["p4"], "_kind": "join"},
    ])


def test_join_time_windows():
    cat = catalog(STARTED)
    # b.ts must lie in [a.ts - wb, a.ts + wa]; Health is 5 s after Position
    assert join(cat, SID_EQ, wa=4.0, wb=60.0) == []
    assert len(join(cat, SID_EQ, wa=5.0, wb=0.0)) == 3
    # the time condition alone pairs everything close enough
    assert len([r for r in join(cat, None, wa=5.0, wb=5.0) if r["_kind"] == "read"]) == 2


def test_join_policy_must_imply_the_join_predicate():
    cat = catalog(STARTED)
    other = cmp(A("Position.SID"), "<", A("Health.SID"))
    assert all(r["_kind"] == "read" for r in join(cat, AND(SID_EQ, other), wa=60.0))


# ---------------------------------------------------------------- Example 5.5
def test_example_5_5_selection_after_join():
    cat = catalog(STARTED)
    where = AND(SID_EQ, cmp(A("Position.Pos"), ">=", C(150.0)))
    same(join(cat, where), [READ_PAIRS[1],
         {"SID": 2, "Pos": 495.0, "BP": 130, "Heart": None, "HPlatoon": None, "pts": at(10),
          "_policies": ["p4"], "_kind": "join"}])


def test_example_5_5_inference_prevention():
    # a single-stream predicate on Heart (not granted by p4) disables the join path
    cat = catalog(STARTED)
    where = AND(SID_EQ, cmp(A("Health.Heart"), ">", C(0)))
    same(join(cat, where), READ_PAIRS)


# ---------------------------------------------------------------- Example 5.6
def test_example_5_6_avg_heart_only_from_read_path():
    cat = catalog(STARTED)
    where = AND(SID_EQ, cmp(A("Position.Pos"), ">=", C(0.0)))
    rows = join(cat, where)
    # AG_a over ag_1 (read path): heart beats of platoon X are visible
    assert sorted(r["Heart"] for r in rows if r["_kind"] == "read") == [60, 70]
    # AG_a over ag_2 (secure join): Heart is projected away, nothing to average
    assert [r["Heart"] for r in rows if r["_kind"] == "join"] == [None]
    # AG_sa is empty: no avg policy for doctors on Health
    agg = O.aggregate_rows(cat, "paul", "Health", HEALTH, [("avg", "Heart", "AVG(Heart)")],
                           [], None, H, H)
    same(agg, [{"window_start": at(0), "window_end": at(H), "AVG(Heart)": 65.0,
                "_policies": ["p3"], "_kind": "read"}])


# ---------------------------------------------------------------- fail closed self
def test_self_without_profile_value_fails_closed():
    cat = catalog(STARTED, users={"nate": (("Doctor",), {})})
    assert O.select_rows(cat, "nate", "Position", POSITION, "*", None) == []
    assert O.aggregate_rows(cat, "nate", "Position", AGG_TUPLES, [("avg", "Pos", "a")],
                            [], None, 5 * H, 5 * H) == []
    assert O.join_rows(cat, "nate", "Position", POSITION, 60.0, "Health", HEALTH, 60.0,
                       JOIN_ITEMS, SID_EQ) == []


def test_self_with_null_profile_value_matches_nothing():
    cat = catalog(users={"nina": (("Doctor",), {"Platoon": None})})
    assert O.select_rows(cat, "nina", "Position", POSITION, "*", None) == []


# ---------------------------------------------------------------- three-valued logic
def test_kleene_connectives():
    T, F, N = ("true",), cmp(C(1), "=", C(2)), cmp(C(1), "=", C(None))

    def ev(p: tuple) -> bool | None:
        return O.evaluate(p, lambda o: None)

    assert ev(N) is None and ev(("not", N)) is None
    assert ev(("and", N, F)) is False and ev(("and", N, T)) is None
    assert ev(("or", N, T)) is True and ev(("or", N, F)) is None
    assert ev(cmp(("arith", "+", C(1), C(None)), "<", C(5))) is None
    assert ev(cmp(("arith", "/", C(1), C(0)), "=", C(1))) is None


def test_three_valued_where_on_masked_attribute():
    cat = catalog()
    platoon_is_y = cmp(A("Position.Platoon"), "=", C("Y"))  # NULL on masked tuples
    assert O.select_rows(cat, "paul", "Position", POSITION, [("SID", "s")],
                         ("not", platoon_is_y)) == []
    rows = O.select_rows(cat, "paul", "Position", POSITION, [("SID", "s")],
                         ("or", platoon_is_y, cmp(A("Position.SID"), "=", C(4))))
    same(rows, [{"s": 4, "_policies": ["p1"], "_kind": "read"}])


def test_action_started_without_end_is_open_ended():
    far = [pos(10_000 * H, 2, 400.0, "Y")]  # long after start(a)
    rows = O.aggregate_rows(catalog(STARTED), "paul", "Position", far,
                            [("avg", "Pos", "a")], [], None, H, H)
    assert [r["_kind"] for r in rows] == ["agg:p2"]
    ended = O.OAction(at(2 * H), at(3 * H), 500.0)
    rows = O.aggregate_rows(catalog(ended), "paul", "Position", far,
                            [("avg", "Pos", "a")], [], None, H, H)
    assert rows == []


# ---------------------------------------------------------------- implication
@pytest.mark.parametrize("p, q, expected", [
    (cmp(A("S.x"), ">", C(5)), cmp(A("S.x"), ">", C(3)), True),
    (cmp(A("S.x"), ">", C(3)), cmp(A("S.x"), ">", C(5)), False),
    (cmp(A("S.x"), ">", C(3)), cmp(A("S.x"), ">=", C(3)), True),
    (cmp(A("S.x"), ">=", C(3)), cmp(A("S.x"), ">", C(3)), False),
    (("true",), ("or", cmp(A("S.x"), ">", C(3)), cmp(A("S.x"), "<=", C(3))), False),  # NULL x: neither
    (AND(cmp(A("S.x"), ">", C(4)), cmp(A("S.y"), "<", C(5))), cmp(A("S.x"), "<", A("S.y")), False),
    (AND(cmp(A("S.x"), ">", C(4)), cmp(A("S.x"), "<", C(5)), cmp(A("S.y"), ">", C(4)),
         cmp(A("S.y"), "<", C(5))), ("not", cmp(A("S.x"), "<", A("S.y"))), False),
    (AND(cmp(A("S.x"), "<", A("S.y")), cmp(A("S.y"), "<", A("S.z"))), cmp(A("S.x"), "<", A("S.z")), True),
    (cmp(A("S.s"), "=", C("X")), cmp(A("S.s"), "<>", C("Y")), True),
    (cmp(A("S.s"), "<>", C("X")), cmp(A("S.s"), "=", C("Y")), False),
    (cmp(A("S.s"), ">", C("a")), cmp(A("S.s"), ">=", C("a")), True),
    (cmp(A("S.b"), "<>", C(True)), cmp(A("S.b"), "=", C(False)), True),
    (cmp(A("S.t"), ">=", ("action", "start", "a")), cmp(A("S.t"), ">=", C(T0)), False),
    (AND(cmp(A("S.t"), ">=", ("action", "start", "a")), cmp(("action", "start", "a"), ">", C(T0))),
     cmp(A("S.t"), ">", C(T0)), True),
])
def test_implies(p, q, expected):
    assert O.implies(p, q) is expected


def test_implies_edge_cases(monkeypatch):
    x_total = ("or", cmp(A("S.x"), ">", C(3)), cmp(A("S.x"), "<=", C(3)))
    # nothing sorts below the empty string; constant-only comparisons
    assert not O.implies(cmp(C(1), "<", C(2)), cmp(A("S.s"), ">=", C("")))  # S.s may be NULL
    assert O.implies(cmp(A("S.s"), "=", C("b")), cmp(A("S.s"), ">=", C("")))
    assert not O.implies(cmp(C("a"), "<", C("b")), cmp(A("S.s"), ">", C("")))
    assert O.implies(cmp(C(2), "<", C(1)), cmp(A("S.x"), "=", C(0)))  # p never TRUE
    # Table II p4 implies its own join predicate, not a stricter one
    p4 = O.policy_condition(P4, {"Platoon": "X"})
    assert O.implies(p4, SID_EQ)
    assert not O.implies(p4, cmp(A("Position.Pos"), "<", A("Health.BPressure")))
    assert O.implies(p4, cmp(A("Position.Pos"), "<=", ("arith", "+", TARGET, C(20.0))))
    # by default variables may be NULL, as in Spark (issue 11): x > 3 OR x <= 3 is NULL for a NULL x
    assert not O.implies(("true",), x_total)
    monkeypatch.setattr(O, "IMPLICATION_INCLUDES_NULL", False)
    assert O.implies(("true",), x_total)


def test_time_constraint_uses_action_values_at_run_time():
    cat = catalog(STARTED)
    cond = O.policy_condition(P2, {"Platoon": "X"})
    assert O.evaluate(cond, O._getter(cat, {"Position": pos(2 * H, 2, 1.0, "Y")})) is True
    assert O.evaluate(cond, O._getter(cat, {"Position": pos(H, 2, 1.0, "Y")})) is False
    assert O.evaluate(cond, O._getter(catalog(), {"Position": pos(2 * H, 2, 1.0, "Y")})) is None
