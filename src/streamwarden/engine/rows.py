"""Count-based windows ``[ROWS n]`` for aggregates (CQL's tuple-based sliding window).

Semantics (as in CQL, and for a query at a security level only over the tuples it may
see): tuples arrive in ``ts`` order, ties in input order. After each arriving tuple the
window holds the last *n* tuples up to and including it; the query's WHERE picks the
*qualifying* ones among them (it does not decide what enters the window); one row is
emitted per group present among the qualifying tuples, at the arriving tuple's ``ts``
(without GROUP BY exactly one row: COUNT 0 and NULL for the others when none qualify).

Replay evaluates this with Spark window functions (no GROUP BY) or by letting each
qualifying tuple contribute to the *n* arrivals whose windows hold it (GROUP BY): both
plain Spark SQL. A continuous run keeps the last *n* - 1 tuples in the state store
(``RowsWindow.java``, :func:`streamwarden.engine.jvm.rows_window`).

    >>> spec = RowsSpec(3, ("COUNT(*)",), ("count",), ())
    >>> spec.n, spec.names
    (3, ('COUNT(*)',))
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window
from pyspark.sql.window import WindowSpec
from pyspark.sql import functions as F

from streamwarden.engine.levels.columns import lub_of_group

T, ARRIVAL, QUALIFIES, RN, ARRIVING = "__t", "__a", "__q", "__rn", "__i"
LEVEL_PART = "__lv"  # the tuple's level, one bigint (streamwarden.engine.levels.columns)
POLICIES = "_policies"
#: Up to this n, a replay's window re-aggregates each frame for its policies (Spark's sliding
#: frames cost O(n) per row); beyond it, a running maximum per policy (constant per row).
SMALL_WINDOW = 64


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


def flag(k: int) -> str:
    """The column of a tuple's flag for the ``k``-th of ``RowsSpec.policy_ids``."""
    return f"__f{k}"


def replay_rows(frame: DataFrame, spec: RowsSpec) -> DataFrame:
    """The window's rows over a recorded input (``frame`` from :func:`prepared`)."""
    order = Window.orderBy(T, ARRIVAL)
    q = F.col(QUALIFIES)
    if spec.policies:
        # One boolean per policy: a qualifying tuple that policy authorized. Computed before the
        # window, so that neither its sort nor its frames carry each tuple's array of names.
        frame = frame.select(*[c for c in frame.columns if c != POLICIES],
                             *[(q & F.array_contains(POLICIES, p)).alias(flag(k))
                               for k, p in enumerate(spec.policy_ids)])
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
        parts += [F.bool_or(F.col(flag(k))).alias(f"__p{k}") for k in range(len(spec.policy_ids))]
    grouped = held.groupBy(ARRIVING, *spec.groups).agg(*aggs, *parts)
    if spec.policies:
        policies = [F.col(f"__p{k}") for k in range(len(spec.policy_ids))]
        grouped = grouped.withColumn(POLICIES, policy_array(spec.policy_ids, policies))
    result = grouped.join(arrivals, ARRIVING)  # arrivals past the last tuple do not exist
    extra = [F.col(name) for name, carried in (("_level", spec.levels), (POLICIES, spec.policies)) if carried]
    return result.select("ts", *spec.groups, *spec.names, *extra)


def policy_array(policy_ids: tuple[str, ...], held: list[Column]) -> Column:
    """The ids of ``policy_ids`` (sorted) whose flag in ``held`` is true, in order: a row's
    ``_policies`` from one flag per policy, where collecting the tuples' arrays would need an
    object aggregate (not code-generated) or per-row array work."""
    none = F.array().cast("array<string>")
    parts = [F.when(h, F.array(F.lit(p))).otherwise(none) for p, h in zip(policy_ids, held)]
    return parts[0] if len(parts) == 1 else F.concat(none, *parts)  # one policy: no array built per row


def _with_window_policies(frame: DataFrame, spec: RowsSpec, order: WindowSpec, aggs: list[Column],
                          extra: list[Column]) -> DataFrame:
    """The window's rows with ``_policies``: a policy is in a row's union when a qualifying tuple
    it authorized is among the last n. For a large n, per policy, the place of its latest such
    tuple so far is a running maximum (constant work per row), where collecting every window's
    policy arrays cost O(n) array work per row."""
    if spec.n <= SMALL_WINDOW:
        # A few rows: one flag per policy over the aggregates' own frame, so Spark computes it
        # in the same Window operator (the running maximum below needs a second one, and row numbers).
        window = order.rowsBetween(-(spec.n - 1), 0)
        flags = [F.coalesce(F.bool_or(F.col(flag(k))).over(window), F.lit(False))
                 for k in range(len(spec.policy_ids))]
        return frame.select(F.col(T).alias("ts"), *aggs, *extra, policy_array(spec.policy_ids, flags).alias(POLICIES))
    numbered = frame.withColumn(RN, F.row_number().over(order))
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    latest = [F.max(F.when(F.col(flag(k)), F.col(RN))).over(so_far) for k in range(len(spec.policy_ids))]
    held = [F.coalesce(last > F.col(RN) - spec.n, F.lit(False)) for last in latest]
    return numbered.select(F.col(T).alias("ts"), *aggs, *extra, policy_array(spec.policy_ids, held).alias(POLICIES))


__all__ = ["RowsSpec", "policy_array", "prepared", "replay_rows"]
