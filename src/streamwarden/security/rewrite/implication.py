"""Sound implication checks between predicates, decided by the z3 SMT solver.

``implies(p, q)`` is True only when z3 proves that every row on which Spark evaluates
``p`` to TRUE is a row on which Spark evaluates ``q`` to TRUE. The proof is made in the
semantics the engine executes (:mod:`streamwarden.engine.columns`), not in textbook
arithmetic, because a proof about another language lets a query drop exactly the rows
where a hidden attribute has a chosen value (issue 11, class 1):

* **NULLs and three-valued logic.** Every attribute and action function may be NULL
  (a JSON record can omit a field; a masked attribute is NULL; an action that has not
  started has NULL functions). A condition holds only when it is TRUE; ``NOT``, ``AND``
  and ``OR`` follow Kleene's logic, ``IS NULL`` never yields NULL.
* **Partial division.** ``x / y`` is ``try_divide``: NULL when ``y`` is 0 or either side
  is NULL. Its value is a double rounded from the quotient, so the model does not
  pretend to know it: it is a fresh double (the same one wherever the same term occurs).
* **Bounded integers.** ``+ - *`` over integers run as ``try_add``/``try_subtract``/
  ``try_multiply`` on 64-bit ``bigint``: NULL on overflow. Attributes range over their
  type (``int`` 32-bit, ``long`` 64-bit, timestamps Spark's year 1..9999).
* **Doubles.** A double may be NaN or ±infinity; Spark orders them ``-inf < finite <
  +inf < NaN`` with ``NaN = NaN``. Double literals are their exact binary value.
  Double arithmetic rounds, so its results are fresh doubles (NULL iff an operand is).
  A 64-bit integer compared with a double is rounded by Spark: not modelled, refused.

Anything the model cannot express (string ordering, security levels, a ``long``
against a double), a timeout or an unknown answer is *not* a proof: callers treat the
policy as not applying, so the rewriter fails closed.

    >>> from streamwarden.plan.expr import Arith, Column, Compare, Literal, Or, Not
    >>> pos = Column("Position", "Pos", "double")
    >>> implies(Compare(">=", pos, Literal(10, "int")), Compare(">", pos, Literal(5, "int")))
    True
    >>> implies(Compare(">", pos, Literal(5, "int")), Compare(">=", pos, Literal(10, "int")))
    False

A tautology of two-valued logic is not one of Spark's: ``x / y = 1 OR NOT x / y = 1`` is
NULL (the row is dropped) exactly when ``y`` is 0, so nothing implies it:

    >>> x, y = Column("S", "x", "int"), Column("S", "y", "int")
    >>> same = Compare("=", Arith("/", x, y), Literal(1, "int"))
    >>> implies(Compare(">", x, Literal(0, "int")), Or(same, Not(same)))
    False
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from functools import lru_cache
from typing import Any

from streamwarden.plan import expr as E

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TIMEOUT_MS = 2000

# Value ranges of what Spark can hold in each type (the model's variables range over
# exactly these, so a proof covers every value a record can carry).
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
TIMESTAMP_RANGE = (-62_135_596_800_000_000, 253_402_300_799_999_999)  # 0001-01-01 .. 9999-12-31, in µs
EXACT_IN_DOUBLE = 2**53  # integers up to this magnitude convert to double exactly

# Ranks of a double in Spark's total order: the real value only matters for FINITE.
NEG_INF, FINITE, POS_INF, NAN = -1, 0, 1, 2


class _Untranslatable(Exception):
    """The model cannot express this expression: no proof, the policy does not apply."""


@lru_cache(maxsize=65536)
def implies(antecedent: E.Expr, consequent: E.Expr) -> bool:
    """True iff every row making ``antecedent`` TRUE in Spark makes ``consequent`` TRUE."""
    if consequent == E.TRUE or antecedent == consequent:
        return True
    if consequent in E.conjuncts(antecedent):
        return True  # AND is TRUE only when each conjunct is TRUE
    parts = E.conjuncts(consequent)
    if len(parts) > 1:
        return all(implies(antecedent, part) for part in parts)
    import z3  # imported lazily: the solver loads in ~0.1 s and most checks never need it

    translator = _Translator(z3)
    try:
        holds = translator.truth(antecedent).true
        follows = translator.truth(consequent).true
    except _Untranslatable:
        return False
    solver = z3.Solver()
    solver.set("timeout", _TIMEOUT_MS)
    solver.add(*translator.domain)
    solver.add(holds, z3.Not(follows))
    return bool(solver.check() == z3.unsat)


@dataclass(frozen=True)
class _Truth:
    """A condition in three-valued logic: ``true`` and ``false`` are z3 formulas; where
    neither holds the condition is NULL (unknown)."""

    true: Any
    false: Any


@dataclass(frozen=True)
class _Value:
    """A term: its kind (``int``, ``double``, ``string``, ``bool``), its z3 value and a z3
    formula saying it is NULL. A double also has its ``rank`` (finite, ±inf, NaN)."""

    kind: str
    value: Any
    null: Any
    rank: Any = None
    wide: bool = False  # an integer that may exceed 2^53 (Spark rounds it when cast to double)


class _Translator:
    def __init__(self, z3: Any):
        self.z3 = z3
        self.terms: dict[E.Expr, _Value] = {}
        self.domain: list[Any] = []
        self.fresh = 0

    # -- conditions ---------------------------------------------------------------------
    def truth(self, expr: E.Expr) -> _Truth:
        z3 = self.z3
        if isinstance(expr, E.And):
            left, right = self.truth(expr.left), self.truth(expr.right)
            return _Truth(z3.And(left.true, right.true), z3.Or(left.false, right.false))
        if isinstance(expr, E.Or):
            left, right = self.truth(expr.left), self.truth(expr.right)
            return _Truth(z3.Or(left.true, right.true), z3.And(left.false, right.false))
        if isinstance(expr, E.Not):
            inner = self.truth(expr.operand)
            return _Truth(inner.false, inner.true)
        if isinstance(expr, E.IsNull):
            null = self.term(expr.operand).null
            return _Truth(z3.Not(null), null) if expr.negated else _Truth(null, z3.Not(null))
        if isinstance(expr, E.Compare):
            a, b = self.term(expr.left), self.term(expr.right)  # terms, where left and right above are truths
            known = z3.Not(z3.Or(a.null, b.null))
            holds = self.compare(expr.op, a, b)
            return _Truth(z3.And(known, holds), z3.And(known, z3.Not(holds)))
        if expr.dtype in ("boolean", "null"):
            value = self.term(expr)
            if value.kind not in ("bool", "null"):
                raise _Untranslatable(expr)
            known = z3.Not(value.null)
            return _Truth(z3.And(known, value.value), z3.And(known, z3.Not(value.value)))
        raise _Untranslatable(expr)

    def compare(self, op: str, left: _Value, right: _Value) -> Any:
        z3 = self.z3
        if "null" in (left.kind, right.kind):
            return z3.BoolVal(False)  # never TRUE or FALSE: the NULL side makes it unknown
        kinds = {left.kind, right.kind}
        if kinds <= {"string"} or kinds <= {"bool"}:
            if op not in ("=", "<>"):
                raise _Untranslatable(op)  # lexicographic order and boolean order: not modelled
            equal = left.value == right.value
            return equal if op == "=" else z3.Not(equal)
        if not kinds <= {"int", "double"}:
            raise _Untranslatable(op)
        if "double" in kinds:
            left, right = self.as_double(left), self.as_double(right)
            return self.double_order(op, left, right)
        return {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
                "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}[op](
            left.value, right.value)

    def double_order(self, op: str, left: _Value, right: _Value) -> Any:
        """Spark's total order on doubles: by rank, then by value among finite ones."""
        z3 = self.z3
        equal = z3.And(left.rank == right.rank, left.value == right.value)
        less = z3.Or(left.rank < right.rank, z3.And(left.rank == FINITE, right.rank == FINITE,
                                                     left.value < right.value))
        return {"=": equal, "<>": z3.Not(equal), "<": less, "<=": z3.Or(less, equal),
                ">": z3.Not(z3.Or(less, equal)), ">=": z3.Not(less)}[op]

    # -- terms --------------------------------------------------------------------------
    def term(self, expr: E.Expr) -> _Value:
        # The same term is the same value wherever it occurs (a fresh double for x / y is
        # one unknown number, not a new one at each use).
        if expr not in self.terms:
            self.terms[expr] = self.build(expr)
        return self.terms[expr]

    def build(self, expr: E.Expr) -> _Value:
        z3 = self.z3
        if isinstance(expr, (E.Column, E.ActionValue)):
            return self.variable(expr, expr.dtype)
        if isinstance(expr, E.Literal):
            return self.constant(expr)
        if isinstance(expr, E.TimeOfDay):
            operand = self.term(expr.operand)
            self.fresh += 1
            seconds = z3.Int(f"time of day {self.fresh}")
            self.domain.append(z3.And(seconds >= 0, seconds < 86400))
            return _Value("int", seconds, operand.null)
        if isinstance(expr, E.Negate):
            operand = self.term(expr.operand)
            if operand.kind == "int":
                low, high = LONG_RANGE if expr.dtype in ("long", "timestamp") else INT_RANGE
                return self.bounded(-operand.value, operand.null, low, high)
            if operand.kind == "double":
                return self.fresh_double(operand.null)
            raise _Untranslatable(expr)
        if isinstance(expr, E.Arith):
            return self.arith(expr)
        if isinstance(expr, (E.Compare, E.And, E.Or, E.Not, E.IsNull)):
            truth = self.truth(expr)
            return _Value("bool", truth.true, z3.Not(z3.Or(truth.true, truth.false)))
        raise _Untranslatable(expr)

    def arith(self, expr: E.Arith) -> _Value:
        z3 = self.z3
        left, right = self.term(expr.left), self.term(expr.right)
        null = z3.Or(left.null, right.null)
        if expr.left.dtype == "timestamp" or expr.right.dtype == "timestamp":
            return self.fresh_double(null)  # a difference in seconds, as a double
        if expr.op == "/":
            # try_divide over doubles: NULL when the divisor is zero (0, 0.0 or -0.0).
            if right.kind == "int":
                zero = right.value == 0
            elif right.kind == "double":
                zero = z3.And(right.rank == FINITE, right.value == 0)
            else:
                raise _Untranslatable(expr)
            return self.fresh_double(z3.Or(null, zero))
        if expr.op == "%":
            raise _Untranslatable(expr)
        if expr.dtype == "double" or "double" in (left.kind, right.kind):
            return self.fresh_double(null)  # IEEE rounding: the value is not modelled
        if left.kind != "int" or right.kind != "int":
            raise _Untranslatable(expr)
        exact = {"+": left.value + right.value, "-": left.value - right.value, "*": left.value * right.value}[expr.op]
        return self.bounded(exact, null, *LONG_RANGE)  # computed as bigint: NULL on overflow

    def bounded(self, exact: Any, null: Any, low: int, high: int) -> _Value:
        """An integer result that is NULL outside ``[low, high]`` (try_add and friends)."""
        z3 = self.z3
        overflow = z3.Or(exact < low, exact > high)
        return _Value("int", exact, z3.Or(null, overflow), wide=True)

    def variable(self, key: E.Expr, dtype: str) -> _Value:
        z3 = self.z3
        name = repr(key)
        null = z3.Bool(f"null {name}")
        if dtype in ("int", "long", "timestamp"):
            value = z3.Int(name)
            low, high = {"int": INT_RANGE, "long": LONG_RANGE, "timestamp": TIMESTAMP_RANGE}[dtype]
            self.domain.append(z3.And(value >= low, value <= high))
            return _Value("int", value, null, wide=dtype != "int")
        if dtype == "double":
            rank, value = z3.Int(f"rank {name}"), z3.Real(name)
            self.domain.append(z3.And(rank >= NEG_INF, rank <= NAN, z3.Implies(rank != FINITE, value == 0)))
            return _Value("double", value, null, rank)
        if dtype == "string":
            return _Value("string", z3.String(name), null)
        if dtype == "boolean":
            return _Value("bool", z3.Bool(name), null)
        raise _Untranslatable(dtype)

    def fresh_double(self, null: Any) -> _Value:
        z3 = self.z3
        self.fresh += 1
        rank, value = z3.Int(f"rank of result {self.fresh}"), z3.Real(f"result {self.fresh}")
        self.domain.append(z3.And(rank >= NEG_INF, rank <= NAN, z3.Implies(rank != FINITE, value == 0)))
        return _Value("double", value, null, rank)

    def as_double(self, value: _Value) -> _Value:
        """An integer as Spark casts it to double: exact only within 2^53, else refused."""
        if value.kind == "double":
            return value
        z3 = self.z3
        if value.kind != "int":
            raise _Untranslatable(value.kind)
        if value.wide:
            raise _Untranslatable("a 64-bit integer compared with a double is rounded by Spark")
        return _Value("double", z3.ToReal(value.value), value.null, z3.IntVal(FINITE))

    def constant(self, lit: E.Literal) -> _Value:
        z3 = self.z3
        value = lit.value
        if value is None or lit.dtype == "null":
            return _Value("null", z3.BoolVal(False), z3.BoolVal(True))
        known = z3.BoolVal(False)
        if lit.dtype == "timestamp" and isinstance(value, datetime):
            delta = value - _EPOCH
            micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
            return _Value("int", z3.IntVal(micros), known, wide=True)
        if lit.dtype in ("int", "long", "time_of_day") and isinstance(value, int) and not isinstance(value, bool):
            return _Value("int", z3.IntVal(value), known, wide=abs(value) > EXACT_IN_DOUBLE)
        if lit.dtype == "double" and isinstance(value, (int, float)):
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise _Untranslatable(lit)
            exact = Fraction(number)  # the binary value Spark holds, not the decimal text
            return _Value("double", z3.RealVal(f"{exact.numerator}/{exact.denominator}"), known, z3.IntVal(FINITE))
        if lit.dtype == "string":
            return _Value("string", z3.StringVal(str(value)), known)
        if lit.dtype == "boolean":
            return _Value("bool", z3.BoolVal(bool(value)), known)
        raise _Untranslatable(lit)

