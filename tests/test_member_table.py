"""The member table (engine/shared.member_table): every member's constants reach Spark as the
values the member's own plan would compare with. They travel as JSON text that Spark parses;
the oracle is Spark's own conversion of the same Python values (``createDataFrame``). The
attack is a constant JSON bends: NaN and infinities, the extremes of a type, quotes, escapes
and characters outside the BMP, a time with an offset or none, a double written as an int."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine.shared import SPARK_TYPE_OF, Member, member_table

pytestmark = pytest.mark.spark

EDGES: dict[str, list[Any]] = {
    "double": [float("nan"), float("inf"), float("-inf"), -0.0, 5e-324, 1.7976931348623157e308, 140],
    "long": [2**63 - 1, -(2**63), 0],
    "int": [2**31 - 1, -(2**31)],
    "string": ["", "quote\" back\\slash", "日本語 🩺", "line\nbreak\ttab", "\u0000nul", "'; DROP"],
    "boolean": [True, False],
    "timestamp": [datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30))),
                  datetime(1960, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc), datetime(2026, 3, 1, 10, 0)],
}


@dataclass(frozen=True)
class Typed:
    """What member_table reads of a template: its constants' types."""

    types: tuple[str, ...]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or (a == b and str(a)[0] == str(b)[0])  # NaN; -0.0 keeps its sign
    return bool(a == b)


def through_spark(spark, types: tuple[str, ...], values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:  # type: ignore[no-untyped-def]
    rows = member_table(spark, Typed(types), [Member(i, f"g{i}", v) for i, v in enumerate(values)]).collect()
    return [tuple(r)[2:] for r in sorted(rows, key=lambda r: r[0])]


def oracle(spark, types: tuple[str, ...], values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:  # type: ignore[no-untyped-def]
    from pyspark.sql.types import StructField, StructType
    schema = StructType([StructField(f"p{i}", SPARK_TYPE_OF[t]) for i, t in enumerate(types)])
    converted = [tuple(float(x) if t == "double" else x for t, x in zip(types, v)) for v in values]
    return [tuple(r) for r in spark.createDataFrame(converted, schema).collect()]


@pytest.mark.parametrize("dtype", sorted(EDGES))
def test_edge_constants_arrive_as_spark_would_take_them(spark, dtype: str) -> None:
    values = [(v,) for v in EDGES[dtype]]
    got, want = through_spark(spark, (dtype,), values), oracle(spark, (dtype,), values)
    assert len(got) == len(want)
    assert all(same(g[0], w[0]) for g, w in zip(got, want)), (got, want)


def test_members_keep_their_index_and_graph_and_each_their_own_constants(spark) -> None:
    rows = member_table(spark, Typed(("string", "double")),
                        [Member(7, "graph \"x\"", ("w1", 40.0)), Member(3, "y", ("w2", 7.5))]).collect()
    assert sorted(tuple(r) for r in rows) == [(3, "y", "w2", 7.5), (7, "graph \"x\"", "w1", 40.0)]


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.floats(allow_nan=False), st.integers(-(2**63), 2**63 - 1),
                          st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                                       timezones=st.just(timezone.utc))), min_size=1, max_size=6))
def test_random_constants_arrive_as_spark_would_take_them(spark, values) -> None:  # type: ignore[no-untyped-def]
    types = ("string", "double", "long", "timestamp")
    got, want = through_spark(spark, types, values), oracle(spark, types, values)
    assert all(same(g, w) for a, b in zip(got, want) for g, w in zip(a, b)), (got, want)


@pytest.mark.parametrize("dtype,value", [("int", 2**31), ("long", 2**63), ("int", "7"), ("boolean", 1),
                                         ("timestamp", "2026-03-01"), ("double", True), ("string", 7)])
def test_a_constant_spark_would_refuse_fails_while_the_plan_is_built(spark, dtype: str, value: Any) -> None:
    """Spark folds the constants only when a micro-batch runs: a refusal then would fail every
    member's batch. Refused while building, the template fails alone (its members reported)."""
    with pytest.raises(ValueError, match="does not fit the type"):
        member_table(spark, Typed((dtype,)), [Member(0, "g", (value,))])
