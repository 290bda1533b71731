"""Zaki et al. §6's simulator: random shared-operator networks and their upper-bound cost.

Given (input streams, queries, users, operators, degree of sharing), :func:`random_network`
builds a shared-operator network, Algorithm 2 places its switches, and users are
assigned to query outputs at random. :func:`network_costs` prices one network for 1,000
input tuples with the paper's constants (0.1 ms per tuple of SELECT and PROJECT, 0.3 ms
per tuple of JOIN, 0.1 ms per SP at a switch) under the *upper bound* the paper uses:
every operator processes all 1,000 tuples unless a switch shuts it off. New SPs come
every 100 tuples for each user. :func:`simulate` averages over many seeded networks.
Used by ``bench/network_sim.py`` (the experiment) and the simulator tests in ``tests/test_network_core.py``.

    >>> r = simulate(SimConfig(streams=3, queries=3, users=10, operators=15, sharing=0.5), networks=200, seed=1)
    >>> r.switched_ms > r.shared_ms, r.shared_ms < r.no_sharing_ms
    (True, True)
    >>> r.loss_ms[("q1", "q2", "q3")] < r.loss_ms[("q1",)] < r.loss_ms[()]
    True
    >>> r == simulate(SimConfig(streams=3, queries=3, users=10, operators=15, sharing=0.5), networks=200, seed=1)
    True

**Generation (the paper gives the rules, not the procedure; this is ours).**

1. Each query reads a random subset of 2..S of the S input streams (1 when S = 1); if no
   stream is read by two queries, the second query also reads the first one's first.
2. Each query starts with one *component* per stream it reads: the stream itself.
3. Common prefix: ``round(sharing × operators)`` shared operators. Each is a JOIN with
   probability 1/3 (``SHARED_JOIN_SHARE``). The shared SELECTs come first (join
   push-down: "SELECT and shared SELECT nodes appear before JOIN and shared JOIN
   nodes"), each on a stream or SELECT component that two or more queries hold; then the
   shared JOINs, each of two components that two or more queries hold. A shared
   operator serves a random subset (two or more) of the queries holding its inputs and
   replaces its inputs among their components. A shared JOIN that cannot be made (no
   two components held together) becomes a shared SELECT if one can be made; else the
   common prefix stays smaller and the rest goes to step 4.
4. Exclusive operators: each query gets the JOINs that merge its components into one
   and a final PROJECT, whatever the budget ("the final total number of query operators
   generated could be slightly higher than the initial input parameter"); what remains
   of the budget is SELECTs, one at a time, each for a random query that still has a
   stream or SELECT component to filter. So along every path: SELECTs, then JOINs, then
   one PROJECT.
5. Users: with at least as many users as queries, every query gets one user, the
   others go to queries chosen uniformly; each user is assigned to one query output.

**Cost model choices.** Operators cost ``tuples × per-tuple cost`` when they receive
tuples (the upper bound), nothing when every input edge is switched off. Switches cost
only per SP (0.1 ms): tuples pass them for free, since the paper prices them per SP
("PrSs execute infrequently"). Every ``sp_every`` tuples an SP is injected for each user
into every input stream of the user's query; a switch processes each SP that a stream
upstream of it carries (once: punctuations are aligned at joins), matching or not ("The
PrSs will process all SPs but will only take action for those SPs that match").
*Shared without switches* is the same network with post-filtering only: a filter at each
query output, priced like a terminal switch (per SP). *No sharing* runs, for every
user, a separate copy of the operators serving the user's query, with its own filter.
Losing access does not change the SP traffic (SPs keep coming for every user).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import combinations

from streamwarden.papers.network.dag import Kind, Network, NetworkBuilder
from streamwarden.papers.network.switches import PlacedNetwork, SwitchKind, place_switches


#: Each common-prefix operator is a JOIN with this probability (SELECTs are made first).
SHARED_JOIN_SHARE = 1 / 3


@dataclass(frozen=True)
class CostModel:
    """The paper's constants (§6.1)."""

    select_ms: float = 0.1
    project_ms: float = 0.1
    join_ms: float = 0.3
    aggregate_ms: float = 0.1  # not in the paper (its simulator generates no aggregates)
    sp_ms: float = 0.1
    tuples: int = 1000
    sp_every: int = 100
    #: Which SPs cost a switch time: "all" that reach it (the paper: "PrSs will process all
    #: SPs"), or only "matching" ones, those of its own query (a diagnostic).
    sp_scope: str = "all"

    def __post_init__(self) -> None:
        if self.sp_scope not in ("all", "matching"):
            raise ValueError(f"CostModel.sp_scope is 'all' or 'matching', got {self.sp_scope!r}")

    def per_tuple(self, kind: Kind) -> float:
        return {Kind.SELECT: self.select_ms, Kind.PROJECT: self.project_ms, Kind.JOIN: self.join_ms,
                Kind.AGGREGATE: self.aggregate_ms}[kind]

    @property
    def sp_rounds(self) -> int:
        """How often each user's SPs are injected while ``tuples`` tuples pass."""
        return self.tuples // self.sp_every


@dataclass(frozen=True)
class SimConfig:
    """The simulator's inputs; ``sharing`` is the target share of operators in the common prefix."""

    streams: int = 3
    queries: int = 3
    users: int = 10
    operators: int = 15
    sharing: float = 0.5
    costs: CostModel = field(default_factory=CostModel)

    def __post_init__(self) -> None:
        for name in ("streams", "queries", "users", "operators"):
            if getattr(self, name) < 1:
                raise ValueError(f"SimConfig.{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.sharing <= 1:
            raise ValueError(f"SimConfig.sharing is a fraction in [0, 1], got {self.sharing}")

    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(f"q{i + 1}" for i in range(self.queries))


@dataclass(frozen=True)
class Generated:
    """One random network with its switches and users (query id → user names)."""

    placed: PlacedNetwork
    users: dict[str, tuple[str, ...]]
    streams: dict[str, tuple[str, ...]]  # query id → the input streams it reads

    @property
    def network(self) -> Network:
        return self.placed.network


# -- generation ------------------------------------------------------------------------------------
class _Plan:
    """The network under construction: each query's components (vertex ids) and the SELECT level."""

    def __init__(self, queries: tuple[str, ...], streams: dict[str, list[str]]) -> None:
        self.b = NetworkBuilder()
        self.selectable: set[str] = set()  # stream and SELECT vertices (a SELECT may go on them)
        used = sorted({s for ss in streams.values() for s in ss}, key=lambda s: int(s[1:]))
        src = {s: self.b.source(s) for s in used}
        self.selectable.update(src.values())
        self.comps: dict[str, list[str]] = {q: [src[s] for s in streams[q]] for q in queries}

    def holders(self, vid: str) -> list[str]:
        return [q for q, cs in self.comps.items() if vid in cs]

    def select(self, vid: str, queries: Iterable[str], n: int) -> str:
        new = self.b.select(vid, f"p{n}")
        self.selectable.add(new)
        for q in queries:
            cs = self.comps[q]
            cs[cs.index(vid)] = new
        return new

    def join(self, a: str, c: str, queries: Iterable[str], n: int) -> str:
        new = self.b.join(a, c, f"j{n}")
        for q in queries:
            cs = self.comps[q]
            cs[cs.index(a)] = new
            cs.remove(c)
        return new


def _subset(rng: random.Random, items: list[str]) -> list[str]:
    """A random subset of two or more of ``items`` (which has at least two)."""
    return rng.sample(items, rng.randint(2, len(items)))


def random_network(config: SimConfig, rng: random.Random) -> Generated:
    """One random shared-operator network (see the module notes for the procedure)."""
    queries = config.query_ids
    streams_all = [f"S{i + 1}" for i in range(config.streams)]
    low = min(2, config.streams)
    reads = {q: rng.sample(streams_all, rng.randint(low, config.streams)) for q in queries}
    if len(queries) > 1 and not any(sum(s in r for r in reads.values()) > 1 for s in streams_all):
        reads[queries[1]].append(reads[queries[0]][0])
    plan = _Plan(queries, reads)
    counter = iter(range(1, 10**9))
    shared = round(config.sharing * config.operators)
    shared_joins = sum(rng.random() < SHARED_JOIN_SHARE for _ in range(shared))
    made = _shared_selects(plan, rng, shared - shared_joins, counter)
    for _ in range(shared_joins):
        joins = _shared_joins(plan)
        if joins:
            (a, c), holders = rng.choice(joins)
            plan.join(a, c, _subset(rng, holders), next(counter))
            made += 1
    made += _shared_selects(plan, rng, shared - made, counter)  # joins that could not be made
    # exclusive operators: each query's merging JOINs and final PROJECT first, SELECTs with the rest
    builder = plan.b
    reserved = {q: len(plan.comps[q]) for q in queries}  # joins needed + 1 PROJECT
    left = config.operators - made - sum(reserved.values())
    while left > 0:
        open_ = [q for q in queries if any(c in plan.selectable for c in plan.comps[q])]
        if not open_:
            break
        q = rng.choice(open_)
        plan.select(rng.choice([c for c in plan.comps[q] if c in plan.selectable]), [q], next(counter))
        left -= 1
    for q in queries:
        comps = plan.comps[q]
        while len(comps) > 1:
            a, c = rng.sample(comps, 2)
            plan.join(a, c, [q], next(counter))
        builder.output(q, builder.project(comps[0], f"a{next(counter)}"))
    network = builder.build()
    return Generated(place_switches(network), _assign_users(config, rng),
                     {q: tuple(sorted(r)) for q, r in reads.items()})


def _shared_selects(plan: _Plan, rng: random.Random, count: int, counter: Iterator[int]) -> int:
    """Up to ``count`` shared SELECTs on stream or SELECT components held by two or more queries."""
    made = 0
    for _ in range(count):
        selects = [(v, h) for v in sorted(plan.selectable) if len(h := plan.holders(v)) > 1]
        if not selects:
            break
        vid, holders = rng.choice(selects)
        plan.select(vid, _subset(rng, holders), next(counter))
        made += 1
    return made


def _shared_joins(plan: _Plan) -> list[tuple[tuple[str, str], list[str]]]:
    pairs: dict[tuple[str, str], list[str]] = {}
    for q, comps in plan.comps.items():
        for a, c in combinations(sorted(comps), 2):
            pairs.setdefault((a, c), []).append(q)
    return [(pair, holders) for pair, holders in sorted(pairs.items()) if len(holders) > 1]


def _assign_users(config: SimConfig, rng: random.Random) -> dict[str, tuple[str, ...]]:
    queries = config.query_ids
    users = [f"u{i + 1}" for i in range(config.users)]
    rng.shuffle(users)
    assigned: dict[str, list[str]] = {q: [] for q in queries}
    for i, u in enumerate(users):
        q = queries[i] if i < len(queries) and config.users >= len(queries) else rng.choice(queries)
        assigned[q].append(u)
    return {q: tuple(sorted(us, key=lambda u: int(u[1:]))) for q, us in assigned.items()}


# -- costs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Costs:
    """Upper-bound execution time (ms) of one network for ``tuples`` input tuples."""

    no_sharing_ms: float
    shared_ms: float  # shared, post-filtering only
    switched_ms: float  # shared with privacy switches, full access
    loss_ms: dict[tuple[str, ...], float]  # with switches, when the queries named lost all users
    shut_off: dict[tuple[str, ...], int]  # operators shut off in each of those cases
    sp_ms: float  # of which: SPs at the switches


def network_costs(g: Generated, costs: CostModel, patterns: Iterable[tuple[str, ...]] = ((),)) -> Costs:
    """Price one network: no sharing, shared with post-filtering, shared with switches, and
    shared with switches when the queries of each pattern have lost all their users."""
    net, placed = g.network, g.placed
    op_ms = {v.id: costs.tuples * costs.per_tuple(v.kind) for v in net.operators}
    total_ms = sum(op_ms.values())
    rounds = costs.sp_rounds
    reads_of = {q: frozenset(net.vertex(v).stream for v in net.upstream_sources(net.output(q))) for q in net.queries}

    def sps_at(tail: str, query: str) -> int:
        if costs.sp_scope == "matching":
            return rounds * len(g.users[query])
        upstream = {net.vertex(v).stream for v in net.upstream_sources(tail)}
        return rounds * sum(len(g.users[q]) for q in net.queries if reads_of[q] & upstream)

    sp_site = {s.id: sps_at(s.tail, s.query) * costs.sp_ms for s in placed.switches}
    filters_ms = sum(sp_site[placed.terminal(q).id] for q in net.queries)
    switches_ms = sum(sp_site.values())
    no_sharing = 0.0
    for q in net.queries:
        plan_ms = sum(op_ms[v] for v in net.serving(q) if v in op_ms)
        no_sharing += len(g.users[q]) * (plan_ms + sp_site[placed.terminal(q).id])
    loss: dict[tuple[str, ...], float] = {}
    off: dict[tuple[str, ...], int] = {}
    for lost in patterns:
        shut = placed.shut_off(lost) if lost else frozenset()
        off[lost] = len(shut)
        loss[lost] = total_ms - sum(op_ms[v] for v in shut) + switches_ms
    return Costs(no_sharing, total_ms + filters_ms, total_ms + switches_ms, loss, off, switches_ms)


def loss_patterns(queries: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every set of queries that may lose all their users, the empty one (full access) first."""
    return [tuple(c) for k in range(len(queries) + 1) for c in combinations(queries, k)]


# -- averages --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimulationResult:
    """Averages over the simulated networks (times in ms for ``costs.tuples`` input tuples)."""

    config: SimConfig
    networks: int
    seed: int
    operators: float  # generated operators per network
    common_prefix: float  # of which in the common prefix
    sharing: float  # common prefix / operators, averaged
    switches: dict[str, float]  # per kind, and "total"
    no_sharing_ms: float
    shared_ms: float
    switched_ms: float
    sp_ms: float
    loss_ms: dict[tuple[str, ...], float]
    shut_off: dict[tuple[str, ...], float]
    elapsed_s: float = field(compare=False, default=0.0)

    @property
    def sharing_savings_pct(self) -> float:
        """How much less time the shared network (post-filtering) takes than no sharing."""
        return 100 * (1 - self.shared_ms / self.no_sharing_ms)

    @property
    def switch_overhead_pct(self) -> float:
        """How much more time the switches add to the shared network, with full access."""
        return 100 * (self.switched_ms / self.shared_ms - 1)

    def loss_savings_pct(self, lost: tuple[str, ...]) -> float:
        """Time saved with switches when ``lost`` lost all users, against post-filtering."""
        return 100 * (1 - self.loss_ms[lost] / self.shared_ms)

    def as_dict(self, timing: bool = True) -> dict[str, object]:
        data = asdict(self)
        data["config"] = asdict(self.config)
        data["loss_ms"] = {"+".join(k) or "none": v for k, v in self.loss_ms.items()}
        data["shut_off"] = {"+".join(k) or "none": v for k, v in self.shut_off.items()}
        data.update(sharing_savings_pct=self.sharing_savings_pct, switch_overhead_pct=self.switch_overhead_pct,
                    loss_savings_pct={"+".join(k) or "none": self.loss_savings_pct(k) for k in self.loss_ms})
        if not timing:
            data.pop("elapsed_s")
        return data


def simulate(config: SimConfig, networks: int = 10_000, seed: int = 0, *, patterns: bool = True) -> SimulationResult:
    """Average costs over ``networks`` random networks from one seeded generator. With
    ``patterns``, every pattern of access loss is priced too (else only full access)."""
    if networks < 1:
        raise ValueError(f"simulate needs at least one network, got {networks}")
    began = time.perf_counter()
    rng = random.Random(seed)
    cases = loss_patterns(config.query_ids) if patterns else [()]
    sums = dict.fromkeys(("operators", "cp", "sharing", "no", "shared", "switched", "sp"), 0.0)
    kinds = {k.value: 0.0 for k in SwitchKind}
    loss = dict.fromkeys(cases, 0.0)
    off = dict.fromkeys(cases, 0.0)
    for _ in range(networks):
        g = random_network(config, rng)
        c = network_costs(g, config.costs, cases)
        ops, cp = len(g.network.operators), len(g.network.common_prefix)
        for key, value in (("operators", ops), ("cp", cp), ("sharing", cp / ops), ("no", c.no_sharing_ms),
                           ("shared", c.shared_ms), ("switched", c.switched_ms), ("sp", c.sp_ms)):
            sums[key] += value
        for s in g.placed.switches:
            kinds[s.kind.value] += 1
        for k in cases:
            loss[k] += c.loss_ms[k]
            off[k] += c.shut_off[k]
    mean = {k: v / networks for k, v in sums.items()}
    per_kind = {k: v / networks for k, v in kinds.items()}
    per_kind["total"] = sum(per_kind.values())
    return SimulationResult(config, networks, seed, mean["operators"], mean["cp"], mean["sharing"], per_kind,
                            mean["no"], mean["shared"], mean["switched"], mean["sp"],
                            {k: v / networks for k, v in loss.items()}, {k: v / networks for k, v in off.items()},
                            time.perf_counter() - began)

