"""Privacy switches at work (Zaki et al. §5, Algorithm 1): the paper's stateful switch objects.

The product places switches (:func:`streamwarden.papers.network.switches.place_switches`,
Algorithm 2) and ``explain --network`` draws them; the running network decides access in
its own terminal write. This module is the paper's model of what each switch does, which
the tests (and :mod:`oracles.network`) run one event at a time: small stateful objects with
explicit hooks (``on_sp``, ``on_tuple``) and ``snapshot()`` / ``resume_state``, like
bytewax's stateful operators, so an engine could checkpoint them with its own state.

    >>> gate = InNetworkSwitch("in-network:q1:v1->v3", "q1")
    >>> gate.on_tuple(ts=1), gate.on_sp(SP("q1", "ann", "+", ts=2)).value, gate.on_tuple(ts=3)
    (False, 'applied', True)

**Ambiguities of the paper and what we chose** (the placement's are in the product module).

* *ts_access* (Algorithm 1, line 4: ``SP.TS < ts_access`` → discard) is not defined by
  the paper; §4.3 says an SP governs access "at any time ts_access ≥ ts". We take it
  to be the time at which the switch evaluates access: the largest timestamp among the
  tuples the switch has seen, starting from a given ``access_time`` (−∞ by default, or
  the time the network was deployed). An SP older than that arrives too late to govern
  the tuples it concerns and is discarded (``SpAction.STALE``), as the paper says. The
  paper assumes SPs are injected in timestamp order, so this only fires on out-of-order
  input, or on SPs replayed after a restore (the access time is in the snapshot): the
  counter is not idempotent, so replayed SPs must not count twice. Discarding a late
  '-' SP means the revocation is lost at that switch; inject SPs in order.
* *SPs through a switch.* Initial and in-network switches gate tuples only: SPs always
  continue downstream (the appendix: the switch lets "tuple t and SP.q1 reach the
  terminal switches"), otherwise the '-' that closes a switch would never reach the
  terminal switch, which would keep the user in U.

**The AccessCounter assumes SPs only on changes.** Initial and in-network switches count
'+' SPs of their query up and '-' SPs down (never below zero), and let tuples through
while the count is positive. The count is the number of users with access only if the
authorization server injects an SP for a (query, user) pair only when that pair's
access changes, as §5.1 assumes. A repeated '+' counts a user twice (the branch then
keeps running after that user's '-': wasted work, no leak, the terminal switch still
denies); a '-' for a user who never had access while another user has it lowers the
count wrongly and can shut the branch off while someone still has access (lost
results). :func:`changes_only` is that server-side filter. Terminal switches keep the
set U of users and need no such assumption.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Union

from streamwarden.papers.network.switches import PlacedNetwork, SwitchError, SwitchKind, SwitchSite

NEG_INF = -math.inf


# -- security punctuations ---------------------------------------------------------------------
@dataclass(frozen=True)
class SP:
    """A security punctuation, reduced to what switches read: the query it is about, the
    user of its security restriction part, its sign ('+' grants, '-' revokes) and the
    time from which it governs access."""

    query: str
    user: str
    sign: str
    ts: float

    def __post_init__(self) -> None:
        if self.sign not in ("+", "-"):
            raise SwitchError(f"SP for query {self.query!r}, user {self.user!r}: sign must be '+' or '-', "
                              f"got {self.sign!r}")
        if isinstance(self.ts, float) and math.isnan(self.ts):
            raise SwitchError(f"SP for query {self.query!r}, user {self.user!r}: timestamp is NaN")

    @property
    def grants(self) -> bool:
        return self.sign == "+"


def changes_only(sps: Iterable[SP]) -> list[SP]:
    """The SPs an authorization server injects for a sequence of access decisions (in
    injection order): one only when a (query, user) pair's access changes. No access is
    the default, so a pair's first SP is kept only if it grants.

    >>> [s.sign for s in changes_only([SP("q", "u", "-", 0), SP("q", "u", "+", 1), SP("q", "u", "+", 2),
    ...                                 SP("q", "u", "-", 3)])]
    ['+', '-']
    """
    state: dict[tuple[str, str], bool] = {}
    kept = []
    for sp in sps:
        key = (sp.query, sp.user)
        if state.get(key, False) != sp.grants:
            state[key] = sp.grants
            kept.append(sp)
    return kept


# -- execution (Algorithm 1) -------------------------------------------------------------------
class SpAction(str, Enum):
    """What a switch did with an SP."""

    APPLIED = "applied"  # about the switch's query: state updated
    IGNORED = "ignored"  # about another query: processed, no action
    STALE = "stale"  # SP.ts < the switch's access time: discarded (Algorithm 1, line 5)


@dataclass(frozen=True)
class CounterState:
    """Snapshot of an initial or in-network switch. ``access_time`` None means −∞."""

    counter: int = 0
    access_time: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"counter": self.counter, "access_time": self.access_time}


@dataclass(frozen=True)
class TerminalState:
    """Snapshot of a terminal switch: the users U with access. ``access_time`` None means −∞."""

    users: frozenset[str] = frozenset()
    access_time: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"users": sorted(self.users), "access_time": self.access_time}


SwitchState = Union[CounterState, TerminalState]


def state_from_dict(data: dict[str, object]) -> SwitchState:
    """Inverse of ``as_dict`` (e.g. after a JSON checkpoint)."""
    access = data.get("access_time")
    if access is not None and not isinstance(access, (int, float)):
        raise SwitchError(f"switch snapshot: access_time must be a number or null, got {access!r}")
    if "users" in data:
        users = data["users"]
        if not isinstance(users, (list, tuple, set, frozenset)) or not all(isinstance(u, str) for u in users):
            raise SwitchError(f"terminal switch snapshot: users must be a list of names, got {users!r}")
        return TerminalState(frozenset(users), access)
    counter = data.get("counter")
    if not isinstance(counter, int) or isinstance(counter, bool):
        raise SwitchError(f"switch snapshot: counter must be an integer, got {counter!r}")
    return CounterState(counter, access)


@dataclass
class SwitchStats:
    """What a switch has done: the simulator's and the tests' counters."""

    sps: int = 0  # SPs processed (any query)
    applied: int = 0
    stale: int = 0
    tuples_in: int = 0
    tuples_out: int = 0  # tuples passed on (terminal: deliveries, one per user)


class _Base:
    kind: ClassVar[SwitchKind]

    def __init__(self, switch_id: str, query: str, access_time: float | None) -> None:
        if not switch_id:
            raise SwitchError(f"a {self.kind.value} switch for query {query!r} needs an id")
        self.id = switch_id
        self.query = query
        self._access = NEG_INF if access_time is None else float(access_time)
        self.stats = SwitchStats()

    @property
    def access_time(self) -> float:
        """The time at which this switch evaluates access (see the module notes on ts_access)."""
        return self._access

    def _check_sp(self, sp: object) -> SP:
        if not isinstance(sp, SP):
            raise SwitchError(f"switch {self.id}: expected an SP, got {type(sp).__name__} {sp!r}")
        return sp

    def _tick(self, ts: float) -> None:
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or math.isnan(ts):
            raise SwitchError(f"switch {self.id}: a tuple's timestamp must be a number, got {ts!r}")
        self.stats.tuples_in += 1
        if ts > self._access:
            self._access = float(ts)

    def _stale(self, sp: SP) -> bool:
        self.stats.sps += 1
        if sp.ts < self._access:  # Algorithm 1, lines 4-5
            self.stats.stale += 1
            return True
        return False

    def _snapshot_time(self) -> float | None:
        return None if self._access == NEG_INF else self._access

    def _resume(self, state: SwitchState, expected: type) -> None:
        """Check a snapshot's type and take its access time (the subclass takes the rest)."""
        if not isinstance(state, expected):
            raise SwitchError(f"switch {self.id}: cannot resume a {self.kind.value} switch from "
                              f"{type(state).__name__}")
        if state.access_time is not None:
            self._access = float(state.access_time)

    def on_sp(self, sp: SP) -> SpAction:
        """Process one SP: discarded if stale, ignored if about another query, else applied.
        Initial and in-network switches let every SP that is not stale continue downstream;
        a terminal switch never lets one reach a user's output."""
        sp = self._check_sp(sp)
        if self._stale(sp):
            return SpAction.STALE
        if sp.query != self.query:
            return SpAction.IGNORED
        self.stats.applied += 1
        self._apply(sp)
        return SpAction.APPLIED

    def _apply(self, sp: SP) -> None:
        raise NotImplementedError


class _CountingSwitch(_Base):
    """Initial and in-network switches: ``<Type, QueryID, AccessCounter>`` (Algorithm 1, lines 7-15)."""

    def __init__(self, switch_id: str, query: str, *, access_time: float | None = None,
                 resume_state: CounterState | None = None) -> None:
        super().__init__(switch_id, query, access_time)
        self.counter = 0  # deny by default
        if resume_state is not None:
            self._resume(resume_state, CounterState)
            if resume_state.counter < 0:
                raise SwitchError(f"switch {switch_id}: snapshot has a negative AccessCounter "
                                  f"({resume_state.counter})")
            self.counter = resume_state.counter

    @property
    def is_on(self) -> bool:
        return self.counter > 0

    def _apply(self, sp: SP) -> None:
        if sp.grants:
            self.counter += 1
        elif self.counter != 0:
            self.counter -= 1

    def on_tuple(self, ts: float) -> bool:
        """Whether a tuple with timestamp ``ts`` goes on (True) or is discarded."""
        self._tick(ts)
        if self.counter > 0:
            self.stats.tuples_out += 1
            return True
        return False

    def snapshot(self) -> CounterState:
        return CounterState(self.counter, self._snapshot_time())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, counter={self.counter}, access_time={self._access})"


class InitialSwitch(_CountingSwitch):
    """On an input stream, at the start of a query's branch: pre-filtering."""

    kind = SwitchKind.INITIAL


class InNetworkSwitch(_CountingSwitch):
    """On an edge leaving the common prefix: shuts a query's branch off on total loss."""

    kind = SwitchKind.IN_NETWORK


class TerminalSwitch(_Base):
    """At a query's output: ``<Type, QueryID, U>``, multiplexes results to the users in U
    (Algorithm 1, lines 17-25). U starts empty: deny by default."""

    kind = SwitchKind.TERMINAL

    def __init__(self, switch_id: str, query: str, *, access_time: float | None = None,
                 resume_state: TerminalState | None = None) -> None:
        super().__init__(switch_id, query, access_time)
        self._users: set[str] = set()
        if resume_state is not None:
            self._resume(resume_state, TerminalState)
            self._users = set(resume_state.users)

    @property
    def users(self) -> frozenset[str]:
        return frozenset(self._users)

    @property
    def is_on(self) -> bool:
        return bool(self._users)

    def _apply(self, sp: SP) -> None:
        if sp.grants:
            self._users.add(sp.user)
        else:
            self._users.discard(sp.user)

    def on_tuple(self, ts: float) -> tuple[str, ...]:
        """The users (sorted) whose outputs receive a result tuple with timestamp ``ts``."""
        self._tick(ts)
        users = tuple(sorted(self._users))
        self.stats.tuples_out += len(users)
        return users

    def snapshot(self) -> TerminalState:
        return TerminalState(frozenset(self._users), self._snapshot_time())

    def __repr__(self) -> str:
        return f"TerminalSwitch({self.id!r}, users={sorted(self._users)}, access_time={self._access})"


Switch = Union[InitialSwitch, InNetworkSwitch, TerminalSwitch]
_CLASSES: dict[SwitchKind, type] = {SwitchKind.INITIAL: InitialSwitch, SwitchKind.IN_NETWORK: InNetworkSwitch,
                                    SwitchKind.TERMINAL: TerminalSwitch}


def make_switch(site: SwitchSite, resume_state: SwitchState | None = None) -> Switch:
    """The runtime switch for ``site``, fresh or resumed from a snapshot."""
    return _CLASSES[site.kind](site.id, site.query, resume_state=resume_state)


def build_switches(placed: PlacedNetwork, resume: dict[str, SwitchState] | None = None) -> dict[str, Switch]:
    """Fresh runtime switches keyed by id; ``resume`` maps ids to snapshots to resume from."""
    resume = resume or {}
    unknown = set(resume) - {s.id for s in placed.switches}
    if unknown:
        raise SwitchError(f"snapshots of unknown switches: {', '.join(sorted(unknown))}")
    return {s.id: make_switch(s, resume.get(s.id)) for s in placed.switches}
