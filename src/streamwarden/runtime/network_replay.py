"""``streamwarden network replay``: every registered query over recorded inputs, each
user's share of it by their access changes (what the terminal switches deliver).

Each query is secured for each listed user (role policies, where the catalog has them,
apply on top of the grants) and compiled once per distinct set of authorized graphs, so
users with the same roles share one job; its rows carry their event time (the later
``ts`` of a joined pair, a window's end for an aggregate).
A user's rows are those whose event time falls in one of their grant periods
(:func:`streamwarden.catalog.registry.grant_intervals`), written to
``DIR/<user>/<query id>.jsonl`` (an empty file when they receive nothing) in event-time
order (then by text), built by :func:`streamwarden.names.safe_path` (nothing leaves
``DIR``), each user's folder 0700 and each file 0600.

What a running network's groups host (:mod:`streamwarden.runtime.groups`) is replayed the
same way: each group's members in one job over its stream, and every user's rows of it in
one write (:mod:`streamwarden.engine.fanout`); the rest runs a job per distinct set of
authorized graphs.

    >>> # replay_network(spark, catalog, queries, changes, {"Stream1": "s1.jsonl"}, "out")
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.lattice import Lattice
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import AccessChange, Period, RegisteredQuery, grant_intervals
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.execute import Job, build_job, earliest_result_time, input_errors
from streamwarden.engine.fanout import FannedOut, write_per_recipient
from streamwarden.engine.shared import ROW, Member, group_rows, shared_input
from streamwarden.engine.sinks import write_lines
from streamwarden.names import check_name, private_dir, safe_path
from streamwarden.plan.nodes import Node, sources
from streamwarden.plan.templates import Template
from streamwarden.runtime.groups import Hosting, group_of
from streamwarden.security.passes import SecurityOptions, secure
from streamwarden.security.rewrite.algorithm import Rewriting
from streamwarden.security.punctuation.spgen import spgen_lines


def replay_network(spark: SparkSession, catalog: Catalog, queries: Sequence[RegisteredQuery],
                   changes: Sequence[AccessChange], inputs: Mapping[str, str | Path],
                   output_dir: str | Path) -> dict[tuple[str, str], int]:
    """Write each listed user's rows of each query; returns the row count per (user, query)."""
    output = private_dir(output_dir)
    written: dict[tuple[str, str], int] = {}
    shared = _SharedReplay(catalog, inputs)
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
                if shared.add(rewriting, (user, q.id), periods, target):
                    continue
                key = tuple((g.id, g.root) for g in rewriting.deployed)
                if key not in compiled:
                    built = build_job(spark, catalog, rewriting, used, streaming=False, event_time=True)
                    compiled[key] = (built.union(), built)
                frame, job = compiled[key]
            if frame is None or job is None:  # no grant, or no role policy of the user's authorizes anything
                written[(user, q.id)] = write_lines([], target)
                continue
            with input_errors():
                lines = event_ordered_lines(frame.filter(within_periods(periods)))
                if job.rewriting.on_result:  # SPGen's policy, dated by the earliest result of all, ahead of the rows
                    lines = _published(job, lines)
                written[(user, q.id)] = write_lines(lines, target)
    written.update(shared.run(spark, output))
    return written


@dataclass(frozen=True)
class _Recipient:
    member: int
    pair: tuple[str, str]  # (user, query id)
    periods: tuple[Period, ...]
    target: Path


@dataclass
class _Group:
    """One group's replay: its distinct members (graphs and constants; users of one ward asking
    one query are one member) and who receives each member's rows in which periods."""

    place: Hosting  # the first member's: the group's stream and shared aggregate
    members: dict[tuple[tuple[str, str, tuple[Any, ...]], ...], tuple[int, Hosting]] = field(default_factory=dict)
    recipients: list[_Recipient] = field(default_factory=list)

    def listed(self) -> list[tuple[Template, Member]]:
        return [(template, Member(index, graph, template.values)) for index, place in self.members.values()
                for graph, template in place.graphs]


class _SharedReplay:
    """The (user, query) pairs a group can host, replayed together: one job per group."""

    def __init__(self, catalog: Catalog, inputs: Mapping[str, str | Path]):
        self.catalog = catalog
        self.inputs = inputs
        self.groups: dict[str, _Group] = {}

    def add(self, rewriting: Rewriting, pair: tuple[str, str], periods: Sequence[Period], target: Path) -> bool:
        """Take the (user, query) pair's rows when a group hosts ``rewriting``; False: not hosted."""
        place = group_of(rewriting)
        if place is None or place.stream not in self.inputs:
            return False
        group = self.groups.setdefault(place.group, _Group(place))
        identity = tuple((graph, template.key, template.values) for graph, template in place.graphs)
        index, _ = group.members.setdefault(identity, (len(group.members), place))
        group.recipients.append(_Recipient(index, pair, tuple(periods), target))
        return True

    def run(self, spark: SparkSession, output: Path) -> dict[tuple[str, str], int]:
        """Per group, every member's rows in one job, each recipient's in its periods written once."""
        written: dict[tuple[str, str], int] = {}
        for name, group in self.groups.items():
            place = group.place
            scratch = output / f".staging-{name}"
            with input_errors():
                relation = shared_input(spark, self.catalog, place.reading, self.inputs[place.stream], tag="",
                                        streaming=False, on_broken="fail")
                rows = self._rows(relation, group, self.catalog.lattice)
                periods = [(r, recipient.member, start, end) for r, recipient in enumerate(group.recipients)
                           for start, end in recipient.periods]
                fanned = write_per_recipient(rows, periods, scratch)
            with fanned:
                for r, recipient in enumerate(group.recipients):
                    written[recipient.pair] = _place(fanned, r, recipient.target)
        return written

    @staticmethod
    def _rows(relation: DataFrame, group: _Group, lattice: Lattice | None) -> DataFrame:
        aggregate = group.place.aggregate
        frame = aggregate.rows(relation, lattice) if aggregate is not None else relation
        rows = group_rows(frame, group.listed(), aggregate, lattice)
        assert rows is not None  # every member has a graph (group_of: deployed graphs only)
        return rows


def _place(fanned: FannedOut, recipient: int, target: Path) -> int:
    """Recipient's rows as the file ``target`` (made whole, then renamed: a failed replay never
    leaves half a result); how many."""
    if recipient not in fanned.received:
        return write_lines((), target)  # an empty result, written as every result is
    private_dir(target.parent)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    fanned.copy(recipient, partial)
    partial.replace(target)
    return fanned.received[recipient]


def event_ordered_lines(frame: DataFrame) -> Iterator[str]:
    """A network replay's rows as JSON lines, by event time, then by text (what a group writes)."""
    payload = F.to_json(F.struct(*[F.col(f"`{c}`") for c in frame.columns if c != EVENT])).alias(ROW)
    lines = frame.select(F.col(EVENT), payload).orderBy(EVENT, ROW)
    return (row[ROW] for row in lines.toLocalIterator())


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
