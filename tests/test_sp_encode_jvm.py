"""The JVM's SP encoder (``SpEncoder.java``, ``PatternReader.java``) against the Python
encoder, the reference.

The engine encodes every SP record in the JVM, so for every record the two must agree:
the same code (compared as JSON: the JVM writes doubles its own way), or the same
reason for a malformed one. The generated texts aim at where a port goes wrong: the
tokenizer's corners (comments, doubled quotes, escapes, exponents, ``1.``, ``.5``,
``--``, ``:``), numbers at a long's edge, decimals whose Python text the JVM must
reproduce (``1e+16``, ``1e-05``, ``0.0001``), names that other readers take as numbers
(``inf``, ``nan``), and text outside ASCII.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine.jvm import sp_encoder
from streamwarden.security.punctuation.encode import MalformedSp, SpEncoder, SpText

pytestmark = pytest.mark.spark

# Names where Python's float() and the tokenizer have opinions: inf, nan, ALL, keywords.
NAMES = ["GP", "C", "R1", "S", "inf", "Infinity", "nan", "NaN", "ALL", "all", "NULL", "TRUE", "_x", "ts", "k", "x9"]
INTEGERS = ["0", "007", "-0", "120", "-5", "999999999999999999", "9999999999999999999", "9223372036854775808",
            "-9223372036854775808", "9223372036854775807", "00000000000000000000001", "9007199254740993"]
DECIMALS = ["1.5", "1.", ".5", "-0.0", "1e3", "1E+16", "1e16", "1e15", "1e-5", "0.0001", "1.e2", "2.5e-3",
            "9223372036854775808.0", "9.223372036854775807e18", "1e400", "1e-400", "123456789012345678.0",
            "0.1", "5e-324", "1.7976931348623157e308", "3.14159265358979323846"]
STRINGS = ["'q'", '"x y"', "'a''b'", '"a\\"b"', "'\u00e9'", "'\U0001d11e'", "' 120 '", "'1_0'", "'inf'", "'1e3'",
           "'-.5'", "'GP'", "''", "'a\nb'", "'unterminated", "'a\\\nb'", "\"12\""]
OTHERS = ["10:30", "10:30am", "12abc", "1e", "1e+", "- 5", "--c", "-- GP\n*", "\u0661\u0662", "\tGP", "GP\u00a0",
          "é", "1_0", "⊥", "<=", "!=", "!", ".", ";", "GP;"]
VALUES = st.one_of(st.sampled_from(NAMES), st.sampled_from(INTEGERS), st.sampled_from(DECIMALS),
                   st.sampled_from(STRINGS), st.sampled_from(OTHERS),
                   st.text(alphabet=st.sampled_from(list("ab1.e-+'\" \t\n{}[](),*:_é")), max_size=6))
SPACE = st.sampled_from(["", " ", "  ", "\t", "\n", "\x0b", "\u00a0", "-- note\n"])


@st.composite
def patterns(draw, values: st.SearchStrategy[str] = VALUES, space: st.SearchStrategy[str] = SPACE,
             garbage: bool = True) -> str:
    s = draw(space)
    shape = draw(st.sampled_from(["*", "{}", "value", "set", "range"] + (["garbage"] * garbage)))
    if shape in ("*", "{}"):
        body = shape
    elif shape == "value":
        body = draw(values)
    elif shape == "set":
        listed = draw(st.lists(values, min_size=1, max_size=4))
        body = "{" + s + f"{s},{s}".join(listed) + (",}" if draw(st.booleans()) else s + "}")
    elif shape == "range":
        open_, close = draw(st.sampled_from(["[]", "()", "[)", "(]"]))
        body = f"{open_}{draw(values)},{s}{draw(values)}{close}"
    else:
        body = draw(space).join(draw(st.lists(st.one_of(values, st.sampled_from(list("*{}[](),-"))), max_size=5)))
    return s + body + draw(space)


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


def python_code(config, record: SpText) -> dict | str:
    """Python's code as JSON, or ``!`` and the reason (as the engine carries a malformed record)."""
    try:
        return json.loads(SpEncoder(*config)(record))
    except MalformedSp as exc:
        return "!" + str(exc)


def as_compared(code: str) -> dict | str:
    return code if code.startswith("!") else json.loads(code)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(config=st.sampled_from(CONFIGS), streams=OPTIONAL, tuples=OPTIONAL, attributes=OPTIONAL,
       roles=OPTIONAL, sign=st.sampled_from([None, "", "+", "-", "positive", "NEGATIVE", "maybe", "−", "K"]),
       immutable=st.sampled_from([None, True, False]), grant=st.sampled_from([None, True, False]))
def test_the_jvm_encodes_every_record_as_python(spark, config, streams, tuples, attributes, roles, sign, immutable,
                                               grant) -> None:
    record = SpText(streams, tuples, attributes, roles, sign, immutable, grant)
    assert as_compared(jvm_code(spark, config, record)) == python_code(config, record), record


# Values that parse, so that most generated patterns do and their codes get compared.
GOOD_VALUES = st.one_of(st.sampled_from(NAMES), st.sampled_from(INTEGERS[:7]), st.sampled_from(DECIMALS[:13]),
                        st.sampled_from(STRINGS[:13]))
GOOD_SPACE = st.sampled_from(["", " ", "\t", "\n", "-- note\n"])
GOOD = patterns(GOOD_VALUES, GOOD_SPACE, garbage=False)


@settings(max_examples=800, deadline=None, derandomize=True)
@given(config=st.sampled_from(CONFIGS), tuples=GOOD, streams=GOOD, attributes=GOOD, roles=GOOD)
def test_the_jvm_encodes_well_formed_patterns_as_python(spark, config, tuples, streams, attributes, roles) -> None:
    record = SpText(streams, tuples, attributes, roles)
    assert as_compared(jvm_code(spark, config, record)) == python_code(config, record), record


@pytest.mark.parametrize("text", DECIMALS[:-1] + ["1e22", "1e23", "9007199254740993.0", "2.2250738585072014e-308",
                                                  "4.9406564584124654e-324", "0.3", "2.675", "1e-4", "1e-05"])
def test_decimals_keep_python_s_text(spark, text) -> None:
    """A decimal's text is what Python's str() makes of it (a key compares with it as text)."""
    record = SpText("S", f"[{text}, {text}]", "*", "GP")
    assert as_compared(jvm_code(spark, CONFIGS[0], record)) == python_code(CONFIGS[0], record)


def test_many_random_doubles_keep_python_s_text(spark) -> None:
    import random
    import struct

    rnd = random.Random(7)
    values = [struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0] for _ in range(3000)]
    values += [rnd.uniform(-1e6, 1e6) for _ in range(1000)] + [2.0 ** k for k in range(-1074, 1024, 7)]
    values = [v for v in values if math.isfinite(v)]
    reader = spark.sparkContext._jvm.streamwarden.jvm.PatternReader
    wrong = [(v, reader.pythonRepr(v)) for v in values if reader.pythonRepr(v) != repr(v)]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("record", [
    SpText("S", "*", "*", "{GP, C}"),
    SpText("*", "[120, 133]", "{k, v}", "{" + ", ".join(f"R{i}" for i in range(500)) + ", GP}", "-", True, True),
    SpText(None, "{-5, 007, abc}", None, "GP"),
    SpText("{S, T}", "(0, 999999999999999999)", "ALL", "{}"),
    SpText("S", "x", "k", "[A, Z]"),
])
def test_the_jvm_reads_what_providers_write(spark, record) -> None:
    config = CONFIGS[0]
    assert json.loads(jvm_code(spark, config, record)) == python_code(config, record)


def test_the_column_encodes_in_spark(spark) -> None:
    from pyspark.sql import functions as F

    rows = [("S", "[1, 9]", "*", "{GP}", "+", False, False), ("S", "[1.5, 9]", "*", "{GP}", "+", False, False),
            ("S", "[1, 9", "*", "{GP}", "+", False, False)]
    frame = spark.createDataFrame(rows, "s string, t string, a string, r string, sign string, i boolean, g boolean")
    stream, attributes, roles = CONFIGS[0]
    codes = [r[0] for r in frame.select(sp_encoder(spark, stream, attributes, roles,
                                                   [F.col(c) for c in frame.columns])).collect()]
    assert [as_compared(c) for c in codes] == [python_code(CONFIGS[0], SpText(*row)) for row in rows]
    assert codes[2] == "!malformed tuples pattern [1, 9"


def test_long_patterns_neither_overflow_nor_stay(spark) -> None:
    """A provider's megabyte of pattern (a quoted string, a role list of 100,000 names) is read
    without recursion and encoded as Python encodes it, and is not kept in the memo."""
    quoted = "'" + "a''" * 200_000 + "'"
    many = "{" + ", ".join(f"R{i}" for i in range(100_000)) + ", GP}"
    for record in (SpText("S", quoted, "*", "GP"), SpText("S", "*", "*", many),
                   SpText("S", "{" + quoted + "}", "*", many)):
        assert as_compared(jvm_code(spark, CONFIGS[0], record)) == python_code(CONFIGS[0], record)
