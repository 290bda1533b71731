"""Pattern expressions of security punctuations (Nehme et al., Fig. 5).

``{}`` matches nothing, ``*`` everything, ``c`` one constant, ``(c1, c2)`` values strictly
between, ``[c1, c2]`` values between inclusively, ``{c1, c2, c3}`` the listed values.
Numbers compare as numbers, everything else as text (so a patient id 120 matches
``[100, 200]``, and role ``GP`` matches ``{GP, C}``).

    >>> parse_pattern("[120, 133]").matches(125), parse_pattern("(120, 133)").matches(120)
    (True, False)
    >>> parse_pattern("{GP, C}").matches("C"), parse_pattern("{}").matches("C"), parse_pattern("*").matches(7)
    (True, False, True)
    >>> str(parse_pattern(" { D , ND } "))
    '{D, ND}'
    >>> parse_pattern("[-9223372036854775808, 9223372036854775807]").matches(0)
    True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from streamwarden.errors import QuerySyntaxError, SourceText
from streamwarden.language.cursor import TokenCursor
from streamwarden.language.lexer import Token, tokenize

Value = int | float | str


class Pattern:
    """Base of the six pattern kinds; each says whether a value matches."""

    def matches(self, value: object) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class Empty(Pattern):
    def matches(self, value: object) -> bool:
        return False

    def __str__(self) -> str:
        return "{}"


@dataclass(frozen=True)
class Wildcard(Pattern):
    def matches(self, value: object) -> bool:
        return True

    def __str__(self) -> str:
        return "*"


@dataclass(frozen=True)
class Constant(Pattern):
    value: Value

    def matches(self, value: object) -> bool:
        return _same(value, self.value)

    def __str__(self) -> str:
        return _text(self.value)


@dataclass(frozen=True)
class Range(Pattern):
    low: Value
    high: Value
    inclusive: bool

    def matches(self, value: object) -> bool:
        if value is None:
            return False
        above = _before(self.low, value, strictly=not self.inclusive)
        below = _before(value, self.high, strictly=not self.inclusive)
        return above and below

    def __str__(self) -> str:
        open_, close = ("[", "]") if self.inclusive else ("(", ")")
        return f"{open_}{_text(self.low)}, {_text(self.high)}{close}"


@dataclass(frozen=True)
class SetOf(Pattern):
    values: tuple[Value, ...]

    def matches(self, value: object) -> bool:
        return any(_same(value, v) for v in self.values)

    def __str__(self) -> str:
        return "{" + ", ".join(_text(v) for v in self.values) + "}"


#: How text must look to read as a number: a plain decimal, spaces around it allowed. The
#: engine reads a text key the same way (streamwarden.engine.shield.decide.key_number), and so
#: does the JVM's SP encoder; Python's own float() would also take ``inf``, ``nan``, ``1_0``
#: and other scripts' digits, so a name such as a role ``nan`` would stop matching itself.
#: (``\x0b``, not ``\v``: in a Java regex, which Spark's ``rlike`` runs, ``\v`` is a wider class.)
NUMERIC_TEXT = re.compile(r"[ \t\n\r\f\x0b]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r\f\x0b]*")


def number_of(value: object) -> float | None:
    """The value as a double when it reads as a number (see :data:`NUMERIC_TEXT`), else None.

    >>> number_of(7), number_of(" 1e3 "), number_of("inf"), number_of("1_0"), number_of(True)
    (7.0, 1000.0, None, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)  # as doubles, like the engine's mask computation
        except OverflowError:  # an integer beyond a double's range is an infinity, not an error
            return math.inf if value > 0 else -math.inf
    text = str(value)
    return float(text) if NUMERIC_TEXT.fullmatch(text) else None


_number = number_of


def _same(a: object, b: object) -> bool:
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na == nb
    return str(a) == str(b)


def _before(a: object, b: object, *, strictly: bool) -> bool:
    """``a <= b`` (``a < b`` strictly), as numbers when both read as numbers, else as text."""
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na < nb if strictly else na <= nb
    ta, tb = str(a), str(b)
    return ta < tb if strictly else ta <= tb


def _text(value: Value) -> str:
    return str(value)


# -- parsing ------------------------------------------------------------------------------
_MAX_LONG = 2**63 - 1


def _pattern_number(tok: Token, source: SourceText) -> int | float:
    """A number in a pattern: a long or a finite double, as the tuples' keys are (else an error,
    not a value that Python cannot compare or convert)."""
    text = tok.text
    if not any(c in text for c in ".eE"):
        digits = text.lstrip("0")
        if len(digits) <= 19 and int(digits or "0") <= _MAX_LONG + 1:  # -2**63 once negated
            return int(digits or "0")
    else:
        value = float(text)
        if not math.isinf(value):
            return value
    raise QuerySyntaxError(f"number {text[:30]} is out of range in a pattern", source, tok.span)


class _PatternParser(TokenCursor):
    def value(self) -> Value:
        tok = self.tok
        if tok.kind == "-" and self.peek().kind == "NUMBER":
            self.advance()
            return -_pattern_number(self.advance(), self.source)  # -2**63 is a long
        if tok.kind == "NUMBER":
            number = _pattern_number(tok, self.source)
            if number == _MAX_LONG + 1:
                self.fail("number out of range in a pattern (a long is at most 9223372036854775807)")
            self.advance()
            return number
        if tok.kind == "STRING":
            self.advance()
            return tok.text[1:-1]
        if tok.text[:1].isalpha() or tok.text[:1] == "_":
            self.advance()
            return tok.text
        self.fail("expected a value in a pattern")
        raise AssertionError

    def pattern(self) -> Pattern:
        tok = self.tok
        if tok.kind == "*" or tok.upper == "ALL":
            self.advance()
            return Wildcard()
        if tok.kind == "{":
            self.advance()
            values: list[Value] = []
            while self.tok.kind != "}":
                values.append(self.value())
                if self.tok.kind == ",":
                    self.advance()
                elif self.tok.kind != "}":
                    self.fail("expected ',' or '}' in a set pattern")
            self.advance()
            return SetOf(tuple(values)) if values else Empty()
        if tok.kind in ("[", "("):
            inclusive = tok.kind == "["
            self.advance()
            low = self.value()
            if self.tok.kind != ",":
                self.fail("expected ',' in a range pattern")
            self.advance()
            high = self.value()
            if self.tok.kind != ("]" if inclusive else ")"):
                self.fail(f"expected '{']' if inclusive else ')'}' to close the range")
            self.advance()
            return Range(low, high, inclusive)
        return Constant(self.value())


def parse_pattern(text: str, name: str = "<pattern>") -> Pattern:
    """Parse one pattern expression; raises :class:`QuerySyntaxError` naming the column."""
    source = SourceText(name, text)
    tokens = tokenize(source)
    parser = _PatternParser(tokens, 0, source)
    pattern = parser.pattern()
    if parser.tok.kind != "EOF":
        parser.fail("expected the end of the pattern")
    return pattern


def pattern_at(tokens: list[Token], pos: int, source: SourceText) -> tuple[Pattern, int]:
    """Parse a pattern starting at ``tokens[pos]`` (inside INSERT SP); returns it and the next position."""
    parser = _PatternParser(tokens, pos, source)
    return parser.pattern(), parser.pos


__all__ = ["NUMERIC_TEXT", "Constant", "Empty", "Pattern", "Range", "SetOf", "Wildcard", "number_of", "parse_pattern",
           "pattern_at"]
