"""Measure one Spark action: wall time, CPU time and memory, from the driver JVM.

Where the numbers come from (all in the same local-mode JVM, which runs the driver and
the executor threads):

* wall time: ``time.perf_counter`` around the action;
* process CPU time: user + system time of the JVM process, from ``/proc/<pid>/stat``
  (includes query planning, JIT compilation and garbage collection);
* executor CPU time: Spark's task metric, summed over every stage of every job the
  action started, read from the status store that backs ``SparkContext.statusTracker()``
  (it is kept even with the UI disabled);
* join memory and join row counts: Spark SQL's operator metrics for the action's query
  executions — the ``data size`` of every ``BroadcastExchange`` (the bytes of the hash
  table a broadcast hash join builds: the state the join keeps, which is what a window
  join's memory is), the ``number of output rows`` of the operators feeding each join
  (tuples entering the join) and of the join itself;
* peak JVM heap: the sum of the heap memory pools' peak usage, after a full GC and a
  peak reset before the action (an upper bound on the true peak; dominated by young
  garbage, so noisy: shown for context only).

Spark's own ``peakExecutionMemory`` task metric is not used: for these plans it stays
at one memory page (1 MiB) whatever the input, so it measures nothing here.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import SparkSession

from bench.suite.job import process_tree_cpu_s  # noqa: F401  (re-exported for the benchmarks)


@contextmanager
def sql_conf(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """Set a runtime SQL option inside the block (``None``: leave it alone), then restore it."""
    if value is None:
        yield
        return
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def last_job_id(store: Any) -> int:
    """The id of the newest job in Spark's status store ``store`` (-1 before the first)."""
    jobs = store.jobsList(None)  # newest first
    return int(jobs.apply(0).jobId()) if jobs.size() else -1


def jobs_since(store: Any, mark: int) -> Iterator[Any]:
    """The jobs in ``store`` newer than the job id ``mark``, newest first."""
    listed = store.jobsList(None)
    for i in range(listed.size()):
        job = listed.apply(i)
        if int(job.jobId()) <= mark:
            return
        yield job


@dataclass(frozen=True)
class RunMetrics:
    wall_s: float
    process_cpu_s: float
    executor_cpu_s: float
    join_state_bytes: int
    join_input_rows: int
    join_output_rows: int
    peak_heap_bytes: int
    jobs: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class SparkProbe:
    """Runs actions on ``spark`` and reports what each one cost."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.sc = spark.sparkContext
        jvm = spark._jvm  # type: ignore[attr-defined]
        self.pid = int(jvm.java.lang.ProcessHandle.current().pid())
        self.clock_ticks = os.sysconf("SC_CLK_TCK")
        pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        self.heap_pools = [p for p in pools if str(p.getType().toString()) == "Heap memory"]
        self.store = self.sc._jsc.sc().statusStore()  # type: ignore[attr-defined]
        self.sql_store = spark._jsparkSession.sharedState().statusStore()  # type: ignore[attr-defined]
        self.system = jvm.java.lang.System

    def process_cpu_s(self) -> float:
        fields = open(f"/proc/{self.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.clock_ticks  # utime + stime

    def last_job_id(self) -> int:
        return last_job_id(self.store)

    def measure(self, action: Callable[[], object]) -> RunMetrics:
        """Run ``action`` once (after a full GC) and return its cost."""
        self.system.gc()  # leftovers of the previous run must not be collected in this one
        for pool in self.heap_pools:
            pool.resetPeakUsage()
        before_job = self.last_job_id()
        before_sql = int(self.sql_store.executionsCount())
        cpu0 = self.process_cpu_s()
        start = time.perf_counter()
        action()
        wall = time.perf_counter() - start
        cpu = self.process_cpu_s() - cpu0
        heap = sum(int(pool.getPeakUsage().getUsed()) for pool in self.heap_pools)
        # Task and SQL metrics reach the status stores asynchronously, through the listener bus.
        self.sc._jsc.sc().listenerBus().waitUntilEmpty()  # type: ignore[attr-defined]
        executor_cpu, jobs = self._executor_cpu_since(before_job)
        state, rows_in, rows_out = self._join_metrics_since(before_sql)
        return RunMetrics(wall, cpu, executor_cpu, state, rows_in, rows_out, heap, jobs)

    def _executor_cpu_since(self, before: int) -> tuple[float, int]:
        total = jobs = 0
        for job in jobs_since(self.store, before):
            jobs += 1
            stage_ids = job.stageIds()
            for k in range(stage_ids.size()):
                try:
                    stage = self.store.lastStageAttempt(stage_ids.apply(k))
                except Exception:  # a skipped stage has no attempt: nothing ran
                    continue
                total += int(stage.executorCpuTime())
        return total / 1e9, jobs

    def _join_metrics_since(self, before: int) -> tuple[int, int, int]:
        state = rows_in = rows_out = 0
        count = int(self.sql_store.executionsCount()) - before
        executions = self.sql_store.executionsList(before, max(count, 0))
        for i in range(executions.size()):
            metrics = _join_metrics_of(self.sql_store, executions.apply(i).executionId())
            state, rows_in, rows_out = state + metrics[0], rows_in + metrics[1], rows_out + metrics[2]
        return state, rows_in, rows_out


def _join_metrics_of(sql_store: Any, execution_id: Any) -> tuple[int, int, int]:
    """Broadcast state, join input rows and join output rows of one SQL execution."""
    state = rows_in = rows_out = 0
    graph = sql_store.planGraph(execution_id)
    values = sql_store.executionMetrics(execution_id)
    nodes = {int(n.id()): n for n in _seq(graph.allNodes())}
    feeds: dict[int, list[int]] = {}
    for edge in _seq(graph.edges()):  # data flows from ``fromId`` (child) to ``toId``
        feeds.setdefault(int(edge.toId()), []).append(int(edge.fromId()))

    def metric(node, name: str) -> float | None:  # type: ignore[no-untyped-def]
        for m in _seq(node.metrics()):
            if m.name() == name:
                value = values.get(m.accumulatorId())
                return _parse_metric(value.get()) if value.isDefined() else 0.0
        return None

    def rows_out_of(node_id: int) -> float:
        # Operators without metrics (Project) pass rows through: look below them.
        node = nodes[node_id]
        value = metric(node, "number of output rows")
        if value is not None:
            return value
        return sum(rows_out_of(child) for child in feeds.get(node_id, []))

    for node_id, node in nodes.items():
        name = str(node.name())
        if name == "BroadcastExchange":
            state += int(metric(node, "data size") or 0)
        if name.endswith("Join") or name == "CartesianProduct":
            rows_out += int(metric(node, "number of output rows") or 0)
            rows_in += int(sum(rows_out_of(child) for child in feeds.get(node_id, [])))
    return state, rows_in, rows_out



def _seq(scala_seq):  # type: ignore[no-untyped-def]
    """Iterate a Scala Seq returned through py4j."""
    iterator = scala_seq.iterator()
    while iterator.hasNext():
        yield iterator.next()


_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
_NUMBER = re.compile(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB)?")


def _parse_metric(text: str) -> float:
    """A Spark SQL metric as shown in its UI (``810,852``, ``1024.4 KiB``, or a
    ``total (min, med, max ...)`` header followed by the total) as a number of units."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    body = lines[-1] if lines and lines[0].startswith("total") else (lines[0] if lines else "0")
    match = _NUMBER.search(body)
    if not match:
        return 0.0
    return float(match.group(1).replace(",", "")) * _UNITS.get(match.group(2) or "B", 1)
