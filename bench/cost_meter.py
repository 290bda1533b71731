"""What a stretch of streaming work cost: CPU of every process, Spark jobs and tasks, Python workers.

Experiments 6 and 7 run Spark streaming queries inside this Python process's Spark JVM
(local mode: driver and executor threads in one JVM, Python workers as its children).
:class:`CostMeter` reads, between :meth:`~CostMeter.mark` and :meth:`~CostMeter.since`:

* CPU (user + system, from ``/proc``) of the whole process tree of this Python process,
  and its shares: the JVM's own threads (driver, executors, JIT, GC), Spark's live
  Python workers (children of the JVM: ``transformWithState``, Python data sources) and
  this Python process (planning, ``foreachBatch`` callbacks, the benchmark's polling);
* Spark jobs and tasks (the status store behind ``statusTracker()``, kept with the UI
  off), the classes whole-stage code generation compiled and HotSpot's JIT time;
* how many Python worker processes were alive at the end;
* the JVM's CPU by kind of thread (``/proc/<jvm>/task``, native thread names): Spark
  task threads, the streaming queries' own threads (triggers, planning, commits),
  checkpoint and state-store threads, py4j's threads (what Python asks of the JVM, e.g.
  from ``foreachBatch``), the listener bus, RPC, JIT compiler threads, garbage
  collection, the rest, and threads that ended meanwhile (the JVM's own CPU not in a
  live thread, such as JIT compiler threads HotSpot adds and removes); and apart,
  *child processes*: the CPU of the processes the JVM started and reaped meanwhile (its
  ``cutime + cstime``; a Python worker that ended counts here too). Without Hadoop's native library, Hadoop's local file
  system runs ``chmod`` and ``readlink`` as processes (``Shell``) to set permissions
  and resolve links on the checkpoint and output files it writes.

    >>> # meter = CostMeter(spark); mark = meter.mark(); ...; cost = meter.since(mark)
    >>> # cost.cpu_s, cost.jobs, cost.python_workers
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import SparkSession

from bench.spark_probe import jobs_since, last_job_id, process_tree_cpu_s


def children_cpu_s(pid: int) -> float:
    """CPU time (seconds) of the children ``pid`` has waited for (``cutime + cstime``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s(pid: int) -> float:
    """CPU time (user + system, seconds) of process ``pid`` alone, with its waited-for children
    (the JVM without its live Python workers, which :func:`process_tree_cpu_s` adds)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def driver_cpu_s() -> float:
    """CPU time of this Python process (planning, ``foreachBatch``, the benchmark itself)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: Kinds of JVM threads, by the start of their native (15-character) names.
THREAD_KINDS = (("tasks", ("Executor task l",)), ("streaming queries", ("stream executio",)),
                ("checkpoint files", ("ChecksumCheckpo",)), ("state store maintenance", ("state-store-mai",)),
                ("py4j calls", ("Thread-",)), ("listener bus", ("spark-listener-",)),
                ("RPC", ("dispatcher-", "rpc-", "netty-", "shuffle-")),
                ("JIT", ("C2 CompilerThre", "C1 CompilerThre")),
                ("GC", ("GC Thread", "G1 ", "VM Thread", "VM Periodic")))


def thread_kind(name: str) -> str:
    return next((kind for kind, prefixes in THREAD_KINDS if name.startswith(prefixes)), "other")


def thread_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """Every live thread of ``pid``: its native name and CPU ticks (user + system)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, int(fields[11]) + int(fields[12]))
    return out


def python_workers(jvm_pid: int) -> int:
    """Live descendants of the JVM that run Python (Spark's daemon and its forked workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    children.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except OSError:
                continue
    count, pending = 0, list(children.get(jvm_pid, []))
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                count += b"python" in handle.read().split(b"\0")[0]
        except OSError:
            continue
        pending.extend(children.get(pid, []))
    return count


@dataclass(frozen=True)
class Cost:
    """The cost of one measured stretch (see :class:`CostMeter`)."""

    wall_s: float
    cpu_s: float
    jvm_cpu_s: float
    workers_cpu_s: float
    driver_cpu_s: float
    jobs: int
    tasks: int
    codegen_compiles: int
    jit_s: float
    python_workers: int
    jvm_threads_s: dict[str, float]  # JVM CPU by kind of thread (see THREAD_KINDS)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Mark:
    wall: float
    tree: float
    jvm_own: float
    jvm_children: float
    jvm_tree: float
    driver: float
    job: int
    codegen: int
    jit_ms: int
    threads: dict[int, tuple[str, int]]


class CostMeter:
    """Marks and measures the cost of streaming work in this process and its Spark JVM."""

    def __init__(self, spark: SparkSession):
        jvm = spark._jvm  # type: ignore[attr-defined]
        context = spark.sparkContext._jsc.sc()  # type: ignore[attr-defined]
        self.jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        self.store = context.statusStore()
        self.listener_bus = context.listenerBus()
        self.codegen = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        self.jit = jvm.java.lang.management.ManagementFactory.getCompilationMXBean()

    def mark(self) -> Mark:
        return Mark(time.perf_counter(), process_tree_cpu_s(os.getpid()), own_cpu_s(self.jvm_pid),
                    children_cpu_s(self.jvm_pid),
                    process_tree_cpu_s(self.jvm_pid), driver_cpu_s(), last_job_id(self.store),
                    int(self.codegen.getCount()), int(self.jit.getTotalCompilationTime()), thread_ticks(self.jvm_pid))

    def since(self, mark: Mark) -> Cost:
        """The cost from ``mark`` to now (waits for Spark's listener bus, so every finished job counts)."""
        wall = time.perf_counter() - mark.wall
        tree, jvm_own, jvm_tree = process_tree_cpu_s(os.getpid()), own_cpu_s(self.jvm_pid), process_tree_cpu_s(
            self.jvm_pid)
        driver, children = driver_cpu_s(), children_cpu_s(self.jvm_pid) - mark.jvm_children
        threads = thread_ticks(self.jvm_pid)
        self.listener_bus.waitUntilEmpty()
        jobs = list(jobs_since(self.store, mark.job))
        kinds = cpu_by_kind(mark.threads, threads)
        kinds["ended threads"] = max((jvm_own - mark.jvm_own) - children - sum(kinds.values()), 0.0)
        kinds["child processes"] = children
        return Cost(wall_s=wall, cpu_s=tree - mark.tree, jvm_cpu_s=jvm_own - mark.jvm_own,
                    workers_cpu_s=(jvm_tree - jvm_own) - (mark.jvm_tree - mark.jvm_own),
                    driver_cpu_s=driver - mark.driver, jobs=len(jobs),
                    tasks=sum(int(job.numCompletedTasks()) for job in jobs),
                    codegen_compiles=int(self.codegen.getCount()) - mark.codegen,
                    jit_s=(int(self.jit.getTotalCompilationTime()) - mark.jit_ms) / 1000,
                    python_workers=python_workers(self.jvm_pid),
                    jvm_threads_s=kinds)


def spawned_processes(jvm_pid: int, work: Callable[[], None], every_s: float = 0.002) -> dict[str, int]:
    """Run ``work`` while a thread lists ``/proc`` every ``every_s`` for new children of the JVM;
    how many were seen, by the program they ran (a child is first seen under its parent
    thread's name or as ``jspawnhelper``, Java's launcher, then under the program it
    executes; each is counted under the last name seen). A diagnostic: listing ``/proc``
    that often costs CPU itself, so it is never run while measuring."""
    names: dict[int, str] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        text = stat.read()
                except OSError:
                    continue
                if int(text.rsplit(")", 1)[1].split()[1]) == jvm_pid:
                    names[int(entry)] = text[text.index("(") + 1:text.rindex(")")]
            done.wait(every_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def cpu_by_kind(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]]) -> dict[str, float]:
    """CPU seconds per kind of thread between two snapshots (threads alive at the second)."""
    ticks = os.sysconf("SC_CLK_TCK")
    kinds = {kind: 0.0 for kind, _ in THREAD_KINDS} | {"other": 0.0}
    for tid, (name, now) in after.items():
        then = before.get(tid)
        kinds[thread_kind(name)] += (now - (then[1] if then and then[0] == name else 0)) / ticks
    return kinds


__all__ = ["Cost", "CostMeter", "Mark", "THREAD_KINDS", "children_cpu_s", "cpu_by_kind", "driver_cpu_s", "own_cpu_s",
           "python_workers", "spawned_processes", "thread_ticks"]
