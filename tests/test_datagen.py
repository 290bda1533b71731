"""Tests for the synthetic drill generator (streamwarden.datagen)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamwarden.datagen import (
    EXTENT,
    HEALTH_SCHEMA,
    POSITION_SCHEMA,
    TARGET,
    build_road_network,
    drill_frames,
    generate_drill,
    platoon_names,
    simulate_tracks,
)
from streamwarden.datagen.__main__ import main

SMALL = dict(soldiers=12, platoons=3, minutes=2.0, interval_seconds=5.0)  # 24 instants
ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return drill_frames(**SMALL, seed=11)


def _read_jsonl(paths: tuple[Path, ...]) -> list[dict]:
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def _as_frame(records: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(records)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True).dt.as_unit("us")
    return frame


# ------------------------------------------------------------------ determinism


def test_same_seed_same_data_and_other_seed_other_data(frames: dict[str, pd.DataFrame]) -> None:
    again = drill_frames(**SMALL, seed=11)
    other = drill_frames(**SMALL, seed=12)
    for name, frame in frames.items():
        pd.testing.assert_frame_equal(frame, again[name])
    assert not np.array_equal(frames["Position"]["Pos"], other["Position"]["Pos"])
    assert not np.array_equal(frames["Health"]["Heart"], other["Health"]["Heart"])


def test_health_choice_does_not_change_other_streams(frames: dict[str, pd.DataFrame]) -> None:
    uni = drill_frames(**SMALL, seed=11, health="uni")
    norm = drill_frames(**SMALL, seed=11, health="norm")
    assert list(uni) == ["Position", "Health"]
    assert list(norm) == ["Position", "normHealth"]
    pd.testing.assert_frame_equal(uni["Position"], frames["Position"])
    pd.testing.assert_frame_equal(uni["Health"], frames["Health"])
    pd.testing.assert_frame_equal(norm["normHealth"], frames["normHealth"])


def test_shorter_run_is_prefix_and_soldiers_keep_their_data() -> None:
    long = drill_frames(soldiers=5, minutes=2.0, interval_seconds=5.0)
    short = drill_frames(soldiers=5, minutes=1.0, interval_seconds=5.0)
    fewer = drill_frames(soldiers=3, minutes=2.0, interval_seconds=5.0)
    for name in long:
        pd.testing.assert_frame_equal(short[name], long[name].iloc[: len(short[name])])
        keep = long[name][long[name]["SID"] <= 3].reset_index(drop=True)
        pd.testing.assert_frame_equal(fewer[name], keep)


# ---------------------------------------------------------- schema, time, platoons


def test_frame_columns_and_types(frames: dict[str, pd.DataFrame]) -> None:
    position, health = frames["Position"], frames["normHealth"]
    assert list(position.columns) == ["ts", "SID", "Pos", "Platoon"]
    assert list(health.columns) == ["ts", "SID", "Platoon", "Heart", "BPressure"]
    assert str(position["ts"].dtype) == "datetime64[us, UTC]"
    assert position["SID"].dtype == np.int32 and position["Pos"].dtype == np.float64
    assert health["Heart"].dtype == np.int32 and health["BPressure"].dtype == np.int32
    assert pd.api.types.is_string_dtype(position["Platoon"])


def test_one_report_per_soldier_per_instant_in_time_order(frames: dict[str, pd.DataFrame]) -> None:
    start = pd.Timestamp("2026-03-01T10:00:00Z")
    expected_ts = start + pd.to_timedelta(np.arange(24) * 5, unit="s")
    for frame in frames.values():
        assert len(frame) == 12 * 24
        assert frame["ts"].is_monotonic_increasing
        per_instant = frame.groupby("ts")["SID"].apply(list)
        assert list(per_instant.index) == list(expected_ts)
        assert all(sids == list(range(1, 13)) for sids in per_instant)


def test_platoons_round_robin(frames: dict[str, pd.DataFrame]) -> None:
    for frame in frames.values():
        platoon_of = frame.groupby("SID")["Platoon"].unique()
        assert all(len(names) == 1 for names in platoon_of)  # never changes platoon
        assert [names[0] for names in platoon_of] == ["X", "Y", "Z"] * 4


def test_platoon_names() -> None:
    names = platoon_names(30)
    assert names[:5] == ["X", "Y", "Z", "W", "A"]
    assert sorted(names[:26]) == [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    assert names[26:] == ["P27", "P28", "P29", "P30"]


def test_sub_second_interval_keeps_exact_microseconds() -> None:
    position = drill_frames(soldiers=2, minutes=0.05, interval_seconds=0.25)["Position"]  # 3 s
    steps = position["ts"].drop_duplicates().diff().dropna()
    assert len(position) == 2 * 12 and (steps == pd.Timedelta(milliseconds=250)).all()


# ------------------------------------------------------------------ value ranges


def test_positions_stay_in_area_and_move_at_walking_speed() -> None:
    position = drill_frames(soldiers=40, minutes=10.0, interval_seconds=5.0, health="uni")["Position"]
    assert position["Pos"].between(0.0, EXTENT).all()
    assert (position["Pos"] == position["Pos"].round(2)).all()
    tracks = position.pivot(index="ts", columns="SID", values="Pos")
    step = tracks.diff().abs().max().max()
    assert 0 < step <= 2.0 * 1.5 * 5.0 + 0.01  # max base speed x max noise x interval
    # A policy "Pos within delta of the target" must select a meaningful, growing share.
    share = [(position["Pos"] - TARGET).abs().le(delta).mean() for delta in (50, 150, 300)]
    assert 0.02 < share[0] < share[1] < share[2] < 0.98


def test_uniform_and_normal_health_differ_as_specified() -> None:
    frames = drill_frames(soldiers=50, minutes=10.0, interval_seconds=2.0, seed=3)  # 15,000 readings
    uni, norm = frames["Health"], frames["normHealth"]
    assert uni["Heart"].between(50, 180).all() and uni["BPressure"].between(80, 200).all()
    assert uni["Heart"].min() == 50 and uni["Heart"].max() == 180  # inclusive bounds are reachable
    assert uni["Heart"].std() == pytest.approx(131 / np.sqrt(12), rel=0.05)
    assert uni["BPressure"].std() == pytest.approx(121 / np.sqrt(12), rel=0.05)
    assert norm["Heart"].mean() == pytest.approx(80, abs=1)
    assert norm["Heart"].std() == pytest.approx(15, rel=0.05)
    assert norm["BPressure"].mean() == pytest.approx(120, abs=1)
    assert norm["BPressure"].std() == pytest.approx(15, rel=0.05)
    # The selectivity of e.g. "BPressure > 160" differs sharply between the two.
    assert (uni["BPressure"] > 160).mean() > 0.25 > 0.01 > (norm["BPressure"] > 160).mean()


# ------------------------------------------------------------------------- files


def test_jsonl_files_match_frames(tmp_path: Path, frames: dict[str, pd.DataFrame]) -> None:
    summary = generate_drill(tmp_path, **SMALL, seed=11)
    assert list(summary.paths) == ["Position", "Health", "normHealth"]
    for name, frame in frames.items():
        assert summary.paths[name] == (tmp_path / name / "part-00000.jsonl",)
        records = _read_jsonl(summary.paths[name])
        assert list(records[0]) == list(frame.columns)  # key order follows the schema
        assert all(ISO_SECONDS.match(record["ts"]) for record in records)
        pd.testing.assert_frame_equal(_as_frame(records), frame, check_dtype=False)
        assert summary.rows[name] == len(frame)
    assert all(isinstance(r["Pos"], float) for r in _read_jsonl(summary.paths["Position"]))


def test_parquet_files_have_exact_schema_and_data(tmp_path: Path, frames: dict[str, pd.DataFrame]) -> None:
    summary = generate_drill(tmp_path, **SMALL, seed=11, fmt="parquet")
    position = pq.read_table(summary.paths["Position"][0])
    assert position.schema.equals(POSITION_SCHEMA)
    assert position.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert pq.read_table(summary.paths["Health"][0]).schema.equals(HEALTH_SCHEMA)
    for name, frame in frames.items():
        pd.testing.assert_frame_equal(pq.read_table(summary.paths[name][0]).to_pandas(), frame)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_files_per_stream_split_time_without_loss_or_overlap(tmp_path: Path, fmt: str) -> None:
    whole = drill_frames(soldiers=7, minutes=1.0, interval_seconds=5.0)  # 12 instants
    summary = generate_drill(tmp_path, soldiers=7, minutes=1.0, fmt=fmt, files_per_stream=5)
    for name, frame in whole.items():
        paths = summary.paths[name]
        assert [p.name for p in paths] == [f"part-{i:05d}.{fmt}" for i in range(5)]
        if fmt == "parquet":
            parts = [pq.read_table(p).to_pandas() for p in paths]
        else:
            parts = [_as_frame(_read_jsonl((p,))) for p in paths]
        assert all(len(part) > 0 and len(part) % 7 == 0 for part in parts)  # whole instants only
        for earlier, later in zip(parts, parts[1:]):
            assert earlier["ts"].max() < later["ts"].min()
        joined = pd.concat(parts, ignore_index=True)
        pd.testing.assert_frame_equal(joined, frame, check_dtype=fmt == "parquet")


def test_rerun_replaces_old_parts(tmp_path: Path) -> None:
    generate_drill(tmp_path, soldiers=2, minutes=1.0, files_per_stream=4)
    generate_drill(tmp_path, soldiers=2, minutes=1.0)
    assert sorted(os.listdir(tmp_path / "Position")) == ["part-00000.jsonl"]


def test_actions_file_and_summary(tmp_path: Path) -> None:
    summary = generate_drill(tmp_path, soldiers=3, minutes=10.0, start="2026-05-01T08:00:00+02:00")
    actions = json.loads((tmp_path / "actions.json").read_text())
    assert summary.actions_path == tmp_path / "actions.json"
    assert actions == {"a": {"name": "a", "start": "2026-05-01T06:02:30Z", "end": None, "target": 500.0}}
    assert summary.first_ts == pd.Timestamp("2026-05-01T06:00:00Z").to_pydatetime()
    assert summary.last_ts == pd.Timestamp("2026-05-01T06:09:55Z").to_pydatetime()
    assert summary.seed == 7 and summary.rows["Position"] == 3 * 120
    assert "Position=360" in summary.describe()


@pytest.mark.parametrize(
    "bad",
    [
        {"soldiers": 0},
        {"platoons": 0},
        {"minutes": 0},
        {"minutes": float("inf")},
        {"interval_seconds": -1.0},
        {"interval_seconds": 700.0},
        {"health": "mixed"},
        {"fmt": "csv"},
        {"seed": -1},
        {"start": "noon"},
        {"files_per_stream": 0},
        {"files_per_stream": 121},  # more files than instants
    ],
)
def test_bad_arguments_raise(tmp_path: Path, bad: dict) -> None:
    with pytest.raises(ValueError):
        generate_drill(tmp_path, **{"soldiers": 2, **bad})


# ----------------------------------------------------------------------- roadnet


def test_road_network_routes_follow_edges() -> None:
    net = build_road_network(seed=5)
    assert np.isfinite(net.effort).all()  # connected
    adjacent = {tuple(sorted(edge)) for edge in net.edges.tolist()}
    route = net.route(0, net.n_nodes - 1)
    assert route[0] == 0 and route[-1] == net.n_nodes - 1
    assert all(tuple(sorted(pair)) in adjacent for pair in zip(route[:-1].tolist(), route[1:].tolist()))
    tracks = simulate_tracks(net, objects=4, steps=50, interval_seconds=10.0, seed=5)
    assert tracks.x.shape == tracks.y.shape == (50, 4)
    assert ((tracks.y >= 0) & (tracks.y <= net.extent)).all()


# --------------------------------------------------------------------------- CLI


def test_cli_writes_files_and_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["drill", "--out", str(tmp_path), "--soldiers", "6", "--minutes", "1", "--interval", "10"]
    assert main([*argv, "--health", "norm", "--format", "parquet", "--files", "2", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "Position=36" in out and "normHealth=36" in out
    assert sorted(os.listdir(tmp_path)) == ["Position", "actions.json", "normHealth"]
    assert sorted(os.listdir(tmp_path / "normHealth")) == ["part-00000.parquet", "part-00001.parquet"]


@pytest.mark.parametrize(
    "extra",
    [["--soldiers", "0"], ["--soldiers", "ten"], ["--interval", "0"], ["--health", "x"],
     ["--format", "csv"], ["--files", "99"], ["--start", "noon"]],
)
def test_cli_rejects_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["drill", "--out", str(tmp_path), "--minutes", "1", *extra])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err
    assert not (tmp_path / "Position").exists()


def test_module_entry_point(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    command = [sys.executable, "-m", "streamwarden.datagen", "drill", "--out", str(tmp_path)]
    command += ["--minutes", "0.5"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "Position" / "part-00000.jsonl").exists()
    bad = subprocess.run([*command[:-1], "0"], env=env, capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
