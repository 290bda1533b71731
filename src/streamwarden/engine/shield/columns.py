"""Compile SP patterns into Spark Column predicates (per-tuple checks stay in the JVM).

A pattern becomes a boolean Column over a tuple's key, stream name or attribute name,
with the same semantics as :meth:`Pattern.matches`: numbers compare as numbers when
both sides are numeric, otherwise as text.

For example ``pattern_column(parse_pattern("[120, 133]"), "Patient_id", "int")`` is
``Patient_id >= 120 AND Patient_id <= 133``.
"""

from __future__ import annotations

from typing import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamwarden.language.patterns import Constant, Empty, Pattern, Range, SetOf, Wildcard

NUMERIC = frozenset({"int", "long", "double"})


def pattern_column(pattern: Pattern, column: str, dtype: str) -> Column:
    """A predicate that is TRUE exactly for the values of ``column`` that ``pattern`` matches."""
    if isinstance(pattern, Empty):
        return F.lit(False)
    if isinstance(pattern, Wildcard):
        return F.lit(True)
    number = F.col(column).cast("double") if dtype in NUMERIC else F.col(column).cast("string").try_cast("double")
    text = F.col(column).cast("string")

    def compare(value: object, op: Callable[[Column, Column], Column]) -> Column:
        """``op(value, column)``: as numbers when both read as numbers, else as text."""
        as_number = _number(value)
        textual = op(F.lit(str(value)), text)
        if as_number is None:
            return textual
        return F.when(number.isNotNull(), op(F.lit(as_number), number)).otherwise(textual)

    if isinstance(pattern, Constant):
        return compare(pattern.value, lambda v, c: v == c)
    if isinstance(pattern, SetOf):
        matched = F.lit(False)
        for value in pattern.values:
            matched = matched | compare(value, lambda v, c: v == c)
        return matched
    if isinstance(pattern, Range):
        if pattern.inclusive:
            return compare(pattern.low, lambda v, c: v <= c) & compare(pattern.high, lambda v, c: c <= v)
        return compare(pattern.low, lambda v, c: v < c) & compare(pattern.high, lambda v, c: c < v)
    raise TypeError(f"unknown pattern {pattern!r}")


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
