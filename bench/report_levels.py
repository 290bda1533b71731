"""Experiment 4's part of ``bench/results/README.md``: checks and section (security levels).

Like the rest of the report, the layout depends only on the settings of the run, never
on the timings. Costs are milliseconds per 1,000 input tuples of execution wall time
unless a column says CPU; rows per second count input tuples.
"""

from __future__ import annotations

import math
from typing import Any

from bench.levels import window_text
from bench.report import Check, _mib, _ms, _num, _pct, _table, _x
from bench.report_punctuation import _finite, _reps_text

ISSUE = "issue 4"
#: The target of the issue: a single-level query keeps this share of the unsecured rows/s.
THROUGHPUT_TARGET = 0.9
#: "Linear, not worse": the cost at the largest k lies at most this share of it above the
#: straight line through the two smallest k (an allowance for run-to-run noise).
EXCESS_TOLERANCE = 0.2
LABELS = {"selection": "selection", "count": "aggregate", "per service": "aggregate per service"}
FIT_LABELS = {"wall_s": ("wall time", "s"), "cpu_s": ("CPU time, all processes", "s"),
              "jvm_cpu_s": ("CPU time, Spark JVM and workers", "s"),
              "driver_cpu_s": ("CPU time, Python driver", "s"), "trigger_ms": ("micro-batch time, summed", "ms"),
              "peak_rss_bytes": ("peak RSS, process tree", "MiB"), "peak_heap_bytes": ("peak JVM heap", "MiB"),
              "live_heap_bytes": ("JVM heap after GC (max)", "MiB"),
              "state_bytes": ("state store memory", "KiB")}
RUNS = ("run(s) of each pipeline", "runs of each pipeline")  # the unit of _reps_text here


def _window(p: dict[str, Any]) -> str:
    window = p["window"]
    if not isinstance(window, (int, str)) or isinstance(window, bool):  # the selection (None, NaN once reloaded)
        return "—"
    return window_text(window)


def _query_label(p: dict[str, Any]) -> str:
    return LABELS[p["shape"]] + ("" if _window(p) == "—" else f" {_window(p)}")


def _unit(value: float, unit: str) -> str:
    if not _finite(value):
        return "—"
    if unit == "MiB":
        return _mib(value)
    if unit == "KiB":
        return f"{value / 1024:,.0f}"
    return f"{value:,.0f}" if unit == "ms" else f"{value:.2f}"


# -- checks -----------------------------------------------------------------------------------
def levels_checks(lv: dict[str, Any]) -> list[Check]:
    cfg = lv["settings"]
    checks = []
    top = "[T, T]"
    ratios = [(p, p["relative_throughput"][top]) for p in lv["throughput"]]
    worst = min((r for _, r in ratios), default=math.nan)
    text = "; ".join(f"{_query_label(p)}: {_x(r)} ({_num(p['rows_per_s'][f'secured {top}'])} vs "
                     f"{_num(p['rows_per_s']['unsecured'])} tuples/s; CPU {_x(p['relative_throughput_cpu'][top])})"
                     for p, r in ratios)
    checks.append(Check(ISSUE, f"a single-level query keeps ≥ {THROUGHPUT_TARGET:g}× the unsecured rows/s (level "
                        f"{top}: every tuple visible, so both do the same work)", text,
                        _finite(worst) and worst >= THROUGHPUT_TARGET))
    narrow = cfg["narrow_level"]
    share = lv["data"]["visible"][narrow] / lv["data"]["tuples"]  # about the same in every input
    ratios = [(p, p["relative_throughput"][narrow]) for p in lv["throughput"]]
    worst = min((r for _, r in ratios), default=math.nan)
    checks.append(Check(ISSUE, f"… and at a narrow level, {narrow} (sees {_pct(100 * share)} of the tuples)",
                        "; ".join(f"{_query_label(p)}: {_x(r)}" for p, r in ratios),
                        _finite(worst) and worst >= THROUGHPUT_TARGET))
    in_use = lv["levels_in_use"]
    points = in_use["points"]
    if len(points) >= 3:
        ks = [p["k"] for p in points]
        for metric in ("cpu_s", "live_heap_bytes"):
            fit = in_use["fits"][metric]
            label, unit = FIT_LABELS[metric]
            excess = fit["excess"]
            text = (f"{label}: {_unit(fit['b'], unit)} {unit} per level + {_unit(fit['a'], unit)} {unit} (least "
                    f"squares, largest residual {_pct(100 * fit['max_relative_residual'])}); cost({ks[-1]}) is "
                    f"{_pct(100 * excess)} {'above' if excess > 0 else 'below'} the line through k = {ks[0]} and "
                    f"{ks[1]}; a level added at k = {ks[-2]}→{ks[-1]} cost {_x(fit['slope_growth'])} one added at "
                    f"k = {ks[0]}→{ks[1]}")
            checks.append(Check(ISSUE, f"one processor per level: {label} grows linearly with the levels in use, "
                                f"not worse (k = {', '.join(map(str, ks))}; taken as: cost({ks[-1]}) at most "
                                f"{_pct(100 * EXCESS_TOLERANCE)} above the line through k = {ks[0]} and {ks[1]})",
                                text, _finite(excess) and excess <= EXCESS_TOLERANCE))
    all_points = _unique(lv["throughput"] + lv["windows"])
    bad = [p for p in all_points if not p["ok"]]
    checks.append(Check(ISSUE, "every replay pipeline returns the rows an independent count of the generated data "
                        "predicts (secured at each level, and unsecured)",
                        f"{len(all_points) - len(bad)}/{len(all_points)} configurations agree", not bad))
    return checks


def _unique(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Throughput and window points may be the same configuration: count it once."""
    return list({(p["shape"], str(p["window"])): p for p in points}.values())


# -- section ----------------------------------------------------------------------------------
def _throughput(lv: dict[str, Any]) -> list[str]:
    cfg = lv["settings"]
    narrow, top = cfg["narrow_level"], "[T, T]"
    large = cfg.get("large_minutes")
    out = ["### Throughput: secured at one level against unsecured (replay)", "",
           f"Input tuples per second of execution wall time (medians). *Secured* is `build_job(...).union()` at the "
           f"level shown (its rows carry `level`, included in the checksum); *unsecured* is `unsecured_frame` (same "
           f"reader, no shepherd, no level). At {top} the shepherd labels every tuple and the guard keeps all; at "
           f"{narrow} it keeps the *visible* tuples. "
           + (f"The selection and the [RANGE] aggregate run over a longer input ({large:g} min of the same "
              "traffic), so that a run takes about a second rather than the fixed cost of a Spark job. "
              if isinstance(large, (int, float)) and _finite(large) else "")
           + "Rows: unsecured / secured at each level, all matching the independent count.", ""]
    rows = []
    for p in lv["throughput"]:
        ms, rps, m = p["ms_per_1000"], p["rows_per_s"], p["pipelines"]
        rows.append((_query_label(p), _num(p["tuples"]), _num(p["visible"][narrow]), _ms(ms["unsecured"]),
                     _ms(ms[f"secured {top}"]), _ms(ms[f"secured {narrow}"]),
                     _num(rps["unsecured"]), _num(rps[f"secured {top}"]), _num(rps[f"secured {narrow}"]),
                     _x(p["relative_throughput"][top]), _x(p["relative_throughput_cpu"][top]),
                     _x(p["relative_throughput"][narrow]),
                     " / ".join(f"{m[name]['rows']:,}"
                                for name in ("unsecured", f"secured {top}", f"secured {narrow}")),
                     _pct(100 * p["spread"]) if _finite(p["spread"]) else "—"))
    out.append(_table(["query", "tuples", f"visible at {narrow}", "unsecured ms/1k", f"{top} ms/1k",
                       f"{narrow} ms/1k", "unsecured tuples/s",
                       f"{top} tuples/s", f"{narrow} tuples/s", f"{top} / unsecured (rows/s)", "same, CPU time",
                       f"{narrow} / unsecured", "rows", "spread"], rows))
    out += ["", "Queries: " + "; ".join(f"`{p['query']}`" for p in lv["throughput"]) + ".", ""]
    return out


def _windows(lv: dict[str, Any]) -> list[str]:
    top = "[T, T]"
    out = ["### [ROWS n] against [RANGE d]: the same aggregate", "",
           "The aggregate of the throughput table (and the same per `serviceId`), over count-based and event-time "
           "windows of several sizes; ms per 1,000 input tuples, secured at [T, T] and unsecured, "
           + _reps_text(lv["settings"]["window_reps"], *RUNS) + ". A `[ROWS n]` "
           "aggregate emits a row per arriving tuple (per service present in its window with GROUP BY) and reads "
           "its input in arrival order through a Python data source; a `[RANGE d]` one emits a row per "
           "tumbling window (and service).", ""]
    rows = []
    for p in sorted(lv["windows"], key=lambda p: (p["shape"], isinstance(p["window"], str), _order(p))):
        ms, cpu, m = p["ms_per_1000"], p["cpu_ms_per_1000"], p["pipelines"]
        rows.append((LABELS[p["shape"]], _window(p), _ms(ms["unsecured"]), _ms(ms[f"secured {top}"]),
                     _x(p["relative_throughput"][top]), _ms(cpu["unsecured"]), _ms(cpu[f"secured {top}"]),
                     _x(p["relative_throughput_cpu"][top]), f"{m[f'secured {top}']['rows']:,}",
                     "yes" if p["ok"] else "**no**", _pct(100 * p["spread"]) if _finite(p["spread"]) else "—"))
    out.append(_table(["aggregate", "window", "unsecured ms/1k", "secured ms/1k", "secured / unsecured (rows/s)",
                       "unsecured CPU ms/1k", "secured CPU ms/1k", "same, CPU time", "rows", "rows as predicted",
                       "spread"], rows))
    out.append("")
    return out


def _order(p: dict[str, Any]) -> float:
    """Windows in size order: a count, or a duration's seconds."""
    window = p["window"]
    if isinstance(window, int):
        return window
    number, unit = str(window).split()
    return float(number) * {"s": 1, "sec": 1, "min": 60, "h": 3600}.get(unit, 1)


def _in_use_row(label: str, p: dict[str, Any]) -> tuple[object, ...]:
    return (label, p["queries"], p["processors"], _num(p.get("shepherds", 0)), _num(p["visible_tuples"]),
            f"{p['wall_s']:.1f}", f"{p['start_s']:.1f}", f"{p['cpu_s']:.1f}", f"{p['jvm_cpu_s']:.1f}",
            f"{p.get('task_cpu_s', math.nan):.1f}", f"{p.get('jit_cpu_s', math.nan):.1f}", f"{p['driver_cpu_s']:.1f}",
            f"{p['cpu_s'] / p['queries']:.2f}", _num(p["batches"]), f"{_num(p['jobs'])} / {_num(p['tasks'])}",
            _mib(p["peak_rss_bytes"]),
            _mib(p["peak_heap_bytes"]), _mib(p["live_heap_bytes"]), _unit(p["state_bytes"], "KiB"))


PHASES = (("queryPlanning", "planning"), ("addBatch", "running the batch (incl. `foreachBatch`)"),
          ("walCommit", "offset log"), ("commitOffsets", "commit log"), ("latestOffset", "listing the input"),
          ("getBatch", "getBatch"))


def _rss_text(data: dict[str, Any]) -> str:
    heap = data.get("jvm_max_heap_bytes")
    cap = f"the JVM heap is capped at {_mib(heap)} MiB, so " if _finite(heap) else ""
    return (f"{cap}much of it is the JVM's native memory: thread stacks, malloc arenas, code; the JVM gives "
            "neither back")


def _in_use(lv: dict[str, Any]) -> list[str]:
    cfg, in_use = lv["settings"], lv["levels_in_use"]
    points, shared = in_use["points"], in_use.get("shared")
    shared = shared if isinstance(shared, dict) else None  # null (NaN once reloaded): not measured
    out = ["### Levels in use: one processor per level (continuous runs)", "",
           f"`run_levels` with one query per level, `{in_use['query']}`, over the same input folder "
           f"({_num(lv['data'].get('in_use_tuples', lv['data']['tuples']))} tuples, one file, `available_now`): one "
           "Spark streaming query per level, started one after the other on the one session, each reading through "
           "its own level guard and writing through `foreachBatch`. The trusted shepherd's "
           "own streaming query reads and parses the input once, levels each tuple and writes them as Parquet, "
           "which the processors read (*shepherds*). The levels are those with a company or T in both classes "
           "(16), sorted by how many tuples each sees and picked evenly from that order, so the mean work per "
           f"processor is about the same for every k. {cfg['level_reps']} run(s) per k (order alternating), "
           "medians" + (", after one warm-up run" if cfg.get("warm_up", True) else "") + ". *Wall*: from "
           "`run_levels` until every processor has stopped (*start*: the `run_levels` call itself: authorizing, "
           "compiling and starting each processor). *CPU*: user + system time of this process and its children "
           "(the Spark JVM and its Python workers); *JVM* is the JVM tree alone, of which Spark's *task* threads "
           "and the HotSpot *JIT* compiler threads (compiling Spark's own code as each new plan exercises it), "
           "*driver* this Python process (planning, `foreachBatch`). *Peak RSS*: the process tree's resident memory, sampled every "
           f"{cfg['sample_period_s']:g} s ({_rss_text(lv['data'])}); *peak "
           "heap*: the JVM heap pools' peak after a GC (young garbage included); *heap after GC*: the most the "
           "heap held right after a collection during the run; *state*: the state stores' memory in each "
           "processor's last progress, summed.", ""]
    if shared:
        out += [f"*Control*: {shared['queries']} queries at one level ({shared['levels'][0]}), which "
                "`run_levels` puts in one shared processor.", ""]
    rows = [_in_use_row(f"{p['k']} level(s)", p) for p in points]
    if shared:
        rows.append(_in_use_row(f"control: {shared['queries']} queries, 1 level", shared))
    out.append(_table(["levels in use", "queries", "processors", "shepherds", "visible tuples (sum)", "wall s",
                       "start s", "CPU s", "JVM CPU s", "of which tasks", "of which JIT", "driver CPU s", "CPU s per query", "micro-batches", "Spark jobs / tasks",
                       "peak RSS MiB",
                       "peak heap MiB", "heap after GC MiB", "state KiB"], rows))
    out += ["", "Fits `cost(k) = a + b·k` over the medians (b: the cost of one more level). *Slope growth*: the "
            "slope between the two largest k over the slope between the two smallest (1 on a straight line, > 1 "
            "when a level added among many costs more than one added among few); *above the line*: how far the "
            "cost at the largest k lies above the straight line through the two smallest, as a share of it (the "
            f"check allows {_pct(100 * EXCESS_TOLERANCE)} for noise).", ""]
    rows = []
    ks = [p["k"] for p in points]
    for metric, fit in in_use["fits"].items():
        label, unit = FIT_LABELS[metric]
        rows.append((label, unit, _unit(fit["a"], unit), _unit(fit["b"], unit),
                     _pct(100 * fit["max_relative_residual"]) if _finite(fit["max_relative_residual"]) else "—",
                     _x(fit.get("slope_growth", math.nan)),
                     _pct(100 * fit["excess"]) if _finite(fit.get("excess")) else "—", _x(fit["growth"])))
    growth = f"cost({ks[-1]}) / cost({ks[-2]})" if len(ks) > 1 else "growth"
    out.append(_table(["cost", "unit", "a (fixed)", "b (per level)", "largest residual", "slope growth",
                       f"cost({ks[-1]}) above the line through k = {ks[0]}, {ks[1] if len(ks) > 1 else ''}",
                       f"{growth} (proportional: {ks[-1] / ks[-2] if len(ks) > 1 else 1:g}×)"], rows))
    out += ["", "Micro-batch time by phase, summed over the processors' batches (ms; processors run at the same "
            "time, so the sums exceed the wall time):", ""]
    columns = [p for p in points] + ([shared] if shared else [])
    header = ["phase"] + [f"{p['k']} level(s)" for p in points] + (
        [f"control ({shared['queries']} queries)"] if shared else [])
    rows = [(label, *[_num(p["phases_ms"].get(phase, math.nan)) for p in columns]) for phase, label in PHASES]
    rows.append(("whole trigger", *[_num(p["phases_ms"].get("triggerExecution", math.nan)) for p in columns]))
    out.append(_table(header, rows))
    out += ["", "Levels per k: " + "; ".join(f"k = {p['k']}: {', '.join(p['levels'])}" for p in points) + ".", ""]
    return out


def levels_section(lv: dict[str, Any]) -> str:
    cfg, data, load = lv["settings"], lv["data"], lv["load_average"]
    classes = "; ".join(f"{name} = {{{', '.join(members)}}}" for name, members in data["classes"].items())
    out = ["## 4. Security levels (Ray et al., issue 4)", "",
           f"Data from `streamwarden.datagen.cloud.message_log` ({cfg['minutes']:g} min, {cfg['services']} services, "
           f"{cfg['rate_per_s']:g} invocations/s, seed {cfg['seed']}): {_num(data['tuples'])} MessageLog tuples, "
           f"each at the level of its sender ({classes}: {data['lattice_levels']} levels; senders: "
           + ", ".join(f"{name} {n:,}" for name, n in data["senders"].items())
           + "). One user cleared for [T, T], no role policies: the levels alone decide. Replay pipelines are "
           "measured as in experiment 3: one aggregate over the result (row count, max key, checksum of every "
           "row), planned once, "
           + ("a warm-up run per configuration, then " if cfg["warmup_per_configuration"] else "no warm-up per "
              "configuration (smoke run), ")
           + _reps_text(cfg["reps"], *RUNS) + " in the throughput comparison, interleaved; medians. *Spread*: the "
           "largest (max − min) / median wall time among a configuration's pipelines. *CPU*: the Spark JVM and its "
           "Python workers. " + _load_text(load), ""]
    out += _throughput(lv)
    out += _windows(lv)
    out += _in_use(lv)
    out += ["![throughput at one level](levels_throughput.png)", "",
            "![ROWS against RANGE](levels_windows.png)", "", "![levels in use](levels_processors.png)", ""]
    return "\n".join(out)


def _load_text(load: dict[str, Any]) -> str:
    text = (f"The machine was shared: 1-minute load average {load['before'][0]:.1f} before and "
            f"{load['after'][0]:.1f} after this experiment (its own processors included)")
    if _finite(load.get("other_cores")):
        text += f"; other processes kept {load['other_cores']:.2f} of the {load['cpus']} cores busy on average"
    return text + "."
