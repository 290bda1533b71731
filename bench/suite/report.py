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

from bench.suite.experiment import statistic

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

#: Numbers a process may report of itself, shown when present: (key, column title).
SELF_REPORTED = (("startup_s", "start-up s"), ("build_s", "build s"), ("write_s", "job s"), ("job_cpu_s", "job CPU s"))
_VERDICT = {True: "met", False: "**not met**", None: "not measured"}


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:  # counts (graphs, solver calls) as counts
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _median(runs: Sequence[dict[str, Any]], key: str) -> float:
    return statistic(runs, key, "median")


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
    lines += _default_table(results) if not results.get("tables") else []
    for table in results.get("tables") or ():
        lines += _table(results, table)
    if reference:
        lines += ["", f"{reference['label']}: {reference['source']}."]
    if results["targets"]:
        met = sum(t["met"] is True for t in results["targets"])
        judged = sum(t["met"] is not None for t in results["targets"])
        lines += ["", f"## Targets ({met} of {judged} met)", "", "| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {t['text']} | {t['measured']} | {_VERDICT[t['met']]} |" for t in results["targets"]]
    if results.get("observations"):
        lines += ["", "## Observations", ""] + [f"- {note}" for note in results["observations"]]
    if results.get("notes"):
        lines += ["", "## How it was measured", ""] + [f"- {note}" for note in results["notes"]]
    if plots:
        lines += [""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    return "\n".join(lines) + "\n"


def _default_table(results: dict[str, Any]) -> list[str]:
    """A line per pipeline: times, rows per second, rows out, per-core figures, self-reported times."""
    per_core, reference = results.get("per_core"), results.get("reference")
    lines: list[str] = []
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
    return lines


def _coordinates(pipeline: dict[str, Any]) -> dict[str, Any]:
    return {"group": pipeline["group"], "variant": pipeline["variant"], **pipeline.get("params", {})}


def _at(results: dict[str, Any], where: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in results["pipelines"] if all(_coordinates(p).get(k) == v for k, v in where.items())]


def _keyed(pipelines: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """``pipelines`` by their values of the coordinates ``names``, in order of first appearance."""
    keyed: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for pipeline in pipelines:
        at = _coordinates(pipeline)
        keyed.setdefault(tuple(at.get(name) for name in names), []).append(pipeline)
    return keyed


def cell(members: Sequence[dict[str, Any]], column: dict[str, Any]) -> float:
    """The value of ``column`` (a :class:`~bench.suite.experiment.Column` as stored) among ``members``,
    the pipelines of one table row or plot point: NaN when its pipeline is missing or ambiguous."""

    def one(variant: str | None) -> dict[str, Any] | None:
        chosen = [p for p in members if variant is None or p["variant"] == variant]
        return chosen[0] if len(chosen) == 1 else None

    pipeline = one(column["variant"])
    if pipeline is None:
        return math.nan
    value = statistic(pipeline["runs"], column["metric"], column["stat"])
    if column["over"] is not None:
        below = one(column["over"])
        denominator = statistic(below["runs"], column["metric"], column["stat"]) if below else math.nan
        value = value / denominator if denominator != 0 else math.nan
    return value * column["scale"]


def _table(results: dict[str, Any], table: dict[str, Any]) -> list[str]:
    rows = _keyed(_at(results, table["where"]), table["rows"])
    header = [*table["rows"], *(c["title"] for c in table["columns"])]
    lines = ["", f"### {table['title']}", ""] + ([table["text"], ""] if table["text"] else [])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, members in rows.items():
        values = [f"{v:,}" if isinstance(v, int) else _number(v) if isinstance(v, float) else str(v) for v in key]
        for column in table["columns"]:
            value = cell(members, column)
            text = f"{value:.2f}" if column["over"] is not None and not math.isnan(value) else _number(value)
            values.append(text + (column["unit"] if not math.isnan(value) else ""))
        lines.append("| " + " | ".join(values) + " |")
    return lines


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


def _declared_plot(results: dict[str, Any], plot: dict[str, Any], path: Path) -> None:
    """A declared :class:`~bench.suite.experiment.Plot`: ``y`` against ``x``, one series per ``series`` key."""
    columns = [plot["y"], *plot.get("also", ())]
    series = _keyed(_at(results, plot["where"]), plot["series"])
    fig, ax = plt.subplots(figsize=(8.0, 4.5))
    xs_all = [_coordinates(p).get(plot["x"]) for members in series.values() for p in members]
    numeric = all(isinstance(x, (int, float)) for x in xs_all)
    categories = list(dict.fromkeys(xs_all))
    lines = [(column, key, members) for column in columns for key, members in series.items()]
    width = 0.8 / max(1, len(lines))
    for s_index, (column, key, members) in enumerate(lines):
        ratio = column["over"] is not None
        points = _keyed(members, (plot["x"],))
        xs, ys, low, high = [], [], [], []
        for (x,), at_x in points.items():
            value = cell(at_x, column)
            if math.isnan(value):
                continue
            position = x if numeric and plot["kind"] == "lines" else categories.index(x)
            xs.append(position + (s_index * width if plot["kind"] == "bars" else 0))
            ys.append(value)
            chosen = [p for p in at_x if column["variant"] is None or p["variant"] == column["variant"]]
            spread = [] if ratio or len(chosen) != 1 else [float(r[column["metric"]]) * column["scale"]
                                                             for r in chosen[0]["runs"]
                                                             if r.get(column["metric"]) is not None]
            low.append(value - min(spread) if spread else 0.0)
            high.append(max(spread) - value if spread else 0.0)
        label = ", ".join([column["title"]] * (len(columns) > 1) + [str(k) for k in key if k not in ("", None)])
        label = label or column["title"]
        if plot["kind"] == "bars":
            ax.bar(xs, ys, width, yerr=[low, high], capsize=2, label=label)
        else:
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=2, label=label)
    if plot["kind"] == "bars" or not numeric:
        offset = 0.4 - width / 2 if plot["kind"] == "bars" else 0.0
        ax.set_xticks([i + offset for i in range(len(categories))], labels=[str(c) for c in categories])
    for label, value in plot.get("references", {}).items():
        ax.axhline(value, color="0.3", linestyle="--", linewidth=1)
        ax.annotate(label, (0.01, value), xycoords=("axes fraction", "data"), fontsize=7, va="bottom")
    if plot["log"]:
        ax.set_yscale("log")
    if plot.get("log_x") and numeric and plot["kind"] == "lines":
        ax.set_xscale("log")
    ax.set_xlabel(plot["x"])
    ax.set_ylabel(plot["y"]["title"] if len(columns) == 1 else plot["title"])
    ax.set_title(plot["title"], fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def plot_files(results: dict[str, Any]) -> list[str]:
    """The PNG names an experiment's report shows: its declared plots, else rows in per second
    (and per core, when it has a ``per_core`` fact)."""
    name = results["experiment"]
    if results.get("plots"):
        return [f"{name}_{plot['name']}.png" for plot in results["plots"]]
    return [f"{name}_rows_per_s.png"] + ([f"{name}_per_core.png"] if results.get("per_core") else [])


def render(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``<name>.md`` and its PNG plots into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = [out_dir / f for f in plot_files(results)]
    if results.get("plots"):
        for plot, path in zip(results["plots"], plots):
            _declared_plot(results, plot, path)
    else:
        _bars(results, "rows_per_s", "rows in per second", plots[0])
        if results.get("per_core"):
            _bars(results, "per_core", f"{results['per_core']} per second per core", plots[1], log=True)
    report = out_dir / f"{results['experiment']}.md"
    report.write_text(markdown(results, [str(p) for p in plots]), encoding="utf-8")
    return [report, *plots]


def section(results: dict[str, Any]) -> str:
    """The experiment's report one heading level down, for the README of every experiment."""
    return "\n".join(("#" + line) if line.startswith("#") else line
                     for line in markdown(results, plot_files(results)).splitlines()) + "\n"


def verdict(met: bool | None) -> str:
    """A target's verdict in words (``met``, ``**not met**``, ``not measured``)."""
    return _VERDICT[met]
