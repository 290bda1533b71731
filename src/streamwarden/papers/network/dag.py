"""Shared-operator networks (Zaki et al., Definition 1) as immutable values.

A network ``N = (V, E, L)`` interleaves the execution of a group of continuous queries:
one vertex per operator (SELECT, PROJECT, JOIN, AGGREGATE) with its label (operator and
predicate text), an edge ``u → v`` when ``v`` uses the results of ``u``, and the input
streams as SOURCE vertices. Every vertex knows the queries it serves (those whose output
it feeds); the operators serving more than one query are the *common prefix*.

    >>> b = NetworkBuilder()
    >>> s1, s2 = b.source("Stream1"), b.source("Stream2")
    >>> speed = b.select(s2, "s2.speed < 30")
    >>> j = b.join(s1, speed, "s1.location = s2.location")
    >>> q1 = b.project(j, "s1.streamid, s1.heartRate")
    >>> q2 = b.select(j, "s1.heartRate > 100")
    >>> net = b.output("q1", q1).output("q2", q2).build()
    >>> net.topological_order()
    ('s1', 's2', 'v1', 'v2', 'v3', 'v4')
    >>> sorted(net.common_prefix), net.serving("q1")
    (['v1', 'v2'], ('s1', 's2', 'v1', 'v2', 'v3'))
    >>> net.vertex("v2").label, sorted(net.vertex("v2").queries)
    ('⋈ s1.location = s2.location', ['q1', 'q2'])

``to_dot()`` writes Graphviz DOT text (no Graphviz needed); :func:`render` turns it into
PNG or SVG with the ``dot`` binary when it is installed.

**Common prefix.** Definition 1 annotates ``v`` when "the results of ``o_v`` are used by
more than one operator belonging to different queries". We read *used* transitively:
``v`` is common-prefix when its results reach the outputs of two or more queries, i.e.
it serves two or more queries. So a selection whose only consumer is a join shared by
Q1 and Q2 is common-prefix too, as the whole shared zone is highlighted in the paper's
Fig. 2 and Fig. 6. A vertex that is one query's output and also feeds another query's
operator serves both, so it is common-prefix. Input streams are not operators and are
never common-prefix.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Protocol

from streamwarden.errors import StreamwardenError


class NetworkError(StreamwardenError):
    """A shared-operator network is malformed (names the vertex or query concerned)."""


class GraphvizNotFound(StreamwardenError):
    """Rendering a network to PNG/SVG needs Graphviz's ``dot`` binary, which is missing."""


class Kind(str, Enum):
    """What a vertex does. SOURCE is an input stream, the others are operators."""

    SOURCE = "source"
    SELECT = "select"
    PROJECT = "project"
    JOIN = "join"
    AGGREGATE = "aggregate"

    @property
    def symbol(self) -> str:
        return _SYMBOLS[self]

    @property
    def arity(self) -> int:
        """How many inputs a vertex of this kind takes."""
        return {Kind.SOURCE: 0, Kind.JOIN: 2}.get(self, 1)


_SYMBOLS = {Kind.SOURCE: "", Kind.SELECT: "σ", Kind.PROJECT: "π", Kind.JOIN: "⋈", Kind.AGGREGATE: "γ"}


@dataclass(frozen=True)
class Vertex:
    """One operator (or input stream) of a network.

    ``label`` is the processing done, ``L(v)``: the operator symbol and its predicate text
    (``"σ s2.speed < 30"``), or the stream name for a SOURCE. ``inputs`` are the ids of the
    vertices whose results it uses, in order (left, right for a JOIN).
    """

    id: str
    kind: Kind
    label: str
    inputs: tuple[str, ...] = ()
    queries: frozenset[str] = frozenset()

    @property
    def is_operator(self) -> bool:
        return self.kind is not Kind.SOURCE

    @property
    def stream(self) -> str:
        """The stream name of a SOURCE vertex."""
        if self.kind is not Kind.SOURCE:
            raise NetworkError(f"vertex {self.id} is a {self.kind.value} operator, not an input stream")
        return self.label


@dataclass(frozen=True)
class Edge:
    """``tail → head``: ``head`` uses the results of ``tail``."""

    tail: str
    head: str


class DrawableSwitch(Protocol):
    """What :meth:`Network.to_dot` needs of a placed switch (see ``switches.SwitchSite``)."""

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> Enum: ...

    @property
    def query(self) -> str: ...

    @property
    def tail(self) -> str: ...

    @property
    def head(self) -> str | None: ...


@dataclass(frozen=True)
class Network:
    """An interleaved execution plan for a group of queries (Definition 1).

    ``vertices`` may come in any order; ``outputs`` maps each query id to the vertex that
    produces its result. Build one with :class:`NetworkBuilder` or :meth:`of`, which fill
    in each vertex's ``queries``; the constructor checks that they are consistent.
    """

    vertices: tuple[Vertex, ...]
    outputs: tuple[tuple[str, str], ...]
    _index: dict[str, Vertex] = field(init=False, repr=False, compare=False, hash=False)
    _topo: tuple[str, ...] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", _index_of(self.vertices))
        object.__setattr__(self, "_topo", _check_shape(self))
        derived = _served(self)
        for v in self.vertices:
            if v.queries != derived[v.id]:
                raise NetworkError(f"vertex {v.id} says it serves {sorted(v.queries)} but feeds the outputs of "
                                   f"{sorted(derived[v.id])}")
            if v.is_operator and not v.queries:
                raise NetworkError(f"operator {v.id} ({v.label}) feeds no query output")

    @classmethod
    def of(cls, vertices: Iterable[Vertex], outputs: Mapping[str, str]) -> "Network":
        """A network whose vertices' ``queries`` are computed from ``outputs`` (any given are ignored)."""
        plain = tuple(Vertex(v.id, v.kind, v.label, tuple(v.inputs)) for v in vertices)
        draft = _Draft(plain, tuple(sorted(outputs.items())))
        served = _served(draft)
        for v in plain:
            if v.is_operator and not served[v.id]:
                raise NetworkError(f"operator {v.id} ({v.label}) feeds no query output")
        # Checked above: build without checking again (the simulator builds many networks).
        net = cls.__new__(cls)
        full = tuple(Vertex(v.id, v.kind, v.label, v.inputs, served[v.id]) for v in plain)
        object.__setattr__(net, "vertices", full)
        object.__setattr__(net, "outputs", draft.outputs)
        object.__setattr__(net, "_index", {v.id: v for v in full})
        object.__setattr__(net, "_topo", draft.topo)
        return net

    # -- lookups ---------------------------------------------------------------------------------
    def vertex(self, vertex_id: str) -> Vertex:
        try:
            return self._index[vertex_id]
        except KeyError:
            raise NetworkError(f"no vertex {vertex_id!r} in the network "
                               f"(vertices: {', '.join(sorted(self._index))})") from None

    def __contains__(self, vertex_id: object) -> bool:
        return vertex_id in self._index

    @cached_property
    def queries(self) -> tuple[str, ...]:
        """The query ids, sorted."""
        return tuple(sorted(q for q, _ in self.outputs))

    def output(self, query: str) -> str:
        """The id of the vertex producing ``query``'s result."""
        for q, v in self.outputs:
            if q == query:
                return v
        raise NetworkError(f"no query {query!r} in the network (queries: {', '.join(self.queries)})")

    @cached_property
    def edges(self) -> tuple[Edge, ...]:
        """Every ``u → v`` with ``v`` using ``u``'s results, in topological order of ``v``."""
        return tuple(Edge(u, v) for v in self.topological_order() for u in self.vertex(v).inputs)

    @cached_property
    def _consumers(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {v.id: [] for v in self.vertices}
        for e in self.edges:
            out[e.tail].append(e.head)
        return {k: tuple(dict.fromkeys(v)) for k, v in out.items()}

    def consumers(self, vertex_id: str) -> tuple[str, ...]:
        """The vertices using ``vertex_id``'s results (query outputs not included)."""
        self.vertex(vertex_id)
        return self._consumers[vertex_id]

    @cached_property
    def sources(self) -> tuple[Vertex, ...]:
        return tuple(self.vertex(v) for v in self.topological_order() if not self.vertex(v).is_operator)

    @cached_property
    def operators(self) -> tuple[Vertex, ...]:
        return tuple(self.vertex(v) for v in self.topological_order() if self.vertex(v).is_operator)

    @cached_property
    def common_prefix(self) -> frozenset[str]:
        """Operators serving more than one query (Definition 1's "Common-prefix")."""
        return frozenset(v.id for v in self.vertices if v.is_operator and len(v.queries) > 1)

    def topological_order(self) -> tuple[str, ...]:
        """Vertex ids, every vertex after its inputs; ties broken by id (sources first)."""
        return self._topo

    def serving(self, query: str) -> tuple[str, ...]:
        """The vertices (input streams included) serving ``query``, in topological order."""
        self.output(query)
        return tuple(v for v in self.topological_order() if query in self.vertex(v).queries)

    def upstream_sources(self, vertex_id: str) -> frozenset[str]:
        """The SOURCE vertices whose tuples can reach ``vertex_id`` (itself if it is one)."""
        self.vertex(vertex_id)
        return self._upstream[vertex_id]

    @cached_property
    def _upstream(self) -> dict[str, frozenset[str]]:
        up: dict[str, frozenset[str]] = {}
        for vid in self.topological_order():
            v = self.vertex(vid)
            up[vid] = frozenset([vid]) if not v.is_operator else frozenset().union(*(up[i] for i in v.inputs))
        return up

    def exclusive(self, query: str) -> tuple[str, ...]:
        """The operators serving ``query`` and no other query."""
        return tuple(v for v in self.serving(query) if self.vertex(v).is_operator and len(self.vertex(v).queries) == 1)

    # -- drawing ---------------------------------------------------------------------------------
    def to_dot(self, switches: Sequence[DrawableSwitch] = (), *, title: str | None = None) -> str:
        """Graphviz DOT text: streams at the bottom, query outputs at the top, the common prefix
        in a dashed, shaded cluster, and each switch drawn as its own node on its edge
        (initial: blue triangle, in-network: orange diamond, terminal: green octagon)."""
        return _dot(self, switches, title)

    def render(self, path: str | Path, switches: Sequence[DrawableSwitch] = (), *, title: str | None = None,
               fmt: str | None = None) -> Path:
        """Draw the network into a PNG or SVG file with Graphviz (see :func:`render`)."""
        return render(self.to_dot(switches, title=title), path, fmt)


@dataclass(frozen=True)
class _Draft:
    """A network before its vertices' ``queries`` are known (for :meth:`Network.of`)."""

    vertices: tuple[Vertex, ...]
    outputs: tuple[tuple[str, str], ...]
    _index: dict[str, Vertex] = field(init=False, repr=False, compare=False)
    topo: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", _index_of(self.vertices))
        object.__setattr__(self, "topo", _check_shape(self))


def _index_of(vertices: Iterable[Vertex]) -> dict[str, Vertex]:
    """The vertices by id (raises on a repeated id)."""
    index: dict[str, Vertex] = {}
    for v in vertices:
        if v.id in index:
            raise NetworkError(f"two vertices have the id {v.id!r}")
        index[v.id] = v
    return index


def _check_shape(net: Network | _Draft) -> tuple[str, ...]:
    """Check arities, references and outputs; the topological order (raises on a cycle)."""
    index: dict[str, Vertex] = net._index
    for v in net.vertices:
        if not v.id:
            raise NetworkError("a vertex has an empty id")
        if len(v.inputs) != v.kind.arity:
            raise NetworkError(f"vertex {v.id} ({v.kind.value}) takes {v.kind.arity} input(s), got {len(v.inputs)}")
        for i in v.inputs:
            if i not in index:
                raise NetworkError(f"vertex {v.id} uses the results of {i!r}, which is not in the network")
        if v.kind is Kind.JOIN and v.inputs[0] == v.inputs[1]:
            raise NetworkError(f"join {v.id} takes two different inputs, got {v.inputs[0]} twice")
    seen_queries: set[str] = set()
    for q, vid in net.outputs:
        if q in seen_queries:
            raise NetworkError(f"query {q!r} has two outputs")
        seen_queries.add(q)
        if vid not in index:
            raise NetworkError(f"the output of query {q!r} is {vid!r}, which is not in the network")
    return _topological(net.vertices)


def _key(v: Vertex) -> tuple[int, int, str]:
    digits = "".join(ch for ch in v.id if ch.isdigit())
    return (0 if v.kind is Kind.SOURCE else 1, int(digits) if digits else -1, v.id)


def _topological(vertices: Sequence[Vertex]) -> tuple[str, ...]:
    """Kahn's algorithm, smallest (sources first, then by id) ready vertex first."""
    import heapq

    key = {v.id: _key(v) for v in vertices}
    waiting = {v.id: len(set(v.inputs)) for v in vertices}
    users: dict[str, list[str]] = {v.id: [] for v in vertices}
    for v in vertices:
        for i in set(v.inputs):
            users[i].append(v.id)
    ready = [(key[v.id], v.id) for v in vertices if waiting[v.id] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, vid = heapq.heappop(ready)
        order.append(vid)
        for u in users[vid]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (key[u], u))
    if len(order) != len(vertices):
        stuck = sorted(v for v, n in waiting.items() if n > 0)
        raise NetworkError(f"the network has a cycle through {', '.join(stuck)}")
    return tuple(order)


def _served(net: Network | _Draft) -> dict[str, frozenset[str]]:
    """Each vertex's queries: those whose output it reaches (backwards from the outputs)."""
    index: dict[str, Vertex] = net._index
    served: dict[str, set[str]] = {v.id: set() for v in net.vertices}
    for q, out in net.outputs:
        stack = [out]
        while stack:
            vid = stack.pop()
            if q in served[vid]:
                continue
            served[vid].add(q)
            stack.extend(index[vid].inputs)
    return {k: frozenset(v) for k, v in served.items()}


class NetworkBuilder:
    """Build a :class:`Network` step by step; ids are ``s1, s2, …`` for input streams and
    ``v1, v2, …`` for operators, in the order they are added (stable across runs)."""

    def __init__(self) -> None:
        self._vertices: list[Vertex] = []
        self._outputs: dict[str, str] = {}
        self._streams: dict[str, str] = {}
        self._next = {"s": 1, "v": 1}

    def _add(self, prefix: str, kind: Kind, label: str, inputs: tuple[str, ...]) -> str:
        vid = f"{prefix}{self._next[prefix]}"
        self._next[prefix] += 1
        known = {v.id for v in self._vertices}
        for i in inputs:
            if i not in known:
                raise NetworkError(f"{kind.value} {label!r} uses {i!r}, which has not been added yet")
        self._vertices.append(Vertex(vid, kind, label, inputs))
        return vid

    def source(self, stream: str) -> str:
        """The vertex of input stream ``stream`` (the same id when asked twice)."""
        if stream not in self._streams:
            self._streams[stream] = self._add("s", Kind.SOURCE, stream, ())
        return self._streams[stream]

    def select(self, input_id: str, predicate: str) -> str:
        return self._add("v", Kind.SELECT, f"σ {predicate}", (input_id,))

    def project(self, input_id: str, attributes: str) -> str:
        return self._add("v", Kind.PROJECT, f"π {attributes}", (input_id,))

    def aggregate(self, input_id: str, spec: str) -> str:
        return self._add("v", Kind.AGGREGATE, f"γ {spec}", (input_id,))

    def join(self, left: str, right: str, predicate: str) -> str:
        return self._add("v", Kind.JOIN, f"⋈ {predicate}", (left, right))

    def output(self, query: str, vertex_id: str) -> "NetworkBuilder":
        if query in self._outputs:
            raise NetworkError(f"query {query!r} already has an output ({self._outputs[query]})")
        self._outputs[query] = vertex_id
        return self

    def build(self) -> Network:
        return Network.of(self._vertices, self._outputs)


# -- DOT ------------------------------------------------------------------------------------------
_SWITCH_STYLE = {
    "initial": 'shape=invtriangle, style=filled, fillcolor="#9ecae1"',
    "in-network": 'shape=diamond, style=filled, fillcolor="#fdae6b"',
    "terminal": 'shape=doubleoctagon, style=filled, fillcolor="#a1d99b"',
}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot(net: Network, switches: Sequence[DrawableSwitch], title: str | None) -> str:
    lines = ["digraph network {", "  rankdir=BT;", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    if title:
        lines.append(f"  label={_quote(title)}; labelloc=t;")
    cp = net.common_prefix
    if cp:
        lines += ["  subgraph cluster_common_prefix {", '    label="common prefix"; style="dashed,filled"; '
                  'fillcolor="#fff7d6"; color="#b8860b";']
        lines += [f"    {_quote(v)};" for v in net.topological_order() if v in cp]
        lines.append("  }")
    for vid in net.topological_order():
        v = net.vertex(vid)
        if v.is_operator:
            qs = ",".join(sorted(v.queries))
            label = _quote(f'{vid}: {v.label}' + chr(10) + '{' + qs + '}')
            lines.append(f"  {_quote(vid)} [shape=box, label={label}];")
        else:
            lines.append(f"  {_quote(vid)} [shape=cylinder, label={_quote(f'{vid}: {v.label}')}];")
    for q, _vid in net.outputs:
        lines.append(f"  {_quote('out:' + q)} [shape=plaintext, label={_quote(q)}];")
    on_edge: dict[tuple[str, str], list[DrawableSwitch]] = {}
    for s in switches:
        head = s.head if s.head is not None else "out:" + s.query
        on_edge.setdefault((s.tail, head), []).append(s)
    drawn: set[tuple[str, str]] = set()

    def chain(tail: str, head: str) -> None:
        prev = tail
        for s in on_edge.get((tail, head), []):
            kind = str(getattr(s.kind, "value", s.kind))
            label = _quote(kind + chr(10) + s.query)
            lines.append(f"  {_quote(s.id)} [{_SWITCH_STYLE.get(kind, 'shape=box')}, label={label}];")
            lines.append(f"  {_quote(prev)} -> {_quote(s.id)};")
            prev = s.id
        lines.append(f"  {_quote(prev)} -> {_quote(head)};")
        drawn.add((tail, head))

    for e in net.edges:
        if (e.tail, e.head) not in drawn:
            chain(e.tail, e.head)
    for q, vid in net.outputs:
        chain(vid, "out:" + q)
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_text: str, path: str | Path, fmt: str | None = None) -> Path:
    """Render DOT text to ``path`` as PNG or SVG (``fmt``, else the file suffix) with Graphviz."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in ("png", "svg"):
        raise NetworkError(f"cannot render a network as {fmt or 'a file without suffix'!r}: use .png or .svg")
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizNotFound(f"rendering {path.name} needs Graphviz's `dot` binary, which is not on PATH; install "
                               "Graphviz (e.g. `apt-get install graphviz`), or write the DOT text with to_dot()")
    done = subprocess.run([dot, f"-T{fmt}", "-o", str(path)], input=dot_text.encode(), capture_output=True)
    if done.returncode != 0:
        raise NetworkError(f"Graphviz failed to render {path}: {done.stderr.decode(errors='replace').strip()}")
    return path
