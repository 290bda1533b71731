"""Tests for the punctuated data generator (streamwarden.datagen.punctuated) and examples/health.yaml."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from streamwarden.catalog.loader import load_catalog
from streamwarden.datagen.__main__ import main
from streamwarden.datagen.punctuated import (
    FIRST_PATIENT,
    HEALTH_POLICIES,
    HEALTH_ROLES,
    HEALTH_SCHEMAS,
    benchmark_user_roles,
    health_records,
    join_pair,
    moving_objects,
    selective_destinations,
    write_health,
    write_jsonl,
)
from streamwarden.catalog.punctuations import sp_from_record
from streamwarden.engine.shield.files import punctuated_files
from streamwarden.language.expressions import parse_timestamp
from streamwarden.language.patterns import parse_pattern

from oracles.shield import Shield, SpPolicy, visible_attributes

HEALTH_CATALOG = ROOT / "examples" / "health.yaml"
SMALL = dict(patients=5, minutes=10, interval_s=10.0, changes=2, seed=11)
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$")


@pytest.fixture(scope="module")
def health() -> dict[str, list[dict]]:
    return health_records(**SMALL)


def is_sp(record: dict) -> bool:
    return record.get("kind") == "sp"


def sub_streams(records: list[dict], provider: str | None) -> dict[object, list[dict]]:
    """Records split by provider, each sub-stream in arrival order."""
    split: dict[object, list[dict]] = defaultdict(list)
    for record in records:
        split[record[provider] if provider else None].append(record)
    return split


def policies_and_tuples(records: list[dict]) -> list[tuple[dict, list[dict]]]:
    """One sub-stream as (policy: ts → its SPs, tuples it is followed by) sp-batches."""
    batches: list[tuple[list[dict], list[dict]]] = []
    for record in records:
        if is_sp(record):
            if not batches or batches[-1][1] or batches[-1][0][0]["ts"] != record["ts"]:
                batches.append(([], []))
            batches[-1][0].append(record)
        else:
            assert batches, f"tuple before any policy: {record}"
            batches[-1][1].append(record)
    return batches  # type: ignore[return-value]


def assert_governed(records: list[dict], provider: str | None) -> None:
    """Every tuple names (sp_ts, sp_csn) of the policy that precedes it in its sub-stream."""
    for stream in sub_streams(records, provider).values():
        previous_ts = None
        for sps, tuples in policies_and_tuples(stream):
            ts = sps[0]["ts"]
            assert previous_ts is None or parse_timestamp(ts) > parse_timestamp(previous_ts), "policy ts must grow"
            assert [s["sn"] for s in sps] == list(range(1, len(sps) + 1))
            for t in tuples:
                assert (t["sp_ts"], t["sp_csn"]) == (ts, len(sps))
                assert parse_timestamp(t["ts"]) >= parse_timestamp(ts)
            previous_ts = ts


# ------------------------------------------------------------------------ health


def test_same_seed_same_records_other_seed_other_records(health: dict[str, list[dict]]) -> None:
    assert health_records(**SMALL) == health
    assert health_records(**{**SMALL, "seed": 12}) != health
    assert moving_objects(tuples=500, sp_ratio=7, roles=3) == moving_objects(tuples=500, sp_ratio=7, roles=3)
    assert moving_objects(tuples=500, sp_ratio=7, roles=3, seed=8) != moving_objects(tuples=500, sp_ratio=7, roles=3)


def test_every_health_tuple_names_the_policy_before_it_in_its_patients_sub_stream(
        health: dict[str, list[dict]]) -> None:
    assert sorted(health) == sorted(HEALTH_SCHEMAS)
    for records in health.values():
        assert_governed(records, "Patient_id")


def test_each_patient_opens_with_a_policy_and_changes_it_mid_stream(health: dict[str, list[dict]]) -> None:
    for records in health.values():
        streams = sub_streams(records, "Patient_id")
        assert sorted(streams) == list(range(FIRST_PATIENT, FIRST_PATIENT + SMALL["patients"]))
        for stream in streams.values():
            assert is_sp(stream[0]) and stream[0]["ts"] == "2026-03-01T10:00:00Z"
            batches = policies_and_tuples(stream)
            assert len(batches) == SMALL["changes"] + 1
            assert len({t["sp_ts"] for _, tuples in batches for t in tuples}) >= 2  # later tuples use the new one
    # A patient's policy is the same in all of their streams.
    first = {stream: [r for r in records if is_sp(r) and r["Patient_id"] == 121] for stream, records in health.items()}
    assert first["HeartRate"] == first["BodyTemperature"] == first["BreathingRate"]


def test_records_are_interleaved_by_time_with_valid_timestamps(health: dict[str, list[dict]]) -> None:
    for records in health.values():
        stamps = [parse_timestamp(r["ts"]) for r in records]
        assert stamps == sorted(stamps)
        assert all(ISO_UTC.match(r["ts"]) and ".000000" not in r["ts"] for r in records)
        assert all(isinstance(r["Patient_id"], int) for r in records)


def test_sps_parse_with_the_punctuation_model(health: dict[str, list[dict]]) -> None:
    for stream, records in health.items():
        sps = [sp_from_record(r, f"{stream} line {i}", "Patient_id") for i, r in enumerate(records) if is_sp(r)]
        assert sps and all(s.provider in range(FIRST_PATIENT, FIRST_PATIENT + SMALL["patients"]) for s in sps)
    objects = moving_objects(tuples=300, sp_ratio=4, roles=5)
    assert len([sp_from_record(r, "objects") for r in objects if is_sp(r)]) == 75


def test_health_policies_cover_section_4_1_over_fig_2_roles() -> None:
    records = health_records(patients=12, minutes=5, changes=2)["BreathingRate"]
    sps = [r for r in records if is_sp(r)]
    used = {(r["streams"], r["tuples"] if r["tuples"] != str(r["Patient_id"]) else None, r["attributes"], r["roles"])
            for r in sps}
    every = {(s.streams, s.tuples, s.attributes, s.roles) for p in HEALTH_POLICIES for s in p.sps}
    assert used == every  # 12 patients x 3 policies deal every template
    assert any(r["streams"] != "*" and r["attributes"] == "*" for r in sps)  # stream level
    assert any(r["tuples"] == "[120, 133]" for r in sps)  # tuple level
    assert any(r["attributes"] != "*" for r in sps)  # attribute level
    assert any(r["sign"] == "-" for r in sps) and any(r["immutable"] for r in sps) and any(r["grant"] for r in sps)
    named = {role for r in sps for role in re.findall(r"[A-Z]+", r["roles"])}
    assert named <= set(HEALTH_ROLES)
    catalog = load_catalog(HEALTH_CATALOG)
    assert {name: role.inherits for name, role in catalog.roles.items()} == HEALTH_ROLES
    assert {role for user in catalog.users.values() for role in user.roles} == set(HEALTH_ROLES)


def test_vital_signs_are_realistic(health: dict[str, list[dict]]) -> None:
    def values(stream: str, attribute: str) -> np.ndarray:
        return np.array([r[attribute] for r in health[stream] if not is_sp(r)])

    beats, degrees = values("HeartRate", "Beats_per_min"), values("BodyTemperature", "Temperature")
    frequency, depth = values("BreathingRate", "Frequency"), values("BreathingRate", "Depth")
    assert 55 <= beats.min() and beats.max() <= 140 and 60 < beats.mean() < 100
    assert 96 <= degrees.min() and degrees.max() <= 104 and 97 < np.median(degrees) < 100
    assert 8 <= frequency.min() and frequency.max() <= 30 and 20 <= depth.min() and depth.max() <= 60
    assert all(isinstance(r["Temperature"], float) for r in health["BodyTemperature"] if not is_sp(r))
    readings_per_patient = SMALL["minutes"] * 60 / SMALL["interval_s"]
    assert len(beats) == SMALL["patients"] * readings_per_patient


def test_write_health_folders_load(tmp_path: Path, health: dict[str, list[dict]]) -> None:
    stale = tmp_path / "HeartRate" / "part-00001.jsonl"
    write_jsonl([{"ts": "2026-03-01T09:00:00Z"}], stale)
    folders = write_health(tmp_path, **SMALL)
    catalog = load_catalog(HEALTH_CATALOG)
    assert sorted(folders) == sorted(catalog.streams) and not stale.exists()
    for stream, folder in folders.items():
        [part] = punctuated_files(folder)
        assert part == folder / "part-00000.jsonl"
        records = [json.loads(line) for line in part.read_text().splitlines()]
        assert records == health[stream]
        types = dict(catalog.streams[stream].schema)
        python = {"int": int, "double": float, "timestamp": str}
        for record in records:
            if not is_sp(record):
                assert set(record) == set(types) | {"sp_ts", "sp_csn"}
                assert all(isinstance(record[a], python[t]) for a, t in types.items())


def test_bad_health_arguments_raise() -> None:
    for bad in (dict(patients=0), dict(minutes=0), dict(interval_s=-1), dict(changes=-1),
                dict(minutes=0.05, changes=3), dict(start="noon")):
        with pytest.raises(ValueError):
            health_records(**bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------- moving objects


@pytest.mark.parametrize("sp_ratio", [1, 3, 10])
def test_sp_ratio_tuples_follow_each_single_sp_policy(sp_ratio: int) -> None:
    records = moving_objects(tuples=1_001, sp_ratio=sp_ratio, roles=4, objects=50)
    assert_governed(records, None)
    batches = policies_and_tuples(records)
    assert [len(tuples) for _, tuples in batches[:-1]] == [sp_ratio] * (len(batches) - 1)
    assert 1 <= len(batches[-1][1]) <= sp_ratio and sum(len(t) for _, t in batches) == 1_001
    for sps, tuples in batches:
        [sp] = sps
        assert (sp["streams"], sp["attributes"], sp["sign"], sp["ts"]) == ("Objects", "*", "+", tuples[0]["ts"])
        assert len(re.findall(r"R\d+", sp["roles"])) == 4
        pattern = parse_pattern(sp["tuples"])
        assert all(pattern.matches(t["oid"]) for t in tuples)
        if sp_ratio == 1:
            assert sp["tuples"] == str(tuples[0]["oid"])
    stamps = [r["ts"] for r in records if not is_sp(r)]
    assert stamps[:2] == ["2026-03-01T10:00:00Z", "2026-03-01T10:00:00.001000Z"]  # µs only when non-zero
    assert stamps[1000] == "2026-03-01T10:00:01Z" and all(ISO_UTC.match(s) for s in stamps)


def test_benchmark_user_reads_the_accessible_fraction() -> None:
    roles = benchmark_user_roles(5)
    for accessible in (0.0, 0.25, 0.5, 1.0):
        records = moving_objects(tuples=2_000, sp_ratio=10, roles=5, accessible=accessible)
        readable = []
        for sps, tuples in policies_and_tuples(records):
            policy = SpPolicy.of([sp_from_record(s, "objects") for s in sps])
            readable += [policy.accessible("Objects", t["oid"], "x", roles) for t in tuples]
        assert np.mean(readable) == accessible


def test_moving_objects_values_are_plausible() -> None:
    records = [r for r in moving_objects(tuples=5_000, sp_ratio=5, roles=2, destinations=20) if not is_sp(r)]
    speed = np.array([r["speed"] for r in records])
    assert 0 < speed.min() and speed.max() < 40 and {r["dest"] for r in records} <= set(range(20))
    assert all(0 <= r[c] <= 10_000 for r in records for c in ("x", "y"))
    assert all(isinstance(r[c], float) for r in records[:50] for c in ("speed", "x", "y"))


def test_join_pair_similarity_and_selectivity() -> None:
    a, b = join_pair(tuples=4_000, sp_ratio=4, roles=3, similarity=0.25, selectivity=0.1, seed=3)
    assert_governed(a, None)
    assert_governed(b, None)
    policies_a, policies_b = [r for r in a if is_sp(r)], [r for r in b if is_sp(r)]
    assert [p["ts"] for p in policies_a] == [p["ts"] for p in policies_b]
    same = [(x["tuples"], x["roles"]) == (y["tuples"], y["roles"]) for x, y in zip(policies_a, policies_b)]
    assert sum(same) == round(0.25 * len(same))
    for x, y, identical in zip(policies_a, policies_b, same):
        if not identical:  # the others share no role with the concurrent policy
            assert not set(re.findall(r"R\d+", x["roles"])) & set(re.findall(r"R\d+", y["roles"]))
    dest_a = np.array([r["dest"] for r in a if not is_sp(r)]).reshape(-1, 100)
    dest_b = np.array([r["dest"] for r in b if not is_sp(r)]).reshape(-1, 100)
    pairs = (dest_a[:, :, None] == dest_b[:, None, :]).mean()  # pairs within each window of 100 tuples
    assert abs(pairs - 0.1) < 0.02
    assert [r["x"] for r in a[:20] if not is_sp(r)] != [r["x"] for r in b[:20] if not is_sp(r)]


@pytest.mark.parametrize("selectivity", [1.0, 0.5, 0.3, 0.1, 0.01])
def test_selective_destinations_match_with_the_asked_probability(selectivity: float) -> None:
    weights = selective_destinations(selectivity)
    assert weights.min() >= 0 and weights.sum() == pytest.approx(1) and (weights**2).sum() == pytest.approx(selectivity)


def test_bad_object_arguments_raise() -> None:
    for bad in (dict(tuples=0), dict(sp_ratio=0), dict(roles=0), dict(accessible=1.5), dict(destinations=0),
                dict(policy_similarity=2.0)):
        with pytest.raises(ValueError):
            moving_objects(**{**dict(tuples=10, sp_ratio=1, roles=1), **bad})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        join_pair(tuples=10, sp_ratio=1, roles=1, similarity=0.5, selectivity=0)


# --------------------------------------------------------------------------- CLI


def test_cli_health_and_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--out", str(tmp_path / "h"), "--patients", "2", "--minutes", "1", "--changes", "1"]) == 0
    assert main(["objects", "--out", str(tmp_path / "o.jsonl"), "--tuples", "100", "--sp-ratio", "10",
                 "--roles", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "HeartRate=" in out[0] and "2 patients, 2 policies each" in out[0]
    assert out[1].startswith("Objects=110 records (100 tuples, 10 policies)")
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == sorted(HEALTH_SCHEMAS)
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 110


@pytest.mark.parametrize("argv", [
    ["health", "--patients", "0"], ["health", "--minutes", "0.01", "--changes", "5"], ["health", "--interval", "x"],
    ["objects", "--tuples", "10", "--sp-ratio", "0", "--roles", "1"], ["objects", "--tuples", "10"],
])
def test_cli_rejects_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([argv[0], "--out", str(tmp_path / "out"), *argv[1:]])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and not (tmp_path / "out").exists()


# ------------------------------------------------------------------------ engine


def expected_rows(catalog, user: str, stream: str, records: list[dict], columns: list[str]) -> list[dict]:
    """What the punctuation model says ``user`` sees: one shield per patient, server policies combined."""
    definition = catalog.streams[stream]
    roles = catalog.effective_roles(user)
    server = SpPolicy.of(definition.server_policies) if definition.server_policies else None
    shields: dict[object, Shield] = defaultdict(Shield)
    rows = []
    for record in records:
        shield = shields[record["Patient_id"]]
        if is_sp(record):
            shield.on_sp(sp_from_record(record, stream, "Patient_id"))
            continue
        governing = shield.on_tuple(parse_timestamp(record["sp_ts"]), record["sp_csn"])
        visible = visible_attributes(governing, stream, record["Patient_id"], list(definition.attributes), roles,
                                     server, definition.combine)
        if visible is not None:
            rows.append({c: record[c] if c in visible else None for c in columns})
    return rows


@pytest.mark.spark
def test_engine_delivers_what_the_patients_policies_allow(spark, tmp_path: Path) -> None:
    from streamwarden.api import replay

    settings = dict(patients=3, minutes=2, changes=2, seed=7)
    folder = write_health(tmp_path, **settings)["HeartRate"]
    catalog = load_catalog(HEALTH_CATALOG)
    columns = ["Patient_id", "Beats_per_min"]
    rows = replay(catalog, "carol", "SELECT Patient_id, Beats_per_min FROM HeartRate", {"HeartRate": folder},
                  spark=spark)
    records = health_records(**settings)["HeartRate"]
    tuples = [r for r in records if not is_sp(r)]
    delivered = sorted(json.dumps({c: r[c] for c in columns}) for r in rows)
    assert 0 < len(delivered) < len(tuples)  # some readings withheld from the cardiologist
    assert any(r["Patient_id"] is None for r in rows) and any(r["Patient_id"] is not None for r in rows)
    assert delivered == sorted(json.dumps(r) for r in expected_rows(catalog, "carol", "HeartRate", records, columns))
