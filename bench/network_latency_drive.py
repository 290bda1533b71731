"""The continuous benchmark's driver: feed a running stream pipeline at a rate, watch every user's rows arrive.

    python -m bench.network_latency_drive PLAN.json --input DIR --out DIR -- COMMAND [ARG ...]

``COMMAND`` is the pipeline as a user starts it (``streamwarden network run ...``, or the
hand-written :mod:`bench.network_latency_plain`), reading the empty folder ``--input`` and
writing each user's rows under ``--out``/rows as a running network does:
``rows/<user>/<query id>/batch=.../part-*`` and, after each batch's rows are in place, a line
``{"batch": ..., "rows": n}`` appended to ``rows/<user>/<query id>/_delivered.jsonl``
(:mod:`streamwarden.runtime.deliveries`). ``PLAN.json`` (written by
:mod:`bench.network_latency` when it prepares the workload) names the prepared files, the
interval between them, how many warm the pipeline up, and how many rows of each file each
user should receive.

The driver, a child subreaper (what the command leaves running, Spark's JVM, is reaped
here and its CPU counted):

1. starts the command and waits for it to say it runs (``running as N pipelines``);
2. warm-up: lands the first ``warmup`` files, one per interval, and waits until every user
   has all their rows (first micro-batches, the JIT: not measured);
3. lands the measured files, one per interval (:func:`schedule`: each at a seeded random
   moment of its interval, so files meet every phase of the trigger), from a feeder thread:
   each is copied beforehand into a staging folder beside the input folder and renamed in
   (atomic, on one file system); the moment after the rename is its landing time;
4. meanwhile watches every user's delivery log (:class:`Watch`: one ``stat`` per user with
   rows pending, the log read only when it grew) and notes, for each file, when each user
   who should get rows of it has them (the rows she received reach the rows of every file up
   to it: files reach her in order, since a micro-batch reads every file landed before it);
5. once every user has every file's rows (or ``--drain-timeout`` passed), stops the command
   with SIGTERM (``network run`` lets the micro-batch under way finish) and reaps everything;
6. reads where each file's time went from the Spark checkpoints left under ``--out``
   (:func:`spark_batches`: when each micro-batch started, ``offsets/N``, and committed,
   ``commits/N``, and which files it read) and prints one JSON line (:func:`summary`).

The CPU of the command's processes over the measured part (from the first measured landing
to the last delivery) is split by /proc between the command's own Python (the driver of
Spark: planning, py4j calls, ``foreachBatch`` callbacks), Spark's JVM and the processes the
JVM starts (PySpark's Python workers, ``pyspark.daemon``); the driver's own CPU (feeding, watching) is reported apart.

    >>> [round(t, 2) for t in schedule(3, 1.0, 100.0, 7)]
    [100.32, 101.15, 102.65]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from bench.stats import median, percentile
from bench.suite.launch import become_subreaper

LOG = "_delivered.jsonl"  # streamwarden.runtime.deliveries.LOG, not imported: the driver imports no streamwarden
#: What a pipeline says once it runs: ``network run``'s line, or the hand-written query's.
#: What ``network run`` says once its pipelines run ("network: 20 registered queries as 20 pipelines, ...";
#: the plain baseline says "plain query running as 1 pipelines"), the count with its thousands separators.
READY = re.compile(r"\bas (\d[\d,]*) pipelines?\b")
#: The watcher sweeps at most this often, and rests at least this many times its last sweep's time.
SWEEP_S, SWEEP_REST = 0.05, 20


# -- the feed -------------------------------------------------------------------------------------
def schedule(files: int, interval_s: float, start: float, seed: int) -> list[float]:
    """When each of ``files`` files lands: one per interval from ``start``, each at a seeded
    uniformly random moment within its interval."""
    rng = random.Random(seed)
    return [start + (k + rng.random()) * interval_s for k in range(files)]


class Feeder(threading.Thread):
    """Lands prepared files into ``target`` at the moments given, each staged beforehand in
    ``staging`` (beside ``target``, on its file system) and renamed in; notes when each landed
    (``landed[k]``, wall-clock seconds, the clock of file modification times)."""

    def __init__(self, files: Sequence[Path], moments: Sequence[float], staging: Path, target: Path):
        super().__init__(name="feeder", daemon=True)
        self.files, self.moments, self.staging, self.target = list(files), list(moments), staging, target
        self.landed: dict[int, float] = {}
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
            for k, (source, moment) in enumerate(zip(self.files, self.moments)):
                staged = self.staging / source.name
                shutil.copyfile(source, staged)
                time.sleep(max(0.0, moment - time.time()))
                os.replace(staged, self.target / source.name)
                self.landed[k] = time.time()
        except BaseException as error:  # noqa: BLE001 (handed to the main thread, which stops the run)
            self.failure = error


# -- the watch ------------------------------------------------------------------------------------
@dataclass
class _Reader:
    """One user's delivery log, read incrementally: rows delivered so far."""

    path: Path
    size: int = -1
    offset: int = 0
    rows: int = 0

    def grew(self) -> bool:
        """Whether the log changed since last read (one ``stat``); updates ``rows`` when it did."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return False
        if size == self.size:
            return False
        self.size = size
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        whole = data[:data.rfind(b"\n") + 1]  # a line being written: read it next time
        for line in whole.splitlines():
            try:
                self.rows += int(json.loads(line)["rows"])
            except (ValueError, KeyError, TypeError):
                continue
        self.offset += len(whole)
        return True


@dataclass
class Watch:
    """When each user has each file's rows. ``counts[user][k]``: the rows of file ``k`` she should
    get; ``logs[user]``: her delivery log. ``seen[user][k]``: when her delivered rows first
    reached those of files ``0..k`` (wall-clock seconds), for each ``k`` she gets rows of."""

    logs: Mapping[str, Path]
    counts: Mapping[str, Sequence[int]]
    seen: dict[str, dict[int, float]] = field(default_factory=dict)
    sweeps: int = 0
    sweep_s: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._readers = {u: _Reader(Path(p)) for u, p in self.logs.items()}
        self._steps: dict[str, list[tuple[int, int]]] = {}  # (file, rows through it), files with rows only
        for user, counts in self.counts.items():
            total, steps = 0, []
            for k, n in enumerate(counts):
                total += n
                if n:
                    steps.append((k, total))
            self._steps[user] = steps
        self._next = {u: 0 for u in self.counts}
        self.seen = {u: {} for u in self.counts}

    def pending(self, landed: int) -> int:
        """Users still waiting for rows of one of the first ``landed`` files."""
        return sum(1 for u, steps in self._steps.items() if self._next[u] < len(steps) and
                   steps[self._next[u]][0] < landed)

    def sweep(self, landed: int) -> None:
        """Look once at every user with rows pending from the first ``landed`` files."""
        began = time.perf_counter()
        for user, steps in self._steps.items():
            i = self._next[user]
            if i >= len(steps) or steps[i][0] >= landed:
                continue
            reader = self._readers[user]
            if not reader.grew():
                continue
            now = time.time()
            while i < len(steps) and steps[i][1] <= reader.rows:
                self.seen[user][steps[i][0]] = now
                i += 1
            self._next[user] = i
        self.sweeps += 1
        self.sweep_s.append(time.perf_counter() - began)

    def until(self, landed: int, deadline: float) -> bool:
        """Sweep until every file of the first ``landed`` has reached its users (True), or the
        deadline passes (False)."""
        while True:
            self.sweep(landed)
            if not self.pending(landed):
                return True
            if time.time() >= deadline:
                return False
            time.sleep(max(SWEEP_S, SWEEP_REST * self.sweep_s[-1]))

    def delivered(self) -> int:
        return sum(r.rows for r in self._readers.values())


# -- what the checkpoints say ---------------------------------------------------------------------
@dataclass(frozen=True)
class Batch:
    """A micro-batch of a Spark query: when it started (its offsets were logged) and committed
    (None: not committed), and the names of the files it read."""

    started: float
    committed: float | None
    files: tuple[str, ...]


def spark_batches(checkpoint: Path) -> dict[int, Batch]:
    """The micro-batches of the Spark query whose checkpoint is ``checkpoint``, by id, from the
    modification times of its ``offsets/N`` and ``commits/N`` and its file source's log
    (``sources/0``, compacted every few batches into ``N.compact``)."""
    files: dict[int, list[str]] = {}
    log = checkpoint / "sources" / "0"
    for path in sorted(log.iterdir()) if log.is_dir() else ():
        if path.name.startswith("."):
            continue
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:  # the first line is the log's version
            if line.strip():
                entry = json.loads(line)
                files.setdefault(int(entry["batchId"]), []).append(Path(unquote(urlparse(entry["path"]).path)).name)
    batches = {}
    for path in (checkpoint / "offsets").iterdir() if (checkpoint / "offsets").is_dir() else ():
        if path.name.isdigit():
            commit = checkpoint / "commits" / path.name
            batches[int(path.name)] = Batch(path.stat().st_mtime, commit.stat().st_mtime if commit.exists() else None,
                                            tuple(sorted(set(files.get(int(path.name), [])))))
    return batches


def checkpoints(root: Path, rows: Path) -> list[Path]:
    """Every Spark streaming checkpoint under ``root`` (a folder with ``offsets``), not in ``rows``."""
    return sorted(d.parent for d in root.rglob("offsets") if d.is_dir() and rows not in d.parents)


# -- CPU of the command's processes ---------------------------------------------------------------
def cpu_split(pid: int) -> dict[str, float]:
    """CPU seconds (user + system, with reaped children's) of process ``pid`` (``python``), its
    descendants named ``java`` (``jvm``) and its other descendants (``other``), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[int]] = {}
    info: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        name = text[text.find("(") + 1:text.rfind(")")]
        fields = text.rsplit(")", 1)[1].split()
        parents.setdefault(int(fields[1]), []).append(int(entry))
        info[int(entry)] = (name, sum(int(f) for f in fields[11:15]))
    split = {"python": 0.0, "jvm": 0.0, "other": 0.0}
    pending = [pid]
    while pending:
        current = pending.pop()
        name, ticks_used = info.get(current, ("", 0))
        split["python" if current == pid else "jvm" if name == "java" else "other"] += ticks_used / ticks
        pending.extend(parents.get(current, []))
    return split


# -- the numbers ----------------------------------------------------------------------------------
def latencies(watch: Watch, landed: Mapping[int, float], measured: Iterable[int]) -> dict[int, list[float]]:
    """Per measured file that landed: each of its users' latency (seconds), None for a user not
    reached (left out: ``missing`` counts them)."""
    out: dict[int, list[float]] = {}
    for k in measured:
        if k not in landed:
            continue
        out[k] = [watch.seen[u][k] - landed[k] for u, counts in watch.counts.items()
                  if counts[k] and k in watch.seen[u]]
    return out


def summary(watch: Watch, landed: Mapping[int, float], measured: Sequence[int],
            batches: Mapping[int, Batch], names: Mapping[int, str]) -> dict[str, float]:
    """The latency of each measured file (landing to the last of its users having its rows) as
    percentiles; each user's median latency, across users; and each file's time split: waiting
    for its micro-batch to start, the batch until its first user has the rows, from the first
    user to the last, and the last user until the batch commits (medians over files).

    >>> w = Watch({"a": Path("a"), "b": Path("b")}, {"a": [1, 1], "b": [0, 2]})
    >>> w.seen = {"a": {0: 10.5, 1: 11.4}, "b": {1: 11.8}}
    >>> s = summary(w, {0: 10.0, 1: 11.0}, [0, 1], {0: Batch(10.2, 10.9, ("f0",)), 1: Batch(11.1, 12.0, ("f1",))},
    ...             {0: "f0", 1: "f1"})
    >>> s["p50_s"], s["max_s"], s["files"], s["missing"], s["user_p50_max_s"], round(s["fanout_s"], 2)
    (0.65, 0.8, 2.0, 0.0, 0.8, 0.2)
    """
    lat = latencies(watch, landed, measured)
    expected = {k: sum(1 for c in watch.counts.values() if c[k]) for k in lat}
    lat = {k: v for k, v in lat.items() if expected[k]}  # a file no user gets rows of has no latency
    complete = {k: v for k, v in lat.items() if len(v) == expected[k]}
    per_file = [max(v) for v in complete.values()]
    per_user: list[float] = []
    for user, counts in watch.counts.items():
        mine = [watch.seen[user][k] - landed[k] for k in complete if counts[k]]
        if mine:
            per_user.append(median(mine))
    of_file = {name: k for k, name in names.items()}
    batch_of = {of_file[f]: b for b in batches.values() for f in b.files if f in of_file}
    split: dict[str, list[float]] = {"wait_s": [], "to_first_s": [], "fanout_s": [], "to_commit_s": []}
    for k in complete:
        b = batch_of.get(k)
        seen = [watch.seen[u][k] for u, c in watch.counts.items() if c[k]]
        if b is None or not seen:
            continue
        split["wait_s"].append(b.started - landed[k])
        split["to_first_s"].append(min(seen) - b.started)
        split["fanout_s"].append(max(seen) - min(seen))
        if b.committed is not None:
            split["to_commit_s"].append(b.committed - max(seen))
    unlanded = sum(1 for k in measured if k not in landed)
    numbers = {"files": float(len(lat)), "missing": float(len(lat) - len(complete) + unlanded),
               "p50_s": median(per_file), "p95_s": percentile(per_file, 95), "p99_s": percentile(per_file, 99),
               "max_s": max(per_file, default=float("nan")),
               "first_user_p50_s": median([min(v) for v in complete.values()]),
               "user_p50_median_s": median(per_user), "user_p50_min_s": min(per_user, default=float("nan")),
               "user_p50_max_s": max(per_user, default=float("nan")),
               **{key: median(values) for key, values in split.items()}}
    return {k: round(v, 4) for k, v in numbers.items()}


def batch_numbers(batches: Mapping[int, Batch], begin: float, end: float) -> dict[str, float]:
    """The micro-batches that started within [begin, end]: how many, their durations (start to
    commit: median, p95, max), the gap from one's commit to the next's start, files per batch."""
    inside = sorted((b for b in batches.values() if begin <= b.started <= end), key=lambda b: b.started)
    durations = [b.committed - b.started for b in inside if b.committed is not None]
    gaps = [later.started - earlier.committed for earlier, later in zip(inside, inside[1:])
            if earlier.committed is not None]
    return {"batches": float(len(inside)), "batch_p50_s": round(median(durations), 4),
            "batch_p95_s": round(percentile(durations, 95), 4),
            "batch_max_s": round(max(durations, default=float("nan")), 4),
            "batch_gap_p50_s": round(median(gaps), 4),
            "files_per_batch": median([float(len(b.files)) for b in inside])}


# -- the run --------------------------------------------------------------------------------------
class _Command:
    """The command under test: started with ``STREAMWARDEN_*`` stripped from its environment, its
    standard error kept (the last lines, and whether it said it runs)."""

    def __init__(self, argv: Sequence[str]):
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMWARDEN_")}
        self.began = time.time()
        self.process = subprocess.Popen(list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, errors="replace")
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.ready = threading.Event()
        self.ready_at = float("nan")
        self.pipelines = float("nan")
        self.status: int | None = None
        self.own_cpu = self.left_cpu = 0.0
        self._readers = [threading.Thread(target=self._out, daemon=True), threading.Thread(target=self._err,
                                                                                          daemon=True)]
        for reader in self._readers:
            reader.start()

    def _out(self) -> None:
        assert self.process.stdout is not None
        self.stdout.extend(self.process.stdout)

    def _err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            said = READY.search(line)
            if said and not self.ready.is_set():
                self.ready_at, self.pipelines = time.time(), float(said.group(1).replace(",", ""))
                self.ready.set()

    def running(self) -> bool:
        self._reap(block=False)
        return self.status is None

    def _reap(self, *, block: bool) -> None:
        """Reap the command and the orphans adopted meanwhile (Spark's JVM outlives its Python),
        noting the command's exit status and CPU and theirs (``Popen.poll`` would reap the
        command without its CPU time)."""
        while True:
            try:
                pid, code, usage = os.wait4(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.process.pid:
                self.status = os.waitstatus_to_exitcode(code)
                self.own_cpu = usage.ru_utime + usage.ru_stime
                self.process.returncode = self.status  # reaped here: Popen must not wait for it again
            else:
                self.left_cpu += usage.ru_utime + usage.ru_stime

    def tail(self) -> str:
        return "".join(self.stderr[-30:])

    def stop(self, grace_s: float) -> tuple[int, float, float]:
        """SIGTERM, then (after ``grace_s``) SIGKILL; reap it and every orphan: its exit status,
        its CPU and the orphans' CPU."""
        if self.running():
            self.process.send_signal(signal.SIGTERM)
        deadline = time.time() + grace_s
        while self.running() and time.time() < deadline:
            time.sleep(0.2)
        if self.running():
            self.process.kill()
        self._reap(block=True)
        for reader in self._readers:
            reader.join(timeout=5)
        return self.status if self.status is not None else -signal.SIGKILL, self.own_cpu, self.left_cpu


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def drive(plan: Mapping[str, Any], inputs: Path, out: Path, argv: Sequence[str], *, start_timeout_s: float,
          drain_timeout_s: float) -> dict[str, float]:
    """Run the command, feed and watch it as the module docstring says; its numbers."""
    adopted = become_subreaper()
    rows = out / "rows"
    feed = [Path(plan["feed"]) / name for name in plan["names"]]
    warmup, interval, files = int(plan["warmup"]), float(plan["interval_s"]), len(plan["names"])
    users = plan["users"]
    watch = Watch({u["user"]: rows / u["user"] / u["query"] / LOG for u in users},
                  {u["user"]: plan["counts"][u["user"]] for u in users})
    staging = inputs.parent / f".staged-{inputs.name}"
    command = _Command(argv)
    try:
        while not command.ready.wait(0.5):
            if not command.running() or time.time() - command.began > start_timeout_s:
                raise RuntimeError(f"{argv[0]} did not start within {start_timeout_s:.0f} s:\n{command.tail()}")
        warm = Feeder(feed[:warmup], schedule(warmup, interval, time.time(), plan["seed"]), staging, inputs)
        warm.start()
        warm.join()
        if warm.failure is not None:
            raise warm.failure
        warm_began = min(warm.landed.values(), default=time.time())
        if not watch.until(warmup, time.time() + start_timeout_s):
            raise RuntimeError(f"the warm-up files did not reach every user within {start_timeout_s:.0f} s "
                               f"({watch.pending(warmup)} users still waiting):\n{command.tail()}")
        warm_end = time.time()
        own_before, sweeps_before = _own_cpu(), watch.sweeps
        cpu_before, began = cpu_split(command.process.pid), time.time()
        feeder = Feeder(feed[warmup:], schedule(files - warmup, interval, began, plan["seed"] + 1), staging, inputs)
        feeder.start()
        while feeder.is_alive():
            watch.sweep(warmup + len(feeder.landed))
            if not command.running():
                raise RuntimeError(f"{argv[0]} stopped while fed:\n{command.tail()}")
            time.sleep(max(SWEEP_S, SWEEP_REST * watch.sweep_s[-1]))
        if feeder.failure is not None:
            raise feeder.failure
        drained = watch.until(files, time.time() + drain_timeout_s)
        ended = time.time()
        cpu_after = cpu_split(command.process.pid)
        own = _own_cpu() - own_before
        sweeps = watch.sweep_s[sweeps_before:]
    finally:
        status, command_cpu, left_cpu = command.stop(grace_s=120.0)
    if status not in (0, -signal.SIGTERM):
        raise RuntimeError(f"{argv[0]} exited with {status}:\n{command.tail()}")
    landed = {warmup + k: t for k, t in feeder.landed.items()}
    names = {k: feed[k].name for k in range(files)}
    found = [spark_batches(c) for c in checkpoints(out, rows)]
    batches = max(found, key=lambda b: sum(len(x.files) for x in b.values()), default={})  # the one that read them
    window = ended - began
    cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
    counted = batch_numbers(batches, began, ended)
    per_batch = max(counted["batches"], 1.0)
    return {**summary(watch, landed, range(warmup, files), batches, names), **counted,
            "drained": float(drained), "rows_out": float(watch.delivered()), "spark_queries": float(len(found)),
            "pipelines": command.pipelines, "start_s": round(command.ready_at - command.began, 3),
            "warmup_s": round(warm_end - warm_began, 3), "window_s": round(window, 3),
            "python_cpu_s": round(cpu["python"], 3), "jvm_cpu_s": round(cpu["jvm"], 3),
            "other_cpu_s": round(cpu["other"], 3), "cores_used": round(sum(cpu.values()) / window, 3),
            "python_cpu_per_batch_s": round(cpu["python"] / per_batch, 4),
            "jvm_cpu_per_batch_s": round(cpu["jvm"] / per_batch, 4),
            "watcher_cpu_s": round(own, 3), "sweep_ms": round(1000 * median(sweeps), 3),
            "command_cpu_s": round(command_cpu, 3), "left_running_cpu_s": round(left_cpu, 3),
            "load": os.getloadavg()[0], "subreaper": float(adopted)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.network_latency_drive",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="the plan the workload wrote (files, interval, counts)")
    parser.add_argument("--input", type=Path, required=True, help="the (empty) folder the command reads")
    parser.add_argument("--out", type=Path, required=True, help="the run's folder: rows/ and the checkpoints")
    parser.add_argument("--start-timeout", type=float, default=1800.0, metavar="S")
    parser.add_argument("--drain-timeout", type=float, default=120.0, metavar="S")
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("give the command after --: ... -- COMMAND [ARG ...]")
    args = parser.parse_args(argv[:argv.index("--")])
    command = argv[argv.index("--") + 1:]
    plan = json.loads(args.plan.read_text(encoding="utf-8"))
    try:
        numbers = drive(plan, args.input, args.out, command, start_timeout_s=args.start_timeout,
                        drain_timeout_s=args.drain_timeout)
    except RuntimeError as error:
        print(f"network_latency_drive: {error}", file=sys.stderr)
        return 1
    print(json.dumps({k: (None if v != v else v) for k, v in numbers.items()}), flush=True)  # NaN is not JSON
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Batch", "Feeder", "Watch", "batch_numbers", "checkpoints", "cpu_split", "drive", "latencies",
           "schedule", "spark_batches", "summary"]
