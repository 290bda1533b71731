"""The Security Shield on Spark: one :class:`Shield` per provider, over Arrow batches.

The shield is sequential by nature (an SP governs the tuples after it), so each
punctuated (sub-)stream is one Spark group: ``groupBy(provider).applyInPandas`` for a
replay, ``transformWithStateInPandas`` for a continuous run, whose state is the shield's
snapshot, checkpointed with the query. Python touches SP records one by one, but
tuples only as NumPy slices: the tuples between two SPs are checked in one vectorised
step (:meth:`Shield.on_tuples`). What leaves is every tuple with ``_gov``: the JSON
array of the SP codes that govern it (see :mod:`streamwarden.engine.shield.decide`), or
NULL when the shield denies it. Denied tuples still leave, so that the event-time
watermark follows every tuple of the stream, not only those a user may see.

    >>> import pandas as pd
    >>> batch = pd.DataFrame({"_g": "", "_file": "f", "_line": [1, 2, 3], "_seq": None,
    ...     "_is_sp": [True, False, False], "_pts": [0.0, None, None], "_sn": [1.0, None, None],
    ...     "_streams": "*", "_tuples": "*", "_attributes": "x", "_roles": "{GP}", "_sign": "+",
    ...     "_immutable": False, "_grant": False, "_tts": [None, 0.0, 5.0], "_tcsn": [None, 1.0, 1.0], "x": [0, 7, 8]})
    >>> out = shielded(Shield(), batch, SpEncoder("S", ("ts", "x"), {"GP"}))  # the 2nd tuple's policy never came
    >>> out["x"].tolist(), out[GOV].tolist()[0][:24], out[GOV].isna().tolist()
    ([7, 8], '[{"p":true,"i":false,"g"', [False, True])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from streamwarden.security.punctuation.encode import MalformedSp, SpEncoder, SpText
from streamwarden.security.punctuation.shield import Shield

GOV = "_gov"
BROKEN = "broken record in stream"
#: Columns the kernel reads and drops (besides the payload it passes through).
#: The SP record's fields its code depends on, in :class:`SpText` order.
SP_TEXT = ("_streams", "_tuples", "_attributes", "_roles", "_sign", "_immutable", "_grant")
CONTROL = ("_g", "_file", "_line", "_seq", "_is_sp", "_pts", "_sn", *SP_TEXT, "_tts", "_tcsn")


@dataclass(frozen=True)
class SpCode:
    """An SP as the kernel keeps it: policy ts (micros), sequence number, JSON code."""

    ts: float
    sn: int
    code: str

    def to_record(self) -> list[object]:
        return [self.ts, self.sn, self.code]

    @classmethod
    def from_record(cls, record: object) -> "SpCode":
        ts, sn, code = record  # type: ignore[misc]
        return cls(float(ts), int(sn), str(code))


def arrival_order(batch: pd.DataFrame) -> pd.DataFrame:
    """Records in arrival order: ``_seq`` when every record has one, else file then line."""
    if len(batch) and batch["_seq"].notna().all():
        return batch.sort_values("_seq", kind="stable")
    return batch.sort_values(["_file", "_line"], kind="stable")


def shielded(shield: Shield, batch: pd.DataFrame, encode: SpEncoder, texts: Iterable[str] = (),
             timestamps: Iterable[str] = ()) -> pd.DataFrame:
    """Run ``shield`` over one batch of one provider's records; the tuples with ``_gov``.

    The tuples' attributes pass through untouched. ``texts`` name the attributes that leave
    as strings: the string attributes, and the integer ones, which cross Python as their
    decimal text (see :func:`streamwarden.engine.shield.reader.shielded_input`);
    ``timestamps`` the timestamp attributes. A column NULL throughout a batch (the batch
    holds only SPs, or a provider's tuples all lack it) reaches pandas as float NaN, which
    Arrow cannot turn into strings or timestamps, so each leaves in its declared kind. An
    SP whose pattern does not parse stops the job, naming its file and line.
    """
    batch = arrival_order(batch)
    is_sp = batch["_is_sp"].to_numpy(dtype=bool)
    tts = batch["_tts"].to_numpy(dtype=float, na_value=np.nan)
    tcsn = batch["_tcsn"].to_numpy(dtype=float, na_value=np.nan)
    pts, sns = batch["_pts"].to_numpy(), batch["_sn"].to_numpy()
    sp_texts = batch[list(SP_TEXT)].to_numpy(dtype=object)
    governing = np.full(len(batch), None, dtype=object)
    start = 0
    for position in [*np.flatnonzero(is_sp).tolist(), len(batch)]:
        if position > start:
            _govern(shield, tts, tcsn, governing, start, position)
        if position < len(batch):
            code = _encoded(encode, sp_texts[position], batch, position)
            shield.on_sp(SpCode(float(pts[position]), int(sns[position]), code))
        start = position + 1
    tuples = batch.loc[~is_sp].drop(columns=list(CONTROL))
    tuples[GOV] = governing[~is_sp]
    # Text columns leave as Python objects with None for NULL: a column NULL throughout the
    # batch (a provider whose tuples all lack an attribute, or all denied: no _gov) would
    # otherwise be float NaN, which PySpark cannot turn into a string column.
    text_names, timestamp_names = frozenset(texts), frozenset(timestamps)
    for name in tuples.columns:
        if name in text_names or name == GOV or isinstance(tuples[name].dtype, (pd.StringDtype, pd.ArrowDtype)):
            values = tuples[name].to_numpy(dtype=object, na_value=None)
            tuples[name] = pd.Series(values, index=tuples.index, dtype=object)
        elif name in timestamp_names and not pd.api.types.is_datetime64_any_dtype(tuples[name].dtype):
            tuples[name] = pd.to_datetime(tuples[name], utc=True)
    return tuples


def _encoded(encode: SpEncoder, text: np.ndarray, batch: pd.DataFrame, position: int) -> str:
    try:
        return encode(SpText(*(None if pd.isna(v) else v for v in text)))
    except MalformedSp as exc:
        where = f"{str(batch['_file'].iat[position]).removeprefix('file:')}:{batch['_line'].iat[position]}"
        # The prefix is not spelled out on the raising line: Python's traceback quotes that
        # line, and input_errors() takes the first "broken record in stream ..." it finds.
        raise ValueError(f"{BROKEN} {encode.stream} ({exc}) at {where}") from None


def _govern(shield: Shield, tts: np.ndarray, tcsn: np.ndarray, out: np.ndarray, start: int, stop: int) -> None:
    """Decide the tuples ``start:stop`` (no SP between them)."""
    if stop - start == 1:  # one tuple per policy is common (SP ratio 1): skip NumPy's overhead
        ts, csn = tts[start], tcsn[start]
        policy = shield.on_tuple(None if np.isnan(ts) else float(ts), None if np.isnan(csn) else int(csn))
        if policy is not None:
            out[start] = _code(policy.sps)
        return
    policy, allowed = shield.on_tuples(tts[start:stop], tcsn[start:stop])
    if policy is not None and allowed.any():
        out[start:stop][allowed] = _code(policy.sps)


def _code(sps: Iterable[SpCode]) -> str:
    return "[" + ",".join(s.code for s in sps) + "]"


def _restore(snapshot: str | None) -> Shield:
    return Shield() if snapshot is None else Shield.restore(snapshot, SpCode.from_record)


@dataclass(frozen=True)
class ShieldConfig:
    """What a shield worker needs to know: the stream, its schema and the user's roles."""

    stream: str
    attributes: tuple[str, ...]
    roles: frozenset[str]
    texts: frozenset[str] = frozenset()  # string attributes, and integer ones carried as decimal text
    timestamps: frozenset[str] = frozenset()

    def encoder(self) -> SpEncoder:
        return SpEncoder(self.stream, self.attributes, self.roles)


def replay_shield(config: ShieldConfig):  # type: ignore[no-untyped-def]
    """``applyInPandas`` body: a fresh shield over all of one provider's records."""
    encoders: list[SpEncoder] = []  # one per worker, shared by the providers it runs

    def run(batch: pd.DataFrame) -> pd.DataFrame:
        if not encoders:
            encoders.append(config.encoder())
        return shielded(Shield(), batch, encoders[0], config.texts, config.timestamps)
    return run


class ContinuousShield(StatefulProcessor):
    """``transformWithStateInPandas`` processor: one provider's shield, kept in the state
    store between micro-batches and restored from the checkpoint after a restart.

    (``transformWithState`` rather than ``applyInPandasWithState``: Spark allows only one
    of the latter per streaming query, and an SCJoin needs a shield on each side.)
    """

    def __init__(self, columns: tuple[str, ...], config: ShieldConfig):
        self.columns = list(columns)
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.encode = self.config.encoder()
        self.state = handle.getValueState("shield", StructType([StructField("snapshot", StringType())]))

    def handleInputRows(self, key: tuple, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:  # type: ignore[no-untyped-def, override]
        shield = _restore(self.state.get()[0] if self.state.exists() else None)
        chunks = list(rows)
        if chunks:
            batch = pd.concat(chunks, ignore_index=True)
            batch.columns = self.columns  # PySpark renames columns that start with "_" to _0, _1, ...
            yield shielded(shield, batch, self.encode, self.config.texts, self.config.timestamps)
        self.state.update((shield.snapshot(lambda s: s.to_record()),))

    def close(self) -> None:
        pass


__all__ = ["CONTROL", "GOV", "SP_TEXT", "ContinuousShield", "ShieldConfig", "SpCode", "arrival_order", "replay_shield",
           "shielded"]
