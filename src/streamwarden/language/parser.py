"""Recursive-descent parser for the CQL dialect and for policy expressions.

Grammar (keywords case-insensitive)::

    query     := SELECT items FROM source {"," source} [WHERE expr] [GROUP BY expr {"," expr}] [";"]
    items     := item {"," item};   item := "*" | expr [[AS] ident]
    source    := ident [[AS] ident] [window]
    window    := "[" ( RANGE duration [[","] SLIDE duration] | ROWS int | NOW | UNBOUNDED ) "]"
    duration  := number unit        (ms, s, sec, second(s), min, minute(s), h, hour(s), day(s))
    expr      := or;  or := and {OR and};  and := not {AND not};  not := NOT not | cmp
    cmp       := sum [(= | <> | != | < | <= | > | >=) sum | IS [NOT] NULL]
    sum       := product {(+|-) product};  product := unary {(*|/|%) unary}
    unary     := - unary | primary
    primary   := number | string | time-of-day | TRUE | FALSE | NULL | "(" expr ")"
               | ident ["." ident] | ident "(" [ "*" | expr {"," expr} ] ")" | COUNT

Limits (the MAX_* constants below, stated in README's CQL reference) are checked while
parsing, so a query of 10,000 parentheses or a 5,000-term OR is a QuerySyntaxError at
the token that goes over, never a RecursionError here or in a later pass.

    >>> q = parse_query("SELECT AVG(Pos) FROM Position [RANGE 1 hour SLIDE 10 min] WHERE Pos >= 5")
    >>> q.sources[0].window.size_seconds, q.sources[0].window.slide_seconds
    (3600.0, 600.0)
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, TypeVar

from streamwarden.errors import QuerySyntaxError, SourceText, Span
from streamwarden.language import ast
from streamwarden.language.cursor import TokenCursor
from streamwarden.language.lexer import Token, tokenize

if TYPE_CHECKING:  # INSERT SP's grammar is loaded when a query has ON RESULT
    from streamwarden.language.insert_sp import InsertSp

_UNITS: dict[str, float] = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}
N = TypeVar("N", bound=ast.Expr)  # a node type, kept by Parser.built
_COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})

# -- Limits ---------------------------------------------------------------------------------
# Every pass after the parser (binder, plan rewrites, z3 translation, compilation to Spark
# Columns) recurses over expression trees, and AND/OR/arithmetic chains are left-deep
# trees, so the *height* of an expression is what must stay well below Python's recursion
# limit (1,000 frames, some of which the caller already uses). The parser refuses, with a
# QuerySyntaxError at the offending token and before any recursion gets deep, what would
# exceed these limits; they are stated in README's CQL reference.
MAX_TEXT_CHARS = 65_536  # a query or a policy condition
MAX_NESTING = 64  # open parentheses, NOTs, unary minuses and function calls around a point
MAX_CHAIN_TERMS = 128  # terms of one AND / OR / + - / * / % chain
MAX_HEIGHT = 160  # height of the expression tree (a chain of n terms is n - 1 levels deep)
MAX_LONG = 2**63 - 1  # integer literals are Spark longs at most
MAX_ROWS = 1_000_000  # [ROWS n]
MAX_DURATION_SECONDS = 100 * 365.25 * 86400  # 100 years: windows, slides, policy windows
MIN_DURATION_SECONDS = 1e-6  # Spark keeps event time in microseconds
#: The most windows ``[RANGE size SLIDE slide]`` may put each tuple in (size over slide, rounded up):
#: Spark copies every tuple into each window it falls in, before any filter, so a day sliding by a
#: second multiplies every reading 86,400-fold (and its analysis alone outlasts a registration).
#: A day of 15-minute slides is 96. Policies' windows (``window: {size, offset}``) are held to it too.
MAX_WINDOWS_PER_TUPLE = 100


class _Parser(TokenCursor):
    def __init__(self, source: SourceText):
        if len(source.text) > MAX_TEXT_CHARS:
            raise QuerySyntaxError(f"the text is longer than {MAX_TEXT_CHARS:,} characters", source,
                                   Span(MAX_TEXT_CHARS, MAX_TEXT_CHARS + 1))
        super().__init__(tokenize(source), 0, source)
        self.depth = 0  # nesting open around the current token (see MAX_NESTING)
        self.heights: dict[int, int] = {}  # id(node) -> height of composite nodes built so far

    def height(self, node: ast.Expr) -> int:
        return self.heights.get(id(node), 1)

    def built(self, node: N, *children: ast.Expr, at: Token | None = None) -> N:
        """Record ``node``'s height (one more than its highest child) and refuse it above MAX_HEIGHT."""
        height = 1 + max((self.height(c) for c in children), default=0)
        if height > MAX_HEIGHT:
            raise QuerySyntaxError(f"the expression is nested too deeply (its tree has more than {MAX_HEIGHT} "
                                   f"levels): split it or simplify it", self.source, (at.span if at else node.span))
        self.heights[id(node)] = height
        return node

    def enter(self, token: Token, count: int = 1) -> None:
        """Open ``count`` nesting levels at ``token`` (a '(', NOT, unary '-' or call)."""
        self.depth += count
        if self.depth > MAX_NESTING:
            raise QuerySyntaxError(f"more than {MAX_NESTING} nested parentheses, NOTs, minus signs or calls",
                                   self.source, token.span)

    def chain_term(self, terms: int, op: Token) -> None:
        if terms > MAX_CHAIN_TERMS:
            raise QuerySyntaxError(f"more than {MAX_CHAIN_TERMS} terms joined by {op.text.upper()}: simplify "
                                   f"the condition", self.source, op.span)

    def ident(self, what: str, *, keywords: bool = False) -> Token:
        # After a '.', keywords double as names (s.range, self.group).
        if self.tok.kind == "IDENT" or (keywords and self.tok.text[:1].isalpha()):
            return self.advance()
        self.fail(f"expected {what}")
        raise AssertionError  # unreachable

    # -- query ----------------------------------------------------------------------
    def query(self) -> ast.Query:
        self.expect("SELECT", "SELECT")
        items = [self.select_item()]
        while self.accept(","):
            items.append(self.select_item())
        self.expect("FROM", "FROM or ',' between select items")
        sources = [self.from_item()]
        while self.accept(","):
            sources.append(self.from_item())
        where = self.expr() if self.accept("WHERE") else None
        group_by: list[ast.Expr] = []
        if self.accept("GROUP"):
            self.expect("BY", "BY after GROUP")
            group_by.append(self.expr())
            while self.accept(","):
                group_by.append(self.expr())
        on_result = self.on_result()
        self.accept(";")
        if self.tok.kind != "EOF":
            self.fail("expected end of query")
        return ast.Query(tuple(items), tuple(sources), where, tuple(group_by), source=self.source,
                         on_result=on_result)

    def at_on_result(self) -> bool:
        return self.tok.upper == "ON" and self.peek().upper == "RESULT"

    def on_result(self) -> tuple[InsertSp, ...]:
        """``ON RESULT (INSERT SP ... [, INSERT SP ...])`` (Nehme et al., Fig. 8b)."""
        if not self.at_on_result():
            return ()
        from streamwarden.language.insert_sp import insert_sp_at  # INSERT SP has its own small grammar

        self.advance()
        self.advance()
        self.expect("(", "'(' after ON RESULT")
        statements = []
        while True:
            statement, self.pos = insert_sp_at(self.tokens, self.pos, self.source)
            statements.append(statement)
            if not self.accept(",") and self.tok.upper != "INSERT":
                break
        self.expect(")", "')' to close ON RESULT")
        return tuple(statements)

    def select_item(self) -> ast.SelectItem:
        start = self.tok.span
        if self.tok.kind == "*":
            self.advance()
            return ast.SelectItem(ast.Star(start), None, start)
        if self.tok.kind == "IDENT" and self.peek().kind == "." and self.peek(2).kind == "*":
            qualifier = self.advance().text
            self.advance()
            end = self.advance().span
            return ast.SelectItem(ast.Star(start.merge(end), qualifier), None, start.merge(end))
        expr = self.expr()
        alias = self.alias()
        if alias is None:
            return ast.SelectItem(expr, None, start.merge(expr.span))
        return ast.SelectItem(expr, alias.text, start.merge(expr.span), alias.span)

    def from_item(self) -> ast.FromItem:
        stream = self.ident("a stream name")
        alias = self.alias()
        window = self.window() if self.tok.kind == "[" else None
        if alias is None:
            return ast.FromItem(stream.text, None, window, stream.span)
        return ast.FromItem(stream.text, alias.text, window, stream.span, alias.span)

    def alias(self) -> Token | None:
        """``[AS] ident`` after a select item or a stream, if there is one."""
        if self.accept("AS"):
            return self.ident("an alias after AS")
        if self.tok.kind == "IDENT" and not self.at_on_result():
            return self.advance()
        return None

    def window(self) -> ast.Window:
        open_ = self.expect("[")
        kind = self.tok.kind
        if self.accept("RANGE"):
            size, size_text = self.timed()
            slide, slide_text = None, ""
            if self.tok.kind == "," and self.peek().kind == "SLIDE":
                self.advance()
            if self.accept("SLIDE"):
                slide, slide_text = self.timed()
            window = ast.Window("range", size, slide, span=open_.span)
        elif self.accept("ROWS"):
            count = self.expect("NUMBER", "a row count after ROWS")
            if not count.text.isdigit() or not count.text.strip("0"):
                self.fail("ROWS needs a positive whole number", count)
            digits = count.text.lstrip("0")
            if len(digits) > len(str(MAX_ROWS)) or int(digits) > MAX_ROWS:
                raise QuerySyntaxError(f"a [ROWS n] window holds at most {MAX_ROWS:,} tuples", self.source,
                                       count.span)
            window = ast.Window("rows", rows=int(digits), span=open_.span)
        elif self.accept("NOW"):
            window = ast.Window("now", 0.0, span=open_.span)
        elif self.accept("UNBOUNDED"):
            window = ast.Window("unbounded", span=open_.span)
        else:
            self.fail("expected RANGE, ROWS, NOW or UNBOUNDED in a window")
            raise AssertionError
        close = self.expect("]", "']' to close the window")
        del kind
        span = open_.span.merge(close.span)
        if window.kind == "range" and window.size_seconds is not None and window.slide_seconds is not None:
            self.check_windows_per_tuple(window.size_seconds, window.slide_seconds, size_text, slide_text, span)
        return ast.Window(window.kind, window.size_seconds, window.slide_seconds, window.rows, span=span)

    def check_windows_per_tuple(self, size: float, slide: float, size_text: str, slide_text: str, span: Span) -> None:
        """Refuse a window that puts each tuple in more than :data:`MAX_WINDOWS_PER_TUPLE` windows."""
        count = windows_per_tuple(size, slide)
        if count > MAX_WINDOWS_PER_TUPLE:
            raise QuerySyntaxError(
                f"RANGE {size_text} SLIDE {slide_text} puts each tuple in {count:,} windows (at most "
                f"{MAX_WINDOWS_PER_TUPLE} are allowed): make the SLIDE at least "
                f"{seconds_text(size / MAX_WINDOWS_PER_TUPLE)} or the RANGE shorter", self.source, span)

    def timed(self) -> tuple[float, str]:
        """A window's duration (:meth:`duration`) and its text as written, on one line."""
        first = self.tok.span
        seconds = self.duration()
        last = self.tokens[self.pos - 1].span
        return seconds, " ".join(self.source.text[first.start : last.end].split())

    def duration(self, *, zero: bool = False, what: str = "a window duration") -> float:
        number = self.expect("NUMBER", "a duration such as '10 seconds' or '5 min'")
        unit = self.tok
        if unit.kind != "IDENT" or unit.text.lower() not in _UNITS:
            self.fail("expected a time unit (seconds, min, hours, ...)")
        self.advance()
        seconds = float(number.text) * _UNITS[unit.text.lower()]
        span = number.span.merge(unit.span)
        if seconds < 0 or (seconds == 0 and not zero):
            message = f"{what} must be positive" if not zero else "a duration cannot be negative"
            raise QuerySyntaxError(message, self.source, span)
        # Checked here, not left to Spark: windows are microsecond intervals added to timestamps,
        # and a duration of 1e20 days (or inf) overflows them there.
        if seconds > MAX_DURATION_SECONDS:
            raise QuerySyntaxError("a duration can be at most 100 years", self.source, span)
        if 0 < seconds < MIN_DURATION_SECONDS:
            raise QuerySyntaxError("a duration must be at least 1 microsecond", self.source, span)
        return seconds

    # -- expressions ----------------------------------------------------------------
    def expr(self) -> ast.Expr:
        return self.or_()

    def or_(self) -> ast.Expr:
        left = self.and_()
        terms = 1
        while self.tok.kind == "OR":
            op = self.advance()
            terms += 1
            self.chain_term(terms, op)
            right = self.and_()
            left = self.built(ast.Binary("OR", left, right, span=left.span.merge(right.span)), left, right, at=op)
        return left

    def and_(self) -> ast.Expr:
        left = self.not_()
        terms = 1
        while self.tok.kind == "AND":
            op = self.advance()
            terms += 1
            self.chain_term(terms, op)
            right = self.not_()
            left = self.built(ast.Binary("AND", left, right, span=left.span.merge(right.span)), left, right, at=op)
        return left

    def not_(self) -> ast.Expr:
        # A run of NOTs is read in a loop, not by recursion, so "NOT NOT ... x" costs no stack.
        nots: list[Token] = []
        while self.tok.kind == "NOT":
            nots.append(self.advance())
            self.enter(nots[-1])
        try:
            operand = self.comparison()
        finally:
            self.depth -= len(nots)
        for tok in reversed(nots):
            operand = self.built(ast.Unary("NOT", operand, span=tok.span.merge(operand.span)), operand, at=tok)
        return operand

    def comparison(self) -> ast.Expr:
        left = self.sum_()
        if self.tok.kind in _COMPARISONS:
            op_token = self.advance()
            right = self.sum_()
            return self.built(ast.Binary(op_token.kind, left, right, span=left.span.merge(right.span)), left, right,
                              at=op_token)
        if self.tok.kind == "IS":
            is_token = self.advance()
            negated = bool(self.accept("NOT"))
            end = self.expect("NULL", "NULL after IS").span
            return self.built(ast.IsNull(left, negated, span=left.span.merge(end)), left, at=is_token)
        return left

    def sum_(self) -> ast.Expr:
        left = self.product()
        terms = 1
        while self.tok.kind in ("+", "-"):
            op = self.advance()
            terms += 1
            self.chain_term(terms, op)
            right = self.product()
            left = self.built(ast.Binary(op.kind, left, right, span=left.span.merge(right.span)), left, right, at=op)
        return left

    def product(self) -> ast.Expr:
        left = self.unary()
        terms = 1
        while self.tok.kind in ("*", "/", "%"):
            op = self.advance()
            terms += 1
            self.chain_term(terms, op)
            right = self.unary()
            left = self.built(ast.Binary(op.kind, left, right, span=left.span.merge(right.span)), left, right, at=op)
        return left

    def unary(self) -> ast.Expr:
        # Like NOT, a run of minus signs is a loop. "-" before a number folds into the literal,
        # so -9223372036854775808 (the least long) is a literal, while 9223372036854775808 is not.
        minuses: list[Token] = []
        while self.tok.kind == "-":
            minuses.append(self.advance())
            self.enter(minuses[-1])
        try:
            operand = self.primary()
        finally:
            self.depth -= len(minuses)
        for tok in reversed(minuses):
            if (isinstance(operand, ast.Literal) and operand.kind == "number"
                    and isinstance(operand.value, (int, float))):
                operand = ast.Literal(-operand.value, "number", span=tok.span.merge(operand.span))
            else:
                operand = self.built(ast.Unary("-", operand, span=tok.span.merge(operand.span)), operand, at=tok)
        if isinstance(operand, ast.Literal) and operand.kind == "number" and isinstance(operand.value, int) \
                and not -MAX_LONG - 1 <= operand.value <= MAX_LONG:
            raise QuerySyntaxError(f"integer {operand.value} is out of range (a long holds -{MAX_LONG + 1} to "
                                   f"{MAX_LONG})", self.source, operand.span)
        return operand

    def primary(self) -> ast.Expr:
        tok = self.tok
        if tok.kind == "NUMBER":
            self.advance()
            return ast.Literal(self.number(tok), "number", span=tok.span)
        if tok.kind == "STRING":
            self.advance()
            quote = tok.text[0]
            body = tok.text[1:-1].replace(quote * 2, quote)
            body = re.sub(r"\\(.)", r"\1", body)
            return ast.Literal(body, "string", span=tok.span)
        if tok.kind == "TIME":
            self.advance()
            return ast.Literal(_time_of_day(tok, self.source), "time_of_day", span=tok.span)
        if tok.kind in ("TRUE", "FALSE"):
            self.advance()
            return ast.Literal(tok.kind == "TRUE", "bool", span=tok.span)
        if tok.kind == "NULL":
            self.advance()
            return ast.Literal(None, "null", span=tok.span)
        if tok.kind == "(":
            self.advance()
            self.enter(tok)
            try:
                inner = self.expr()
            finally:
                self.depth -= 1
            close = self.expect(")", "')'")
            return _respan(inner, tok.span.merge(close.span))
        if tok.kind == "IDENT":
            return self.name_or_call()
        if tok.kind == "[":
            return self.level_literal()
        self.fail("expected an expression")
        raise AssertionError

    def number(self, tok: Token) -> int | float:
        """A numeric literal's value; one that no long or double holds is an error here, not in Spark."""
        text = tok.text
        if not any(c in text for c in ".eE"):
            digits = text.lstrip("0")
            if len(digits) > 19:  # more than any long has (and int() refuses thousands of digits)
                raise QuerySyntaxError(f"integer {text[:30]}{'...' if len(text) > 30 else ''} is out of range "
                                       f"(a long holds -{MAX_LONG + 1} to {MAX_LONG})", self.source, tok.span)
            return int(digits or "0")  # -2**63 is allowed once unary() has folded the sign in
        value = float(text)
        if math.isinf(value):
            raise QuerySyntaxError(f"number {text[:30]} is out of range (the largest double is about 1.8e308)",
                                   self.source, tok.span)
        return value

    def level_literal(self) -> ast.Literal:
        """A security level such as ``[1, ⊥]`` (checked against the lattice when bound)."""
        open_ = self.advance()
        entries = []
        while True:
            tok = self.tok
            if tok.kind not in ("IDENT", "NUMBER", "STRING", "⊥"):
                self.fail("expected a company, ⊥ or T in a level like [1, ⊥]")
            self.advance()
            entries.append(tok.text[1:-1] if tok.kind == "STRING" else tok.text)
            if not self.accept(","):
                break
        close = self.expect("]", "']' to close the level")
        return ast.Literal("[" + ", ".join(entries) + "]", "level", span=open_.span.merge(close.span))

    def name_or_call(self) -> ast.Expr:
        first = self.advance()
        if self.tok.kind == "(":
            return self.call(first)
        if first.upper == "COUNT":  # the papers write a bare COUNT for COUNT(*)
            return ast.Call("COUNT", (), False, first.text, span=first.span)
        parts = [first.text]
        span = first.span
        while self.tok.kind == ".":
            self.advance()
            part = self.ident("an attribute name after '.'", keywords=True)
            parts.append(part.text)
            span = span.merge(part.span)
        return ast.Name(tuple(parts), span=span)

    def call(self, name: Token) -> ast.Call:
        self.expect("(")
        args: list[ast.Expr] = []
        star = False
        if self.tok.kind == "*":
            self.advance()
            star = True
        elif self.tok.kind != ")":
            self.enter(name)
            try:
                args.append(self.expr())
                while self.accept(","):
                    if len(args) >= MAX_CHAIN_TERMS:
                        self.fail(f"more than {MAX_CHAIN_TERMS} arguments")
                    args.append(self.expr())
            finally:
                self.depth -= 1
        close = self.expect(")", "')' to close the call")
        span = name.span.merge(close.span)
        written = " ".join(self.source.text[span.start : span.end].split())
        return self.built(ast.Call(name.upper, tuple(args), star, written, span=span), *args, at=name)


def windows_per_tuple(size_seconds: float, slide_seconds: float | None) -> int:
    """The most windows of ``size_seconds`` sliding by ``slide_seconds`` one tuple falls in: size over
    slide rounded up, in Spark's microseconds (a tumbling window, no slide or one of at least the
    size, holds each tuple once at most).

    >>> windows_per_tuple(86400, 1), windows_per_tuple(86400, 900), windows_per_tuple(10, 3), windows_per_tuple(60, 120)
    (86400, 96, 4, 1)
    """
    if not slide_seconds:
        return 1
    size, slide = max(1, round(size_seconds * 1e6)), max(1, round(slide_seconds * 1e6))
    return max(1, -(-size // slide))


def seconds_text(seconds: float) -> str:
    """A duration in its largest whole unit, for messages.

    >>> seconds_text(864), seconds_text(36), seconds_text(7200), seconds_text(1), seconds_text(0.0125)
    ('14.4 min', '36 seconds', '2 hours', '1 second', '12.5 ms')
    """
    for one, many, size in (("day", "days", 86400.0), ("hour", "hours", 3600.0), ("min", "min", 60.0),
                            ("second", "seconds", 1.0)):
        if seconds >= size:
            amount = seconds / size
            return f"{amount:g} {one if amount == 1 else many}"
    return f"{seconds * 1000:g} ms"


def _respan(expr: ast.Expr, span: Span) -> ast.Expr:
    # Parenthesised expressions report the whole "(...)" range in errors.
    object.__setattr__(expr, "span", span)
    return expr


def _time_of_day(tok: Token, source: SourceText) -> int:
    match = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([aApP][mM])?", tok.text)
    assert match is not None
    hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
    suffix = (match[4] or "").lower()
    if suffix:
        if not 1 <= hour <= 12:
            raise QuerySyntaxError("hour must be 1-12 with am/pm", source, tok.span)
        hour = hour % 12 + (12 if suffix == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise QuerySyntaxError("invalid time of day", source, tok.span)
    return hour * 3600 + minute * 60 + second


def parse_query(text: str, name: str = "<query>") -> ast.Query:
    """Parse one CQL query. Raises :class:`QuerySyntaxError` with line and column."""
    return _Parser(SourceText(name, text)).query()


def parse_expression(source: SourceText | str) -> ast.Expr:
    """Parse a stand-alone expression (a policy's ``where``).

    >>> parse_expression("Position.Platoon = self.Platoon")
    Binary(op='=', left=Name(parts=('Position', 'Platoon')), right=Name(parts=('self', 'Platoon')))
    """
    if isinstance(source, str):
        source = SourceText("<expression>", source)
    parser = _Parser(source)
    expr = parser.expr()
    if parser.tok.kind != "EOF":
        parser.fail("expected end of expression")
    return expr


def parse_duration(text: str, name: str = "<duration>", *, zero: bool = False) -> float:
    """Parse ``"1 hour"`` into seconds (``zero``: ``"0 seconds"`` too). Raises :class:`QuerySyntaxError`.

    >>> parse_duration("90 seconds")
    90.0
    """
    parser = _Parser(SourceText(name, text))
    seconds = parser.duration(zero=zero, what="a duration")
    if parser.tok.kind != "EOF":
        parser.fail("expected end of duration")
    return seconds
