"""Render any experiment's results (``bench/results/<name>.json``) as markdown and PNG bar plots.

One module for every experiment: the table has a line per pipeline (medians over the runs
of wall and CPU time, rows in per wall and per CPU second, rows out, the workload's ``per_core`` fact per
CPU second, of the whole process and of its job alone when it reports that, and next to
them the experiment's published reference for the group; then the times a process reports
of itself, such as its start-up), and every target with its verdict (met, not met, or not
measured) and the measured value. Plots: rows in per second and, when the
experiment has a ``per_core`` fact, throughput per core beside the reference, one bar per
pipeline grouped by the report's rows. PNGs carry no "Software" metadata, so the same
numbers give the same bytes (as ``bench/plots.py``).

    >>> # written = render(json.loads(Path("bench/results/nexmark.json").read_text()), Path("bench/results"))
    >>> _number(1234567.0), _number(0.123), _number(float("nan"))
    ('1,234,567', '0.12', '—')
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

#: Numbers a process may report of itself, shown when present: (key, column title).
SELF_REPORTED = (("startup_s", "start-up s"), ("build_s", "build s"), ("write_s", "job s"), ("job_cpu_s", "job CPU s"))
_VERDICT = {True: "met", False: "**not met**", None: "not measured"}


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _median(runs: Sequence[dict[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else math.nan


def _groups(results: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for pipeline in results["pipelines"]:
        if pipeline["group"] not in seen:
            seen.append(pipeline["group"])
    return seen


def markdown(results: dict[str, Any], plots: Sequence[str] = ()) -> str:
    """The report's text: what ran where, the table, the targets, the notes and the plots."""
    machine, versions = results["machine"], results["versions"]
    reference = results.get("reference")
    per_core = results.get("per_core")
    load = results.get("load_average")
    lines = [f"# {results['title']}", "",
             f"`{results['command']}` — {results['when']}, "
             + ("in-process pipelines warmed up once, then " if results.get("warmup") else "")
             + f"{results['repeats']} interleaved runs per pipeline, "
             f"{results['duration_s'] / 60:.1f} min in all (inputs prepared once in {results['prepare_s']} s).", "",
             f"- **Machine**: {machine.get('cpus')} CPUs ({machine.get('cpu_model')}), "
             f"{machine.get('memory_gib')} GiB, {machine.get('os')}; streamwarden {machine.get('streamwarden_commit')}"
             + (f"; load average (1, 5, 15 min) {load['start']} at the start, {load['end']} at the end"
                if load else ""),
             f"- **Versions**: Spark {versions.get('spark')}, Python {versions.get('python')}, "
             f"Java {versions.get('java')}",
             f"- **Workload**: {results['workload']}: "
             + ", ".join(f"{k} {v:,}" for k, v in results["facts"].items()), ""]
    present = [(k, t) for k, t in SELF_REPORTED if any(k in r for p in results["pipelines"] for r in p["runs"])]
    header = ["", "pipeline", "wall s", "CPU s", "rows in/s", "rows in/CPU s", "rows out"]
    job_core = per_core and any("per_core_job" in r for p in results["pipelines"] for r in p["runs"])
    if per_core:
        header.append(f"{per_core}/s per core")
        if job_core:
            header.append(f"{per_core}/s per core, job only")
        if reference:
            header.append(f"{reference['label']}, {reference['unit']}")
    header += [title for _, title in present]
    lines += ["Medians over the runs; rows in are the records of the streams a pipeline reads.", "",
              "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for group in _groups(results):
        first = True
        for pipeline in (p for p in results["pipelines"] if p["group"] == group):
            runs = pipeline["runs"]
            row = [f"**{group}**" if first else "", pipeline["variant"] or pipeline["name"],
                   _number(_median(runs, "wall_s")), _number(_median(runs, "cpu_s")),
                   _number(_median(runs, "rows_per_s")), _number(_median(runs, "rows_per_cpu_s")),
                   _number(_median(runs, "rows_out"))]
            if per_core:
                row.append(_number(_median(runs, "per_core")))
                if job_core:
                    row.append(_number(_median(runs, "per_core_job")))
                if reference:
                    value = reference["values"].get(group)
                    row.append(_number(value) if first and value is not None else "")
            row += [_number(_median(runs, key)) for key, _ in present]
            lines.append("| " + " | ".join(row) + " |")
            first = False
    if reference:
        lines += ["", f"{reference['label']}: {reference['source']}."]
    if results["targets"]:
        met = sum(t["met"] is True for t in results["targets"])
        judged = sum(t["met"] is not None for t in results["targets"])
        lines += ["", f"## Targets ({met} of {judged} met)", "", "| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {t['text']} | {t['measured']} | {_VERDICT[t['met']]} |" for t in results["targets"]]
    if results.get("notes"):
        lines += ["", "## How it was measured", ""] + [f"- {note}" for note in results["notes"]]
    if plots:
        lines += [""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    return "\n".join(lines) + "\n"


def _bars(results: dict[str, Any], metric: str, ylabel: str, path: Path, *, log: bool = False) -> None:
    groups = _groups(results)
    variants: list[str] = []
    for pipeline in results["pipelines"]:
        if pipeline["variant"] not in variants:
            variants.append(pipeline["variant"])
    width = 0.8 / (len(variants) + (1 if metric == "per_core" and results.get("reference") else 0))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.2 * len(groups) + 5), 4.5))
    lowest = math.inf
    for v, variant in enumerate(variants):
        xs, ys, low, high = [], [], [], []
        for g, group in enumerate(groups):
            pipeline = next((p for p in results["pipelines"] if p["group"] == group and p["variant"] == variant), None)
            if pipeline is None:
                continue
            values = [float(r[metric]) for r in pipeline["runs"] if r.get(metric) is not None]
            if not values:
                continue
            middle = statistics.median(values)
            lowest = min(lowest, min(values))
            xs.append(g + v * width)
            ys.append(middle)
            low.append(middle - min(values))
            high.append(max(values) - middle)
        ax.bar(xs, ys, width, yerr=[low, high], capsize=2, label=variant)
    reference = results.get("reference")
    if metric == "per_core" and reference:
        xs = [g + len(variants) * width for g, group in enumerate(groups) if group in reference["values"]]
        ys = [reference["values"][group] for group in groups if group in reference["values"]]
        ax.bar(xs, ys, width, color="0.3", hatch="//", label=reference["label"])
        lowest = min([lowest, *ys])
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], labels=groups)
    if log:
        ax.set_yscale("log")
        if math.isfinite(lowest) and lowest > 0:  # every bar rises from below the smallest value
            ax.set_ylim(bottom=lowest / 2)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{results['title']}: {ylabel} (median, min-max whiskers)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def render(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``<name>.md`` and its PNG plots into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = results["experiment"]
    plots = [out_dir / f"{name}_rows_per_s.png"]
    _bars(results, "rows_per_s", "rows in per second", plots[0])
    if results.get("per_core"):
        plots.append(out_dir / f"{name}_per_core.png")
        _bars(results, "per_core", f"{results['per_core']} per second per core", plots[-1], log=True)
    report = out_dir / f"{name}.md"
    report.write_text(markdown(results, [str(p) for p in plots]), encoding="utf-8")
    return [report, *plots]
