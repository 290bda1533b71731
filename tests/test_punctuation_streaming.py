"""Punctuated streams in a continuous run: the shield's state survives micro-batches and restarts."""

from __future__ import annotations

import pytest

from conftest import ts, until_idle, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.engine.sinks import read_sink

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  HeartRate:
    schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}
    key: Patient_id
    punctuated_by: Patient_id
roles: {GP: {}, C: {}}
users: {gina: {roles: [GP]}}
""", "health.yaml")


def policy(patient: int, second: int, roles: str, sn: int = 1, **extra: object) -> dict:
    return {"kind": "sp", "streams": "HeartRate", "tuples": "*", "attributes": "*", "roles": roles, "sign": "+",
            "ts": ts(second), "sn": sn, "Patient_id": patient, **extra}


def reading(patient: int, second: int, beats: int, policy_second: int, csn: int = 1) -> dict:
    return {"ts": ts(second), "Patient_id": patient, "Beats_per_min": beats, "sp_ts": ts(policy_second),
            "sp_csn": csn}


def strip(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows)


@pytest.mark.parametrize("query", [
    "SELECT Patient_id, Beats_per_min FROM HeartRate",
    "SELECT Patient_id, COUNT(*) AS n FROM HeartRate [RANGE 1 min] GROUP BY Patient_id",
])
def test_run_equals_replay_with_policies_changing_across_files_and_restarts(spark, tmp_path, query) -> None:
    incoming = tmp_path / "HeartRate"
    # Patient 120 lets GPs read; patient 121 only cardiologists, then GPs too from second 40.
    write_jsonl(incoming / "part-0.jsonl", [
        policy(120, 0, "{GP}"), policy(121, 0, "{C}"),
        reading(120, 1, 70, 0), reading(121, 2, 80, 0), reading(120, 30, 72, 0),
    ])
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def run_until_idle() -> None:
        stream = api.run(CATALOG, "gina", query, {"HeartRate": incoming}, str(sink), checkpoint=checkpoint,
                         store_url=sqlite_url(tmp_path / "store.db"), spark=spark)
        until_idle(stream)

    run_until_idle()
    # The shield's state comes back from the checkpoint: 121's new policy arrives in this
    # file, 120's readings still refer to the policy sent in the first file.
    write_jsonl(incoming / "part-1.jsonl", [
        policy(121, 40, "{GP, C}"), reading(121, 41, 85, 40), reading(120, 42, 74, 0),
        reading(121, 43, 86, 0),  # refers to the replaced policy: denied, and 121's policy is dropped
        reading(121, 44, 87, 40),  # so this one is denied too
        reading(120, 200, 75, 0),  # moves the watermark past the first windows
    ])
    run_until_idle()
    streamed = read_sink(spark, sink)
    replayed = api.replay(CATALOG, "gina", query, {"HeartRate": incoming}, spark=spark)
    assert strip(streamed) == strip([r for r in replayed if "n" not in r or r["window_end"] <= ts(180)])
    if "COUNT" not in query:
        assert sorted((r["Patient_id"], r["Beats_per_min"]) for r in streamed) == [
            (120, 70), (120, 72), (120, 74), (120, 75), (121, 85)]


JOIN_CATALOG = load_catalog_text("""
streams:
  A: {schema: {ts: timestamp, k: int, dest: int}, key: k}
  B: {schema: {ts: timestamp, k: int, dest: int}, key: k}
roles: {R: {}}
users: {u: {roles: [R]}}
""", "join.yaml")


@pytest.mark.parametrize("strategy", ["probe-and-filter", "filter-and-probe"])
def test_scjoin_runs_continuously_with_a_shield_on_each_side(spark, tmp_path, strategy) -> None:
    def sp(stream: str, tuples: str, attributes: str = "*") -> dict:
        return {"kind": "sp", "streams": stream, "tuples": tuples, "attributes": attributes, "roles": "R",
                "sign": "+", "ts": ts(0), "sn": 1}

    def row(second: int, k: int, dest: int) -> dict:
        return {"ts": ts(second), "k": k, "dest": dest, "sp_ts": ts(0), "sp_csn": 1}

    write_jsonl(tmp_path / "A" / "a.jsonl", [sp("A", "[1, 2]"), row(1, 1, 10), row(2, 2, 11), row(3, 3, 10)])
    write_jsonl(tmp_path / "B" / "b.jsonl", [sp("B", "*", "{k}"), row(1, 5, 10), sp("B", "*"), row(2, 6, 11)])
    inputs = {"A": tmp_path / "A", "B": tmp_path / "B"}
    query = "SELECT A.k, B.k AS bk FROM A [RANGE 10 seconds], B [RANGE 10 seconds] WHERE A.dest = B.dest"
    stream = api.run(JOIN_CATALOG, "u", query, inputs, str(tmp_path / "sink"), checkpoint=tmp_path / "c",
                     store_url=sqlite_url(tmp_path / "s.db"), spark=spark, join_strategy=strategy)
    until_idle(stream)
    streamed = read_sink(spark, tmp_path / "sink")
    replayed = api.replay(JOIN_CATALOG, "u", query, inputs, spark=spark, join_strategy=strategy)
    # B's first SP hides dest (so B.k 5 pairs with nothing); the second, with the same ts and sn,
    # replaces it for the tuples after it; A's k 3 is outside its policy.
    assert strip(streamed) == strip(replayed)
    assert sorted((r["k"], r["bk"]) for r in streamed) == [(2, 6)]


TYPED_CATALOG = load_catalog_text("""
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, ward: string, seen: timestamp, ok: boolean, pulse: int}
    key: patient
    punctuated_by: patient
roles: {Doctor: {}}
users: {doc: {roles: [Doctor]}}
""", "typed.yaml")


def test_a_provider_with_only_sps_in_a_micro_batch_leaves_every_attribute_in_its_declared_type(spark, tmp_path) -> None:
    """A provider whose part of a micro-batch holds no tuple (here: patients 2-4, only their SPs)
    hands pandas columns that are NULL throughout, as float NaN; the shield's output must
    still be strings, timestamps and booleans, or Arrow refuses it and the query stops."""
    sp = {"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor", "sign": "+",
          "ts": ts(0), "sn": 1}
    rows = [{**sp, "patient": patient} for patient in (1, 2, 3, 4)]
    rows += [{"ts": ts(second), "patient": 1, "ward": "A", "seen": ts(second), "ok": True, "pulse": 50,
              "sp_ts": ts(0), "sp_csn": 1} for second in range(1, 9)]
    write_jsonl(tmp_path / "in" / "a.jsonl", rows)
    query = "SELECT patient, ward, seen, ok, pulse FROM Vitals"
    stream = api.run(TYPED_CATALOG, "doc", query, {"Vitals": tmp_path / "in"}, str(tmp_path / "sink"),
                     checkpoint=tmp_path / "c", store_url=sqlite_url(tmp_path / "s.db"), spark=spark)
    until_idle(stream)
    streamed = read_sink(spark, tmp_path / "sink")
    assert len(streamed) == 8 and {(r["ward"], r["ok"], r["pulse"]) for r in streamed} == {("A", True, 50)}
    assert strip(streamed) == strip(api.replay(TYPED_CATALOG, "doc", query, {"Vitals": tmp_path / "in"}, spark=spark))
