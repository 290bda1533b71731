"""Shared operator networks with privacy switches, engine-independent (no Spark).

* Golden: the paper's CQ1/CQ2 network (Fig. 2, Fig. 6), its common prefix, Algorithm 2's
  switches and "if all users of Q2 lose access, 6 of the 10 operators are shut off".
* Algorithm 1 on the switch objects: every case of the appendix's proof (SP before the
  tuple, tuple before the SP, partial and total loss), deny by default, stale SPs,
  snapshots, the counter's changes-only assumption.
* Properties (hypothesis): on random networks and access-change sequences, what the
  switched network delivers to each user equals an independent oracle (each query run
  alone, unshared, filtered by the user's latest access change at or before each row's
  time); the operators of a branch whose queries all lost access do no work (counted
  invocations); Algorithm 2 shuts off exactly the lost queries' exclusive operators.
* The simulator: a hand-priced network, the generator's rules, reproducibility.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.errors import StreamwardenError
from streamwarden.papers.network import dag as dag_module
from streamwarden.papers.network.dag import (GraphvizNotFound, Kind, Network, NetworkBuilder, NetworkError, Vertex,
                                             render)
from streamwarden.papers.network.switches import SwitchError, SwitchKind, place_switches

from bench.network_simulator import (CostModel, Generated, SimConfig, loss_patterns, network_costs, random_network,
                                     simulate)
from oracles.network import Arrival, HashSemantics, NetworkRunner, Row, Semantics, in_order
from oracles.switches import (SP, CounterState, InitialSwitch, InNetworkSwitch, SpAction, TerminalState,
                              TerminalSwitch, changes_only, state_from_dict)

PROPERTIES = settings(max_examples=120, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the paper's network -------------------------------------------------------------------------
def paper_network() -> Network:
    """CQ1 and CQ2 of Fig. 1 shared as in Fig. 2 / Fig. 6, reconstructed from the text.

    The figures are not available, so this is our reading: the optimizer shares what both
    queries select (CQ2's 8am-7pm interval lies inside CQ1's 6am-7pm one; speed < 0 implies
    speed < 30, the paper's ``expr1``), and each query refines and joins on its own. CQ2
    joins Stream1 with Stream3 on location first (Fig. 6's ``tmp32 ← (tmp11.location =
    tmp31.location)``), then with Stream2. Ten operators; CQ2 alone uses six of them.
    """
    b = NetworkBuilder()
    s1, s2, s3 = b.source("Stream1"), b.source("Stream2"), b.source("Stream3")
    day = b.select(s1, "s1.timestamp > 6:00am AND s1.timestamp < 7:00pm")  # v1, shared
    slow = b.select(s2, "s2.speed < 30")  # v2, shared
    q1 = b.project(b.join(day, slow, "s1.location = s2.location"), "s1.streamid, s1.heartRate")  # v3, v4
    screen = b.select(s3, "s3.screentime > 5h")  # v5
    morning = b.select(day, "s1.timestamp > 8:00am")  # v6
    near = b.join(morning, screen, "s1.location = s3.location")  # v7 (tmp32)
    still = b.select(slow, "s2.speed < 0")  # v8
    q2 = b.project(b.join(near, still, "s1.location = s2.location"), "s1.streamid, s1.heartRate")  # v9, v10
    return b.output("q1", q1).output("q2", q2).build()


def test_paper_network_dag() -> None:
    net = paper_network()
    assert [v.id for v in net.sources] == ["s1", "s2", "s3"]
    assert [v.stream for v in net.sources] == ["Stream1", "Stream2", "Stream3"]
    assert len(net.operators) == 10
    assert net.topological_order() == ("s1", "s2", "s3", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9",
                                       "v10")
    assert {(e.tail, e.head) for e in net.edges} == {
        ("s1", "v1"), ("s2", "v2"), ("v1", "v3"), ("v2", "v3"), ("v3", "v4"), ("s3", "v5"), ("v1", "v6"),
        ("v6", "v7"), ("v5", "v7"), ("v2", "v8"), ("v7", "v9"), ("v8", "v9"), ("v9", "v10")}
    assert dict(net.outputs) == {"q1": "v4", "q2": "v10"}
    assert net.vertex("v2").label == "σ s2.speed < 30"
    assert net.vertex("v7").kind is Kind.JOIN and net.vertex("v7").inputs == ("v6", "v5")
    assert net.common_prefix == {"v1", "v2"}
    assert net.serving("q1") == ("s1", "s2", "v1", "v2", "v3", "v4")
    assert net.serving("q2") == ("s1", "s2", "s3", "v1", "v2", "v5", "v6", "v7", "v8", "v9", "v10")
    assert net.exclusive("q1") == ("v3", "v4")
    assert net.exclusive("q2") == ("v5", "v6", "v7", "v8", "v9", "v10")
    assert net.consumers("v1") == ("v3", "v6")
    assert net.upstream_sources("v9") == {"s1", "s2", "s3"}


def test_paper_network_switches() -> None:
    placed = place_switches(paper_network())
    where = {(s.kind, s.query, s.tail, s.head) for s in placed.switches}
    assert where == {
        (SwitchKind.TERMINAL, "q1", "v4", None), (SwitchKind.TERMINAL, "q2", "v10", None),
        # on the outgoing edges of the last common-prefix operators, per query
        (SwitchKind.IN_NETWORK, "q1", "v1", "v3"), (SwitchKind.IN_NETWORK, "q1", "v2", "v3"),
        (SwitchKind.IN_NETWORK, "q2", "v1", "v6"), (SwitchKind.IN_NETWORK, "q2", "v2", "v8"),
        # Stream3 feeds only CQ2's branch, which no common-prefix operator precedes
        (SwitchKind.INITIAL, "q2", "s3", "v5")}
    assert [s.id for s in placed.switches_for("q2")] == [
        "terminal:q2", "in-network:q2:v1->v6", "in-network:q2:v2->v8", "initial:q2:s3->v5"]
    assert placed.gate("v1", "v6").id == "in-network:q2:v1->v6"
    assert placed.gate("v3", "v4") is None


def test_paper_example_six_of_ten_operators_shut_off() -> None:
    """§5.3: "if all users accessing Q2 lose access ..., the PrSs will shut off six out of the
    ten operators in the network"."""
    placed = place_switches(paper_network())
    assert placed.shut_off({"q2"}) == {"v5", "v6", "v7", "v8", "v9", "v10"}
    assert len(placed.shut_off({"q2"})) == 6 and len(placed.network.operators) == 10
    assert placed.shut_off({"q1"}) == {"v3", "v4"}
    assert placed.shut_off({"q1", "q2"}) == placed.shut_off({"q1"}) | placed.shut_off({"q2"})  # the prefix runs
    assert placed.shut_off(()) == frozenset()
    assert placed.active_vertices({"q1"}) == {"s1", "s2", "s3", "v1", "v2", "v3", "v4"}


def test_paper_example_on_the_runner() -> None:
    """Users of Q2 lose access while the network runs: its six operators stop working; they
    resume when a user of Q2 gets access back, and Q1's users never notice."""
    placed = place_switches(paper_network())
    runner = NetworkRunner(placed)

    def tuples(t: int) -> list[Arrival]:
        return [Arrival(s, Row(t, (s, t, i))) for s in ("Stream1", "Stream2", "Stream3") for i in range(4)]

    runner.run(in_order([SP("q1", "ann", "+", 0), SP("q2", "bob", "+", 0), SP("q2", "cy", "+", 0),
                         *tuples(1), SP("q2", "bob", "-", 2), *tuples(2)]))
    assert runner.switches["in-network:q2:v1->v6"].counter == 1  # cy still has access (partial loss)
    assert all(runner.invocations[v] > 0 for v in ("v5", "v6", "v7", "v8"))
    runner.run([SP("q2", "cy", "-", 3)])
    before = Counter(runner.invocations)
    runner.run(in_order(tuples(4) + tuples(5)))
    worked = {v for v in runner.invocations if runner.invocations[v] > before[v]}
    assert worked.isdisjoint({"v5", "v6", "v7", "v8", "v9", "v10"})
    assert {"v1", "v2", "v3"} <= worked
    runner.run(in_order([SP("q2", "cy", "+", 6), *tuples(6)]))
    assert runner.invocations["v5"] > before["v5"]  # access is back: the branch runs again
    assert {1, 2} <= {r.ts for r in runner.delivered[("q2", "cy")]} <= {1, 2, 6}
    assert {r.ts for r in runner.delivered[("q2", "bob")]} == {1}
    assert {1, 2, 4, 5} <= {r.ts for r in runner.delivered[("q1", "ann")]} <= {1, 2, 4, 5, 6}


def test_dot_rendering(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    placed = place_switches(paper_network())
    dot = placed.to_dot(title="CQ1 and CQ2")
    assert dot.startswith("digraph network {")
    cluster = dot[dot.index("subgraph cluster_common_prefix"):]
    cluster = cluster[:cluster.index("}")]
    assert '"v1"' in cluster and '"v2"' in cluster and '"v3"' not in cluster
    assert 'shape=invtriangle' in dot and 'shape=diamond' in dot and 'shape=doubleoctagon' in dot
    assert '"v1" -> "in-network:q1:v1->v3";' in dot and '"in-network:q1:v1->v3" -> "v3";' in dot
    assert '"v3" -> "v4";' in dot and '"terminal:q1" -> "out:q1";' in dot
    assert "σ s2.speed < 30" in dot
    monkeypatch.setattr(dag_module.shutil, "which", lambda name: None)
    with pytest.raises(GraphvizNotFound, match="Graphviz"):
        render(dot, tmp_path / "net.png")
    with pytest.raises(GraphvizNotFound, match="apt-get install graphviz"):
        placed.render(tmp_path / "net.svg")
    with pytest.raises(NetworkError, match="use .png or .svg"):
        render(dot, tmp_path / "net.pdf")


@pytest.mark.skipif(dag_module.shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_dot_renders_with_graphviz(tmp_path) -> None:  # pragma: no cover - needs Graphviz
    out = render(place_switches(paper_network()).to_dot(), tmp_path / "net.svg")
    assert out.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("build, message", [
    (lambda: Network.of([Vertex("s1", Kind.SOURCE, "S"), Vertex("v1", Kind.JOIN, "⋈", ("s1",))], {"q": "v1"}),
     "join.*takes 2 input"),
    (lambda: Network.of([Vertex("v1", Kind.SELECT, "σ", ("v2",)), Vertex("v2", Kind.SELECT, "σ", ("v1",))],
                        {"q": "v1"}), "cycle through v1, v2"),
    (lambda: Network.of([Vertex("s1", Kind.SOURCE, "S"), Vertex("v1", Kind.SELECT, "σ", ("s9",))], {"q": "v1"}),
     "v1 uses the results of 's9'"),
    (lambda: Network.of([Vertex("s1", Kind.SOURCE, "S"), Vertex("v1", Kind.SELECT, "σ", ("s1",)),
                         Vertex("v2", Kind.SELECT, "σ x", ("s1",))], {"q": "v1"}), "operator v2 .* feeds no query"),
    (lambda: Network((Vertex("s1", Kind.SOURCE, "S", (), frozenset({"q"})),
                      Vertex("v1", Kind.SELECT, "σ", ("s1",), frozenset({"q", "r"}))), (("q", "v1"),)),
     "v1 says it serves"),
    (lambda: Network.of([Vertex("s1", Kind.SOURCE, "S")], {"q": "v7"}), "output of query 'q' is 'v7'"),
    (lambda: paper_network().vertex("v42"), "no vertex 'v42'"),
    (lambda: paper_network().output("q9"), "no query 'q9'"),
])
def test_network_errors_name_the_culprit(build, message) -> None:
    with pytest.raises(NetworkError, match=message):
        build()


def test_network_is_an_immutable_value() -> None:
    a, b = paper_network(), paper_network()
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.outputs = ()  # type: ignore[misc]
    assert place_switches(a) == place_switches(b)


# -- Algorithm 1: the appendix's proof, case by case ------------------------------------------------
COUNTING = [InitialSwitch, InNetworkSwitch]


@pytest.mark.parametrize("cls", COUNTING)
def test_case1_sp_before_tuple_grant(cls) -> None:
    """Case 1, '+': the switch increments its counter and lets the following tuple through."""
    gate, term = cls("g", "q1"), TerminalSwitch("t", "q1")
    sp = SP("q1", "u1", "+", 10)
    assert gate.on_sp(sp) is SpAction.APPLIED and term.on_sp(sp) is SpAction.APPLIED
    assert gate.counter == 1 and gate.is_on and term.users == {"u1"}
    assert gate.on_tuple(10) is True
    assert term.on_tuple(10) == ("u1",)


@pytest.mark.parametrize("cls", COUNTING)
def test_case1_partial_loss(cls) -> None:
    """Case 1, '-' with another user left: the counter stays > 0, tuples flow; the terminal
    switch removes the user and delivers to the others only."""
    gate, term = cls("g", "q1"), TerminalSwitch("t", "q1")
    for sp in (SP("q1", "u1", "+", 1), SP("q1", "u2", "+", 2), SP("q1", "u1", "-", 3)):
        gate.on_sp(sp), term.on_sp(sp)
    assert gate.counter == 1 and gate.on_tuple(4)
    assert term.on_tuple(4) == ("u2",)


@pytest.mark.parametrize("cls", COUNTING)
def test_case1_total_loss(cls) -> None:
    """Case 1, '-' of the last user: the counter reaches zero and tuples are discarded."""
    gate, term = cls("g", "q1"), TerminalSwitch("t", "q1")
    for sp in (SP("q1", "u1", "+", 1), SP("q1", "u2", "+", 1), SP("q1", "u2", "-", 2), SP("q1", "u1", "-", 3)):
        gate.on_sp(sp), term.on_sp(sp)
    assert gate.counter == 0 and not gate.is_on
    assert gate.on_tuple(4) is False and term.on_tuple(4) == ()
    assert gate.stats.tuples_in == 1 and gate.stats.tuples_out == 0


@pytest.mark.parametrize("cls", COUNTING)
def test_case2_tuple_before_sp_is_denied_by_default(cls) -> None:
    """Case 2: a tuple arriving before any SP meets the initial state: counter 0, U empty."""
    gate, term = cls("g", "q1"), TerminalSwitch("t", "q1")
    assert gate.on_tuple(5) is False and term.on_tuple(5) == ()
    gate.on_sp(SP("q1", "u1", "+", 6)), term.on_sp(SP("q1", "u1", "+", 6))
    assert gate.on_tuple(6) is True and term.on_tuple(6) == ("u1",)


def test_case2_terminal_delivers_only_to_users_in_u() -> None:
    """Case 2: tuple t flows to u1's channel iff u1 ∈ U; other queries' SPs do not open it."""
    term = TerminalSwitch("t", "q1")
    assert term.on_sp(SP("q2", "u1", "+", 1)) is SpAction.IGNORED
    assert term.on_tuple(2) == ()
    term.on_sp(SP("q1", "u2", "+", 3))
    assert term.on_tuple(4) == ("u2",)


@pytest.mark.parametrize("cls", COUNTING)
def test_counter_never_goes_below_zero(cls) -> None:
    """Line 10: a '-' only decrements a counter that is not zero."""
    gate = cls("g", "q1")
    gate.on_sp(SP("q1", "u1", "-", 1))
    assert gate.counter == 0
    gate.on_sp(SP("q1", "u1", "+", 2))
    assert gate.counter == 1 and gate.on_tuple(3)


@pytest.mark.parametrize("cls", COUNTING)
def test_other_queries_sps_are_processed_not_acted_on(cls) -> None:
    gate = cls("g", "q1")
    assert gate.on_sp(SP("q2", "u1", "+", 1)) is SpAction.IGNORED
    assert gate.counter == 0 and gate.stats.sps == 1 and gate.stats.applied == 0


@pytest.mark.parametrize("cls", [*COUNTING, TerminalSwitch])
def test_stale_sps_are_discarded(cls) -> None:
    """Lines 4-5: an SP older than the switch's access time (here: the latest tuple it saw)."""
    sw = cls("g", "q1")
    sw.on_tuple(10)
    assert sw.access_time == 10
    assert sw.on_sp(SP("q1", "u1", "+", 9)) is SpAction.STALE
    assert not sw.is_on and sw.stats.stale == 1
    assert sw.on_sp(SP("q1", "u1", "+", 10)) is SpAction.APPLIED and sw.is_on
    started = cls("h", "q1", access_time=100)
    assert started.on_sp(SP("q1", "u1", "+", 50)) is SpAction.STALE and not started.is_on


def test_counter_assumes_the_server_injects_changes_only() -> None:
    """§5.1's assumption, documented in the module: raw repeated SPs miscount, the server's
    changes-only injection counts users."""
    raw = [SP("q1", "ann", "+", 1), SP("q1", "ann", "+", 2), SP("q1", "ann", "-", 4)]
    naive = InNetworkSwitch("g", "q1")
    for sp in raw:
        naive.on_sp(sp)
    assert naive.counter == 1  # ann counted twice: the branch keeps running though nobody has access
    server = InNetworkSwitch("g", "q1")
    for sp in changes_only(raw):
        server.on_sp(sp)
    assert server.counter == 0 and [(s.user, s.sign) for s in changes_only(raw)] == [("ann", "+"), ("ann", "-")]
    wrong = InNetworkSwitch("g", "q1")
    for sp in (SP("q1", "ann", "+", 1), SP("q1", "bob", "-", 2)):  # bob never had access
        wrong.on_sp(sp)
    assert wrong.counter == 0  # ann has access, the branch is off: why changes_only matters


@pytest.mark.parametrize("cls", COUNTING)
def test_snapshot_and_resume_counting(cls) -> None:
    sw = cls("in-network:q1:v1->v3", "q1")
    for sp in (SP("q1", "a", "+", 1), SP("q1", "b", "+", 2)):
        sw.on_sp(sp)
    sw.on_tuple(5)
    state = sw.snapshot()
    assert state == CounterState(2, 5.0) and state_from_dict(state.as_dict()) == state
    again = cls("in-network:q1:v1->v3", "q1", resume_state=state)
    assert again.counter == 2 and again.access_time == 5
    assert again.on_sp(SP("q1", "b", "+", 2)) is SpAction.STALE  # a replayed SP is not counted twice
    assert again.counter == 2
    with pytest.raises(SwitchError, match=r"in-network:q1:v1->v3.*TerminalState"):
        cls("in-network:q1:v1->v3", "q1", resume_state=TerminalState())
    with pytest.raises(SwitchError, match="negative AccessCounter"):
        cls("g", "q1", resume_state=CounterState(-1))


def test_snapshot_and_resume_terminal() -> None:
    term = TerminalSwitch("terminal:q1", "q1")
    term.on_sp(SP("q1", "ann", "+", 1))
    state = term.snapshot()
    assert state == TerminalState(frozenset({"ann"}), None)
    assert state_from_dict(state.as_dict()) == state
    assert TerminalSwitch("terminal:q1", "q1", resume_state=state).on_tuple(2) == ("ann",)
    with pytest.raises(SwitchError, match="terminal:q1.*CounterState"):
        TerminalSwitch("terminal:q1", "q1", resume_state=CounterState())  # type: ignore[arg-type]


def test_switch_errors_name_the_switch() -> None:
    with pytest.raises(SwitchError, match="sign must be"):
        SP("q1", "ann", "*", 1)
    gate = InNetworkSwitch("in-network:q1:v1->v3", "q1")
    with pytest.raises(SwitchError, match=r"switch in-network:q1:v1->v3: expected an SP"):
        gate.on_sp(("q1", "ann", "+", 1))  # type: ignore[arg-type]
    with pytest.raises(SwitchError, match=r"switch in-network:q1:v1->v3: a tuple's timestamp"):
        gate.on_tuple(float("nan"))
    with pytest.raises(SwitchError, match="counter must be an integer"):
        state_from_dict({"counter": "2"})
    assert issubclass(SwitchError, StreamwardenError)


def test_appendix_cases_on_a_network() -> None:
    """The base case of the proof end to end: u1 may access q1, the SP is injected into every
    stream of q1. Tuples before the SP are denied, tuples after it reach u1 only."""
    b = NetworkBuilder()
    s1, s2 = b.source("S1"), b.source("S2")
    shared = b.select(s1, "x")
    net = b.output("q1", b.join(shared, s2, "k")).output("q2", b.project(shared, "y")).build()
    runner = NetworkRunner(place_switches(net), HashSemantics())

    def rows(t: int) -> list[Arrival]:
        return [Arrival("S1", Row(t, ("a", t, i))) for i in range(6)] + [Arrival("S2", Row(t, ("b", t, i)))
                                                                          for i in range(6)]

    runner.run(in_order(rows(1) + [SP("q1", "u1", "+", 2)] + rows(2)))
    assert runner.delivered[("q1", "u1")] and all(r.ts == 2 for r in runner.delivered[("q1", "u1")])
    assert set(runner.delivered) == {("q1", "u1")}


# -- properties -------------------------------------------------------------------------------------
@st.composite
def networks(draw) -> Network:
    """Random DAGs of every operator kind; queries may share anything, even their output."""
    vertices = [Vertex(f"s{i + 1}", Kind.SOURCE, f"S{i + 1}") for i in range(draw(st.integers(1, 3)))]
    for k in range(draw(st.integers(2, 10))):
        ids = [v.id for v in vertices]
        kinds = [Kind.SELECT, Kind.SELECT, Kind.PROJECT, Kind.AGGREGATE] + [Kind.JOIN] * 2 * (len(ids) > 1)
        kind = draw(st.sampled_from(kinds))
        if kind is Kind.JOIN:
            inputs = tuple(draw(st.lists(st.sampled_from(ids), min_size=2, max_size=2, unique=True)))
        else:
            inputs = (draw(st.sampled_from(ids)),)
        vertices.append(Vertex(f"v{k + 1}", kind, f"{kind.symbol} p{k + 1}", inputs))
    operators = [v.id for v in vertices if v.is_operator]
    queries = draw(st.sampled_from([2, 3, 4, 1]))
    outputs = {f"q{i + 1}": draw(st.sampled_from(operators[::-1])) for i in range(queries)}
    by_id = {v.id: v for v in vertices}
    keep, stack = set(), list(outputs.values())
    while stack:
        vid = stack.pop()
        if vid not in keep:
            keep.add(vid)
            stack.extend(by_id[vid].inputs)
    return Network.of([v for v in vertices if v.id in keep], outputs)


@st.composite
def scenarios(draw, horizon: int = 5):
    """A network, its users, input tuples and raw access changes (as decided, before the
    server's changes-only filter)."""
    net = draw(networks())
    users = {q: tuple(f"u{j}" for j in range(draw(st.integers(1, 3)))) for q in net.queries}
    tuples = []
    for src in net.sources:
        for i, t in enumerate(draw(st.lists(st.integers(0, horizon), min_size=1, max_size=10))):
            tuples.append(Arrival(src.stream, Row(t, (src.stream, i))))
    pairs = [(q, u) for q, us in users.items() for u in us]
    changes = [SP(q, u, sign, t) for (q, u), sign, t in draw(st.lists(
        st.tuples(st.sampled_from(pairs), st.sampled_from("++-"), st.integers(-1, horizon)), max_size=14))]
    return net, users, tuples, changes


def evaluate(net: Network, vid: str, tuples: list[Arrival], sem: Semantics, memo: dict | None = None) -> list[Row]:
    """The oracle's query evaluation: the plan below ``vid`` over all the input, at once."""
    memo = {} if memo is None else memo
    if vid in memo:
        return memo[vid]
    v = net.vertex(vid)
    ins = [evaluate(net, i, tuples, sem, memo) for i in v.inputs]
    if v.kind is Kind.SOURCE:
        out = [a.row for a in tuples if a.stream == v.stream]
    elif v.kind is Kind.SELECT:
        out = [r for r in ins[0] if sem.select(v, r)]
    elif v.kind is Kind.PROJECT:
        out = [sem.project(v, r) for r in ins[0]]
    elif v.kind is Kind.AGGREGATE:
        out = [sem.aggregate(v, r, [e for e in ins[0] if r.ts - sem.window <= e.ts < r.ts]) for r in ins[0]]
    else:
        out = [j for left in ins[0] for right in ins[1] if (j := sem.join(v, left, right)) is not None]
    memo[vid] = out
    return out


def has_access(changes: Iterable[SP], query: str, user: str, ts: float) -> bool:
    """The contract: the latest access change at or before ``ts`` is a grant (none: no access)."""
    latest = None
    for sp in sorted(changes, key=lambda s: s.ts):  # stable: same-time changes in the given order
        if sp.query == query and sp.user == user and sp.ts <= ts:
            latest = sp
    return latest is not None and latest.grants


def oracle(net: Network, users: dict[str, tuple[str, ...]], tuples: list[Arrival], changes: list[SP],
           sem: Semantics) -> dict[tuple[str, str], Counter]:
    """Each query run alone, unshared, each result row kept for the users with access at its time."""
    expected = {}
    for q in net.queries:
        result = evaluate(net, net.output(q), tuples, sem)
        for u in users[q]:
            rows = Counter(r for r in result if has_access(changes, q, u, r.ts))
            if rows:
                expected[(q, u)] = rows
    return expected


def run_switched(net: Network, tuples: list[Arrival], changes: list[SP], sem: Semantics) -> NetworkRunner:
    injected = changes_only(sorted(changes, key=lambda s: s.ts))  # the authorization server
    return NetworkRunner(place_switches(net), sem).run(in_order([*tuples, *injected]))


def delivered(runner: NetworkRunner) -> dict[tuple[str, str], Counter]:
    return {k: Counter(rows) for k, rows in runner.delivered.items() if rows}


@PROPERTIES
@given(scenarios())
def test_each_user_gets_exactly_what_the_oracle_allows(scenario) -> None:
    net, users, tuples, changes = scenario
    sem = HashSemantics(window=0)
    assert delivered(run_switched(net, tuples, changes, sem)) == oracle(net, users, tuples, changes, sem)


@PROPERTIES
@given(scenarios(), st.integers(1, 3))
def test_windows_never_leak_and_are_exact_while_a_user_keeps_access(scenario, window) -> None:
    """With windows, a closed switch can make a JOIN miss pairs later (module notes of
    ``runner``): never a row the user may not see; none missing while the switches stay on."""
    net, users, tuples, changes = scenario
    sem = HashSemantics(window=window)
    got, expected = delivered(run_switched(net, tuples, changes, sem)), oracle(net, users, tuples, changes, sem)
    for key, rows in got.items():
        assert not rows - expected.get(key, Counter()), f"{key} received rows the oracle denies"
    keepers = [SP(q, "keeper", "+", -5) for q in net.queries]
    got = delivered(run_switched(net, tuples, [*keepers, *changes], sem))
    users_k = {q: (*us, "keeper") for q, us in users.items()}
    assert got == oracle(net, users_k, tuples, [*keepers, *changes], sem)


@PROPERTIES
@given(scenarios(horizon=4), st.data())
def test_a_branch_whose_queries_lost_access_does_no_work(scenario, data) -> None:
    net, users, tuples, changes = scenario
    lost = data.draw(st.sets(st.sampled_from(net.queries)))
    revocations = [SP(q, u, "-", 5) for q in sorted(lost) for u in users[q]]
    placed = place_switches(net)
    runner = NetworkRunner(placed)
    runner.run(in_order([*tuples, *changes_only(sorted([*changes, *revocations], key=lambda s: s.ts))]))
    before = Counter(runner.invocations)
    later = [Arrival(a.stream, Row(a.row.ts + 6, (a.row.data, "later"))) for a in tuples]
    runner.run(in_order(later))
    worked = {v for v in runner.invocations if runner.invocations[v] > before[v]}
    open_ = {q for q in net.queries if any(has_access([*changes, *revocations], q, u, 5) for u in users[q])}
    assert not open_ & lost
    assert worked <= placed.active_vertices(open_)
    assert not worked & placed.shut_off(set(net.queries) - open_)
    for q in set(net.queries) - open_:  # the lost queries' own operators: zero invocations
        assert all(runner.invocations[v] == before[v] for v in net.exclusive(q))


@PROPERTIES
@given(networks())
def test_algorithm2_shuts_off_exactly_the_lost_queries_exclusive_operators(net) -> None:
    placed = place_switches(net)
    cp = net.common_prefix
    assert placed.count(SwitchKind.TERMINAL) == len(net.queries)
    for s in placed.switches:
        if s.kind is SwitchKind.TERMINAL:
            assert s.tail == net.output(s.query) and s.head is None
            continue
        assert (s.tail in cp) if s.kind is SwitchKind.IN_NETWORK else (not net.vertex(s.tail).is_operator)
        assert s.head is None or net.vertex(s.head).queries == {s.query}
    for lost in loss_patterns(net.queries):
        expected = {v for q in lost for v in net.exclusive(q)}
        assert placed.shut_off(lost) == expected


@PROPERTIES
@given(scenarios(), st.integers(0, 6))
def test_switch_snapshots_resume_a_run(scenario, cut) -> None:
    """Run up to time ``cut``, snapshot every switch, resume on a fresh runner: the same
    deliveries as one run (window 0, so no join state crosses the cut)."""
    net, users, tuples, changes = scenario
    injected = changes_only(sorted(changes, key=lambda s: s.ts))
    events = in_order([*tuples, *injected])
    whole = NetworkRunner(place_switches(net)).run(events)
    first = NetworkRunner(place_switches(net)).run(e for e in events if _ts(e) < cut)
    second = NetworkRunner(place_switches(net), resume=first.snapshot()).run(e for e in events if _ts(e) >= cut)
    merged = {k: Counter(first.delivered.get(k, [])) + Counter(second.delivered.get(k, []))
              for k in set(first.delivered) | set(second.delivered)}
    assert {k: v for k, v in merged.items() if v} == delivered(whole)


def _ts(event) -> float:
    return event.ts if isinstance(event, SP) else event.row.ts


# -- the simulator ---------------------------------------------------------------------------------
def test_network_costs_by_hand() -> None:
    """The paper's network priced with §6's constants (1,000 tuples, SPs every 100 tuples)."""
    placed = place_switches(paper_network())
    g = Generated(placed, {"q1": ("u1",), "q2": ("u2", "u3")},
                  {"q1": ("Stream1", "Stream2"), "q2": ("Stream1", "Stream2", "Stream3")})
    c = network_costs(g, CostModel(), loss_patterns(("q1", "q2")))
    ops = 100 * 7 + 300 * 3  # 5 σ and 2 π at 0.1 ms, 3 ⋈ at 0.3 ms, 1,000 tuples each
    assert ops == 1600 and len(placed.network.operators) == 10
    assert Counter(v.kind for v in placed.network.operators) == {Kind.SELECT: 5, Kind.PROJECT: 2, Kind.JOIN: 3}
    # every switch on Stream1/Stream2 sees all 3 users' SPs (10 rounds): 3 ms; Stream3's only q2's: 2 ms
    assert c.sp_ms == pytest.approx(3 * 6 + 2)
    assert c.shared_ms == pytest.approx(ops + 3 + 3)  # post-filtering: the two output filters
    assert c.switched_ms == pytest.approx(ops + 20)
    q1_plan, q2_plan = 100 + 100 + 300 + 100, 100 + 100 + 100 + 100 + 300 + 100 + 300 + 100
    assert c.no_sharing_ms == pytest.approx(1 * (q1_plan + 3) + 2 * (q2_plan + 3))
    assert c.loss_ms[("q2",)] == pytest.approx(ops - (100 + 100 + 300 + 100 + 300 + 100) + 20)
    assert c.shut_off == {(): 0, ("q1",): 2, ("q2",): 6, ("q1", "q2"): 8}
    matching = network_costs(g, CostModel(sp_scope="matching"))
    assert matching.sp_ms == pytest.approx(10 * 0.1 * (1 * 3 + 2 * 4))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 12), st.integers(1, 30), st.floats(0, 1),
       st.integers(0, 2**32))
def test_generated_networks_follow_the_rules(streams, queries, users, operators, sharing, seed) -> None:
    cfg = SimConfig(streams=streams, queries=queries, users=users, operators=operators, sharing=sharing)
    g = random_network(cfg, random.Random(seed))
    net = g.network
    assert net.queries == cfg.query_ids
    for v in net.operators:
        if v.kind is Kind.SELECT:  # join push-down: SELECTs only on streams and SELECTs
            assert all(net.vertex(i).kind in (Kind.SOURCE, Kind.SELECT) for i in v.inputs)
        if v.kind is Kind.PROJECT:  # a query's final projection
            assert v.id in dict(net.outputs).values() and len(v.queries) == 1
        assert v.kind is not Kind.AGGREGATE
    assert len(net.common_prefix) <= round(sharing * operators)
    assert len(net.operators) >= min(operators, len(net.common_prefix) + queries)
    for q in net.queries:
        reads = {net.vertex(s).stream for s in net.upstream_sources(net.output(q))}
        assert reads == set(g.streams[q])
    assigned = [u for us in g.users.values() for u in us]
    assert sorted(assigned) == sorted(f"u{i + 1}" for i in range(users))
    if users >= queries:
        assert all(g.users[q] for q in net.queries)
    c = network_costs(g, cfg.costs, loss_patterns(net.queries))
    assert c.switched_ms >= c.shared_ms
    if users >= queries:
        assert c.no_sharing_ms >= c.shared_ms
    for lost in loss_patterns(net.queries):  # losing more never costs more
        for more in loss_patterns(net.queries):
            if set(lost) <= set(more):
                assert c.loss_ms[more] <= c.loss_ms[lost]


def test_simulate_is_seeded_and_reproducible() -> None:
    cfg = SimConfig(streams=3, queries=3, users=10, operators=20, sharing=0.4)
    a, b = simulate(cfg, networks=300, seed=7), simulate(cfg, networks=300, seed=7)
    assert a == b and a.as_dict(timing=False) == b.as_dict(timing=False)
    assert simulate(cfg, networks=300, seed=8) != a
    assert set(a.loss_ms) == set(loss_patterns(("q1", "q2", "q3")))
    assert a.loss_ms[()] == pytest.approx(a.switched_ms)
    assert 0 < a.loss_savings_pct(("q1",)) < a.loss_savings_pct(("q1", "q2")) < 100
    assert a.switches["terminal"] == 3
    only_full = simulate(cfg, networks=300, seed=7, patterns=False)
    assert only_full.switched_ms == a.switched_ms and set(only_full.loss_ms) == {()}
    with pytest.raises(ValueError, match="sharing"):
        SimConfig(sharing=1.5)
