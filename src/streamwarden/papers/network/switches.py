"""Privacy switches (Zaki et al. §5): where they go (Algorithm 2).

:func:`place_switches` puts a *terminal* switch at each query output, *in-network*
switches on the outgoing edges of the last common-prefix operators of each query's
branch, and *initial* switches on the input streams of branches that no common-prefix
operator feeds. ``explain --network`` draws them. What the switches do (Algorithm 1: the
stateful switch objects, run one event at a time) is the tests' model of the paper,
``tests/oracles/switches.py``.

    >>> from streamwarden.papers.network.dag import NetworkBuilder
    >>> b = NetworkBuilder()
    >>> s1, s2 = b.source("Stream1"), b.source("Stream2")
    >>> shared = b.select(s1, "s1.timestamp < 7pm")
    >>> j = b.join(shared, b.select(s2, "s2.speed < 30"), "s1.location = s2.location")
    >>> placed = place_switches(b.output("q1", j).output("q2", b.select(shared, "s1.heartRate > 100")).build())
    >>> [s.id for s in placed.switches]
    ['terminal:q1', 'in-network:q1:v1->v3', 'initial:q1:s2->v2', 'terminal:q2', 'in-network:q2:v1->v4']
    >>> sorted(placed.shut_off({"q1"}))  # all users of q1 lost access: its branch does no work
    ['v2', 'v3']

**Ambiguities of the paper and what we chose.**

* *Where an initial switch goes.* Algorithm 2 inserts it "at the input stream" when the
  backward search from a query's output reaches a vertex without inputs. A stream can
  also feed other queries, so the switch sits on the edge from the stream into that
  query's branch (``initial:q:s3->v5``), never on the stream itself.
* *One switch per edge and query.* The pseudo-code's DFS has no visited set; on a
  diamond it would visit a vertex twice. We walk each vertex once but record a switch
  per (query, edge), so a common-prefix vertex used by two operators of one query gets
  two in-network switches (one per outgoing edge), never two on the same edge.
* *A query whose output is itself common-prefix* (it also feeds another query) gets
  its in-network switch on the edge to its output, just before its terminal switch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path

from streamwarden.errors import StreamwardenError
from streamwarden.papers.network.dag import Network, Vertex


class SwitchError(StreamwardenError):
    """A privacy switch got something it cannot handle; the message names the switch."""


# -- placement (Algorithm 2) -------------------------------------------------------------------
class SwitchKind(str, Enum):
    INITIAL = "initial"
    IN_NETWORK = "in-network"
    TERMINAL = "terminal"


_KIND_ORDER = {SwitchKind.TERMINAL: 0, SwitchKind.IN_NETWORK: 1, SwitchKind.INITIAL: 2}


@dataclass(frozen=True)
class SwitchSite:
    """Where one switch sits: on the edge ``tail → head`` of the network, for ``query``.
    ``head`` is None for the edge from ``tail`` to the query's output; a terminal switch
    is always there, ``tail`` being the query's output vertex."""

    id: str
    kind: SwitchKind
    query: str
    tail: str
    head: str | None

    @staticmethod
    def make(kind: SwitchKind, query: str, tail: str, head: str | None) -> "SwitchSite":
        sid = f"terminal:{query}" if kind is SwitchKind.TERMINAL else f"{kind.value}:{query}:{tail}->{head or 'output'}"
        return SwitchSite(sid, kind, query, tail, head)


@dataclass(frozen=True)
class PlacedNetwork:
    """A network with its privacy switches (Fig. 6)."""

    network: Network
    switches: tuple[SwitchSite, ...]
    _gates: dict[tuple[str, str | None, str | None], SwitchSite] = field(init=False, repr=False, compare=False,
                                                                          hash=False)

    def __post_init__(self) -> None:
        gates: dict[tuple[str, str | None, str | None], SwitchSite] = {}
        ids: set[str] = set()
        for s in self.switches:
            if s.id in ids:
                raise SwitchError(f"two switches have the id {s.id!r}")
            ids.add(s.id)
            if s.kind is SwitchKind.TERMINAL:
                continue
            key = (s.tail, s.head, s.query if s.head is None else None)
            if key in gates:
                raise SwitchError(f"switches {gates[key].id} and {s.id} sit on the same edge")
            gates[key] = s
        object.__setattr__(self, "_gates", gates)

    def switches_for(self, query: str) -> tuple[SwitchSite, ...]:
        self.network.output(query)
        return tuple(s for s in self.switches if s.query == query)

    def terminal(self, query: str) -> SwitchSite:
        return next(s for s in self.switches_for(query) if s.kind is SwitchKind.TERMINAL)

    def gate(self, tail: str, head: str | None, query: str | None = None) -> SwitchSite | None:
        """The initial or in-network switch on ``tail → head`` (``head`` None: to ``query``'s output)."""
        return self._gates.get((tail, head, query if head is None else None))

    def count(self, kind: SwitchKind) -> int:
        return sum(s.kind is kind for s in self.switches)

    def upstream_sources(self, site: SwitchSite) -> frozenset[str]:
        """The input streams whose SPs reach ``site`` (those upstream of its edge)."""
        return self.network.upstream_sources(site.tail)

    def active_vertices(self, open_queries: Iterable[str]) -> frozenset[str]:
        """The vertices that receive tuples when the queries in ``open_queries`` have at least
        one user with access (their switches on) and every other query has none (off)."""
        return self._active(frozenset(open_queries))

    def shut_off(self, lost_queries: Iterable[str]) -> frozenset[str]:
        """The operators that do no work when every user of ``lost_queries`` lost access."""
        lost = frozenset(lost_queries)
        for q in lost:
            self.network.output(q)
        active = self._active(frozenset(self.network.queries) - lost)
        return frozenset(v.id for v in self.network.operators if v.id not in active)

    def _active(self, open_queries: frozenset[str]) -> frozenset[str]:
        active: set[str] = set()
        for vid, inputs in self._plan:
            if not inputs:
                active.add(vid)
                continue
            for tail, gate in inputs:
                if tail in active and (gate is None or gate in open_queries):
                    active.add(vid)
                    break
        return frozenset(active)

    @cached_property
    def _plan(self) -> tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...]:
        """Each vertex in topological order with its inputs and the query gating each input edge."""
        net, gates = self.network, self._gates
        out = []
        for vid in net.topological_order():
            inputs = tuple((i, g.query if (g := gates.get((i, vid, None))) else None) for i in net.vertex(vid).inputs)
            out.append((vid, inputs))
        return tuple(out)

    def to_dot(self, *, title: str | None = None) -> str:
        return self.network.to_dot(self.switches, title=title)

    def render(self, path: str | Path, *, title: str | None = None, fmt: str | None = None) -> Path:
        """Draw the network and its switches into a PNG or SVG file (needs Graphviz's ``dot``)."""
        return self.network.render(path, self.switches, title=title, fmt=fmt)


def place_switches(network: Network) -> PlacedNetwork:
    """Algorithm 2: for each query, walk its branch backwards from the output (DFS) down to
    the common-prefix operators (in-network switch on the edge leaving each) or the input
    streams (initial switch on the edge leaving each); a terminal switch at the output."""
    cp = network.common_prefix
    position = {vid: i for i, vid in enumerate(network.topological_order())}
    sites: list[SwitchSite] = []
    for q in network.queries:
        found = [SwitchSite.make(SwitchKind.TERMINAL, q, network.output(q), None)]
        stack: list[tuple[str, str | None]] = [(network.output(q), None)]  # (vertex, the edge's head)
        expanded: set[str] = set()
        while stack:
            vid, head = stack.pop()
            v: Vertex = network.vertex(vid)
            if vid in cp:
                found.append(SwitchSite.make(SwitchKind.IN_NETWORK, q, vid, head))
            elif not v.inputs:
                found.append(SwitchSite.make(SwitchKind.INITIAL, q, vid, head))
            elif vid not in expanded:
                expanded.add(vid)
                stack.extend((i, vid) for i in reversed(v.inputs))
        unique = {s.id: s for s in found}
        sites += sorted(unique.values(), key=lambda s: (_KIND_ORDER[s.kind], position[s.tail],
                                                        len(position) if s.head is None else position[s.head]))
    return PlacedNetwork(network, tuple(sites))
