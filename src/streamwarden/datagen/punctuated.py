"""Punctuated JSON-lines data: streams that carry their own access control policies.

Issue 3's security punctuations (SPs, Nehme et al. 2008) travel inline with the data.
This module generates such streams, seeded and reproducible:

* :func:`health_records` / :func:`write_health`: the three streams of the paper's
  Fig. 6 (``HeartRate``, ``BodyTemperature``, ``BreathingRate``). Every patient is a
  data provider (``punctuated_by: Patient_id``): their sub-stream opens with their own
  policy and changes it ``changes`` times mid-stream. The policies are those of
  section 4.1 (:data:`HEALTH_POLICIES`) over the roles of Fig. 2 (:data:`HEALTH_ROLES`).
* :func:`moving_objects` / :func:`join_pair`: the benchmark streams of section 6:
  location updates of moving objects with a tuple-level policy every ``sp_ratio``
  tuples, for the Security Shield and SCJoin experiments.

Record contract (one JSON object per line, arrival order = line order)::

    {"kind": "sp", "streams": "HeartRate", "tuples": "[120, 133]", "attributes": "*",
     "roles": "{GP, C}", "sign": "+", "immutable": false, "grant": false,
     "ts": "2026-03-01T10:00:00Z", "sn": 1}
    {"ts": "2026-03-01T10:00:01Z", "Patient_id": 120, "Beats_per_min": 70,
     "sp_ts": "2026-03-01T10:00:00Z", "sp_csn": 1}

Consecutive SPs with the same ``ts`` form one policy (``sn`` 1..k); a tuple's
``sp_ts``/``sp_csn`` name the policy that governs it and its k. Policy timestamps only
grow within a (sub-)stream: the shield discards an SP older than the newest it has seen,
and an SP with the current policy's ``ts`` would join that policy instead of replacing it.

Tuples are built column-wise with NumPy; Python loops run over providers and policies
only (and the final ``dict`` per record, which the list-of-records API asks for).

Example:
    >>> streams = health_records(patients=2, minutes=1, changes=1)
    >>> sorted(streams)
    ['BodyTemperature', 'BreathingRate', 'HeartRate']
    >>> first = streams["HeartRate"][0]
    >>> first["kind"], first["Patient_id"], first["ts"], first["sn"]
    ('sp', 120, '2026-03-01T10:00:00Z', 1)
    >>> objects = moving_objects(tuples=4, sp_ratio=2, roles=1)
    >>> [r.get("kind", "tuple") for r in objects]
    ['sp', 'tuple', 'tuple', 'sp', 'tuple', 'tuple']
    >>> objects[0]["tuples"], objects[1]["oid"], objects[2]["oid"], objects[2]["sp_csn"]
    ('[1, 2]', 1, 2, 1)
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_START",
    "FIRST_PATIENT",
    "HEALTH_POLICIES",
    "HEALTH_ROLES",
    "HEALTH_SCHEMAS",
    "OBJECT_SCHEMA",
    "PolicyTemplate",
    "SpTemplate",
    "benchmark_user_roles",
    "health_records",
    "join_pair",
    "moving_objects",
    "selective_destinations",
    "write_health",
    "write_jsonl",
]

DEFAULT_START = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = 1_000_000

# Independent random streams per purpose, derived from the user seed (as in drill.py), so
# e.g. the number of patients never changes patient 120's readings or policy changes.
_KEY_TEMPLATES = 0
_KEY_CHANGES = 1
_KEY_READINGS = 2
_KEY_POLICIES = 3
_KEY_SIMILARITY = 4
_KEY_OBJECTS = 5
_KEY_DESTINATIONS = 6


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


# ================================================================ timestamps and records


def _start_micros(start: datetime | str) -> int:
    """µs since the epoch of ``start`` (a datetime or ISO-8601 text; naive means UTC)."""
    if isinstance(start, str):
        try:
            start = datetime.fromisoformat(start)
        except ValueError:
            raise ValueError(f"start must be an ISO-8601 time like '2026-03-01T10:00:00Z', got {start!r}") from None
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return (start - _EPOCH) // timedelta(microseconds=1)


def _iso(micros: np.ndarray) -> np.ndarray:
    """ISO-8601 UTC texts (``...T10:00:01Z``), with ``.ffffff`` only when there are µs."""
    seconds, fraction = np.divmod(np.asarray(micros, dtype=np.int64), _US)
    # Streams are dense in time: format each distinct second once.
    distinct, which = np.unique(seconds, return_inverse=True)
    whole = np.datetime_as_string(distinct.astype("datetime64[s]"), unit="s")[which]
    if not fraction.any():
        return np.strings.add(whole, "Z")
    digits = np.strings.add(np.strings.add(".", np.strings.zfill(fraction.astype(str), 6)), "Z")
    return np.strings.add(whole, np.where(fraction == 0, "Z", digits))


def _sp_record(streams: str, tuples: str, attributes: str, roles: str, ts: str, sn: int, *, sign: str = "+",
               immutable: bool = False, grant: bool = False) -> dict[str, object]:
    """One SP record, fields in the order of the contract."""
    return {"kind": "sp", "streams": streams, "tuples": tuples, "attributes": attributes, "roles": roles,
            "sign": sign, "immutable": immutable, "grant": grant, "ts": ts, "sn": sn}


def _in_order(records: list[dict], order: np.ndarray) -> list[dict]:
    """``records`` rearranged by the index array ``order``, without a Python loop."""
    holder = np.empty(len(records), dtype=object)
    holder[:] = records
    return holder[order].tolist()


def write_jsonl(records: Iterable[Mapping[str, object]], path: str | Path) -> Path:
    """Write ``records`` as JSON lines to ``path`` (parents created); returns the path.

    The file appears whole: it is written under a hidden name (which the punctuated
    reader skips) and renamed, so a live reader never sees half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = path.with_name(f".{path.name}.tmp")
    encode = json.JSONEncoder().encode
    with hidden.open("w", encoding="utf-8") as out:
        out.writelines(f"{encode(record)}\n" for record in records)
    os.replace(hidden, path)
    return path


# ====================================================================== health streams

#: Fig. 6's streams: attribute and catalog type, after ``ts`` and ``Patient_id``.
HEALTH_SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    "HeartRate": (("Beats_per_min", "int"),),
    "BodyTemperature": (("Temperature", "double"),),
    "BreathingRate": (("Frequency", "int"), ("Depth", "int")),
}
FIRST_PATIENT = 120

#: Fig. 2's roles, each with the roles it inherits (a senior role holds its juniors'
#: permissions). The figure itself is not in our copy of the paper; this reading of it
#: puts the employee at the root, doctors and nurses under it, and the two physicians
#: under the doctor: C (cardiologist) and GP (general physician) inherit D (doctor);
#: D, ND (nurse on duty) and DM (department manager) inherit E (employee).
HEALTH_ROLES: dict[str, tuple[str, ...]] = {
    "E": (), "D": ("E",), "ND": ("E",), "DM": ("E",), "C": ("D",), "GP": ("D",),
}


@dataclass(frozen=True)
class SpTemplate:
    """One SP of a policy template; ``tuples`` None means the provider's own id."""

    streams: str
    tuples: str | None
    attributes: str
    roles: str
    sign: str = "+"
    immutable: bool = False
    grant: bool = False

    def record(self, provider: int, ts: str, sn: int) -> dict[str, object]:
        tuples = str(provider) if self.tuples is None else self.tuples
        record = _sp_record(self.streams, tuples, self.attributes, self.roles, ts, sn, sign=self.sign,
                            immutable=self.immutable, grant=self.grant)
        record["Patient_id"] = provider
        return record


@dataclass(frozen=True)
class PolicyTemplate:
    """A patient's policy: the SPs of one sp-batch (sent whole in each of their streams)."""

    name: str
    sps: tuple[SpTemplate, ...]


#: The policies patients choose from, after section 4.1 (and 4.3's Fig. 8a).
HEALTH_POLICIES: tuple[PolicyTemplate, ...] = (
    # Stream level: only cardiologists read HeartRate; doctors and nurses the rest.
    PolicyTemplate("cardiology", (
        SpTemplate("HeartRate", "*", "*", "C"),
        SpTemplate("{BodyTemperature, BreathingRate}", "*", "*", "{D, ND}"),
    )),
    # Tuple level: GPs read patients 120..133 (a patient outside that range is read by
    # nobody); department managers only learn who is being monitored.
    PolicyTemplate("general practice", (
        SpTemplate("*", "[120, 133]", "*", "GP"),
        SpTemplate("*", None, "Patient_id", "DM"),
    )),
    # Attribute level: doctors and nurses read the vital signs, not who they belong to.
    PolicyTemplate("vital signs", (
        SpTemplate("{HeartRate, BodyTemperature}", "*", "{Temperature, Beats_per_min}", "{D, ND}"),
        SpTemplate("BreathingRate", "*", "{Frequency, Depth}", "{D, ND}"),
    )),
    # Negative: every doctor but the GPs (a GP inherits D, so the negative SP must win).
    PolicyTemplate("specialists only", (
        SpTemplate("*", None, "*", "D"),
        SpTemplate("*", None, "*", "GP", sign="-"),
    )),
    # Negative on one attribute: nurses do not see the breathing depth.
    PolicyTemplate("no depth for nurses", (
        SpTemplate("*", "*", "*", "{D, ND}"),
        SpTemplate("BreathingRate", "*", "Depth", "ND", sign="-"),
    )),
    # Immutable, as Fig. 8a: the server's policies are ignored; the cardiologist may
    # delegate (grant option) and GPs read the breathing frequency.
    PolicyTemplate("consultation (immutable)", (
        SpTemplate("*", None, "*", "C", immutable=True, grant=True),
        SpTemplate("BreathingRate", "[120, 200]", "{Patient_id, Frequency}", "GP", immutable=True),
    )),
    # Open: every employee (all roles inherit E), as in an emergency.
    PolicyTemplate("all staff", (
        SpTemplate("*", None, "*", "E"),
    )),
)


@dataclass(frozen=True)
class _Timeline:
    start_us: int
    run_us: int
    interval_us: int


@dataclass(frozen=True)
class _PolicyPlan:
    """One patient's policies: their timestamps (µs, increasing) and templates."""

    ts_us: np.ndarray
    templates: tuple[PolicyTemplate, ...]


def health_records(*, patients: int = 12, minutes: float = 30, interval_s: float = 10.0, changes: int = 2,
                   seed: int = 7, start: datetime | str = DEFAULT_START) -> dict[str, list[dict]]:
    """The punctuated streams of Fig. 6: stream name → records in arrival order.

    Patients ``120, 121, ...`` each report once every ``interval_s`` seconds in every
    stream (each sensor with its own phase) during ``[start, start + minutes)``. A
    patient's sub-stream opens at ``start`` with their policy and changes it ``changes``
    times, at whole seconds drawn per patient; the same policy (all its SPs) is sent in
    each of the patient's three streams. Templates are dealt so that every one of
    :data:`HEALTH_POLICIES` is used once there are at least as many (patient, policy)
    slots, and no patient keeps the same template across a change. Records of all
    patients are interleaved by time, stably (at one instant: patient, then SPs first).

    >>> hr = health_records(patients=1, minutes=0.5, changes=0)["HeartRate"]
    >>> sps = [r for r in hr if r.get("kind") == "sp"]
    >>> [r["sp_csn"] == len(sps) for r in hr if "sp_csn" in r] == [True] * 3
    True
    """
    _check_health(patients, minutes, interval_s, changes)
    timeline = _Timeline(_start_micros(start), round(minutes * 60 * _US), round(interval_s * _US))
    if timeline.interval_us < 1:
        raise ValueError(f"interval_s must be at least one microsecond, got {interval_s}")
    plans = [_policy_plan(p, changes, timeline, seed) for p in range(patients)]
    return {stream: _health_stream(index, stream, plans, timeline, seed)
            for index, stream in enumerate(HEALTH_SCHEMAS)}


def write_health(out_dir: str | Path, **kwargs: Any) -> dict[str, Path]:
    """Write :func:`health_records` as ``out_dir/<Stream>/part-00000.jsonl``; stream → folder.

    Other ``part-*.jsonl`` files in those folders are removed: a folder is read whole,
    so a stale part from an earlier run would mix into this one.
    """
    folders = {}
    for stream, records in health_records(**kwargs).items():
        folder = Path(out_dir) / stream
        if folder.is_dir():
            for stale in folder.glob("part-*.jsonl"):
                stale.unlink()
        write_jsonl(records, folder / "part-00000.jsonl")
        folders[stream] = folder
    return folders


def _check_health(patients: int, minutes: float, interval_s: float, changes: int) -> None:
    if patients < 1:
        raise ValueError(f"patients must be >= 1, got {patients}")
    if not 0 < minutes < math.inf:
        raise ValueError(f"minutes must be a finite number > 0, got {minutes}")
    if not 0 < interval_s < math.inf:
        raise ValueError(f"interval must be a finite number of seconds > 0, got {interval_s}")
    if changes < 0:
        raise ValueError(f"changes must be >= 0, got {changes}")
    if changes > _last_second(round(minutes * 60 * _US)):
        raise ValueError(f"{changes} policy changes at distinct whole seconds need a run longer than "
                         f"{changes} s, got {minutes} min")


def _last_second(run_us: int) -> int:
    """The last whole second strictly inside a run of ``run_us`` µs."""
    return (run_us - 1) // _US


def _policy_plan(patient: int, changes: int, timeline: _Timeline, seed: int) -> _PolicyPlan:
    """Patient ``patient``'s policies: one at the start, then one per change."""
    # Changes fall on distinct whole seconds strictly inside the run: distinct, because an
    # SP with the current policy's ts would join that policy instead of replacing it.
    candidates = np.arange(1, _last_second(timeline.run_us) + 1)
    seconds = np.sort(_rng(seed, _KEY_CHANGES, patient).choice(candidates, changes, replace=False))
    ts_us = timeline.start_us + np.concatenate([[0], seconds * _US]).astype(np.int64)
    # Deal templates from one seeded deck: consecutive slots hold different templates.
    deck = _rng(seed, _KEY_TEMPLATES).permutation(len(HEALTH_POLICIES))
    slots = patient * (changes + 1) + np.arange(changes + 1)
    return _PolicyPlan(ts_us, tuple(HEALTH_POLICIES[deck[s % len(deck)]] for s in slots))


def _health_stream(index: int, stream: str, plans: list[_PolicyPlan], timeline: _Timeline,
                   seed: int) -> list[dict]:
    """All patients' records of one stream, interleaved by time."""
    records: list[dict] = []
    ts_parts, patient_parts, kind_parts, rank_parts = [], [], [], []
    for patient, plan in enumerate(plans):
        pid = FIRST_PATIENT + patient
        sp_records, sp_ts = _policy_records(pid, plan)
        rng = _rng(seed, _KEY_READINGS, index, patient)
        tuple_records, tuple_ts = _readings(stream, pid, plan, timeline, rng)
        records += sp_records + tuple_records
        ts_parts += [sp_ts, tuple_ts]
        patient_parts.append(np.full(len(sp_records) + len(tuple_records), patient))
        kind_parts += [np.zeros(len(sp_records), np.int8), np.ones(len(tuple_records), np.int8)]
        rank_parts += [np.arange(len(sp_records)), np.arange(len(tuple_records))]
    # Interleave by time; at one instant by patient, SPs before the tuples they govern.
    order = np.lexsort([np.concatenate(part) for part in (rank_parts, kind_parts, patient_parts, ts_parts)])
    return _in_order(records, order)


def _policy_records(pid: int, plan: _PolicyPlan) -> tuple[list[dict], np.ndarray]:
    """The SP records of all of a patient's policies, and their timestamps (µs)."""
    records, stamps = [], []
    for ts_us, ts_text, template in zip(plan.ts_us.tolist(), _iso(plan.ts_us).tolist(), plan.templates):
        records += [spec.record(pid, ts_text, sn) for sn, spec in enumerate(template.sps, start=1)]
        stamps += [ts_us] * len(template.sps)
    return records, np.array(stamps, dtype=np.int64)


def _readings(stream: str, pid: int, plan: _PolicyPlan, timeline: _Timeline,
              rng: np.random.Generator) -> tuple[list[dict], np.ndarray]:
    """One patient's tuples in one stream, each naming the policy in force at its ts."""
    # Each sensor has its own phase within the first interval (whole seconds when the
    # interval allows), so patients and streams do not all report at the same instant;
    # every sensor reports run / interval times.
    step = _US if timeline.interval_us >= _US else 1_000
    phase = int(rng.integers(0, max(timeline.interval_us // step, 1))) * step
    ts_us = timeline.start_us + np.arange(phase, timeline.run_us, timeline.interval_us, dtype=np.int64)
    seconds = (ts_us - timeline.start_us) / _US
    values = _VITALS[stream](rng, seconds)
    policy = np.searchsorted(plan.ts_us, ts_us, side="right") - 1  # the newest policy not after the tuple
    sizes = np.array([len(t.sps) for t in plan.templates])
    columns = {
        "ts": _iso(ts_us).tolist(),
        "Patient_id": [pid] * len(ts_us),
        **{name: column.tolist() for name, column in values.items()},
        "sp_ts": _iso(plan.ts_us)[policy].tolist(),
        "sp_csn": sizes[policy].tolist(),
    }
    names = list(columns)
    return [dict(zip(names, row)) for row in zip(*columns.values())], ts_us


# Vital signs: a patient's own level, a slow swing and measurement noise, clipped to
# what a bedside monitor shows for a resting, possibly feverish, adult.


def _swing(rng: np.random.Generator, seconds: np.ndarray, amplitude: float) -> np.ndarray:
    period = rng.uniform(600.0, 2400.0)
    return amplitude * np.sin(2 * np.pi * seconds / period + rng.uniform(0.0, 2 * np.pi))


def _heart_rate(rng: np.random.Generator, seconds: np.ndarray) -> dict[str, np.ndarray]:
    level = rng.uniform(62.0, 95.0)
    beats = level + _swing(rng, seconds, rng.uniform(3.0, 12.0)) + rng.normal(0.0, 2.5, len(seconds))
    return {"Beats_per_min": np.clip(np.rint(beats), 55, 140).astype(np.int64)}


def _body_temperature(rng: np.random.Generator, seconds: np.ndarray) -> dict[str, np.ndarray]:
    fever = rng.uniform(1.0, 3.5) if rng.random() < 0.25 else 0.0  # about one patient in four
    level = rng.uniform(97.6, 99.2) + fever
    degrees = level + _swing(rng, seconds, 0.3) + rng.normal(0.0, 0.1, len(seconds))
    return {"Temperature": np.round(np.clip(degrees, 96.0, 104.0), 1)}


def _breathing_rate(rng: np.random.Generator, seconds: np.ndarray) -> dict[str, np.ndarray]:
    frequency = rng.uniform(12.0, 20.0) + _swing(rng, seconds, 1.5) + rng.normal(0.0, 1.0, len(seconds))
    depth = rng.uniform(30.0, 48.0) + rng.normal(0.0, 2.5, len(seconds))  # Fig. 6's unit-less depth (38)
    return {"Frequency": np.clip(np.rint(frequency), 8, 30).astype(np.int64),
            "Depth": np.clip(np.rint(depth), 20, 60).astype(np.int64)}


_VITALS: dict[str, Callable[[np.random.Generator, np.ndarray], dict[str, np.ndarray]]] = {
    "HeartRate": _heart_rate, "BodyTemperature": _body_temperature, "BreathingRate": _breathing_rate,
}


# ================================================================ moving-object streams

#: Schema of the benchmark streams (catalog types); ``oid`` is the key SPs match.
OBJECT_SCHEMA: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"), ("oid", "int"), ("speed", "double"), ("x", "double"), ("y", "double"), ("dest", "int"),
)
#: Side of the square the objects move in, metres.
OBJECT_EXTENT = 10_000.0
#: Base speeds, m/s (city traffic: 18 to 108 km/h).
OBJECT_SPEEDS = (5.0, 30.0)
#: Time between two consecutive tuples of a stream.
TICK_US = 1_000


def benchmark_user_roles(roles: int) -> list[str]:
    """The roles of the benchmark user: ``R0 .. R{roles-1}`` (half of the pool).

    >>> benchmark_user_roles(3)
    ['R0', 'R1', 'R2']
    """
    return [f"R{i}" for i in range(roles)]


def selective_destinations(selectivity: float) -> np.ndarray:
    """Probabilities of destinations 0..D-1 such that two independent draws agree with
    probability ``selectivity`` (the sum of the squared probabilities).

    ``D = ceil(1 / selectivity)``; one destination is more popular than the others when
    ``1 / selectivity`` is not a whole number.

    >>> p = selective_destinations(0.3)
    >>> len(p), round(float((p ** 2).sum()), 6)
    (4, 0.3)
    """
    if not 0 < selectivity <= 1:
        raise ValueError(f"selectivity must be in (0, 1], got {selectivity}")
    count = math.ceil(1 / selectivity - 1e-9)
    if count == 1:
        return np.ones(1)
    # One destination with probability a, the others (1 - a) / (count - 1) each:
    # a² + (1 - a)² / (count - 1) = selectivity, the root with a >= 1 / count.
    popular = (1 + math.sqrt(max(0.0, 1 - count + selectivity * count * (count - 1)))) / count
    return np.concatenate([[popular], np.full(count - 1, (1 - popular) / (count - 1))])


def moving_objects(*, tuples: int, sp_ratio: int, roles: int, accessible: float = 0.5, stream: str = "Objects",
                   destinations: int = 100, policy_similarity: float | None = None, seed: int = 7,
                   start: datetime | str = DEFAULT_START, objects: int = 1_000) -> list[dict]:
    """Location updates of moving objects with a tuple-level policy every ``sp_ratio`` tuples.

    ``tuples`` updates ``(ts, oid, speed, x, y, dest)`` arrive :data:`TICK_US` apart;
    about ``objects`` objects (rounded up to a multiple of ``sp_ratio``) report in
    turn, in oid order, each shuttling between its depot and its destination ``dest``
    (uniform over ``destinations``). Every run of ``sp_ratio`` tuples is preceded by its
    own policy: one positive SP on this stream whose tuple pattern is the run's oid
    (``sp_ratio`` 1) or the closed range of its oids, attributes ``*``, and a role set
    of ``roles`` names from the pool ``R0 .. R{2*roles-1}``: a cyclic window of the pool.
    Exactly ``round(accessible * policies)`` policies name a role of
    :func:`benchmark_user_roles`; the others name only roles outside it.

    Policies depend on ``seed`` only, not on ``stream``, so two streams with the same
    seed have identical policies; the data differs per ``stream``. With
    ``policy_similarity`` s, exactly ``round(s * policies)`` policies are those, and the
    others name the complement of that role set in the pool (they share no role with the
    policy of the other stream; the complement of a window is a window).

    >>> records = moving_objects(tuples=6, sp_ratio=3, roles=2, accessible=1.0)
    >>> [(r["tuples"], r["roles"]) for r in records if r.get("kind") == "sp"]
    [('[1, 3]', '{R3, R0}'), ('[4, 6]', '{R0, R1}')]
    """
    if destinations < 1:
        raise ValueError(f"destinations must be >= 1, got {destinations}")
    return _objects(tuples=tuples, sp_ratio=sp_ratio, roles=roles, accessible=accessible, stream=stream,
                    destination_weights=np.full(destinations, 1.0 / destinations),
                    policy_similarity=policy_similarity, seed=seed, start=start, objects=objects)


def join_pair(*, tuples: int, sp_ratio: int, roles: int, similarity: float, selectivity: float, seed: int = 7,
              accessible: float = 0.5, start: datetime | str = DEFAULT_START,
              objects: int = 1_000) -> tuple[list[dict], list[dict]]:
    """Streams ``A`` and ``B`` for the SCJoin benchmarks (section 6.3), joined on ``dest``.

    Both have :func:`moving_objects`'s shape and the same timeline, so their i-th
    policies are concurrent. Exactly ``round(similarity * policies)`` of B's policies are
    identical to A's concurrent one (same patterns and roles); the others share no role
    with it. Destinations follow :func:`selective_destinations`, drawn independently per
    object and stream, so about ``selectivity`` of the (A, B) tuple pairs within a window
    of 100 tuples share a ``dest``.

    >>> a, b = join_pair(tuples=4, sp_ratio=1, roles=1, similarity=0.5, selectivity=1.0)
    >>> [(x["roles"], y["roles"]) for x, y in zip(a, b) if "kind" in x]  # two identical, two disjoint
    [('{R1}', '{R0}'), ('{R1}', '{R0}'), ('{R0}', '{R0}'), ('{R0}', '{R0}')]
    """
    if not 0 <= similarity <= 1:
        raise ValueError(f"similarity must be in [0, 1], got {similarity}")
    weights = selective_destinations(selectivity)
    stream_of = partial(_objects, tuples=tuples, sp_ratio=sp_ratio, roles=roles, accessible=accessible, seed=seed,
                        start=start, objects=objects, destination_weights=weights)
    return stream_of(stream="A", policy_similarity=None), stream_of(stream="B", policy_similarity=similarity)


def _check_objects(tuples: int, sp_ratio: int, roles: int, accessible: float, objects: int,
                   policy_similarity: float | None) -> None:
    if tuples < 1:
        raise ValueError(f"tuples must be >= 1, got {tuples}")
    if sp_ratio < 1:
        raise ValueError(f"sp_ratio must be >= 1, got {sp_ratio}")
    if roles < 1:
        raise ValueError(f"roles must be >= 1, got {roles}")
    if objects < 1:
        raise ValueError(f"objects must be >= 1, got {objects}")
    if not 0 <= accessible <= 1:
        raise ValueError(f"accessible must be in [0, 1], got {accessible}")
    if policy_similarity is not None and not 0 <= policy_similarity <= 1:
        raise ValueError(f"policy_similarity must be in [0, 1], got {policy_similarity}")


def _objects(*, tuples: int, sp_ratio: int, roles: int, accessible: float, stream: str,
             destination_weights: np.ndarray, policy_similarity: float | None, seed: int,
             start: datetime | str, objects: int) -> list[dict]:
    _check_objects(tuples, sp_ratio, roles, accessible, objects, policy_similarity)
    # A multiple of sp_ratio, so that a run never wraps around to oid 1: its oids are one range.
    fleet = math.ceil(objects / sp_ratio) * sp_ratio
    index = np.arange(tuples, dtype=np.int64)
    oid = index % fleet + 1
    ts_us = _start_micros(start) + index * TICK_US
    ts_text = _iso(ts_us)
    runs = math.ceil(tuples / sp_ratio)
    first = np.arange(runs, dtype=np.int64) * sp_ratio  # each run's first tuple
    last = np.minimum(first + sp_ratio, tuples) - 1
    offsets = _role_windows(runs, roles, accessible, seed)
    if policy_similarity is not None:
        offsets = _dissimilar(offsets, roles, policy_similarity, seed)
    windows = _window_texts(roles)
    sps = _object_policies(stream, oid[first], oid[last], [windows[o] for o in offsets.tolist()], ts_text[first])
    values = _object_values(oid, (ts_us - ts_us[0]) / _US, fleet, destination_weights, seed, stream)
    rows = _object_rows(ts_text, oid, values, ts_text[first][index // sp_ratio])
    # Run j's SP goes right before its first tuple: position j * (sp_ratio + 1).
    is_sp = np.zeros(tuples + runs, dtype=bool)
    is_sp[:: sp_ratio + 1] = True
    holder = np.empty(tuples + runs, dtype=object)
    holder[is_sp] = sps
    holder[~is_sp] = rows
    return holder.tolist()


def _role_windows(runs: int, roles: int, accessible: float, seed: int) -> np.ndarray:
    """Each policy's role set as the start of a cyclic window of ``roles`` names in the pool.

    The window starting at ``roles`` is exactly ``R{roles} .. R{2*roles-1}``, the only one
    without a role of the benchmark user; the others are drawn uniformly.
    """
    rng = _rng(seed, _KEY_POLICIES)
    readable = rng.permutation(runs) < round(accessible * runs)  # exactly that many
    others = np.array([o for o in range(2 * roles) if o != roles], dtype=np.int64)
    drawn = others[rng.integers(0, len(others), runs)] if len(others) else np.zeros(runs, np.int64)
    return np.where(readable, drawn, roles)


def _dissimilar(offsets: np.ndarray, roles: int, similarity: float, seed: int) -> np.ndarray:
    """Keep ``round(similarity * n)`` role windows, replace the others by their complement."""
    kept = _rng(seed, _KEY_SIMILARITY).permutation(len(offsets)) < round(similarity * len(offsets))
    return np.where(kept, offsets, (offsets + roles) % (2 * roles))


def _window_texts(roles: int) -> list[str]:
    """Role set pattern text of every window start: ``{R1, R2}`` for start 1 of a pool of 4."""
    pool = 2 * roles
    return ["{" + ", ".join(f"R{(o + k) % pool}" for k in range(roles)) + "}" for o in range(pool)]


def _object_policies(stream: str, low: np.ndarray, high: np.ndarray, role_texts: list[str],
                     ts_texts: np.ndarray) -> list[dict]:
    """One single-SP policy per run of tuples (the dict is spelled out: this loop is hot)."""
    patterns = low.astype(str)
    ranged = low != high
    if ranged.any():
        patterns = patterns.astype(object)  # the range texts are longer than the constants
        patterns[ranged] = np.strings.add(np.strings.add(np.strings.add("[", low[ranged].astype(str)), ", "),
                                          np.strings.add(high[ranged].astype(str), "]"))
    return [{"kind": "sp", "streams": stream, "tuples": pattern, "attributes": "*", "roles": roles, "sign": "+",
             "immutable": False, "grant": False, "ts": ts, "sn": 1}
            for pattern, roles, ts in zip(patterns.tolist(), role_texts, ts_texts.tolist())]


@dataclass(frozen=True)
class _ObjectValues:
    speed: np.ndarray
    x: np.ndarray
    y: np.ndarray
    dest: np.ndarray


def _object_values(oid: np.ndarray, seconds: np.ndarray, fleet: int, destination_weights: np.ndarray, seed: int,
                   stream: str) -> _ObjectValues:
    """Each object shuttles at its own speed between its depot and its destination.

    Destinations are places shared by all streams of a seed; depots, speeds and the
    choice of destination are the stream's own.
    """
    places = _rng(seed, _KEY_DESTINATIONS).uniform(0.0, OBJECT_EXTENT, (len(destination_weights), 2))
    rng = _rng(seed, _KEY_OBJECTS, zlib.crc32(stream.encode()))
    depot = rng.uniform(0.0, OBJECT_EXTENT, (fleet, 2))
    dest = rng.choice(len(destination_weights), fleet, p=destination_weights)
    base_speed = rng.uniform(*OBJECT_SPEEDS, fleet)
    head_start = rng.uniform(0.0, 1.0, fleet)  # where on its shuttle each object begins
    me = oid - 1
    leg = places[dest[me]] - depot[me]
    length = np.maximum(np.hypot(leg[:, 0], leg[:, 1]), 1.0)
    travelled = (base_speed[me] * seconds + head_start[me] * 2 * length) % (2 * length)
    along = np.where(travelled < length, travelled, 2 * length - travelled) / length  # there and back
    speed = base_speed[me] * rng.normal(1.0, 0.05, len(oid))
    return _ObjectValues(np.round(np.maximum(speed, 0.0), 2), np.round(depot[me, 0] + along * leg[:, 0], 2),
                         np.round(depot[me, 1] + along * leg[:, 1], 2), dest[me])


def _object_rows(ts_text: np.ndarray, oid: np.ndarray, values: _ObjectValues, sp_ts: np.ndarray) -> list[dict]:
    return [{"ts": ts, "oid": o, "speed": s, "x": x, "y": y, "dest": d, "sp_ts": p, "sp_csn": 1}
            for ts, o, s, x, y, d, p in zip(ts_text.tolist(), oid.tolist(), values.speed.tolist(),
                                            values.x.tolist(), values.y.tolist(), values.dest.tolist(),
                                            sp_ts.tolist())]
