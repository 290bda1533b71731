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

On Spark a level is one ``bigint`` (:meth:`Lattice.bits`): a bit per company, so that
dominance is a mask test and the LUB a bitwise OR (see
:mod:`streamwarden.engine.levels.columns`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Mapping

from streamwarden.errors import AuthorizationError, StreamwardenError, UnsupportedError

if TYPE_CHECKING:
    from streamwarden.catalog.model import Catalog

BOTTOM = "⊥"
TOP = "T"
_BOTTOM_SPELLINGS = frozenset({"⊥", "_", "bot", "bottom"})
_TOP_SPELLINGS = frozenset({"t", "top"})
_RESERVED = _BOTTOM_SPELLINGS | _TOP_SPELLINGS
#: The paper names companies "Company1", "CompanyB": a source value may carry this prefix.
COMPANY_PREFIX = "Company"
#: Bits a level may use on Spark: a ``bigint`` less its sign bit, so every level is a
#: non-negative number in Python and in Spark alike.
LEVEL_BITS = 63


class LevelError(StreamwardenError):
    """A level text that does not parse, or names a company outside the lattice."""


class LatticeTooLarge(LevelError, UnsupportedError):
    """A lattice whose levels do not fit one ``bigint`` (a :class:`LevelError`, so the
    catalog loader reports it at the lattice's line; an :class:`UnsupportedError` for
    whoever builds a lattice directly)."""


@dataclass(frozen=True, order=False)
class Level:
    """A security level: one entry per COI class (a company, ``⊥`` or ``T``).

    Only levels of the same lattice compare; ``<=`` is dominance (a partial order, so
    ``not a <= b`` does not mean ``b <= a``).
    """

    entries: tuple[str, ...]
    bits: int = field(default=0, compare=False, repr=False)  # see Lattice.bits

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
class ClassBits:
    """Where one COI class lives in a level's ``bigint``: a bit per company (in the class's
    order), and for a class of one company one more bit, its T.

    T is every bit of the class, and any two bits of it are T as well: an OR of two
    companies' levels is the LUB, T. A lone company's class needs the extra bit, or T
    would be that company's own bit and a tuple at T would pass for the company's data.

        >>> lone = ClassBits(0b11, (("1", 0b01),))
        >>> lone.entry(0b01), lone.entry(0b11), lone.entry(0b100)
        ('1', 'T', '⊥')
    """

    mask: int  # every bit of the class: its T
    companies: tuple[tuple[str, int], ...]  # (company, its single bit)

    def entry(self, bits: int) -> str:
        """The class's entry in ``bits``: ⊥ (no bit), a company (its bit alone), else T."""
        part = bits & self.mask
        if part == 0:
            return BOTTOM
        return next((name for name, bit in self.companies if bit == part), TOP)


@dataclass(frozen=True)
class Lattice:
    """The COI classes, in order (the order fixes the positions of a level's entries)."""

    classes: tuple[tuple[str, tuple[str, ...]], ...]

    def __post_init__(self) -> None:
        needed = sum(max(len(members), 2) for _, members in self.classes)
        if needed > LEVEL_BITS:
            companies = sum(len(members) for _, members in self.classes)
            lone = sum(1 for _, members in self.classes if len(members) == 1)
            extra = f", and one for T in each of its {lone} single-company classes" if lone else ""
            raise LatticeTooLarge(
                f"the lattice has {companies} companies in {len(self.classes)} classes: its levels need {needed} "
                f"bits (one per company{extra}), more than the {LEVEL_BITS} a level holds (one Spark bigint less "
                "its sign bit)")

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
        """A level from its entries, carrying its bits."""
        entries = tuple(entries)
        return Level(entries, self.bits(Level(entries)))

    @cached_property
    def class_bits(self) -> tuple[ClassBits, ...]:
        """Each class's bits, in class order: classes take consecutive bits from bit 0.

        >>> [(c.mask, c.companies) for c in Lattice.of({"C1": ["1", "2"], "C2": ["A"]}).class_bits]
        [(3, (('1', 1), ('2', 2))), (12, (('A', 4),))]
        """
        out, first = [], 0
        for _, members in self.classes:
            width = max(len(members), 2)  # a lone company: a second bit for T
            out.append(ClassBits(((1 << width) - 1) << first,
                                 tuple((company, 1 << (first + i)) for i, company in enumerate(members))))
            first += width
        return tuple(out)

    def bits(self, level: Level) -> int:
        """The level as Spark holds it: per class no bit (⊥), its company's bit, or all its bits (T).

        >>> lattice = Lattice.of({"C1": ["1", "2"], "C2": ["A", "B", "C"]})
        >>> [lattice.bits(lattice.parse(text)) for text in ("[⊥, ⊥]", "[2, ⊥]", "[⊥, B]", "[T, C]", "[T, T]")]
        [0, 2, 8, 19, 31]
        """
        self._check(level)
        value = 0
        for entry, cls in zip(level.entries, self.class_bits):
            value |= cls.mask if entry == TOP else 0 if entry == BOTTOM else dict(cls.companies)[entry]
        return value

    def from_bits(self, bits: int) -> Level:
        """The level ``bits`` stand for, the inverse of :meth:`bits`; a class holding two or more
        bits is T (so an OR of levels reads as their LUB).

        >>> lattice = Lattice.of({"C1": ["1", "2"], "C2": ["A", "B", "C"]})
        >>> str(lattice.from_bits(0b00110)), str(lattice.from_bits(0b01001))
        ('[2, A]', '[1, B]')
        >>> str(lattice.from_bits(lattice.bits(lattice.parse("[1, A]")) | lattice.bits(lattice.parse("[2, ⊥]"))))
        '[T, A]'
        """
        stray = bits & ~sum(cls.mask for cls in self.class_bits)
        if bits < 0 or stray:
            raise LevelError(f"{bits} is not a level of this lattice (bits {stray:#x} belong to no class)")
        return self.level(cls.entry(bits) for cls in self.class_bits)

    def normalise(self, bits: int) -> int:
        """``bits`` with every class that is T (two or more bits) holding all its bits: the one
        form equal levels share.

        >>> Lattice.of({"C1": ["1", "2", "3"]}).normalise(0b011)
        7
        """
        return self.bits(self.from_bits(bits))

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
        return clearance
    try:
        level = requested if isinstance(requested, Level) else lattice.parse(requested)
    except LevelError as exc:
        raise AuthorizationError(str(exc)) from None
    if not level <= clearance:
        raise AuthorizationError(f"{user} is cleared for {clearance}, which does not dominate {level}: "
                                 "a query cannot run above its user's clearance")
    return level


__all__ = ["BOTTOM", "COMPANY_PREFIX", "LEVEL_BITS", "TOP", "ClassBits", "Lattice", "LatticeTooLarge", "Level",
           "LevelError", "LevelSource", "join_entries", "query_level"]
