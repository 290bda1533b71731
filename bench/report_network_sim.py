"""Experiment 5's part of ``bench/results/README.md``: targets and section (Zaki et al. Figs. 8-9).

Like the rest of the report, the layout depends only on the settings of the run, never
on the numbers. Times are the simulator's upper bound in ms for 1,000 input tuples.
The section carries its own targets table (``bench/report.py``'s table lists the other
experiments' checks).
"""

from __future__ import annotations

import math
from typing import Any

from bench.network_sim import (PAPER_FIG9_OPERATORS, PAPER_FIG9_SWITCHES, PAPER_LOSS_SAVINGS_PCT,
                               PAPER_SHARING_SAVINGS_PCT, PAPER_SWITCH_OVERHEAD_PCT)
from bench.report import Check, _table

PAPER = "paper (PrS), §6."
#: Tolerances for "about": percentage points around the paper's value.
SAVINGS_TOLERANCE = 5.0
OVERHEAD_LIMIT = 1.0
SWITCH_SPREAD = 1.25
FIG9_SWITCHES_RANGE = (9.0, 13.0)
CPU_LIMIT_S = 20.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _f(value: float, digits: int = 1) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.{digits}f}"


def lost_count(pattern: str) -> int:
    """How many queries a pattern key (``"none"``, ``"q1"``, ``"q1+q2"``) names."""
    return 0 if pattern == "none" else pattern.count("+") + 1


def loss_savings(point: dict[str, Any], lost: int) -> float:
    """Mean saving (%) over the patterns where ``lost`` queries lost all their users."""
    return _mean([v for k, v in point["loss_savings_pct"].items() if lost_count(k) == lost])


def _degree(p: dict[str, Any]) -> str:
    return f"{p['config']['sharing']:.0%}"


# -- checks -----------------------------------------------------------------------------------
def network_sim_checks(ns: dict[str, Any]) -> list[Check]:
    fig8, fig9, cfg = ns["fig8"], ns["fig9"], ns["settings"]
    checks = []
    savings = [p["sharing_savings_pct"] for p in fig8]
    mean = _mean(savings)
    checks.append(Check(f"{PAPER}2", f"sharing saves about {PAPER_SHARING_SAVINGS_PCT:g} % against no sharing "
                        f"(taken as ±{SAVINGS_TOLERANCE:g} points)",
                        f"{mean:.1f} % on average over Fig. 8's points ({min(savings):.1f}–{max(savings):.1f} %), "
                        f"{cfg['users']} users per network",
                        abs(mean - PAPER_SHARING_SAVINGS_PCT) <= SAVINGS_TOLERANCE))
    overhead = [p["switch_overhead_pct"] for p in fig8 + fig9]
    mean = _mean(overhead)
    checks.append(Check(f"{PAPER}2", f"switches add about {PAPER_SWITCH_OVERHEAD_PCT:g} % with full access "
                        f"(taken as ≤ {OVERHEAD_LIMIT:g} %)",
                        f"{mean:.2f} % on average over Figs. 8-9 ({min(overhead):.2f}–{max(overhead):.2f} %)",
                        mean <= OVERHEAD_LIMIT))
    for lost, paper in sorted(PAPER_LOSS_SAVINGS_PCT.items(), reverse=True):
        per_degree = [(p, loss_savings(p, lost)) for p in fig9]
        mean = _mean([v for _, v in per_degree])
        checks.append(Check(f"{PAPER}3", f"about {paper:g} % saved when {lost} of 3 queries lose access "
                            f"(against post-filtering; taken as ±{SAVINGS_TOLERANCE:g} points)",
                            f"{mean:.1f} % on average over the degrees ("
                            + ", ".join(f"{_degree(p)}: {v:.1f}" for p, v in per_degree) + ")",
                            abs(mean - paper) <= SAVINGS_TOLERANCE))
    one = [loss_savings(p, 1) for p in fig9]
    checks.append(Check(f"{PAPER}3", "switches save more at lower degrees of sharing (one query lost)",
                        " → ".join(f"{v:.1f} %" for v in one) + " (20 % → 80 %)",
                        all(b < a for a, b in zip(one, one[1:]))))
    spreads = []
    for queries, operators in cfg["fig8"]:
        counts = [p["switches"]["total"] for p in fig8 if p["config"]["queries"] == queries
                  and p["config"]["operators"] == operators]
        spreads.append((queries, operators, min(counts), max(counts)))
    checks.append(Check(f"{PAPER}2", f"number of switches insensitive to the degree of sharing (taken as max/min ≤ "
                        f"{SWITCH_SPREAD:g})",
                        "; ".join(f"{q} queries / {o} ops: {lo:.1f}–{hi:.1f}" for q, o, lo, hi in spreads),
                        all(hi / lo <= SWITCH_SPREAD for _, _, lo, hi in spreads)))
    switches = _mean([p["switches"]["total"] for p in fig9])
    ops = _mean([p["operators"] for p in fig9])
    low, high = FIG9_SWITCHES_RANGE
    checks.append(Check(f"{PAPER}3", f"on average {PAPER_FIG9_SWITCHES} switches in Fig. 9's networks "
                        f"(~{PAPER_FIG9_OPERATORS} operators; taken as {low:g}–{high:g})",
                        f"{switches:.1f} switches, {ops:.1f} operators", low <= switches <= high))
    worst = max(p["cpu_s_per_10k"] for p in fig8 + fig9)
    full = cfg["networks"] >= 10_000
    checks.append(Check("issue 5", f"10,000 networks per point, simulated in < {CPU_LIMIT_S:g} s CPU per point",
                        f"{cfg['networks']:,} networks per point; slowest point {worst:.1f} s CPU per 10,000 networks",
                        (worst < CPU_LIMIT_S) if full else None))
    return checks


# -- section ----------------------------------------------------------------------------------
def _run_line(run: dict[str, Any] | None) -> str:
    if not run:
        return ""
    duration = run.get("duration_s")
    took = f", {duration / 60:.1f} min" if isinstance(duration, (int, float)) and not math.isnan(duration) else ""
    when = f", {run['when']}" if run.get("when") else ""
    return (f"Numbers from `{run.get('command', 'python -m bench.run')}` ({run.get('mode')} run{took}, commit "
            f"{run.get('commit', 'unknown')}{when}). ")


def _fig8_rows(ns: dict[str, Any]) -> list[tuple[object, ...]]:
    rows = []
    for p in ns["fig8"]:
        c, sw = p["config"], p["switches"]
        rows.append((f"{c['queries']} q / {c['operators']} ops", _degree(p), f"{p['sharing']:.0%}",
                     _f(p["operators"]), _f(p["common_prefix"]),
                     f"{sw['initial']:.1f} / {sw['in-network']:.1f} / {sw['terminal']:.0f}",
                     _f(p["no_sharing_ms"], 0), _f(p["shared_ms"], 0), _f(p["switched_ms"], 0),
                     f"{p['sharing_savings_pct']:.1f} %", f"{p['switch_overhead_pct']:.2f} %", _f(p["cpu_s"])))
    return rows


def _fig9_table(ns: dict[str, Any]) -> str:
    fig9 = ns["fig9"]
    patterns = [k for k in fig9[0]["loss_ms"] if k != "none"]
    header = ["sharing", "ops", "switches", "shared, no PrSs", "with PrSs"] + [f"loss {k}" for k in patterns]
    rows = []
    for p in fig9:
        row = [_degree(p), _f(p["operators"]), _f(p["switches"]["total"]), _f(p["shared_ms"], 0),
               _f(p["switched_ms"], 0)]
        row += [f"{p['loss_ms'][k]:,.0f} (−{p['loss_savings_pct'][k]:.1f} %)" for k in patterns]
        rows.append(row)
    mean = ["mean", _f(_mean([p["operators"] for p in fig9])), _f(_mean([p["switches"]["total"] for p in fig9])),
            _f(_mean([p["shared_ms"] for p in fig9]), 0), _f(_mean([p["switched_ms"] for p in fig9]), 0)]
    mean += [f"{_mean([p['loss_ms'][k] for p in fig9]):,.0f} (−{_mean([p['loss_savings_pct'][k] for p in fig9]):.1f} %)"
             for k in patterns]
    rows.append(mean)
    return _table(header, rows)


def _sensitivity_rows(ns: dict[str, Any]) -> list[tuple[object, ...]]:
    return [(p["config"]["users"], p["config"]["costs"]["sp_scope"], _f(p["no_sharing_ms"], 0), _f(p["shared_ms"], 0),
             _f(p["switched_ms"], 0), f"{p['sharing_savings_pct']:.1f} %", f"{p['switch_overhead_pct']:.2f} %")
            for p in ns["sensitivity"]]


def _observations(ns: dict[str, Any]) -> list[str]:
    notes = []
    sens = ns["sensitivity"]
    by = {(p["config"]["users"], p["config"]["costs"]["sp_scope"]): p for p in sens}
    near = [u for (u, s), p in by.items() if s == "all"
            and abs(p["sharing_savings_pct"] - PAPER_SHARING_SAVINGS_PCT) <= SAVINGS_TOLERANCE]
    cheap = [u for (u, s), p in by.items() if s == "all" and p["switch_overhead_pct"] <= OVERHEAD_LIMIT]
    if sens:
        notes.append(
            "Both headline numbers of Fig. 8 depend on the number of users, which the paper does not give: no sharing "
            "runs one copy of a query per user, so its cost grows with the users, and every switch processes every "
            "user's SPs. In the sensitivity table (3 queries, 15 operators, sharing "
            f"{ns['settings']['sensitivity_degree']:.0%}) the sharing saving is within ±{SAVINGS_TOLERANCE:g} points "
            f"of {PAPER_SHARING_SAVINGS_PCT:g} % for "
            + (", ".join(f"{u} users" for u in sorted(near)) if near else "none of the user counts")
            + f", and the switches cost ≤ {OVERHEAD_LIMIT:g} % for "
            + (", ".join(f"{u} users" for u in sorted(cheap)) if cheap else "none of them")
            + " (SPs priced at every switch they reach); "
            + (f"{', '.join(str(u) for u in sorted(set(near) & set(cheap)))} users give both."
               if set(near) & set(cheap) else "no user count gives both of the paper's numbers under this cost model."))
    fig9 = ns["fig9"]
    if fig9:
        everything = _mean([p["loss_savings_pct"].get("+".join(f"q{i + 1}" for i in range(3)), math.nan)
                            for p in fig9])
        notes.append(
            "With switches, the common prefix always runs: when all three queries lose access the network still "
            f"costs {100 - everything:.0f} % of post-filtering on average (the shared operators, and the switches' "
            "SPs), because Algorithm 2 places no switch in front of the common prefix.")
    return notes


def network_sim_section(ns: dict[str, Any], run: dict[str, Any] | None = None) -> str:
    cfg = ns["settings"]
    load = ns["load_average"]
    fig8_sets = ", ".join(f"{q} queries / {o} operators" for q, o in cfg["fig8"])
    checks = network_sim_checks(ns)
    out = ["## 5. Shared operator networks with privacy switches, simulated (Zaki et al. §6, Figs. 8–9)", "",
           _run_line(run)
           + "Paper: Zaki, Adaikkalavan, Ray, Gamble, *Access Control in Shared-Operator Networks for DSMSs*, "
           "DBSec 2021 (its text gives the numbers quoted here; the figures are not available as numbers). "
           "Simulated with `streamwarden.papers.network.simulator` (pure Python, no Spark): random shared-operator "
           f"networks with {cfg['streams']} input streams and {cfg['users']} users (each assigned to one query "
           "output at random, every query with at least one), generated with the join-push-down rule (SELECTs, "
           "then JOINs, then a final PROJECT along every path); Algorithm 2 places the switches. Cost model "
           "(the paper's upper bound for 1,000 input tuples): every operator processes all 1,000 tuples unless "
           "a switch shuts it off; 0.1 ms per tuple for SELECT and PROJECT, 0.3 ms for JOIN, 0.1 ms per SP at a "
           "switch; every 100 tuples an SP for each user, injected into every stream of the user's query, which "
           "every switch downstream of such a stream processes (matching or not). *Shared, no PrSs*: the same "
           "network with a post-filter at each query output (priced like a terminal switch). *No sharing*: each "
           "user runs their own copy of their query's operators. Savings under access loss are against "
           f"*shared, no PrSs*. {cfg['networks']:,} networks per point (seeded from {cfg['seed']}); "
           f"degrees of sharing are targets, the realized share of common-prefix operators is shown too. "
           "Generator and cost model in detail: the module docstring of `streamwarden/papers/network/simulator.py`. "
           f"1-minute load average {load['before'][0]:.1f} before and {load['after'][0]:.1f} after.", "",
           "### Paper claims and targets (this experiment)", "",
           _table(["source", "claim / target", "this run", "verdict"],
                  [(c.source, c.claim, c.measured, c.verdict) for c in checks]), ""]
    notes = _observations(ns)
    if notes:
        out += [f"- {n}" for n in notes] + [""]
    out += [f"### Fig. 8: execution time vs degree of sharing ({fig8_sets})", "",
            "Switches: initial / in-network / terminal, per network on average. *Sharing saves*: shared (no PrSs) "
            "against no sharing; *switches add*: with PrSs against without, full access. Paper: sharing saves about "
            f"{PAPER_SHARING_SAVINGS_PCT:g} %, switches add about {PAPER_SWITCH_OVERHEAD_PCT:g} %, and neither the "
            "switch count nor the times depend much on the degree of sharing.", "",
            _table(["setting", "sharing (target)", "sharing (realized)", "ops", "common prefix", "switches I / N / T",
                    "no sharing ms", "shared, no PrSs ms", "with PrSs ms", "sharing saves", "switches add",
                    "CPU s"], _fig8_rows(ns)), "",
            "![Fig. 8: execution time vs degree of sharing](network_sim_fig8.png)", "",
            f"### Fig. 9: access loss ({cfg['streams']} streams, {cfg['fig9_queries']} queries, "
            f"{cfg['fig9_operators']} operators)", "",
            "ms for 1,000 input tuples with switches when the queries named lose all their users (saving against "
            "shared, no PrSs, in brackets). Paper: on average 11 switches; about "
            f"{PAPER_LOSS_SAVINGS_PCT[2]:g} % saved when two of three queries lose access, "
            f"{PAPER_LOSS_SAVINGS_PCT[1]:g} % for one; more at lower degrees of sharing.", "",
            _fig9_table(ns), "",
            "![Fig. 9: access loss](network_sim_fig9.png)", "",
            f"### Sensitivity: users per network, and which SPs a switch pays for (3 queries, 15 operators, sharing "
            f"{cfg['sensitivity_degree']:.0%}, {cfg['sensitivity_networks']:,} networks per row)", "",
            "*all*: a switch pays for every SP that reaches it (the model above); *matching*: only for its own "
            "query's SPs (the paper: switches \"execute infrequently (only when they encounter a new SPs in the "
            "streams that match the query id)\").", "",
            _table(["users", "SPs paid", "no sharing ms", "shared, no PrSs ms", "with PrSs ms", "sharing saves",
                    "switches add"], _sensitivity_rows(ns)), ""]
    return "\n".join(out)
