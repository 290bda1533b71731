"""Class 1 of issue 11, end to end: whenever an aggregate policy is applied on a proof,
the rows Spark delivers are the aggregate over the policy's view alone.

An aggregate policy p applies to a query with predicate Q only when the prover shows
that p's condition implies Q; the aggregate then runs over the tuples where both hold.
If the proof were wrong for some row (a NULL, a zero divisor, an overflow, a NaN), Q
would drop that row and the aggregate would reveal it. So, on tuples built from edge
values, this test checks the delivered counts against an independent evaluation with
Spark's semantics (``spark_semantics``): the count over {p ∧ Q} *and* over {p} alone.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import spark_semantics as S
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.language.binder import bind_query
from streamwarden.language.parser import parse_query
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Filter, walk

pytestmark = pytest.mark.spark

BASE = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
VALUES = {
    "a": [None, 0, 1, -1, 2, 3, 2**31 - 1, -(2**31)],
    "b": [None, 0, 1, -1, 2, 2**63 - 1, -(2**63)],
    "d": [None, 0.0, 1.5, -2.5, 3.0, float("nan"), float("inf"), float("-inf")],
}

# Conditions as CQL text over S.a (int), S.b (long), S.d (double): atoms with arithmetic.
term = st.recursive(
    st.sampled_from(["S.a", "S.b", "S.d", "0", "1", "2", "3", "2147483647", "1.5"]),
    lambda inner: st.builds(lambda a, op, b: f"({a} {op} {b})", inner, st.sampled_from("+-*/"), inner),
    max_leaves=3)
atom = st.builds(lambda a, op, b: f"{a} {op} {b}", term, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), term)
condition = st.recursive(atom, lambda inner: st.one_of(
    st.builds(lambda a, b: f"({a} AND {b})", inner, inner), st.builds(lambda a, b: f"({a} OR {b})", inner, inner),
    inner.map(lambda c: f"NOT ({c})")), max_leaves=3)


def catalog_text(where: str) -> str:
    return f"""
streams:
  S: {{schema: {{ts: timestamp, a: int, b: long, d: double}}}}
roles: {{Analyst: {{}}}}
users: {{ann: {{roles: [Analyst]}}}}
policies:
  - {{id: p, subject: Analyst, streams: [S], attributes: "*", privilege: count, where: "{where}"}}
"""


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(policy=condition, other=condition, weaken=st.booleans(),
       rows=st.lists(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in VALUES.items()}),
                     min_size=4, max_size=40))
def test_applied_aggregate_policies_count_exactly_their_view(spark, tmp_path_factory, policy: str, other: str,
                                                             weaken: bool, rows: list[dict]) -> None:
    query_where = f"({policy}) OR ({other})" if weaken else other
    catalog = load_catalog_text(catalog_text(policy))
    query = f"SELECT COUNT(*) AS n FROM S [RANGE 1 hour] WHERE {query_where}"
    rewriting = api.authorize(catalog, "ann", query)
    applied = any(d.policy_id == "p" and d.applied for d in rewriting.decisions)
    event("policy applied on a proof" if applied else "not proven")
    if not applied:
        return  # not proven: the policy does not apply (what the other tests check)
    p = catalog.policies[0].where
    assert p is not None
    plan = bind_query(parse_query(query), catalog)
    q = next(n.predicate for n in walk(plan) if isinstance(n, Filter))
    records = [{"ts": (BASE + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"), **r} for i, r in enumerate(rows)]
    path = tmp_path_factory.mktemp("proof") / "S.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))  # NaN and Infinity as Spark's reader takes them
    got = api.replay(catalog, "ann", query, {"S": path}, spark=spark)
    delivered = Counter(r["n"] for r in got if r["_policies"] == ["p"])
    env = [{f"S.{k}": v for k, v in r.items()} for r in rows]
    view = sum(1 for t in env if S.holds(p, t))
    both = sum(1 for t in env if S.holds(p, t) and S.holds(q, t))
    assert view == both, f"proof unsound: {E.render(p)} does not imply {E.render(q)} on some row"
    assert delivered == (Counter([view]) if view else Counter()), (E.render(p), E.render(q))
