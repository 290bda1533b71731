"""Shared operator networks with privacy switches, simulated (Zaki et al. §6).

The declaration (:func:`experiment`) for :mod:`bench.suite`. Pure Python (no Spark):
:func:`bench.network_simulator.simulate` generates random shared-operator
networks, places the switches with Algorithm 2 and prices each network for 1,000 input
tuples with the paper's cost model (upper bound). Each point is one pipeline, averaging
``networks`` networks from one seeded generator (seeds 2021, 2022, ... in declaration
order), so a run is reproducible; the runner's CPU time is each point's simulation time.

* Fig. 8 — execution time of no sharing, shared without switches (post-filtering) and
  shared with switches against the degree of sharing (20-80 %), for 3 queries / 15
  operators and 5 queries / 25 operators.
* Fig. 9 — 3 streams, 3 queries, ~20 operators: the same, plus every pattern of access
  loss (which queries lose all their users).
* Sensitivity — the paper does not say how many users its networks had; sharing savings
  and switch overhead both depend on it (and on which SPs a switch pays for), so both
  are shown for a few user counts.

    >>> e = experiment(quick=True)
    >>> len(e.pipelines), e.pipelines[0].name, len(e.targets), e.repeats
    (18, 'fig8/3 q, 15 ops/20%', 8, 1)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from bench.network_simulator import CostModel, SimConfig, loss_patterns, simulate
from bench.suite.experiment import (Column, Experiment, Facts, Local, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload)

#: The paper's numbers, from its text (§6.2, §6.3); the figures are not available as numbers.
PAPER_SHARING_SAVINGS_PCT = 92.0
PAPER_SWITCH_OVERHEAD_PCT = 0.5
PAPER_LOSS_SAVINGS_PCT = {1: 19.0, 2: 38.0}  # queries (of 3) losing all their users
PAPER_FIG9_OPERATORS = 20
PAPER_FIG9_SWITCHES = 11
#: How the paper's "about" is judged: percentage points around its value, limits, ranges.
SAVINGS_TOLERANCE = 5.0
OVERHEAD_LIMIT = 1.0
SWITCH_SPREAD = 1.25
FIG9_SWITCHES_RANGE = (9.0, 13.0)
CPU_LIMIT_S = 20.0

SEED, STREAMS, USERS = 2021, 3, 10  # users: not given by the paper; see the sensitivity table
DEGREES = (20, 40, 60, 80)  # target degrees of sharing, %
FIG8 = ((3, 15), (5, 25))  # (queries, operators)
FIG9_QUERIES = 3
SENSITIVITY_USERS, SENSITIVITY_SCOPES, SENSITIVITY_DEGREE = (3, 10, 30), ("all", "matching"), 50
PAPER = "paper (PrS), §6."
LOST = tuple("+".join(p) for p in loss_patterns(SimConfig(queries=FIG9_QUERIES).query_ids) if p)


def _simulated(config: SimConfig, networks: int, seed: int, patterns: bool) -> Local:
    """A pipeline: ``networks`` networks of ``config`` simulated; their averages (ms for 1,000
    input tuples, switches per network, savings in %), per loss pattern ``loss <q> ms`` and
    ``loss <q> %`` with patterns, and the mean saving when 1 or 2 queries lose access."""

    def call(work: Path, out: Path) -> dict[str, float]:
        r = simulate(config, networks=networks, seed=seed, patterns=patterns)
        numbers = {"no_sharing_ms": r.no_sharing_ms, "shared_ms": r.shared_ms, "switched_ms": r.switched_ms,
                   "sp_ms": r.sp_ms, "sharing_savings_pct": r.sharing_savings_pct,
                   "switch_overhead_pct": r.switch_overhead_pct, "operators": r.operators,
                   "common_prefix": r.common_prefix, "realized_pct": 100 * r.sharing,
                   **{f"switches {kind}": n for kind, n in r.switches.items()}}
        lost = {"+".join(k): k for k in r.loss_ms if k}
        for name, key in lost.items():
            numbers[f"loss {name} ms"], numbers[f"loss {name} %"] = r.loss_ms[key], r.loss_savings_pct(key)
        for count in (1, 2):
            saved = [r.loss_savings_pct(k) for k in lost.values() if len(k) == count]
            if saved:
                numbers[f"lost {count} %"] = sum(saved) / len(saved)
        return numbers

    return Local(call)


def _prepare(networks: int) -> Workload:
    def prepare(work: Path) -> Facts:  # nothing to write: each pipeline generates its networks from its seed
        return {"networks per point": networks, "streams": STREAMS, "users": USERS}

    return Workload("random shared-operator networks (seeded), priced with the paper's cost model", prepare)


# -- targets and observations ------------------------------------------------------------------------------
def _values(measured: Measured, metric: str, **where: float | str) -> list[float]:
    return [measured.median(n, metric) for n in measured.where(**where)]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _judged(values: Sequence[float], met: bool, text: str) -> Verdict:
    return Verdict(met, text) if values and not any(math.isnan(v) for v in values) else Verdict(None, "not measured")


def _sharing_saves(measured: Measured) -> Verdict:
    saved = _values(measured, "sharing_savings_pct", group="fig8")
    mean = _mean(saved)
    return _judged(saved, abs(mean - PAPER_SHARING_SAVINGS_PCT) <= SAVINGS_TOLERANCE,
                   f"{mean:.1f} % on average over Fig. 8's points ({min(saved, default=0):.1f}–"
                   f"{max(saved, default=0):.1f} %), {USERS} users per network")


def _switches_add(measured: Measured) -> Verdict:
    added = _values(measured, "switch_overhead_pct", group="fig8") + _values(measured, "switch_overhead_pct",
                                                                             group="fig9")
    mean = _mean(added)
    return _judged(added, mean <= OVERHEAD_LIMIT, f"{mean:.2f} % on average over Figs. 8-9 "
                                                  f"({min(added, default=0):.2f}–{max(added, default=0):.2f} %)")


def _loss_saves(lost: int) -> Target:
    paper = PAPER_LOSS_SAVINGS_PCT[lost]

    def check(measured: Measured) -> Verdict:
        saved = _values(measured, f"lost {lost} %", group="fig9")
        mean = _mean(saved)
        per_degree = ", ".join(f"{d}%: {v:.1f}" for d, v in zip(DEGREES, saved))
        return _judged(saved, abs(mean - paper) <= SAVINGS_TOLERANCE,
                       f"{mean:.1f} % on average over the degrees ({per_degree})")

    return Target(f"{PAPER}3: about {paper:g} % saved when {lost} of 3 queries lose access (against "
                  f"post-filtering; taken as ±{SAVINGS_TOLERANCE:g} points)", check)


def _more_at_lower_degrees(measured: Measured) -> Verdict:
    saved = _values(measured, "lost 1 %", group="fig9")
    return _judged(saved, all(b < a for a, b in zip(saved, saved[1:])),
                   " → ".join(f"{v:.1f} %" for v in saved) + f" ({DEGREES[0]} % → {DEGREES[-1]} %)")


def _switch_count_flat(measured: Measured) -> Verdict:
    spreads = [(q, o, _values(measured, "switches total", group="fig8", variant=f"{q} q, {o} ops")) for q, o in FIG8]
    counts = [c for _, _, s in spreads for c in s]
    return _judged(counts, all(s and max(s) / min(s) <= SWITCH_SPREAD for _, _, s in spreads),
                   "; ".join(f"{q} queries / {o} ops: {min(s, default=0):.1f}–{max(s, default=0):.1f}"
                             for q, o, s in spreads))


def _fig9_switches(measured: Measured) -> Verdict:
    switches = _mean(_values(measured, "switches total", group="fig9"))
    operators = _mean(_values(measured, "operators", group="fig9"))
    low, high = FIG9_SWITCHES_RANGE
    return _judged([switches], low <= switches <= high, f"{switches:.1f} switches, {operators:.1f} operators")


def _cpu(networks: int) -> Target:
    def check(measured: Measured) -> Verdict:
        cpu = _values(measured, "cpu_s", group="fig8") + _values(measured, "cpu_s", group="fig9")
        worst = max(cpu, default=math.nan) * 10_000 / networks
        verdict = _judged(cpu, worst < CPU_LIMIT_S, f"{networks:,} networks per point; slowest point "
                                                    f"{worst:.1f} s CPU per 10,000 networks")
        return verdict if networks >= 10_000 else Verdict(None, verdict.measured + " (fewer networks: not judged)")

    return Target(f"issue 5: 10,000 networks per point, simulated in < {CPU_LIMIT_S:g} s CPU per point", check)


def explain(measured: Measured, facts: Facts) -> list[str]:
    """How the headline numbers depend on the users, and what still runs when every query loses access."""
    notes = []
    sens = {(measured.coordinates[n]["users"], measured.coordinates[n]["SPs paid"]): n
            for n in measured.where(group="sensitivity")}
    near = [u for (u, s), n in sens.items() if s == "all"
            and abs(measured.median(n, "sharing_savings_pct") - PAPER_SHARING_SAVINGS_PCT) <= SAVINGS_TOLERANCE]
    cheap = [u for (u, s), n in sens.items() if s == "all"
             and measured.median(n, "switch_overhead_pct") <= OVERHEAD_LIMIT]
    both = sorted(set(near) & set(cheap))
    if sens:
        notes.append(
            "Both headline numbers of Fig. 8 depend on the number of users, which the paper does not give: no sharing "
            "runs one copy of a query per user, so its cost grows with the users, and every switch processes every "
            f"user's SPs. In the sensitivity table (3 queries, 15 operators, sharing {SENSITIVITY_DEGREE}%) the "
            f"sharing saving is within ±{SAVINGS_TOLERANCE:g} points of {PAPER_SHARING_SAVINGS_PCT:g} % for "
            + (", ".join(f"{u} users" for u in sorted(near)) if near else "none of the user counts")
            + f", and the switches cost ≤ {OVERHEAD_LIMIT:g} % for "
            + (", ".join(f"{u} users" for u in sorted(cheap)) if cheap else "none of them")
            + " (SPs priced at every switch they reach); "
            + (f"{', '.join(map(str, both))} users give both." if both
               else "no user count gives both of the paper's numbers under this cost model."))
    everything = _mean(_values(measured, f"loss {LOST[-1]} %", group="fig9"))
    if not math.isnan(everything):
        notes.append(
            "With switches, the common prefix always runs: when all three queries lose access the network still "
            f"costs {100 - everything:.0f} % of post-filtering on average (the shared operators, and the switches' "
            "SPs), because Algorithm 2 places no switch in front of the common prefix.")
    return notes


NOTES = (
    "Paper: Zaki, Adaikkalavan, Ray, Gamble, *Access Control in Shared-Operator Networks for DSMSs*, DBSec 2021 "
    "(its text gives the numbers quoted here; the figures are not available as numbers): sharing saves about "
    f"{PAPER_SHARING_SAVINGS_PCT:g} % against no sharing, switches add about {PAPER_SWITCH_OVERHEAD_PCT:g} %, and "
    "neither the switch count nor the times depend much on the degree of sharing (§6.2); Fig. 9's networks have "
    f"on average {PAPER_FIG9_SWITCHES} switches over ~{PAPER_FIG9_OPERATORS} operators, and switches save about "
    f"{PAPER_LOSS_SAVINGS_PCT[2]:g} % when two of three queries lose access, {PAPER_LOSS_SAVINGS_PCT[1]:g} % for "
    "one, more at lower degrees of sharing (§6.3).",
    "Simulated with `bench/network_simulator.py` (pure Python, no Spark): random shared-operator "
    f"networks with {STREAMS} input streams and {USERS} users (each assigned to one query output at random, every "
    "query with at least one), generated with the join-push-down rule (SELECTs, then JOINs, then a final PROJECT "
    "along every path); Algorithm 2 places the switches. Cost model (the paper's upper bound for 1,000 input "
    "tuples): every operator processes all 1,000 tuples unless a switch shuts it off; 0.1 ms per tuple for SELECT "
    "and PROJECT, 0.3 ms for JOIN, 0.1 ms per SP at a switch; every 100 tuples an SP for each user, injected into "
    "every stream of the user's query, which every switch downstream of such a stream processes (matching or "
    "not). Generator and cost model in detail: the module docstring of `bench/network_simulator.py`.",
    "*No sharing*: each user runs their own copy of their query's operators. *Shared, no PrSs*: the same network "
    "with a post-filter at each query output (priced like a terminal switch); savings under access loss are "
    "against it. *Sharing saves*: shared (no PrSs) against no sharing; *switches add*: with PrSs against "
    "without, full access. Switches: initial / in-network / terminal, per network on average. Degrees of sharing "
    "are targets; the realized share of common-prefix operators is shown too. Sensitivity, *SPs paid*: *all*, a "
    "switch pays for every SP that reaches it (the model above); *matching*, only for its own query's SPs (the "
    "paper: switches \"execute infrequently (only when they encounter a new SPs in the streams that match the "
    "query id)\").",
    "Each point runs once (`repeats` 1, no warm-up): the simulation is seeded, so a second run gives the same "
    "numbers; *CPU s* is the runner's CPU time of the point.",
)


def experiment(events: int | None = None, quick: bool = False) -> Experiment:
    """Experiment 5 over ``events`` networks per point of Figs. 8 and 9 (default 10,000, as in the
    paper; quick: 500) and a fifth of that per sensitivity row."""
    networks = events or (500 if quick else 10_000)
    seeds = iter(range(SEED, SEED + 10_000))
    pipelines = [Pipeline(f"fig8/{q} q, {o} ops/{d}%", _simulated(SimConfig(STREAMS, q, USERS, o, d / 100), networks,
                                                                  next(seeds), False),
                          "fig8", f"{q} q, {o} ops", params={"setting": f"{q} q, {o} ops", "sharing %": d})
                 for q, o in FIG8 for d in DEGREES]
    pipelines += [Pipeline(f"fig9/{d}%", _simulated(SimConfig(STREAMS, FIG9_QUERIES, USERS, PAPER_FIG9_OPERATORS,
                                                              d / 100), networks, next(seeds), True),
                           "fig9", f"{FIG9_QUERIES} q, {PAPER_FIG9_OPERATORS} ops", params={"sharing %": d})
                  for d in DEGREES]
    pipelines += [Pipeline(f"sensitivity/{u} users/{scope}",
                           _simulated(SimConfig(STREAMS, 3, u, 15, SENSITIVITY_DEGREE / 100, CostModel(sp_scope=scope)),
                                      networks // 5, next(seeds), False), "sensitivity", scope,
                           params={"users": u, "SPs paid": scope})
                  for u in SENSITIVITY_USERS for scope in SENSITIVITY_SCOPES]
    times = (Column("no sharing ms", "no_sharing_ms"), Column("shared, no PrSs ms", "shared_ms"),
             Column("with PrSs ms", "switched_ms"))
    savings = (Column("sharing saves", "sharing_savings_pct", unit=" %"),
               Column("switches add", "switch_overhead_pct", unit=" %"))
    tables = (
        Table(f"Fig. 8: execution time vs degree of sharing ({networks:,} networks per point)",
              ("setting", "sharing %"),
              (Column("sharing realized", "realized_pct", unit=" %"), Column("ops", "operators"),
               Column("common prefix", "common_prefix"), Column("switches I", "switches initial"),
               Column("N", "switches in-network"), Column("T", "switches terminal"), *times, *savings,
               Column("CPU s", "cpu_s")), where={"group": "fig8"}),
        Table(f"Fig. 9: access loss ({STREAMS} streams, {FIG9_QUERIES} queries, {PAPER_FIG9_OPERATORS} operators), "
              "ms", ("sharing %",), (Column("ops", "operators"), Column("switches", "switches total"), times[1],
                                     times[2], *(Column(f"loss {k}", f"loss {k} ms") for k in LOST)),
              where={"group": "fig9"}, text="ms for 1,000 input tuples with switches when the queries named lose all "
                                            "their users."),
        Table("Fig. 9: saved against shared, no PrSs, when the queries named lose access", ("sharing %",),
              (*(Column(f"loss {k}", f"loss {k} %", unit=" %") for k in LOST),
               Column("1 of 3 (mean)", "lost 1 %", unit=" %"), Column("2 of 3 (mean)", "lost 2 %", unit=" %")),
              where={"group": "fig9"}),
        Table(f"Sensitivity: users per network, and which SPs a switch pays for (3 queries, 15 operators, sharing "
              f"{SENSITIVITY_DEGREE}%, {networks // 5:,} networks per row)", ("users", "SPs paid"), (*times, *savings),
              where={"group": "sensitivity"}),
    )
    plots = (
        Plot("fig8", f"Fig. 8: shared (no PrSs) against no sharing (paper: saves about "
             f"{PAPER_SHARING_SAVINGS_PCT:g} %)", "sharing %", Column("sharing saves, %", "sharing_savings_pct"),
             series=("setting",), where={"group": "fig8"}),
        *(Plot(name, f"Fig. 9: saved under access loss, {lost} of {FIG9_QUERIES} queries lost (paper: about "
               f"{PAPER_LOSS_SAVINGS_PCT[lost]:g} %)", "sharing %",
               Column("saved against shared, no PrSs, %", f"lost {lost} %"), where={"group": "fig9"})
          for name, lost in (("fig9", 1), ("fig9_two", 2))),
    )
    targets = (
        Target(f"{PAPER}2: sharing saves about {PAPER_SHARING_SAVINGS_PCT:g} % against no sharing (taken as "
               f"±{SAVINGS_TOLERANCE:g} points)", _sharing_saves),
        Target(f"{PAPER}2: switches add about {PAPER_SWITCH_OVERHEAD_PCT:g} % with full access (taken as "
               f"≤ {OVERHEAD_LIMIT:g} %)", _switches_add),
        _loss_saves(2), _loss_saves(1),
        Target(f"{PAPER}3: switches save more at lower degrees of sharing (one query lost)", _more_at_lower_degrees),
        Target(f"{PAPER}2: number of switches insensitive to the degree of sharing (taken as max/min ≤ "
               f"{SWITCH_SPREAD:g})", _switch_count_flat),
        Target(f"{PAPER}3: on average {PAPER_FIG9_SWITCHES} switches in Fig. 9's networks (~{PAPER_FIG9_OPERATORS} "
               f"operators; taken as {FIG9_SWITCHES_RANGE[0]:g}–{FIG9_SWITCHES_RANGE[1]:g})", _fig9_switches),
        _cpu(networks),
    )
    return Experiment("network_sim", "Shared operator networks with privacy switches, simulated "
                      "(Zaki et al. §6, Figs. 8–9)", _prepare(networks), tuple(pipelines), targets, notes=NOTES,
                      tables=tables, plots=plots, explain=explain, repeats=1, warmup=False)
