"""Replay at engine speed: ``streamwarden replay --output DIR`` next to the same query in plain PySpark.

    python -m bench.replay_output [--rows N] [--repeats K]      # from the repository's root

Generates N rows (default 3,000,000) of the drill's ``Position`` stream as Parquet
(:func:`streamwarden.datagen.generate_drill`, seeded; 1,000 soldiers in 4 platoons, one
report a second, 4 files), then times whole processes, interleaved, K times each:

* ``streamwarden``: ``streamwarden replay --catalog examples/drill.yaml --user paul --query
  "SELECT SID, Pos FROM Position" --output DIR``: a one-policy selection (p1: paul's
  platoon only, a quarter of the rows), written by Spark's tasks as JSON part files;
* ``plain``: a PySpark script (:func:`plain_job`, run by the same Python) that reads the
  same Parquet, keeps ``Platoon = 'X'``, projects ``SID, Pos`` and writes ``df.write.json``:
  the query as its author would write it by hand;
* ``plain+provenance``: the same script also writing streamwarden's two extra columns
  (``_policies``, ``_graph``), so its files hold exactly streamwarden's lines: the gap
  between it and ``plain`` is the price of the output's provenance, the gap between it
  and ``streamwarden`` the engine's own.

Both sides run on master ``local[2]`` with the settings streamwarden's session starts with
(:func:`streamwarden.engine.session.spark_settings`: shuffle partitions, parallelism, UTC,
umask 077, UI off, ...). Wall time is the command's, from start to exit; CPU time is the
whole process tree's (user + system, from ``getrusage(RUSAGE_CHILDREN)`` deltas; this
process becomes a child subreaper, so the JVM and the Python workers count even when they
outlive their parent). Then one more process of each side runs phase by phase (imports,
Spark's start, building the DataFrames, the write, the stop: :func:`phases_job`), to say
where the time goes. Prints markdown tables (medians and minima; the phases) and writes
``bench/results/replay_output.json``. The target: streamwarden at least 0.9x the plain
speed (plain's median wall time over streamwarden's). On a machine shared with other
work, wall times swing with its load (recorded per sample); CPU times swing less.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "replay_output.json"
CATALOG = ROOT / "examples" / "drill.yaml"
USER = "paul"
QUERY = "SELECT SID, Pos FROM Position"  # drill.yaml's p1 is the one policy that applies: Platoon = 'X'
MASTER = "local[2]"
TARGET = 0.9
SOLDIERS = 1000
FILES = 4
KINDS = ("streamwarden", "plain", "plain+provenance")


@dataclass(frozen=True)
class Sample:
    """One timed process: which kind, its wall and CPU seconds, the rows its files hold, and
    the machine's 1-minute load average when it ended (other work on the machine shows there)."""

    kind: str
    wall_s: float
    cpu_s: float
    rows: int
    load: float


# -- the input ------------------------------------------------------------------------------------
def generate(folder: Path, rows: int, seed: int) -> tuple[Path, int]:
    """The drill's Position stream, about ``rows`` rows (whole seconds of 1,000 soldiers), as
    Parquet files under ``folder``; returns their folder and the exact row count."""
    from streamwarden.datagen import generate_drill

    soldiers = min(SOLDIERS, rows)
    steps = max(1, round(rows / soldiers))
    summary = generate_drill(folder, soldiers=soldiers, platoons=4, minutes=steps / 60, interval_seconds=1.0,
                             health="uni", fmt="parquet", seed=seed, files_per_stream=min(FILES, steps))
    return folder / "Position", summary.rows["Position"]


def spark_conf() -> dict[str, str]:
    """The settings streamwarden's session starts with on ``MASTER`` (given to the plain script too)."""
    from streamwarden.engine.session import spark_settings

    return dict(spark_settings(MASTER, (), environ={}).conf)


# -- the two sides --------------------------------------------------------------------------------
def streamwarden_command(parquet: Path, output: Path) -> list[str]:
    """The replay exactly as a user types it (the console script of this Python's environment)."""
    return [str(Path(sys.executable).parent / "streamwarden"), "replay", "--master", MASTER,
            "--catalog", str(CATALOG), "--user", USER, "--query", QUERY,
            "--input", f"Position={parquet}", "--output", str(output)]


def plain_command(parquet: Path, output: Path, conf: dict[str, str], provenance: bool) -> list[str]:
    return [sys.executable, "-m", "bench.replay_output", "plain-job", str(parquet), str(output), json.dumps(conf),
            "provenance" if provenance else "query"]


def plain_job(argv: Sequence[str]) -> None:
    """The hand-written PySpark job: ``PARQUET OUTPUT CONF_JSON query|provenance``."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    parquet, output, conf, columns = argv
    builder = SparkSession.builder.master(MASTER).appName("plain")
    for key, value in json.loads(conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rows = spark.read.parquet(parquet).filter(F.col("Platoon") == "X")
    extra = [F.array(F.lit("p1")).alias("_policies"), F.lit("ag1").alias("_graph")] if columns == "provenance" else []
    rows.select("SID", "Pos", *extra).write.json(output)
    spark.stop()


# -- where the time goes ----------------------------------------------------------------------------
class Phases:
    """Wall and process-tree CPU seconds per phase of one process: this Python, plus Spark's
    JVM and its Python workers once the JVM runs (``/proc``; Linux)."""

    def __init__(self) -> None:
        self.jvm: int | None = None
        self.marks: list[tuple[str, float, float]] = [("start", time.perf_counter(), self.cpu())]

    def cpu(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        total = own.ru_utime + own.ru_stime
        if self.jvm is not None:
            try:
                workers = Path(f"/proc/{self.jvm}/task/{self.jvm}/children").read_text().split()
            except OSError:
                workers = []
            total += sum(_proc_cpu(pid) for pid in [str(self.jvm), *workers])
        return total

    def mark(self, phase: str) -> None:
        self.marks.append((phase, time.perf_counter(), self.cpu()))

    def table(self) -> dict[str, dict[str, float]]:
        return {phase: {"wall_s": round(wall - w0, 3), "cpu_s": round(cpu - c0, 3)}
                for (phase, wall, cpu), (_, w0, c0) in zip(self.marks[1:], self.marks)}


def _proc_cpu(pid: str) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def phases_job(argv: Sequence[str]) -> None:
    """One process of either side, its phases timed: ``streamwarden|plain PARQUET OUTPUT CONF_JSON``.
    The streamwarden side runs what ``streamwarden replay`` runs, step by step; prints JSON."""
    side, parquet, output, conf = argv
    clock = Phases()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    clock.mark("import pyspark")
    if side == "streamwarden":
        from streamwarden import api
        from streamwarden.engine.execute import build_job, check_inputs
        from streamwarden.engine.sinks import write_parts

        clock.mark("import streamwarden")
        catalog = api.load_catalog(CATALOG)
        rewriting = api.authorize(catalog, USER, QUERY)
        check_inputs(catalog, ["Position"], {"Position": parquet})
        clock.mark("catalog, authorize, check inputs")
    if side == "streamwarden":
        from streamwarden.engine.session import get_spark

        spark = get_spark(MASTER)  # streamwarden's own session: conf, plus whatever it adds
    else:
        builder = SparkSession.builder.master(MASTER)
        for key, value in json.loads(conf).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    clock.jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    clock.mark("Spark start")
    if side == "streamwarden":
        job = build_job(spark, catalog, rewriting, {"Position": parquet}, streaming=False)
        clock.mark("build the job (DataFrames)")
        write_parts(job, output)
    else:
        frame = spark.read.parquet(parquet).filter(F.col("Platoon") == "X").select("SID", "Pos")
        clock.mark("build the job (DataFrames)")
        frame.write.json(output)
    clock.mark("write")
    spark.stop()
    clock.mark("stop")
    print(json.dumps(clock.table()))


def phases(parquet: Path, workdir: Path, conf: dict[str, str]) -> dict[str, dict[str, dict[str, float]]]:
    """Each side's phases, one process each."""
    found = {}
    for side in ("streamwarden", "plain"):
        output = workdir / f"phases-{side}"
        done = subprocess.run([sys.executable, "-m", "bench.replay_output", "phases-job", side, str(parquet),
                               str(output), json.dumps(conf)], cwd=ROOT, env=child_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, check=True)
        found[side] = json.loads(done.stdout.strip().splitlines()[-1])
        shutil.rmtree(output, ignore_errors=True)
    return found


# -- timing whole processes -----------------------------------------------------------------------
def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (Linux), so their CPU time reaches
    ``RUSAGE_CHILDREN`` once reaped: PySpark's JVM may outlive the Python that started it."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap() -> None:
    """Wait for every descendant left (adopted orphans): their CPU time is then counted."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def child_env() -> dict[str, str]:
    """This environment without streamwarden's settings (both sides get the same Spark), with
    the repository on the path (``bench`` is not installed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMWARDEN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(kind: str, command: list[str], output: Path, workdir: Path) -> Sample:
    """Run ``command`` to its end; its wall time, its process tree's CPU time, the rows it wrote."""
    cpu = children_cpu()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    wall = time.perf_counter() - start
    reap()
    cpu = children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    rows = count_lines(output)
    shutil.rmtree(output)
    return Sample(kind, wall, cpu, rows, os.getloadavg()[0])


def count_lines(folder: Path) -> int:
    total = 0
    for part in folder.glob("part-*"):
        with open(part, "rb") as handle:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return total


# -- the experiment -------------------------------------------------------------------------------
def measure(rows: int, repeats: int, seed: int, *, with_phases: bool = True,
            log=print) -> dict:  # type: ignore[no-untyped-def]
    """Generate the input, time the kinds interleaved, ``repeats`` rounds, then (``with_phases``)
    one process of each side phase by phase."""
    subreaper = become_subreaper()
    conf = spark_conf()
    workdir = Path(tempfile.mkdtemp(prefix="sw-replay-output-"))
    try:
        parquet, written = generate(workdir / "data", rows, seed)
        commands = {
            "streamwarden": lambda out: streamwarden_command(parquet, out),
            "plain": lambda out: plain_command(parquet, out, conf, provenance=False),
            "plain+provenance": lambda out: plain_command(parquet, out, conf, provenance=True),
        }
        samples: list[Sample] = []
        for round_ in range(repeats):
            for kind in KINDS:
                output = workdir / f"out-{round_}-{kind.replace('+', '-')}"
                samples.append(timed(kind, commands[kind](output), output, workdir))
                log(f"  round {round_ + 1}/{repeats} {kind}: {samples[-1].wall_s:.1f} s wall, "
                    f"{samples[-1].cpu_s:.1f} s CPU, {samples[-1].rows} rows, load {samples[-1].load:.1f}")
        phased = phases(parquet, workdir, conf) if with_phases else {}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {**summarize(samples, written, repeats, seed, subreaper, conf), "phases": phased}


def summarize(samples: list[Sample], rows: int, repeats: int, seed: int, subreaper: bool,
              conf: dict[str, str]) -> dict:
    """Medians (and minima) per kind, the speed ratios to plain, and everything measured."""
    stats = {}
    for kind in KINDS:
        mine = [s for s in samples if s.kind == kind]
        stats[kind] = {"wall_s": statistics.median(s.wall_s for s in mine), "min_wall_s": min(s.wall_s for s in mine),
                       "cpu_s": statistics.median(s.cpu_s for s in mine),
                       "rows_written": sorted({s.rows for s in mine})}
    mine, plain = stats["streamwarden"], stats["plain"]
    ratio = plain["wall_s"] / mine["wall_s"]
    return {
        "experiment": "replay_output", "input_rows": rows, "repeats": repeats, "seed": seed, "master": MASTER,
        "query": QUERY, "user": USER, "catalog": str(CATALOG.relative_to(ROOT)), "spark_conf": conf,
        "tree_cpu_complete": subreaper, "medians": stats,
        "speed_ratio_streamwarden_over_plain": ratio,
        "speed_ratio_min_wall": plain["min_wall_s"] / mine["min_wall_s"],
        "cpu_ratio_plain_over_streamwarden": plain["cpu_s"] / mine["cpu_s"],
        "speed_ratio_streamwarden_over_plain_provenance": stats["plain+provenance"]["wall_s"] / mine["wall_s"],
        "target": TARGET, "target_met": ratio >= TARGET, "samples": [asdict(s) for s in samples],
        "machine": machine(),
    }


def machine() -> dict:
    try:
        from bench.machine import collect

        return collect(ROOT).as_dict()
    except Exception as exc:  # the numbers stand without it
        return {"unknown": str(exc)}


def table(result: dict) -> str:
    """The markdown table of medians."""
    plain = result["medians"]["plain"]["wall_s"]
    lines = [f"Replay of a one-policy selection over {result['input_rows']:,} Parquet rows, {result['master']}, "
             f"median of {result['repeats']} (whole processes, interleaved)", "",
             "| process | wall s | min wall s | CPU s (tree) | rows written | speed vs plain |",
             "|---|---:|---:|---:|---:|---:|"]
    for kind in KINDS:
        m = result["medians"][kind]
        rows = "/".join(f"{r:,}" for r in m["rows_written"])
        lines.append(f"| {kind} | {m['wall_s']:.1f} | {m['min_wall_s']:.1f} | {m['cpu_s']:.1f} | {rows} | "
                     f"{plain / m['wall_s']:.2f}x |")
    loads = [s["load"] for s in result["samples"]]
    verdict = "met" if result["target_met"] else "missed"
    lines += ["", f"streamwarden / plain speed: {result['speed_ratio_streamwarden_over_plain']:.2f}x by median wall "
                  f"time (target >= {result['target']}x: {verdict}); {result['speed_ratio_min_wall']:.2f}x by "
                  f"minimum; plain's CPU time / streamwarden's {result['cpu_ratio_plain_over_streamwarden']:.2f}x. "
                  f"Machine load (1 min) {min(loads):.1f} to {max(loads):.1f} on {result['machine'].get('cpus', '?')} "
                  "CPUs."]
    if result.get("phases"):
        lines += ["", *phase_table(result["phases"])]
    return "\n".join(lines)


def phase_table(found: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """Where each side's time goes, one process each: wall / CPU seconds per phase."""
    names = list(dict.fromkeys(p for side in found.values() for p in side))
    lines = ["| phase (one process each) | streamwarden wall / CPU s | plain wall / CPU s |", "|---|---:|---:|"]
    for name in [*names, "total"]:
        cells = []
        for side in ("streamwarden", "plain"):
            spent = found[side]
            if name == "total":
                cells.append(f"{sum(v['wall_s'] for v in spent.values()):.1f} / "
                             f"{sum(v['cpu_s'] for v in spent.values()):.1f}")
            else:
                cells.append(f"{spent[name]['wall_s']:.1f} / {spent[name]['cpu_s']:.1f}" if name in spent else "-")
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plain-job"]:
        plain_job(argv[1:])
        return 0
    if argv[:1] == ["phases-job"]:
        phases_job(argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.replay_output", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000, help="input rows (default 3,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of each process (default 3)")
    parser.add_argument("--seed", type=int, default=7, help="the generator's seed (default 7)")
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"results JSON (default {RESULTS})")
    parser.add_argument("--no-phases", action="store_true", help="skip the phase-by-phase process of each side")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeats < 1:
        parser.error("--rows and --repeats must be at least 1")
    result = measure(args.rows, args.repeats, args.seed, with_phases=not args.no_phases)
    print(table(result))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({**result, "table": table(result)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
