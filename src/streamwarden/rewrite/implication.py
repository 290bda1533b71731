"""Sound implication checks between predicates, decided by the z3 SMT solver.

``implies(p, q)`` is True only when z3 proves that every assignment making ``p`` true
makes ``q`` true. Anything z3 cannot express (string ordering, ``%``), a timeout or an
unknown answer is *not* a proof, so callers treat the policy as not applying: the
rewriter fails closed.

Action functions (``start(a)``, ``target(a)``) are free variables: an implication proven
for every value of them stays true whatever the store says at run time. Attributes are
treated as non-NULL (SQL NULLs make a condition not TRUE, which only removes tuples).

    >>> from streamwarden.plan.expr import Column, Compare, Literal
    >>> pos = Column("Position", "Pos", "double")
    >>> implies(Compare(">=", pos, Literal(10, "int")), Compare(">", pos, Literal(5, "int")))
    True
    >>> implies(Compare(">", pos, Literal(5, "int")), Compare(">=", pos, Literal(10, "int")))
    False
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

from streamwarden.plan import expr as E

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TIMEOUT_MS = 2000


class _Untranslatable(Exception):
    pass


@lru_cache(maxsize=65536)
def implies(antecedent: E.Expr, consequent: E.Expr) -> bool:
    """True iff ``antecedent`` ⇒ ``consequent`` is proven valid."""
    if consequent == E.TRUE or antecedent == consequent:
        return True
    if consequent in E.conjuncts(antecedent):
        return True
    parts = E.conjuncts(consequent)
    if len(parts) > 1:
        return all(implies(antecedent, part) for part in parts)
    import z3  # imported lazily: the solver loads in ~0.1 s and most checks never need it

    translator = _Translator(z3)
    try:
        a = translator.formula(antecedent)
        c = translator.formula(consequent)
    except _Untranslatable:
        return False
    solver = z3.Solver()
    solver.set("timeout", _TIMEOUT_MS)
    for constraint in translator.domain:
        solver.add(constraint)
    solver.add(a, z3.Not(c))
    return solver.check() == z3.unsat


class _Translator:
    def __init__(self, z3):  # type: ignore[no-untyped-def]
        self.z3 = z3
        self.vars: dict[object, object] = {}
        self.domain: list[object] = []

    def var(self, key: object, dtype: str):  # type: ignore[no-untyped-def]
        if key not in self.vars:
            name = repr(key)
            z3 = self.z3
            if dtype in ("int", "long", "timestamp"):
                self.vars[key] = z3.Int(name)
            elif dtype == "double":
                self.vars[key] = z3.Real(name)
            elif dtype == "string":
                self.vars[key] = z3.String(name)
            elif dtype == "boolean":
                self.vars[key] = z3.Bool(name)
            else:
                raise _Untranslatable(dtype)
        return self.vars[key]

    def formula(self, expr: E.Expr):  # type: ignore[no-untyped-def]
        z3 = self.z3
        if isinstance(expr, E.And):
            return z3.And(self.formula(expr.left), self.formula(expr.right))
        if isinstance(expr, E.Or):
            return z3.Or(self.formula(expr.left), self.formula(expr.right))
        if isinstance(expr, E.Not):
            return z3.Not(self.formula(expr.operand))
        if isinstance(expr, E.Literal) and expr.dtype == "boolean":
            return z3.BoolVal(bool(expr.value))
        if isinstance(expr, E.Column) and expr.dtype == "boolean":
            return self.var(expr, "boolean")
        if isinstance(expr, E.Compare):
            return self.compare(expr)
        raise _Untranslatable(expr)

    def compare(self, expr: E.Compare):  # type: ignore[no-untyped-def]
        left, right = self.term(expr.left), self.term(expr.right)
        z3 = self.z3
        if z3.is_string(left) or z3.is_string(right):
            if expr.op == "=":
                return left == right
            if expr.op == "<>":
                return left != right
            raise _Untranslatable(expr)  # lexicographic order: not worth the risk
        left, right = self.numeric_pair(left, right)
        return {
            "=": lambda: left == right, "<>": lambda: left != right, "<": lambda: left < right,
            "<=": lambda: left <= right, ">": lambda: left > right, ">=": lambda: left >= right,
        }[expr.op]()

    def numeric_pair(self, left, right):  # type: ignore[no-untyped-def]
        z3 = self.z3
        if z3.is_int(left) and z3.is_real(right):
            left = z3.ToReal(left)
        elif z3.is_real(left) and z3.is_int(right):
            right = z3.ToReal(right)
        return left, right

    def term(self, expr: E.Expr):  # type: ignore[no-untyped-def]
        z3 = self.z3
        if isinstance(expr, E.Column):
            return self.var(expr, expr.dtype)
        if isinstance(expr, E.ActionValue):
            return self.var(expr, expr.dtype)
        if isinstance(expr, E.TimeOfDay):
            v = self.var(("time_of_day", expr.operand), "int")
            self.domain.append(z3.And(v >= 0, v < 86400))
            return v
        if isinstance(expr, E.Literal):
            return self.constant(expr)
        if isinstance(expr, E.Negate):
            return -self.term(expr.operand)
        if isinstance(expr, E.Arith) and expr.op in "+-*/":
            left, right = self.numeric_pair(self.term(expr.left), self.term(expr.right))
            if expr.op == "/":
                left, right = (z3.ToReal(x) if z3.is_int(x) else x for x in (left, right))
                return left / right
            return {"+": left + right, "-": left - right, "*": left * right}[expr.op]
        raise _Untranslatable(expr)

    def constant(self, lit: E.Literal):  # type: ignore[no-untyped-def]
        z3 = self.z3
        value = lit.value
        if value is None:
            raise _Untranslatable(lit)  # comparisons with NULL are never TRUE; keep it simple
        if lit.dtype == "timestamp" and isinstance(value, datetime):
            delta = value - _EPOCH
            return z3.IntVal((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)
        if lit.dtype in ("int", "long", "time_of_day"):
            return z3.IntVal(int(value))  # type: ignore[call-overload]
        if lit.dtype == "double":
            return z3.RealVal(str(value))
        if lit.dtype == "string":
            return z3.StringVal(str(value))
        raise _Untranslatable(lit)
