"""Compile bound plan expressions into Spark Column expressions.

Predicates are built as Column trees (code-generated in the JVM), never as SQL text, so
no value from a catalog or a query is ever pasted into a SQL string.

**Every expression compiled here is total** (PostgreSQL would call its functions
LEAKPROOF): it never raises, whatever the row holds. Integer arithmetic is ``try_add``,
``try_subtract`` and ``try_multiply`` (NULL on overflow); ``+ - *`` of doubles are IEEE
(``±Infinity`` or NaN, never an error, even with ANSI mode on, so no ``try_`` is needed);
``/`` and ``%`` are ``try_divide`` and ``try_mod`` (NULL for a zero divisor, which is an
error for doubles too); negation is a ``try_subtract`` from zero, and comparisons keep SQL
three-valued logic. This is what lets the planner evaluate a user's predicate next to,
or even before, the security filters (a shield lifted above a selection, a predicate
Catalyst pushes below a join): a row the policies reject can make the predicate NULL,
never abort the query, so no error reveals a hidden value. The rewriter's proofs
(:mod:`streamwarden.security.rewrite.implication`) model exactly these semantics.

    >>> from streamwarden.plan.expr import Column as C, Compare, Literal
    >>> str(compile_expr(Compare(">=", C("P", "Pos", "double"), Literal(5, "int")), physical_column))  # doctest: +SKIP
    "Column<'(P__Pos >= 5)'>"
"""

from __future__ import annotations

from typing import Callable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F

from streamwarden.catalog.lattice import Level
from streamwarden.engine.levels.columns import level_literal
from streamwarden.errors import UnsupportedError
from streamwarden.plan import expr as E

Resolver = Callable[[E.Column], SparkColumn]

SPARK_TYPES = {
    "timestamp": "timestamp", "int": "int", "long": "bigint", "double": "double",
    "string": "string", "boolean": "boolean",
}


def physical_name(relation: str | None, name: str) -> str:
    """Column name of a relation's attribute inside compiled DataFrames."""
    return f"{relation}__{name}" if relation else name


def physical_column(column: E.Column) -> SparkColumn:
    return F.col(physical_name(column.relation, column.name))


def action_column(action: str, kind: str) -> str:
    return f"__action__{action}__{kind}"


#: Columns a shared template's rows carry through every operator: the member each row is for
#: and that member's constants (:mod:`streamwarden.plan.templates`).
CARRIED = "__carry_"
MEMBER = CARRIED + "member"
GRAPH_OF_MEMBER = CARRIED + "graph"  # the member's id of the graph the template stands for


def param_column(index: int) -> str:
    """The member table's column holding a template's ``index``-th constant."""
    return f"{CARRIED}p{index}"


def compile_expr(expr: E.Expr, resolve: Resolver = physical_column) -> SparkColumn:
    """A Spark Column computing ``expr``; ``resolve`` maps plan columns to DataFrame columns."""

    def c(e: E.Expr) -> SparkColumn:
        return compile_expr(e, resolve)

    if isinstance(expr, E.Column):
        return resolve(expr)
    if isinstance(expr, E.Literal):
        return literal(expr)
    if isinstance(expr, E.ActionValue):
        return F.col(action_column(expr.action, expr.kind))
    if isinstance(expr, E.Param):
        return F.col(param_column(expr.index))
    if isinstance(expr, E.TimeOfDay):
        ts = c(expr.operand)
        return F.hour(ts) * 3600 + F.minute(ts) * 60 + F.second(ts)  # at most 86,399: cannot overflow
    if isinstance(expr, E.Compare):
        left, right = c(expr.left), c(expr.right)
        return {
            "=": lambda: left == right, "<>": lambda: left != right, "<": lambda: left < right,
            "<=": lambda: left <= right, ">": lambda: left > right, ">=": lambda: left >= right,
        }[expr.op]()
    if isinstance(expr, E.Arith):
        return _arith(expr, c)
    if isinstance(expr, E.Negate):
        operand = c(expr.operand)
        zero = F.lit(0).cast(SPARK_TYPES.get(expr.dtype, "double"))
        return F.try_subtract(zero, operand)  # -(-2^31) overflows: NULL, not an error
    if isinstance(expr, E.And):
        return c(expr.left) & c(expr.right)
    if isinstance(expr, E.Or):
        return c(expr.left) | c(expr.right)
    if isinstance(expr, E.Not):
        return ~c(expr.operand)
    if isinstance(expr, E.IsNull):
        return c(expr.operand).isNotNull() if expr.negated else c(expr.operand).isNull()
    if isinstance(expr, E.ProfileRef):
        raise UnsupportedError(f"self.{expr.attr} must be replaced by a profile value before execution")
    raise UnsupportedError(f"the Spark backend cannot compile {type(expr).__name__}")


def _arith(expr: E.Arith, c: Callable[[E.Expr], SparkColumn]) -> SparkColumn:
    if expr.left.dtype == "timestamp" and expr.right.dtype == "timestamp":
        # Both within year 1..9999, so the difference in µs fits a bigint; try_ all the same.
        micros = F.try_subtract(F.unix_micros(c(expr.left)), F.unix_micros(c(expr.right)))
        return F.try_divide(micros.cast("double"), F.lit(1_000_000.0))
    left, right = c(expr.left), c(expr.right)
    if expr.op == "/":
        return F.try_divide(left.cast("double"), right.cast("double"))
    if expr.op == "%":
        return F.try_mod(left, right)
    if expr.dtype == "double":
        # Widening to double never fails, and IEEE + - * overflow to ±Infinity, not an error,
        # ANSI mode or not: the same values as try_add and friends, without a TryEval per row.
        left, right = left.cast("double"), right.cast("double")
        return {"+": left + right, "-": left - right, "*": left * right}[expr.op]
    if expr.dtype == "long":
        left, right = left.cast("bigint"), right.cast("bigint")  # widening: never fails
    return {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[expr.op](left, right)


def literal(lit: E.Literal) -> SparkColumn:
    if lit.value is None:
        return F.lit(None)
    spark_type = SPARK_TYPES.get(lit.dtype)
    if lit.dtype == "time_of_day":
        assert isinstance(lit.value, int)  # seconds since midnight
        return F.lit(lit.value)
    if lit.dtype == "level":  # compared as its bits (one bigint)
        assert isinstance(lit.value, Level)
        return level_literal(lit.value)
    return F.lit(lit.value).cast(spark_type) if spark_type else F.lit(lit.value)
