"""Many members' query templates over one micro-batch of one stream, in one Spark plan.

A *member* is one graph of one registered query secured for its users, reduced to a
:class:`~streamwarden.plan.templates.Template` and its constants. For each template the
batch is joined with the *member table* (one row of constants per member, broadcast):
on the template's equality keys (``ward = ?0``: a hash lookup finds each tuple's members)
when it has some, else every member is tried. The template is then compiled once, by
the one compiler (:func:`~streamwarden.engine.compiler.compile_graph`), over the joined
rows: its parameters read the member's constants, and every operator carries the member
along. The result is each member's rows, in the network's format: the event time, the
member and the row as JSON (what a pipeline of its own would emit).

    >>> # rows = shared_rows(batch, {key: (template, [Member(0, "ag1", (5,))])})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, DataType, DoubleType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from streamwarden.catalog.model import StreamDef
from streamwarden.engine.columns import GRAPH_OF_MEMBER, MEMBER, param_column, physical_name
from streamwarden.engine.compiler import EVENT, Inputs, compile_graph
from streamwarden.engine.execute import output_frame
from streamwarden.engine.sources import as_relation, read_input
from streamwarden.plan.templates import Template
from streamwarden.security.rewrite.algorithm import AuthorizedGraph

ROW = "_row"


@dataclass(frozen=True)
class Member:
    """One member of a template: its number in the batch (``index``), the id of the graph it
    stands for in its query's rewriting, and its constants (the template's parameters)."""

    index: int
    graph: str
    values: tuple[Any, ...]


def shared_input(spark: Any, stream: StreamDef, path: str, *, tag: str) -> DataFrame:
    """The stream, read once for every member (broken records quarantined and counted under ``tag``)."""
    raw = read_input(spark, stream, path, streaming=True, on_broken="quarantine", metrics_tag=tag)
    return as_relation(raw, stream, stream.name)


def shared_rows(batch: DataFrame, templates: Mapping[str, tuple[Template, Sequence[Member]]]) -> DataFrame | None:
    """Every member's rows of ``batch`` (the stream's tuples in physical names): ``_event``,
    ``__carry_member`` and ``_row`` (None when no template has a member)."""
    outputs = []
    for template, members in templates.values():
        if not members:
            continue
        joined = _with_members(batch, template, members)
        frame = compile_graph(template.root, Inputs({template.stream: joined}, event_time=True))
        graph = AuthorizedGraph("shared", template.root, "shared", ())
        out = output_frame(graph, frame)
        payload = [F.col(f"`{c}`") for c in out.columns if c not in (EVENT, MEMBER)]
        outputs.append(out.select(F.col(EVENT), F.col(MEMBER), F.to_json(F.struct(*payload)).alias(ROW)))
    if not outputs:
        return None
    result = outputs[0]
    for other in outputs[1:]:
        result = result.unionByName(other)
    return result


def _with_members(batch: DataFrame, template: Template, members: Sequence[Member]) -> DataFrame:
    """``batch`` joined with the template's member table (broadcast): on its equality keys, a
    hash join; without keys, every tuple meets every member."""
    spark = batch.sparkSession
    schema = StructType([StructField(MEMBER, LongType()), StructField(GRAPH_OF_MEMBER, StringType()),
                         *[StructField(param_column(i), SPARK_TYPE_OF[t]) for i, t in enumerate(template.types)]])
    table = F.broadcast(spark.createDataFrame([(m.index, m.graph, *m.values) for m in members], schema))
    if not template.keys:
        return batch.crossJoin(table)
    condition = None
    for attribute, index in template.keys:
        equal = F.col(physical_name(template.stream, attribute)) == table[param_column(index)]
        condition = equal if condition is None else condition & equal
    return batch.join(table, condition, "inner")


#: The member table's column types, by the catalog type of the constant (as SPARK_TYPES casts literals).
SPARK_TYPE_OF: dict[str, DataType] = {
    "timestamp": TimestampType(), "int": IntegerType(), "long": LongType(), "double": DoubleType(),
    "string": StringType(), "boolean": BooleanType()}

__all__ = ["Member", "ROW", "shared_input", "shared_rows"]
