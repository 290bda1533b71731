"""Class 1 and 2 of issue 11: proofs made in the semantics Spark executes, and user
expressions that cannot fail.

The attack: a user holding an aggregate privilege writes a WHERE that the prover calls
implied by the policy but that Spark evaluates differently on some rows (a division by
a hidden attribute that is 0, an overflow, a NULL, a NaN). The policy then applies, the
WHERE silently drops exactly those rows, and the aggregate reveals that the hidden
attribute had that value. A second attack makes the same expression *fail* on a row the
policy rejects, so the query's abort reveals the row (an error oracle).

Three layers are tested against ``spark_semantics``, an independent evaluator:
1. Spark computes what the evaluator says, for random expressions over values at the
   edges (so the evaluator is a faithful oracle), and never raises (leakproof).
2. Whenever the prover says P implies Q, no row makes P TRUE and Q not TRUE.
3. End to end: the attacks above get no aggregate graph, and a replay's rows are the
   oracle's.
"""

from __future__ import annotations

import itertools
import math
from typing import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spark_semantics as S
from streamwarden.plan import expr as E
from streamwarden.security.rewrite.implication import implies

I, L, D, T = (E.Column("S", "i", "int"), E.Column("S", "l", "long"),  # noqa: E741  # I: the int column, as L, D, T
              E.Column("S", "d", "double"), E.Column("S", "s", "string"))
COLUMNS = (I, L, D, T)
EDGE = {
    "int": [None, 0, 1, -1, 2, 7, -(2**31), 2**31 - 1],
    "long": [None, 0, 1, -1, 3, 2**53 + 1, -(2**63), 2**63 - 1],
    "double": [None, 0.0, -0.0, 1.5, -2.5, 7.0, float("nan"), float("inf"), float("-inf"), 1e308, 2.0**53],
    "string": [None, "", "a", "b"],
}


def lit(value: object) -> E.Literal:
    if isinstance(value, bool):
        return E.Literal(value, "boolean")
    if isinstance(value, int):
        return E.Literal(value, "int" if S.INT[0] <= value <= S.INT[1] else "long")
    if isinstance(value, float):
        return E.Literal(value, "double")
    if value is None:
        return E.Literal(None, "null")
    return E.Literal(value, "string")


def arith(op: str, left: E.Expr, right: E.Expr) -> E.Arith:
    """Typed as the binder types it (language.expressions.arithmetic)."""
    double = op == "/" or "double" in (left.dtype, right.dtype)
    return E.Arith(op, left, right, "double" if double else "long")


# -- expression strategies --------------------------------------------------------------------
small_ints = st.sampled_from([0, 1, -1, 2, 3, 7, 2**31 - 1, -(2**31), 2**40, 2**63 - 1])
numbers = st.one_of(small_ints.map(lit), st.sampled_from([0.0, 1.5, -2.5, 1e308]).map(lit), st.just(lit(None)))


def numeric_terms() -> st.SearchStrategy[E.Expr]:
    leaves = st.one_of(st.sampled_from([I, L, D]), numbers)
    return st.recursive(leaves, lambda inner: st.one_of(
        st.builds(arith, st.sampled_from("+-*/%"), inner, inner),
        inner.map(E.Negate),
    ), max_leaves=5)


def conditions() -> st.SearchStrategy[E.Expr]:
    compare = st.builds(E.Compare, st.sampled_from(sorted(E.COMPARISON_OPS)), numeric_terms(), numeric_terms())
    strings = st.builds(E.Compare, st.sampled_from(["=", "<>"]), st.just(T),
                        st.sampled_from(["", "a", "b"]).map(lit))
    nulls = st.builds(E.IsNull, st.one_of(st.sampled_from(COLUMNS), numeric_terms()), st.booleans())
    atoms = st.one_of(compare, compare, strings, nulls)
    return st.recursive(atoms, lambda inner: st.one_of(
        st.builds(E.And, inner, inner), st.builds(E.Or, inner, inner), inner.map(E.Not)), max_leaves=4)


def rows_for(exprs: Iterable[E.Expr]) -> list[dict[str, object]]:
    """Every combination of edge values (and of each literal's neighbours) of the columns used."""
    used = sorted({c for e in exprs for c in E.columns(e)}, key=lambda c: c.name)
    numeric = [n.value for e in exprs for n in E.walk(e) if isinstance(n, E.Literal)
               and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)]
    literals = [v for v in numeric if isinstance(v, int)]
    choices = []
    for column in used:
        values = list(EDGE[column.dtype])
        if column.dtype in ("int", "long"):
            bounds = S.INT if column.dtype == "int" else S.LONG
            values += [v + d for v in literals for d in (-1, 0, 1) if bounds[0] <= v + d <= bounds[1]]
        elif column.dtype == "double":
            values += [float(v) + d for v in numeric for d in (-0.5, 0.0, 0.5)]
        choices.append(list(dict.fromkeys(values, None)) if column.dtype != "double" else values)
    return [{f"S.{c.name}": v for c, v in zip(used, combo)} for combo in itertools.product(*choices)]


SOUNDNESS = settings(max_examples=300, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# -- 2. the prover is sound for Spark's semantics ----------------------------------------------
@SOUNDNESS
@given(conditions(), conditions(), st.booleans())
def test_every_proven_implication_holds_on_every_row(p: E.Expr, q: E.Expr, weaken: bool) -> None:
    """No row makes P TRUE and Q not TRUE whenever the prover says P implies Q. Half the
    cases weaken P into Q (Q = P OR R), the shape most likely to be proven."""
    if weaken:
        q = E.Or(p, q)
    if not implies(p, q):
        return
    rows = rows_for([p, q])
    assert len(rows) < 200_000
    for row in rows:
        assert not (S.holds(p, row) and not S.holds(q, row)), (E.render(p), E.render(q), row)


@pytest.mark.parametrize("policy, query, why", [
    (E.Compare(">", I, lit(0)), E.Or(E.Compare("=", arith("/", I, L), lit(1)),
                                     E.Not(E.Compare("=", arith("/", I, L), lit(1)))),
     "x / y = 1 OR NOT x / y = 1 is NULL where y = 0 (try_divide)"),
    (E.Compare(">", L, lit(0)), E.Compare(">", arith("+", L, lit(1)), L),
     "l + 1 > l is NULL at l = 2^63 - 1 (try_add overflows)"),
    (E.Compare(">", D, lit(0)), E.Compare(">", arith("+", D, lit(1)), D),
     "d + 1 > d is FALSE at d = 1e308 and at +inf (IEEE rounding)"),
    (E.TRUE, E.Or(E.Compare(">", I, lit(3)), E.Compare("<=", I, lit(3))),
     "i > 3 OR i <= 3 is NULL where i is NULL"),
    (E.Compare(">", D, lit(5)), E.Compare("<", D, lit(float("1e300"))),
     "NaN and +inf are greater than 5, not less than 1e300"),
    (E.Compare(">=", D, lit(0.1000000000000000055511151231257827)), E.Compare(">", D, lit(0.1)),
     "both literals are the same double: d = 0.1 makes the first TRUE, the second FALSE"),
    (E.Compare("<", L, lit(2**53 + 1)), E.Compare("<", L, lit(float(2**53 + 1))),
     "a long beside a double is rounded by Spark: not modelled, so not proven"),
])
def test_textbook_tautologies_are_not_spark_tautologies(policy: E.Expr, query: E.Expr, why: str) -> None:
    """Each query predicate was 'implied' under the old model (total division, unbounded
    integers, real numbers, no NULLs); each has a row where Spark does not keep it."""
    assert not implies(policy, query), why
    assert any(S.holds(policy, row) and not S.holds(query, row) for row in rows_for([policy, query])) or \
        "not modelled" in why, why


@pytest.mark.parametrize("policy, query", [
    (E.Compare(">=", D, lit(10)), E.Compare(">", D, lit(5))),
    (E.Compare(">", I, lit(5)), E.Compare(">", arith("+", I, lit(1)), lit(6))),  # int + 1 is computed in bigint
    (E.Compare("=", T, lit("a")), E.Compare("<>", T, lit("b"))),
    (E.And(E.Compare(">", I, lit(0)), E.Compare("<", I, lit(10))), E.IsNull(I, negated=True)),
    (E.Compare(">", arith("/", D, I), lit(2)), E.Compare(">", arith("/", D, I), lit(1))),  # the same quotient
])
def test_what_spark_guarantees_is_still_proven(policy: E.Expr, query: E.Expr) -> None:
    """The model is not vacuous: implications that hold on every Spark row are proven."""
    assert implies(policy, query)


# -- 1. the oracle is Spark, and compiled expressions never raise --------------------------------
def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b) and (isinstance(a, float) or int(a) == int(b))
    return a == b


@pytest.mark.spark
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(conditions(), numeric_terms()), min_size=20, max_size=20))
def test_spark_evaluates_as_the_oracle_and_never_raises(spark, exprs: list[E.Expr]) -> None:
    """Twenty random expressions over rows at the edges of every type, with ANSI mode on:
    one Spark job, no exception (every compiled function is total), and each value is
    the independent evaluator's."""
    from streamwarden.engine.columns import compile_expr

    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    rows = rows_for(exprs)[:400] or [{}]
    names = ["i", "l", "d", "s"]
    data = [tuple(row.get(f"S.{n}") for n in names) for row in rows]
    frame = spark.createDataFrame(data, "S__i int, S__l bigint, S__d double, S__s string")
    got = frame.select(*[compile_expr(e).alias(f"e{k}") for k, e in enumerate(exprs)]).collect()
    for row, values in zip(rows, got):
        full = {f"S.{n}": row.get(f"S.{n}") for n in names}
        for k, e in enumerate(exprs):
            expected = S.evaluate(e, full)
            assert _same(values[k], expected), (E.render(e), full, values[k], expected)
