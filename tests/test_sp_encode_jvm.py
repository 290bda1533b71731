"""The JVM's SP encoder (``SpEncoder.java``) against the Python encoder, the reference.

The JVM reads a strict subset of the pattern language and leaves everything else to
Python (it answers NULL). Wherever it answers, its code must be Python's code; it must
never answer for a record Python rejects; and it must answer for what providers write
(names, integers), or the Python worker comes back on the hot path.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine.jvm import sp_encoder
from streamwarden.security.punctuation.encode import MalformedSp, SpEncoder, SpText

pytestmark = pytest.mark.spark

# Names where Python's float() and the tokenizer have opinions: inf, nan, ALL, keywords.
NAMES = ["GP", "C", "R1", "S", "inf", "Infinity", "nan", "NaN", "ALL", "all", "NULL", "TRUE", "_x", "ts", "k", "x9"]
INTEGERS = ["0", "007", "-0", "120", "-5", "999999999999999999", "9999999999999999999", "9223372036854775808",
            "-9223372036854775808", "9007199254740993"]
# Outside the JVM's subset (Python decides them, or rejects them).
OTHERS = ["1.5", "1e3", ".5", "'q'", '"x y"', "10:30", "12abc", "- 5", "--c", "١٢", "\tGP", "GP\u00a0", "é", "1_0"]
VALUES = st.one_of(st.sampled_from(NAMES), st.sampled_from(INTEGERS), st.sampled_from(OTHERS))
SPACE = st.sampled_from(["", " ", "  "])


@st.composite
def patterns(draw) -> str:
    s = draw(SPACE)
    shape = draw(st.sampled_from(["*", "{}", "value", "set", "range", "garbage"]))
    if shape in ("*", "{}"):
        body = shape
    elif shape == "value":
        body = draw(VALUES)
    elif shape == "set":
        values = draw(st.lists(VALUES, min_size=1, max_size=4))
        body = "{" + s + f"{s},{s}".join(values) + (",}" if draw(st.booleans()) else s + "}")
    elif shape == "range":
        open_, close = draw(st.sampled_from(["[]", "()", "[)", "(]"]))
        body = f"{open_}{draw(VALUES)},{s}{draw(VALUES)}{close}"
    else:
        body = " ".join(draw(st.lists(st.one_of(VALUES, st.sampled_from(list("*{}[](),-"))), max_size=5)))
    return s + body + draw(SPACE)


CONFIGS = [("S", ("ts", "k", "v"), frozenset({"GP", "C"})),
           ("inf", ("ts", "nan", "Infinity", "k"), frozenset({"R1", "NaN", "ALL"}))]
OPTIONAL = st.one_of(st.none(), patterns())


def jvm_code(spark, config, record: SpText) -> str | None:
    stream, attributes, roles = config
    jvm = spark.sparkContext._jvm
    strings = jvm.java.lang.String
    gateway = spark.sparkContext._gateway

    def array(items):
        out = gateway.new_array(strings, len(items))
        for i, item in enumerate(items):
            out[i] = item
        return out

    return jvm.streamwarden.jvm.SpEncoder.code(stream, array(list(attributes)), array(sorted(roles)), *record)


def python_code(config, record: SpText) -> dict | None:
    try:
        return json.loads(SpEncoder(*config)(record))
    except MalformedSp:
        return None


@settings(max_examples=400, deadline=None, derandomize=True)
@given(config=st.sampled_from(CONFIGS), streams=OPTIONAL, tuples=OPTIONAL, attributes=OPTIONAL,
       roles=OPTIONAL, sign=st.sampled_from([None, "", "+", "-", "positive", "NEGATIVE", "maybe", "−"]),
       immutable=st.sampled_from([None, True, False]), grant=st.sampled_from([None, True, False]))
def test_where_the_jvm_answers_it_answers_as_python(spark, config, streams, tuples, attributes, roles, sign,
                                                   immutable, grant) -> None:
    record = SpText(streams, tuples, attributes, roles, sign, immutable, grant)
    java = jvm_code(spark, config, record)
    if java is not None:
        python = python_code(config, record)
        assert python is not None, f"the JVM encoded a record Python rejects: {record}"
        assert json.loads(java) == python, record


@pytest.mark.parametrize("record", [
    SpText("S", "*", "*", "{GP, C}"),
    SpText("*", "[120, 133]", "{k, v}", "{" + ", ".join(f"R{i}" for i in range(500)) + ", GP}", "-", True, True),
    SpText(None, "{-5, 007, abc}", None, "GP"),
    SpText("{S, T}", "(0, 999999999999999999)", "ALL", "{}"),
    SpText("S", "x", "k", "[A, Z]"),
])
def test_the_jvm_reads_what_providers_write(spark, record) -> None:
    config = CONFIGS[0]
    java = jvm_code(spark, config, record)
    assert java is not None and json.loads(java) == python_code(config, record)


def test_the_column_encodes_in_spark_and_leaves_the_rest_to_python(spark) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([("S", "[1, 9]", "*", "{GP}", "+", False, False),
                                   ("S", "[1.5, 9]", "*", "{GP}", "+", False, False),
                                   (None, None, None, None, None, None, None)],
                                  "s string, t string, a string, r string, sign string, i boolean, g boolean")
    stream, attributes, roles = CONFIGS[0]
    codes = [r[0] for r in frame.select(sp_encoder(spark, stream, attributes, roles,
                                                   [F.col(c) for c in frame.columns])).collect()]
    assert json.loads(codes[0]) == python_code(CONFIGS[0], SpText("S", "[1, 9]", "*", "{GP}", "+", False, False))
    assert codes[1:] == [None, None]  # a decimal is Python's to read; a tuple has no code
