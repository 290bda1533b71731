"""Experiment 5's PNG plots (Zaki et al. Figs. 8-9), in :mod:`bench.plots`' style.

Each function takes the plain-data results of :mod:`bench.network_sim` and writes one
file; the paper's numbers (from its text) are drawn in grey.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.network_sim import PAPER_LOSS_SAVINGS_PCT, PAPER_SHARING_SAVINGS_PCT
from bench.plots import PAPER_COLOR, _save, plt
from bench.report_network_sim import loss_savings, lost_count

SERIES = (("no_sharing_ms", "no sharing", "tab:red", "s-"), ("shared_ms", "shared, no PrSs (post-filtering)",
                                                                "tab:gray", "o-"),
          ("switched_ms", "shared with PrSs", "tab:blue", "^--"))


def fig8(results: dict[str, Any], path: Path) -> None:
    """Execution time (log2 ms) vs degree of sharing, one panel per (queries, operators)."""
    sets = results["settings"]["fig8"]
    fig, axes = plt.subplots(1, len(sets), figsize=(5.5 * len(sets), 4.2), sharey=True, squeeze=False)
    for ax, (queries, operators) in zip(axes[0], sets):
        points = [p for p in results["fig8"] if p["config"]["queries"] == queries
                  and p["config"]["operators"] == operators]
        x = [100 * p["config"]["sharing"] for p in points]
        for key, label, color, style in SERIES:
            ax.plot(x, [p[key] for p in points], style, color=color, label=label)
        ax.plot(x, [(1 - PAPER_SHARING_SAVINGS_PCT / 100) * p["no_sharing_ms"] for p in points], ":",
                color=PAPER_COLOR, label=f"paper: shared = no sharing − {PAPER_SHARING_SAVINGS_PCT:g} %")
        ax.set_yscale("log", base=2)
        ax.set_xticks(x)
        ax.set_xlabel("degree of sharing (%)")
        ax.set_title(f"Fig. 8: {queries} queries, {operators} operators")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ms per 1,000 input tuples (upper bound, log2)")
    axes[0][-1].legend(fontsize=8, loc="center right")
    fig.suptitle(f"Simulated execution time ({results['settings']['networks']:,} networks per point, "
                 f"{results['settings']['users']} users)")
    _save(fig, path)


def fig9(results: dict[str, Any], path: Path) -> None:
    """Time per access-loss pattern and degree (bars, as Fig. 9), and the savings vs the paper's."""
    points = results["fig9"]
    patterns = [k for k in points[0]["loss_ms"] if 0 < lost_count(k) < results["settings"]["fig9_queries"]]
    bars = [("shared_ms", "shared, no PrSs"), ("switched_ms", "shared with PrSs")] + [
        (k, f"access loss ({k.replace('+', ' & ')})") for k in patterns]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [2.2, 1]})
    width = 0.8 / len(bars)
    cmap = plt.get_cmap("tab10")
    for i, (key, label) in enumerate(bars):
        xs = [j + (i - (len(bars) - 1) / 2) * width for j in range(len(points))]
        ys = [p[key] if key in p else p["loss_ms"][key] for p in points]
        ax.bar(xs, ys, width, color=cmap(i % 10), label=label)
    ax.set_xticks(range(len(points)), labels=[f"degree = {p['config']['sharing']:.0%}" for p in points])
    ax.set_ylabel("ms per 1,000 input tuples (upper bound)")
    ax.set_title("Fig. 9: time per pattern of access loss")
    ax.set_ylim(0, 1.35 * max(p["shared_ms"] for p in points))
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    ax.grid(True, axis="y", alpha=0.3)
    x = [100 * p["config"]["sharing"] for p in points]
    for lost, color in ((1, "tab:green"), (2, "tab:purple")):
        ax2.plot(x, [loss_savings(p, lost) for p in points], "o-", color=color,
                 label=f"{lost} of {results['settings']['fig9_queries']} queries lost")
        ax2.axhline(PAPER_LOSS_SAVINGS_PCT[lost], color=PAPER_COLOR, ls="--", lw=1)
        ax2.text(x[0], PAPER_LOSS_SAVINGS_PCT[lost] + 1, f"paper: {PAPER_LOSS_SAVINGS_PCT[lost]:g} %",
                 color=PAPER_COLOR, fontsize=8)
    ax2.set_xticks(x)
    ax2.set_xlabel("degree of sharing (%)")
    ax2.set_ylabel("saved against shared, no PrSs (%)")
    ax2.set_ylim(bottom=0)
    ax2.set_title("Savings under access loss")
    ax2.legend(fontsize=8)
    ax2.grid(True, alpha=0.3)
    _save(fig, path)


def network_sim_plots(results: dict[str, Any], out: Path) -> list[str]:
    """Write both plots; returns the file names."""
    fig8(results, out / "network_sim_fig8.png")
    fig9(results, out / "network_sim_fig9.png")
    return ["network_sim_fig8.png", "network_sim_fig9.png"]
