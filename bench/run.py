"""Run every streamwarden benchmark and write ``bench/results/``.

    python -m bench.run                      # full run
    python -m bench.run --quick              # smoke version
    python -m bench.run --only punctuation   # one experiment; the others' saved results are kept

Everything runs in this one process: the pure-Python benchmarks first (rewriting, the
simulated networks, the service under load, which starts its own Spark in its own process),
then the Spark benchmarks on ``streamwarden.engine.session.get_spark()``:
runtime on the drill scenario, security punctuations, security levels, shared networks,
one engine. :data:`DECLARED` declares each experiment once (name, module, Spark or not,
its own report section). Outputs: ``README.md`` (the report), ``results.json`` (raw
numbers) and the PNG plots. With ``--only``, the experiments not run are carried over
from the existing ``results.json``, so the report stays whole; a saved result in an
older format than its experiment's (its ``format``) is dropped instead.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import machine as machine_info
from bench.suite.runner import json_safe
from bench import observations, plots, report

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Declared:
    """One experiment: its name (``--only``), the title logged, the module measuring it (with
    ``Settings``, ``Settings.quick()`` and ``run([spark,] settings, log=...)``), whether it runs on
    Spark, and, for an experiment that renders its own README section after the common report,
    ``"module:function"`` of that section and of its plots. ``format`` names the shape of its
    results (stored with them); saved results of another format are not carried over."""

    name: str
    title: str
    module: str
    spark: bool
    section: str | None = None
    plots: str | None = None
    format: int | None = None


DECLARED = (
    Declared("rewriting", "experiment 1: rewriting time", "bench.rewriting", spark=False),
    Declared("runtime", "experiment 2: runtime on the drill scenario", "bench.runtime", spark=True),
    Declared("punctuation", "experiment 3: security punctuations (Figs. 13-16)", "bench.punctuation", spark=True),
    Declared("levels", "experiment 4: security levels (one processor per level)", "bench.levels", spark=True),
    Declared("network_sim", "experiment 5: shared operator networks with privacy switches, simulated (Figs. 8-9)",
             "bench.network_sim", spark=False, section="bench.report_network_sim:network_sim_section",
             plots="bench.plots_network_sim:network_sim_plots"),
    Declared("network_spark", "experiment 6: shared operator networks on Spark, one run over a recorded input",
             "bench.network_spark", spark=True, section="bench.report_network_spark:network_spark_section",
             plots="bench.plots_network_spark:network_spark_plots", format=2),
    Declared("network_engine", "experiment 7: one engine (latency, steady state, every mechanism at once)",
             "bench.network_engine", spark=True, section="bench.report_network_engine:network_engine_section",
             plots="bench.plots_network_engine:network_engine_plots", format=1),
    Declared("service_load", "experiment 8: the service under 50 concurrent clients", "bench.service_load",
             spark=False, section="bench.report_service_load:service_load_section",
             plots="bench.report_service_load:service_load_plots", format=1),
    Declared("nexmark", "experiment 9: NEXMark under policies", "bench.suite.hook", spark=False,
             section="bench.suite.hook:section", plots="bench.suite.hook:plots", format=1),
    Declared("jvm", "experiment 10: per-tuple work in the JVM (shield, providers, [ROWS n])", "bench.jvm_mechanisms",
             spark=True, section="bench.suite.hook:section", plots="bench.suite.hook:plots", format=1),
)
EXPERIMENTS = tuple(d.name for d in DECLARED)


def _attr(path: str) -> Any:
    """``"package.module:name"`` imported."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke version: small data, few repetitions")
    parser.add_argument("--only", choices=EXPERIMENTS,
                        help="run one experiment; the others' results are kept from results.json")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results directory (default bench/results)")
    parser.add_argument("--report-only", action="store_true",
                        help="re-render README.md and the plots from an existing results.json, measuring nothing")
    args = parser.parse_args(argv)
    if args.report_only:
        saved = _saved(args.output)
        if saved is None:
            parser.error(f"no results.json in {args.output}")
        _write_outputs(args.output, saved["machine"], saved["results"], saved["runs"])
        return 0
    mode = "quick" if args.quick else "full"
    args.output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    _log(f"streamwarden benchmarks, {mode} run" + (f", only {args.only}" if args.only else ""))
    info = machine_info.collect(REPO).as_dict()
    results: dict[str, dict[str, Any] | None] = {name: None for name in EXPERIMENTS}
    runs: dict[str, dict[str, Any]] = {}
    if args.only:  # keep what earlier runs measured for the other experiments
        saved = _saved(args.output)
        if saved is not None:
            for name in EXPERIMENTS:
                if name != args.only and saved["results"].get(name):
                    results[name], runs[name] = saved["results"][name], saved["runs"][name]
            if isinstance(saved["machine"].get("spark_java"), str):  # kept when this run starts no Spark
                info["spark_java"] = saved["machine"]["spark_java"]
    command = "python -m bench.run" + (" --quick" if args.quick else "") + (f" --only {args.only}" if args.only else "")

    def experiment(declared: Declared, *spark: Any) -> None:
        """Run ``declared`` (passing ``spark`` first when given) unless ``--only`` names another; time and record it."""
        if args.only not in (None, declared.name):
            return
        _log(declared.title)
        module = importlib.import_module(declared.module)
        began = time.perf_counter()
        settings = module.Settings.quick() if args.quick else module.Settings()
        results[declared.name] = module.run(*spark, settings, log=_log)
        if declared.format is not None:
            results[declared.name]["format"] = declared.format  # type: ignore[index]
        runs[declared.name] = {"mode": mode, "duration_s": round(time.perf_counter() - began, 1), "command": command,
                               "commit": info["streamwarden_commit"], "when": time.strftime("%Y-%m-%d %H:%M")}

    for declared in DECLARED:  # pure Python first
        if not declared.spark:
            experiment(declared)
    if any(d.spark and args.only in (None, d.name) for d in DECLARED):
        _log("starting Spark")
        from streamwarden.engine.session import get_spark  # Spark only when needed

        spark = get_spark()
        info["spark_java"] = str(spark._jvm.java.lang.System.getProperty("java.runtime.version"))  # type: ignore[attr-defined]
        for declared in DECLARED:
            if declared.spark:
                experiment(declared, spark)

    duration = time.perf_counter() - started
    (args.output / "results.json").write_text(json.dumps(json_safe({
        "mode": mode, "duration_s": round(duration, 1), "machine": info, "runs": runs, **results,
    }), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _write_outputs(args.output, info, results, runs)
    _log(f"done in {duration / 60:.1f} min")
    return 0


def _saved(out: Path) -> dict[str, Any] | None:
    """The results of an earlier run in ``out`` (None when there are none): machine, each
    experiment's results and how each was run. Files from before per-experiment run
    records describe every experiment by the run's own mode and duration."""
    path = out / "results.json"
    if not path.exists():
        return None
    data = _from_json(json.loads(path.read_text(encoding="utf-8")))
    results = {d.name: data.get(d.name) if isinstance(data.get(d.name), dict)
               and (d.format is None or data[d.name].get("format") == d.format) else None for d in DECLARED}
    runs = data.get("runs") if isinstance(data.get("runs"), dict) else {}
    for name in EXPERIMENTS:
        if results[name] and name not in runs:
            runs[name] = {"mode": data["mode"], "run_duration_s": data["duration_s"], "command": "python -m bench.run"
                          + (" --quick" if data["mode"] == "quick" else ""),
                          "commit": data["machine"].get("streamwarden_commit", "unknown"), "when": ""}
    return {"machine": data["machine"], "results": results, "runs": runs}


def _from_json(value: Any) -> Any:
    """Inverse of :func:`json_safe` for the numbers: null back to NaN."""
    if value is None:
        return math.nan
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _write_outputs(out: Path, info: dict[str, Any], results: dict[str, dict[str, Any] | None],
                   runs: dict[str, dict[str, Any]]) -> None:
    rewriting, runtime, punctuation, levels = (results.get(name) for name in
                                               ("rewriting", "runtime", "punctuation", "levels"))
    notes = ((observations.rewriting(rewriting) if rewriting else [])
             + (observations.runtime(runtime) if runtime else [])
             + (observations.punctuation(punctuation) if punctuation else [])
             + (observations.levels(levels) if levels else []))
    written = plots.all_plots(rewriting, runtime, out, punctuation, levels)
    text = report.render(machine=info, runs=runs, rewriting=rewriting, runtime=runtime, punctuation=punctuation,
                         levels=levels, notes=notes)
    for declared in DECLARED:  # experiments 5-8 render their own sections (with their own targets) and plots
        result = results.get(declared.name)
        if result and declared.section and declared.plots:
            written += _attr(declared.plots)(result, out)
            text = text.rstrip() + "\n\n" + _attr(declared.section)(result, runs.get(declared.name)).rstrip() + "\n"
    (out / "README.md").write_text(text, encoding="utf-8")
    _log(f"wrote {out / 'README.md'}, results.json and {', '.join(written)}")


if __name__ == "__main__":
    sys.exit(main())
