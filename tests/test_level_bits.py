"""Levels as one bigint (a bit per company): the bit algebra Spark evaluates agrees with the
lattice's own order, LUB and text, for random lattices. Pure Python, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwarden.catalog.lattice import BOTTOM, LEVEL_BITS, TOP, Lattice, LatticeTooLarge, Level
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.errors import CatalogError, UnsupportedError

# 1-4 classes of 1-5 companies; names unique across classes (k-th class: letter k, then a number).
lattices = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(
    lambda sizes: Lattice.of({f"COI{k}": [f"{chr(ord('a') + k)}{i}" for i in range(n)] for k, n in enumerate(sizes)}))


def levels_of(lattice: Lattice) -> st.SearchStrategy[Level]:
    """Any level of ``lattice``: per class ⊥, one of its companies or T."""
    entries = [st.sampled_from((BOTTOM, *members, TOP)) for _, members in lattice.classes]
    return st.tuples(*entries).map(lattice.level)


@st.composite
def lattice_and_levels(draw: st.DrawFn, count: int = 2) -> tuple[Lattice, list[Level]]:
    lattice = draw(lattices)
    return lattice, [draw(levels_of(lattice)) for _ in range(count)]


def _or(levels: list[Level], lattice: Lattice) -> int:
    value = 0
    for level in levels:
        value |= lattice.bits(level)
    return value


@given(lattice_and_levels())
def test_the_mask_test_is_dominance(drawn: tuple[Lattice, list[Level]]) -> None:
    lattice, (level, q) = drawn
    assert ((lattice.bits(level) & ~lattice.bits(q)) == 0) == (level <= q)


@given(lattice_and_levels())
def test_an_or_normalised_is_the_lub(drawn: tuple[Lattice, list[Level]]) -> None:
    lattice, (a, b) = drawn
    assert lattice.normalise(lattice.bits(a) | lattice.bits(b)) == lattice.bits(lattice.lub(a, b))
    assert str(lattice.from_bits(lattice.bits(a) | lattice.bits(b))) == str(lattice.lub(a, b))


@given(lattice_and_levels(count=5))
def test_an_or_of_many_levels_is_dominated_as_their_lub_is(drawn: tuple[Lattice, list[Level]]) -> None:
    """A row's level is an OR of its tuples' (two bits of a class, not yet all of them): the
    mask test on it still decides dominance by a query's (normalised) level."""
    lattice, (*levels, q) = drawn
    joined = _or(levels, lattice)
    assert ((joined & ~lattice.bits(q)) == 0) == (lattice.lub(*levels) <= q)
    assert lattice.from_bits(joined) == lattice.lub(*levels)


@given(lattice_and_levels(count=1))
def test_text_round_trips_and_the_bits_are_the_normal_form(drawn: tuple[Lattice, list[Level]]) -> None:
    lattice, (level,) = drawn
    bits = lattice.bits(level)
    assert 0 <= bits < 2**LEVEL_BITS and level.bits == bits
    assert lattice.from_bits(bits) == level and lattice.parse(str(lattice.from_bits(bits))) == level
    assert lattice.normalise(bits) == bits  # what the shepherd and a query's [1, ⊥] produce: = is equality


def test_top_of_a_one_company_class_is_not_that_company() -> None:
    """With a bit per company only, T of a lone company's class would be its bit: a tuple at
    the top would pass a guard at [1, ...]. The class's second bit keeps them apart."""
    lattice = Lattice.of({"COI1": ["1"], "COI2": ["A", "B"]})
    one, top = lattice.parse("[1, T]"), lattice.top
    assert (top.bits & ~one.bits) != 0 and not top <= one
    assert str(lattice.from_bits(one.bits)) == "[1, T]" and lattice.bits(lattice.parse("[T, ⊥]")) == 0b11


def _lattice(companies: int, lone: int = 0) -> dict[str, list[str]]:
    """``companies`` in classes of four (the last may have fewer), plus ``lone`` classes of one."""
    names = [f"c{i}" for i in range(companies)]
    classes = {f"K{k}": names[k:k + 4] for k in range(0, companies, 4)}
    return {**classes, **{f"L{k}": [f"l{k}"] for k in range(lone)}}


def test_at_most_63_bits() -> None:
    assert Lattice.of(_lattice(63)).top.bits == 2**63 - 1  # the largest level, still a bigint
    with pytest.raises(UnsupportedError, match=r"has 64 companies in 16 classes: its levels need 64 bits \(one per "
                                               r"company\), more than the 63 a level holds"):
        Lattice.of(_lattice(64))
    assert Lattice.of(_lattice(60, lone=1)).top.bits == 2**62 - 1  # a lone company's class takes two bits
    with pytest.raises(LatticeTooLarge, match=r"62 companies in 17 classes: its levels need 64 bits \(one per "
                                              r"company, and one for T in each of its 2 single-company classes\)"):
        Lattice.of(_lattice(60, lone=2))


def test_a_catalog_over_the_limit_is_refused_at_its_lattice() -> None:
    classes = ", ".join(f"{name}: [{', '.join(members)}]" for name, members in _lattice(64).items())
    text = f"streams: {{S: {{schema: {{ts: timestamp}}}}}}\nlattice:\n  classes: {{{classes}}}\n"
    with pytest.raises(CatalogError, match="64 companies .* the 63 a level holds") as info:
        load_catalog_text(text, "big.yaml")
    assert "big.yaml:3:" in info.value.one_line()
