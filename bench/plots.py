"""The benchmark's PNG plots (matplotlib, Agg backend: no display needed).

Each function takes the plain-data results of :mod:`bench.rewriting` or
:mod:`bench.runtime` and writes one file. PNGs are saved without the "Software"
metadata so that re-running with the same numbers gives the same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

PAPER_COLOR = "0.45"
DATASET_STYLE = {"uni": "-", "norm": "--"}
DATASET_LABEL = {"uni": "uniHealth", "norm": "normHealth"}
PIPELINE_COLOR = {"unsecured": "tab:gray", "rewritten": "tab:blue", "rewritten, no _policies": "tab:cyan",
                  "post-filtering": "tab:red", "post-filtering, pushed down": "tab:orange"}


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def _finite(values: list[float]) -> bool:
    return any(not math.isnan(v) for v in values)


def rewriting_operators(results: dict[str, Any], path: Path) -> None:
    """Cold rewriting time (median, p95 whisker) vs operators, one line per policy count."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    table = results["table"]
    for policies in sorted({row["policies"] for row in table}):
        rows = sorted((r for r in table if r["policies"] == policies), key=lambda r: r["operators"])
        x = [r["operators"] for r in rows]
        y = [r["cold_median_ms"] for r in rows]
        err = [[0] * len(rows), [max(r["cold_p95_ms"] - r["cold_median_ms"], 0) for r in rows]]
        line = ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"{policies} policies (cold, p95 whisker)")
        for r in rows:  # hollow marker: the policies leave some input unauthorized, no graph is produced
            if r["graphs"] == 0:
                ax.plot(r["operators"], r["cold_median_ms"], "o", mfc="white", color=line[0].get_color(), zorder=5)
        ax.plot(x, [r["warm_median_ms"] for r in rows], ":", color=line[0].get_color(), alpha=0.7)
    ax.axhline(200, color=PAPER_COLOR, ls="--", lw=1, label="paper Fig. 8a: < 200 ms (Q1–Q5)")
    ax.plot([60], [20], "v", color="black", label="issue target: Q5 / 50 policies < 20 ms")
    ax.plot([200], [1000], "v", color="tab:red", label="issue target: 200 ops / 1,000 policies < 1 s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([5, 10, 20, 30, 60, 200], labels=["Q1\n5", "Q2\n10", "Q3\n20", "Q4\n30", "Q5\n60", "Q200\n200"])
    ax.set_xlabel("query operators")
    ax.set_ylabel("rewriting time (ms, log)")
    ax.set_title("Rewriting time vs query size (dotted: warm caches; hollow: no graph)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, path)


def rewriting_policies(results: dict[str, Any], path: Path) -> None:
    """Q3 rewriting time vs number of policies (Fig. 8b)."""
    rows = sorted(results["policy_sweep"], key=lambda r: r["policies"])
    x = [r["policies"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    err = [[0] * len(rows), [max(r["cold_p95_ms"] - r["cold_median_ms"], 0) for r in rows]]
    ax.errorbar(x, [r["cold_median_ms"] for r in rows], yerr=err, marker="o", capsize=3,
                label="cold caches (median, p95 whisker)")
    ax.plot(x, [r["warm_median_ms"] for r in rows], marker="s", label="warm caches (median)")
    ax.axhline(120, color=PAPER_COLOR, ls="--", lw=1, label="paper Fig. 8b: < 120 ms at 50 policies")
    ax.set_yscale("log")
    ax.set_xlabel("policies for the user's role")
    ax.set_ylabel("rewriting time of Q3 (ms, log)")
    ax.set_title("Rewriting time vs policies (Q3)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, path)


def _sweep(points: list[dict[str, Any]], dataset: str, *, by: str, window: int, selectivity: float
           ) -> list[dict[str, Any]]:
    if by == "selectivity":
        chosen = [p for p in points if p["dataset"] == dataset and p["window_s"] == window]
        return sorted(chosen, key=lambda p: p["target_selectivity"])
    chosen = [p for p in points if p["dataset"] == dataset and p["target_selectivity"] == selectivity]
    return sorted(chosen, key=lambda p: p["window_s"])


def relative_joins(results: dict[str, Any], path: Path) -> None:
    """Fig. 9a: relative joins (rewritten / post-filtering, %) vs policy selectivity."""
    points, cfg = results["points"], results["settings"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for dataset in DATASET_STYLE:
        rows = _sweep(points, dataset, by="selectivity", window=cfg["selectivity_window_s"],
                      selectivity=cfg["window_selectivity"])
        if not rows:
            continue
        x = [p["target_selectivity"] for p in rows]
        style = DATASET_STYLE[dataset]
        ax.plot(x, [p["relative_window_joins_pct"] for p in rows], style, marker="o", color="tab:blue",
                label=f"rewrite-{dataset}: window pairs (paper's measure)")
        ax.plot(x, [p["relative_key_joins_pct"] for p in rows], style, marker="x", color="tab:green",
                label=f"rewrite-{dataset}: same-SID pairs (Spark's hash join)")
        ax.plot(x, [p["relative_join_input_rows_pct"] for p in rows], style, marker=".", color="tab:purple",
                label=f"rewrite-{dataset}: tuples entering the join (Spark metric)")
    ax.axhline(100, color="tab:red", lw=1, label="post-filtering (100 %)")
    ax.set_xlabel("policy selectivity (target; measured values in the report)")
    ax.set_ylabel("relative joins (%)")
    ax.set_ylim(0, 110)
    ax.set_title(f"Relative joins, window {cfg['selectivity_window_s']} s")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    _save(fig, path)


def _two_panels(results: dict[str, Any], path: Path, series: list[tuple[str, str, str]], ylabel: str,
                title: str) -> None:
    points, cfg = results["points"], results["settings"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, by in zip(axes, ("window", "selectivity")):
        for dataset, style in DATASET_STYLE.items():
            rows = _sweep(points, dataset, by=by, window=cfg["selectivity_window_s"],
                          selectivity=cfg["window_selectivity"])
            if not rows:
                continue
            x = [p["window_s"] if by == "window" else p["target_selectivity"] for p in rows]
            for key, label, color in series:
                y = [p[key] for p in rows]
                if _finite(y):
                    ax.plot(x, y, style, marker="o", color=color, label=f"{label}, {DATASET_LABEL[dataset]}")
        ax.axhline(100, color="tab:red", lw=1, label="post-filtering (100 %)")
        if by == "window":
            ax.set_xlabel("join window (s)")
            ax.set_title(f"{title} vs window, selectivity {cfg['window_selectivity']}")
        else:
            ax.set_xlabel("policy selectivity")
            ax.set_title(f"{title} vs selectivity, window {cfg['selectivity_window_s']} s")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=7)
    _save(fig, path)


def relative_cpu(results: dict[str, Any], path: Path) -> None:
    """Fig. 9b: relative CPU time (rewritten / post-filtering, %)."""
    _two_panels(results, path, [
        ("relative_executor_cpu_pct", "executor CPU", "tab:blue"),
        ("relative_process_cpu_pct", "JVM process CPU", "tab:green"),
        ("relative_wall_pct", "wall time", "tab:gray"),
    ], "rewritten / post-filtering (%)", "Relative CPU time")


def relative_memory(results: dict[str, Any], path: Path) -> None:
    """Fig. 9c: relative memory (rewritten / post-filtering, %)."""
    _two_panels(results, path, [
        ("relative_join_state_pct", "join hash table bytes", "tab:blue"),
        ("relative_join_input_rows_pct", "tuples entering the join", "tab:purple"),
        ("relative_heap_pct", "peak JVM heap (noisy)", "tab:gray"),
    ], "rewritten / post-filtering (%)", "Relative memory")


def throughput(results: dict[str, Any], path: Path) -> None:
    """Input rows per second of wall time, per pipeline."""
    points, cfg = results["points"], results["settings"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, by in zip(axes, ("window", "selectivity")):
        for dataset, style in DATASET_STYLE.items():
            rows = _sweep(points, dataset, by=by, window=cfg["selectivity_window_s"],
                          selectivity=cfg["window_selectivity"])
            if not rows:
                continue
            x = [p["window_s"] if by == "window" else p["target_selectivity"] for p in rows]
            for name, color in PIPELINE_COLOR.items():
                y = [p["rows_per_s"].get(name, math.nan) for p in rows]
                if _finite(y):
                    ax.plot(x, [v / 1000 for v in y], style, marker="o", color=color,
                            label=f"{name}, {DATASET_LABEL[dataset]}")
        ax.set_xlabel("join window (s)" if by == "window" else "policy selectivity")
        ax.set_title(f"vs window, selectivity {cfg['window_selectivity']}" if by == "window"
                     else f"vs selectivity, window {cfg['selectivity_window_s']} s")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("input rows per second of wall time (thousands)")
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=7)
    fig.suptitle("Throughput (higher is better)")
    _save(fig, path)


def all_plots(rewriting: dict[str, Any] | None, runtime: dict[str, Any] | None, out: Path) -> list[str]:
    """Write every plot whose data exists; returns the file names written."""
    written = []
    if rewriting:
        rewriting_operators(rewriting, out / "rewriting_operators.png")
        rewriting_policies(rewriting, out / "rewriting_policies.png")
        written += ["rewriting_operators.png", "rewriting_policies.png"]
    if runtime:
        relative_joins(runtime, out / "relative_joins.png")
        relative_cpu(runtime, out / "relative_cpu.png")
        relative_memory(runtime, out / "relative_memory.png")
        throughput(runtime, out / "throughput.png")
        written += ["relative_joins.png", "relative_cpu.png", "relative_memory.png", "throughput.png"]
    return written
