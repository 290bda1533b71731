"""SP patterns compiled to Spark predicates select exactly what Pattern.matches selects."""

from __future__ import annotations

import pytest

from streamwarden.engine.shield.columns import pattern_column
from streamwarden.language.patterns import parse_pattern

pytestmark = pytest.mark.spark

PATTERNS = ["{}", "*", "125", "(120, 133)", "[120, 133]", "[8, 130]", "{119, 125, 140}", "{GP, 125}", "[a, m]", "b"]


def test_patterns_agree_with_matches(spark) -> None:
    keys = list(range(115, 145)) + [7, 99, 1200]  # text of different lengths must still compare as numbers
    frame = spark.createDataFrame([(k, f"{k}", chr(ord("a") + k % 26)) for k in keys], "k int, ks string, name string")
    for text in PATTERNS:
        pattern = parse_pattern(text)
        for column, dtype, values in (("k", "int", keys), ("ks", "string", [str(k) for k in keys]),
                                      ("name", "string", [chr(ord("a") + k % 26) for k in keys])):
            got = sorted(r[0] for r in frame.filter(pattern_column(pattern, column, dtype)).select(column).collect())
            assert got == sorted(v for v in values if pattern.matches(v)), (text, column)
