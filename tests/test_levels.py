"""The Chinese-Wall lattice (Ray et al., Definitions 1-4) and its catalog declarations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwarden.catalog.lattice import Lattice, LevelError
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.errors import CatalogError
from streamwarden.language.binder import bind_text

LATTICE = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
ALL = list(LATTICE.levels())
levels = st.sampled_from(ALL)


def test_the_papers_examples() -> None:
    p = LATTICE.parse
    assert p("[1, ⊥]") <= p("[1, B]") and p("[1, ⊥]") <= p("[1, T]") and p("[⊥, C]") <= p("[T, T]")
    assert not p("[⊥, B]").comparable(p("[1, ⊥]"))
    assert str(LATTICE.lub(p("[1, ⊥]"), p("[⊥, B]"))) == "[1, B]"
    assert str(LATTICE.lub(p("[⊥, A]"), p("[⊥, B]"), p("[⊥, C]"))) == "[⊥, T]"
    assert len(ALL) == 4 * 5  # (⊥, 1, 2, T) x (⊥, A, B, C, T)


@pytest.mark.parametrize("text", ["[1, ⊥]", "[1,_]", " [ 1 , bot ] ", "[1, BOTTOM]"])
def test_bottom_spellings(text) -> None:
    assert str(LATTICE.parse(text)) == "[1, ⊥]"


@pytest.mark.parametrize("text", ["[T, top]", "[t, TOP]"])
def test_top_spellings(text) -> None:
    assert LATTICE.parse(text) == LATTICE.top


@pytest.mark.parametrize(("text", "message"), [
    ("1, ⊥", "written like"), ("[1]", "has 1 entries"), ("[A, ⊥]", "not a company of class COI1"),
    ("[1, ⊥, ⊥]", "has 3 entries"),
])
def test_bad_levels_are_explained(text, message) -> None:
    with pytest.raises(LevelError, match=message):
        LATTICE.parse(text)


@given(levels)
def test_dominance_is_reflexive_and_printing_round_trips(a) -> None:
    assert a <= a and LATTICE.parse(str(a)) == a and LATTICE.from_bits(LATTICE.bits(a)) == a


@given(levels, levels)
def test_dominance_is_antisymmetric(a, b) -> None:
    if a <= b and b <= a:
        assert a == b


@given(levels, levels, levels)
def test_dominance_is_transitive(a, b, c) -> None:
    if a <= b and b <= c:
        assert a <= c


@given(levels, levels)
def test_lub_is_the_least_upper_bound(a, b) -> None:
    join = LATTICE.lub(a, b)
    assert a <= join and b <= join
    assert all(join <= c for c in ALL if a <= c and b <= c)
    assert LATTICE.lub(b, a) == join and LATTICE.lub(a, a) == a


@given(levels)
def test_public_is_the_bottom_and_trusted_the_top(a) -> None:
    assert LATTICE.bottom <= a <= LATTICE.top
    assert LATTICE.lub() == LATTICE.bottom and LATTICE.lub(a, LATTICE.top) == LATTICE.top


def test_companies_and_their_paper_spelling() -> None:
    assert str(LATTICE.company("B")) == "[⊥, B]" and str(LATTICE.company("Company2")) == "[2, ⊥]"
    assert LATTICE.company("Unregistered") is None and LATTICE.company(None) is None


@pytest.mark.parametrize(("classes", "message"), [
    ({"COI1": ["1"], "COI2": ["1"]}, "in two conflict-of-interest classes"),
    ({"COI1": ["T"]}, "cannot name a company"),
    ({"COI1": []}, "has no companies"),
    ({}, "at least one"),
])
def test_bad_lattices(classes, message) -> None:
    with pytest.raises(LevelError, match=message):
        Lattice.of(classes)


BASE = """
lattice:
  classes: {COI1: ["1", "2"], COI2: [A, B]}
streams:
  Log: {schema: {ts: timestamp, sender: string}, level: {from: sender}}
  Fixed: {schema: {ts: timestamp, x: int}, level: [1, _]}
users:
  ann: {clearance: "[1, T]"}
  bob: {}
"""


def test_catalog_levels() -> None:
    catalog = load_catalog_text(BASE)
    assert str(catalog.streams["Log"].level_source) == "from sender"
    assert str(catalog.streams["Fixed"].level_source) == "fixed [1, ⊥]"
    assert str(catalog.clearance("ann")) == "[1, T]"
    assert catalog.clearance("bob") == catalog.lattice.bottom  # no clearance: public only (fail closed)


@pytest.mark.parametrize(("change", "message", "line"), [
    (("{from: sender}", "{from: nobody}"), "level source 'nobody' is not an attribute of Log", 5),
    (("[1, _]", "[1, Z]"), "'Z' is not a company of class COI2", 6),
    (('"[1, T]"', '"[1, T, T]"'), "has 3 entries", 8),
    (("sender: string}", "sender: string, level: string}"), "cannot declare 'level'", 5),
    (("bob: {}", "bob: {clearence: x}"), "unknown key 'clearence' in user bob", 9),
])
def test_catalog_level_errors_name_the_line(change, message, line) -> None:
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog_text(BASE.replace(*change), "cloud.yaml")
    assert f"cloud.yaml:{line}:" in info.value.one_line()


def test_a_level_needs_a_lattice() -> None:
    with pytest.raises(CatalogError, match="declares no lattice"):
        load_catalog_text("streams: {S: {schema: {ts: timestamp}, level: '[1]'}}")
    plain = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}")
    with pytest.raises(Exception, match="needs a lattice"):
        bind_text("SELECT a FROM S WHERE a = 1 OR [1, ⊥] = [1, ⊥]", plain)


def test_level_is_a_system_attribute_queries_can_read() -> None:
    plan = bind_text("SELECT sender, level FROM Log WHERE level = [1, bot]", load_catalog_text(BASE))
    assert plan.label == "π Log.sender, Log.level" and "[1, ⊥]" in plan.child.label
