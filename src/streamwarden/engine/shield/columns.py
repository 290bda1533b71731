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

from streamwarden.language.patterns import NUMERIC_TEXT, Constant, Empty, Pattern, Range, SetOf, Wildcard, number_of

NUMERIC = frozenset({"int", "long", "double"})
# The same text a pattern value must be to read as a number (language.patterns).
_NUMBER = f"^{NUMERIC_TEXT.pattern}$"


def key_text(key: Column) -> Column:
    """The key as the shield's tuple patterns compare it as text."""
    return key.cast("string")


def key_number(key: Column, key_dtype: str) -> Column:
    """The key as a number, when it reads as one (else NULL): what the shield's tuple patterns
    compare as numbers."""
    if key_dtype in NUMERIC:
        return key.cast("double")
    # try_cast: Java's regex \s takes characters (U+0085, ...) that a cast rejects, and a
    # provider's key must never stop the job (or quote itself in an error) for anyone.
    text = key_text(key)
    return F.when(text.rlike(_NUMBER), text.try_cast("double"))


def pattern_column(pattern: Pattern, column: str, dtype: str) -> Column:
    """A predicate that is TRUE exactly for the values of ``column`` that ``pattern`` matches."""
    if isinstance(pattern, Empty):
        return F.lit(False)
    if isinstance(pattern, Wildcard):
        return F.lit(True)
    number = key_number(F.col(column), dtype)  # read as a number exactly as the shield reads a key
    text = key_text(F.col(column))

    def compare(value: object, op: Callable[[Column, Column], Column]) -> Column:
        """``op(value, column)``: as numbers when both read as numbers, else as text."""
        as_number = number_of(value)
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
