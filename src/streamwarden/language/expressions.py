"""Binding AST expressions to typed plan expressions.

Shared by the query binder and the catalog loader (policy ``where`` clauses), so a
policy and a query that say the same thing produce the same plan expression.

    >>> from streamwarden.catalog.model import StreamDef
    >>> from streamwarden.language.parser import parse_expression
    >>> s = StreamDef("Position", (("ts", "timestamp"), ("Pos", "double")))
    >>> scope = Scope({"Position": s})
    >>> bound = bind_expression(parse_expression("Pos >= 10"), scope, SourceText("<e>", "Pos >= 10"))
    >>> bound  # doctest: +NORMALIZE_WHITESPACE
    Compare(op='>=', left=Column(relation='Position', name='Pos', dtype='double'), right=Literal(value=10, dtype='int'),
            dtype='boolean')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from streamwarden.catalog.model import StreamDef
from streamwarden.errors import BindError, SourceText, Span, StreamwardenError
from streamwarden.language import ast
from streamwarden.plan import expr as E

if TYPE_CHECKING:
    from streamwarden.catalog.lattice import Lattice


@dataclass
class Scope:
    """The relations an expression may name: query aliases (or stream names) -> streams."""

    relations: dict[str, StreamDef]
    allow_profile: bool = False  # self.<attr> (policies only)
    actions: frozenset[str] | None = None  # known actions; None = any name accepted
    extra_columns: dict[str, str] = field(default_factory=dict)  # e.g. output aliases
    lattice: Lattice | None = None  # level literals parse against it

    def resolve(self, name: ast.Name, source: SourceText) -> E.Expr:
        parts = name.parts
        if len(parts) == 2 and parts[0].lower() == "self":
            if not self.allow_profile:
                raise BindError("self.<attribute> may only appear in policies", source, name.span)
            return E.ProfileRef(parts[1])
        if len(parts) == 2:
            relation = self._relation(parts[0], name, source)
            dtype = self.relations[relation].type_of(parts[1])
            if dtype is None:
                raise BindError(
                    f"stream {self.relations[relation].name} has no attribute {parts[1]!r}"
                    f" (it has {', '.join(self.relations[relation].attributes)})",
                    source,
                    name.span,
                )
            return E.Column(relation, parts[1], dtype)
        if len(parts) != 1:
            raise BindError(f"cannot resolve {name}", source, name.span)
        owners = [rel for rel, stream in self.relations.items() if stream.type_of(parts[0])]
        if len(owners) == 1:
            return E.Column(owners[0], parts[0], self.relations[owners[0]].type_of(parts[0]) or "")
        if len(owners) > 1:
            raise BindError(
                f"attribute {parts[0]!r} is ambiguous: qualify it as one of "
                + ", ".join(f"{o}.{parts[0]}" for o in owners),
                source,
                name.span,
            )
        if parts[0] in self.extra_columns:
            return E.Column("", parts[0], self.extra_columns[parts[0]])
        streams = ", ".join(sorted({s.name for s in self.relations.values()}))
        raise BindError(f"unknown attribute {parts[0]!r} (streams in scope: {streams})", source, name.span)

    def _relation(self, qualifier: str, name: ast.Name, source: SourceText) -> str:
        if qualifier in self.relations:
            return qualifier
        matches = [rel for rel in self.relations if rel.lower() == qualifier.lower()]
        if len(matches) == 1:
            return matches[0]
        raise BindError(
            f"unknown stream or alias {qualifier!r} (in scope: {', '.join(self.relations)})", source, name.span
        )


def bind_expression(node: ast.Expr, scope: Scope, source: SourceText) -> E.Expr:
    """Resolve names and check types of a (non-aggregate) expression."""
    return _Binder(scope, source).bind(node)


class _Binder:
    def __init__(self, scope: Scope, source: SourceText):
        self.scope = scope
        self.source = source

    def error(self, message: str, span: Span) -> BindError:
        return BindError(message, self.source, span)

    def bind(self, node: ast.Expr) -> E.Expr:
        if isinstance(node, ast.Name):
            return self.scope.resolve(node, self.source)
        if isinstance(node, ast.Literal) and node.kind == "level":
            return self.level(node)
        if isinstance(node, ast.Literal):
            return _literal(node)
        if isinstance(node, ast.Unary):
            operand = self.bind(node.operand)
            if node.op == "NOT":
                self.expect_boolean(operand, node.operand)
                return E.Not(operand)
            if operand.dtype not in E.NUMERIC and operand.dtype not in ("unknown", "null"):
                raise self.error(f"cannot negate a {operand.dtype}", node.span)
            return E.Negate(operand)
        if isinstance(node, ast.IsNull):
            return E.IsNull(self.bind(node.operand), node.negated)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Binary):
            return self.binary(node)
        raise self.error(f"unsupported expression {type(node).__name__}", node.span)

    def call(self, node: ast.Call) -> E.Expr:
        if node.name in ast.ACTION_FUNCTIONS:
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Name) or len(node.args[0].parts) != 1:
                raise self.error(f"{node.name.lower()}() takes one action name", node.span)
            action = node.args[0].parts[0]
            if self.scope.actions is not None and action not in self.scope.actions:
                known = ", ".join(sorted(self.scope.actions)) or "none are declared"
                raise self.error(f"unknown action {action!r} ({known})", node.args[0].span)
            return E.ActionValue(node.name.lower(), action)
        if node.name in ast.AGGREGATES:
            raise self.error(f"aggregate {node.text} is not allowed here", node.span)
        raise self.error(f"unknown function {node.name.lower()}()", node.span)

    def level(self, node: ast.Literal) -> E.Literal:
        lattice = self.scope.lattice
        if lattice is None:
            raise self.error("a security level needs a lattice in the catalog", node.span)
        try:
            return E.Literal(lattice.parse(str(node.value)), "level")
        except StreamwardenError as exc:
            raise self.error(str(exc), node.span) from None

    def binary(self, node: ast.Binary) -> E.Expr:
        left, right = self.bind(node.left), self.bind(node.right)
        if node.op in ("AND", "OR"):
            self.expect_boolean(left, node.left)
            self.expect_boolean(right, node.right)
            return E.And(left, right) if node.op == "AND" else E.Or(left, right)
        if node.op in E.COMPARISON_OPS:
            left, right = self.unify(left, right, node)
            if "level" in (left.dtype, right.dtype) and node.op not in ("=", "<>"):
                raise self.error("security levels compare with = or <> only (dominance is what the query's "
                                 "level decides)", node.span)
            return E.Compare(node.op, left, right)
        return self.arithmetic(node, left, right)

    def arithmetic(self, node: ast.Binary, left: E.Expr, right: E.Expr) -> E.Expr:
        types = {left.dtype, right.dtype} - {"unknown", "null"}
        if types == {"timestamp"} and node.op == "-":
            return E.Arith("-", left, right, "double")  # difference in seconds
        if not types <= E.NUMERIC:
            raise self.error(
                f"arithmetic '{node.op}' needs numbers, not {left.dtype} and {right.dtype}", node.span
            )
        if node.op == "/" or "double" in types:
            dtype = "double"
        else:
            dtype = "long"
        return E.Arith(node.op, left, right, dtype)

    def expect_boolean(self, expr: E.Expr, node: ast.Expr) -> None:
        if expr.dtype not in ("boolean", "unknown", "null"):
            raise self.error(f"expected a condition, found a {expr.dtype} value", node.span)

    def unify(self, left: E.Expr, right: E.Expr, node: ast.Binary) -> tuple[E.Expr, E.Expr]:
        """Make both sides of a comparison the same type, or explain why they cannot be."""
        lt, rt = left.dtype, right.dtype
        if "unknown" in (lt, rt) or "null" in (lt, rt) or lt == rt:
            return left, right
        if lt in E.NUMERIC and rt in E.NUMERIC:
            return left, right
        if lt == "timestamp" and rt == "time_of_day" and isinstance(right, E.Literal):  # only literals are times of day
            return E.TimeOfDay(left), E.Literal(right.value, "int")
        if rt == "timestamp" and lt == "time_of_day" and isinstance(left, E.Literal):
            return E.Literal(left.value, "int"), E.TimeOfDay(right)
        if lt == "timestamp" and isinstance(right, E.Literal) and rt == "string":
            return left, self.timestamp_literal(right, node.right)
        if rt == "timestamp" and isinstance(left, E.Literal) and lt == "string":
            return self.timestamp_literal(left, node.left), right
        raise self.error(f"cannot compare {lt} with {rt}", node.span)

    def timestamp_literal(self, lit: E.Literal, node: ast.Expr) -> E.Literal:
        try:
            return E.Literal(parse_timestamp(str(lit.value)), "timestamp")
        except ValueError as exc:
            why = f" ({exc})" if "outside years" in str(exc) else ""
            raise self.error(f"{str(lit.value)[:70]!r} is not an ISO-8601 timestamp{why}", node.span) from None


def _literal(node: ast.Literal) -> E.Literal:
    if node.kind == "number":
        if not isinstance(node.value, int):  # the parser reads a number as an int or a float
            return E.Literal(node.value, "double")
        # Spark reads a Python int literal as an int when it fits 32 bits, else as a bigint: the
        # plan says the same, so arithmetic and proofs see the width Spark computes with.
        # (The parser has already refused integers beyond a long.)
        return E.Literal(node.value, "int" if -2**31 <= node.value < 2**31 else "long")
    if node.kind == "string":
        return E.Literal(node.value, "string")
    if node.kind == "bool":
        return E.Literal(node.value, "boolean")
    if node.kind == "time_of_day":
        return E.Literal(node.value, "time_of_day")
    return E.Literal(None, "null")


def parse_timestamp(text: str) -> datetime:
    """Parse ISO-8601 (``2026-03-01T10:00:00Z``); a naive time is taken as UTC.

    Raises ValueError for anything else, including a time whose UTC value falls outside
    years 1..9999 (``0001-01-01T00:00:00+01:00``), which Python's datetime and Spark's
    timestamps cannot hold:

    >>> parse_timestamp("0001-01-01T00:30:00+01:00")
    Traceback (most recent call last):
    ValueError: 0001-01-01T00:30:00+01:00 is outside years 1..9999 in UTC
    """
    value = _as_written(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(f"{text.strip()} is outside years 1..9999 in UTC") from None


def names_no_zone(text: str) -> bool:
    """Is ``text`` a timestamp :func:`parse_timestamp` reads without a zone (and so as UTC)?
    False for one with a zone and for anything it refuses: what ``grant --ts`` says a note about.

    >>> names_no_zone("2026-03-01 10:00"), names_no_zone("2026-03-01T10:00Z"), names_no_zone("10 o'clock")
    (True, False, False)
    """
    try:
        return _as_written(text).tzinfo is None
    except ValueError:
        return False


def _as_written(text: str) -> datetime:
    """``text`` as ISO-8601, its zone as written (none: naive)."""
    if len(text) > 64:  # no ISO-8601 timestamp is longer; keeps error messages short
        raise ValueError("too long for an ISO-8601 timestamp")
    return datetime.fromisoformat(text.strip().replace("z", "Z"))
