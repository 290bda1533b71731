"""An independent evaluator of bound expressions with the semantics Spark executes.

It is the oracle the proofs are checked against (issue 11, class 1): plain Python, no
Spark and nothing from streamwarden's compiler or prover; it reads only the expression
node classes. What it encodes, from Spark 4 with ANSI mode on and streamwarden's choice
of total functions (``try_add``, ``try_subtract``, ``try_multiply``, ``try_divide``,
``try_mod``):

* ``None`` is NULL; ``AND``/``OR``/``NOT`` are Kleene's; a comparison with NULL is NULL;
  ``IS [NOT] NULL`` is never NULL.
* Integer ``+ - *`` are computed in 64 bits (the binder types them ``long``) and are NULL
  outside ``[-2^63, 2^63)``; negating an ``int`` is NULL outside 32 bits.
* ``/`` casts both sides to double and is NULL when the divisor is zero; ``%`` follows
  Java (the sign of the dividend) and is NULL for a zero divisor.
* Doubles are IEEE (Python floats are the same doubles); comparisons order them
  ``-inf < finite < +inf < NaN`` and ``NaN = NaN``; an integer meets a double as the
  nearest double (Java's and Python's long-to-double conversions agree).
* Strings compare by code point (UTF-8 byte order is the same order).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Callable, Mapping

from streamwarden.plan import expr as E

LONG = (-(2**63), 2**63 - 1)
INT = (-(2**31), 2**31 - 1)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

Row = Mapping[str, object]  # "relation.name" -> value


def evaluate(expr: E.Expr, row: Row) -> object:
    """The value Spark computes for ``expr`` on ``row`` (None = NULL)."""
    return _EVAL[type(expr)](expr, row)


def holds(expr: E.Expr, row: Row) -> bool:
    """Whether a condition is TRUE (a filter keeps the row)."""
    return evaluate(expr, row) is True


def _column(expr: E.Column, row: Row) -> object:
    return row.get(f"{expr.relation}.{expr.name}")


def _literal(expr: E.Literal, row: Row) -> object:
    return expr.value


def _in_range(value: int, bounds: tuple[int, int]) -> int | None:
    return value if bounds[0] <= value <= bounds[1] else None


def _arith(expr: E.Arith, row: Row) -> object:
    left, right = evaluate(expr.left, row), evaluate(expr.right, row)
    if left is None or right is None:
        return None
    if isinstance(left, datetime) and isinstance(right, datetime):
        micros = (left - right) // _MICRO
        return micros / 1_000_000.0
    if expr.op == "/":
        divisor = float(right)  # type: ignore[arg-type]
        return None if divisor == 0.0 else float(left) / divisor  # type: ignore[arg-type]
    if expr.op == "%":
        return _java_mod(left, right)  # type: ignore[arg-type]
    if expr.dtype == "double":
        a, b = float(left), float(right)  # type: ignore[arg-type]
        return {"+": a + b, "-": a - b, "*": a * b}[expr.op]
    a, b = int(left), int(right)  # type: ignore[call-overload]
    return _in_range({"+": a + b, "-": a - b, "*": a * b}[expr.op], LONG)


_MICRO = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - EPOCH


def _java_mod(left: float | int, right: float | int) -> float | int | None:
    if isinstance(left, float) or isinstance(right, float):
        divisor = float(right)
        return None if divisor == 0.0 else math.fmod(float(left), divisor)
    if right == 0:
        return None
    remainder = abs(left) % abs(right)
    return -remainder if left < 0 else remainder


def _negate(expr: E.Negate, row: Row) -> object:
    value = evaluate(expr.operand, row)
    if value is None:
        return None
    if isinstance(value, float):
        return 0.0 - value
    return _in_range(-int(value), INT if expr.dtype == "int" else LONG)  # type: ignore[call-overload]


def _time_of_day(expr: E.TimeOfDay, row: Row) -> object:
    value = evaluate(expr.operand, row)
    if not isinstance(value, datetime):
        return None
    return value.hour * 3600 + value.minute * 60 + value.second


def _rank(value: float) -> tuple[int, float]:
    """Spark's total order of doubles: -inf < finite < +inf < NaN, NaN = NaN."""
    if math.isnan(value):
        return (2, 0.0)
    if math.isinf(value):
        return (1 if value > 0 else -1, 0.0)
    return (0, value + 0.0)  # -0.0 == 0.0


def _compare(expr: E.Compare, row: Row) -> bool | None:
    left, right = evaluate(expr.left, row), evaluate(expr.right, row)
    if left is None or right is None:
        return None
    if isinstance(left, float) or isinstance(right, float):
        a: object = _rank(float(left))  # type: ignore[arg-type]
        b: object = _rank(float(right))  # type: ignore[arg-type]
    else:
        a, b = left, right
    ops: dict[str, Callable[[object, object], bool]] = {
        "=": lambda x, y: x == y, "<>": lambda x, y: x != y, "<": lambda x, y: x < y,  # type: ignore[operator]
        "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,  # type: ignore[operator]
    }
    return ops[expr.op](a, b)


def _and(expr: E.And, row: Row) -> bool | None:
    left, right = evaluate(expr.left, row), evaluate(expr.right, row)
    if left is False or right is False:
        return False
    return None if left is None or right is None else True


def _or(expr: E.Or, row: Row) -> bool | None:
    left, right = evaluate(expr.left, row), evaluate(expr.right, row)
    if left is True or right is True:
        return True
    return None if left is None or right is None else False


def _not(expr: E.Not, row: Row) -> bool | None:
    value = evaluate(expr.operand, row)
    return None if value is None else not value


def _is_null(expr: E.IsNull, row: Row) -> bool:
    null = evaluate(expr.operand, row) is None
    return not null if expr.negated else null


_EVAL: dict[type, Callable[..., object]] = {
    E.Column: _column, E.Literal: _literal, E.Arith: _arith, E.Negate: _negate, E.TimeOfDay: _time_of_day,
    E.Compare: _compare, E.And: _and, E.Or: _or, E.Not: _not, E.IsNull: _is_null,
}
