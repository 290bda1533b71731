"""Security punctuations: Fig. 5 patterns, section 4.1 examples, Fig. 8 syntax, sp-batches."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from streamwarden.catalog.punctuations import sp, sp_from_record
from streamwarden.cli.main import main
from streamwarden.errors import InputError, QuerySyntaxError
from streamwarden.language.insert_sp import parse_insert_sp
from streamwarden.language.patterns import Constant, Empty, Range, SetOf, Wildcard, parse_pattern
from streamwarden.security.punctuation.generate import policy_from_statements

from oracles.shield import SpPolicy, combine

TS = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
# Fig. 2's roles: C cardiologist, D doctor, DM, E, GP general physician, ND nurse on duty.


@pytest.mark.parametrize(
    ("text", "kind", "inside", "outside"),
    [
        ("{}", Empty, [], [120, "C"]),
        ("*", Wildcard, [120, "anything"], []),
        ("120", Constant, [120, "120", 120.0], [121]),
        ("(120, 133)", Range, [121, 132.5], [120, 133]),
        ("[120, 133]", Range, [120, 133], [119, 134]),
        ("{GP, C, 7}", SetOf, ["GP", "C", 7], ["D", 8]),
        ("[a, m]", Range, ["c"], ["z"]),
    ],
)
def test_fig5_patterns(text, kind, inside, outside) -> None:
    pattern = parse_pattern(text)
    assert isinstance(pattern, kind)
    assert all(pattern.matches(v) for v in inside)
    assert not any(pattern.matches(v) for v in outside)
    assert parse_pattern(str(pattern)) == pattern  # printing round-trips


@pytest.mark.parametrize("text", ["[1 2]", "(1, 2]", "{a b}", "", "[1,"])
def test_bad_patterns_are_errors(text) -> None:
    with pytest.raises(QuerySyntaxError):
        parse_pattern(text)


def test_section_4_1_stream_level() -> None:
    policy = SpPolicy.of([sp("HeartRate", "*", "*", "C")])
    assert policy.accessible("HeartRate", 120, "Beats_per_min", {"C"})
    assert not policy.accessible("HeartRate", 120, "Beats_per_min", {"GP"})
    assert not policy.accessible("BodyTemperature", 120, "Temperature", {"C"})


def test_section_4_1_tuple_level() -> None:
    policy = SpPolicy.of([sp("*", "[120, 133]", "*", "GP")])
    assert policy.accessible("BreathingRate", 133, "Depth", {"GP"})
    assert not policy.accessible("BreathingRate", 134, "Depth", {"GP"})


def test_section_4_1_attribute_level() -> None:
    policy = SpPolicy.of([sp("{HeartRate, BodyTemperature}", "*", "{Temperature, Beats_per_min}", "{D, ND}")])
    assert policy.accessible("BodyTemperature", 120, "Temperature", {"ND"})
    assert not policy.accessible("BodyTemperature", 120, "Patient_id", {"ND"})
    assert not policy.accessible("BreathingRate", 120, "Frequency", {"D"})


def test_negative_sps_deny_and_roles_must_match() -> None:
    policy = SpPolicy.of([sp("*", "*", "*", "{D, GP}"), sp("*", "{125}", "*", "GP", positive=False, sn=2)])
    assert policy.accessible("HeartRate", 125, "Beats_per_min", {"D"})
    assert not policy.accessible("HeartRate", 125, "Beats_per_min", {"GP"})
    assert policy.accessible("HeartRate", 126, "Beats_per_min", {"GP"})


def test_sp_batch_cumulative_sequence_number() -> None:
    policy = SpPolicy(TS)
    for sn in (1, 2, 4):
        policy = policy.with_sp(sp(sn=sn, ts=TS))
    assert policy.csn == 2  # SP 3 is missing: only 1..2 are complete
    assert policy.with_sp(sp(sn=3, ts=TS)).csn == 4
    assert len(policy.with_sp(sp(sn=2, ts=TS)).sps) == 3  # a duplicate replaces, never adds


def test_combining_provider_and_server_policies() -> None:
    assert combine(True, False, "intersect", immutable=False) is False
    assert combine(False, True, "union", immutable=False) is True
    assert combine(True, False, "intersect", immutable=True) is True  # immutable ignores the server
    assert combine(False, None, "union", immutable=False) is False  # no server policy: the provider decides


def test_fig8a_insert_sp() -> None:
    statement = parse_insert_sp("""INSERT SP AS sp1
INTO STREAM s3
LET
sp1.DDP = TUPLES:[120, 200]
AND ATTRIBUTES:Frequency,
sp1.SRP = frbac:R1 WITH GRANT OPTION,
sp1.SIGN = POSITIVE,
sp1.IMMUTABLE = TRUE""")
    (made,) = policy_from_statements([statement], TS)
    assert str(made) == "<s3, [120, 200], Frequency | R1 WITH GRANT OPTION | + | T | 2026-03-01T10:00:00Z | 1>"


def test_fig8b_on_result_statement_without_stream_or_comma() -> None:
    statement = parse_insert_sp("""INSERT SP AS sp_result INTO STREAM
LET
sp_result.DDP = TUPLES:ALL
sp_result.SRP = frbac:Cardiologist,
sp_result.SIGN = POSITIVE,
sp_result.IMMUTABLE = TRUE""")
    assert statement.stream is None and isinstance(statement.tuples, Wildcard)
    assert str(statement.roles) == "Cardiologist" and statement.immutable


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("INSERT SP INTO STREAM s LET SRP = C", "needs DDP"),
        ("INSERT SP INTO STREAM s LET DDP = TUPLES:*, SRP = dac:C", "only access control model is frbac"),
        ("INSERT SP AS a INTO STREAM s LET b.DDP = TUPLES:*, SRP = C", "named 'a'"),
        ("INSERT SP INTO STREAM s LET DDP = ROWS:*, SRP = C", "expected STREAMS or TUPLES or ATTRIBUTES"),
        ("INSERT SP INTO STREAM s LET DDP = TUPLES:*, SRP = C, SIGN = MAYBE", "POSITIVE or NEGATIVE"),
    ],
)
def test_bad_insert_sp(text, message) -> None:
    with pytest.raises(QuerySyntaxError, match=message) as info:
        parse_insert_sp(text)
    assert info.value.line == 1


def test_records_round_trip_and_bad_records() -> None:
    original = sp("HeartRate", "[120, 133]", "*", "{GP, C}", grant=True, ts=TS, sn=2)
    record = original.to_record()
    assert record["kind"] == "sp" and record["sign"] == "+" and record["ts"] == "2026-03-01T10:00:00Z"
    assert sp_from_record(json.loads(json.dumps(record)), "x.jsonl:1") == original
    for broken, message in [({**record, "sign": "?"}, "sign"), ({**record, "sn": 0}, "sn"),
                            ({**record, "tuples": "[1"}, "x.jsonl:3 tuples"), ({**record, "ts": "soon"}, "ts")]:
        with pytest.raises(InputError, match=message):
            sp_from_record(broken, "x.jsonl:3")
    without_roles = {k: v for k, v in record.items() if k != "roles"}
    with pytest.raises(InputError, match="lacks 'roles'"):
        sp_from_record(without_roles, "x.jsonl:4")


def test_cli_sp_prints_one_policy(capsys) -> None:
    assert main(["sp", "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES:[120, 133], SRP = {GP, C}",
                 "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES:{125}, SRP = GP, SIGN = NEGATIVE",
                 "--ts", "2026-03-01T10:00:00Z", "--provider", "Patient_id=120"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["ts"], r["sn"], r["sign"], r["Patient_id"]) for r in records] == [
        ("2026-03-01T10:00:00Z", 1, "+", 120), ("2026-03-01T10:00:00Z", 2, "-", 120)]
    assert main(["sp", "INSERT SP INTO STREAM s LET DDP = TUPLES:[1 2], SRP = C"]) == 2
    assert "<statement 1>:1:" in capsys.readouterr().err
