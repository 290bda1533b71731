"""The data and queries of experiment 3 (security punctuations, Nehme et al. §6).

Streams come from :mod:`streamwarden.datagen.punctuated`: moving objects with a
tuple-level policy every ``sp_ratio`` tuples (``moving_objects``) and the SCJoin pair A/B
(``join_pair``). Every policy names ``roles`` roles out of a pool of twice that many;
half of the policies name one of the user's roles (``benchmark_user_roles``), so the
shield filters about 50 % of the tuples, as in the paper. The catalog has no
``policies:`` section: the SPs alone decide.

Besides writing the files, this module computes what the pipelines must return, in
NumPy from the generated records (independently of Spark), so every measured point is
also a correctness check; :func:`save_manifest` keeps those counts next to the inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamwarden.datagen.punctuated import (
    OBJECT_SCHEMA, TICK_US, benchmark_user_roles, join_pair, moving_objects, write_jsonl,
)

USER = "u"
SELECT_QUERY = "SELECT oid, speed, x, y FROM Objects"
SELECT_COLUMNS = ("oid", "speed", "x", "y")
JOIN_COLUMNS = ("a_oid", "b_oid")


def catalog_text(roles: int, streams: tuple[str, ...] = ("Objects",)) -> str:
    """Punctuated ``streams`` (key ``oid``), the role pool ``R0 .. R{2·roles-1}`` and the
    user ``u`` with ``R0 .. R{roles-1}``; no server or role-based policies."""
    schema = "{" + ", ".join(f"{name}: {dtype}" for name, dtype in OBJECT_SCHEMA) + "}"
    lines = ["streams:"]
    for stream in streams:
        lines += [f"  {stream}:", f"    schema: {schema}", "    key: oid"]
    lines.append("roles:")
    lines += [f"  R{i}: {{}}" for i in range(2 * roles)]
    lines += ["users:", f"  {USER}: {{roles: [{', '.join(benchmark_user_roles(roles))}]}}"]
    return "\n".join(lines) + "\n"


def filter_query(threshold: float) -> str:
    """Fig. 14's query: ``speed > X``."""
    return f"SELECT oid, speed, x, y FROM Objects WHERE speed > {threshold}"


def join_query(window_ms: int) -> str:
    """Fig. 16's query: a window equi-join of A and B on the destination."""
    return (f"SELECT A.oid AS a_oid, B.oid AS b_oid FROM A [RANGE {window_ms} ms], B [RANGE {window_ms} ms] "
            "WHERE A.dest = B.dest")


@dataclass(frozen=True)
class Tuples:
    """The tuples of one generated stream, column-wise, and which ones the user may read."""

    oid: np.ndarray
    speed: np.ndarray
    dest: np.ndarray
    readable: np.ndarray  # the governing policy names one of the user's roles

    @property
    def count(self) -> int:
        return len(self.oid)


@dataclass(frozen=True)
class StreamFile:
    """One punctuated stream written to disk: its folder, records and tuples."""

    path: Path
    records: int
    policies: int
    tuples: Tuples


def _roles_of(text: str) -> set[str]:
    return {name.strip() for name in text.strip("{}").split(",")}


def tuples_of(records: list[dict], roles: int) -> Tuples:
    """Columns of the tuples in ``records`` and whether the user may read each."""
    user = set(benchmark_user_roles(roles))
    oid, speed, dest, readable = [], [], [], []
    allowed = False
    for record in records:
        if record.get("kind") == "sp":
            allowed = bool(_roles_of(str(record["roles"])) & user)
            continue
        oid.append(record["oid"])
        speed.append(record["speed"])
        dest.append(record["dest"])
        readable.append(allowed)
    return Tuples(np.array(oid), np.array(speed, dtype=float), np.array(dest), np.array(readable, dtype=bool))


def write_stream(records: list[dict], folder: Path, roles: int) -> StreamFile:
    write_jsonl(records, folder / "part-00000.jsonl")
    policies = sum(1 for r in records if r.get("kind") == "sp")
    return StreamFile(folder, len(records), policies, tuples_of(records, roles))


def objects(folder: Path, *, tuples: int, sp_ratio: int, roles: int) -> StreamFile:
    """The Objects stream of Figs. 13-15."""
    return write_stream(moving_objects(tuples=tuples, sp_ratio=sp_ratio, roles=roles), folder, roles)


def pair(folder: Path, *, tuples: int, sp_ratio: int, roles: int, similarity: float,
         selectivity: float) -> tuple[StreamFile, StreamFile]:
    """Streams A and B of Fig. 16, in ``folder/A`` and ``folder/B``."""
    a, b = join_pair(tuples=tuples, sp_ratio=sp_ratio, roles=roles, similarity=similarity, selectivity=selectivity)
    return write_stream(a, folder / "A", roles), write_stream(b, folder / "B", roles)


def speed_threshold(data: Tuples, selectivity: float) -> float:
    """X such that about ``selectivity`` of the tuples have ``speed > X`` (speeds have 2 decimals)."""
    return round(float(np.quantile(data.speed, 1 - selectivity)), 2)


def expected_select(data: Tuples, threshold: float | None = None) -> int:
    """Rows the shielded query delivers: readable tuples (with ``speed > X``)."""
    keep = data.readable if threshold is None else data.readable & (data.speed > threshold)
    return int(keep.sum())


def window_ms(window_tuples: int) -> int:
    """A RANGE window holding ``window_tuples`` tuples of one stream (one tuple per tick)."""
    return max(1, round(window_tuples * TICK_US / 1000))


def expected_join(a: Tuples, b: Tuples, window: int) -> tuple[int, int]:
    """(rows the secured join delivers, rows the unsecured join gives): pairs within the
    window (``|i - j| <= window`` ticks; both streams share one timeline) on the same
    ``dest``, both readable for the secured count."""
    secured = total = 0
    n = min(a.count, b.count)
    for shift in range(-window, window + 1):
        lo, hi = max(0, -shift), min(n, n - shift)
        same = a.dest[lo:hi] == b.dest[lo + shift:hi + shift]
        total += int(same.sum())
        secured += int((same & a.readable[lo:hi] & b.readable[lo + shift:hi + shift]).sum())
    return secured, total


def objects_folder(tuples: int, sp_ratio: int, roles: int) -> str:
    """The folder (under the workdir) of one Objects stream."""
    return f"objects-{tuples}-{sp_ratio}-{roles}"


def pair_folder(tuples: int, sp_ratio: int, similarity: float, selectivity: float) -> str:
    """The folder (under the workdir) of one SCJoin pair, A and B in its ``A`` and ``B``."""
    return f"pair-{tuples}-{sp_ratio}-{similarity:g}-{selectivity:g}"


def objects_entry(folder: Path, *, tuples: int, sp_ratio: int, roles: int,
                  selectivities: tuple[float, ...] = ()) -> dict[str, Any]:
    """Write an Objects stream; what the pipelines over it must return: the shielded query's
    rows (``expected``) and, per selectivity of ``speed > X``, X and the rows with and
    without the shield."""
    data = objects(folder, tuples=tuples, sp_ratio=sp_ratio, roles=roles)
    selections = {}
    for selectivity in selectivities:
        threshold = speed_threshold(data.tuples, selectivity)
        passing = data.tuples.speed > threshold
        selections[f"{selectivity:g}"] = {"threshold": threshold, "selectivity": float(passing.mean()),
                                          "expected": expected_select(data.tuples, threshold),
                                          "expected_no_shield": int(passing.sum())}
    return {"tuples": data.tuples.count, "policies": data.policies, "records": data.records,
            "expected": expected_select(data.tuples), "selections": selections}


def pair_entry(folder: Path, *, tuples: int, sp_ratio: int, roles: int, similarity: float, selectivity: float,
               window_tuples: int) -> dict[str, Any]:
    """Write an SCJoin pair; the secured join's rows (``expected``), the unsecured join's,
    and the measured join selectivity (pairs within a window sharing ``dest``)."""
    a, b = pair(folder, tuples=tuples, sp_ratio=sp_ratio, roles=roles, similarity=similarity,
                selectivity=selectivity)
    secured, total = expected_join(a.tuples, b.tuples, window_tuples)
    return {"tuples": a.tuples.count + b.tuples.count, "policies": a.policies + b.policies, "expected": secured,
            "unsecured": total, "selectivity": total / (a.tuples.count * (2 * window_tuples + 1))}


MANIFEST = "punctuation-inputs.json"


def save_manifest(work: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Keep every input's entry (folder name -> what :func:`objects_entry`/:func:`pair_entry`
    returned) next to the inputs, for the pipelines to read."""
    (work / MANIFEST).write_text(json.dumps(entries, indent=1), encoding="utf-8")


def manifest(work: Path) -> dict[str, dict[str, Any]]:
    """The entries :func:`save_manifest` kept under ``work``."""
    return json.loads((work / MANIFEST).read_text(encoding="utf-8"))
