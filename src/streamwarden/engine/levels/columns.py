"""Security levels as Spark SQL expressions (no Python per tuple).

A level travels as ``array<int>``, one entry per COI class: 0 is ⊥, -1 is T and
company *i* of the class is *i + 1* (:meth:`Lattice.code`). Dominance by the query's
level is a static predicate over the entries; the LUB of two rows is computed entry by
entry; the LUB over a group is, per entry, ⊥ when no row has a company or T there,
that value when all such rows agree, else T (so ``min`` and ``max`` of the non-⊥
entries decide it, both code-generated aggregates).

    >>> from streamwarden.catalog.lattice import Lattice
    >>> lattice = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B"]})
    >>> lattice.code(lattice.parse("[2, T]"))
    (2, -1)
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamwarden.catalog.lattice import BOTTOM, COMPANY_PREFIX, TOP, Lattice, Level, LevelSource

#: The row's level once its tuples' levels are combined (after a projection or aggregate).
ROW_LEVEL = "_level"
LEVEL_TYPE = "array<int>"


def shepherd_level(source: LevelSource | None, lattice: Lattice) -> Column:
    """The level the trusted stream shepherd gives each tuple: its source company's level
    (``Company`` prefix allowed), a fixed level, or the top for an unknown source."""
    top = _literal(lattice.top)
    if source is None:
        return top
    if source.fixed is not None:
        return _literal(source.fixed)
    names: dict[str, Level] = {}
    for _, members in lattice.classes:
        for company in members:
            level = lattice.company(company)
            assert level is not None
            names.setdefault(COMPANY_PREFIX + company, level)
    for _, members in lattice.classes:  # an exact company name wins over a prefixed reading
        for company in members:
            names[company] = lattice.company(company)  # type: ignore[assignment]
    table = F.create_map(*[part for name, level in sorted(names.items())
                           for part in (F.lit(name), _literal(level))])
    return F.coalesce(F.element_at(table, F.col(str(source.attribute)).cast("string")), top)


def unknown_source(source: LevelSource | None, lattice: Lattice, level: Column) -> Column:
    """True for the tuples the shepherd put at the top because their source is unknown."""
    if source is None:
        return F.lit(True)
    if source.fixed is not None:
        return F.lit(False)
    return level == _literal(lattice.top)


def visible_at(level: Column, query_level: Level) -> Column:
    """``level ≤ query_level`` (Definition 4), entry by entry."""
    condition = F.lit(True)
    for k, entry in enumerate(query_level.code):
        mine = level[k]
        if entry == -1:
            continue  # T dominates everything in its class
        condition = condition & ((mine == 0) if entry == 0 else mine.isin(0, entry))
    return condition


def lub(levels: Sequence[Column], width: int) -> Column:
    """The least upper bound of the levels of one row's tuples (⊥ for none)."""
    if not levels:
        return F.array(*[F.lit(0)] * width)
    if len(levels) == 1:
        return levels[0]
    entries = []
    for k in range(width):
        value = levels[0][k]
        for other in levels[1:]:
            o = other[k]
            value = F.when(value == o, value).when(o == 0, value).when(value == 0, o).otherwise(F.lit(-1))
        entries.append(value)
    return F.array(*entries)


def lub_of_group(level: Column, width: int) -> list[Column]:
    """Aggregates whose results :func:`lub_from_parts` turns into the group's LUB."""
    parts = []
    for k in range(width):
        company = F.when(level[k] != 0, level[k])
        parts += [F.min(company).alias(f"__lub_min{k}"), F.max(company).alias(f"__lub_max{k}")]
    return parts


def lub_from_parts(width: int) -> Column:
    entries = []
    for k in range(width):
        low, high = F.col(f"__lub_min{k}"), F.col(f"__lub_max{k}")
        entries.append(F.when(low.isNull(), F.lit(0)).when(low == high, low).otherwise(F.lit(-1)))
    return F.array(*entries)


def level_text(level: Column, lattice: Lattice) -> Column:
    """``[1, ⊥]``: the level as the output writes it."""
    entries = []
    for k, (_, members) in enumerate(lattice.classes):
        names = F.array(*[F.lit(m) for m in members])
        entry = level[k]
        entries.append(F.when(entry == 0, F.lit(BOTTOM)).when(entry == -1, F.lit(TOP))
                       .otherwise(F.element_at(names, entry)))
    return F.concat(F.lit("["), F.concat_ws(", ", *entries), F.lit("]"))


def _literal(level: Level) -> Column:
    return F.array(*[F.lit(c) for c in level.code]).cast(LEVEL_TYPE)


__all__ = ["LEVEL_TYPE", "ROW_LEVEL", "level_text", "lub", "lub_from_parts", "lub_of_group",
           "shepherd_level", "unknown_source", "visible_at"]
