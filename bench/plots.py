"""The benchmark's PNG plots (matplotlib, Agg backend: no display needed).

Each function takes the plain-data results of :mod:`bench.rewriting`,
:mod:`bench.runtime`, :mod:`bench.punctuation` or :mod:`bench.levels` and writes one
file. PNGs are saved without the "Software" metadata so that re-running with the same
numbers gives the same bytes.
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


def _paper_marks(ax: Any, points: dict[float, float], label: str) -> None:
    xs = sorted(points)
    ax.plot(xs, [points[x] for x in xs], "D--" if len(xs) > 1 else "D", color=PAPER_COLOR, label=label)


def sp_shield_cost(results: dict[str, Any], path: Path) -> None:
    """Fig. 13: shield cost per 1,000 tuples vs SP ratio (a) and role count (b), with the paper's values."""
    from bench.punctuation import PAPER_FIG13A_RATIO1_MS, PAPER_FIG13B_MS

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (key, by, title) in zip(axes, (("by_ratio", "sp_ratio", "13a: vs SP ratio (tuples per policy)"),
                                            ("by_roles", "roles", "13b: vs roles in the shield's state"))):
        rows = sorted(results[key], key=lambda p: p[by])
        x = [p[by] for p in rows]
        ax.plot(x, [p["shield_ms_per_1000"] for p in rows], "o-", color="tab:blue", label="with shield")
        ax.plot(x, [p["no_shield_ms_per_1000"] for p in rows], "s-", color="tab:gray", label="without shield")
        ax.plot(x, [p["overhead_ms_per_1000"] for p in rows], "^-", color="tab:red",
                label="shield cost (with − without)")
        ax.plot(x, [p["overhead_cpu_ms_per_1000"] for p in rows], "^:", color="tab:red", alpha=0.6,
                label="shield cost, CPU time")
        if key == "by_ratio":
            _paper_marks(ax, {1: PAPER_FIG13A_RATIO1_MS}, "paper Fig. 13a: ≈ 4 ms at ratio 1")
        else:
            _paper_marks(ax, dict(PAPER_FIG13B_MS), "paper Fig. 13b: 1.31 → 11.31 ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("SP ratio" if by == "sp_ratio" else "roles")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("ms per 1,000 tuples (execution wall time, log)")
    fig.suptitle("Security Shield cost (lower is better)")
    _save(fig, path)


def sp_placement(results: dict[str, Any], path: Path) -> None:
    """Figs. 14 and 15: shield pushed down / up / absent vs the selection's selectivity, per role count."""
    points = results["placement"]
    roles = sorted({p["roles"] for p in points}, reverse=True)
    fig, axes = plt.subplots(1, len(roles), figsize=(5.5 * len(roles), 4.2), sharey=True, squeeze=False)
    for ax, r in zip(axes[0], roles):
        rows = sorted((p for p in points if p["roles"] == r), key=lambda p: p["target_selectivity"])
        x = [p["selectivity"] for p in rows]
        for name, style, color in (("pushed down", "o-", "tab:blue"), ("pushed up", "s-", "tab:orange"),
                                   ("no shield", "x--", "tab:gray")):
            ax.plot(x, [p["ms_per_1000"][name] for p in rows], style, color=color,
                    label=name if name != "no shield" else "no shield (Fig. 15)")
        ax.set_xlabel("selectivity of speed > X (measured)")
        ax.set_title(f"Fig. 14{'a' if r >= 100 else 'b'}: {r} roles (paper: {'up' if r >= 100 else 'down'} cheaper)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("ms per 1,000 tuples (execution wall time)")
    axes[0][0].set_ylim(bottom=0)
    axes[0][-1].legend(fontsize=8)
    _save(fig, path)


def sp_scjoin(results: dict[str, Any], path: Path) -> None:
    """Fig. 16: SCJoin strategies vs SP ratio, policy similarity and join selectivity."""
    sweeps = (("sp ratio", "sp_ratio", "16a: SP ratio"), ("similarity", "similarity", "16b: policy similarity"),
              ("selectivity", "target_selectivity", "16c: join selectivity"))
    present = [s for s in sweeps if any(s[0] in p["sweeps"] for p in results["joins"])]
    fig, axes = plt.subplots(1, len(present), figsize=(5 * len(present), 4.2), sharey=True, squeeze=False)
    for ax, (sweep, key, title) in zip(axes[0], present):
        rows = sorted((p for p in results["joins"] if sweep in p["sweeps"]), key=lambda p: p[key])
        x = [p[key] for p in rows]
        for name, style, color in (("probe-and-filter", "o-", "tab:blue"), ("filter-and-probe", "s-", "tab:green"),
                                   ("adaptive", "x--", "tab:red"),
                                   ("probe-and-filter, no push-down", "o:", "tab:purple")):
            y = [p["ms_per_1000"].get(name, math.nan) for p in rows]
            if _finite(y):
                ax.plot(x, y, style, color=color, label=name if "no push-down" not in name
                        else "probe-and-filter, Spark push-down off (diagnostic)")
        if sweep != "similarity":
            ax.set_xscale("log")
        ax.set_xlabel(title.split(": ")[1])
        ax.set_title(f"Fig. {title}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ms per 1,000 input tuples (execution wall time)")
    axes[0][0].set_ylim(bottom=0)
    axes[0][-1].legend(fontsize=8)
    _save(fig, path)


def levels_throughput(results: dict[str, Any], path: Path) -> None:
    """Input tuples per second, unsecured and secured at one level, per query; the 0.9× target."""
    narrow, top = results["settings"]["narrow_level"], "[T, T]"
    points = results["throughput"]
    series = (("unsecured", "unsecured", "tab:gray"), (f"secured {top}", f"secured at {top}", "tab:blue"),
              (f"secured {narrow}", f"secured at {narrow}", "tab:green"))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / len(series)
    for i, (name, label, color) in enumerate(series):
        x = [j + (i - 1) * width for j in range(len(points))]
        ax.bar(x, [p["rows_per_s"][name] / 1000 for p in points], width, color=color, label=label)
    for j, p in enumerate(points):  # the target: 0.9× the unsecured rate
        target = 0.9 * p["rows_per_s"]["unsecured"] / 1000
        ax.plot([j - 1.5 * width, j + 1.5 * width], [target, target], "k--", lw=1,
                label="target: 0.9× unsecured" if j == 0 else None)
    ax.set_xticks(range(len(points)), labels=[_level_query_label(p) for p in points])
    ax.set_ylabel("input tuples per second of wall time (thousands)")
    ax.set_title("Secured at one level vs unsecured (replay, higher is better)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    _save(fig, path)


def _level_query_label(p: dict[str, Any]) -> str:
    window = p["window"]
    if isinstance(window, int):
        return f"{p['shape']}\n[ROWS {window}]"
    if isinstance(window, str):
        return f"{p['shape']}\n[RANGE {window}]"
    return "selection"


def levels_windows(results: dict[str, Any], path: Path) -> None:
    """ms per 1,000 tuples of the same aggregate over [ROWS n] (left) and [RANGE d] (right)."""
    points, top = results["windows"], "[T, T]"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, counted in zip(axes, (True, False)):
        for shape, style, face in (("count", "-", None), ("per service", "--", "white")):
            rows = [p for p in points if p["shape"] == shape and isinstance(p["window"], int) == counted]
            if not rows:
                continue
            labels = [str(p["window"]) for p in rows]
            for name, marker, color in (("unsecured", "s", "tab:gray"), (f"secured {top}", "o", "tab:blue")):
                ax.plot(labels, [p["ms_per_1000"][name] for p in rows], style, marker=marker, color=color,
                        mfc=face or color, label=f"{shape}, {name}")
        ax.set_xlabel("[ROWS n]: n" if counted else "[RANGE d]: d")
        ax.set_title("count-based windows" if counted else "event-time windows (tumbling)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("ms per 1,000 input tuples (execution wall time)")
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=8)
    fig.suptitle("The same aggregate over [ROWS n] and [RANGE d] (lower is better)")
    _save(fig, path)


def levels_processors(results: dict[str, Any], path: Path) -> None:
    """Cost of one processor per level against the levels in use, with the fitted lines."""
    in_use = results["levels_in_use"]
    points, fits = in_use["points"], in_use["fits"]
    ks = [p["k"] for p in points]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    panels = ((axes[0], (("wall_s", "wall time", "tab:gray"), ("cpu_s", "CPU time, all processes", "tab:blue"),
                         ("jvm_cpu_s", "CPU time, Spark JVM", "tab:cyan")), 1.0, "seconds"),
              (axes[1], (("peak_rss_bytes", "peak RSS, process tree", "tab:purple"),
                         ("peak_heap_bytes", "peak JVM heap", "tab:orange"),
                         ("live_heap_bytes", "JVM heap after GC (max)", "tab:red")), 2**20, "MiB"))
    line = [0, max(ks)]
    for ax, series, scale, unit in panels:
        for metric, label, color in series:
            ax.plot(ks, [p[metric] / scale for p in points], "o", color=color, label=label)
            fit = fits[metric]
            if not math.isnan(fit["b"]):
                ax.plot(line, [(fit["a"] + fit["b"] * k) / scale for k in line], "-", color=color, alpha=0.6, lw=1)
        ax.set_xlabel("levels in use (one processor each)")
        ax.set_ylabel(unit)
        ax.set_xticks(ks)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title("Time (lines: least-squares fit a + b·k)")
    axes[1].set_title("Memory")
    fig.suptitle(f"One processor per level: {in_use['query']}", fontsize=9)
    _save(fig, path)


def all_plots(rewriting: dict[str, Any] | None, runtime: dict[str, Any] | None, out: Path,
              punctuation: dict[str, Any] | None = None, levels: dict[str, Any] | None = None) -> list[str]:
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
    if punctuation:
        sp_shield_cost(punctuation, out / "sp_shield_cost.png")
        written.append("sp_shield_cost.png")
        if punctuation["placement"]:
            sp_placement(punctuation, out / "sp_placement.png")
            written.append("sp_placement.png")
        if punctuation["joins"]:
            sp_scjoin(punctuation, out / "sp_scjoin.png")
            written.append("sp_scjoin.png")
    if levels:
        levels_throughput(levels, out / "levels_throughput.png")
        levels_windows(levels, out / "levels_windows.png")
        levels_processors(levels, out / "levels_processors.png")
        written += ["levels_throughput.png", "levels_windows.png", "levels_processors.png"]
    return written
