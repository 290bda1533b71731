"""Experiment 6's PNG plot (the shared-network scenario on Spark, one run), in :mod:`bench.plots`' style.

Left: CPU seconds per configuration (JVM, this Python process, Python workers stacked;
median run) with issue 5's sharing target drawn against the separate runs. Right: CPU
saved when queries lose access, against the paper's averages (grey).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.deployments import SEPARATE
from bench.network_spark import TARGET_SHARED_RATIO
from bench.plots import PAPER_COLOR, _save, plt
from bench.report_network_spark import config


def cpu_per_configuration(ns: dict[str, Any], path: Path) -> None:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1.7, 1]})
    configs = ns["configurations"]
    xs = range(len(configs))
    bottom = [0.0] * len(configs)
    for key, color, label in (("jvm_cpu_s", "tab:blue", "Spark JVM"), ("driver_cpu_s", "tab:orange",
                                                                        "this Python process"),
                              ("workers_cpu_s", "tab:green", "Python workers")):
        values = [max(c[key], 0.0) for c in configs]
        ax.bar(xs, values, bottom=bottom, color=color, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    separate = config(ns, SEPARATE)
    if separate:
        ax.axhline(TARGET_SHARED_RATIO * separate["cpu_s"], color="tab:red", ls="--", lw=1.2,
                   label=f"issue 5 target for the network: < {TARGET_SHARED_RATIO:g}× separate")
    ax.set_ylim(0, 1.3 * max(bottom))
    ax.set_xticks(list(xs), labels=[c["name"].replace(", ", ",\n") for c in configs], fontsize=8)
    ax.set_ylabel("CPU seconds per run (median run)")
    ax.set_title("CPU per configuration", fontsize=10)
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    loss = ns["loss"]
    ax2.bar(range(len(loss)), [p["saved_cpu_pct"] for p in loss], color="tab:blue", label="measured")
    paper = [(i, p["paper_pct"]) for i, p in enumerate(loss) if p["paper_pct"] is not None]
    if paper:
        ax2.scatter([i for i, _ in paper], [v for _, v in paper], marker="_", s=900, color=PAPER_COLOR, zorder=3,
                    label="paper (average over random networks)")
    ax2.axhline(0, color="black", lw=0.6)
    highest = max([p["saved_cpu_pct"] for p in loss] + [v for _, v in paper] + [1.0])
    ax2.set_ylim(min(0.0, min((p["saved_cpu_pct"] for p in loss), default=0.0)) * 1.3, 1.35 * highest)
    ax2.set_xticks(range(len(loss)), labels=[f"{p['pattern'].replace('+', ' & ')}\nlost" for p in loss], fontsize=8)
    ax2.set_ylabel("CPU saved against full access (%)")
    ax2.set_title("Queries losing access", fontsize=10)
    ax2.legend(fontsize=8, loc="upper left")
    ax2.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Shared network on Spark ({sum(ns['tuples'].values()):,} input tuples, "
                 f"{ns['settings']['reps']} round{'s' if ns['settings']['reps'] != 1 else ''}, medians)", fontsize=10)
    _save(fig, path)


def network_spark_plots(ns: dict[str, Any], out: Path) -> list[str]:
    """Write the plot; returns the file names."""
    cpu_per_configuration(ns, out / "network_spark_cpu.png")
    return ["network_spark_cpu.png"]


__all__ = ["cpu_per_configuration", "network_spark_plots"]
