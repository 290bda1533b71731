"""Compile SP patterns into Spark Column predicates (per-tuple checks stay in the JVM).

A pattern becomes a boolean Column over a tuple's key, stream name or attribute name,
with the same semantics as :meth:`Pattern.matches`: numbers compare as numbers when
both sides are numeric, otherwise as text.

For example ``pattern_column(parse_pattern("[120, 133]"), "Patient_id", "int")`` is
``Patient_id >= 120 AND Patient_id <= 133``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamwarden.punctuation.patterns import Constant, Empty, Pattern, Range, SetOf, Wildcard

NUMERIC = frozenset({"int", "long", "double"})


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def pattern_column(pattern: Pattern, column: str, dtype: str) -> Column:
    """A predicate that is TRUE exactly for the values of ``column`` that ``pattern`` matches."""
    if isinstance(pattern, Empty):
        return F.lit(False)
    if isinstance(pattern, Wildcard):
        return F.lit(True)
    values = _values(pattern)
    if all(_is_number(v) for v in values):
        number = F.col(column).cast("double") if dtype in NUMERIC else F.expr(f"try_cast(`{column}` AS double)")
        numeric = _compare(pattern, number, tuple(float(v) for v in values))  # type: ignore[arg-type]
        if dtype in NUMERIC:
            return numeric
        # A text value that reads as a number compares as a number, as Pattern.matches does.
        return F.when(number.isNotNull(), numeric).otherwise(_compare(pattern, F.col(column), tuple(map(str, values))))
    return _compare(pattern, F.col(column).cast("string"), tuple(str(v) for v in values))


def _values(pattern: Pattern) -> tuple[object, ...]:
    if isinstance(pattern, Constant):
        return (pattern.value,)
    if isinstance(pattern, Range):
        return (pattern.low, pattern.high)
    if isinstance(pattern, SetOf):
        return pattern.values
    raise TypeError(f"unknown pattern {pattern!r}")


def _compare(pattern: Pattern, col: Column, values: tuple[object, ...]) -> Column:
    if isinstance(pattern, Constant):
        return col == F.lit(values[0])
    if isinstance(pattern, Range):
        low, high = F.lit(values[0]), F.lit(values[1])
        return (col >= low) & (col <= high) if pattern.inclusive else (col > low) & (col < high)
    return col.isin(*values)
