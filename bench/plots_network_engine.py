"""Experiment 7's PNG plot (one engine, issue 12), in :mod:`bench.plots`' style.

Three panels: median latency per configuration (p90 whisker) with the 1.5× target; CPU
per file in steady state (JVM, this Python process, Python workers stacked) with the
targets drawn against the plain heaviest query and the separate runs; throughput of the
mixed network against the unsecured one with the 0.7× target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.engine_latency import PLAIN as LAT_PLAIN
from bench.engine_mixed import UNSECURED_NETWORK
from bench.engine_steady import SEPARATE
from bench.network_engine import TARGET_LATENCY_RATIO, TARGET_MIXED_RATIO, TARGET_PLAIN_RATIO, TARGET_SEPARATE_RATIO
from bench.plots import _save, plt
from bench.report_network_engine import heaviest_plain


def engine_plot(ne: dict[str, Any], path: Path) -> None:
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.8), gridspec_kw={"width_ratios": [1, 1.6, 1]})
    lat = ne["latency"]["configurations"]
    names = list(lat)
    medians = [lat[n]["median_ms"] for n in names]
    errors = [[0] * len(names), [max(lat[n]["p90_ms"] - lat[n]["median_ms"], 0) for n in names]]
    a1.bar(range(len(names)), medians, color=["tab:gray" if n.startswith(LAT_PLAIN) else "tab:blue" for n in names],
           yerr=errors, capsize=4)
    a1.axhline(TARGET_LATENCY_RATIO * lat[LAT_PLAIN]["median_ms"], color="tab:red", ls="--", lw=1.2,
               label=f"target: {TARGET_LATENCY_RATIO:g}× plain")
    a1.set_xticks(range(len(names)), labels=names, fontsize=8)
    a1.set_ylabel("ms, file landing → rows in the output (median, p90)")
    a1.set_title(f"Latency (trigger {ne['latency']['trigger_ms']} ms)", fontsize=10)
    a1.legend(fontsize=8)
    a1.grid(True, axis="y", alpha=0.3)

    st = ne["steady"]["configurations"]
    names = list(st)
    bottom = [0.0] * len(names)
    for key, color, label in (("jvm_ms_per_file", "tab:blue", "Spark JVM"),
                              ("driver_ms_per_file", "tab:orange", "this Python process"),
                              ("workers_ms_per_file", "tab:green", "Python workers")):
        values = [max(st[n][key], 0.0) for n in names]
        a2.bar(range(len(names)), values, bottom=bottom, color=color, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    heavy_name, heavy = heaviest_plain(ne["steady"])
    a2.axhline(TARGET_PLAIN_RATIO * heavy["cpu_ms_per_file"], color="tab:red", ls="--", lw=1.2,
               label=f"network target: {TARGET_PLAIN_RATIO:g}× {heavy_name}")
    if SEPARATE in st:
        a2.axhline(TARGET_SEPARATE_RATIO * st[SEPARATE]["cpu_ms_per_file"], color="tab:purple", ls=":", lw=1.2,
                   label=f"network target: {TARGET_SEPARATE_RATIO:g}× separate")
    a2.set_ylim(0, 1.35 * max(bottom + [TARGET_PLAIN_RATIO * heavy["cpu_ms_per_file"]]))
    a2.set_xticks(range(len(names)), labels=[n.replace(", ", ",\n") for n in names], fontsize=7)
    a2.set_ylabel("CPU ms per file (one micro-batch with data per query)")
    a2.set_title("Steady state", fontsize=10)
    a2.legend(fontsize=7)
    a2.grid(True, axis="y", alpha=0.3)

    mx = ne["mixed"]["configurations"]
    names = list(mx)
    a3.bar(range(len(names)), [mx[n]["records_per_s"] for n in names],
           color=["tab:blue" if i == 0 else "tab:gray" for i in range(len(names))])
    a3.axhline(TARGET_MIXED_RATIO * mx[UNSECURED_NETWORK]["records_per_s"], color="tab:red", ls="--", lw=1.2,
               label=f"target: {TARGET_MIXED_RATIO:g}× unsecured network")
    a3.set_ylim(0, 1.3 * max(mx[n]["records_per_s"] for n in names))
    a3.set_xticks(range(len(names)), labels=[n.replace(" ", "\n", 1) for n in names], fontsize=8)
    a3.set_ylabel("input records per second (median)")
    a3.set_title("Role policies, shields and levels at once", fontsize=10)
    a3.legend(fontsize=8, loc="upper left")
    a3.grid(True, axis="y", alpha=0.3)
    fig.suptitle("One engine (issue 12), measured side by side", fontsize=10)
    _save(fig, path)


def network_engine_plots(ne: dict[str, Any], out: Path) -> list[str]:
    """Write the plot; returns the file names."""
    engine_plot(ne, out / "network_engine.png")
    return ["network_engine.png"]


__all__ = ["engine_plot", "network_engine_plots"]
