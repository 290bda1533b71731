"""Count-based windows ``[ROWS n]`` for aggregates (CQL's tuple-based sliding window).

Semantics (as in CQL, and for a query at a security level only over the tuples it may
see): tuples arrive in ``ts`` order, ties in input order. After each arriving tuple the
window holds the last *n* tuples up to and including it; the query's WHERE picks the
*qualifying* ones among them (it does not decide what enters the window); one row is
emitted per group present among the qualifying tuples, at the arriving tuple's ``ts``
(without GROUP BY exactly one row: COUNT 0 and NULL for the others when none qualify).

Replay evaluates this with Spark window functions (no GROUP BY) or by letting each
qualifying tuple contribute to the *n* arrivals whose windows hold it (GROUP BY): both
plain Spark SQL. A continuous run keeps the last *n* tuples in the state store
(:class:`RowsWindowProcessor`, vectorised with pandas per micro-batch).

    >>> spec = RowsSpec(3, ("COUNT(*)",), ("count",), ())
    >>> spec.n, spec.names
    (3, ('COUNT(*)',))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import Window
from pyspark.sql.window import WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from streamwarden.engine.levels.columns import lub_of_group

T, ARRIVAL, QUALIFIES, RN, ARRIVING = "__t", "__a", "__q", "__rn", "__i"
LEVEL_PART = "__lv"  # the tuple's level, one bigint (streamwarden.engine.levels.columns)
POLICIES = "_policies"


@dataclass(frozen=True)
class RowsSpec:
    """What a ``[ROWS n]`` aggregate computes: names and functions of its aggregates, its groups."""

    n: int
    names: tuple[str, ...]  # output names of the aggregates
    funcs: tuple[str, ...]  # count min max sum avg
    groups: tuple[str, ...]  # output names of the grouping columns
    counts_rows: tuple[bool, ...] = ()  # COUNT(*) (no argument) per aggregate
    levels: bool = False  # rows carry _level: the LUB (bitwise OR) of their qualifying tuples' levels
    policies: bool = False  # the rows carry _policies (union over their qualifying tuples)
    policy_ids: tuple[str, ...] = ()  # every policy id a tuple's _policies can hold (the plan's views)


def arg(i: int) -> str:
    return f"__x{i}"


def prepared(frame: DataFrame, time: Column, arrival: Column, qualifies: Column, args: list[Column | None],
             groups: list[tuple[str, Column]], level: Column | None) -> DataFrame:
    """The input reduced to what the window needs: time (µs), arrival, qualifies, arguments
    (timestamps as µs), groups and the level (``LEVEL_PART``)."""
    cols = [F.unix_micros(time).alias(T), arrival.alias(ARRIVAL), F.coalesce(qualifies, F.lit(False)).alias(QUALIFIES)]
    for i, a in enumerate(args):
        value = F.lit(1) if a is None else a
        cols.append(value.alias(arg(i)))
    cols += [g.alias(name) for name, g in groups]
    if level is not None:
        cols.append(level.alias(LEVEL_PART))
    if POLICIES in frame.columns:
        cols.append(F.col(POLICIES))
    return frame.select(*cols)


def arrival_key(arrival: Column | None) -> Column:
    """A sortable text of a tuple's place in the input (``_arrival`` = (seq, file, line), see
    :func:`streamwarden.engine.sources.arrival_place`): it sorts as the struct does, by
    ``seq`` (none first; offset by 2^63 and zero-padded, so negative ones sort too), then
    file, then zero-padded line."""
    if arrival is None:
        return F.lit("")
    offset = F.lit(str(2**63)).cast("decimal(20,0)")
    seq = F.lpad((arrival["seq"].cast("decimal(20,0)") + offset).cast("string"), 20, "0")
    return F.concat(F.coalesce(F.concat(F.lit("1"), seq), F.lit("0")), F.lit("|"),
                    arrival["file"], F.lit(":"), F.lpad(arrival["line"].cast("string"), 12, "0"))


def _agg(func: str, column: Column) -> Column:
    # try_sum/try_avg: NULL on overflow, as in every compiled aggregate (engine.compiler._aggregate).
    return {"count": F.count, "min": F.min, "max": F.max, "sum": F.try_sum, "avg": F.try_avg}[func](column)


def replay_rows(frame: DataFrame, spec: RowsSpec) -> DataFrame:
    """The window's rows over a recorded input (``frame`` from :func:`prepared`)."""
    order = Window.orderBy(T, ARRIVAL)
    q = F.col(QUALIFIES)
    if not spec.groups:
        window = order.rowsBetween(-(spec.n - 1), 0)
        aggs = [_agg(f, F.when(q, F.col(arg(i)))).over(window).alias(name)
                for i, (name, f) in enumerate(zip(spec.names, spec.funcs))]
        extra = []
        if spec.levels:
            extra.append(lub_of_group(F.when(q, F.col(LEVEL_PART)), window).alias("_level"))
        if spec.policies:
            return _with_window_policies(frame, spec, order, aggs, extra)
        return frame.select(F.col(T).alias("ts"), *aggs, *extra)
    numbered = frame.withColumn(RN, F.row_number().over(order))
    arrivals = numbered.select(F.col(RN).alias(ARRIVING), F.col(T).alias("ts"))
    # Each qualifying tuple counts for the n arrivals whose windows hold it (itself and the n - 1 after it).
    held = numbered.filter(q).withColumn(ARRIVING, F.explode(F.sequence(F.col(RN), F.col(RN) + spec.n - 1)))
    aggs = [_agg(f, F.col(arg(i))).alias(name) for i, (name, f) in enumerate(zip(spec.names, spec.funcs))]
    parts = [lub_of_group(F.col(LEVEL_PART)).alias("_level")] if spec.levels else []
    if spec.policies:
        parts += [F.bool_or(F.array_contains(POLICIES, p)).alias(f"__p{k}") for k, p in enumerate(spec.policy_ids)]
    grouped = held.groupBy(ARRIVING, *spec.groups).agg(*aggs, *parts)
    if spec.policies:
        grouped = grouped.withColumn(POLICIES, policy_array(spec.policy_ids, [F.col(f"__p{k}") for k in range(len(spec.policy_ids))]))
    result = grouped.join(arrivals, ARRIVING)  # arrivals past the last tuple do not exist
    extra = [F.col(name) for name, carried in (("_level", spec.levels), (POLICIES, spec.policies)) if carried]
    return result.select("ts", *spec.groups, *spec.names, *extra)


def policy_array(policy_ids: tuple[str, ...], held: list[Column]) -> Column:
    """The ids of ``policy_ids`` (sorted) whose flag in ``held`` is true, in order: a row's
    ``_policies`` from one flag per policy, where collecting the tuples' arrays would need an
    object aggregate (not code-generated) or per-row array work."""
    none = F.array().cast("array<string>")
    return F.concat(none, *[F.when(h, F.array(F.lit(p))).otherwise(none) for p, h in zip(policy_ids, held)])


def _with_window_policies(frame: DataFrame, spec: RowsSpec, order: WindowSpec, aggs: list[Column],
                          extra: list[Column]) -> DataFrame:
    """The window's rows with ``_policies``: a policy is in a row's union when a qualifying tuple
    it authorized is among the last n. Per policy, the place of its latest such tuple so far is
    a running maximum (constant work per row), where collecting every window's policy arrays
    cost O(n) array work per row."""
    q = F.col(QUALIFIES)
    numbered = frame.withColumn(RN, F.row_number().over(order))
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    latest = [F.max(F.when(q & F.array_contains(POLICIES, p), F.col(RN))).over(so_far)
              for p in spec.policy_ids]
    held = [F.coalesce(last > F.col(RN) - spec.n, F.lit(False)) for last in latest]
    return numbered.select(F.col(T).alias("ts"), *aggs, *extra, policy_array(spec.policy_ids, held).alias(POLICIES))


# -- continuous runs -----------------------------------------------------------------------------
def window_rows(history: pd.DataFrame, spec: RowsSpec, first_new: int) -> pd.DataFrame:
    """The rows emitted for the arrivals ``history[first_new:]`` (history in arrival order,
    holding at least the n - 1 tuples before them). Pure pandas: unit-testable without Spark."""
    q = history[QUALIFIES].to_numpy(dtype=bool)
    arrivals = np.arange(first_new, len(history))
    out: list[pd.DataFrame] = []
    # NULL (None, NaN: a masked attribute) is one group; NaN != NaN would make every NULL row its own key
    keys = [()] if not spec.groups else sorted(
        {tuple(None if pd.isna(v) else v for v in row)
         for row in history.loc[q, list(spec.groups)].itertuples(index=False, name=None)},
        key=lambda k: tuple((v is None, str(v)) for v in k))
    for key in keys:
        member = q.copy()
        for name, value in zip(spec.groups, key):
            member &= _equal(history[name].to_numpy(dtype=object), value)
        rolled = {}
        for i, (name, func) in enumerate(zip(spec.names, spec.funcs)):
            values = pd.Series(np.where(member, history[arg(i)].to_numpy(dtype=object), None)).astype("float64") \
                if func != "count" else pd.Series(np.where(member & history[arg(i)].notna().to_numpy(), 1.0, 0.0))
            window = values.rolling(spec.n, min_periods=1)
            rolled[name] = {"count": window.sum, "min": window.min, "max": window.max, "sum": window.sum,
                            "avg": window.mean}[func]().to_numpy()[arrivals]
        present = pd.Series(member.astype(float)).rolling(spec.n, min_periods=1).sum().to_numpy()[arrivals] > 0
        if spec.groups and not present.any():
            continue
        rows = pd.DataFrame({"ts": history[T].to_numpy()[arrivals]})
        for name, value in zip(spec.groups, key):
            rows[name] = pd.Series([value] * len(rows), dtype=object)  # not pandas' Arrow-backed str
        for name, func in zip(spec.names, spec.funcs):
            values = rolled[name]
            rows[name] = values.astype("int64") if func == "count" else np.where(present, values, np.nan)
        if spec.levels:
            rows["_level"] = _rolling_level(history, member, spec.n, arrivals)
        if spec.policies:
            rows[POLICIES] = _rolling_policies(history, member, spec.n, arrivals)
        if spec.groups:
            rows = rows[present]
        out.append(rows)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["ts", *spec.groups, *spec.names])


def _equal(values: np.ndarray, value: object) -> np.ndarray:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return pd.isna(values)
    return values == value


def _rolling_policies(history: pd.DataFrame, member: np.ndarray, n: int, arrivals: np.ndarray) -> list[list[str]]:
    """Per arrival, the policies of the qualifying tuples in its window (a role-based query over
    a count-based window in a continuous run; a Python loop, as such queries are rare)."""
    policies = history[POLICIES].to_numpy(dtype=object)
    out = []
    for i in arrivals:
        found: set[str] = set()
        for j in range(max(0, i - n + 1), i + 1):
            if member[j] and policies[j] is not None:
                found.update(policies[j])
        out.append(sorted(found))
    return out


def _rolling_level(history: pd.DataFrame, member: np.ndarray, n: int, arrivals: np.ndarray) -> np.ndarray:
    """Per arrival, the LUB (OR) of the levels of the qualifying tuples in its window."""
    levels = np.where(member, history[LEVEL_PART].to_numpy(dtype=np.int64), np.int64(0))
    return rolling_or(levels, n)[arrivals]


def rolling_or(values: np.ndarray, n: int) -> np.ndarray:
    """``out[i]`` = the bitwise OR of ``values[i - n + 1 .. i]`` (from 0 near the start).

    OR forgets how often a bit came, so two overlapping spans of 2^k ≥ n/2 values cover a
    window: log2(n) vectorised ORs, whatever n, instead of a loop over the window.

        >>> rolling_or(np.array([1, 2, 4, 8, 16]), 2).tolist(), rolling_or(np.array([1, 2, 4, 8, 16]), 3).tolist()
        ([1, 3, 6, 12, 24], [1, 3, 7, 14, 28])
    """
    span, spans = 1, values.copy()  # spans[i]: the OR of values[i - span + 1 .. i]
    while span * 2 <= n:
        wider = spans.copy()
        wider[span:] |= spans[:-span]
        spans, span = wider, span * 2
    out, rest = spans.copy(), n - span  # rest < span: the two spans overlap or touch
    if rest:
        out[rest:] |= spans[:-rest]
    return out


class RowsWindowProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` body: the last n - 1 tuples live in the state store.

    One group holds the whole (level-guarded) stream, since a count-based window spans
    all of it. Each micro-batch's tuples are taken in ``ts`` order, ties in input order,
    after the tuples of earlier micro-batches. Output columns: ``ts`` (µs), the groups,
    the aggregates, then ``_level`` (a bigint: the OR of the levels in ``LEVEL_PART``) and
    ``_policies`` when the spec has them.
    """

    def __init__(self, spec: RowsSpec, columns: tuple[str, ...], output: tuple[str, ...]):
        self.spec = spec
        self.columns = list(columns)
        self.output = list(output)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("window", StructType([StructField("history", StringType())]))

    def handleInputRows(self, key: tuple, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:  # type: ignore[no-untyped-def, override]
        chunks = list(rows)
        if not chunks:
            return
        batch = pd.concat(chunks, ignore_index=True)
        batch.columns = self.columns  # PySpark renames columns that start with "_"
        batch = batch.sort_values([T, ARRIVAL], kind="stable")
        kept = self.restore(batch.columns)
        history = pd.concat([kept, batch], ignore_index=True) if len(kept) else batch.reset_index(drop=True)
        result = window_rows(history, self.spec, len(kept))
        keep = self.spec.n - 1
        tail = history.iloc[len(history) - keep:] if keep and len(history) > keep else (history if keep else history.iloc[0:0])
        self.state.update((tail.to_json(orient="split", index=False),))
        if len(result):
            yield result.reindex(columns=self.output)

    def restore(self, columns: pd.Index) -> pd.DataFrame:
        if not self.state.exists():
            return pd.DataFrame(columns=columns)
        stored = json.loads(self.state.get()[0])
        return pd.DataFrame(stored["data"], columns=stored["columns"])

    def close(self) -> None:
        pass


__all__ = ["RowsSpec", "RowsWindowProcessor", "policy_array", "prepared", "replay_rows", "window_rows"]
