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

An aggregate over windows shares more: when its members differ only in keys
(:func:`~streamwarden.plan.templates.lift_keys`), :class:`SharedAggregate` runs it once,
grouped by the key values as well, in one streaming query whose state Spark keeps; a
window's closing rows are then fanned out to the members of each key by the same hash
join on the member table. Members join and leave without touching that state.

    >>> # rows = shared_rows(batch, {key: (template, [Member(0, "ag1", (5,))])})
    >>> # rows = SharedAggregate.of(template).member_rows(closed, members)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BooleanType, DataType, DoubleType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from streamwarden.catalog.lattice import Lattice
from streamwarden.catalog.model import Catalog
from streamwarden.engine.columns import CARRIED, GRAPH_OF_MEMBER, MEMBER, param_column, physical_name
from streamwarden.engine.compiler import EVENT, Inputs, compile_graph
from streamwarden.engine.execute import GRAPH, output_frame
from streamwarden.engine.execute import read_relations
from streamwarden.engine.quarantine import OnBroken
from streamwarden.plan.nodes import Aggregate, LevelGuard, Shield
from streamwarden.plan.templates import Template, lift_keys
from streamwarden.security.rewrite.algorithm import AuthorizedGraph

ROW = "_row"


@dataclass(frozen=True)
class Member:
    """One member of a template: its number in the batch (``index``), the id of the graph it
    stands for in its query's rewriting, and its constants (the template's parameters)."""

    index: int
    graph: str
    values: tuple[Any, ...]


def shared_input(spark: Any, catalog: Catalog, template: Template, path: str | Path, *, tag: str,
                 streaming: bool = True, lateness: str = "0 seconds", on_broken: OnBroken = "quarantine"
                 ) -> DataFrame:
    """The template's stream, read once for every member of its group as any pipeline reads it
    (:func:`~streamwarden.engine.execute.read_relations`): through its Security Shield for the
    template's roles and its level guard at the template's level when it has them, with its
    event-time watermark when ``streaming``. Broken records are quarantined and counted under
    ``tag`` (``on_broken="fail"``: the first stops the job, as ``replay`` does)."""
    shields = {n.stream: n for n in template.reading if isinstance(n, Shield)}
    guards = [n for n in template.reading if isinstance(n, LevelGuard)]
    level = (catalog.lattice, guards[0].level) if catalog.lattice is not None and guards else None
    frames = read_relations(spark, catalog, template.root, {template.stream: path}, streaming=streaming,
                            lateness=lateness, shields=shields, level=level, metrics_tag=tag, on_broken=on_broken)
    return frames[template.stream]


def key_column(index: int) -> str:
    """The column carrying the value of a template's key ``index`` through a shared aggregate: its
    attribute as the stream holds it, which nothing in the template can hide
    (:attr:`~streamwarden.plan.templates.Template.raw_keys`)."""
    return f"{CARRIED}k{index}"


@dataclass(frozen=True)
class SharedAggregate:
    """A windowed aggregate template whose members differ only in keys, run once for all of them:
    ``lifted`` is the template without its key conjuncts, grouped by the keys' values as well."""

    template: Template
    lifted: Aggregate

    @classmethod
    def of(cls, template: Template) -> "SharedAggregate | None":
        """The template's shared aggregate, or None when a member's constant is not a key."""
        lifted = lift_keys(template) if template.stateful else None
        return cls(template, lifted) if isinstance(lifted, Aggregate) else None

    @property
    def window(self) -> tuple[float, float]:
        """Seconds from a window's start to its end as Spark evicts it (its slide when windows leave gaps)."""
        window = self.lifted.window
        assert window is not None and window.size_seconds is not None  # lift_keys: a [RANGE] window
        return window.size_seconds, window.slide_seconds or window.size_seconds

    def rows(self, relation: DataFrame, lattice: Lattice | None = None) -> DataFrame:
        """Every key value's rows of the aggregate over ``relation`` (:func:`shared_input`), with
        ``_event`` (the window's end) and the key columns."""
        stream = self.template.stream
        keyed = relation.select("*", *[F.col(physical_name(stream, attribute)).alias(key_column(index))
                                        for attribute, index in self.template.raw_keys])
        frame = compile_graph(self.lifted, Inputs({stream: keyed}, lattice=lattice, event_time=True))
        return output_frame(AuthorizedGraph("shared", self.lifted, "shared", ()), frame, lattice)

    def member_rows(self, closed: DataFrame, members: Sequence[Member]) -> DataFrame:
        """Each member's rows among ``closed`` (rows of :meth:`rows`): its key values' rows, found by
        a hash join on the member table, as ``_event``, ``__carry_member`` and ``_row``."""
        table = member_table(closed.sparkSession, self.template, members)
        condition = None
        for _, index in self.template.raw_keys:
            equal = closed[key_column(index)] == table[param_column(index)]
            condition = equal if condition is None else condition & equal
        joined = closed.join(table, condition, "inner")
        payload = [F.col(GRAPH_OF_MEMBER).alias(GRAPH) if c == GRAPH else F.col(f"`{c}`")
                   for c in closed.columns if c != EVENT and not c.startswith(CARRIED)]
        return joined.select(F.col(EVENT), F.col(MEMBER), F.to_json(F.struct(*payload)).alias(ROW))


#: What a group does with a template its members' rows cannot be built by: told the template,
#: its members and why, the other templates go on.
OnTemplateFailure = Callable[[Template, Sequence[Member], Exception], None]


def shared_rows(batch: DataFrame, templates: Mapping[str, tuple[Template, Sequence[Member]]],
                lattice: Lattice | None = None, *, on_failure: OnTemplateFailure | None = None) -> DataFrame | None:
    """Every member's rows of ``batch`` (the stream's tuples in physical names): ``_event``,
    ``__carry_member`` and ``_row`` (None when no template has a member). A template whose
    plan Spark refuses raises, unless ``on_failure`` takes it: then its members get no rows
    and the others theirs."""
    outputs = []
    for template, members in templates.values():
        if not members:
            continue
        try:
            outputs.append(template_rows(batch, template, members, lattice))
        except Exception as exc:  # noqa: BLE001 - whatever Spark or the compiler raised: this template only
            if on_failure is None:
                raise
            on_failure(template, members, exc)
    if not outputs:
        return None
    result = outputs[0]
    for other in outputs[1:]:
        result = result.unionByName(other)
    return result


def template_rows(batch: DataFrame, template: Template, members: Sequence[Member],
                  lattice: Lattice | None = None) -> DataFrame:
    """One template's members' rows of ``batch`` (see :func:`shared_rows`), analysed by Spark."""
    joined = _with_members(batch, template, members)
    frame = compile_graph(template.root, Inputs({template.stream: joined}, lattice=lattice, event_time=True))
    graph = AuthorizedGraph("shared", template.root, "shared", ())
    out = output_frame(graph, frame, lattice)
    payload = [F.col(f"`{c}`") for c in out.columns if c != EVENT and not c.startswith(CARRIED)]
    return out.select(F.col(EVENT), F.col(MEMBER), F.to_json(F.struct(*payload)).alias(ROW))


def group_rows(frame: DataFrame, members: Sequence[tuple[Template, Member]], aggregate: SharedAggregate | None,
               lattice: Lattice | None = None, *, on_failure: OnTemplateFailure | None = None) -> DataFrame | None:
    """Each member's rows of a group's ``frame``: a tuple group's input evaluated once per
    template over its members, or an aggregate group's rows (:meth:`SharedAggregate.rows`)
    fanned out to the members of their keys. None when there is no member."""
    if not members:
        return None
    if aggregate is not None:
        return aggregate.member_rows(frame, [member for _, member in members])
    templates: dict[str, tuple[Template, list[Member]]] = {}
    for template, member in members:
        templates.setdefault(template.key, (template, []))[1].append(member)
    return shared_rows(frame, templates, lattice, on_failure=on_failure)


def _with_members(batch: DataFrame, template: Template, members: Sequence[Member]) -> DataFrame:
    """``batch`` with each tuple beside the members it may belong to: on the template's equality
    keys, a hash join with the member table (broadcast); without keys, every member, each
    tuple's row repeated once per member by a generator over the members' constant array (a
    join would broadcast the table: one more Spark job per micro-batch). With many members
    and a range conjunct, the range index (:func:`_ranked`) keeps a tuple from meeting the
    members whose constant it cannot pass. The template's own predicate decides afterwards:
    both only leave out pairs that predicate would refuse."""
    ranked = _ranked(template, members)
    if not template.keys and ranked is None:
        return batch.select("*", F.inline(member_array(template, members)))
    table = member_table(batch.sparkSession, template, members)
    condition = None
    for attribute, index in template.keys:
        equal = F.col(physical_name(template.stream, attribute)) == table[param_column(index)]
        condition = equal if condition is None else condition & equal
    if ranked is not None:
        attribute, op, index, edges = ranked
        table = F.broadcast(table.withColumn(_BUCKET, _rank(edges, F.col(param_column(index)))))
        rank = _rank(edges, F.col(physical_name(template.stream, attribute)))
        # c < v or c <= v gives rank(c) <= rank(v); c > v or c >= v gives rank(c) >= rank(v)
        buckets = F.sequence(F.lit(0), rank) if op in (">", ">=") else F.sequence(rank, F.size(edges))
        batch = batch.withColumn(_BUCKETS, F.explode(buckets))
        same = batch[_BUCKETS] == table[_BUCKET]
        condition = same if condition is None else condition & same
    joined = batch.join(table, condition, "inner")
    return joined.drop(_BUCKETS, _BUCKET) if ranked is not None else joined


#: A template's members are indexed by a range conjunct's constant from this many members per
#: key value on (below, a tuple meets its key's members for less than the index's own work:
#: measured at 1,000 users in 10 wards, 100 a ward, the index gained nothing).
INDEXED_FROM = 256
#: Buckets of a range index hold at least this many of a key's members each.
BUCKET_MEMBERS = 32
_BUCKET, _BUCKETS = f"{CARRIED}bucket", f"{CARRIED}buckets"


def _ranked(template: Template, members: Sequence[Member]) -> tuple[str, str, int, Column] | None:
    """The range index of a template with many members per key value: the attribute, the
    comparison, the constant's parameter, and the edges cutting the members' constants into
    buckets (None: no range conjunct, or too few members a key).

    A value's *rank* is how many edges are at most it, in Spark's own comparison (which
    orders NaN last and -0.0 with 0.0, and makes NULL pass nothing): a member with constant c
    is in bucket rank(c), and a tuple with value v meets the buckets up to rank(v) for
    ``v > c`` and ``v >= c`` (c ≤ v gives rank(c) ≤ rank(v), the edges being ordered), from
    it on for ``<`` and ``<=``. Any edges are sound; quantiles of the constants make the
    buckets even, so a tuple meets the members it passes and one bucket more."""
    if not template.bounds:
        return None
    keys = {tuple(m.values[i] for _, i in template.keys) for m in members}
    if len(members) < INDEXED_FROM * len(keys):  # a tuple meets its key's members only
        return None
    attribute, op, index = template.bounds[0]
    constants = sorted({v for m in members if isinstance(v := m.values[index], (int, float)) and v == v})
    # A tuple costs about as many exploded rows as buckets, plus its key's members in one bucket:
    # √(members a key) buckets balance the two (100 at 10,000 a ward, not 3,125 for all wards'
    # 100,000 members), and none holds fewer than BUCKET_MEMBERS of a key's members.
    per_key = len(members) // len(keys)
    buckets = max(1, min(per_key // BUCKET_MEMBERS, math.isqrt(per_key)))
    step = max(1, len(constants) // buckets)
    edges = constants[step::step]
    if not edges:
        return None
    dtype = SPARK_TYPE_OF[template.types[index]]
    return attribute, op, index, F.from_json(F.lit(json.dumps(edges)), ArrayType(dtype), {"mode": "FAILFAST"})


def _rank(edges: Column, value: Column) -> Column:
    """How many of ``edges`` are at most ``value`` (NULL: none)."""
    return F.size(F.filter(edges, lambda edge: edge <= value))


def member_table(spark: SparkSession, template: Template, members: Sequence[Member]) -> DataFrame:
    """The members' constants, one row each (broadcast: a few thousand rows at most), from
    :func:`member_array`."""
    return F.broadcast(spark.range(1).select(F.inline(member_array(template, members))))


def member_array(template: Template, members: Sequence[Member]) -> Column:
    """The members' constants as one constant array of structs (``__carry_member``,
    ``__carry_graph``, a column per parameter), which Spark's optimizer folds.

    The values reach Spark as one JSON text that Spark parses (``from_json`` of a literal),
    not through ``createDataFrame``: a list from Python becomes an RDD whose tasks run in
    Python workers, 100-150 ms a micro-batch on two cores for a few rows, and a literal per
    value would take a call into the JVM each. Parsing is strict (``FAILFAST``): a constant
    Spark cannot read fails the template, never gives its member a NULL to compare with."""
    schema = StructType([StructField(MEMBER, LongType()), StructField(GRAPH_OF_MEMBER, StringType()),
                         *[StructField(param_column(i), SPARK_TYPE_OF[t]) for i, t in enumerate(template.types)]])
    names = schema.fieldNames()
    text = json.dumps([dict(zip(names, (m.index, m.graph, *map(_json_constant, m.values, template.types))))
                       for m in members], ensure_ascii=False)
    return F.from_json(F.lit(text), ArrayType(schema), {"mode": "FAILFAST"})


def _json_constant(value: Any, dtype: str) -> Any:
    """A constant of catalog type ``dtype`` as JSON that Spark's ``from_json`` reads back as the
    same value: a time as ISO 8601 with its offset (a naive one is the driver's local time, as
    ``F.lit`` takes it); NaN and infinities as the bare words Spark accepts.

    Checked here, while the plan is built: Spark folds the literal only when a micro-batch
    runs, and a constant it refused then would fail the whole group's batch, every member's,
    where a template that cannot be built fails alone.

        >>> _json_constant(7, "int"), _json_constant(2**40, "int")
        Traceback (most recent call last):
        ...
        ValueError: the constant 1099511627776 does not fit the type int
    """
    low, high = _RANGES.get(dtype, (None, None))
    fits = {"int": isinstance(value, int) and not isinstance(value, bool),
            "long": isinstance(value, int) and not isinstance(value, bool),
            "double": isinstance(value, (int, float)) and not isinstance(value, bool),
            "string": isinstance(value, str), "boolean": isinstance(value, bool),
            "timestamp": isinstance(value, datetime)}.get(dtype, False)
    if value is not None and (not fits or (low is not None and not low <= value <= high)):
        raise ValueError(f"the constant {value!r} does not fit the type {dtype}")
    if isinstance(value, datetime):
        return (value if value.tzinfo is not None else value.astimezone()).isoformat()
    return value


_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


#: The member table's column types, by the catalog type of the constant (as SPARK_TYPES casts literals).
SPARK_TYPE_OF: dict[str, DataType] = {
    "timestamp": TimestampType(), "int": IntegerType(), "long": LongType(), "double": DoubleType(),
    "string": StringType(), "boolean": BooleanType()}

__all__ = ["Member", "OnTemplateFailure", "ROW", "SharedAggregate", "group_rows", "key_column", "member_array",
           "member_table", "shared_input", "shared_rows", "template_rows"]
