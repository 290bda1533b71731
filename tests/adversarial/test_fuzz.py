"""Grammar-based fuzzing: no input makes streamwarden crash, hang or print a traceback.

Each fuzzer generates inputs from a small grammar of what a user (or a data provider, or
an administrator's typo) can write, near and over the stated limits and mixed with
garbage tokens, and feeds them to the entry point that reads them. The only exceptions
allowed are :class:`streamwarden.errors.StreamwardenError` subclasses whose message has a
non-empty first line (what the CLI prints); every case must finish within ``deadline``.

Runs derandomized (the same cases every run, so CI is stable) and within about a minute:
``settings(max_examples=..., deadline=...)`` below.
"""

from __future__ import annotations

import json
import math
import string

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.catalog.loader import load_catalog, load_catalog_text
from streamwarden.catalog.punctuations import sp_from_record
from streamwarden.errors import StreamwardenError
from streamwarden.language.insert_sp import parse_insert_sp
from streamwarden.language.parser import MAX_CHAIN_TERMS, MAX_NESTING
from streamwarden.language.patterns import parse_pattern
from streamwarden.security.passes import SecurityOptions, secure

FUZZ = settings(max_examples=250, deadline=2000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

CATALOG = """
streams:
  Position: {schema: {ts: timestamp, SID: int, Pos: double, Platoon: string}}
  Health:   {schema: {ts: timestamp, SID: int, Platoon: string, Heart: int, BPressure: long}}
roles:
  Doctor: {}
  Cardiologist: {inherits: [Doctor]}
users:
  paul: {roles: [Doctor], profile: {Platoon: X, Limit: 500}}
  carla: {roles: [Cardiologist], profile: {Platoon: ~}}
actions:
  a: {start: "2026-03-01T10:00:00Z", end: null, target: 500.0}
policies:
  - {id: p1, subject: Doctor, streams: [Position], attributes: [Pos, SID], privilege: read,
     where: "Position.Platoon = self.Platoon"}
  - {id: p2, subject: Doctor, streams: [Position], attributes: [Pos], privilege: avg,
     where: "Position.Platoon <> self.Platoon", time: ["start(a)", "end(a)"],
     window: {size: "1 hour", offset: "1 hour"}}
  - {id: p3, subject: Doctor, streams: [Health], attributes: "*", privilege: read, where: "Health.Heart < self.Limit"}
  - {id: p4, subject: Doctor, streams: [Health, Position], attributes: [Health.BPressure, Position.SID, Pos],
     privilege: read, where: "Health.Platoon <> self.Platoon AND Position.SID = Health.SID AND Pos >= target(a) - 10"}
  - {id: p5, subject: Cardiologist, streams: [Health], attributes: [Heart], privilege: max, window: {size: 60}}
"""
CAT = load_catalog_text(CATALOG, "fuzz.yaml")


def check_clean(exc: BaseException) -> None:
    """A refusal is a StreamwardenError with a first line to print; anything else is a crash."""
    if not isinstance(exc, StreamwardenError):
        raise exc
    first = (str(exc).splitlines() or [""])[0]
    assert first.strip(), f"{type(exc).__name__} with an empty message"


def attempt(run, *args):  # type: ignore[no-untyped-def]
    try:
        return run(*args)
    except Exception as exc:  # noqa: BLE001 - the point is to see every kind
        check_clean(exc)
        return None


# -- the expression grammar (CQL WHERE / SELECT items, policy conditions) ------------------------
ATTRIBUTES = ["Pos", "SID", "Platoon", "Heart", "BPressure", "ts", "Nope", "level"]
QUALIFIERS = ["Position", "Health", "P", "H", "self", "position", "Nowhere"]
NUMBERS = ["0", "1", "7", "2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
           "99999999999999999999999", "1.5", ".5", "1.", "1e308", "1e309", "1e999", "1e-999", "0.0", "3e2",
           "0" * 30 + "1", "9" * 400]
STRINGS = ["'X'", "\"Y\"", "'it''s'", "\"say \\\"hi\\\"\"", "''", "'\u2028'", "'é'", "'unterminated", "\"\\\\\"",
           "'" + "x" * 300 + "'"]
OTHER_LITERALS = ["NULL", "TRUE", "FALSE", "6:00am", "19:30", "25:00", "13:00pm", "[1, ⊥]", "[T, T]",
                  "'2026-03-01T10:00:00Z'", "'0001-01-01T00:00:00+01:00'", "'9999-12-31T23:59:59-01:00'", "'yesterday'"]
GARBAGE = ["(", ")", ",", ".", ";", "[", "]", "{", "}", "*", "/", "%", "+", "-", "=", "<>", "!=", "<", ">=",
           "AND", "OR", "NOT", "IS", "SELECT", "FROM", "WHERE", "GROUP BY", "AS", "RANGE", "ROWS", "ON RESULT",
           "⊥", "\u2028", "\x00", "\ufeff", "é", "$", "@", "#", "--", "'", "\"", "\\", "::"]
BINARY = ["AND", "OR", "=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"]
CALLS = ["start(a)", "end(a)", "target(a)", "start(zz)", "target(a, a)", "nope(Pos)", "AVG(Pos)", "COUNT(*)", "COUNT"]


def names() -> st.SearchStrategy[str]:
    bare = st.sampled_from(ATTRIBUTES)
    qualified = st.builds(lambda q, a: f"{q}.{a}", st.sampled_from(QUALIFIERS), st.sampled_from(ATTRIBUTES))
    return st.one_of(bare, qualified)


def leaves() -> st.SearchStrategy[str]:
    return st.one_of(names(), st.sampled_from(NUMBERS), st.sampled_from(STRINGS), st.sampled_from(OTHER_LITERALS),
                     st.sampled_from(CALLS))


def chain(n: int, op: str, term: str = "Pos = 1") -> str:
    return f" {op} ".join([term] * n)


def near_limits() -> st.SearchStrategy[str]:
    """Shapes at and just over every parser limit, and the issue's attacks."""
    around = st.sampled_from([MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 200, 10_000])
    terms = st.sampled_from([MAX_CHAIN_TERMS - 1, MAX_CHAIN_TERMS, MAX_CHAIN_TERMS + 1, 5_000])
    return st.one_of(
        around.map(lambda d: "(" * d + "Pos > 1" + ")" * d),
        around.map(lambda d: "NOT " * d + "Pos > 1"),
        around.map(lambda d: "Pos > " + "- " * d + "1"),
        around.map(lambda d: "Pos > " + "(1 + " * d + "1" + ")" * d),
        around.map(lambda d: "start(" * d + "a" + ")" * d + " IS NULL"),
        st.tuples(terms, st.sampled_from(["OR", "AND"])).map(lambda t: chain(t[0], t[1])),
        st.tuples(terms, st.sampled_from(["+", "*", "-", "/"])).map(lambda t: "Pos > " + chain(t[0], t[1], "1")),
        st.just("Pos > " + "1" * 70_000),
    )


def expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(BINARY), inner),
            inner.map(lambda e: f"NOT {e}"),
            inner.map(lambda e: f"-{e}"),
            inner.map(lambda e: f"({e})"),
            st.builds(lambda e, neg: f"{e} IS {'NOT ' if neg else ''}NULL", inner, st.booleans()),
            st.builds(lambda e, g: f"{e} {g}", inner, st.sampled_from(GARBAGE)),
            st.builds(lambda g, e: f"{g} {e}", st.sampled_from(GARBAGE), inner),
        )

    return st.recursive(leaves(), extend, max_leaves=12)


# -- CQL queries ----------------------------------------------------------------------------------
# Mostly well-typed queries over the test catalog, so that they reach every pass (binder,
# rewrite, z3 implication, shields, levels); then some corrupted, some at the limits.
NUMERIC = {"Position": ["Pos", "SID"], "Health": ["SID", "Heart", "BPressure"]}
TEXTUAL = {"Position": ["Platoon"], "Health": ["Platoon"]}
GOOD_NUMBERS = ["0", "1", "7", "-3", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
                "-9223372036854775808", "1.5", ".5", "1.", "1e308", "-1e308", "1e-999", "3e2", "0" * 30 + "1",
                "target(a)", "start(a) - start(a)"]
GOOD_STRINGS = ["'X'", "\"Y\"", "'it''s'", "\"say \\\"hi\\\"\"", "''", "'\u2028'", "'é'", "'\\'"]


def typed(streams: list[str]) -> st.SearchStrategy[str]:
    """Boolean expressions over ``streams`` that bind (numbers with numbers, text with text)."""
    def attrs(table: dict[str, list[str]]) -> list[str]:
        names_ = [f"{s}.{a}" for s in streams for a in table[s]]
        return names_ + ([a for a in table[streams[0]]] if len(streams) == 1 else [])

    def num_extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(["+", "-", "*", "/", "%"]),
                                   inner),
                         inner.map(lambda e: f"({e})"), inner.map(lambda e: f"- {e}"))

    number = st.recursive(st.one_of(st.sampled_from(attrs(NUMERIC)), st.sampled_from(GOOD_NUMBERS)), num_extend,
                          max_leaves=6)
    text = st.one_of(st.sampled_from(attrs(TEXTUAL)), st.sampled_from(GOOD_STRINGS))
    atom = st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", number, st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]),
                  number),
        st.builds(lambda a, op, b: f"{a} {op} {b}", text, st.sampled_from(["=", "<>", "<"]), text),
        st.builds(lambda e, neg: f"{e} IS {'NOT ' if neg else ''}NULL", st.one_of(number, text), st.booleans()),
        st.sampled_from(["TRUE", "FALSE", "NULL", f"{streams[0]}.ts > '2026-03-01T10:00:00Z'",
                         f"{streams[0]}.ts > 6:00am", f"{streams[0]}.ts >= start(a)", f"{streams[0]}.ts <= end(a)"]),
    )

    def bool_extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(["AND", "OR"]), inner),
                         inner.map(lambda e: f"NOT {e}"), inner.map(lambda e: f"({e})"))

    return st.recursive(atom, bool_extend, max_leaves=8)


UNITS = ["ms", "seconds", "s", "min", "minutes", "hour", "hours", "days", "d", "weeks"]
AMOUNTS = ["1", "5", "30", "0", "0.0000001", "1.5", "1e20", "36500", "36525", "36600", "1e999", "99999999999"]
ROWS = ["1", "3", "100", "0", "1000000", "1000001", "99999999999999", "2147483648", "1.5", "9" * 500]


def windows(aggregate: bool) -> st.SearchStrategy[str]:
    good = st.sampled_from(["1 min", "10 seconds", "1 hour", "2 hours", "1 day"])
    odd = st.builds(lambda n, u: f"{n} {u}", st.sampled_from(AMOUNTS), st.sampled_from(UNITS))
    duration = st.one_of(good, good, odd)
    ranges = st.one_of(duration.map(lambda d: f"[RANGE {d}]"),
                       st.builds(lambda a, b, comma: f"[RANGE {a}{',' if comma else ''} SLIDE {b}]", duration, duration,
                                 st.booleans()))
    rows = st.sampled_from(ROWS).map(lambda n: f"[ROWS {n}]")
    if aggregate:
        return st.one_of(ranges, ranges, rows)
    return st.one_of(st.just(""), st.just("[NOW]"), st.just("[UNBOUNDED]"), ranges, rows)


@st.composite
def well_formed(draw) -> str:  # type: ignore[no-untyped-def]
    shape = draw(st.sampled_from(["select", "select", "aggregate", "join", "join_aggregate"]))
    if shape in ("join", "join_aggregate"):
        streams = ["Position", "Health"]
        from_ = f"Position {draw(windows(True))}, Health {draw(windows(True))}"
        where = f"Position.SID = Health.SID AND ({draw(typed(streams))})"
    else:
        streams = [draw(st.sampled_from(["Position", "Health"]))]
        from_ = f"{streams[0]} {draw(windows(shape == 'aggregate'))}"
        where = draw(typed(streams))
    stream = streams[0]
    if shape in ("aggregate", "join_aggregate"):
        func = draw(st.sampled_from(["AVG", "SUM", "MIN", "MAX", "COUNT"]))
        arg = draw(st.one_of(st.sampled_from([f"{stream}.{a}" for a in NUMERIC[stream]]), st.just("*")))
        items = f"{func}({arg if func == 'COUNT' or arg != '*' else NUMERIC[stream][0]}) AS v"
        group = draw(st.sampled_from(["", f" GROUP BY {stream}.Platoon"]))
        if group:
            items = f"{stream}.Platoon, " + items
        text = f"SELECT {items} FROM {from_}"
    else:
        items = draw(st.sampled_from(["*", f"{stream}.*", f"{stream}.SID", f"{stream}.ts, {stream}.SID AS s",
                                      f"{stream}.SID + 1 AS plus", f"{stream}.Platoon"]))
        text, group = f"SELECT {items} FROM {from_}", ""
    if draw(st.integers(0, 4)) > 0:
        text += f" WHERE {where}"
    return text + group


@st.composite
def queries(draw) -> str:  # type: ignore[no-untyped-def]
    kind = draw(st.integers(0, 9))
    if kind == 0:  # an attack shape at or over a limit as the WHERE
        return f"SELECT SID FROM Position WHERE {draw(near_limits())}"
    if kind == 1:  # the untyped grammar: anything goes
        return f"SELECT {draw(expressions())} FROM Position WHERE {draw(expressions())}"
    text = draw(well_formed())
    if kind == 2:  # garbage tokens mixed in, a token dropped or repeated
        words = text.split(" ")
        at = draw(st.integers(0, len(words) - 1))
        edit = draw(st.sampled_from(["insert", "drop", "repeat"]))
        if edit == "insert":
            words.insert(at, draw(st.one_of(st.sampled_from(GARBAGE), st.text(max_size=4))))
        elif edit == "drop":
            del words[at]
        else:
            words.insert(at, words[at])
        text = " ".join(words)
    return text


@FUZZ
@given(queries(), st.sampled_from(["paul", "carla"]))
def test_fuzz_cql_queries_never_crash(text: str, user: str) -> None:
    """Attack: arbitrary CQL (deep nesting, long chains, out-of-range numbers and durations,
    quotes, garbage tokens) through every security pass: only clean refusals, within 2 s."""
    attempt(secure, CAT, user, text)


LEVELS_AND_SPS = load_catalog_text("""
lattice: {classes: {COI1: ["1", "2"], COI2: [A, B, C]}}
streams:
  MessageLog:
    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, outcome: string}
    level: {from: sender}
  HeartRate:
    schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}
    key: Patient_id
    punctuated_by: Patient_id
    server_policies: [{streams: HeartRate, tuples: "*", attributes: "{Beats_per_min}", roles: "{C}", sign: "+"}]
roles: {C: {}, GP: {inherits: [C]}, Auditor: {}}
users:
  cm: {roles: [Auditor], clearance: "[T, T]"}
  c1: {roles: [Auditor], clearance: "[1, ⊥]"}
  gus: {roles: [GP]}
policies:
  - {id: a1, subject: Auditor, streams: [MessageLog], attributes: "*", privilege: read,
     where: "MessageLog.outcome <> 'x'"}
""", "levels.yaml")
LEVELS = ["[1, ⊥]", "[T, T]", "[⊥, ⊥]", "[2, B]", "[1]", "[9, Z]", "[bot, top]", "[1, _]"]


@st.composite
def level_and_sp_queries(draw) -> str:  # type: ignore[no-untyped-def]
    level = st.sampled_from(LEVELS)
    window = draw(st.sampled_from(["", "[ROWS 100]", "[ROWS 1000001]", "[RANGE 1 min]", "[RANGE 1 hour SLIDE 1 min]"]))
    shape = draw(st.integers(0, 3))
    if shape == 0:
        items = draw(st.sampled_from(["COUNT(*)", "serviceId, level", "level AS lv", "COUNT(*) AS n, level"]))
        where = draw(st.sampled_from(["msgType = \"send\"", "sender = '1'", "outcome IS NULL", "TRUE"]))
        op = draw(st.sampled_from(['=', '<>', '<']))
        text = f"SELECT {items} FROM MessageLog {window} WHERE {where} AND level {op} {draw(level)}"
    elif shape == 1:
        windows = st.sampled_from(['[ROWS 5]', '[RANGE 1 min]', ''])
        text = (f"SELECT R.serviceId FROM MessageLog R {draw(windows)}, "
                f"MessageLog S {draw(windows)} WHERE R.serviceId = S.serviceId")
    else:
        statement = (f"INSERT SP INTO STREAM Out LET DDP = TUPLES:{draw(patterns())}, SRP = frbac:{draw(patterns())}"
                     f"{draw(st.sampled_from(['', ' WITH GRANT OPTION', ', SIGN = NEGATIVE']))}")
        items = draw(st.sampled_from(["Patient_id, Beats_per_min", "ts, Patient_id", "Beats_per_min",
                                      "AVG(Beats_per_min)"]))
        text = (f"SELECT {items} FROM HeartRate {window} WHERE Beats_per_min > {draw(st.sampled_from(GOOD_NUMBERS))}"
                + (f" ON RESULT ({statement})" if shape == 2 else ""))
    if draw(st.integers(0, 4)) == 0:
        words = text.split(" ")
        words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(GARBAGE)))
        text = " ".join(words)
    return text


@FUZZ
@given(level_and_sp_queries(), st.sampled_from(["cm", "c1", "gus"]), st.sampled_from([None, *LEVELS]))
def test_fuzz_level_and_punctuation_queries_never_crash(text: str, user: str, level: str | None) -> None:
    """Attack: queries over a levelled stream (level literals, `level` compared and aliased,
    --level at or above the clearance, count-based self-joins) and over a punctuated stream
    (ON RESULT with any INSERT SP): only clean refusals, within 2 s."""
    attempt(secure, LEVELS_AND_SPS, user, text, SecurityOptions(level=level))


# -- policy conditions inside catalog YAML -------------------------------------------------------
@FUZZ
@given(expressions(), st.sampled_from(["[Position]", "[Health]", "[Health, Position]"]),
       st.sampled_from(["read", "avg", "count"]))
def test_fuzz_policy_conditions_never_crash(condition: str, streams: str, privilege: str) -> None:
    """Attack: arbitrary policy `where` conditions (any expression, any depth, any literal)
    in a catalog: the catalog loads or is refused cleanly; if it loads, instantiating the
    policy for users with and without profile values refuses cleanly or applies."""
    where = json.dumps(condition)  # a YAML double-quoted scalar
    text = CATALOG + (f"  - {{id: fz, subject: Doctor, streams: {streams}, attributes: '*', privilege: {privilege},\n"
                      f"     where: {where}}}\n")
    catalog = attempt(load_catalog_text, text, "fuzz.yaml")
    if catalog is not None:
        query = ("SELECT AVG(Pos) FROM Position [RANGE 1 hour SLIDE 1 hour]" if privilege == "avg"
                 else "SELECT Position.SID, BPressure FROM Position [RANGE 1 min], Health [RANGE 1 min] "
                      "WHERE Position.SID = Health.SID" if "," in streams else f"SELECT * FROM {streams[1:-1]}")
        for user in ("paul", "carla"):
            attempt(secure, catalog, user, query)


# -- security punctuations -----------------------------------------------------------------------
GOOD_PATTERN_VALUES = ["120", "133", "-5", "0", "1.5", "-9223372036854775808", "9223372036854775807", "1e308",
                       "GP", "C", "HeartRate", "Beats_per_min", "'x y'", "\"q\"", "_a"]
BAD_PATTERN_VALUES = ["- 5", "1e999", "9223372036854775808", "9" * 500, "9" * 5000, "ALL", "*", "é", "⊥", "(", "",
                      "'", "--"]


def patterns() -> st.SearchStrategy[str]:
    value = st.one_of(st.sampled_from(GOOD_PATTERN_VALUES), st.sampled_from(GOOD_PATTERN_VALUES),
                      st.sampled_from(BAD_PATTERN_VALUES))
    return st.one_of(
        st.sampled_from(["*", "{}", "ALL", "*", "{}"]),
        value,
        st.builds(lambda a, b, inc: f"{'[' if inc else '('}{a}, {b}{']' if inc else ')'}", value, value, st.booleans()),
        st.lists(value, max_size=6).map(lambda vs: "{" + ", ".join(vs) + "}"),
        st.sampled_from(["", "{", "[", "(1, 2]", "[1 2]", "{a b}", "[1,"]),
        st.text(max_size=20),
    )


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                        st.text(max_size=10), st.lists(st.integers(), max_size=2), patterns())


@st.composite
def sp_records(draw) -> dict:  # type: ignore[no-untyped-def]
    record: dict = {"kind": "sp"}
    for key, good in (("streams", patterns()), ("tuples", patterns()), ("attributes", patterns()),
                      ("roles", patterns()), ("sign", st.sampled_from(["+", "-", "positive", "NEGATIVE", "x"])),
                      ("immutable", st.booleans()), ("grant", st.booleans()),
                      ("ts", st.sampled_from(["2026-03-01T10:00:00Z", "0001-01-01T00:00:00+01:00", "x", "9" * 100])),
                      ("sn", st.sampled_from([1, 2, 0, -1, True, 2**70, "1"])), ("Patient_id", st.integers())):
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue  # missing
        record[key] = draw(JSON_VALUES) if choice == 1 else draw(good)
    return record


MATCH_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**80), 2**80), st.floats(), st.text(max_size=8))


@FUZZ
@given(sp_records(), st.lists(MATCH_VALUES, max_size=4))
def test_fuzz_sp_records_and_patterns_never_crash(record: dict, keys: list) -> None:
    """Attack: SP records from a provider with any fields, any pattern texts (numbers out of
    range, unterminated quotes, garbage) and tuples with any key values: a clean InputError,
    or an SP whose patterns match every value without raising."""
    punctuation = attempt(sp_from_record, record, "fuzz.jsonl:1", "Patient_id")
    if punctuation is None:
        return
    for key in keys:
        punctuation.matches_object("HeartRate", key, "Beats_per_min")
        punctuation.matches_roles({"GP", "C"})
        for pattern in (punctuation.streams, punctuation.tuples, punctuation.attributes, punctuation.roles):
            pattern.matches(key)
            assert parse_pattern(str(pattern)) == pattern or _has_nan(pattern)  # printing round-trips


def _has_nan(pattern: object) -> bool:
    values = [getattr(pattern, n, None) for n in ("value", "low", "high")] + list(getattr(pattern, "values", ()))
    return any(isinstance(v, float) and math.isnan(v) for v in values)


@FUZZ
@given(patterns(), patterns(), st.sampled_from(["POSITIVE", "NEGATIVE", "MAYBE"]), st.booleans())
def test_fuzz_insert_sp_never_crashes(tuples: str, roles: str, sign: str, grant: bool) -> None:
    """Attack: INSERT SP statements (Nehme et al. Fig. 7) with any patterns."""
    text = (f"INSERT SP INTO STREAM HeartRate LET DDP = TUPLES:{tuples}, SRP = frbac:{roles}"
            f"{' WITH GRANT OPTION' if grant else ''}, SIGN = {sign}")
    attempt(parse_insert_sp, text)


# -- catalog YAML structure ----------------------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                    st.text(alphabet=string.ascii_letters + string.digits + "._-*()[]{}: ,'\"⊥é", max_size=12),
                    st.sampled_from(["timestamp", "int", "read", "Doctor", "Position", "*", "start(a)", "1 hour",
                                     "2026-03-01T10:00:00Z", "2026-02-30", "~", "ts", "Pos", "Position.Pos",
                                     "Health.Pos", "Nowhere.Pos", "[1, ⊥]", "self.Platoon = 'X'"]))
KEYS = st.sampled_from(["streams", "roles", "users", "actions", "policies", "lattice", "schema", "key", "punctuated_by",
                        "server_policies", "combine", "level", "inherits", "profile", "clearance", "start", "end",
                        "target", "id", "subject", "attributes", "where", "privilege", "time", "window", "size",
                        "offset", "classes", "from", "tuples", "sign", "Position", "Doctor", "paul", "a", "ts",
                        "Pos", "SID", "typo"])
TREES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(KEYS, inner, max_size=5)), max_leaves=25)


BASE_DOCUMENT = yaml.safe_load((CATALOG + """
lattice: {classes: {COI1: ["1", "2"], COI2: [A, B]}}
streams:
  HeartRate:
    schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}
    key: Patient_id
    punctuated_by: Patient_id
    server_policies: [{streams: HeartRate, tuples: "*", attributes: "{Beats_per_min}", roles: "{C}", sign: "+"}]
    combine: intersect
  Log: {schema: {ts: timestamp, sender: string}, level: {from: sender}}
""").replace("streams:\n  Position", "old_streams:\n  Position", 1))
BASE_DOCUMENT["streams"].update(BASE_DOCUMENT.pop("old_streams"))
BASE_DOCUMENT["users"]["cm"] = {"roles": ["Doctor"], "clearance": "[1, ⊥]"}


@st.composite
def mutated_catalogs(draw) -> dict:  # type: ignore[no-untyped-def]
    """The full-featured base catalog with a few values anywhere replaced by arbitrary trees
    (or keys added or removed), so validation deep inside each section is reached."""
    document = json.loads(json.dumps(BASE_DOCUMENT, default=str))
    for _ in range(draw(st.integers(1, 3))):
        node, parent, key = document, None, None
        for _depth in range(draw(st.integers(1, 6))):
            children = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            if not children:
                break
            key, child = children[draw(st.integers(0, len(children) - 1))]
            parent = node
            if not isinstance(child, (dict, list)) or draw(st.integers(0, 3)) == 0:
                break
            node = child
        if parent is None:
            continue
        action = draw(st.sampled_from(["replace", "replace", "replace", "add", "remove"]))
        if action == "replace":
            parent[key] = draw(TREES)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.one_of(KEYS, SCALARS.filter(lambda v: isinstance(v, (str, int)))))] = draw(TREES)
        elif action == "add":
            parent.append(draw(TREES))
        else:
            del parent[key]
    return document


@FUZZ
@given(mutated_catalogs())
def test_fuzz_catalog_structure_never_crashes(document: dict) -> None:
    """Attack: a catalog with arbitrary mappings, lists and scalars in place of any value
    (nulls, huge integers, NaN, lists where names are expected, unknown keys): it loads or
    is refused cleanly; if it loads, every user's query over every stream is too."""
    catalog = attempt(load_catalog_text, yaml.safe_dump(document, allow_unicode=True), "fuzz.yaml")
    if catalog is None:
        return
    for user in list(catalog.users)[:3]:
        for stream in list(catalog.streams)[:3]:
            attempt(secure, catalog, user, f"SELECT * FROM {stream}")


MUTATIONS = ["&x ", "*x", "&y [*y]", "!!python/object:os.system ", "!!int ", "!!binary ", "? [a]\n: 1\n", "<<: *x\n",
             "\t", "\x01", "\ufeff", "\u2028", "\x85", "---\n", "...\n", "[" * 100, "{" * 100, "%YAML 1.1\n",
             "'", "\"", "|\n", ">-\n", "~", "- ", ": ", "#", "9" * 5000, "1.0e+999", "2026-02-30"]


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(CATALOG)), st.sampled_from(MUTATIONS)), min_size=1, max_size=4))
def test_fuzz_catalog_text_mutations_never_crash(edits: list) -> None:
    """Attack: the test catalog with YAML syntax spliced in anywhere: anchors and aliases
    (recursive ones too), unsafe and wrong tags, control characters, deep brackets."""
    text = CATALOG
    for at, piece in sorted(edits, reverse=True):
        text = text[:at] + piece + text[at:]
    attempt(load_catalog_text, text, "fuzz.yaml")


@settings(FUZZ, max_examples=60)
@given(st.binary(max_size=40), st.integers(0, len(CATALOG)))
def test_fuzz_catalog_files_with_any_bytes_never_crash(tmp_path_factory, noise: bytes, at: int) -> None:
    """Attack: arbitrary bytes (invalid UTF-8, NULs, BOMs) spliced into a catalog file."""
    data = CATALOG.encode()
    path = tmp_path_factory.mktemp("bytes") / "catalog.yaml"
    path.write_bytes(data[:at] + noise + data[at:])
    attempt(load_catalog, path)


@pytest.mark.parametrize("alias_bomb_levels", [9])
def test_fuzz_seed_alias_bomb_is_refused_fast(alias_bomb_levels: int) -> None:
    """Seed case kept next to the fuzzers: the 9-level lol bomb (see test_bad_input.py)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, alias_bomb_levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}" if level > 1 else "*a"] * 9) + "]")
    attempt(load_catalog_text, "\n".join(lines) + "\n", "bomb.yaml")
