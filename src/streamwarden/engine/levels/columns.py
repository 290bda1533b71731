"""Security levels as Spark SQL expressions (no Python per tuple).

A level travels as one ``bigint``, a bit per company (:meth:`Lattice.bits`; a class of
one company has a second bit, for its T): a class contributes no bit (⊥), its company's
bit, or all its bits (T). Then

* ``l ≤ q`` is ``(l & ~q) == 0``: every company ``l`` holds, ``q`` holds (T in ``q``
  holds all of its class; ⊥ none; a company only itself);
* the LUB is a bitwise OR, of two rows' levels or, with ``bit_or``, of a group's: two
  companies of one class OR to two of its bits, which mean T;
* such a T is not in T's own form (all the class's bits) until normalised
  (:meth:`Lattice.normalise`): the output's text reads any two bits of a class as T
  (:func:`level_text`), and ``=`` compares only levels already in that form: a tuple's,
  as the shepherd makes it, with a query's ``[1, ⊥]`` (:func:`level_literal`).

    >>> from streamwarden.catalog.lattice import Lattice
    >>> lattice = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B"]})
    >>> one_a, two = lattice.parse("[1, A]").bits, lattice.parse("[2, ⊥]").bits
    >>> str(lattice.from_bits(one_a | two)), (one_a & ~lattice.parse("[T, A]").bits) == 0
    ('[T, A]', True)
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, WindowSpec
from pyspark.sql import functions as F

from streamwarden.catalog.lattice import BOTTOM, COMPANY_PREFIX, TOP, Lattice, Level, LevelSource
from streamwarden.engine.plan_sql import quote as quoted_name, sql_string

#: The row's level once its tuples' levels are combined (after a projection or aggregate).
ROW_LEVEL = "_level"
LEVEL_TYPE = "bigint"


def level_literal(level: Level) -> Column:
    """``level`` as a Spark value, in the normalised form every tuple's level has (T is all
    of its class's bits), so that ``=`` with a tuple's level is equality of levels."""
    return _bigint(level.bits)


def shepherd_level(source: LevelSource | None, lattice: Lattice) -> Column:
    """The level the trusted stream shepherd gives each tuple: its source company's level
    (``Company`` prefix allowed), a fixed level, or the top for an unknown source."""
    top = level_literal(lattice.top)
    if source is None:
        return top
    if source.fixed is not None:
        return level_literal(source.fixed)
    names: dict[str, Level] = {}
    for _, members in lattice.classes:
        for company in members:
            level = lattice.company(company)
            assert level is not None
            names.setdefault(COMPANY_PREFIX + company, level)
    for _, members in lattice.classes:  # an exact company name wins over a prefixed reading
        for company in members:
            level = lattice.company(company)
            assert level is not None  # a member of the lattice
            names[company] = level
    table = F.create_map(*[part for name, level in sorted(names.items())
                           for part in (F.lit(name), level_literal(level))])
    return F.coalesce(F.element_at(table, F.col(str(source.attribute)).cast("string")), top)


def unknown_source(source: LevelSource | None, lattice: Lattice, level: Column) -> Column:
    """True for the tuples the shepherd put at the top because their source is unknown."""
    if source is None:
        return F.lit(True)
    if source.fixed is not None:
        return F.lit(False)
    return level == level_literal(lattice.top)  # the shepherd's levels are normalised: = is equality


def visible_at(level: Column, query_level: Level) -> Column:
    """``level ≤ query_level`` (Definition 4): ``level`` holds no company ``query_level`` lacks.

    ``~bits`` is the two's complement Spark's ``bigint`` has too, so below the top the test
    also keeps out any bit beyond the lattice's (and a NULL level: it is then not true).

        >>> from streamwarden.catalog.lattice import Lattice
        >>> lattice = Lattice.of({"COI1": ["1", "2"], "COI2": ["A"]})  # bits: 1, 2 | A, T of COI2
        >>> q = lattice.parse("[1, T]").bits
        >>> [(lattice.parse(text).bits & ~q) == 0 for text in ("[⊥, ⊥]", "[1, A]", "[2, ⊥]", "[T, T]")]
        [True, True, False, False]
    """
    if all(entry == TOP for entry in query_level.entries):
        # The top dominates every level: no test at all. (Catalyst inlines the shepherd's map
        # lookup into a filter above it, so even a test that always holds would look it up twice.)
        return F.lit(True)
    return level.bitwiseAND(_bigint(~query_level.bits)) == 0


def lub(levels: Sequence[Column]) -> Column:
    """The least upper bound of the levels of one row's tuples (⊥ for none)."""
    if not levels:
        return _bigint(0)
    value = levels[0]
    for other in levels[1:]:
        value = value.bitwiseOR(other)
    return value


def lub_of_group(level: Column, window: WindowSpec | None = None) -> Column:
    """The aggregate giving a group's LUB (or, over ``window``, each frame's): ``bit_or`` of
    its tuples' levels, ⊥ for none (NULL levels, as a ``[ROWS n]`` window gives the tuples
    that do not qualify, count as none)."""
    combined = F.bit_or(level)
    return F.coalesce(combined if window is None else combined.over(window), _bigint(0))


def level_text(name: str, lattice: Lattice) -> Column:
    """``[1, ⊥]``: the level in column ``name`` as the output writes it; a class with two or
    more bits is T. One SQL expression, built in one call to the JVM (composed from functions,
    a lattice of 25 levels took about 100 of them, 0.2 s per plan)."""
    column = quoted_name(name)
    entries = []
    for cls in lattice.class_bits:
        part = f"({column} & {cls.mask}L)"
        cases = "".join(f" WHEN {part} = {bit}L THEN {sql_string(company)}" for company, bit in cls.companies)
        entries.append(f"CASE WHEN {part} = 0L THEN {sql_string(BOTTOM)}{cases} ELSE {sql_string(TOP)} END")
    return F.expr(f"concat('[', concat_ws(', ', {', '.join(entries)}), ']')")


def _bigint(value: int) -> Column:
    # A small literal would be an int: bitwise operators and map values need one type, bigint.
    return F.lit(value).cast(LEVEL_TYPE)


__all__ = ["LEVEL_TYPE", "ROW_LEVEL", "level_literal", "level_text", "lub", "lub_of_group", "shepherd_level",
           "unknown_source", "visible_at"]
