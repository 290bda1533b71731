"""Run an experiment: prepare its workload once, run its pipelines interleaved, time them one way.

Timing, the same for every pipeline of every experiment:

* a :class:`~bench.suite.experiment.Command` runs as a child process, under
  :mod:`bench.suite.launch`: its wall time, and its CPU time with everything it started
  (``resource.getrusage(RUSAGE_CHILDREN)`` before and after; the launcher adopts and reaps
  what the process leaves running, such as a Spark JVM outliving its Python, so that is
  counted too); its rows out come from the JSON line it prints last;
* an :class:`~bench.suite.experiment.InProcess` callable runs on the runner's SparkSession,
  a :class:`~bench.suite.experiment.Local` one in this process without Spark: its wall
  time, and the CPU time of this process's whole tree (``/proc``: the Spark JVM, its Python
  workers, and every process started and waited for).

Whatever numbers a pipeline reports of itself (the JSON line of a process, the mapping a
callable returns) are kept next to the runner's. First every in-process pipeline runs once
unrecorded (a warm-up: the JVM's JIT compiles Spark's generated code and streamwarden's operators
in the first runs, and a running service is warm); whole processes are timed cold, as a user would time them.
Then each of the ``repeats`` rounds runs every pipeline once, the order rotated by one per round,
so a drift in the machine's speed (another process, a warming disk cache) touches every
pipeline alike rather than whichever came last. Rows in are the workload facts a pipeline
reads; ``rows_per_s`` is rows in per wall second (``rows_per_cpu_s``: per CPU second) and
``per_core`` the experiment's ``per_core`` fact per CPU second (``per_core_job``: per CPU
second of the part the process reports as its job, ``job_cpu_s``, when it does). Outputs
are deleted after each run (only counts are kept).

    >>> # results = run(experiment, repeats=3, results_dir=Path("bench/results"))
    >>> # results["pipelines"][0]["runs"][0]["wall_s"]
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from bench import machine
from bench.suite.experiment import Command, Experiment, Facts, InProcess, Local, Measured, Outcome, Pipeline
from bench.suite.job import process_tree_cpu_s
from bench.workdir import scratch_dir

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
Log = Callable[[str], None]


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # The child imports bench.* and streamwarden from this checkout, whatever its working directory.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _run_command(command: Command, workdir: Path, out: Path) -> dict[str, float]:
    argv = [str(a) for a in command.argv(workdir, out)]
    cpu_before, began = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bench.suite.launch", "--", *argv], cwd=workdir,
                          env=_environment(), capture_output=True, text=True)
    wall, cpu = time.perf_counter() - began, _children_cpu() - cpu_before
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{tail}")
    lines = [line for line in done.stdout.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(argv)} printed no JSON line with rows_out")
    reported = {k: float(v) for k, v in json.loads(lines[-1]).items() if isinstance(v, (int, float))}
    return {**reported, "wall_s": wall, "cpu_s": cpu}


def _outcome(outcome: Outcome) -> dict[str, float]:
    if isinstance(outcome, Mapping):
        return {k: float(v) for k, v in outcome.items()}
    return {"rows_out": float(outcome)}


def _run_here(run: InProcess | Local, spark: Any, workdir: Path, out: Path) -> dict[str, float]:
    """An in-process or local pipeline, timed: wall time, and CPU time of this process and all
    its descendants (the Spark JVM, its Python workers, and the processes either started and
    waited for), as a whole process's pipeline is counted."""
    cpu_before = process_tree_cpu_s(os.getpid())
    began = time.perf_counter()
    outcome = run.call(spark, workdir, out) if isinstance(run, InProcess) else run.call(workdir, out)
    wall = time.perf_counter() - began
    cpu = process_tree_cpu_s(os.getpid()) - cpu_before
    return {**_outcome(outcome), "wall_s": wall, "cpu_s": cpu}


def _derived(run: dict[str, float], pipeline: Pipeline, facts: Facts, per_core: str | None) -> dict[str, float]:
    if not pipeline.reads:
        return run
    rows_in = float(sum(facts[name] for name in pipeline.reads))
    run = {**run, "rows_in": rows_in, "rows_per_s": rows_in / run["wall_s"] if run["wall_s"] > 0 else float("nan"),
           "rows_per_cpu_s": rows_in / run["cpu_s"] if run["cpu_s"] > 0 else float("nan")}
    if per_core is not None:
        run["per_core"] = facts[per_core] / run["cpu_s"] if run["cpu_s"] > 0 else float("nan")
        if run.get("job_cpu_s", 0) > 0:  # the same, over the part of the process it reports as its job
            run["per_core_job"] = facts[per_core] / run["job_cpu_s"]
    return run


@contextmanager
def _workdir(workdir: Path | None) -> Iterator[Path]:
    if workdir is None:
        with scratch_dir("streamwarden-suite-") as scratch:
            yield scratch
    else:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir


def versions(info: dict[str, Any], spark: Any = None) -> dict[str, str]:
    """Spark, Python and Java versions (Spark's from the PySpark package it runs)."""
    return {"spark": str(info.get("pyspark")), "python": platform.python_version(), "java": str(info.get("java")),
            **({"spark_java_runtime": str(spark._jvm.java.lang.System.getProperty("java.runtime.version"))}
               if spark is not None else {})}


def run(experiment: Experiment, *, repeats: int = 3, workdir: Path | None = None, results_dir: Path = RESULTS,
        spark: Any = None, log: Log = _log, command: str = "", warmup: bool = True) -> dict[str, Any]:
    """Measure ``experiment`` and write ``results_dir/<name>.json``; returns what it wrote.

    :class:`~bench.suite.experiment.InProcess` pipelines run on ``spark`` (default: streamwarden's
    session, started here). The experiment's own ``repeats`` and ``warmup`` prevail."""
    repeats = experiment.repeats or repeats
    warmup = warmup and experiment.warmup
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    if spark is None and any(isinstance(p.run, InProcess) for p in experiment.pipelines):
        from streamwarden.engine.session import get_spark

        spark = get_spark()
    started = time.perf_counter()
    load_before = os.getloadavg()  # other processes on the machine: the numbers are only as quiet as it was
    info = machine.collect(REPO).as_dict()
    with _workdir(workdir) as work:
        log(f"{experiment.name}: preparing {experiment.workload.description}")
        began = time.perf_counter()
        facts = dict(experiment.workload.prepare(work))
        prepare_s = time.perf_counter() - began
        log(f"{experiment.name}: prepared in {prepare_s:.1f} s: " + ", ".join(f"{k}={v:,}" for k, v in facts.items()))
        runs: dict[str, list[dict[str, float]]] = {p.name: [] for p in experiment.pipelines}
        pipelines = list(experiment.pipelines)
        for pipeline in pipelines if warmup else []:
            if not isinstance(pipeline.run, Command):
                out = work / "out" / pipeline.name.replace("/", "_")
                warm = _run_here(pipeline.run, spark, work, out)
                shutil.rmtree(out, ignore_errors=True)
                log(f"  warm-up {pipeline.name:<28} {warm['wall_s']:6.1f} s wall (not recorded)")
        for round_ in range(repeats):
            shift = round_ % len(pipelines)
            for pipeline in pipelines[shift:] + pipelines[:shift]:
                out = work / "out" / pipeline.name.replace("/", "_")
                shutil.rmtree(out, ignore_errors=True)
                if isinstance(pipeline.run, Command):
                    measured = _run_command(pipeline.run, work, out)
                else:
                    measured = _run_here(pipeline.run, spark, work, out)
                if pipeline.check is not None:  # untimed: what the run wrote, read before it is deleted
                    measured.update(pipeline.check(work, out))
                shutil.rmtree(out, ignore_errors=True)
                result = _derived(measured, pipeline, facts, experiment.per_core)
                runs[pipeline.name].append(result)
                rows = f" {int(result['rows_out']):>10,} rows out" if "rows_out" in result else ""
                log(f"  round {round_ + 1}/{repeats} {pipeline.name:<28} {result['wall_s']:6.1f} s wall "
                    f"{result['cpu_s']:6.1f} s CPU{rows}")
    measured_runs = Measured(runs, {p.name: p.coordinates() for p in experiment.pipelines}, facts)
    verdicts, observations = _judged(experiment, measured_runs, facts)
    results = {
        "experiment": experiment.name, "title": experiment.title, "when": time.strftime("%Y-%m-%d %H:%M"),
        "command": command or f"python -m bench.suite {experiment.name}", "repeats": repeats,
        "warmup": warmup and any(not isinstance(p.run, Command) for p in experiment.pipelines),
        "duration_s": round(time.perf_counter() - started, 1), "prepare_s": round(prepare_s, 1),
        "machine": info, "versions": versions(info, spark),
        "load_average": {"start": [round(x, 2) for x in load_before], "end": [round(x, 2) for x in os.getloadavg()]},
        "workload": experiment.workload.description,
        "facts": facts, "per_core": experiment.per_core, "notes": list(experiment.notes),
        "reference": None if experiment.reference is None else {
            "label": experiment.reference.label, "unit": experiment.reference.unit,
            "values": dict(experiment.reference.values), "source": experiment.reference.source},
        "pipelines": [{"name": p.name, "group": p.group, "variant": p.variant, "reads": list(p.reads),
                       "params": dict(p.params), "runs": runs[p.name]} for p in experiment.pipelines],
        "targets": verdicts, "observations": observations,
        "tables": [asdict(t) for t in experiment.tables], "plots": [asdict(p) for p in experiment.plots],
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{experiment.name}.json"
    path.write_text(json.dumps(json_safe(results), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    log(f"{experiment.name}: wrote {path} ({results['duration_s'] / 60:.1f} min)")
    return results


def _judged(experiment: Experiment, measured: Measured, facts: Facts) -> tuple[list[dict[str, Any]], list[str]]:
    """Every target's verdict and the observations, from the measurements."""
    verdicts = []
    for target in experiment.targets:
        verdict = target.check(measured)
        verdicts.append({"text": target.text, "met": verdict.met, "measured": verdict.measured})
    return verdicts, list(experiment.explain(measured, facts)) if experiment.explain else []


def rejudge(experiment: Experiment, results: dict[str, Any]) -> dict[str, Any]:
    """``results`` (saved by :func:`run`) with their targets, observations, notes, tables and plots
    taken anew from ``experiment``'s declaration, measuring nothing: how a changed report or
    target wording reaches saved numbers. The declaration must have the saved pipelines
    (the same size of run); otherwise :class:`ValueError`.

    >>> # saved = json.loads(Path("bench/results/punctuation.json").read_text())
    >>> # results = rejudge(declaration("punctuation")(), saved)
    """
    saved = {p["name"]: p for p in results["pipelines"]}
    declared = {p.name for p in experiment.pipelines}
    if set(saved) != declared:
        differing = sorted(declared ^ set(saved))
        raise ValueError(f"{experiment.name}: the saved run has other pipelines than the declaration "
                         f"({differing[0]}, ...)")
    measured = Measured({name: p["runs"] for name, p in saved.items()},
                        {p.name: p.coordinates() for p in experiment.pipelines}, results["facts"])
    verdicts, observations = _judged(experiment, measured, results["facts"])
    return {**results, "targets": verdicts, "observations": observations, "notes": list(experiment.notes),
            "tables": [asdict(t) for t in experiment.tables], "plots": [asdict(p) for p in experiment.plots]}


def json_safe(value: Any) -> Any:
    """NaN is not JSON: null instead (``bench/run.py`` writes its results with it too)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
