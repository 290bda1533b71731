"""Every row says what authorized it (issue 26), whatever the mechanism.

A row's ``_policies`` names the role policies whose views held (their ids), the provider's
policy a Security Shield let its tuple through by (``SP HeartRate of <the policy's ts>``; an
aggregate's row, over many tuples and so many policies, names the stream) and the level
rule (``level <the row's level> read at <the level the query runs at>``). A graph's
``policies`` (explain, the console's preview, the audit trail) name the same mechanisms, by
stream and level.
"""

from __future__ import annotations

import pytest

from conftest import ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text

pytestmark = pytest.mark.spark

HOSPITAL = """
lattice: {classes: {COI1: ["1", "2"]}}
streams:
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}, key: Patient_id, level: "[⊥]"}
  Notes: {schema: {ts: timestamp, ward: string, note: string}, level: "[1]"}
  Rooms: {schema: {ts: timestamp, ward: string, beds: int}, level: "[⊥]"}
roles: {C: {}, N: {}}
users:
  carol: {roles: [C], clearance: "[T]"}
  nina: {roles: [N], clearance: "[1]"}
policies:
  - {id: rooms_read, subject: N, streams: [Rooms], privilege: read}
  - {id: rooms_c, subject: C, streams: [Rooms], privilege: read, where: "Rooms.beds > 1"}
"""


def sp(second: int, roles: str) -> dict:
    return {"kind": "sp", "streams": "HeartRate", "tuples": "*", "attributes": "*", "roles": roles, "sign": "+",
            "ts": ts(second), "sn": 1}


def heart(second: int, pid: int, beats: int, policy: int) -> dict:
    return {"ts": ts(second), "Patient_id": pid, "Beats_per_min": beats, "sp_ts": ts(policy), "sp_csn": 1}


@pytest.fixture
def inputs(tmp_path) -> dict[str, str]:
    # the provider's policy changes at second 5: each tuple names the policy that let it through
    write_jsonl(tmp_path / "hr.jsonl", [sp(0, "C"), heart(1, 7, 70, 0), sp(5, "{C, N}"), heart(6, 7, 90, 5)])
    write_jsonl(tmp_path / "notes.jsonl", [{"ts": ts(1), "ward": "w1", "note": "a"}])
    write_jsonl(tmp_path / "rooms.jsonl", [{"ts": ts(1), "ward": "w1", "beds": 3}])
    return {"HeartRate": str(tmp_path / "hr.jsonl"), "Notes": str(tmp_path / "notes.jsonl"),
            "Rooms": str(tmp_path / "rooms.jsonl")}


def rows(spark, user: str, query: str, inputs: dict[str, str], level: str | None = None) -> list[dict]:
    return api.replay(load_catalog_text(HOSPITAL), user, query, inputs, spark=spark, level=level)


def test_a_row_a_security_punctuation_let_through_names_that_policy(spark, inputs) -> None:
    got = sorted((r["Beats_per_min"], r["_policies"]) for r in rows(spark, "carol", "SELECT Beats_per_min FROM "
                                                                    "HeartRate", inputs, level="[T]"))
    assert got == [(70, ["SP HeartRate of 2026-03-01T10:00:00Z", "level [⊥] read at [T]"]),
                   (90, ["SP HeartRate of 2026-03-01T10:00:05Z", "level [⊥] read at [T]"])]
    nina = rows(spark, "nina", "SELECT Beats_per_min FROM HeartRate", inputs)  # only the second policy opens it
    assert [(r["Beats_per_min"], r["_policies"]) for r in nina] == [
        (90, ["SP HeartRate of 2026-03-01T10:00:05Z", "level [⊥] read at [1]"])]


def test_an_aggregate_over_punctuated_tuples_names_the_stream(spark, inputs) -> None:
    got = rows(spark, "carol", "SELECT COUNT(*) AS n FROM HeartRate [RANGE 1 min]", inputs, level="[T]")
    assert [(r["n"], r["_policies"]) for r in got] == [
        (2, ["SP HeartRate: each tuple under its provider's policy", "level [⊥] read at [T]"])]


def test_a_levelled_row_names_its_level_and_the_level_it_was_read_at(spark, inputs) -> None:
    for user, level in (("carol", "[T]"), ("nina", "[1]")):
        got = rows(spark, user, "SELECT note FROM Notes", inputs, level=level)
        assert [r["_policies"] for r in got] == [[f"level [1] read at {level}"]], user


def test_role_policies_are_named_by_their_ids_beside_the_other_mechanisms(spark, inputs) -> None:
    got = rows(spark, "carol", "SELECT beds FROM Rooms", inputs, level="[T]")
    assert [r["_policies"] for r in got] == [["rooms_c", "level [⊥] read at [T]"]]


def test_a_graph_names_the_same_mechanisms_for_explain_and_the_audit_trail() -> None:
    catalog = load_catalog_text(HOSPITAL)
    assert api.authorize(catalog, "nina", "SELECT Beats_per_min FROM HeartRate").graphs[0].policies == (
        "SP HeartRate", "level read at [1]")
    explained = api.explain_json(api.authorize(catalog, "carol", "SELECT beds FROM Rooms"), catalog)
    assert explained["graphs"][0]["policies"] == ["rooms_c", "level read at [T]"]
