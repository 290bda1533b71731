"""Punctuated streams end to end (replay): the paper's examples, Theorem 5.1's cases,
server policies, role policies on top, shield placement, ON RESULT and bad input."""

from __future__ import annotations

import json

import pytest

from conftest import ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.errors import AuthorizationError, CatalogError, UnsupportedError
from streamwarden.explain import explain_json
from streamwarden.plan.nodes import Shield, walk

pytestmark = pytest.mark.spark

# Fig. 2's roles (D and ND inherit nothing here; E is an extra role nobody grants), Fig. 6's streams.
FIG6 = """
streams:
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}, key: Patient_id}
  BodyTemperature: {schema: {ts: timestamp, Patient_id: int, Temperature: double}, key: Patient_id}
roles: {C: {}, D: {}, DM: {}, E: {}, GP: {}, ND: {}}
users:
  carol: {roles: [C]}
  gus: {roles: [GP]}
  dave: {roles: [D]}
  emil: {roles: [E]}
"""


def sp(streams: str, tuples: str, attributes: str, roles: str, second: int = 0, sn: int = 1, **extra: object) -> dict:
    return {"kind": "sp", "streams": streams, "tuples": tuples, "attributes": attributes, "roles": roles,
            "sign": "+", "ts": ts(second), "sn": sn, **extra}


def heart(second: int, pid: int, beats: int, policy: int = 0, csn: int = 1) -> dict:
    return {"ts": ts(second), "Patient_id": pid, "Beats_per_min": beats, "sp_ts": ts(policy), "sp_csn": csn}


def temperature(second: int, pid: int, value: float, policy: int = 0, csn: int = 1) -> dict:
    return {"ts": ts(second), "Patient_id": pid, "Temperature": value, "sp_ts": ts(policy), "sp_csn": csn}


def rows_of(catalog_text: str, user: str, query: str, inputs: dict, spark, **kwargs) -> list[tuple]:
    rows = api.replay(load_catalog_text(catalog_text), user, query, inputs, spark=spark, **kwargs)
    return sorted(tuple(v for k, v in r.items() if not k.startswith("_")) for r in rows)


# -- section 4.1 -------------------------------------------------------------------------------
def test_section_4_1_stream_tuple_and_attribute_level_restrictions(spark, tmp_path) -> None:
    policy = [
        sp("HeartRate", "*", "*", "C", sn=1),                                          # stream level
        sp("*", "[120, 133]", "*", "GP", sn=2),                                        # tuple level
        sp("{HeartRate, BodyTemperature}", "*", "{Temperature, Beats_per_min}", "{D, ND}", sn=3),  # attributes
    ]
    write_jsonl(tmp_path / "hr.jsonl", policy + [heart(1, 120, 70, csn=3), heart(2, 140, 80, csn=3)])
    write_jsonl(tmp_path / "bt.jsonl", [{**s, "streams": s["streams"]} for s in policy] + [
        temperature(1, 120, 98.6, csn=3), temperature(2, 140, 99.1, csn=3)])
    inputs = {"HeartRate": tmp_path / "hr.jsonl", "BodyTemperature": tmp_path / "bt.jsonl"}
    q_heart = "SELECT Patient_id, Beats_per_min FROM HeartRate"
    q_temp = "SELECT Patient_id, Temperature FROM BodyTemperature"
    assert rows_of(FIG6, "carol", q_heart, inputs, spark) == [(120, 70), (140, 80)]
    assert rows_of(FIG6, "carol", q_temp, inputs, spark) == []  # the cardiologist SP names HeartRate only
    assert rows_of(FIG6, "gus", q_heart, inputs, spark) == [(120, 70)]  # patients 120..133, any stream
    assert rows_of(FIG6, "gus", q_temp, inputs, spark) == [(120, 98.6)]
    # A doctor sees the readings but not who they belong to.
    assert rows_of(FIG6, "dave", q_heart, inputs, spark) == [(None, 70), (None, 80)]
    assert rows_of(FIG6, "dave", q_temp, inputs, spark) == [(None, 98.6), (None, 99.1)]
    assert rows_of(FIG6, "emil", q_heart, inputs, spark) == []


def test_masked_attributes_are_null_before_any_predicate(spark, tmp_path) -> None:
    write_jsonl(tmp_path / "hr.jsonl",
                [sp("HeartRate", "*", "Beats_per_min", "D"), heart(1, 120, 70), heart(2, 121, 90)])
    inputs = {"HeartRate": tmp_path / "hr.jsonl"}
    assert rows_of(FIG6, "dave", "SELECT Beats_per_min FROM HeartRate WHERE Patient_id = 120", inputs, spark) == []
    rows = rows_of(FIG6, "dave", "SELECT Beats_per_min FROM HeartRate WHERE Beats_per_min > 80", inputs, spark)
    assert rows == [(90,)]


# -- Theorem 5.1's proof: complete policy, incomplete policy, tuple before its policy, newer policy -------
@pytest.mark.parametrize(("records", "expected"), [
    pytest.param([sp("*", "*", "*", "C", sn=1), sp("*", "*", "*", "GP", sn=2), heart(1, 120, 70, csn=2)],
                 [(120, 70)], id="complete-policy"),
    pytest.param([sp("*", "*", "*", "C", sn=1), sp("*", "*", "*", "C", sn=3), heart(1, 120, 70, csn=3),
                  heart(2, 120, 71, csn=1)],
                 [], id="incomplete-policy-sp2-lost"),
    pytest.param([heart(1, 120, 70, policy=5), sp("*", "*", "*", "C", second=5), heart(6, 120, 71, policy=5)],
                 [(120, 71)], id="tuple-before-its-policy"),
    pytest.param([sp("*", "*", "*", "C"), heart(1, 120, 70), sp("*", "{999}", "*", "C", second=5),
                  heart(6, 120, 71, policy=0), heart(7, 120, 72, policy=5)],
                 [(120, 70)], id="unrelated-newer-policy"),
    pytest.param([sp("*", "*", "*", "C", second=5), sp("*", "*", "*", "C", second=1), heart(6, 120, 71, policy=5),
                  heart(7, 120, 72, policy=1)],
                 [(120, 71)], id="older-sp-discarded"),
])
def test_theorem_5_1_cases(spark, tmp_path, records, expected) -> None:
    write_jsonl(tmp_path / "hr.jsonl", records)
    query = "SELECT Patient_id, Beats_per_min FROM HeartRate"
    assert rows_of(FIG6, "carol", query, {"HeartRate": tmp_path / "hr.jsonl"}, spark) == expected


# -- server policies ---------------------------------------------------------------------------
def _server_catalog(combine: str) -> str:
    return f"""
streams:
  HeartRate:
    schema: {{ts: timestamp, Patient_id: int, Beats_per_min: int}}
    key: Patient_id
    server_policies: [{{streams: HeartRate, tuples: "*", attributes: "{{Patient_id}}", roles: "*", sign: "+"}}]
    combine: {combine}
roles: {{C: {{}}}}
users: {{carol: {{roles: [C]}}}}
"""


@pytest.mark.parametrize(("combine", "immutable", "expected"), [
    ("intersect", False, [(120, None)]),   # the provider grants both, the server only the id
    ("union", False, [(120, 70)]),
    ("intersect", True, [(120, 70)]),      # an immutable provider policy ignores the server
])
def test_server_policies_combine_with_provider_sps(spark, tmp_path, combine, immutable, expected) -> None:
    write_jsonl(tmp_path / "hr.jsonl", [sp("HeartRate", "*", "*", "C", immutable=immutable), heart(1, 120, 70)])
    query = "SELECT Patient_id, Beats_per_min FROM HeartRate"
    assert rows_of(_server_catalog(combine), "carol", query, {"HeartRate": tmp_path / "hr.jsonl"}, spark) == expected


# -- role policies on top of SPs -------------------------------------------------------------------
def test_role_policies_apply_on_top_of_sps(spark, tmp_path) -> None:
    catalog = FIG6 + """policies:
  - {id: p_low, subject: C, streams: [HeartRate], privilege: read, where: "HeartRate.Beats_per_min < 75"}
"""
    write_jsonl(tmp_path / "hr.jsonl", [sp("HeartRate", "*", "*", "{C, GP}"), heart(1, 120, 70), heart(2, 121, 80)])
    inputs = {"HeartRate": tmp_path / "hr.jsonl"}
    query = "SELECT Patient_id, Beats_per_min FROM HeartRate"
    assert rows_of(catalog, "carol", query, inputs, spark) == [(120, 70)]  # both must allow
    assert rows_of(catalog, "gus", query, inputs, spark) == []  # the SPs allow, no role policy does


# -- shield placement -------------------------------------------------------------------------------
MANY_ROLES = FIG6.replace("roles: {C: {}, D: {}, DM: {}, E: {}, GP: {}, ND: {}}", "roles:\n" + "\n".join(
    f"  X{i}: {{}}" for i in range(300)) + "\n  C: {inherits: [" + ", ".join(f"X{i}" for i in range(300)) + "]}\n"
    "  D: {}\n  DM: {}\n  E: {}\n  GP: {}\n  ND: {}")


def _placements(catalog_text: str, query: str) -> list[str]:
    rewriting = api.authorize(load_catalog_text(catalog_text), "carol", query)
    return [n.placement for g in rewriting.graphs for n in walk(g.root) if isinstance(n, Shield)]


def test_shield_goes_up_for_selective_filters_and_large_role_sets_with_the_same_rows(spark, tmp_path) -> None:
    equality = "SELECT Patient_id, Beats_per_min FROM HeartRate WHERE Patient_id = 120"
    broad = ("SELECT Patient_id, Beats_per_min FROM HeartRate "
             "WHERE Beats_per_min > 0 OR Patient_id > 200 OR Beats_per_min < 0")
    assert _placements(FIG6, equality) == ["up"]  # selectivity 0.1: filter first
    assert _placements(FIG6, broad) == ["down"]  # selectivity 0.70 and one role: shield first
    assert _placements(MANY_ROLES, broad) == ["up"]  # 301 roles make the shield dear
    write_jsonl(tmp_path / "hr.jsonl", [sp("HeartRate", "[120, 130]", "*", "C"), heart(1, 120, 70),
                                        heart(2, 140, 80), heart(3, 125, 0), heart(4, 210, 0)])
    inputs = {"HeartRate": tmp_path / "hr.jsonl"}
    assert rows_of(FIG6, "carol", broad, inputs, spark) == rows_of(MANY_ROLES, "carol", broad, inputs, spark) == [
        (120, 70)]
    shields = explain_json(api.authorize(load_catalog_text(MANY_ROLES), "carol", broad))["shields"]
    assert shields[0]["placement"] == "up" and "selectivity 0.70" in shields[0]["reason"]


def test_is_null_predicates_keep_the_shield_down() -> None:
    assert _placements(FIG6, "SELECT Patient_id FROM HeartRate WHERE Beats_per_min IS NULL") == ["down"]


# -- ON RESULT / SPGen -------------------------------------------------------------------------------
ON_RESULT = ("SELECT Patient_id, Beats_per_min, ts FROM HeartRate WHERE Beats_per_min > 80 ON RESULT ("
             "INSERT SP AS r INTO STREAM LET r.DDP = TUPLES:ALL r.SRP = frbac:Cardiologist, r.SIGN = POSITIVE, "
             "r.IMMUTABLE = TRUE)")


def test_on_result_publishes_only_data_granted_with_grant_option_behind_the_new_policy(spark, tmp_path) -> None:
    write_jsonl(tmp_path / "hr.jsonl", [
        sp("HeartRate", "[120, 133]", "*", "C", sn=1, grant=True), sp("HeartRate", "*", "*", "{C, GP}", sn=2),
        heart(5, 120, 90, csn=2), heart(6, 140, 95, csn=2), heart(7, 121, 60, csn=2)])
    catalog = load_catalog_text(FIG6)
    rows = api.replay(catalog, "carol", ON_RESULT, {"HeartRate": tmp_path / "hr.jsonl"}, spark=spark)
    assert rows[0] == {"kind": "sp", "streams": "*", "tuples": "*", "attributes": "*", "roles": "Cardiologist",
                       "sign": "+", "immutable": True, "grant": False, "ts": ts(5), "sn": 1}
    assert [(r["Patient_id"], r["sp_ts"], r["sp_csn"]) for r in rows[1:]] == [(120, ts(5), 1)]
    assert api.replay(catalog, "gus", ON_RESULT, {"HeartRate": tmp_path / "hr.jsonl"}, spark=spark) == []


def test_on_result_is_refused_where_nothing_can_be_delegated(spark, drill_catalog, tmp_path) -> None:
    with pytest.raises(AuthorizationError, match="stream Position carries no security punctuations"):
        api.authorize(drill_catalog, "paul", "SELECT SID FROM Position ON RESULT (INSERT SP INTO STREAM LET "
                                             "DDP = TUPLES:ALL, SRP = C)")
    write_jsonl(tmp_path / "HeartRate" / "a.jsonl", [sp("HeartRate", "*", "*", "C", grant=True)])
    with pytest.raises(UnsupportedError, match="ON RESULT is supported by replay"):
        api.run(load_catalog_text(FIG6), "carol", ON_RESULT, {"HeartRate": tmp_path / "HeartRate"},
                str(tmp_path / "sink"), checkpoint=tmp_path / "c", store_url=f"sqlite:///{tmp_path}/s.db", spark=spark)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("stream", "message"), [
    ('{schema: {ts: timestamp, a: int}, punctuated_by: a}', "punctuated_by needs a key"),
    ('{schema: {ts: timestamp, a: int}, key: a, punctuated_by: b}', "punctuated_by 'b' is not an attribute"),
    ('{schema: {ts: timestamp, a: int}, key: a, combine: both}', "combine must be intersect or union"),
    ('{schema: {ts: timestamp, a: int}, key: a, server_policies: [{roles: "{C,"}]}', "roles"),
    ('{schema: {ts: timestamp, a: int}, key: a, server_policies: [{tuples: "*"}]}', "needs roles"),
])
def test_bad_punctuation_options_name_their_line(stream, message) -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog_text(f"streams:\n  S: {stream}\nroles: {{C: {{}}}}\n", "bad.yaml")
    assert message in str(info.value) and "bad.yaml:2" in str(info.value)


def test_a_tuple_without_its_policy_reference_is_denied_not_an_error(spark, tmp_path) -> None:
    write_jsonl(tmp_path / "hr.jsonl", [sp("HeartRate", "*", "*", "C"),
                                        {"ts": ts(1), "Patient_id": 1, "Beats_per_min": 2}, heart(2, 120, 70)])
    rows = rows_of(FIG6, "carol", "SELECT Patient_id FROM HeartRate", {"HeartRate": tmp_path / "hr.jsonl"}, spark)
    assert rows == [(120,)]
    assert json.dumps(rows)  # plain values only
