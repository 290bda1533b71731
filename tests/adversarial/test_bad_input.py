"""Issue 11, classes 10-13: bad input is refused with one positioned error, quickly.

Attacks (each test names one): YAML alias bombs and recursive aliases (10); invalid
UTF-8 and Unicode line separators inside records (11); deep nesting and long chains in
queries and policy conditions (12); numbers, durations, row counts and timestamps out
of range (13). Every refusal is a StreamwardenError whose message names the file (or
query), line and column; none is a traceback, none takes more than a fraction of a second.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from conftest import DRILL_CATALOG, ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import MAX_FILE_BYTES, load_catalog, load_catalog_text
from streamwarden.engine.execute import input_errors
from streamwarden.errors import BindError, CatalogError, InputError, QuerySyntaxError, SourceError
from streamwarden.language.binder import bind_text
from streamwarden.language.parser import (MAX_CHAIN_TERMS, MAX_HEIGHT, MAX_NESTING, MAX_TEXT_CHARS, parse_duration,
                                          parse_query)
from streamwarden.catalog.punctuations import sp_from_record
from streamwarden.catalog.registry import load_access, load_queries, load_queries_text
from streamwarden.engine.shield.reader import shielded_input
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Filter, walk
from streamwarden.records import record_lines
from streamwarden.security.passes import secure

DRILL = DRILL_CATALOG.read_text()
DRILL_CAT = load_catalog_text(DRILL, "drill.yaml")


def quickly(run, *args, limit: float = 1.0):  # type: ignore[no-untyped-def]
    """Run and return the exception raised (failing if none, or if it used more than ``limit``
    CPU seconds: the attacks are CPU bombs, and CPU time, unlike wall time, does not grow
    when other work shares the machine's cores)."""
    start = time.process_time()
    try:
        run(*args)
    except Exception as exc:  # noqa: BLE001
        elapsed = time.process_time() - start
        assert elapsed < limit, f"took {elapsed:.2f} CPU seconds"
        return exc
    raise AssertionError("no error")


def position_of(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the n-th ``needle`` in ``text``."""
    at = -1
    for _ in range(occurrence):
        at = text.index(needle, at + 1)
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


# -- class 10: YAML alias bombs and recursive aliases --------------------------------------------
def lol_bomb(levels: int = 9) -> str:
    lines = ['lol0: &lol0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"lol{level}: &lol{level} [" + ",".join([f"*lol{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_catalog_is_refused_in_well_under_a_second() -> None:
    """Attack: 9 levels of 9 aliases ("billion laughs", 9^9 nodes expanded) in a catalog ran for
    minutes and gigabytes. Now one CatalogError at the alias whose expansion is too large."""
    text = lol_bomb() + "streams: *lol8\n"
    error = quickly(load_catalog_text, text, "bomb.yaml", limit=0.5)
    assert isinstance(error, CatalogError)
    assert "expand to more than 100,000 nodes" in str(error)
    line, column = error.line, error.column
    assert text.splitlines()[line - 1][column - 1] == "*"  # it points at an alias
    assert str(error).startswith(f"bomb.yaml:{line}:{column}: ")


@pytest.mark.parametrize(
    ("text", "alias"),
    [
        ("streams: &s {S: *s}\n", "*s"),
        ("roles: &r\n  A: {inherits: *r}\n", "*r"),
        ("x: &x [1, [2, [3, *x]]]\nstreams: {}\n", "*x"),
        ("users: &u {ann: {profile: &p {a: *u}}}\n", "*u"),
    ],
)
def test_recursive_alias_is_refused_at_the_alias(text: str, alias: str) -> None:
    """Attack: an alias inside its own anchor (a cycle) made the loader recurse until
    RecursionError. Now a CatalogError naming the alias's line and column."""
    error = quickly(load_catalog_text, text, "rec.yaml")
    assert isinstance(error, CatalogError) and "recursive alias" in str(error)
    assert (error.line, error.column) == position_of(text, alias)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("streams: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested more than 64 deep"),
        ("streams: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n", "nested more than 64 deep"),
        ("a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 500)), "more than 64 deep"),
        ("? [a, b]\n: 1\n", "a key must be a plain value"),
        ("streams: !!python/object/apply:os.system [ls]\n", "streams must be a mapping"),  # never constructed
        ("streams: {S: {schema: !!python/name:os.system x}}\n", "cannot read the value"),
        ("actions: {a: {target: " + "9" * 5000 + "}}\n", "cannot read the value"),
        ("actions: {a: {start: 2026-02-30}}\n", "day is out of range"),
        ("streams: \x07\n", "unacceptable character #x0007"),
    ],
)
def test_yaml_that_would_recurse_or_construct_objects_is_refused(text: str, message: str) -> None:
    """Attack: deep YAML nesting (RecursionError in PyYAML's composer), alias chains that nest
    deep only when expanded, mapping keys that are lists, unsafe or invalid tags, invalid dates
    and huge integers (Python exceptions from the constructor), control characters."""
    error = quickly(load_catalog_text, text, "deep.yaml")
    assert isinstance(error, CatalogError) and message in str(error), error
    assert str(error).startswith("deep.yaml:")


def test_alias_bomb_and_recursive_alias_in_a_query_file_are_refused() -> None:
    """Attack: the same in QUERIES.yaml (the registry walked the nodes; printing a recursive
    one recursed without end)."""
    catalog = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\nusers: {ann: {}}\n")
    bomb = lol_bomb() + "queries: [{id: q1, users: [ann], query: 'SELECT a FROM S'}]\nextra: *lol8\n"
    error = quickly(load_queries_text, bomb, catalog, "q.yaml", limit=0.5)
    assert isinstance(error, CatalogError) and "expand to more than" in str(error)
    recursive = "queries: &q [{id: q1, users: [ann], query: 'SELECT a FROM S', more: *q}]\n"
    error = quickly(load_queries_text, recursive, catalog, "q.yaml")
    assert isinstance(error, CatalogError) and "recursive alias" in str(error)
    assert (error.line, error.column) == position_of(recursive, "*q")
    keyed = "queries: [{? [id]\n : q1}]\n"
    error = quickly(load_queries_text, keyed, catalog, "q.yaml")
    assert isinstance(error, CatalogError) and "a key must be a plain value" in str(error)


def test_files_larger_than_the_bound_are_refused_before_reading(tmp_path) -> None:
    """Attack: a huge catalog or query file (or a device) was read whole. Now at most 10 MiB."""
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written
    catalog = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\nusers: {ann: {}}\n")
    for run, args in ((load_catalog, (big,)), (load_queries, (big, catalog))):
        error = quickly(run, *args)
        assert isinstance(error, CatalogError) and "larger than 10 MiB" in str(error) and str(big) in str(error)


# -- class 11: invalid UTF-8, and line separators inside records ----------------------------------
def test_invalid_utf8_in_a_catalog_names_line_and_column(tmp_path) -> None:
    """Attack: a catalog with a byte that is not UTF-8 gave a UnicodeDecodeError traceback.
    Now one CatalogError at the line and column (in characters) of the first bad byte."""
    path = tmp_path / "cat.yaml"
    data = DRILL.encode()
    at = data.index(b"Platoon: X")
    path.write_bytes(data[:at] + "é".encode() + b"\xff\xfe" + data[at:])
    error = quickly(load_catalog, path)
    assert isinstance(error, CatalogError)
    line, column = position_of(DRILL, "Platoon: X")
    assert (error.line, error.column) == (line, column + 1)  # after the (valid) é
    assert str(error).startswith(f"{path}:{line}:{column + 1}: invalid UTF-8 (byte 0xff)")


def test_invalid_utf8_in_a_query_file_and_an_access_file(tmp_path) -> None:
    """Attack: the same in QUERIES.yaml and in an access-changes file (UnicodeDecodeError)."""
    catalog = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\nusers: {ann: {}}\n")
    queries = tmp_path / "q.yaml"
    queries.write_bytes(b"queries:\n  - {id: q1, users: [ann], query: 'SELECT a FROM S \xc3'}\n")
    error = quickly(load_queries, queries, catalog)
    line, column = position_of("queries:\n  - {id: q1, users: [ann], query: 'SELECT a FROM S '}", "S '")
    assert isinstance(error, CatalogError)
    assert str(error).startswith(f"{queries}:{line}:{column + 2}: invalid UTF-8 (byte 0xc3)")
    registered = load_queries_text("queries: [{id: q1, users: [ann], query: 'SELECT a FROM S'}]", catalog)
    access = tmp_path / "access.jsonl"
    good = json.dumps({"ts": ts(0), "query": "q1", "user": "ann", "sign": "+"}).encode()
    access.write_bytes(good + b"\n\n" + good[:10] + b"\x80" + good[10:] + b"\n")
    error = quickly(load_access, access, registered)
    assert isinstance(error, InputError) and str(error) == f"{access}:3:11: invalid UTF-8 (byte 0x80)"


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_unicode_line_separators_inside_a_record_do_not_split_it(tmp_path, separator: str) -> None:
    """Attack: a valid JSON record holding U+2028 (or U+2029, NEL: JSON allows all three raw in
    a string) was cut in two by str.splitlines, so a record broke or two half-records appeared.
    Records now end at LF (CRLF) only: in access files and in the line reader of punctuated
    and [ROWS n] input."""
    record = {"ts": ts(0), "query": "q1", "user": "ann", "sign": "+", "note": f"a{separator}b"}
    text = json.dumps(record, ensure_ascii=False)
    assert separator in text
    data = (text + "\r\n" + text + "\n").encode()
    assert record_lines(data, "x.jsonl") == [(1, text), (2, text)]
    catalog = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\nusers: {ann: {}}\n")
    registered = load_queries_text("queries: [{id: q1, users: [ann], query: 'SELECT a FROM S'}]", catalog)
    path = tmp_path / "access.jsonl"
    path.write_bytes(data)
    assert [(c.user, c.line) for c in load_access(path, registered)] == [("ann", 1), ("ann", 2)]


ROWS_CATALOG = """
streams:
  Msg: {schema: {ts: timestamp, sender: string, body: string}}
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}, key: Patient_id}
roles: {R: {}}
users: {u: {roles: [R]}}
policies:
  - {id: r, subject: R, streams: [Msg], attributes: '*', privilege: read}
"""


@pytest.mark.spark
def test_rows_and_punctuated_input_with_bad_utf8_or_separators_on_spark(spark, tmp_path) -> None:
    """Attack, end to end on Spark: [ROWS n] input whose record holds U+2028 (split before,
    so the job failed on a broken half-record) is read whole; one with an invalid byte, and a
    punctuated input with one, stop with one InputError naming file:line:column (before: a
    UnicodeDecodeError traceback from a Python worker)."""
    catalog = load_catalog_text(ROWS_CATALOG)
    messages = tmp_path / "Msg"
    messages.mkdir()
    good = [{"ts": ts(i), "sender": "1", "body": f"line{i}\u2028still{i}\u0085"} for i in range(3)]
    (messages / "a.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in good),
                                      encoding="utf-8")
    query = "SELECT COUNT(*) AS n FROM Msg [ROWS 2]"
    rows = api.replay(catalog, "u", query, {"Msg": str(messages)}, spark=spark)
    assert [r["n"] for r in rows] == [1, 2, 2]
    bad = messages / "b.jsonl"
    bad.write_bytes(json.dumps({"ts": ts(9), "sender": "1", "body": "x"}).encode()[:-2] + b"\xe9\"}\n")
    with pytest.raises(InputError) as info, input_errors():
        api.replay(catalog, "u", query, {"Msg": str(messages)}, spark=spark)
    assert f"{bad}:1:" in str(info.value) and "invalid UTF-8 (byte 0xe9)" in str(info.value)
    heart = tmp_path / "heart.jsonl"
    heart.write_bytes(BAD_PUNCTUATED)
    with pytest.raises(InputError) as info, input_errors():
        shielded_input(spark, catalog.streams["HeartRate"], heart, {"R"}, streaming=False).collect()
    column = BAD_PUNCTUATED.split(b"\n")[1].index(b"\xff") + 1
    assert str(info.value) == f"broken record in stream HeartRate (invalid UTF-8 (byte 0xff)) at {heart}:2:{column}"


BAD_PUNCTUATED = (b'{"ts": "2026-03-01T10:00:00Z", "Patient_id": 1, "Beats_per_min": 70}\n'
                  b'{"ts": "2026-03-01T10:00:01Z", "Patient_id": 1, "Beats_\xff": 70}\n')


@pytest.mark.spark
def test_punctuated_input_with_bad_utf8_through_the_api(spark, tmp_path) -> None:
    """Attack: the same punctuated file through api.replay, which reads policy statistics first."""
    heart = tmp_path / "heart.jsonl"
    heart.write_bytes(BAD_PUNCTUATED)
    with pytest.raises(InputError), input_errors():
        api.replay(load_catalog_text(ROWS_CATALOG), "u", "SELECT Beats_per_min FROM HeartRate",
                   {"HeartRate": str(heart)}, spark=spark)


# -- class 12: deep nesting and long expressions --------------------------------------------------
ATTACKS = {
    "10,000 parentheses": ("(" * 10_000 + "Pos > 1" + ")" * 10_000, "(", MAX_NESTING + 1, "nested"),
    "5,000 NOTs": ("NOT " * 5_000 + "Pos > 1", "NOT", MAX_NESTING + 1, "nested"),
    "5,000 minus signs": ("Pos > " + "- " * 5_000 + "1", "-", MAX_NESTING + 1, "nested"),
    "5,000 nested calls": ("start(" * 5_000 + "a) IS NULL", "start", MAX_NESTING + 1, "nested"),
    "5,000-term OR": (" OR ".join(["Pos = 1"] * 5_000), "OR", MAX_CHAIN_TERMS, "terms joined by OR"),
    "5,000-term AND": (" AND ".join(["Pos = 1"] * 5_000), "AND", MAX_CHAIN_TERMS, "terms joined by AND"),
    "5,000-term sum": ("Pos > " + " + ".join(["1"] * 5_000), "+", MAX_CHAIN_TERMS, "terms joined by +"),
    "5,000-term product": ("Pos > " + " * ".join(["1"] * 5_000), "*", MAX_CHAIN_TERMS, "terms joined by *"),
    "nested chains": ("(" * 40 + " OR ".join(["Pos = 1"] * 120) + ") OR Pos = 2 OR Pos = 3" * 40, None, None,
                      "nested too deeply"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_deep_or_long_query_expressions_are_syntax_errors_at_the_position(name: str) -> None:
    """Attack: 10,000 parentheses, a 5,000-term OR, 5,000 NOTs (and variants) in a query's
    WHERE gave RecursionError in the parser or in a later pass. Now a QuerySyntaxError at the
    token that goes over the limit, in well under a second, before any pass recurses."""
    condition, token, occurrence, message = ATTACKS[name]
    text = f"SELECT SID FROM Position WHERE {condition}"
    error = quickly(secure, DRILL_CAT, "paul", text, limit=0.5)
    assert isinstance(error, QuerySyntaxError) and message in str(error), error
    if token is not None:
        assert (error.line, error.column) == position_of(text, token, occurrence)


@pytest.mark.parametrize("name", ["10,000 parentheses", "5,000-term OR", "5,000 NOTs", "nested chains"])
def test_deep_or_long_policy_conditions_are_syntax_errors_in_the_catalog(name: str) -> None:
    """Attack: the same inside a policy's `where`: now a QuerySyntaxError naming the catalog's
    own file:line:col, and the catalog does not load (no partial catalog)."""
    condition, token, occurrence, message = ATTACKS[name]
    policy = f'  - {{id: deep, subject: Doctor, streams: [Position], privilege: read, where: "{condition}"}}\n'
    text = DRILL + policy
    error = quickly(load_catalog_text, text, "drill.yaml", limit=0.5)
    assert isinstance(error, QuerySyntaxError) and message in str(error), error
    assert str(error).startswith("drill.yaml:")
    if token is not None:
        start = text.index(policy)
        line, column = position_of(text[start:], token, occurrence)
        assert (error.line, error.column) == (text.count("\n", 0, start) + line, column)


def test_query_text_longer_than_the_bound_is_refused() -> None:
    """Attack: a query of megabytes (a 70,000-digit literal, thousands of select items)."""
    for text in ("SELECT SID FROM Position WHERE Pos > " + "1" * 70_000,
                 "SELECT " + ", ".join(["SID AS s"] * 10_000) + " FROM Position"):
        error = quickly(parse_query, text)
        assert isinstance(error, QuerySyntaxError) and f"longer than {MAX_TEXT_CHARS:,}" in str(error)


def at_the_limits(room: int = 0) -> dict[str, str]:
    """Conditions exactly at each stated limit (one more of anything is refused above), less
    ``room`` levels of nesting and height for what surrounds them."""
    per_level = 4  # terms per nested OR below: each level adds 4 to the tree's height
    levels = (MAX_HEIGHT - 3 - room) // per_level
    deepest = "Pos > 1"
    for _ in range(levels):
        deepest = "(" + deepest + " OR " + " OR ".join(["Pos = 2"] * (per_level - 1)) + ")"
    return {
        "nesting": "(" * (MAX_NESTING - room) + "Pos > 1" + ")" * (MAX_NESTING - room),
        "NOTs": "NOT " * (MAX_NESTING - room) + "Pos > 1",
        "minus signs": "Pos > " + "- " * (MAX_NESTING - 2 - room) + "(- 1)",
        "OR chain": " OR ".join(f"Pos = {i}" for i in range(MAX_CHAIN_TERMS)),
        "AND chain": " AND ".join(f"Pos <> {i}" for i in range(MAX_CHAIN_TERMS)),
        "sum chain": "Pos > " + " + ".join(["1"] * MAX_CHAIN_TERMS),
        "nested arithmetic": "Pos > " + "(1 + " * (MAX_NESTING - room) + "1" + ")" * (MAX_NESTING - room),
        "height": deepest,
    }


def with_frames_used(frames: int, run, *args):  # type: ignore[no-untyped-def]
    """``run(*args)`` called ``frames`` Python frames deeper than here: what a caller with a
    deep stack of its own (a CLI, a test runner, a Spark callback) leaves to the passes."""
    if frames <= 0:
        return run(*args)
    return with_frames_used(frames - 1, run, *args)


@pytest.mark.parametrize("name", list(at_the_limits()))
@pytest.mark.parametrize("shape", ["select", "aggregate", "join"])
def test_expressions_at_the_limits_work_end_to_end(name: str, shape: str) -> None:
    """The limits are not too tight: a condition at each limit goes through every pass
    (binder, rewrite, z3 implication, shields, levels) with 300 frames of the recursion
    limit already used by the caller, in a query and in a policy."""
    condition = at_the_limits(room=1 if shape == "join" else 0)[name]
    query = {
        "select": f"SELECT SID, Pos FROM Position WHERE {condition}",
        "aggregate": f"SELECT AVG(Pos) FROM Position [RANGE 1 hour SLIDE 1 hour] WHERE {condition}",
        "join": ("SELECT Position.SID, BPressure FROM Position [RANGE 1 min], Health [RANGE 1 min] "
                 f"WHERE Position.SID = Health.SID AND ({condition})"),
    }[shape]
    policy = (f'  - {{id: limit, subject: Doctor, streams: [Position], attributes: "*", privilege: read, '
              f'where: "{condition.replace("Pos", "Position.Pos")}"}}\n')
    catalog = load_catalog_text(DRILL + policy, "drill.yaml")
    assert sys.getrecursionlimit() >= 1000
    r = with_frames_used(300, secure, catalog, "paul", query)
    assert any(g.deployed for g in r.graphs)


@pytest.mark.spark
def test_expression_at_the_limits_compiles_and_runs_on_spark(spark, tmp_path) -> None:
    """At the limits, Spark compiles and runs the rewritten plan too (one replay, tiny input)."""
    position = write_jsonl(tmp_path / "Position.jsonl", [
        {"ts": ts(i), "SID": i, "Pos": float(i), "Platoon": "X"} for i in range(4)])
    limits = at_the_limits(room=1)
    condition = (f"({limits['OR chain']}) AND ({limits['nesting']}) AND ({limits['minus signs']}) "
                 f"AND ({limits['height']})")
    rows = api.replay(DRILL_CAT, "paul", f"SELECT SID FROM Position WHERE {condition}",
                      {"Position": str(position)}, spark=spark)
    assert sorted(r["SID"] for r in rows) == [2, 3]


# -- class 13: numbers out of range ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "token", "message"),
    [
        ("SELECT SID FROM Position WHERE SID > 9223372036854775808", "9223372036854775808", "out of range"),
        ("SELECT SID FROM Position WHERE SID > -9223372036854775809", "-9223372036854775809", "out of range"),
        ("SELECT SID FROM Position WHERE SID > - - 9223372036854775808", "-", "out of range"),
        ("SELECT SID FROM Position WHERE SID > " + "9" * 5000, "9999", "out of range"),
        ("SELECT SID FROM Position WHERE Pos > 1e999", "1e999", "out of range"),
        ("SELECT SID FROM Position WHERE Pos > -1.8e309", "1.8e309", "out of range"),
        ("SELECT AVG(Pos) FROM Position [RANGE 1e20 days]", "1e20", "at most 100 years"),
        ("SELECT AVG(Pos) FROM Position [RANGE 1 hour SLIDE 36525.1 days]", "36525.1", "at most 100 years"),
        ("SELECT AVG(Pos) FROM Position [RANGE 1e999 seconds]", "1e999", "at most 100 years"),
        ("SELECT AVG(Pos) FROM Position [RANGE 0.0000001 seconds]", "0.0000001", "at least 1 microsecond"),
        ("SELECT COUNT(*) FROM Position [ROWS 99999999999999]", "99999999999999", "at most 1,000,000 tuples"),
        ("SELECT COUNT(*) FROM Position [ROWS " + "9" * 5000 + "]", "9999", "at most 1,000,000 tuples"),
    ],
)
def test_out_of_range_numbers_in_queries_are_refused_at_the_position(query: str, token: str, message: str) -> None:
    """Attack: literals beyond a long or a double, windows of 1e20 days, [ROWS 99999999999999]
    reached Spark (Py4J tracebacks, exit 1). Now a QuerySyntaxError at the literal."""
    error = quickly(secure, DRILL_CAT, "paul", query)
    assert isinstance(error, QuerySyntaxError) and message in str(error), error
    assert (error.line, error.column) == position_of(query, token)


@pytest.mark.parametrize(
    ("literal", "dtype"),
    [("2147483647", "int"), ("-2147483648", "int"), ("2147483648", "long"), ("-2147483649", "long"),
     ("9223372036854775807", "long"), ("-9223372036854775808", "long"), ("1.5", "double")],
)
def test_integer_literals_take_the_width_spark_gives_them(literal: str, dtype: str) -> None:
    """An int literal within 32 bits stays an int; beyond, within 64 bits, it is a long (as Spark
    types a Python int literal), so plans and proofs compute at Spark's width."""
    plan = bind_text(f"SELECT SID FROM Position WHERE SID < {literal}", DRILL_CAT)
    (condition,) = [n.predicate for n in walk(plan) if isinstance(n, Filter)]
    assert isinstance(condition, E.Compare) and condition.right.dtype == dtype
    assert condition.right.value == (float(literal) if dtype == "double" else int(literal))


@pytest.mark.parametrize(
    ("policy_extra", "needle", "message"),
    [
        ('window: {size: "1e20 days"}', "1e20 days", "at most 100 years"),
        ("window: {size: 1.0e+400}", "1.0e+400", "between 1 microsecond and 100 years"),
        ("window: {size: 3155760001}", "3155760001", "between 1 microsecond and 100 years"),
        ("window: {size: -5}", "-5", "between 1 microsecond and 100 years"),
        ("window: {size: .nan}", ".nan", "between 1 microsecond and 100 years"),
        ("window: {offset: true}", "true", "must be a duration"),
        ('time: ["0001-01-01T00:00:00+01:00", "2026-01-01T00:00:00Z"]', "0001", "outside years 1..9999"),
        ('time: ["2026-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00"]', "9999", "outside years 1..9999"),
        ('time: ["2026-01-01T00:00:00Z", "10000-01-01T00:00:00Z"]', "10000", "not an ISO-8601 timestamp"),
        ('where: "Position.Pos > 9223372036854775808"', "9223372036854775808", "out of range"),
        ("where: \"Position.ts > '0001-01-01T00:00:00+14:00'\"", "'0001", "not an ISO-8601 timestamp"),
    ],
)
def test_out_of_range_values_in_policies_are_catalog_errors(policy_extra: str, needle: str, message: str) -> None:
    """Attack: policy windows of 1e20 days (or inf, negative, NaN seconds), time bounds whose UTC
    value lies outside years 1..9999 (Python's OverflowError), literals beyond a long. Now an
    error naming the catalog's file:line:col."""
    policy = f"  - {{id: w, subject: Doctor, streams: [Position], privilege: avg, attributes: [Pos], {policy_extra}}}\n"
    text = DRILL + policy
    error = quickly(load_catalog_text, text, "drill.yaml")
    assert isinstance(error, SourceError) and message in str(error), error
    line = text.count("\n", 0, text.index(policy)) + 1
    assert error.line == line and str(error).startswith(f"drill.yaml:{line}:")
    assert error.column is not None and error.column <= policy.index(needle) + 1


def test_out_of_range_timestamps_in_queries_and_actions() -> None:
    """Attack: timestamps whose UTC value is outside years 1..9999 in a query literal and in an
    action (OverflowError tracebacks)."""
    error = quickly(secure, DRILL_CAT, "paul", "SELECT SID FROM Position WHERE ts > '9999-12-31T23:59:59-01:00'")
    assert isinstance(error, BindError) and "not an ISO-8601 timestamp" in str(error)
    text = DRILL.replace('start: "2026-03-01T10:00:00Z"', 'start: "0001-01-01T00:00:00+01:00"')
    error = quickly(load_catalog_text, text, "drill.yaml")
    assert isinstance(error, CatalogError) and "not an ISO-8601 timestamp" in str(error)


def test_durations_at_the_bounds_are_accepted() -> None:
    """The bounds themselves are valid: 1 microsecond, 100 years, 1,000,000 rows, the least long."""
    assert parse_duration("0.000001 seconds") == 1e-6
    assert parse_duration("36525 days") == 100 * 365.25 * 86400
    assert parse_query("SELECT COUNT(*) FROM Position [ROWS 1000000]").sources[0].window.rows == 1_000_000
    secure(DRILL_CAT, "paul", "SELECT SID FROM Position WHERE SID > -9223372036854775808 AND Pos < 1e308")


@pytest.mark.spark
def test_long_literals_compare_with_int_columns_on_spark(spark, tmp_path) -> None:
    """End to end: a literal beyond 32 bits (a long) compared with an int column, and the least
    long, run on Spark without an overflow or a cast error."""
    position = write_jsonl(tmp_path / "Position.jsonl", [
        {"ts": ts(i), "SID": sid, "Pos": 1.0, "Platoon": "X"} for i, sid in enumerate([1, 2147483647, -2147483648])])
    rows = api.replay(DRILL_CAT, "paul", "SELECT SID FROM Position WHERE SID < 3000000000 AND SID > "
                                         "-9223372036854775808 AND SID + 1 > -2147483649", {"Position": str(position)},
                      spark=spark)
    assert sorted(r["SID"] for r in rows) == [-2147483648, 1, 2147483647]


@pytest.mark.parametrize("tuples", ["[1e999, 5]", "{9223372036854775808}", "(-" + "9" * 5000 + ", 1)", "[1, 1e400]"])
def test_out_of_range_numbers_in_sp_patterns_are_input_errors(tuples: str) -> None:
    """Attack: a provider's SP whose tuple pattern holds a number no long or double holds
    (int() refused the digits with a ValueError; 10**400 overflowed float() when matched).
    Now an InputError naming the record; the least long is still a value."""
    record = {"kind": "sp", "streams": "HeartRate", "tuples": tuples, "roles": "GP", "ts": ts(0), "sn": 1}
    error = quickly(sp_from_record, record, "heart.jsonl:7")
    assert isinstance(error, InputError) and str(error).startswith("heart.jsonl:7 tuples:1:")
    assert "out of range" in str(error)
    fine = sp_from_record({**record, "tuples": "[-9223372036854775808, 9223372036854775807]"}, "heart.jsonl:8")
    assert [fine.tuples.matches(v) for v in (0, 10**400, -(10**400), "x", None, float("nan"))] == [
        True, False, False, False, False, False]
