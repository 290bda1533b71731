"""The data and queries of experiment 3 (security punctuations, Nehme et al. §6).

Streams come from :mod:`streamwarden.datagen.punctuated`: moving objects with a
tuple-level policy every ``sp_ratio`` tuples (``moving_objects``) and the SCJoin pair A/B
(``join_pair``). Every policy names ``roles`` roles out of a pool of twice that many;
half of the policies name one of the user's roles (``benchmark_user_roles``), so the
shield filters about 50 % of the tuples, as in the paper. The catalog has no
``policies:`` section: the SPs alone decide.

Besides writing the files, this module computes what the pipelines must return, in
NumPy from the generated records (independently of Spark), so every measured point is
also a correctness check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

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


def capped_tuples(tuples: int, sp_ratio: int, roles: int, role_budget: int) -> int:
    """``tuples``, or fewer so that policies × roles (role names the SPs carry) stays within
    ``role_budget``: the engine's cost per SP grows with its role names (see the report)."""
    cap = role_budget * sp_ratio / roles
    if cap >= tuples:
        return tuples
    return max(1_000, int(math.floor(cap / 1_000) * 1_000))
