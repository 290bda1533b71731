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

import gc
import hashlib
import threading
from contextlib import contextmanager
from functools import cached_property
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.errors import StreamwardenError
from streamwarden.language.binder import BoundQuery
from streamwarden.plan.hashing import stable_text
from streamwarden.security.rewrite.algorithm import Rewriting


@dataclass(frozen=True)
class Pipeline:
    """One registered query, at one level, with one set of authorized graphs, for ``users``."""

    query: RegisteredQuery
    # secured for a user of the same security class as ``users`` (SecureCache): the graphs, level and
    # ON RESULT are every user's; its ``user``, notes and decisions' reasons may name another user
    rewriting: Rewriting
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

    At scale (100,000 queries of 10,000 users) the work is done once per distinct input: a
    query text is bound once, a rewriting computed once per text, options and security
    class of the user (:class:`~streamwarden.security.passes.SecureCache`), and its graphs
    written out for the fingerprint once.
    """
    with collector_paused():
        return _plan(catalog, queries, lateness)


def _plan(catalog: Catalog, queries: Sequence[RegisteredQuery], lateness: str) -> NetworkPlan:
    from streamwarden.security.passes import SecureCache, SecurityOptions  # the passes import the catalog

    groups: dict[tuple[str, str], tuple[RegisteredQuery, Rewriting, list[str]]] = {}
    denials: list[Denial] = []
    cache = SecureCache(catalog)
    bound: dict[str, BoundQuery] = {}  # by text: binding reads only the text and the catalog
    # each rewriting's graphs as the fingerprint writes them ("" when none is deployed), by its id
    # (the rewriting is kept with them, so that id stays its own)
    graphs: dict[int, tuple[Rewriting, str]] = {}
    settings: dict[tuple[str | None, frozenset[str]], SecurityOptions] = {}
    for q in queries:
        granted = q.granted_streams(catalog)
        options = settings.get((q.level, granted))
        if options is None:
            options = settings[(q.level, granted)] = SecurityOptions(level=q.level, granted_streams=granted)
        query = bound.get(q.query)
        if query is None:
            try:
                query = bound[q.query] = q.bind(catalog)  # once for all its users, and all queries of its text
            except StreamwardenError as exc:  # a new catalog the stored query no longer binds against
                denials += [Denial(q.id, user, str(exc).splitlines()[0]) for user in q.users]
                continue
        for user in q.users:
            try:
                rewriting = cache.secure(user, query, options)
            except StreamwardenError as exc:  # e.g. not cleared for the query's level
                denials.append(Denial(q.id, user, str(exc).splitlines()[0]))
                continue
            known = graphs.get(id(rewriting))
            if known is None or known[0] is not rewriting:
                known = graphs[id(rewriting)] = (rewriting, _graphs_text(rewriting) if rewriting.deployed else "")
            if not known[1]:
                denials.append(Denial(q.id, user, "no role policy of yours authorizes any part of this query"))
                continue
            fingerprint = _fingerprint(q.id, rewriting, known[1], lateness)
            groups.setdefault((q.id, fingerprint), (q, rewriting, []))[2].append(user)
    pipelines = tuple(Pipeline(q, rewriting, tuple(users), fingerprint)
                      for (_, fingerprint), (q, rewriting, users) in sorted(groups.items()))
    return NetworkPlan(pipelines, tuple(denials), tuple(queries))


_pauses = 0  # plans running now with the collector paused (threads: a service plans as a network does)
_paused_lock = threading.Lock()
_resume = False  # whether the first pause found the collector on


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, back as it was after it.

    A compile builds millions of small objects that live on (plans, templates) and makes no
    garbage cycles (the plan code leaves none: ``tests/test_network_compile.py`` checks). The
    collector would still walk every live object again each time their number grew by a
    quarter: at 100,000 queries that was 40 % of a compile (bench/results/network_compile.md).
    A network's poll pauses it while it reads the store and replans (the catalog and the
    registrations it loads are as many objects again).
    Nested and concurrent pauses count: the collector comes back when the last one ends, if it
    was on when the first began.
    """
    global _pauses, _resume
    with _paused_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _paused_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def pipeline_fingerprint(query: RegisteredQuery, rewriting: Rewriting, lateness: str) -> str:
    """A hash of what a pipeline's Spark state depends on: the query id, its level, its deployed
    graphs (ids and plans, which hold every policy condition, shield and guard) and the lateness.
    Users and grants are not in it: they only route rows at the terminal switch.

    It names the pipeline's checkpoint, so it must not change between versions: it is the
    SHA-256 of ``repr((query id, str(level), [(graph id, stable_text(root)), ...], lateness,
    bool(ON RESULT)))``."""
    return _fingerprint(query.id, rewriting, _graphs_text(rewriting), lateness)


def _graphs_text(rewriting: Rewriting) -> str:
    """The deployed graphs as the fingerprint writes them (the costly part: once per rewriting)."""
    return repr([(g.id, stable_text(g.root)) for g in rewriting.deployed])  # the same in every process


def _fingerprint(query: str, rewriting: Rewriting, graphs: str, lateness: str) -> str:
    # repr() of the tuple of pipeline_fingerprint's docstring, written out around the graphs' text
    text = f"({query!r}, {str(rewriting.level)!r}, {graphs}, {lateness!r}, {bool(rewriting.on_result)!r})"
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = ["Denial", "NetworkPlan", "Pipeline", "collector_paused", "pipeline_fingerprint", "plan_network"]
