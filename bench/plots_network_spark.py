"""Experiment 6's PNG plot (shared networks with privacy switches on Spark), in :mod:`bench.plots`' style.

Takes the plain-data results of :mod:`bench.network_spark`; the paper's numbers (from
its text) are drawn in grey.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.network_spark import FULL, POST, SWITCHES, TARGET_OVERHEAD_PCT, UNSHARED
from bench.plots import _save, plt
from bench.report_network_spark import _config


def cpu_per_pattern(results: dict[str, Any], path: Path) -> None:
    """Left: CPU per access pattern, post-filtering against switches (and one query per
    network); right: the savings per pattern against the paper's averages."""
    patterns = [FULL] + [p["pattern"] for p in results["loss"]]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1.8, 1]})
    width = 0.38
    for i, (kind, color, label) in enumerate(((POST, "tab:gray", "shared, post-filtering (no switches)"),
                                              (SWITCHES, "tab:blue", "shared with switches"))):
        xs = [j + (i - 0.5) * width for j in range(len(patterns))]
        ys = [_config(results, kind, p)["cpu_s"] for p in patterns]  # type: ignore[index]
        ax.bar(xs, ys, width, color=color, label=label)
    unshared = _config(results, UNSHARED)
    if unshared:
        ax.axhline(unshared["cpu_s"], color="tab:red", ls="--", lw=1.2,
                   label=f"one Spark query per query, full access ({unshared['cpu_s']:.1f} s)")
    ax.set_xticks(range(len(patterns)), labels=["full access" if p == FULL else f"{p.replace('+', ' & ')}\nlost"
                                                for p in patterns], fontsize=8)
    ax.set_ylabel("CPU seconds per run (median; JVM + Python)")
    ax.set_title("CPU per access pattern")
    ax.set_ylim(0, 1.25 * max([unshared["cpu_s"] if unshared else 0]
                              + [_config(results, k, p)["cpu_s"] for p in patterns  # type: ignore[index]
                                 for k in (POST, SWITCHES)]))
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(True, axis="y", alpha=0.3)
    loss = results["loss"]
    xs = list(range(len(loss)))
    colors = {1: "tab:green", 2: "tab:purple", 3: "tab:brown"}
    ax2.bar(xs, [p["saved_cpu_pct"] for p in loss], color=[colors.get(p["lost"], "tab:gray") for p in loss])
    for i, p in enumerate(loss):  # each round's saving (paired: both ran in the same round)
        rounds = p["saved_cpu_pct_rounds"]
        ax2.plot([i] * len(rounds), rounds, "k.", ms=4, label="one round" if i == 0 and len(rounds) > 1 else None)
    paper = results["paper"]["loss_savings_pct"]
    for lost, value in ((int(k), v) for k, v in paper.items()):
        members = [i for i, p in enumerate(loss) if p["lost"] == lost]
        if members:
            ax2.hlines(value, members[0] - 0.45, members[-1] + 0.45, color="black", ls="--", lw=1.2, zorder=3,
                       label="paper (average over random networks)" if lost == 1 else None)
            ax2.text(members[0] - 0.4, value + 1, f"paper: {value:g} %", color="black", fontsize=8, zorder=3,
                     bbox={"facecolor": "white", "alpha": 0.7, "lw": 0, "pad": 1})
    over = results["overhead"]["cpu_pct_paired"]
    ax2.set_xticks(xs, labels=[p["pattern"].replace("+", "\n& ") for p in loss], fontsize=7)
    ax2.set_ylabel("CPU saved by the switches (%)")
    ax2.set_title(f"Savings under access loss\n(switch overhead, full access: {over:+.2f} %; target ≤ "
                  f"{TARGET_OVERHEAD_PCT:g} %)", fontsize=10)
    ax2.axhline(0, color="black", lw=0.6)
    ax2.grid(True, axis="y", alpha=0.3)
    if ax2.get_legend_handles_labels()[0]:
        ax2.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Shared network of {len(results['network']['queries'])} queries on Spark, "
                 f"{sum(results['tuples'].values()):,} input tuples ({results['settings']['reps']} round"
                 f"{'s' if results['settings']['reps'] != 1 else ''}, medians)",
                 fontsize=10)
    _save(fig, path)


def network_spark_plots(results: dict[str, Any], out: Path) -> list[str]:
    """Write the plot; returns the file names."""
    cpu_per_pattern(results, out / "network_spark_cpu.png")
    return ["network_spark_cpu.png"]
