"""Experiment 5: shared operator networks with privacy switches, simulated (Zaki et al. §6).

Pure Python (no Spark): :func:`streamwarden.papers.network.simulator.simulate` generates random
shared-operator networks, places the switches with Algorithm 2 and prices each network
for 1,000 input tuples with the paper's cost model (upper bound).

* Fig. 8 — execution time of no sharing, shared without switches (post-filtering) and
  shared with switches against the degree of sharing (20-80 %), for 3 queries / 15
  operators and 5 queries / 25 operators.
* Fig. 9 — 3 streams, 3 queries, ~20 operators: the same, plus every pattern of access
  loss (which queries lose all their users).
* Sensitivity — the paper does not say how many users its networks had; sharing savings
  and switch overhead both depend on it (and on which SPs a switch pays for), so both
  are shown for a few user counts.

Every point averages ``networks`` networks from one seeded generator (seed per point
derived from ``seed``), so a run is reproducible; the CPU time per point is recorded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from streamwarden.papers.network.simulator import CostModel, SimConfig, SimulationResult, simulate

#: The paper's numbers, from its text (§6.2, §6.3); the figures are not available as numbers.
PAPER_SHARING_SAVINGS_PCT = 92.0
PAPER_SWITCH_OVERHEAD_PCT = 0.5
PAPER_LOSS_SAVINGS_PCT = {1: 19.0, 2: 38.0}  # queries (of 3) losing all their users
PAPER_FIG9_OPERATORS = 20
PAPER_FIG9_SWITCHES = 11


@dataclass(frozen=True)
class Settings:
    """Sizes of experiment 5; ``quick`` is the smoke version."""

    networks: int = 10_000  # per point, as in the paper
    seed: int = 2021
    streams: int = 3
    users: int = 10  # not given by the paper; see the sensitivity table
    degrees: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
    fig8: tuple[tuple[int, int], ...] = ((3, 15), (5, 25))  # (queries, operators)
    fig9_queries: int = 3
    fig9_operators: int = PAPER_FIG9_OPERATORS
    sensitivity_users: tuple[int, ...] = (3, 10, 30)
    sensitivity_scopes: tuple[str, ...] = ("all", "matching")
    sensitivity_networks: int = 2_000
    sensitivity_degree: float = 0.5

    @classmethod
    def quick(cls) -> "Settings":
        return cls(networks=500, sensitivity_networks=200)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _point(config: SimConfig, networks: int, seed: int, patterns: bool) -> dict[str, Any]:
    cpu = time.process_time()
    result: SimulationResult = simulate(config, networks=networks, seed=seed, patterns=patterns)
    cpu = time.process_time() - cpu
    data = result.as_dict()
    data["cpu_s"] = round(cpu, 2)
    data["cpu_s_per_10k"] = round(cpu * 10_000 / networks, 2)
    return data


def run(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every point of Figs. 8 and 9 and the sensitivity table, as plain data."""
    load_before = os.getloadavg()
    seed = iter(range(settings.seed, settings.seed + 10_000))
    fig8 = []
    for queries, operators in settings.fig8:
        for degree in settings.degrees:
            cfg = SimConfig(streams=settings.streams, queries=queries, users=settings.users, operators=operators,
                            sharing=degree)
            p = _point(cfg, settings.networks, next(seed), patterns=False)
            fig8.append(p)
            log(f"  Fig. 8, {queries} queries / {operators} operators, sharing {degree:.0%}: no sharing "
                f"{p['no_sharing_ms']:,.0f} ms, shared {p['shared_ms']:,.0f} ms, with switches "
                f"{p['switched_ms']:,.0f} ms ({p['cpu_s']:.1f} s CPU)")
    fig9 = []
    for degree in settings.degrees:
        cfg = SimConfig(streams=settings.streams, queries=settings.fig9_queries, users=settings.users,
                        operators=settings.fig9_operators, sharing=degree)
        p = _point(cfg, settings.networks, next(seed), patterns=True)
        fig9.append(p)
        one = [v for k, v in p["loss_savings_pct"].items() if k != "none" and k.count("+") == 0]
        two = [v for k, v in p["loss_savings_pct"].items() if k.count("+") == 1]
        log(f"  Fig. 9, sharing {degree:.0%}: saved {sum(one) / len(one):.1f} % (one query lost), "
            f"{sum(two) / len(two):.1f} % (two), {p['switches']['total']:.1f} switches ({p['cpu_s']:.1f} s CPU)")
    sensitivity = []
    for users in settings.sensitivity_users:
        for scope in settings.sensitivity_scopes:
            cfg = SimConfig(streams=settings.streams, queries=3, users=users, operators=15,
                            sharing=settings.sensitivity_degree, costs=CostModel(sp_scope=scope))
            p = _point(cfg, settings.sensitivity_networks, next(seed), patterns=False)
            sensitivity.append(p)
    log(f"  sensitivity: {len(sensitivity)} points")
    load_after = os.getloadavg()
    return {
        "settings": settings.as_dict(),
        "fig8": fig8,
        "fig9": fig9,
        "sensitivity": sensitivity,
        "paper": {"sharing_savings_pct": PAPER_SHARING_SAVINGS_PCT, "switch_overhead_pct": PAPER_SWITCH_OVERHEAD_PCT,
                  "loss_savings_pct": {str(k): v for k, v in PAPER_LOSS_SAVINGS_PCT.items()},
                  "fig9_operators": PAPER_FIG9_OPERATORS, "fig9_switches": PAPER_FIG9_SWITCHES},
        "load_average": {"before": [round(v, 2) for v in load_before], "after": [round(v, 2) for v in load_after]},
    }
