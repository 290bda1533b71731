"""The pipelines compared at run time, built from one rewriting on one Spark session.

* unsecured — the user's query as written: ``rewriting.plan`` compiled directly;
* rewritten — streamwarden: every deployed authorized graph (``build_job``), unioned;
* post-filtering — Lindner & Meier's SecFilter, the paper's baseline: the unsecured
  join, then a filter on the joined rows that keeps a row when, for every input, one of
  the user's read policies on that input holds (``Filter(Join(raw inputs), ∧ ∨ p)``);
* rewritten, no ``_policies`` — a diagnostic: the same authorized graphs with the
  ``_policies`` column dropped, so Catalyst prunes its computation. The difference to
  "rewritten" is what the provenance column costs.

All three produce the rows a user would receive (``output_frame``: the query's columns,
``_policies``, ``_graph``), and run as batch replays written to Spark's ``noop`` sink,
which evaluates every column of every row and keeps nothing.

Catalyst would push the SecFilter's single-input conditions below the join (and infer
more from the equi-join), silently turning post-filtering into the rewritten plan. A
SecFilter sits after the query graph by design, so the post-filtering pipeline runs with
those optimizer rules excluded (:data:`NO_PUSHDOWN`); the "pushed-down" variant shows
what Spark's optimizer alone would achieve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession

from streamwarden.catalog.model import Catalog
from streamwarden.engine.compiler import POLICIES, Inputs, compile_graph
from streamwarden.engine.execute import build_job, output_frame, read_relations
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Filter, Join, Node, sources, transform
from streamwarden.security.rewrite.algorithm import AuthorizedGraph, Rewriting
from streamwarden.security.rewrite.instantiate import NotApplicable, instantiate

_RULES = "org.apache.spark.sql.catalyst.optimizer."
#: Optimizer rules that move a filter above a join into (or below) the join.
NO_PUSHDOWN = ",".join(_RULES + rule for rule in (
    "PushDownPredicates", "PushPredicateThroughJoin", "PushPredicateThroughNonJoin",
    "PushExtraPredicateThroughJoin", "InferFiltersFromConstraints",
))
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"


@dataclass(frozen=True)
class Pipeline:
    """A DataFrame to evaluate, and the optimizer rules to exclude while evaluating it."""

    name: str
    frame: DataFrame
    excluded_rules: str | None = None


def raw_inputs(spark: SparkSession, catalog: Catalog, plan: Node, paths: Mapping[str, str]) -> Inputs:
    """The plan's inputs read and renamed exactly as ``build_job`` does."""
    return Inputs(read_relations(spark, catalog, plan, paths, streaming=False, unsecured=True))


def unsecured(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, paths: Mapping[str, str]) -> Pipeline:
    plan = rewriting.plan
    frame = compile_graph(plan, raw_inputs(spark, catalog, plan, paths))
    return Pipeline("unsecured", output_frame(AuthorizedGraph("unsecured", plan, "none", ()), frame))


def rewritten(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, paths: Mapping[str, str]) -> Pipeline:
    job = build_job(spark, catalog, rewriting, paths, streaming=False)
    frame = job.union()
    if frame is None:
        raise ValueError("the rewriting deploys no graph: nothing to run")
    return Pipeline("rewritten", frame)


def rewritten_without_provenance(spark: SparkSession, catalog: Catalog, rewriting: Rewriting,
                                 paths: Mapping[str, str]) -> Pipeline:
    job = build_job(spark, catalog, rewriting, paths, streaming=False)
    outputs = [output_frame(graph, frame).drop(POLICIES) for graph, frame in job.frames]
    if not outputs:
        raise ValueError("the rewriting deploys no graph: nothing to run")
    frame = outputs[0]
    for other in outputs[1:]:
        frame = frame.unionByName(other)
    return Pipeline("rewritten, no _policies", frame)


def secfilter_predicate(catalog: Catalog, user: str, plan: Node) -> E.Expr:
    """∧ over the plan's inputs of ∨ of the user's read policies on that input."""
    policies = catalog.policies_for(user)
    per_input = []
    for source in sources(plan):
        conditions = []
        for policy in policies:
            if policy.privilege != "read" or policy.streams != (source.stream,):
                continue
            view = instantiate(policy, catalog.users[user], {source.stream: source.relation}, catalog.streams)
            if isinstance(view, NotApplicable):
                continue
            if view.attributes is not None:
                raise ValueError(f"policy {policy.id} masks attributes: post-filtering would not match")
            conditions.append(view.condition)
        per_input.append(_disjoin(conditions))  # no policy: FALSE, nothing passes
    return E.conjoin(per_input)


def _disjoin(parts: list[E.Expr]) -> E.Expr:
    """``parts`` joined by OR; FALSE when there are none."""
    result: E.Expr | None = None
    for part in parts:
        result = part if result is None else E.Or(result, part)
    return result if result is not None else E.Literal(False, "boolean")


def post_filtering(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, paths: Mapping[str, str],
                   user: str, *, pushdown: bool = False) -> Pipeline:
    """The SecFilter after the (single) join of the query."""
    predicate = secfilter_predicate(catalog, user, rewriting.plan)
    joins = [0]

    def after_join(node: Node) -> Node | None:
        if isinstance(node, Join):
            joins[0] += 1
            return Filter(node, predicate, id=f"{node.id}.secfilter")
        return None

    plan = transform(rewriting.plan, after_join)
    if joins[0] != 1:
        raise ValueError("post-filtering is built for queries with exactly one join")
    frame = compile_graph(plan, raw_inputs(spark, catalog, plan, paths))
    out = output_frame(AuthorizedGraph("secfilter", plan, "post-filtering", ()), frame)
    if pushdown:
        return Pipeline("post-filtering, pushed down", out)
    return Pipeline("post-filtering", out, NO_PUSHDOWN)
