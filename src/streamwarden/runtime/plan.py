"""What a network runs: its registered queries secured for each user, grouped into pipelines.

A *pipeline* is one registered query at one security level with one set of authorized
graphs, serving every listed user whose roles give exactly those graphs. It is the unit
the runtime compiles (once), starts, pauses and retires, and it owns its Spark state:

* users with equal plans share it (the same rows, split by the terminal switch);
* queries of different levels never share one (levels share no operator, state or
  watermark), nor do different plans of one query (users whose roles differ);
* its fingerprint is a hash of what its state depends on (the graphs, the level, the
  lateness), so a change of users, grants or unrelated queries leaves it running, and a
  change of catalog that alters its graphs makes a new pipeline with a fresh state.

Planning is pure: no Spark, the catalog and the registrations in, the plan out.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> from streamwarden.catalog.registry import RegisteredQuery
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}, bob: {}}")
    >>> plan = plan_network(cat, [RegisteredQuery("q1", ("ann", "bob"), "SELECT a FROM S")])
    >>> [(p.query.id, p.users) for p in plan.pipelines]
    [('q1', ('ann', 'bob'))]
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from dataclasses import dataclass, field
from typing import Sequence

from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.errors import StreamwardenError
from streamwarden.plan.hashing import stable_text
from streamwarden.security.rewrite.algorithm import Rewriting


@dataclass(frozen=True)
class Pipeline:
    """One registered query, at one level, with one set of authorized graphs, for ``users``."""

    query: RegisteredQuery
    rewriting: Rewriting  # secured for the first of ``users`` (the others' are equal)
    users: tuple[str, ...]
    fingerprint: str  # what its state depends on: see pipeline_fingerprint

    @property
    def level(self) -> str | None:
        return None if self.rewriting.level is None else str(self.rewriting.level)

    @property
    def name(self) -> str:
        """``q1-3fa2b0c91d2e``: the query id and the fingerprint's start (folder and Spark query name)."""
        return f"{self.query.id}-{self.fingerprint[:12]}"


@dataclass(frozen=True)
class Denial:
    """A listed user who receives nothing of a query, and why (shown in their output's status)."""

    query: str
    user: str
    reason: str


@dataclass(frozen=True)
class NetworkPlan:
    pipelines: tuple[Pipeline, ...]
    denials: tuple[Denial, ...] = ()
    queries: tuple[RegisteredQuery, ...] = field(default=())

    def pipeline_of(self, query: str, user: str) -> Pipeline | None:
        return self._pipelines_by_member.get((query, user))

    def denial_of(self, query: str, user: str) -> Denial | None:
        """Why ``user`` receives nothing of ``query`` (None: she is in a pipeline of it)."""
        return self._denials_by_member.get((query, user))

    @cached_property
    def _pipelines_by_member(self) -> dict[tuple[str, str], Pipeline]:  # a thousand users: looked up, not scanned
        return {(p.query.id, user): p for p in reversed(self.pipelines) for user in p.users}

    @cached_property
    def _denials_by_member(self) -> dict[tuple[str, str], Denial]:
        return {(d.query, d.user): d for d in reversed(self.denials)}


def plan_network(catalog: Catalog, queries: Sequence[RegisteredQuery], *, lateness: str = "0 seconds") -> NetworkPlan:
    """Secure every registered query for each of its users (role policies, shields, levels, with
    the network's grants deciding where no role policy applies) and group them into pipelines.

    A user the passes refuse (not cleared for the query's level, no role policy authorizing
    anything) gets a :class:`Denial`; the others' pipelines still run.
    """
    from streamwarden.security.passes import SecurityOptions, secure  # the passes import the catalog; keep this light

    groups: dict[tuple[str, str], tuple[RegisteredQuery, Rewriting, list[str]]] = {}
    denials: list[Denial] = []
    for q in queries:
        options = SecurityOptions(level=q.level, granted_streams=q.granted_streams(catalog))
        try:
            bound = q.bind(catalog)  # once for all its users
        except StreamwardenError as exc:  # a new catalog the stored query no longer binds against
            denials += [Denial(q.id, user, str(exc).splitlines()[0]) for user in q.users]
            continue
        for user in q.users:
            try:
                rewriting = secure(catalog, user, bound, options)
            except StreamwardenError as exc:  # e.g. not cleared for the query's level
                denials.append(Denial(q.id, user, str(exc).splitlines()[0]))
                continue
            if not rewriting.deployed:
                denials.append(Denial(q.id, user, "no role policy of yours authorizes any part of this query"))
                continue
            fingerprint = pipeline_fingerprint(q, rewriting, lateness)
            groups.setdefault((q.id, fingerprint), (q, rewriting, []))[2].append(user)
    pipelines = tuple(Pipeline(q, rewriting, tuple(users), fingerprint)
                      for (_, fingerprint), (q, rewriting, users) in sorted(groups.items()))
    return NetworkPlan(pipelines, tuple(denials), tuple(queries))


def pipeline_fingerprint(query: RegisteredQuery, rewriting: Rewriting, lateness: str) -> str:
    """A hash of what a pipeline's Spark state depends on: the query id, its level, its deployed
    graphs (ids and plans, which hold every policy condition, shield and guard) and the lateness.
    Users and grants are not in it: they only route rows at the terminal switch."""
    graphs = [(g.id, stable_text(g.root)) for g in rewriting.deployed]  # the same in every process
    text = repr((query.id, str(rewriting.level), graphs, lateness, bool(rewriting.on_result)))
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = ["Denial", "NetworkPlan", "Pipeline", "pipeline_fingerprint", "plan_network"]
