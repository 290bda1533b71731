"""A reference executor for switched networks: tuples and SPs in, per-user results out (a test oracle).

Engine-independent and small, for tests and as the model an engine must match. Input
is one sequence of events, :class:`Arrival` (a tuple on an input stream) and
:class:`~oracles.switches.SP`, processed one at a time in the given order
(:func:`in_order` sorts by timestamp, SPs before tuples of the same time, so an access
change at ``t`` applies to tuples at ``t``). Each tuple is pushed through the network at
once; each operator processes the tuples that reach it (counted in ``invocations``),
every initial and in-network switch decides whether a tuple goes on, and the terminal
switch of each query hands each result row to its users.

What operators compute is left to a :class:`Semantics`; :class:`HashSemantics` gives
every operator a deterministic pseudo-random behaviour derived from its label. JOINs
pair rows whose timestamps are at most ``window`` apart (the pair's timestamp is the
later one), AGGREGATEs see the rows of ``[ts - window, ts)``.

    >>> from streamwarden.papers.network.dag import NetworkBuilder
    >>> from streamwarden.papers.network.switches import place_switches
    >>> from oracles.switches import SP
    >>> b = NetworkBuilder()
    >>> s = b.source("S")
    >>> net = b.output("q1", b.project(s, "a")).output("q2", b.project(s, "b")).build()
    >>> runner = NetworkRunner(place_switches(net)).run(in_order([
    ...     Arrival("S", Row(1, "x")), SP("q1", "ann", "+", 2), Arrival("S", Row(2, "y"))]))
    >>> {k: [r.ts for r in rows] for k, rows in runner.delivered.items()}
    {('q1', 'ann'): [2]}
    >>> dict(runner.invocations)  # q2 has no user: its branch never ran
    {'v1': 1}

**SPs.** The authorization server injects an SP of query q into every input stream of q
(the mapping m of §4.3). Operators with two inputs forward an SP once (punctuations
are aligned), so every switch processes each SP that some stream upstream of it
carries exactly once; the runner hands it to those switches directly.

**Limitation (as in the paper).** A switch that is off discards tuples. A JOIN or
AGGREGATE behind it then misses those tuples when access comes back: with ``window > 0``
a pair whose earlier tuple arrived while every user of the query had lost access is
never produced, though the user may see the pair's (later) time. No result ever
reaches a user without access; with ``window = 0`` (or while a query keeps at least one
user with access) the results are exactly those of the query run alone, filtered by
each user's access at each row's time.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, Union

from streamwarden.papers.network.dag import Kind, NetworkError, Vertex
from streamwarden.papers.network.switches import PlacedNetwork

from oracles.switches import SP, SwitchState, TerminalSwitch, build_switches


@dataclass(frozen=True)
class Row:
    """A tuple: its event time and its (hashable) values."""

    ts: float
    data: Hashable


@dataclass(frozen=True)
class Arrival:
    """A tuple arriving on input stream ``stream``."""

    stream: str
    row: Row


Event = Union[Arrival, SP]


def in_order(events: Iterable[Event]) -> list[Event]:
    """Events by timestamp, SPs before tuples of the same timestamp, otherwise as given."""
    return sorted(events, key=lambda e: (e.ts, 0) if isinstance(e, SP) else (e.row.ts, 1))


class Semantics(Protocol):
    """What the operators compute."""

    @property
    def window(self) -> float:  # read-only, so a frozen dataclass provides it
        ...

    def select(self, vertex: Vertex, row: Row) -> bool: ...

    def project(self, vertex: Vertex, row: Row) -> Row: ...

    def join(self, vertex: Vertex, left: Row, right: Row) -> Row | None: ...

    def aggregate(self, vertex: Vertex, row: Row, earlier: Sequence[Row]) -> Row: ...


def _hash(*parts: object) -> int:
    return zlib.crc32("|".join(repr(p) for p in parts).encode())


@dataclass(frozen=True)
class HashSemantics:
    """Deterministic stand-ins for real predicates: a SELECT keeps about 2/3 of the rows, a
    JOIN matches about 1/2 of the pairs within ``window``; PROJECT and AGGREGATE tag the row."""

    window: float = 0

    def select(self, vertex: Vertex, row: Row) -> bool:
        return _hash(vertex.label, row.data) % 3 != 0

    def project(self, vertex: Vertex, row: Row) -> Row:
        return Row(row.ts, (vertex.label, row.data))

    def join(self, vertex: Vertex, left: Row, right: Row) -> Row | None:
        if abs(left.ts - right.ts) > self.window or _hash(vertex.label, left.data, right.data) % 2:
            return None
        return Row(max(left.ts, right.ts), (left.data, right.data))

    def aggregate(self, vertex: Vertex, row: Row, earlier: Sequence[Row]) -> Row:
        return Row(row.ts, (vertex.label, row.data, len(earlier)))


class NetworkRunner:
    """Runs a :class:`PlacedNetwork`; ``resume`` maps switch ids to snapshots."""

    def __init__(self, placed: PlacedNetwork, semantics: Semantics | None = None, *,
                 resume: dict[str, SwitchState] | None = None) -> None:
        self.placed = placed
        self.network = placed.network
        self.semantics: Semantics = semantics if semantics is not None else HashSemantics()
        self.switches = build_switches(placed, resume)
        self.delivered: dict[tuple[str, str], list[Row]] = defaultdict(list)
        self.invocations: Counter[str] = Counter()
        self._sources = {v.stream: v.id for v in self.network.sources}
        self._outputs: dict[str, list[tuple[str, TerminalSwitch]]] = defaultdict(list)  # vertex → (query, terminal)
        for q, vid in self.network.outputs:
            terminal = self.switches[placed.terminal(q).id]
            assert isinstance(terminal, TerminalSwitch)
            self._outputs[vid].append((q, terminal))
        self._state: dict[str, list[list[Row]]] = {v.id: [[], []] for v in self.network.operators}
        self._sp_targets = {q: self._reached_by(q) for q in self.network.queries}

    def _reached_by(self, query: str) -> list[str]:
        streams = frozenset(v for v in self.network.serving(query) if not self.network.vertex(v).is_operator)
        return [s.id for s in self.placed.switches if self.placed.upstream_sources(s) & streams]

    # -- input ---------------------------------------------------------------------------------------
    def run(self, events: Iterable[Event]) -> "NetworkRunner":
        for event in events:
            self.feed(event)
        return self

    def feed(self, event: Event) -> None:
        if isinstance(event, SP):
            if event.query not in self._sp_targets:
                raise NetworkError(f"SP for query {event.query!r}, which this network does not run "
                                   f"(queries: {', '.join(self.network.queries)})")
            for sid in self._sp_targets[event.query]:
                self.switches[sid].on_sp(event)
        elif isinstance(event, Arrival):
            if event.stream not in self._sources:
                raise NetworkError(f"tuple on stream {event.stream!r}, which feeds no query of this network "
                                   f"(streams: {', '.join(sorted(self._sources))})")
            self._emit(self._sources[event.stream], event.row)
        else:
            raise NetworkError(f"expected an Arrival or an SP, got {type(event).__name__}")

    def snapshot(self) -> dict[str, SwitchState]:
        """Every switch's state (operator state is not part of it)."""
        return {sid: sw.snapshot() for sid, sw in self.switches.items()}

    # -- propagation ---------------------------------------------------------------------------------
    def _emit(self, vid: str, row: Row) -> None:
        for consumer in self.network.consumers(vid):
            if self._passes(vid, consumer, None, row):
                self._process(consumer, vid, row)
        for q, terminal in self._outputs.get(vid, ()):
            if self._passes(vid, None, q, row):
                for user in terminal.on_tuple(row.ts):
                    self.delivered[(q, user)].append(row)

    def _passes(self, tail: str, head: str | None, query: str | None, row: Row) -> bool:
        site = self.placed.gate(tail, head, query)
        return site is None or bool(self.switches[site.id].on_tuple(row.ts))

    def _process(self, vid: str, came_from: str, row: Row) -> None:
        self.invocations[vid] += 1
        v = self.network.vertex(vid)
        sem = self.semantics
        if v.kind is Kind.SELECT:
            if sem.select(v, row):
                self._emit(vid, row)
        elif v.kind is Kind.PROJECT:
            self._emit(vid, sem.project(v, row))
        elif v.kind is Kind.AGGREGATE:
            seen = self._state[vid][0]
            earlier = [r for r in seen if row.ts - sem.window <= r.ts < row.ts]
            seen.append(row)
            self._emit(vid, sem.aggregate(v, row, earlier))
        elif v.kind is Kind.JOIN:
            side = 0 if came_from == v.inputs[0] else 1
            state = self._state[vid]
            others = list(state[1 - side])
            state[side].append(row)
            for other in others:
                left, right = (row, other) if side == 0 else (other, row)
                joined = sem.join(v, left, right)
                if joined is not None:
                    self._emit(vid, joined)
        else:  # pragma: no cover - sources are never processed
            raise NetworkError(f"vertex {vid} ({v.kind.value}) cannot process tuples")
