"""Errors that streamwarden reports to its users.

Every error a user can cause (a bad catalog, a CQL syntax error, an unknown stream, a
broken input record) is a :class:`StreamwardenError` whose message names *where* the
problem is. Errors tied to a piece of source text carry a :class:`Span` and render the
offending line with a caret, in the style of sqlglot and rustc::

    >>> err = QuerySyntaxError("expected FROM", SourceText("<query>", "SELECT a b"), Span(9, 10))
    >>> print(err)
    <query>:1:10: expected FROM
      SELECT a b
               ^
"""

from __future__ import annotations

from dataclasses import dataclass


class StreamwardenError(Exception):
    """Base class of every error streamwarden raises on purpose."""


@dataclass(frozen=True)
class SourceText:
    """A named piece of text (a query, a catalog file, a policy expression)."""

    name: str
    text: str
    # Where this text starts inside a larger file (1-based), so an expression embedded
    # in a YAML catalog reports the catalog's own line and column.
    line_offset: int = 0
    column_offset: int = 0

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset, in the enclosing file."""
        offset = max(0, min(offset, len(self.text)))
        line = self.text.count("\n", 0, offset)
        last_newline = self.text.rfind("\n", 0, offset)
        column = offset - last_newline  # 1-based because rfind returns -1 on line one
        if line == 0:
            column += self.column_offset
        return line + 1 + self.line_offset, column

    def line_text(self, offset: int) -> str:
        start = self.text.rfind("\n", 0, offset) + 1
        end = self.text.find("\n", offset)
        return self.text[start : end if end >= 0 else len(self.text)]


@dataclass(frozen=True)
class Span:
    """Half-open character range ``[start, end)`` inside a :class:`SourceText`."""

    start: int
    end: int

    def merge(self, other: "Span") -> "Span":
        return Span(min(self.start, other.start), max(self.end, other.end))


class SourceError(StreamwardenError):
    """An error located in source text; renders ``name:line:col: message`` plus context."""

    def __init__(self, message: str, source: SourceText | None = None, span: Span | None = None):
        self.message = message
        self.source = source
        self.span = span
        super().__init__(self._render())

    @property
    def line(self) -> int | None:
        return self.source.line_col(self.span.start)[0] if self.source and self.span else None

    @property
    def column(self) -> int | None:
        return self.source.line_col(self.span.start)[1] if self.source and self.span else None

    def _render(self) -> str:
        if self.source is None:
            return self.message
        if self.span is None:
            return f"{self.source.name}: {self.message}"
        line, column = self.source.line_col(self.span.start)
        text = self.source.line_text(self.span.start)
        line_start = self.source.text.rfind("\n", 0, self.span.start) + 1
        caret_at = self.span.start - line_start
        width = max(1, min(self.span.end, line_start + len(text)) - self.span.start)
        return (
            f"{self.source.name}:{line}:{column}: {self.message}\n"
            f"  {text}\n"
            f"  {' ' * caret_at}{'^' * width}"
        )

    def one_line(self) -> str:
        """The first line of the message, for a CLI's single-line stderr report."""
        return str(self).splitlines()[0]


class QuerySyntaxError(SourceError):
    """The CQL text (or a policy expression) does not parse."""


class BindError(SourceError):
    """The query parses but names an unknown stream or attribute, or mixes types."""


class CatalogError(SourceError):
    """The catalog file is malformed; the policy it concerns gives no access."""


class InputError(StreamwardenError):
    """A recorded or streamed input record is broken; names the file and the record."""


class UsageError(StreamwardenError):
    """A command-line argument or setting is malformed or refused (``--conf``, ``--master``,
    their environment variables); says which and what form it takes."""


class UnsupportedError(StreamwardenError):
    """The query is valid but this backend cannot run it (yet); says what and why."""


class AuthorizationError(StreamwardenError):
    """The user may not run what they asked for (unknown user, level too high, ...)."""
