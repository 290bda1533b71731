"""Replay at engine speed (issue 14): ``streamwarden replay --output DIR`` next to the same query in plain PySpark.

The declaration (:func:`experiment`) for :mod:`bench.suite`::

    python -m bench.suite replay_output [--events ROWS] [--quick]

The workload is the drill's ``Position`` stream as Parquet (:func:`streamwarden.datagen.generate_drill`,
seed 7; 1,000 soldiers in 4 platoons, one report a second, 4 files; ``events`` rows, default
3,000,000). Every pipeline is a whole process, each started by the same small launcher
(:func:`launch`):

* ``streamwarden``: ``streamwarden replay --catalog examples/drill.yaml --user paul --query
  "SELECT SID, Pos FROM Position" --output DIR``, exactly as a user types it: a one-policy
  selection (p1: paul's platoon only, a quarter of the rows), written by Spark's tasks as
  JSON part files;
* ``plain``: the query written by hand in PySpark (:func:`job`, run by the same Python): read
  the Parquet, keep ``Platoon = 'X'``, project ``SID, Pos``, ``df.write.json``;
* ``plain+provenance``: the same, also writing streamwarden's two extra columns (``_policies``,
  ``_graph``), so its files hold exactly streamwarden's lines;
* ``streamwarden, step by step`` (group ``phases``): what ``streamwarden replay`` runs, one
  library call after the other, each phase timed, to say where streamwarden's time goes.

    >>> e = experiment(quick=True)
    >>> [p.name for p in e.pipelines], len(e.targets)
    (['streamwarden', 'plain', 'plain+provenance', 'streamwarden, step by step'], 1)
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.suite.experiment import (Column, Command, Experiment, Facts, Measured, Pipeline, Plot, Table, Workload,
                                    ratio_at_least)
from bench.suite.job import process_tree_cpu_s
from bench.suite.launch import run_reaped

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "examples" / "drill.yaml"
USER = "paul"
QUERY = "SELECT SID, Pos FROM Position"  # drill.yaml's p1 is the one policy that applies: Platoon = 'X'
MASTER = "local[2]"
SEED = 7
SOLDIERS = 1000
FILES = 4
#: The phases a timed process reports, as ``<key>_s`` (wall) and ``<key>_cpu_s`` (its process tree's CPU).
PHASES = (("import_pyspark", "import pyspark"), ("import_streamwarden", "import streamwarden"),
          ("authorize", "catalog, authorize, check inputs"), ("spark_start", "Spark start"),
          ("build", "build the job (DataFrames)"), ("write", "write"), ("stop", "stop"))


# -- the input ------------------------------------------------------------------------------------
def _workload(rows: int) -> Workload:
    def prepare(work: Path) -> Facts:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from streamwarden.datagen import generate_drill

        soldiers = min(SOLDIERS, rows)
        steps = max(1, round(rows / soldiers))  # whole seconds of every soldier's report
        summary = generate_drill(work / "data", soldiers=soldiers, platoons=4, minutes=steps / 60,
                                 interval_seconds=1.0, health="uni", fmt="parquet", seed=SEED,
                                 files_per_stream=min(FILES, steps))
        platoon = pq.read_table(work / "data" / "Position", columns=["Platoon"]).column("Platoon")
        return {"rows": summary.rows["Position"], "platoon X rows": pc.sum(pc.equal(platoon, "X")).as_py() or 0}

    return Workload(f"the drill's Position stream, about {rows:,} rows (1,000 soldiers, 4 platoons, one report a "
                    f"second, {FILES} Parquet files, seed {SEED})", prepare)


# -- the processes --------------------------------------------------------------------------------
def _launched(child: Callable[[Path, Path], list[str]]) -> Command:
    return Command(lambda work, out: [sys.executable, "-m", "bench.replay_output", "launch", str(out), "--",
                                      *child(work, out)])


def _cli(work: Path, out: Path) -> list[str]:
    """The replay exactly as a user types it (the console script of this Python's environment)."""
    return [str(Path(sys.executable).parent / "streamwarden"), "replay", "--master", MASTER, "--catalog",
            str(CATALOG), "--user", USER, "--query", QUERY, "--input", f"Position={work / 'data' / 'Position'}",
            "--output", str(out)]


def _job(side: str) -> Callable[[Path, Path], list[str]]:
    def argv(work: Path, out: Path) -> list[str]:
        from streamwarden.engine.session import spark_settings

        # Computed here, not in the plain process: importing streamwarden there would cost it 1.4 s.
        conf = dict(spark_settings(MASTER, (), environ={}).conf)
        return [sys.executable, "-m", "bench.replay_output", "job", side, str(work / "data" / "Position"), str(out),
                json.dumps(conf)]
    return argv


class _Clock:
    """Wall and CPU seconds per phase; CPU of this process's whole tree (the Python, Spark's JVM,
    its workers: ``/proc``, about 3 ms a reading, cheap enough to leave in the plain job)."""

    def __init__(self) -> None:
        self.numbers: dict[str, float] = {}
        self.last = (time.perf_counter(), process_tree_cpu_s(os.getpid()))

    def mark(self, phase: str) -> None:
        now = (time.perf_counter(), process_tree_cpu_s(os.getpid()))
        self.numbers[f"{phase}_s"] = round(now[0] - self.last[0], 3)
        self.numbers[f"{phase}_cpu_s"] = round(now[1] - self.last[1], 3)
        self.last = now


def job(side: str, parquet: str, output: str, conf: str) -> None:
    """One process, its phases timed (printed as a JSON line): ``plain`` and ``plain+provenance``
    are the query written by hand in PySpark on streamwarden's Spark settings (``conf``);
    ``streamwarden`` runs what ``streamwarden replay --output DIR`` runs, step by step."""
    clock = _Clock()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    clock.mark("import_pyspark")
    if side == "streamwarden":
        from streamwarden import api
        from streamwarden.engine.execute import build_job, check_inputs
        from streamwarden.engine.session import get_spark
        from streamwarden.engine.sinks import check_replay_output, write_parts

        clock.mark("import_streamwarden")
        catalog = api.load_catalog(CATALOG)
        rewriting = api.authorize(catalog, USER, QUERY)
        check_inputs(catalog, ["Position"], {"Position": parquet})
        check_replay_output(output)
        clock.mark("authorize")
        spark = get_spark(MASTER)  # streamwarden's own session: the settings, plus whatever it adds
    else:
        builder = SparkSession.builder.master(MASTER).appName("plain")
        for key, value in json.loads(conf).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    clock.mark("spark_start")
    if side == "streamwarden":
        built = build_job(spark, catalog, rewriting, {"Position": parquet}, streaming=False)
        clock.mark("build")
        write_parts(built, output)
    else:
        frame = spark.read.parquet(parquet).filter(F.col("Platoon") == "X")
        extra = [F.array(F.lit("p1")).alias("_policies"), F.lit("ag1").alias("_graph")] if "+" in side else []
        frame = frame.select("SID", "Pos", *extra)
        clock.mark("build")
        frame.write.json(output)
    clock.mark("write")
    spark.stop()
    clock.mark("stop")
    print(json.dumps(clock.numbers), flush=True)


# -- the launcher ---------------------------------------------------------------------------------
def launch(output: Path, argv: Sequence[str]) -> None:
    """Run ``argv`` to its end and every process it left behind, then print one JSON line: the
    lines of ``output``'s part files (``rows_out``), the time counting them took, the machine's
    1-minute load, and whatever JSON line the child printed last.

    Why a launcher: the runner counts a process tree's CPU through ``RUSAGE_CHILDREN``, which
    holds only processes waited for. PySpark's JVM exits after the Python that started it (when
    its stdin closes), and ``streamwarden replay`` does not wait for it, so it would be reparented
    to init and its CPU time lost. The launcher adopts and reaps it
    (:func:`bench.suite.launch.run_reaped`, as the runner's own launcher does for every
    process), so its time reaches the runner with the launcher's own. Every side runs under
    it, so every side pays the same few tens of milliseconds of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMWARDEN_")}  # the same Spark for all
    done, subreaper = run_reaped(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(done.returncode)
    began = time.perf_counter()
    rows = count_lines(output)
    printed = [line for line in done.stdout.splitlines() if line.startswith("{")]
    print(json.dumps({**(json.loads(printed[-1]) if printed else {}), "rows_out": rows,
                      "count_s": round(time.perf_counter() - began, 3), "load": os.getloadavg()[0],
                      "subreaper": int(subreaper)}), flush=True)


def count_lines(folder: Path) -> int:
    """The lines of the ``part-*`` files in ``folder``.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / "part-0.json").write_text("{}\\n{}\\n")
    >>> count_lines(d)
    2
    """
    total = 0
    for part in folder.glob("part-*"):
        with open(part, "rb") as handle:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return total


# -- the report -----------------------------------------------------------------------------------
def explain(measured: Measured, facts: Facts) -> list[str]:
    """The rows each process wrote, where the time goes, and how loaded the machine was
    (the speed ratios are the tables')."""
    said = []
    written = {name: sorted({int(r["rows_out"]) for r in runs}) for name, runs in measured.runs_by_pipeline.items()
               if runs}
    if written and all(rows == [facts["platoon X rows"]] for rows in written.values()):
        said.append(f"Every process wrote the {facts['platoon X rows']:,} rows of platoon X, of {facts['rows']:,}.")
    elif written:
        said.append("**Rows written differ**: " + "; ".join(f"{n}: {'/'.join(f'{r:,}' for r in rows)}"
                                                            for n, rows in written.items())
                    + f" (platoon X holds {facts['platoon X rows']:,}).")
    steps, plain = "streamwarden, step by step", "plain"
    if measured.runs(steps) and measured.runs(plain):
        def phase(name: str, key: str) -> float:
            value = measured.median(name, f"{key}_s")
            return 0.0 if math.isnan(value) else value
        own = sum(phase(steps, k) for k in ("import_streamwarden", "authorize"))
        said.append(f"Where the time goes (medians, wall s, streamwarden step by step vs plain): Spark's start "
                    f"{phase(steps, 'spark_start'):.1f} vs {phase(plain, 'spark_start'):.1f} of "
                    f"{measured.median(steps, 'wall_s'):.1f} vs {measured.median(plain, 'wall_s'):.1f} in all; "
                    f"streamwarden's own work before Spark (import, catalog, authorize, check inputs) {own:.1f}; "
                    "building the DataFrames "
                    f"{phase(steps, 'build'):.1f} vs {phase(plain, 'build'):.1f}; the write "
                    f"{phase(steps, 'write'):.1f} vs {phase(plain, 'write'):.1f}.")
    loads = [r["load"] for runs in measured.runs_by_pipeline.values() for r in runs if "load" in r]
    if loads:
        said.append(f"Machine load (1 min) at the processes' ends: {min(loads):.1f} to {max(loads):.1f}; wall times "
                    "swing with it, CPU times less.")
    if any(r.get("subreaper") == 0 for runs in measured.runs_by_pipeline.values() for r in runs):
        said.append("**CPU times are incomplete**: the launcher could not become a subreaper, so a JVM that "
                    "outlived its Python was not counted.")
    return said


NOTES = (
    "Both sides run on master `local[2]` with the settings streamwarden's session starts with "
    "(`streamwarden.engine.session.spark_settings`: shuffle partitions, parallelism, UTC, umask 077, UI off, ...), "
    "given to the plain script as its SparkSession's conf; `STREAMWARDEN_*` variables are removed from every "
    "process's environment.",
    "Wall time is the runner's, of the whole process from start to exit; CPU time is the whole process tree's "
    "(`RUSAGE_CHILDREN`). Every process is started by the same launcher (`python -m bench.replay_output launch`), "
    "which becomes a child subreaper so that Spark's JVM, which outlives the Python that started it, is reaped "
    "and counted; it then counts the lines of the part files (`rows out`; `count s` is its share of the wall "
    "time), so every side pays the same few tens of milliseconds beyond its own work.",
    "plain+provenance writes streamwarden's lines exactly: the gap between it and plain is the price of the "
    "output's provenance (`_policies`, `_graph`), the gap between it and streamwarden the engine's own.",
    "The phases (imports, Spark's start, building the DataFrames, the write, the stop) are timed inside the "
    "plain processes and inside `streamwarden, step by step` (the library calls `streamwarden replay` makes, in "
    "its order): wall seconds, and CPU seconds of the process tree (`/proc`: the Python, the JVM, its workers). "
    "Run with `--only replay` to leave the step-by-step process out.",
    "On a machine shared with other work, wall times swing with its load (the load column); CPU times swing less.",
)


def experiment(events: int | None = None, quick: bool = False) -> Experiment:
    """The experiment over ``events`` input rows (default 3,000,000; ``quick``: 100,000)."""
    rows = events or (100_000 if quick else 3_000_000)
    timed = {"phases": "timed"}
    pipelines = (
        Pipeline("streamwarden", _launched(_cli), "replay", "streamwarden", ("rows",)),
        Pipeline("plain", _launched(_job("plain")), "replay", "plain", ("rows",), timed),
        Pipeline("plain+provenance", _launched(_job("plain+provenance")), "replay", "plain+provenance", ("rows",),
                 timed),
        Pipeline("streamwarden, step by step", _launched(_job("streamwarden")), "phases",
                 "streamwarden, step by step", ("rows",), timed),
    )
    replay = {"group": "replay"}
    return Experiment(
        name="replay_output", title=f"`streamwarden replay --output DIR` against plain PySpark ({rows:,} rows)",
        workload=_workload(rows), pipelines=pipelines,
        targets=(ratio_at_least("`streamwarden replay --output DIR` at least 0.9× plain PySpark's speed (plain's "
                                "median wall time over streamwarden's, whole processes)", "streamwarden", "plain",
                                0.9),),
        notes=NOTES, explain=explain, warmup=False,  # whole processes only: each is timed cold, as a user runs it
        tables=(
            Table("Whole processes", ("variant",), (
                Column("wall s", "wall_s"), Column("min wall s", "wall_s", stat="min"),
                Column("CPU s (tree)", "cpu_s"), Column("rows out", "rows_out"), Column("rows in/s", "rows_per_s"),
                Column("rows in/CPU s", "rows_per_cpu_s"), Column("count s", "count_s"),
                Column("load (1 min)", "load")), replay,
                f"A one-policy selection over the Parquet rows, {MASTER}; medians of the runs (whole processes, "
                "interleaved)."),
            Table("Speed against plain PySpark", ("group",), (
                Column("streamwarden / plain, median wall", "rows_per_s", "streamwarden", over="plain", unit="×"),
                Column("by minimum wall", "wall_s", "plain", over="streamwarden", stat="min", unit="×"),
                Column("plain CPU / streamwarden CPU", "cpu_s", "plain", over="streamwarden", unit="×"),
                Column("streamwarden / plain+provenance", "rows_per_s", "streamwarden", over="plain+provenance",
                       unit="×"),
                Column("plain+provenance / plain", "rows_per_s", "plain+provenance", over="plain", unit="×")),
                replay),
            Table("Where the time goes: wall s per phase", ("variant",),
                  (*(Column(title, f"{key}_s") for key, title in PHASES), Column("whole process", "wall_s")),
                  timed, "Medians; a phase a process does not have is `—`."),
            Table("Where the time goes: CPU s per phase (process tree)", ("variant",),
                  (*(Column(title, f"{key}_cpu_s") for key, title in PHASES), Column("whole process", "cpu_s")),
                  timed)),
        plots=(
            Plot("seconds", "seconds per process (median, min-max)", "variant",
                 Column("wall s", "wall_s"), series=(), where=replay, kind="bars",
                 also=(Column("CPU s (tree)", "cpu_s"),)),
            Plot("phases", "wall seconds per phase (median)", "variant",
                 Column(PHASES[0][1], f"{PHASES[0][0]}_s"), series=(), where=timed, kind="bars",
                 also=tuple(Column(title, f"{key}_s") for key, title in PHASES[1:]))),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``launch OUTPUT -- ARGV...`` or ``job SIDE PARQUET OUTPUT CONF_JSON`` (the suite starts both)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["launch"] and argv[2:3] == ["--"]:
        launch(Path(argv[1]), argv[3:])
    elif argv[:1] == ["job"] and len(argv) == 5:
        job(*argv[1:])
    else:
        print("usage: python -m bench.replay_output launch OUTPUT -- ARGV... | job SIDE PARQUET OUTPUT CONF_JSON\n"
              "(run the experiment with: python -m bench.suite replay_output [--quick])", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
