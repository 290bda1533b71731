"""SP encoding for a user: the attribute mask agrees with the SP model, once per distinct text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.catalog.punctuations import sp
from streamwarden.errors import UnsupportedError
from streamwarden.security.punctuation.encode import MalformedSp, SpEncoder, SpText

ATTRIBUTES = ("ts", "Patient_id", "Beats_per_min", "Ward")
NAMES = st.sampled_from(["GP", "C", "D", "ND", "1", "1.0", "2", "HeartRate", "Ward", "Beats_per_min", "Patient_id"])


def patterns(values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("*"), st.just("{}"), values,
        st.lists(values, min_size=1, max_size=4).map(lambda vs: "{" + ", ".join(vs) + "}"),
        st.tuples(values, values, st.booleans()).map(lambda t: (f"[{t[0]}, {t[1]}]" if t[2] else f"({t[0]}, {t[1]})")),
    )


@settings(max_examples=300, deadline=None)
@given(streams=patterns(NAMES), attributes=patterns(NAMES), roles=patterns(NAMES),
       user=st.frozensets(NAMES, max_size=3))
def test_the_mask_is_the_model_s_decision_per_attribute(streams, attributes, roles, user) -> None:
    code = json.loads(SpEncoder("HeartRate", ATTRIBUTES, user)(SpText(streams, "*", attributes, roles)))
    model = sp(streams, "*", attributes, roles)
    expected = {j for j, a in enumerate(ATTRIBUTES) if model.matches_object("HeartRate", 1, a)
                and model.matches_roles(user)}
    assert {j for j in range(len(ATTRIBUTES)) if code["m"] >> j & 1} == expected


def test_tuple_patterns_keep_text_and_numbers() -> None:
    encode = SpEncoder("S", ATTRIBUTES, {"GP"})
    code = json.loads(encode(SpText("*", '{120, "x", 1.5}', "*", "GP", "-", True, True)))
    assert (code["p"], code["i"], code["g"]) == (False, True, True)
    assert (code["k"], code["vs"], code["vd"]) == ("set", ["120", "x", "1.5"], [120.0, None, 1.5])


def test_each_distinct_sp_text_is_encoded_once() -> None:
    encode = SpEncoder("S", ATTRIBUTES, {"GP"})
    calls = []
    original = encode._encode
    encode._encode = lambda record: calls.append(record) or original(record)  # type: ignore[method-assign]
    roles = "{" + ", ".join(f"R{i}" for i in range(500)) + ", GP}"
    codes = {encode(SpText("*", "[1, 9]", "*", roles)) for _ in range(1000)}
    assert len(codes) == 1 and len(calls) == 1


def test_a_role_list_shared_by_tuple_level_policies_is_parsed_once(monkeypatch) -> None:
    import streamwarden.security.punctuation.encode as encode_module

    parsed: list[str] = []
    original = encode_module.parse_pattern
    monkeypatch.setattr(encode_module, "parse_pattern", lambda text, name: parsed.append(name) or original(text, name))
    encode = SpEncoder("S", ATTRIBUTES, {"R7"})
    roles = "{" + ", ".join(f"R{i}" for i in range(500)) + "}"
    codes = [json.loads(encode(SpText("*", f"{{{oid}}}", "*", roles))) for oid in range(200)]
    assert parsed.count("roles") <= 1 and parsed.count("tuples") == 200  # a plain role list needs no parse
    assert all(c["m"] == 0b1111 for c in codes) and [c["vs"] for c in codes[:2]] == [["0"], ["1"]]


@pytest.mark.parametrize(("record", "message"), [
    (SpText("*", "[120, 133", "*", "GP"), "malformed tuples pattern [120, 133"),
    (SpText("*", "*", "*", None), "malformed roles pattern (missing)"),
    (SpText("{a,", "*", "*", "GP"), "malformed streams pattern {a,"),
])
def test_malformed_patterns_are_named(record, message) -> None:
    with pytest.raises(MalformedSp, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        SpEncoder("S", ATTRIBUTES, {"GP"})(record)


def test_a_schema_wider_than_a_mask_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="at most 62"):
        SpEncoder("Wide", tuple(f"a{i}" for i in range(63)), {"GP"})


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.one_of(NAMES, st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)), min_size=1,
                      max_size=6),
       spaces=st.sampled_from(["", " ", "  "]), user=st.frozensets(NAMES, max_size=3))
def test_the_fast_role_list_reading_agrees_with_the_parser(names, spaces, user) -> None:
    from streamwarden.security.punctuation.encode import _plain_set

    text = "{" + spaces + f"{spaces},{spaces}".join(names) + spaces + "}"
    fast = _plain_set(text)
    parsed = sp("*", "*", "*", text).roles
    if fast is not None:  # identifiers only: the same names as the parser reads
        assert tuple(str(v) for v in parsed.values) == fast  # type: ignore[attr-defined]
    code = json.loads(SpEncoder("S", ATTRIBUTES, user)(SpText("*", "*", "*", text)))
    assert (code["m"] != 0) == sp("*", "*", "*", text).matches_roles(user)
