"""A group's plan built once and run over each micro-batch (engine/reuse.py, Rebase.java).

The oracle is the plan built afresh over the batch itself (what every micro-batch did
before): the rebased plan must give the same rows, whatever the batch holds (NULLs, no row,
values only some members match), and anything that would make the swap mean something else
(another schema, nullability that differs) must build afresh instead of guessing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.engine.jvm import rebase
from streamwarden.engine.reuse import BuiltOnce
from streamwarden.engine.shared import Member, shared_input, template_rows
from streamwarden.plan.templates import Template, parameterize
from streamwarden.security.passes import secure

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  R: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}
roles: {Reader: {}}
users:
  ann: {roles: [Reader], profile: {ward: w1}}
  bob: {roles: [Reader], profile: {ward: w2}}
policies:
  - {id: by_ward, subject: Reader, streams: [R], privilege: read, where: "ward = self.ward"}
""")


def templated(user: str, query: str) -> Template:
    graphs = secure(CATALOG, user, query).deployed
    assert len(graphs) == 1
    return parameterize(graphs[0].root)


ANN = templated("ann", "SELECT sensor, value FROM R WHERE value > 40")
BOB = templated("bob", "SELECT sensor, value FROM R WHERE value > 7")
MEMBERS = [Member(0, "g-ann", ANN.values), Member(1, "g-bob", BOB.values)]


def batch(spark, folder: Path, readings: list[dict[str, Any]]) -> DataFrame:  # type: ignore[no-untyped-def]
    folder.mkdir(parents=True)
    (folder / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in readings), encoding="utf-8")
    return shared_input(spark, CATALOG, ANN, folder, tag="test", streaming=False)


def rows(frame: DataFrame | None) -> Counter[tuple[Any, ...]]:
    assert frame is not None
    return Counter(tuple(r) for r in frame.collect())


def reading(i: int, ward: str | None, value: float | None) -> dict[str, Any]:
    return {"ts": f"2026-03-01T10:00:{i % 60:02d}Z", "sensor": i, "ward": ward, "value": value}


def test_rebased_plan_gives_what_a_fresh_plan_gives_batch_after_batch_and_is_built_once(spark, tmp_path) -> None:
    built = []

    def build(frame: DataFrame) -> DataFrame:
        built.append(frame)
        return template_rows(frame, ANN, MEMBERS)

    plans = BuiltOnce()
    batches = [[reading(i, ("w1", "w2", None)[i % 3], (5.0, 50.0, None)[i % 4 % 3]) for i in range(12)],
               [reading(i, "w2", 8.0) for i in range(3)], []]
    for k, readings in enumerate(batches):
        frame = batch(spark, tmp_path / f"b{k}", readings)
        assert rows(plans.over(frame, "members", build)) == rows(template_rows(frame, ANN, MEMBERS))
    assert len(built) == 1  # over the placeholder, once
    plans.over(batch(spark, tmp_path / "again", batches[1]), "other members", build)
    assert len(built) == 2  # a new key: built anew


def test_a_batch_of_other_columns_is_not_rebased(spark, tmp_path) -> None:
    frame = batch(spark, tmp_path / "b", [reading(1, "w1", 50.0)])
    template = template_rows(frame, ANN, MEMBERS)
    renamed = frame.withColumnRenamed(frame.columns[-1], "other")
    assert rebase(template, frame, renamed) is None
    assert rebase(template, frame, frame.select(*reversed(frame.columns))) is None  # same columns, other order
    fewer = frame.select(*frame.columns[:-1])
    assert rebase(template, frame, fewer) is None


def test_a_batch_whose_nullability_differs_is_not_rebased(spark, tmp_path) -> None:
    """A template compiled for non-null columns may skip NULL checks: a nullable batch must not take its place."""
    from pyspark.sql import functions as F
    frame = spark.range(3).select(F.col("id").alias("v"))  # not nullable
    template = frame.filter(F.col("v") > 0)
    nullable = spark.createDataFrame([(None,), (2,)], "v long")
    assert rebase(template, frame, nullable) is None
    assert rows(rebase(template, frame, spark.range(5).select(F.col("id").alias("v")))) == Counter(
        {(1,): 1, (2,): 1, (3,): 1, (4,): 1})


def test_a_template_that_reads_the_placeholder_twice_is_not_rebased(spark) -> None:
    from pyspark.sql import functions as F
    frame = spark.range(3).select(F.col("id").alias("v"))
    twice = frame.unionByName(frame)
    assert rebase(twice, frame, spark.range(4).select(F.col("id").alias("v"))) is None


@settings(max_examples=6, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["w1", "w2", "w3", None]),
                          st.one_of(st.none(), st.floats(-100, 100, allow_nan=False))), max_size=25))
def test_random_batches_match_a_fresh_plan(spark, tmp_path_factory, cells) -> None:  # type: ignore[no-untyped-def]
    plans = BuiltOnce()
    folder = tmp_path_factory.mktemp("reuse")
    first = batch(spark, folder / "first", [reading(0, "w1", 41.0)])
    plans.over(first, "k", lambda f: template_rows(f, ANN, MEMBERS))
    frame = batch(spark, folder / "b", [reading(i, w, v) for i, (w, v) in enumerate(cells)])
    assert rows(plans.over(frame, "k", lambda f: template_rows(f, ANN, MEMBERS))) == rows(
        template_rows(frame, ANN, MEMBERS))


def test_a_template_that_reads_the_placeholder_in_a_subquery_is_not_rebased(spark) -> None:
    """NOT EXISTS over an empty placeholder would let every row through: build afresh instead."""
    from pyspark.sql import functions as F
    frame = spark.range(3).select(F.col("id").alias("v"))
    frame.createOrReplaceTempView("reuse_placeholder")
    other = spark.range(5).select(F.col("id").alias("w"))
    template = frame.crossJoin(other.where("NOT EXISTS (SELECT 1 FROM reuse_placeholder p WHERE p.v = w)"))
    assert rebase(template, frame, spark.range(4).select(F.col("id").alias("v"))) is None
