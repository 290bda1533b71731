"""Data, policies and exact pair counts for the runtime benchmark (the drill scenario).

Data: :func:`streamwarden.datagen.generate_drill` (Parquet, so that the join, not JSON
parsing, dominates), with ``Position`` and both health streams: ``Health`` (uniform
readings, the paper's uniHealth) and ``normHealth`` (normal readings).

Query: ``SELECT Position.SID AS sid, Pos, Heart FROM Position [RANGE w], H [RANGE w]
WHERE Position.SID = H.SID`` for ``H`` in {Health, normHealth}.

Policies (role ``Medic``): one read policy per stream, granting every attribute (so that
the rewritten query and post-filtering return the same rows), whose condition keeps a
fraction ``s`` of the stream: ``Position.SID <= k`` and ``H.Heart <= q``. ``k`` and
``q`` are chosen on the data so the kept fraction is as close to ``s`` as the data allow
(Heart readings are integers); the measured fractions are reported.

Pair counts are computed exactly from the data (every soldier reports at every instant,
so a stream is a soldiers × instants grid):

* window pairs — the paper's "joins": pairs of tuples entering the join that co-exist
  in their windows (``a.ts - w <= b.ts <= a.ts + w``), whatever their SID; this is what
  a nested-loop window join evaluates the join predicate on;
* key pairs — pairs with equal SID, whatever their time: what Spark's hash join
  (equi-join on SID, window as residual condition) evaluates the window condition on;
* output rows — pairs with equal SID that co-exist: the query's answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from streamwarden.datagen import generate_drill

ROLE = "Medic"
USER = "medic"
HEALTH_STREAMS = {"uni": "Health", "norm": "normHealth"}
_SCHEMAS = {
    "Position": "{ts: timestamp, SID: int, Pos: double, Platoon: string}",
    "Health": "{ts: timestamp, SID: int, Platoon: string, Heart: int, BPressure: int}",
    "normHealth": "{ts: timestamp, SID: int, Platoon: string, Heart: int, BPressure: int}",
}


@dataclass(frozen=True)
class DataSize:
    soldiers: int
    minutes: float
    interval_seconds: float

    def describe(self) -> str:
        return f"{self.soldiers} soldiers × {self.minutes:g} min, one report per {self.interval_seconds:g} s per stream"


@dataclass
class Drill:
    """The generated files plus the grids needed for exact pair counts."""

    directory: Path
    size: DataSize
    rows: dict[str, int]
    sid: dict[str, np.ndarray]  # stream -> (soldiers, instants) SID grid
    heart: dict[str, np.ndarray]  # health stream -> (soldiers, instants) Heart grid

    def path(self, stream: str) -> str:
        return str(self.directory / stream)


def generate(directory: Path, size: DataSize, seed: int = 7) -> Drill:
    """Write the drill streams under ``directory`` and load their grids."""
    summary = generate_drill(directory, soldiers=size.soldiers, minutes=size.minutes,
                             interval_seconds=size.interval_seconds, health="both", fmt="parquet", seed=seed)
    sid, heart = {}, {}
    for stream in ("Position", "Health", "normHealth"):
        table = pq.read_table(directory / stream).to_pandas()
        # Records are ordered by (ts, SID): reshape to instants × soldiers, then transpose.
        steps = len(table) // size.soldiers
        sid[stream] = table["SID"].to_numpy().reshape(steps, size.soldiers).T
        if stream != "Position":
            heart[stream] = table["Heart"].to_numpy().reshape(steps, size.soldiers).T
    rows = {name: int(count) for name, count in summary.rows.items()}
    return Drill(directory, size, rows, sid, heart)


@dataclass(frozen=True)
class Policies:
    """The two read policies for one target selectivity on one dataset."""

    target: float
    health_stream: str
    sid_max: int
    heart_max: int
    position_selectivity: float
    health_selectivity: float


def choose_policies(drill: Drill, dataset: str, target: float) -> Policies:
    """Thresholds whose kept fractions are closest to ``target``."""
    stream = HEALTH_STREAMS[dataset]
    soldiers = drill.size.soldiers
    sid_max = max(1, min(soldiers, round(target * soldiers)))
    heart = drill.heart[stream].ravel()
    values = np.unique(heart)
    kept = np.searchsorted(np.sort(heart), values, side="right") / heart.size  # fraction with Heart <= v
    heart_max = int(values[int(np.argmin(np.abs(kept - target)))])
    return Policies(target, stream, sid_max, heart_max, round(sid_max / soldiers, 4),
                    round(float((heart <= heart_max).mean()), 4))


def catalog_text(policies: Policies) -> str:
    """Catalog YAML: the drill streams, one role, one user and the two read policies."""
    h = policies.health_stream
    return "\n".join([
        "streams:",
        *[f"  {name}: {{schema: {schema}}}" for name, schema in _SCHEMAS.items()],
        f"roles: {{{ROLE}: {{}}}}",
        f"users: {{{USER}: {{roles: [{ROLE}]}}}}",
        "policies:",
        f'  - {{id: pos, subject: {ROLE}, streams: [Position], attributes: "*", privilege: read, '
        f'where: "Position.SID <= {policies.sid_max}"}}',
        f'  - {{id: health, subject: {ROLE}, streams: [{h}], attributes: "*", privilege: read, '
        f'where: "{h}.Heart <= {policies.heart_max}"}}',
    ]) + "\n"


def query_text(health_stream: str, window_s: int) -> str:
    return (f"SELECT Position.SID AS sid, Pos, Heart FROM Position [RANGE {window_s} s], "
            f"{health_stream} [RANGE {window_s} s] WHERE Position.SID = {health_stream}.SID")


@dataclass(frozen=True)
class PairCounts:
    window_pairs: int
    key_pairs: int
    output_rows: int


def pair_counts(drill: Drill, policies: Policies | None, window_s: float) -> PairCounts:
    """Exact pair counts for the tuples entering the join (``None``: every tuple)."""
    position = drill.sid["Position"]
    if policies is None:  # both streams report for every soldier at every instant: same grid shape
        keep_p = np.ones(position.shape, dtype=bool)
        keep_h = np.ones(position.shape, dtype=bool)
    else:
        keep_p = position <= policies.sid_max
        keep_h = drill.heart[policies.health_stream] <= policies.heart_max
    reach = int(window_s // drill.size.interval_seconds)  # instants on each side within the window
    per_instant_p = keep_p.sum(axis=0).astype(np.int64)
    per_instant_h = keep_h.sum(axis=0).astype(np.int64)
    window_pairs = int(per_instant_p @ _window_sum(per_instant_h, reach))
    key_pairs = int(keep_p.sum(axis=1).astype(np.int64) @ keep_h.sum(axis=1).astype(np.int64))
    output_rows = int((keep_p * _window_sum(keep_h.astype(np.int64), reach)).sum())
    return PairCounts(window_pairs, key_pairs, output_rows)


def _window_sum(counts: np.ndarray, reach: int) -> np.ndarray:
    """For each instant t (last axis), the sum of ``counts`` over instants t-reach..t+reach."""
    padded = np.concatenate([np.zeros(counts.shape[:-1] + (1,), dtype=np.int64), np.cumsum(counts, axis=-1)],
                            axis=-1)
    n = counts.shape[-1]
    t = np.arange(n)
    high = np.minimum(t + reach + 1, n)
    low = np.maximum(t - reach, 0)
    return padded[..., high] - padded[..., low]


def point_facts(drill: Drill, dataset: str, target: float, window_s: int) -> dict[str, dict[str, float]]:
    """What one point of the experiment needs from the data, computed once: the policies chosen
    for ``target`` on ``dataset``, the rows in, and the exact pair counts of the tuples
    entering the join with the policies applied first (``secured``) and without (``everything``).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     facts = point_facts(generate(Path(tmp), DataSize(10, 1, 2.0)), "uni", 0.5, 10)
    >>> facts["policies"]["sid_max"], facts["rows"]["in"], facts["everything"]["key_pairs"]
    (5, 600, 9000)
    """
    policies = choose_policies(drill, dataset, target)
    return {"policies": asdict(policies), "rows": {"in": drill.rows["Position"] + drill.rows[policies.health_stream]},
            "secured": asdict(pair_counts(drill, policies, window_s)),
            "everything": asdict(pair_counts(drill, None, window_s))}
