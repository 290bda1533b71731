"""Tokenizer for the CQL dialect and for policy expressions.

Keywords are case-insensitive; identifiers keep their case. Strings may use single or
double quotes (the papers print ``msgType = "send"``). A time of day such as ``6:00am``
or ``19:30`` is one token, so that ``s1.timestamp > 6:00am`` from the privacy-switches
paper parses.

    >>> [t.kind for t in tokenize(SourceText("<q>", "SELECT a FROM s [RANGE 5 min]"))]
    ['SELECT', 'IDENT', 'FROM', 'IDENT', '[', 'RANGE', 'NUMBER', 'IDENT', ']', 'EOF']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamwarden.errors import QuerySyntaxError, SourceText, Span

KEYWORDS = frozenset(
    {
        "SELECT", "FROM", "WHERE", "GROUP", "BY", "AS", "AND", "OR", "NOT",
        "RANGE", "SLIDE", "ROWS", "NOW", "UNBOUNDED", "TRUE", "FALSE", "NULL", "IS",
        "ISTREAM", "DSTREAM", "RSTREAM",
    }
)

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*)
  | (?P<TIME>\d{1,2}:\d{2}(?::\d{2})?\s*(?:[aApP][mM])?(?![\w:]))
  | (?P<NUMBER>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)
  | (?P<STRING>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<IDENT>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<OP><>|!=|<=|>=|=|<|>|\+|-|\*|/|%)
  | (?P<PUNCT>[(),.;:{}\[\]⊥])
    """,
    # ASCII: whitespace, digits and word characters are the ASCII ones (Python would take other
    # scripts' digits and spaces), so the JVM's pattern reader (SpEncoder.java) can be exact.
    re.VERBOSE | re.ASCII,
)


@dataclass(frozen=True)
class Token:
    kind: str  # a keyword in upper case, IDENT, NUMBER, STRING, TIME, an operator, or EOF
    text: str
    span: Span

    @property
    def upper(self) -> str:
        return self.text.upper()


def tokenize(source: SourceText) -> list[Token]:
    """Split ``source`` into tokens, raising :class:`QuerySyntaxError` on a stray character."""
    tokens: list[Token] = []
    text, pos = source.text, 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            if text[pos] in "'\"":
                raise QuerySyntaxError("unterminated string literal", source, Span(pos, len(text)))
            raise QuerySyntaxError(f"unexpected character {text[pos]!r}", source, Span(pos, pos + 1))
        kind = match.lastgroup or ""
        span = Span(match.start(), match.end())
        pos = match.end()
        if kind == "ws":
            continue
        value = match.group()
        if kind == "IDENT" and value.upper() in KEYWORDS:
            kind = value.upper()
        elif kind in ("OP", "PUNCT"):
            kind = "<>" if value == "!=" else value
        tokens.append(Token(kind, value, span))
    tokens.append(Token("EOF", "", Span(len(text), len(text))))
    return tokens
