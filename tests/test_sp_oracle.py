"""The SP oracle itself, on the paper's cases (Nehme, Rundensteiner, Bertino, sections 4-5)."""

from __future__ import annotations

import pytest

import sp_oracle as O
from conftest import ts

ROLES_CAT = {"GP": (), "C": (), "D": ("GP",), "ND": (), "E": ("D",)}
HEART = O.Stream("HeartRate", ("ts", "Patient_id", "Beats_per_min"), "Patient_id")
TEMP = O.Stream("BodyTemperature", ("ts", "Patient_id", "Temperature"), "Patient_id")


def catalog(*streams: O.Stream, **users) -> O.Catalog:
    return O.Catalog({s.name: s for s in streams}, ROLES_CAT, {u: tuple(r) for u, r in users.items()})


def sp(tuples="*", attributes="*", roles="GP", sign="+", *, streams="HeartRate", at=0, sn=1, immutable=False,
       provider=None) -> dict:
    rec = {"kind": "sp", "streams": streams, "tuples": tuples, "attributes": attributes, "roles": roles,
           "sign": sign, "immutable": immutable, "grant": False, "ts": ts(at), "sn": sn}
    if provider is not None:
        rec["Patient_id"] = provider
    return rec


def beat(second, pid=120, bpm=70, *, at=0, csn=1) -> dict:
    rec = {"ts": ts(second), "Patient_id": pid, "Beats_per_min": bpm}
    if at is not None:
        rec["sp_ts"] = ts(at)
    if csn is not None:
        rec["sp_csn"] = csn
    return rec


def outcomes(records, stream=HEART):
    return O.shield_records(stream, records)[1]


# -- Figure 5: pattern expressions ----------------------------------------------------------------
@pytest.mark.parametrize(("pattern", "value", "expected"), [
    ("{}", 120, False), ("*", 120, True), ("*", "anything", True),
    ("120", 120, True), ("120", 121, False), ("120.0", 120, True),
    ("(120, 133)", 120, False), ("(120, 133)", 121, True), ("(120, 133)", 133, False),
    ("[120, 133]", 120, True), ("[120, 133]", 133, True), ("[120, 133]", 134, False),
    ("{120, 125, 133}", 125, True), ("{120, 125, 133}", 126, False), ("{GP, C}", "C", True),
    ("[9, 100]", "10", True),  # both read as numbers: 9 <= 10 <= 100
    ("[9, 100]", "x", False),  # text: "x" > "9" but "x" > "100"
    ("[a, c]", "b", True), ("[a, c]", "ab", True), ("[a, c]", "d", False),
    ("(2.5, 5)", 3, True), ("(2.5, 5)", 2, False),
    ("[Temperature, Temperature]", "Temperature", True),
])
def test_patterns(pattern, value, expected) -> None:
    assert O.matches(pattern, value) is expected


def test_malformed_patterns_are_rejected() -> None:
    for text in ("[1, 2", "(1)", "[1, 2, 3]", ""):
        with pytest.raises(ValueError):
            O.parse_pattern(text)


# -- Section 4.1: stream, tuple and attribute level restrictions ----------------------------------
def test_stream_level_restriction() -> None:
    cat = catalog(HEART, cardio=["C"], gp=["GP"])
    records = [sp("*", "*", "C"), beat(1)]
    assert O.select_rows(cat, "cardio", "HeartRate", records) == [
        {"ts": ts(1), "Patient_id": 120, "Beats_per_min": 70}]
    assert O.select_rows(cat, "gp", "HeartRate", records) == []


def test_tuple_level_restriction_and_inheritance() -> None:
    cat = catalog(HEART, gp=["GP"], doctor=["D"], chief=["E"], nurse=["ND"])
    records = [sp("[120, 133]", "*", "GP", streams="*"), beat(1, 120), beat(2, 133), beat(3, 140)]
    for user in ("gp", "doctor", "chief"):  # D inherits GP, E inherits D: transitively GP
        assert [r["Patient_id"] for r in O.select_rows(cat, user, "HeartRate", records)] == [120, 133]
    assert O.select_rows(cat, "nurse", "HeartRate", records) == []


def test_attribute_level_restriction_masks_the_rest() -> None:
    cat = catalog(HEART, TEMP, doctor=["D"], nurse=["ND"], cardio=["C"])
    policy = sp("*", "{Temperature, Beats_per_min}", "{D, ND}", streams="{HeartRate, BodyTemperature}")
    records = [policy, beat(1)]
    expected = [{"ts": None, "Patient_id": None, "Beats_per_min": 70}]
    assert O.select_rows(cat, "doctor", "HeartRate", records) == expected
    assert O.select_rows(cat, "nurse", "HeartRate", records) == expected
    assert O.select_rows(cat, "cardio", "HeartRate", records) == []
    temp = [dict(policy, streams="{HeartRate, BodyTemperature}"),
            {"ts": ts(1), "Patient_id": 120, "Temperature": 98.6, "sp_ts": ts(0), "sp_csn": 1}]
    assert O.select_rows(cat, "doctor", "BodyTemperature", temp) == [
        {"ts": None, "Patient_id": None, "Temperature": 98.6}]


def test_only_ts_accessible_is_not_delivered() -> None:
    cat = catalog(HEART, gp=["GP"])
    assert O.select_rows(cat, "gp", "HeartRate", [sp("*", "ts"), beat(1)]) == []
    assert O.select_rows(cat, "gp", "HeartRate", [sp("*", "{ts, Patient_id}"), beat(1)]) == [
        {"ts": ts(1), "Patient_id": 120, "Beats_per_min": None}]


def test_negative_sp_overrides_positive() -> None:
    cat = catalog(HEART, gp=["GP"], doctor=["D"], cardio=["C"])
    records = [sp("*", "*", "{GP, C}", sn=1), sp("{125}", "*", "GP", "-", sn=2),
               beat(1, 120, csn=2), beat(2, 125, csn=2)]
    assert [r["Patient_id"] for r in O.select_rows(cat, "gp", "HeartRate", records)] == [120]
    assert [r["Patient_id"] for r in O.select_rows(cat, "doctor", "HeartRate", records)] == [120]  # inherits GP
    assert [r["Patient_id"] for r in O.select_rows(cat, "cardio", "HeartRate", records)] == [120, 125]


def test_selection_on_a_masked_attribute_never_holds() -> None:
    cat = catalog(HEART, gp=["GP"])
    records = [sp("*", "{ts, Patient_id}"), beat(1, bpm=99)]
    assert O.select_rows(cat, "gp", "HeartRate", records, ("Beats_per_min", ">", 0)) == []
    assert O.select_rows(cat, "gp", "HeartRate", records, ("Patient_id", ">", 0)) != []


# -- Section 5.1 / Theorem 5.1: the Security Shield ------------------------------------------------
def test_case_1a_complete_policy() -> None:
    records = [sp(sn=1), sp("*", "Beats_per_min", "C", sn=2), beat(1, csn=2)]
    assert outcomes(records) == [O.GOVERNED]
    governed, _ = O.shield_records(HEART, records)
    assert [s.sn for s in governed[0][1]] == [1, 2]


def test_case_1b_incomplete_policy_is_dropped() -> None:
    records = [sp(sn=1), sp(sn=3), beat(1, csn=3), beat(2, csn=1)]  # SP 2 lost
    assert outcomes(records) == [O.MISMATCH, O.NO_POLICY]


def test_case_2_tuple_before_its_policy() -> None:
    records = [sp(at=0), beat(1, at=5), sp(at=5), beat(6, at=5), beat(7, at=0)]
    # the tuple's policy (5) is not there: the current one (0) is dropped; 5 is not older
    # than the newest policy ts seen (0), so it starts a policy; the last tuple mismatches
    assert outcomes(records) == [O.MISMATCH, O.GOVERNED, O.MISMATCH]


def test_case_3_newer_unrelated_policy_overrides() -> None:
    records = [sp(at=0), beat(1), sp("{999}", at=5), beat(2, at=5), beat(3, at=0)]
    assert outcomes(records) == [O.GOVERNED, O.GOVERNED, O.MISMATCH]
    cat = catalog(HEART, gp=["GP"])
    assert [r["ts"] for r in O.select_rows(cat, "gp", "HeartRate", records)] == [ts(1)]


def test_older_sps_are_discarded_even_with_no_current_policy() -> None:
    records = [sp(at=5), beat(6, at=5), beat(7, at=5, csn=2), sp(at=0), beat(8, at=0), sp(at=5), beat(9, at=5)]
    assert outcomes(records) == [O.GOVERNED, O.MISMATCH, O.NO_POLICY, O.GOVERNED]
    assert O.shield_trace(HEART, records)[2] == ["started", "discarded", "started"]


def test_reordered_and_duplicated_sps_within_a_batch() -> None:
    records = [sp(sn=2), sp(sn=1), sp(sn=1), beat(1, csn=2)]
    assert outcomes(records) == [O.GOVERNED]
    assert O.shield_trace(HEART, records)[2] == ["started", "joined", "replaced"]


def test_same_sn_replaces_the_earlier_sp() -> None:
    cat = catalog(HEART, gp=["GP"], cardio=["C"])
    records = [sp(roles="GP"), sp(roles="C"), beat(1)]
    assert O.select_rows(cat, "gp", "HeartRate", records) == []
    assert len(O.select_rows(cat, "cardio", "HeartRate", records)) == 1


def test_missing_fields_deny_without_dropping() -> None:
    records = [beat(0), sp(), beat(1, at=None, csn=None), beat(2, csn=None), beat(3)]
    assert outcomes(records) == [O.NO_POLICY, O.NO_FIELDS, O.NO_FIELDS, O.GOVERNED]


def test_csn_zero_denies() -> None:
    records = [sp(sn=2), beat(1, csn=0), beat(2, csn=2)]
    assert outcomes(records) == [O.CSN_ZERO, O.MISMATCH]


def test_late_sp_joins_and_changes_the_csn() -> None:
    records = [sp(sn=1), beat(1, csn=1), sp(sn=2), beat(2, csn=1), sp(sn=2), beat(3, csn=2)]
    # the late SP 2 joins: csn becomes 2, the tuple saying 1 mismatches; the re-sent SP 2
    # (same ts, no current policy, not older than the newest) starts a policy with SP 2 only
    assert outcomes(records) == [O.GOVERNED, O.MISMATCH, O.MISMATCH]
    assert O.shield_trace(HEART, records)[2] == ["started", "joined late", "started"]


def test_an_extended_policy_governs_with_the_new_csn() -> None:
    cat = catalog(HEART, gp=["GP"])
    records = [sp(sn=1), beat(1, csn=1), sp("{120}", "*", "GP", "-", sn=2), beat(2, csn=2), beat(3, 121, csn=2)]
    assert outcomes(records) == [O.GOVERNED, O.GOVERNED_EXTENDED, O.GOVERNED_EXTENDED]
    assert [r["Patient_id"] for r in O.select_rows(cat, "gp", "HeartRate", records)] == [120, 121]
    # the second tuple (120) is governed by SPs 1..2: denied by SP 2; 121 is not
    governed, _ = O.shield_records(HEART, records)
    assert [O.visible(HEART, t, p, frozenset({"GP"})) is not None for t, p in governed] == [True, False, True]


def test_gap_beyond_csn_is_not_part_of_the_policy() -> None:
    cat = catalog(HEART, gp=["GP"])
    records = [sp(sn=1), sp("*", "*", "GP", "-", sn=3), beat(1, csn=1)]  # SP 2 lost, SP 3 ignored
    assert outcomes(records) == [O.GOVERNED]
    assert len(O.select_rows(cat, "gp", "HeartRate", records)) == 1


def test_providers_have_their_own_shields() -> None:
    stream = O.Stream("HeartRate", ("ts", "Patient_id", "Beats_per_min"), "Patient_id", "Patient_id")
    records = [sp(at=0, provider=120), sp(at=5, provider=121), beat(1, 120, at=0), beat(6, 121, at=5),
               sp(at=2, provider=120), beat(7, 120, at=2)]
    assert outcomes(records, stream) == [O.GOVERNED, O.GOVERNED, O.GOVERNED]
    assert outcomes(records, HEART) == [O.MISMATCH, O.NO_POLICY, O.NO_POLICY]  # one shield: 2 < 5 is stale


def test_arrival_order() -> None:
    a = [{"n": 1}, {"n": 2}]
    b = [{"n": 3}]
    assert [r["n"] for r in O.arrival_order([("b", b), ("a", a)])] == [1, 2, 3]
    seq = [{"n": 1, "seq": 3}, {"n": 2, "seq": 1}, {"n": 3, "seq": 2}]
    assert [r["n"] for r in O.arrival_order([("x", seq)])] == [2, 3, 1]
    partial = [{"n": 1, "seq": 3}, {"n": 2}]
    assert [r["n"] for r in O.arrival_order([("x", partial)])] == [1, 2]


# -- Section 4.2: server policies ----------------------------------------------------------------
def server_stream(combine: str) -> O.Stream:
    server = (O.server_policy({"streams": "HeartRate", "tuples": "*", "attributes": "{ts, Patient_id}",
                               "roles": "GP", "sign": "+"}, 0),)
    return O.Stream("HeartRate", HEART.attributes, "Patient_id", None, server, combine)


def test_server_policies_intersect_union_immutable() -> None:
    provider = [sp("[120, 130]", "{Patient_id, Beats_per_min}"), beat(1, 120), beat(2, 140)]
    inter = catalog(server_stream("intersect"), gp=["GP"])
    assert O.select_rows(inter, "gp", "HeartRate", provider) == [{"ts": None, "Patient_id": 120, "Beats_per_min": None}]
    union = catalog(server_stream("union"), gp=["GP"])
    assert O.select_rows(union, "gp", "HeartRate", provider) == [
        {"ts": ts(1), "Patient_id": 120, "Beats_per_min": 70}, {"ts": ts(2), "Patient_id": 140, "Beats_per_min": None}]
    immutable = [dict(provider[0], immutable=True)] + provider[1:]
    for cat in (inter, union):
        assert O.select_rows(cat, "gp", "HeartRate", immutable) == [
            {"ts": None, "Patient_id": 120, "Beats_per_min": 70}]


def test_no_server_policies_means_the_provider_policy_alone() -> None:
    cat = catalog(O.Stream("HeartRate", HEART.attributes, "Patient_id", None, (), "intersect"), gp=["GP"])
    assert len(O.select_rows(cat, "gp", "HeartRate", [sp(), beat(1)])) == 1


# -- Section 5.4: SCJoin ----------------------------------------------------------------------------
def test_scjoin_needs_the_join_attribute_in_both_tuples() -> None:
    cat = catalog(HEART, TEMP, doctor=["D"])
    beats = [sp("*", "*", "D"), beat(0, 120), beat(1, 121)]
    temps = [sp("*", "*", "D", streams="BodyTemperature", sn=1),
             sp("{121}", "Patient_id", "D", "-", streams="BodyTemperature", sn=2),
             {"ts": ts(2), "Patient_id": 120, "Temperature": 98.6, "sp_ts": ts(0), "sp_csn": 2},
             {"ts": ts(2), "Patient_id": 121, "Temperature": 99.1, "sp_ts": ts(0), "sp_csn": 2}]
    items = [("HeartRate.Patient_id", "pid"), ("BodyTemperature.Temperature", "t")]
    rows = O.join_rows(cat, "doctor", "HeartRate", beats, 5.0, "BodyTemperature", temps, 5.0,
                       ("Patient_id", "Patient_id"), items)
    assert rows == [{"pid": 120, "t": 98.6}]  # 121's Patient_id is masked in its temperature tuple


def test_scjoin_windows() -> None:
    cat = catalog(HEART, TEMP, doctor=["D"])
    beats = [sp("*", "*", "D"), beat(10, 120)]
    temps = [sp("*", "*", "D", streams="BodyTemperature")] + [
        {"ts": ts(s), "Patient_id": 120, "Temperature": float(s), "sp_ts": ts(0), "sp_csn": 1}
        for s in (6, 7, 10, 13, 14)]
    rows = O.join_rows(cat, "doctor", "HeartRate", beats, 3.0, "BodyTemperature", temps, 3.0,
                       ("Patient_id", "Patient_id"), [("BodyTemperature.Temperature", "t")])
    assert [r["t"] for r in rows] == [7.0, 10.0, 13.0]  # a.ts - 3 <= b.ts <= a.ts + 3
