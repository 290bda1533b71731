"""``INSERT SP`` statements: security punctuations written in CQL (Nehme et al., Fig. 7/8).

    INSERT {SP | SECURITY PUNCTUATION} [[AS] name] INTO STREAM [stream] LET
        [name.]DDP = {STREAMS|TUPLES|ATTRIBUTES}:pattern {AND ...},
        [name.]SRP = [frbac:]pattern [WITH GRANT OPTION],
        [[name.]SIGN = POSITIVE | NEGATIVE,]
        [[name.]IMMUTABLE = TRUE | FALSE]

Commas between the assignments are optional (Fig. 8b omits one). ``TUPLES:ALL`` is ``*``.

    >>> s = parse_insert_sp('''INSERT SP AS sp1 INTO STREAM s3 LET sp1.DDP = TUPLES:[120, 200]
    ... AND ATTRIBUTES:Frequency, sp1.SRP = frbac:R1 WITH GRANT OPTION, sp1.SIGN = POSITIVE,
    ... sp1.IMMUTABLE = TRUE''')
    >>> (s.name, s.stream, str(s.tuples), str(s.attributes), str(s.roles), s.grant, s.positive, s.immutable)
    ('sp1', 's3', '[120, 200]', 'Frequency', 'R1', True, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamwarden.errors import SourceText, Span
from streamwarden.language.cursor import TokenCursor
from streamwarden.language.lexer import Token, tokenize
from streamwarden.language.patterns import Pattern, Wildcard, pattern_at

_DDP_PARTS = {"STREAMS": "streams", "TUPLES": "tuples", "ATTRIBUTES": "attributes"}
_MODELS = {"FRBAC", "RBAC"}


@dataclass(frozen=True)
class InsertSp:
    """One parsed INSERT SP statement (the SP without its ts and sn)."""

    name: str | None
    stream: str | None  # INTO STREAM <name>; None inside ON RESULT (the query's result)
    streams: Pattern | None  # DDP STREAMS: part, if written
    tuples: Pattern
    attributes: Pattern
    roles: Pattern
    grant: bool
    positive: bool
    immutable: bool
    span: Span = field(compare=False, repr=False)


@dataclass
class _Lets:
    """A statement's LET assignments as read; None: not given."""

    ddp: dict[str, Pattern] | None = None
    srp: tuple[Pattern, bool] | None = None  # the roles and WITH GRANT OPTION
    sign: bool | None = None  # POSITIVE
    immutable: bool | None = None


class _SpParser(TokenCursor):
    def word(self, *words: str) -> Token:
        if self.tok.upper not in words:
            self.fail(f"expected {' or '.join(words)}")
        return self.advance()

    def accept_word(self, *words: str) -> Token | None:
        return self.advance() if self.tok.upper in words else None

    def statement(self) -> InsertSp:
        start = self.word("INSERT")
        if self.accept_word("SECURITY"):
            self.word("PUNCTUATION")
        else:
            self.word("SP")
        name = None
        if self.accept_word("AS") or (self.tok.kind == "IDENT" and self.tok.upper != "INTO"):
            name = self.advance().text
        self.word("INTO")
        self.word("STREAM")
        stream = None
        if self.tok.upper != "LET":
            stream = self.advance().text
        self.word("LET")
        values = _Lets()
        while True:
            self.assignment(name, values)
            if self.tok.kind == ",":
                self.advance()
            if self.tok.kind in ("EOF", ";", ")") or self.tok.upper in ("INSERT", "SELECT"):
                break
        if values.ddp is None:
            self.fail("INSERT SP needs DDP = ...")
        if values.srp is None:
            self.fail("INSERT SP needs SRP = ...")
        end = self.tokens[self.pos - 1].span
        ddp = values.ddp
        roles, grant = values.srp
        return InsertSp(name, stream, ddp.get("streams"), ddp.get("tuples", Wildcard()),
                        ddp.get("attributes", Wildcard()), roles, grant,
                        True if values.sign is None else values.sign, bool(values.immutable),
                        span=start.span.merge(end))

    def assignment(self, name: str | None, values: _Lets) -> None:
        target = self.tok
        if self.peek().kind == ".":
            qualifier = self.advance()
            if name is not None and qualifier.text != name:
                self.fail(f"this statement's SP is named {name!r}", qualifier)
            self.advance()
        key = self.word("DDP", "SRP", "SIGN", "IMMUTABLE").upper
        if getattr(values, key.lower()) is not None:
            self.fail(f"{key} is given twice", target)
        if self.tok.kind != "=":
            self.fail(f"expected '=' after {key}")
        self.advance()
        if key == "DDP":
            values.ddp = self.ddp()
        elif key == "SRP":
            values.srp = self.srp()
        elif key == "SIGN":
            values.sign = self.word("POSITIVE", "NEGATIVE").upper == "POSITIVE"
        else:
            values.immutable = self.word("TRUE", "FALSE").upper == "TRUE"

    def ddp(self) -> dict[str, Pattern]:
        parts: dict[str, Pattern] = {}
        while True:
            part = self.word(*_DDP_PARTS)
            if self.tok.kind != ":":
                self.fail(f"expected ':' after {part.upper}")
            self.advance()
            if _DDP_PARTS[part.upper] in parts:
                self.fail(f"{part.upper} is given twice", part)
            parts[_DDP_PARTS[part.upper]], self.pos = pattern_at(self.tokens, self.pos, self.source)
            if self.tok.kind != "AND":
                return parts
            self.advance()

    def srp(self) -> tuple[Pattern, bool]:
        if self.peek().kind == ":" and self.tok.upper in _MODELS:
            self.advance()
            self.advance()
        elif self.peek().kind == ":":
            self.fail("the only access control model is frbac (role-based)")
        roles, self.pos = pattern_at(self.tokens, self.pos, self.source)
        grant = False
        if self.accept_word("WITH"):
            self.word("GRANT")
            self.word("OPTION")
            grant = True
        return roles, grant


def parse_insert_sp(text: str, name: str = "<sp>") -> InsertSp:
    """Parse one INSERT SP statement; errors name line and column."""
    source = SourceText(name, text)
    tokens = tokenize(source)
    parser = _SpParser(tokens, 0, source)
    statement = parser.statement()
    if parser.tok.kind == ";":
        parser.advance()
    if parser.tok.kind != "EOF":
        parser.fail("expected the end of the INSERT SP statement")
    return statement


def insert_sp_at(tokens: list[Token], pos: int, source: SourceText) -> tuple[InsertSp, int]:
    """Parse an INSERT SP inside a larger text (a query's ON RESULT clause)."""
    parser = _SpParser(tokens, pos, source)
    return parser.statement(), parser.pos
