"""A cursor over tokens, shared by every parser (CQL, INSERT SP, SP patterns).

It never moves past EOF, and its errors name the offending token's line and column:

    >>> from streamwarden.errors import SourceText
    >>> from streamwarden.language.lexer import tokenize
    >>> source = SourceText("<q>", "a b")
    >>> cursor = TokenCursor(tokenize(source), 0, source)
    >>> cursor.advance().text, cursor.peek().kind, cursor.accept("IDENT").text, cursor.tok.kind
    ('a', 'EOF', 'b', 'EOF')
"""

from __future__ import annotations

from typing import NoReturn

from streamwarden.errors import QuerySyntaxError, SourceText
from streamwarden.language.lexer import Token


class TokenCursor:
    def __init__(self, tokens: list[Token], pos: int, source: SourceText):
        self.tokens = tokens
        self.pos = pos
        self.source = source

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return tok

    def accept(self, *kinds: str) -> Token | None:
        return self.advance() if self.tok.kind in kinds else None

    def expect(self, kind: str, what: str | None = None) -> Token:
        if self.tok.kind != kind:
            self.fail(f"expected {what or kind}")
        return self.advance()

    def fail(self, message: str, token: Token | None = None) -> NoReturn:
        token = token or self.tok
        found = "end of input" if token.kind == "EOF" else repr(token.text)
        raise QuerySyntaxError(f"{message}, found {found}", self.source, token.span)
