"""Synthetic military drill streams (Carminati et al. 2010, section 6.2).

The paper evaluates query rewriting on a simulated drill: a ``Position`` stream
from Brinkhoff's network-based moving-object generator, and two health streams,
``uniHealth`` (uniformly distributed readings) and ``normHealth`` (normally
distributed readings). This module generates the same kind of data:

* ``Position(ts, SID, Pos, Platoon)``: soldiers moving on a seeded road network
  (:mod:`streamwarden.datagen.roadnet`); ``Pos`` is the x-coordinate in metres,
  in ``[0, EXTENT]``, rounded to centimetres.
* ``Health(ts, SID, Platoon, Heart, BPressure)`` (uniform) and/or
  ``normHealth`` (same schema, normal).
* ``actions.json``: action ``a`` with its start, end and target position.

Every soldier reports once per interval in every stream, at the same instants
``start, start + interval, ...`` (the run covers ``[start, start + minutes)``).
Records are ordered by ``ts``, then ``SID``. SIDs are ``1..soldiers`` and
soldier ``SID`` belongs to platoon ``platoon_names(platoons)[(SID - 1) % platoons]``.

Random streams are derived per purpose and per soldier from the seed, so the
same seed gives the same data; the ``Position`` stream does not depend on the
``health`` choice; and soldier i's data does not depend on how many soldiers are
generated, and a shorter run is a prefix of a longer one (same interval).

Example:
    >>> frames = drill_frames(soldiers=8, platoons=2, minutes=1.0, interval_seconds=10.0)
    >>> sorted(frames)
    ['Health', 'Position', 'normHealth']
    >>> len(frames["Position"]), sorted(frames["Position"]["Platoon"].unique())
    (48, ['X', 'Y'])
"""

from __future__ import annotations

import json
import math
import os
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .roadnet import build_road_network, simulate_tracks

__all__ = [
    "ACTION_NAME",
    "DEFAULT_START",
    "EXTENT",
    "HEALTH_SCHEMA",
    "POSITION_SCHEMA",
    "TARGET",
    "DrillSummary",
    "drill_frames",
    "generate_drill",
    "platoon_names",
]

Health = Literal["uni", "norm", "both"]
Format = Literal["jsonl", "parquet"]

DEFAULT_START = "2026-03-01T10:00:00Z"
#: Side of the drill area in metres; ``Pos`` lies in ``[0, EXTENT]``.
EXTENT = 1000.0
#: Target position of action ``a`` (centre of the area).
TARGET = 500.0
ACTION_NAME = "a"

#: uniHealth: inclusive integer ranges.
UNI_HEART = (50, 180)
UNI_BPRESSURE = (80, 200)
#: normHealth: (mean, std) and the plausible range readings are clipped to.
NORM_HEART = (80.0, 15.0)
NORM_BPRESSURE = (120.0, 15.0)
HEART_CLIP = (30, 220)
BPRESSURE_CLIP = (60, 250)

_TS = pa.timestamp("us", tz="UTC")
# int32 so Parquet columns match Spark's INT, which the stream schemas use.
POSITION_SCHEMA = pa.schema(
    [("ts", _TS), ("SID", pa.int32()), ("Pos", pa.float64()), ("Platoon", pa.string())]
)
HEALTH_SCHEMA = pa.schema(
    [
        ("ts", _TS),
        ("SID", pa.int32()),
        ("Platoon", pa.string()),
        ("Heart", pa.int32()),
        ("BPressure", pa.int32()),
    ]
)

_HEALTH_STREAMS = {"uni": ("Health",), "norm": ("normHealth",), "both": ("Health", "normHealth")}
_FORMATS = ("jsonl", "parquet")
# Spawn keys 0-2 are used by roadnet (network, route, pace).
_KEY_UNI = 3
_KEY_NORM = 4
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = 1_000_000
# Rows per JSON-encoding batch: bounds memory and keeps Arrow's 32-bit string offsets safe.
_JSONL_BATCH_ROWS = 262_144


# --------------------------------------------------------------------------- naming


def platoon_names(platoons: int) -> list[str]:
    """Platoon names: ``X, Y, Z, W``, then the other letters A-V, then ``P27, P28, ...``.

    The paper's examples use platoon X, hence the odd start.

    Example:
        >>> platoon_names(6)
        ['X', 'Y', 'Z', 'W', 'A', 'B']
        >>> platoon_names(28)[-2:]
        ['P27', 'P28']
    """
    head = "XYZW"
    letters = list(head) + [c for c in string.ascii_uppercase if c not in head]
    return [letters[i] if i < len(letters) else f"P{i + 1}" for i in range(platoons)]


# ----------------------------------------------------------------------------- time


@dataclass(frozen=True)
class _Clock:
    """Report instants ``start_us + k * interval_us`` for ``k < steps`` (µs since the epoch)."""

    start_us: int
    interval_us: int
    steps: int

    @property
    def run_us(self) -> int:
        return self.steps * self.interval_us

    def times_us(self) -> np.ndarray:
        return self.start_us + self.interval_us * np.arange(self.steps, dtype=np.int64)


def _parse_start(start: str) -> int:
    """µs since the epoch of an ISO-8601 time; a time without offset is taken as UTC."""
    try:
        moment = datetime.fromisoformat(start)
    except (TypeError, ValueError):
        raise ValueError(f"start must be an ISO-8601 time like {DEFAULT_START!r}, got {start!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _make_clock(start: str, minutes: float, interval_seconds: float) -> _Clock:
    if not 0 < minutes < math.inf:
        raise ValueError(f"minutes must be a finite number > 0, got {minutes}")
    if not 0 < interval_seconds < math.inf:
        raise ValueError(f"interval must be a finite number of seconds > 0, got {interval_seconds}")
    interval_us = round(interval_seconds * _US)
    if interval_us < 1:
        raise ValueError(f"interval must be at least 1 microsecond, got {interval_seconds}")
    # Integer microseconds avoid float drift: 3600 steps of 1 s end exactly at +3599 s.
    steps = round(minutes * 60 * _US) // interval_us
    if steps < 1:
        raise ValueError(f"interval ({interval_seconds} s) is longer than the run ({minutes} min)")
    return _Clock(_parse_start(start), interval_us, steps)


def _to_datetime(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=int(us))


def _iso(us: int) -> str:
    """``2026-03-01T10:00:05Z``, with ``.ffffff`` only when there are microseconds."""
    moment = _to_datetime(us)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{moment.microsecond:06d}Z" if moment.microsecond else f"{text}Z"


# -------------------------------------------------------------------------- streams


def _key_columns(clock: _Clock, soldiers: int, platoons: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``ts``, ``SID`` and ``Platoon`` for rows ordered by (ts, SID); shared by all streams."""
    ts = pa.array(np.repeat(clock.times_us(), soldiers)).cast(_TS)
    sid = pa.array(np.tile(np.arange(1, soldiers + 1, dtype=np.int32), clock.steps))
    platoon_of = np.arange(soldiers, dtype=np.int32) % platoons  # round-robin
    platoon = pc.take(pa.array(platoon_names(platoons)), pa.array(np.tile(platoon_of, clock.steps)))
    return ts, sid, platoon


def _positions(clock: _Clock, soldiers: int, seed: int) -> np.ndarray:
    """``Pos`` for rows ordered by (ts, SID)."""
    net = build_road_network(seed, extent=EXTENT)
    tracks = simulate_tracks(
        net, objects=soldiers, steps=clock.steps, interval_seconds=clock.interval_us / _US, seed=seed
    )
    # Centimetre rounding keeps JSON short; it cannot leave [0, EXTENT] as EXTENT is whole cm.
    return np.rint(tracks.x * 100.0).ravel() / 100.0


def _soldier_rng(seed: int, key: int, soldier: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(key, soldier)))


def _uni_readings(seed: int, soldier: int, steps: int) -> np.ndarray:
    """``(steps, 2)`` uniform (Heart, BPressure); row-by-row draws keep runs prefix-stable."""
    low = [UNI_HEART[0], UNI_BPRESSURE[0]]
    high = [UNI_HEART[1] + 1, UNI_BPRESSURE[1] + 1]  # inclusive upper bounds
    return _soldier_rng(seed, _KEY_UNI, soldier).integers(low, high, size=(steps, 2))


def _norm_readings(seed: int, soldier: int, steps: int) -> np.ndarray:
    """``(steps, 2)`` normal (Heart, BPressure), rounded and clipped to plausible values."""
    mean = [NORM_HEART[0], NORM_BPRESSURE[0]]
    std = [NORM_HEART[1], NORM_BPRESSURE[1]]
    raw = _soldier_rng(seed, _KEY_NORM, soldier).normal(mean, std, size=(steps, 2))
    low = [HEART_CLIP[0], BPRESSURE_CLIP[0]]
    high = [HEART_CLIP[1], BPRESSURE_CLIP[1]]
    return np.clip(np.rint(raw), low, high)


def _health_values(kind: str, clock: _Clock, soldiers: int, seed: int) -> tuple[pa.Array, pa.Array]:
    """``Heart`` and ``BPressure`` for rows ordered by (ts, SID)."""
    draw = _uni_readings if kind == "uni" else _norm_readings
    readings = np.empty((clock.steps, soldiers, 2), dtype=np.int32)
    for soldier in range(soldiers):
        readings[:, soldier, :] = draw(seed, soldier, clock.steps)
    return pa.array(readings[..., 0].ravel()), pa.array(readings[..., 1].ravel())


def _drill_tables(
    soldiers: int, platoons: int, minutes: float, interval_seconds: float, health: str, seed: int, start: str
) -> tuple[_Clock, dict[str, pa.Table]]:
    """Validate the arguments and build every requested stream as an Arrow table."""
    _check_counts(soldiers, platoons, seed)
    if health not in _HEALTH_STREAMS:
        raise ValueError(f"health must be one of {sorted(_HEALTH_STREAMS)}, got {health!r}")
    clock = _make_clock(start, minutes, interval_seconds)
    ts, sid, platoon = _key_columns(clock, soldiers, platoons)
    pos = pa.array(_positions(clock, soldiers, seed))
    tables = {"Position": pa.Table.from_arrays([ts, sid, pos, platoon], schema=POSITION_SCHEMA)}
    for kind, name in zip(("uni", "norm"), ("Health", "normHealth")):
        if name in _HEALTH_STREAMS[health]:
            heart, bpressure = _health_values(kind, clock, soldiers, seed)
            tables[name] = pa.Table.from_arrays([ts, sid, platoon, heart, bpressure], schema=HEALTH_SCHEMA)
    return clock, tables


def _check_counts(soldiers: int, platoons: int, seed: int) -> None:
    if soldiers < 1:
        raise ValueError(f"soldiers must be >= 1, got {soldiers}")
    if platoons < 1:
        raise ValueError(f"platoons must be >= 1, got {platoons}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def _action(clock: _Clock) -> dict[str, dict[str, object]]:
    """Action ``a``: starts a quarter into the run, never ends, targets the area's centre."""
    begin = clock.start_us + round(clock.run_us / 4)
    return {ACTION_NAME: {"name": ACTION_NAME, "start": _iso(begin), "end": None, "target": TARGET}}


# ----------------------------------------------------------------------- public API


def drill_frames(
    *,
    soldiers: int = 100,
    platoons: int = 4,
    minutes: float = 10.0,
    interval_seconds: float = 5.0,
    health: Health = "both",
    seed: int = 7,
    start: str = DEFAULT_START,
) -> dict[str, pd.DataFrame]:
    """Generate the drill streams in memory, keyed ``Position``, ``Health``, ``normHealth``.

    ``health="uni"`` gives ``Health`` (uniform readings), ``"norm"`` gives
    ``normHealth``, ``"both"`` gives both. ``ts`` is ``datetime64[us, UTC]``;
    ``SID``, ``Heart`` and ``BPressure`` are int32.

    Example:
        >>> f = drill_frames(soldiers=4, minutes=0.5, interval_seconds=10.0, health="uni")
        >>> list(f), list(f["Health"].columns)
        (['Position', 'Health'], ['ts', 'SID', 'Platoon', 'Heart', 'BPressure'])
        >>> str(f["Position"]["ts"].iloc[-1])
        '2026-03-01 10:00:20+00:00'
    """
    _, tables = _drill_tables(soldiers, platoons, minutes, interval_seconds, health, seed, start)
    return {name: table.to_pandas() for name, table in tables.items()}


@dataclass(frozen=True)
class DrillSummary:
    """What :func:`generate_drill` wrote.

    Attributes:
        out_dir: the output directory.
        paths: stream name -> its part files, in time order.
        rows: stream name -> number of records.
        first_ts, last_ts: first and last report instants (UTC, inclusive).
        actions_path: the ``actions.json`` file.
    """

    out_dir: Path
    fmt: str
    seed: int
    soldiers: int
    platoons: int
    interval_seconds: float
    first_ts: datetime
    last_ts: datetime
    paths: Mapping[str, tuple[Path, ...]]
    rows: Mapping[str, int]
    actions_path: Path

    def describe(self) -> str:
        """One line for humans, e.g. for the command line."""
        counts = " ".join(f"{name}={count}" for name, count in self.rows.items())
        files = len(next(iter(self.paths.values())))
        span = f"{_iso(_micros(self.first_ts))}..{_iso(_micros(self.last_ts))}"
        return (
            f"{counts} rows; {self.soldiers} soldiers in {self.platoons} platoons; "
            f"{span} every {self.interval_seconds:g}s; "
            f"seed {self.seed}; {files} {self.fmt} file(s) per stream in {self.out_dir}"
        )


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def generate_drill(
    out_dir: str | Path,
    *,
    soldiers: int = 100,
    platoons: int = 4,
    minutes: float = 10.0,
    interval_seconds: float = 5.0,
    health: Health = "both",
    fmt: Format = "jsonl",
    seed: int = 7,
    start: str = DEFAULT_START,
    files_per_stream: int = 1,
) -> DrillSummary:
    """Write the drill streams under ``out_dir`` and return what was written.

    Layout: ``out_dir/<stream>/part-NNNNN.<fmt>`` for each stream of
    :func:`drill_frames`, plus ``out_dir/actions.json``. With
    ``files_per_stream > 1`` each stream is cut into that many consecutive time
    slices (an instant's records never straddle two files). Existing
    ``part-*`` files of the written streams are replaced. JSON lines hold
    timestamps as ``2026-03-01T10:00:05Z`` strings; Parquet holds
    ``timestamp[us, tz=UTC]``.

    Example:
        >>> import tempfile
        >>> s = generate_drill(tempfile.mkdtemp(), soldiers=4, minutes=1.0, files_per_stream=3)
        >>> s.rows["Position"], [p.name for p in s.paths["Health"]]
        (48, ['part-00000.jsonl', 'part-00001.jsonl', 'part-00002.jsonl'])
    """
    if fmt not in _FORMATS:
        raise ValueError(f"fmt must be one of {list(_FORMATS)}, got {fmt!r}")
    clock, tables = _drill_tables(soldiers, platoons, minutes, interval_seconds, health, seed, start)
    if not 1 <= files_per_stream <= clock.steps:
        raise ValueError(f"files per stream must be between 1 and the number of reports ({clock.steps})")
    root = Path(out_dir)
    paths = {
        name: _write_stream(table, root / name, fmt, _slices(clock.steps, soldiers, files_per_stream))
        for name, table in tables.items()
    }
    actions_path = root / "actions.json"
    _write_atomically(actions_path, (json.dumps(_action(clock), indent=2) + "\n").encode())
    return DrillSummary(
        out_dir=root,
        fmt=fmt,
        seed=seed,
        soldiers=soldiers,
        platoons=platoons,
        interval_seconds=clock.interval_us / _US,
        first_ts=_to_datetime(clock.start_us),
        last_ts=_to_datetime(clock.start_us + clock.run_us - clock.interval_us),
        paths=MappingProxyType(paths),
        rows=MappingProxyType({name: table.num_rows for name, table in tables.items()}),
        actions_path=actions_path,
    )


# -------------------------------------------------------------------------- writing


def _slices(steps: int, soldiers: int, files: int) -> list[tuple[int, int]]:
    """(row offset, row count) of each file: consecutive, near-equal runs of whole instants."""
    bounds = np.linspace(0, steps, files + 1).round().astype(int)
    return [(int(a) * soldiers, int(b - a) * soldiers) for a, b in zip(bounds[:-1], bounds[1:])]


def _write_stream(
    table: pa.Table, directory: Path, fmt: str, slices: list[tuple[int, int]]
) -> tuple[Path, ...]:
    directory.mkdir(parents=True, exist_ok=True)
    # Stale parts from an earlier, longer run would otherwise be read as part of this one.
    for old in directory.glob("part-*"):
        if old.suffix in (".jsonl", ".parquet"):
            old.unlink()
    paths = []
    for number, (offset, count) in enumerate(slices):
        path = directory / f"part-{number:05d}.{fmt}"
        part = table.slice(offset, count)
        writer = pq.write_table if fmt == "parquet" else _write_jsonl
        _write_atomically(path, partial(writer, part))
        paths.append(path)
    return tuple(paths)


def _write_atomically(path: Path, content: bytes | Callable[[Path], object]) -> None:
    """Write via a hidden temp file and rename, so a streaming reader never sees half a file.

    Spark's file source skips names starting with ``.``, so the temp file is invisible to it.
    ``content`` is bytes or a callable taking the temp path.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(content, bytes):
        tmp.write_bytes(content)
    else:
        content(tmp)
    os.replace(tmp, path)


def _write_jsonl(table: pa.Table, path: Path) -> None:
    with open(path, "wb") as out:
        for batch in table.to_batches(max_chunksize=_JSONL_BATCH_ROWS):
            out.write(_jsonl_bytes(batch))


def _jsonl_bytes(batch: pa.RecordBatch) -> memoryview | bytes:
    """JSON lines for a batch, built column-wise by Arrow kernels (no per-row Python)."""
    if batch.num_rows == 0:
        return b""
    parts: list[pa.Array | str] = []
    for index, (name, column) in enumerate(zip(batch.schema.names, batch.columns)):
        parts.append(("{" if index == 0 else ",") + json.dumps(name) + ":")
        parts.append(_json_values(name, column))
    parts.append("}\n")
    lines = pc.binary_join_element_wise(*parts, "")
    # The joined lines are one contiguous buffer: write it directly.
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
    return memoryview(lines.buffers()[2])[offsets[0] : offsets[-1]]


def _json_values(name: str, column: pa.Array) -> pa.Array:
    """JSON text of each value of a null-free column."""
    if column.null_count:
        raise ValueError(f"column {name} has nulls; the drill data never should")
    kind = column.type
    if pa.types.is_timestamp(kind):
        return _iso_column(column)
    if pa.types.is_integer(kind):
        return pc.cast(column, pa.string())
    if pa.types.is_floating(kind):
        text = pc.cast(column, pa.string())
        # Arrow writes 500.0 as "500"; keep a decimal point so readers infer a double.
        whole = pc.match_substring_regex(text, r"^-?\d+$")
        return pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    if pa.types.is_string(kind):
        escaped = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
        return pc.binary_join_element_wise('"', escaped, '"', "")
    raise TypeError(f"column {name}: no JSON encoding for {kind}")


def _iso_column(column: pa.Array) -> pa.Array:
    """Quoted ISO strings; formats each run of equal instants once (streams are time-ordered)."""
    micros = column.cast(pa.int64()).to_numpy()
    new_run = np.empty(len(micros), dtype=bool)
    new_run[0] = True
    np.not_equal(micros[1:], micros[:-1], out=new_run[1:])
    texts = pa.array([f'"{_iso(us)}"' for us in micros[new_run]])
    return pc.take(texts, pa.array(np.cumsum(new_run, dtype=np.int64) - 1))

