"""The provider gateway and the engine's reader agree (issue 24, finding 7).

A record the gateway accepts goes into the stream's input, where the engine reads it in
the JVM (Spark's JSON reader, ``sp_problem``, ``SpEncoder.java``/``PatternReader.java``); a
record the engine calls broken stops every pipeline on the stream. So for provider bodies
generated both near-valid and hostile (nulls, values of another JSON type, odd patterns,
unicode, numbers beyond every range, lone surrogates, extra fields), whatever the gateway
(:func:`streamwarden.service.providers.check_records`) accepts is written as it writes it
(:func:`~streamwarden.service.providers.append_records`) and read by the real reader in one
Spark batch job per example; then:

* no record is broken;
* each SP reads as the gateway parsed it: pattern texts, sign, flags, sn, ts, provider value
  and ``seq``, and the JVM encoder's code for it equals the Python encoder's (the same
  parsed patterns); re-reading the written record gives the gateway's SP;
* each tuple reads as the gateway typed it: every attribute, ``sp_ts``, ``sp_csn``, ``seq``.

Conversely, records the engine calls broken are refused by the gateway. And the README's
provider example is accepted and governed by its patient's policy in the engine.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from conftest import ROOT
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import StreamDef
from streamwarden.catalog.punctuations import checked_sp_record
from streamwarden.engine.jvm import sp_encoder
from streamwarden.engine.shield.decide import sp_problem
from streamwarden.engine.shield.kernel import MALFORMED, SP_TEXT
from streamwarden.engine.shield.reader import read_punctuated, shielded_input
from streamwarden.language.expressions import parse_timestamp
from streamwarden.security.punctuation.encode import SpEncoder, SpText
from streamwarden.service.errors import ApiError
from streamwarden.service.providers import append_records, check_records

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, ward: string, pulse: int, dose: double, total: long, alarm: boolean,
             seen: timestamp}
    key: patient
    punctuated_by: patient
  Notes:
    schema: {ts: timestamp, device: string, note: string}
    key: device
roles: {Doctor: {}, Nurse: {}}
users: {ann: {roles: [Doctor]}}
""", "agreement.yaml")
ROLES = frozenset({"Doctor", "Nurse"})
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Per example: this many bodies, each one POST (one file when accepted), read in one Spark job.
BODIES = 10
EXAMPLES = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate],  # a shrink step is a Spark job: off
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example])


# -- JSON text, hostile tokens included ----------------------------------------------------------------
@dataclass(frozen=True)
class Raw:
    """A JSON token written as is: numbers Python's json would not write (1e400, 1.0 for 1)."""

    text: str


def line_of(record: dict[Any, Any]) -> str:
    """One record as a JSON line (json.dumps escapes a lone surrogate as ``\\ud800``)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {v.text if isinstance(v, Raw) else json.dumps(v)}"
                           for k, v in record.items()) + "}"


HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, 1, -1, 2 ** 31, 2 ** 63, 10 ** 30, 1.5, -0.0, 1e308, "", "x", "1",
                     "true", "*", "\ud800", "\udfff x", "\u2028", "\x00", [], ["Doctor"], {"a": 1}, "NaN"]),
    st.sampled_from([Raw("1e400"), Raw("-1e400"), Raw("1.0"), Raw("1E2"), Raw("NaN"), Raw("Infinity"),
                     Raw("9" * 400), Raw("-0")]),
    st.text(max_size=8),
)
def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of ``choices`` (weight, strategy), drawn by weight (``one_of`` favours its first branches).
    Hypothesis favours the ends of an integer range, so the first choice holds both ends."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    table = table[1:] + table[:1]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


GOOD_PATTERNS = [
    "*", "{}", "ALL", "all", "Doctor", "Nurse", "{Doctor, Nurse}", "{ Doctor , Nurse }", " * ", "[1, 9]", "(1, 9)",
    "7", "-7", "{7, 8}", "[-9223372036854775808, 9223372036854775807]", "1e308", "0.1", ".5", "'*'", "'Doc tor'",
    '"q"', "'it''s'", "'\u00e9'", "''", "-- a comment\n*", "{a, 'b c', 3, -4.5}", "ward", "{ward, pulse}", "[a, z]",
    "Vitals", "{Vitals, Notes}", "(0, 0)", "{'\u00e9', x}", "'a\\'b'", "'\U0001F600'", "\t{Doctor}\n", "1.50",
    "007", "'007'", "-0", "{'Doctor', \"Nurse\"}"]
ODD_PATTERNS = [
    "9223372036854775808", "1e309", "1_0", "'\\'", "{Doctor,", "[1 2]", "Doctor\u00a0", "\uff24octor", "\u0661",
    "*\x0b", "\x1c*", "{'\ud800'}", "!=", "<>", "{'x\n'}", "(1, 2]", "[1,", "\u2028*", "*\x00", "{a b}", "'"]
PATTERNS = weighted(
    (7, st.sampled_from(GOOD_PATTERNS)),
    (2, st.sampled_from(ODD_PATTERNS)),
    (1, st.one_of(st.text(alphabet="{}[](),*'\" -.eE0123456789acDN_\t", max_size=14), st.text(max_size=6))),
)
TIMES = weighted(
    (5, st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                     timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                                timezone(timedelta(hours=-11))])).map(lambda d: d.isoformat())),
    (3, st.sampled_from([
        "2026-03-01T10:00:00Z", "2026-03-01T10:00:00.5Z", "2026-03-01T10:00:00.123456Z", "2026-03-01T11:00:00+01:00",
        "2026-03-01t10:00:00z", "2026-03-01", "2026-03-01T10:00", " 2026-03-01T10:00:00Z ", "2026-03-01 10:00:00",
        "0001-01-01T00:00:00Z", "0999-12-31T23:59:59Z", "9999-12-31T23:59:59.999999Z", "0001-01-01T00:30:00+01:00",
        "20260301T100000Z", "2026-03-01T10:00:00.1234567Z"])),
    (1, st.sampled_from(["9999-12-31T23:59:59-01:00", "10000-01-01T00:00:00Z", "+10000-01-01T00:00:00Z",
                         "2026-02-30T00:00:00Z", "soon", "", "2026-03-01T10:00:00\ud800"])),
)
INT32 = st.integers(-2 ** 31, 2 ** 31 - 1)
INT64 = st.integers(-2 ** 63, 2 ** 63 - 1)
VALUES = {"int": INT32, "long": INT64, "string": st.text(max_size=10), "boolean": st.booleans(), "timestamp": TIMES,
          "double": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2 ** 70, 2 ** 70))}


@st.composite
def mutated(draw: st.DrawFn, record: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """``record`` with one to three fields removed, set to a hostile value, or added."""
    record = dict(record)
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(names + ["other", "seq", "sp_ts", "sp_csn", "kind"]))
        if draw(st.integers(0, 3)) == 0:
            record.pop(name, None)
        else:
            record[name] = draw(HOSTILE)
    return record


@st.composite
def sp_record(draw: st.DrawFn, stream: StreamDef, hostile: bool) -> dict[str, Any]:
    record: dict[str, Any] = {"kind": "sp"}
    for name in ("streams", "tuples", "attributes"):
        if draw(st.integers(0, 4)):
            record[name] = draw(PATTERNS)
    record["roles"] = draw(PATTERNS)
    if draw(st.booleans()):
        record["sign"] = draw(st.sampled_from(["+", "-", "positive", "NEGATIVE", "Positive", "maybe"]))
    for flag in ("immutable", "grant"):
        if draw(st.booleans()):
            record[flag] = draw(st.booleans())
    record["ts"] = draw(TIMES)
    record["sn"] = draw(st.one_of(st.integers(1, 5), st.sampled_from([0, 4096, 4097])))
    if stream.punctuated_by:
        record[stream.punctuated_by] = draw(VALUES[stream.type_of(stream.punctuated_by)])
    if draw(st.integers(0, 4)) == 0:
        record["seq"] = draw(st.integers(0, 2 ** 63 - 1))
    names = list(SP_TEXT) + ["ts", "sn", "roles", stream.punctuated_by or "ts"]
    return draw(mutated(record, names)) if hostile else record


@st.composite
def tuple_record(draw: st.DrawFn, stream: StreamDef, hostile: bool) -> dict[str, Any]:
    record: dict[str, Any] = {"ts": draw(TIMES)}
    for name, dtype in stream.schema[1:]:
        if name == stream.punctuated_by or draw(st.integers(0, 3)):
            record[name] = draw(VALUES[dtype])
    record.update(sp_ts=draw(TIMES), sp_csn=draw(st.integers(1, 5)))
    if draw(st.integers(0, 4)) == 0:
        record["seq"] = draw(st.integers(0, 2 ** 63 - 1))
    return draw(mutated(record, list(stream.attributes))) if hostile else record


@st.composite
def bodies(draw: st.DrawFn) -> list[tuple[str, str]]:
    """(stream, body) pairs: each body one to three records of one stream, valid-looking (its
    values still drawn from odd patterns and times) or, one time in three, hostile."""
    out = []
    for _ in range(BODIES):
        stream = CATALOG.streams[draw(st.sampled_from(["Vitals", "Vitals", "Notes"]))]
        hostile = draw(st.integers(0, 2)) == 0
        kinds = st.one_of(sp_record(stream, hostile), tuple_record(stream, hostile))
        records = draw(st.lists(kinds, min_size=1, max_size=3))
        out.append((stream.name, "\n".join(line_of(r) for r in records)))
    return out


# -- what the engine reads ---------------------------------------------------------------------------
def engine_rows(spark: Any, stream: StreamDef, folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every record of ``folder`` as the engine's reader parses it, by (file name, line): the SP
    fields, the attributes (timestamps as microseconds) and ``broken``, the engine's verdict as
    :func:`~streamwarden.engine.shield.reader.shielded_input` decides it."""
    frame = read_punctuated(spark, stream, folder)
    code = sp_encoder(spark, stream.name, stream.attributes, ROLES, [F.col(f"_sp.{n}") for n in SP_TEXT])
    frame = frame.withColumn("_code", F.when(F.col("_is_sp"), code))
    malformed = F.when(F.col("_code").startswith(MALFORMED), F.col("_code"))
    broken = F.coalesce(F.col("_broken"), F.when(F.col("_is_sp"), sp_problem()), malformed)

    def readable(name: str, dtype: str) -> Any:
        return F.unix_micros(name).alias(name) if dtype == "timestamp" else F.col(name)

    rows = frame.select(F.element_at(F.split("_file", "/"), -1).alias("_name"), "_line", "_is_sp", "_sp", "_seq",
                        "_code", readable("sp_ts", "timestamp"), "sp_csn", broken.alias("broken"),
                        *[readable(n, t) for n, t in stream.schema]).collect()
    return {(r["_name"], r["_line"]): r.asDict(recursive=True) for r in rows}


def micros(text: str | None) -> int | None:
    if text is None:
        return None
    return (parse_timestamp(text) - EPOCH) // timedelta(microseconds=1)


def assert_same(stream: StreamDef, written: dict[str, Any], read: dict[str, Any], where: str) -> None:
    """The engine read ``written`` (a line the gateway wrote) as the gateway meant it."""
    assert read["broken"] is None, f"{where}: the engine calls {written} broken: {read['broken']}"
    assert read["_is_sp"] == (written.get("kind") == "sp"), where
    assert read["_seq"] == written.get("seq"), where
    if read["_is_sp"]:
        sp = read["_sp"]
        assert {n: sp[n] for n in SP_TEXT} == {n: written.get(n) for n in SP_TEXT}, where
        assert (sp["sn"], read["ts"]) == (written.get("sn"), micros(written.get("ts"))), where
        if stream.punctuated_by:
            assert read[stream.punctuated_by] == written[stream.punctuated_by], where
        python = SpEncoder(stream.name, stream.attributes, ROLES)(SpText(*(written.get(n) for n in SP_TEXT)))
        # the same JSON (numbers as Java or Python print them: 9.2E18, 9.2e+18)
        assert json.loads(read["_code"]) == json.loads(python), \
            f"{where}: the JVM parsed {written} otherwise than Python"
    else:
        for name, dtype in stream.schema:
            expected = micros(written.get(name)) if dtype == "timestamp" else written.get(name)
            assert read[name] == expected, f"{where}: {name} {read[name]!r} != {expected!r}"
        assert (read["sp_ts"], read["sp_csn"]) == (micros(written.get("sp_ts")), written.get("sp_csn")), where


def test_whatever_the_gateway_accepts_the_engine_reads_the_same(spark, tmp_path) -> None:
    seen = {"accepted": 0, "refused": 0}
    everything = tmp_path / "all"
    examples = itertools.count()

    @EXAMPLES
    @given(bodies())
    def agree(pairs: list[tuple[str, str]]) -> None:
        folder = tmp_path / f"example-{next(examples)}"
        sent: dict[str, dict[str, list[str]]] = {}  # stream -> file name -> the lines written
        for name, body in pairs:
            stream = CATALOG.streams[name]
            try:
                lines = check_records(body.encode("utf-8"), stream, None)
            except ApiError as exc:
                assert exc.status == 422 and exc.message.startswith("line "), exc.message
                seen["refused"] += 1
                continue
            seen["accepted"] += 1
            written = append_records(folder / name, lines)
            append_records(everything / name, lines)
            sent.setdefault(name, {})[written.name] = lines
            for original, line in zip(body.split("\n"), lines):
                record = json.loads(line)
                if record.get("kind") == "sp":  # the written record is the SP the gateway parsed
                    provider = stream.punctuated_by
                    kind = stream.type_of(provider) if provider else None
                    again = checked_sp_record(record, "written", provider, kind)[0]
                    first = checked_sp_record(json.loads(original), "sent", provider, kind)[0]
                    assert again == first, (original, line)
        for name, files in sent.items():
            stream = CATALOG.streams[name]
            read = engine_rows(spark, stream, folder / name)
            count = 0
            for file_name, lines in files.items():
                for number, line in enumerate(lines, start=1):
                    assert_same(stream, json.loads(line), read[(file_name, number)], f"{file_name}:{number}")
                    count += 1
            assert len(read) == count

    agree()
    assert seen["accepted"] >= 10 and seen["refused"] >= 10, seen  # both sides were exercised
    for name in ("Vitals", "Notes"):  # and the real shielded reader runs over all of it without a broken record
        if (everything / name).exists():
            shielded_input(spark, CATALOG.streams[name], everything / name, ROLES, streaming=False).count()


# -- the converse: what the engine calls broken, the gateway refuses -------------------------------------------
GOOD_SP = {"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor", "sign": "+",
           "immutable": False, "grant": False, "ts": "2026-03-01T09:00:00Z", "sn": 1, "patient": 7}
GOOD_TUPLE = {"ts": "2026-03-01T10:00:00Z", "patient": 7, "ward": "w1", "pulse": 80, "sp_ts": "2026-03-01T09:00:00Z",
              "sp_csn": 1}
BROKEN = {  # name: the record, which the engine calls broken
    "SP roles null": {**GOOD_SP, "roles": None},
    "SP without roles": {k: v for k, v in GOOD_SP.items() if k != "roles"},
    "SP sn 1.0": {**GOOD_SP, "sn": Raw("1.0")},
    "SP sn 2**40": {**GOOD_SP, "sn": 2 ** 40},
    "SP sn 4097": {**GOOD_SP, "sn": 4097},
    "SP sn 0": {**GOOD_SP, "sn": 0},
    "SP sign maybe": {**GOOD_SP, "sign": "maybe"},
    "SP tuples [1": {**GOOD_SP, "tuples": "[1"},
    "SP tuples 1e999": {**GOOD_SP, "tuples": "1e999"},
    "SP roles {Doctor,": {**GOOD_SP, "roles": "{Doctor,"},
    "SP immutable as text": {**GOOD_SP, "immutable": "yes"},
    "SP ts soon": {**GOOD_SP, "ts": "soon"},
    "SP without its provider": {k: v for k, v in GOOD_SP.items() if k != "patient"},
    "tuple without ts": {k: v for k, v in GOOD_TUPLE.items() if k != "ts"},
    "tuple pulse as text": {**GOOD_TUPLE, "pulse": "80"},
    "tuple pulse 2**31": {**GOOD_TUPLE, "pulse": 2 ** 31},
    "tuple ts in year 10000": {**GOOD_TUPLE, "ts": "+10000-01-01T00:00:00Z"},
    "tuple of kind x": {**GOOD_TUPLE, "kind": "x"},
    "tuple without its provider": {k: v for k, v in GOOD_TUPLE.items() if k != "patient"},
}


def test_what_the_engine_calls_broken_the_gateway_refuses(spark, tmp_path) -> None:
    stream = CATALOG.streams["Vitals"]
    names = sorted(BROKEN)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "broken.jsonl").write_text("".join(line_of(BROKEN[n]) + "\n" for n in names))
    read = engine_rows(spark, stream, tmp_path / "in")
    for number, name in enumerate(names, start=1):
        assert read[("broken.jsonl", number)]["broken"] is not None, f"the engine reads {name!r}"
        with pytest.raises(ApiError) as refused:
            check_records(line_of(BROKEN[name]).encode("utf-8"), stream, None)
        assert refused.value.status == 422, name


# -- docs/service.md's provider example -------------------------------------------------------------------------
def readme_posts() -> list[tuple[str, str, int]]:
    """(stream, body, status) of every provider POST in docs/service.md's curl walk-through."""
    text = (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
    found = re.findall(r"curl -s -X POST localhost:8470/v1/streams/(\w+)/records [^\n]*\\\n\s*--data-binary '([^']*)'\n"
                       r"# (\d{3}) ", text)
    return [(stream, body, int(status)) for stream, body, status in found]


def test_the_readme_provider_example_is_accepted_and_governed(spark, tmp_path) -> None:
    from importlib import resources

    from streamwarden.demo.network import MINUTES_PER_FILE, patients_policies, readings

    posts = readme_posts()
    assert [status for _, _, status in posts].count(201) >= 1, posts
    catalog = load_catalog_text(resources.files("streamwarden.demo").joinpath("network.yaml").read_text(), "demo")
    vitals = catalog.streams["Vitals"]
    folder = tmp_path / "Vitals"  # what `make serve` starts with (streamwarden.demo.serve), then the POSTs
    folder.mkdir()
    first = patients_policies() + readings(MINUTES_PER_FILE)["Vitals"]
    (folder / "part-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    accepted = []
    for stream, body, status in posts:
        assert stream == "Vitals"
        try:
            lines = check_records(body.encode("utf-8"), vitals, 1, keyed=True)  # the token of patient 1
        except ApiError as exc:
            assert exc.status == status, (body, exc.message)
            continue
        assert status == 201, body
        append_records(folder, lines)
        accepted += [json.loads(line) for line in lines]
    shielded = shielded_input(spark, vitals, folder, {"Doctor"}, streaming=False)  # dr_lee's roles
    rows = shielded.select("patient", "pulse", F.unix_micros("ts").alias("ts"),
                           F.col("_gov").isNotNull().alias("governed"))
    found = {(r["patient"], r["pulse"], r["ts"]): r["governed"] for r in rows.collect()}
    for record in accepted:
        assert found[(record["patient"], record["pulse"], micros(record["ts"]))], \
            f"docs/service.md's tuple {record} is governed by no policy"
