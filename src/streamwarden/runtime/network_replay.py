"""``streamwarden network replay``: every registered query over recorded inputs, each
user's share of it by their access changes (what the terminal switches deliver).

Each query is secured for each listed user (role policies, where the catalog has them,
apply on top of the grants) and compiled once per distinct set of authorized graphs, so
users with the same roles share one job; its rows carry their event time (the later
``ts`` of a joined pair, a window's end for an aggregate).
A user's rows are those whose event time falls in one of their grant periods
(:func:`streamwarden.catalog.registry.grant_intervals`), written to
``DIR/<user>/<query id>.jsonl`` (an empty file when they receive nothing), built by
:func:`streamwarden.names.safe_path` (nothing leaves ``DIR``), each user's folder 0700 and
each file 0600.

    >>> # replay_network(spark, catalog, queries, changes, {"Stream1": "s1.jsonl"}, "out")
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import AccessChange, Period, RegisteredQuery, grant_intervals
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.execute import Job, build_job, earliest_result_time, input_errors, ordered_lines
from streamwarden.engine.sinks import write_lines
from streamwarden.names import check_name, private_dir, safe_path
from streamwarden.plan.nodes import Node, sources
from streamwarden.security.passes import SecurityOptions, secure
from streamwarden.security.punctuation.spgen import spgen_lines


def replay_network(spark: SparkSession, catalog: Catalog, queries: Sequence[RegisteredQuery],
                   changes: Sequence[AccessChange], inputs: Mapping[str, str | Path],
                   output_dir: str | Path) -> dict[tuple[str, str], int]:
    """Write each listed user's rows of each query; returns the row count per (user, query)."""
    output = private_dir(output_dir)
    written: dict[tuple[str, str], int] = {}
    for q in queries:
        options = SecurityOptions(level=q.level, granted_streams=q.granted_streams(catalog))
        bound = q.bind(catalog)  # once for all its users
        used = {s.stream: inputs[s.stream] for s in sources(bound.plan) if s.stream in inputs} or inputs
        compiled: dict[tuple[tuple[str, Node], ...], tuple[DataFrame | None, Job]] = {}  # equal graphs: one job
        for user in q.users:
            periods = grant_intervals(changes, q.id, user)
            # Names were checked where they entered (catalog, QUERIES.yaml); the path is checked again.
            target = safe_path(output, check_name("user", user), f"{check_name('query id', q.id)}.jsonl")
            private_dir(target.parent, tighten=True)  # the user's folder: its owner's only (0700)
            frame, job = None, None
            if periods:
                rewriting = secure(catalog, user, bound, options)
                key = tuple((g.id, g.root) for g in rewriting.deployed)
                if key not in compiled:
                    built = build_job(spark, catalog, rewriting, used, streaming=False, event_time=True)
                    compiled[key] = (built.union(), built)
                frame, job = compiled[key]
            if frame is None or job is None:  # no grant, or no role policy of the user's authorizes anything
                written[(user, q.id)] = write_lines([], target)
                continue
            with input_errors():
                lines = ordered_lines(frame.filter(within_periods(periods)).drop(EVENT))
                if job.rewriting.on_result:  # SPGen's policy, dated by the earliest result of all, ahead of the rows
                    lines = _published(job, lines)
                written[(user, q.id)] = write_lines(lines, target)
    return written


def _published(job: Job, lines: Iterator[str]) -> Iterator[str]:
    """ON RESULT: the user's rows stamped with SPGen's policy, its records first (none when the
    user receives no row). The policy's date is the earliest result of the query's job,
    whatever the user's periods: what a running network dates it by, too."""
    first = next(lines, None)
    if first is None:
        return
    yield from spgen_lines(job.rewriting.on_result, earliest_result_time(job), itertools.chain([first], lines))


def within_periods(periods: Sequence[Period]) -> Column:
    """TRUE for the rows whose event time falls in one of the [from, to) grant periods."""
    condition = F.lit(False)
    for start, end in periods:
        inside = F.col(EVENT) >= F.lit(start)
        if end is not None:
            inside = inside & (F.col(EVENT) < F.lit(end))
        condition = condition | inside
    return condition


__all__ = ["replay_network", "within_periods"]
