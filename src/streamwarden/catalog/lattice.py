"""The Chinese-Wall security lattice (Ray et al., section 3, Definitions 1-4).

Companies are partitioned into conflict-of-interest (COI) classes. A security level is
a vector with one entry per class: a company of that class, ⊥ (no information from the
class) or T (information from two or more of its companies). ``l1 ≤ l2`` (l2 dominates
l1) when, class by class, the entries are equal, l1's is ⊥ or l2's is T. The least
upper bound combines class by class: equal stays, ⊥ yields to the other, anything else
is T. Public ``[⊥, …, ⊥]`` is the bottom and trusted ``[T, …, T]`` the top.

    >>> lattice = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
    >>> one, b = lattice.parse("[1, ⊥]"), lattice.parse("[bot, B]")
    >>> str(lattice.lub(one, b)), one <= lattice.lub(one, b), one <= b
    ('[1, B]', True, False)
    >>> str(lattice.lub(one, lattice.parse("[2, _]"))), str(lattice.company("CompanyB"))
    ('[T, ⊥]', '[⊥, B]')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from streamwarden.errors import AuthorizationError, StreamwardenError

if TYPE_CHECKING:
    from streamwarden.catalog.model import Catalog

BOTTOM = "⊥"
TOP = "T"
_BOTTOM_SPELLINGS = frozenset({"⊥", "_", "bot", "bottom"})
_TOP_SPELLINGS = frozenset({"t", "top"})
_RESERVED = _BOTTOM_SPELLINGS | _TOP_SPELLINGS
#: The paper names companies "Company1", "CompanyB": a source value may carry this prefix.
COMPANY_PREFIX = "Company"


class LevelError(StreamwardenError):
    """A level text that does not parse, or names a company outside the lattice."""


@dataclass(frozen=True, order=False)
class Level:
    """A security level: one entry per COI class (a company, ``⊥`` or ``T``).

    Only levels of the same lattice compare; ``<=`` is dominance (a partial order, so
    ``not a <= b`` does not mean ``b <= a``).
    """

    entries: tuple[str, ...]
    code: tuple[int, ...] = field(default=(), compare=False, repr=False)  # see Lattice.code

    def __le__(self, other: "Level") -> bool:
        if len(self.entries) != len(other.entries):
            raise LevelError(f"levels {self} and {other} belong to different lattices")
        return all(a == b or a == BOTTOM or b == TOP for a, b in zip(self.entries, other.entries))

    def __ge__(self, other: "Level") -> bool:
        return other <= self

    def comparable(self, other: "Level") -> bool:
        return self <= other or other <= self

    def __str__(self) -> str:
        return "[" + ", ".join(self.entries) + "]"


@dataclass(frozen=True)
class LevelSource:
    """Where a stream's tuple levels come from (the trusted stream shepherd's input):
    the company named by attribute ``attribute``, or one ``fixed`` level for every tuple."""

    attribute: str | None = None
    fixed: Level | None = None

    def __str__(self) -> str:
        return f"from {self.attribute}" if self.attribute else f"fixed {self.fixed}"


def join_entries(a: str, b: str) -> str:
    """The LUB of two entries of one class."""
    if a == b or b == BOTTOM:
        return a
    if a == BOTTOM:
        return b
    return TOP


@dataclass(frozen=True)
class Lattice:
    """The COI classes, in order (the order fixes the positions of a level's entries)."""

    classes: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def of(cls, classes: Mapping[str, Iterable[object]]) -> "Lattice":
        """Build and validate: every company in exactly one class, no reserved names."""
        built: list[tuple[str, tuple[str, ...]]] = []
        owner: dict[str, str] = {}
        for name, companies in classes.items():
            members = tuple(str(c) for c in companies)
            if not members:
                raise LevelError(f"conflict-of-interest class {name} has no companies")
            for company in members:
                if company.lower() in _RESERVED or not company.strip() or re.search(r"[\[\],\s]", company):
                    raise LevelError(f"{company!r} cannot name a company (it spells ⊥ or T, or has [ ] , or spaces)")
                if company in owner:
                    raise LevelError(f"company {company} is in two conflict-of-interest classes: "
                                     f"{owner[company]} and {name}")
                owner[company] = str(name)
            built.append((str(name), members))
        if not built:
            raise LevelError("a lattice needs at least one conflict-of-interest class")
        return cls(tuple(built))

    @property
    def width(self) -> int:
        return len(self.classes)

    @property
    def bottom(self) -> Level:
        """Public: no company's information."""
        return self.level((BOTTOM,) * self.width)

    @property
    def top(self) -> Level:
        """Trusted: may hold information of every company."""
        return self.level((TOP,) * self.width)

    def lub(self, *levels: Level) -> Level:
        """The least upper bound (the bottom for no levels)."""
        entries = list(self.bottom.entries)
        for level in levels:
            self._check(level)
            entries = [join_entries(a, b) for a, b in zip(entries, level.entries)]
        return self.level(entries)

    def company(self, value: object) -> Level | None:
        """The level of data from one company (``Company`` prefix allowed), None if unknown."""
        if value is None:
            return None
        text = str(value)
        for candidate in (text, text[len(COMPANY_PREFIX):] if text.startswith(COMPANY_PREFIX) else None):
            for k, (_, members) in enumerate(self.classes):
                if candidate in members:
                    entries = [BOTTOM] * self.width
                    entries[k] = candidate
                    return self.level(entries)
        return None

    def parse(self, text: str) -> Level:
        """``[1, ⊥]``; ⊥ may be written ``_``, ``bot``; T may be written ``top``."""
        match = re.fullmatch(r"\s*\[(.*)\]\s*", str(text))
        if match is None:
            raise LevelError(f"a level is written like [1, ⊥] (one entry per class: "
                             f"{', '.join(n for n, _ in self.classes)}), not {text!r}")
        parts = [p.strip() for p in match.group(1).split(",")]
        if len(parts) != self.width:
            raise LevelError(f"level {text} has {len(parts)} entries; the lattice has {self.width} classes "
                             f"({', '.join(n for n, _ in self.classes)})")
        entries = []
        for part, (name, members) in zip(parts, self.classes):
            if part.lower() in _BOTTOM_SPELLINGS:
                entries.append(BOTTOM)
            elif part.lower() in _TOP_SPELLINGS:
                entries.append(TOP)
            elif part in members:
                entries.append(part)
            else:
                raise LevelError(f"level {text}: {part!r} is not a company of class {name} "
                                 f"({', '.join(members)}), ⊥ or T")
        return self.level(entries)

    def level(self, entries: Iterable[str]) -> Level:
        """A level from its entries, carrying its integer code."""
        entries = tuple(entries)
        return Level(entries, self.code(Level(entries)))

    def code(self, level: Level) -> tuple[int, ...]:
        """Integer entries for Spark: 0 = ⊥, -1 = T, company i of its class = i + 1."""
        self._check(level)
        return tuple(0 if e == BOTTOM else -1 if e == TOP else members.index(e) + 1
                     for e, (_, members) in zip(level.entries, self.classes))

    def decode(self, code: Iterable[int]) -> Level:
        return self.level(BOTTOM if c == 0 else TOP if c == -1 else members[c - 1]
                          for c, (_, members) in zip(code, self.classes))

    def levels(self) -> Iterable[Level]:
        """Every level of the lattice (for tests and small lattices)."""
        def extend(prefix: tuple[str, ...], k: int) -> Iterable[Level]:
            if k == self.width:
                yield self.level(prefix)
                return
            for entry in (BOTTOM, *self.classes[k][1], TOP):
                yield from extend(prefix + (entry,), k + 1)
        return extend((), 0)

    def _check(self, level: Level) -> None:
        if len(level.entries) != self.width:
            raise LevelError(f"level {level} does not belong to this lattice ({self.width} classes)")


def query_level(catalog: Catalog, user: str, requested: str | Level | None) -> Level | None:
    """The level a query of ``user`` runs at (None when the catalog has no lattice)."""
    lattice = catalog.lattice
    if not isinstance(lattice, Lattice):
        if requested is not None:
            raise AuthorizationError("a query level needs security levels: the catalog declares no lattice")
        return None
    clearance = catalog.clearance(user)
    if requested is None:
        return clearance  # type: ignore[return-value]
    try:
        level = requested if isinstance(requested, Level) else lattice.parse(requested)
    except LevelError as exc:
        raise AuthorizationError(str(exc)) from None
    if not level <= clearance:  # type: ignore[operator]
        raise AuthorizationError(f"{user} is cleared for {clearance}, which does not dominate {level}: "
                                 "a query cannot run above its user's clearance")
    return level


__all__ = ["BOTTOM", "COMPANY_PREFIX", "TOP", "Lattice", "Level", "LevelError", "LevelSource", "join_entries", "query_level"]
