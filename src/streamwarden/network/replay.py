"""``streamwarden network replay``: every registered query over recorded inputs, each
user's share of it by their access changes (what the terminal switches deliver).

Each query is compiled once and its rows carry their event time (the later ``ts`` of a
joined pair, a window's end for an aggregate); where the catalog has role policies on
the query's streams, the query runs once per listed user with those applied on top.
A user's rows are those whose event time falls in one of their grant periods
(:func:`streamwarden.network.registry.grant_intervals`), written to
``DIR/<user>/<query id>.jsonl`` (an empty file when they receive nothing).

    >>> # replay_network(spark, catalog, queries, changes, {"Stream1": "s1.jsonl"}, "out")
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.model import Catalog
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.execute import build_job, input_errors, ordered_lines, write_lines
from streamwarden.language.parser import parse_query
from streamwarden.network.registry import AccessChange, RegisteredQuery, grant_intervals
from streamwarden.passes import SecurityOptions, secure


def replay_network(spark: SparkSession, catalog: Catalog, queries: Sequence[RegisteredQuery],
                   changes: Sequence[AccessChange], inputs: Mapping[str, str | Path],
                   output_dir: str | Path) -> dict[tuple[str, str], int]:
    """Write each listed user's rows of each query; returns the row count per (user, query)."""
    output = Path(output_dir)
    written: dict[tuple[str, str], int] = {}
    for q in queries:
        per_user = _has_role_policies(catalog, q)
        shared: DataFrame | None = None
        for user in q.users:
            periods = grant_intervals(changes, q.id, user)
            target = output / user / f"{q.id}.jsonl"
            if not periods:
                written[(user, q.id)] = write_lines([], target)
                continue
            if per_user or shared is None:
                frame = _rows(spark, catalog, q, user, inputs)
                if not per_user:
                    shared = frame
            else:
                frame = shared
            if frame is None:
                written[(user, q.id)] = write_lines([], target)
                continue
            delivered = frame.filter(within_periods(periods)).drop(EVENT)
            with input_errors():
                written[(user, q.id)] = write_lines(ordered_lines(delivered), target)
    return written


def _rows(spark: SparkSession, catalog: Catalog, q: RegisteredQuery, user: str,
          inputs: Mapping[str, str | Path]) -> DataFrame | None:
    rewriting = secure(catalog, user, q.query, SecurityOptions(grants_decide=True))
    used = {s.stream: inputs[s.stream] for s in parse_query(q.query).sources if s.stream in inputs}
    return build_job(spark, catalog, rewriting, used or inputs, streaming=False, event_time=True).union()


def within_periods(periods: list) -> Column:  # type: ignore[type-arg]
    """TRUE for the rows whose event time falls in one of the [from, to) grant periods."""
    condition = F.lit(False)
    for start, end in periods:
        inside = F.col(EVENT) >= F.lit(start)
        if end is not None:
            inside = inside & (F.col(EVENT) < F.lit(end))
        condition = condition | inside
    return condition


def _has_role_policies(catalog: Catalog, q: RegisteredQuery) -> bool:
    streams = {s.stream for s in parse_query(q.query).sources}
    return any(set(p.streams) & streams for p in catalog.policies)


__all__ = ["replay_network", "within_periods"]
