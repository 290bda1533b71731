"""Run one Spark DataFrame builder as a whole process, the way every Spark pipeline of the suite runs.

    python -m bench.suite.job --frame bench.nexmark_plain:plain_frame --arg query=q0 \\
        --arg data=/tmp/nexmark/data --out /tmp/nexmark/out/q0

It starts Spark the one way streamwarden does (:func:`streamwarden.engine.session.get_spark`:
``local[2]``, the same settings for every pipeline, plain PySpark included), calls
``FUNCTION(spark, **args)`` for a DataFrame, writes its rows as Spark JSON part files under
``--out`` (tasks in parallel; the driver never holds the rows) counting them on the way
(an observed metric, no second pass), stops Spark and waits for its JVM to exit, so that the
JVM's CPU time reaches the caller's ``RUSAGE_CHILDREN``, and prints one JSON line::

    {"rows_out": 920000, "startup_s": 6.1, "build_s": 0.4, "write_s": 3.2, "job_cpu_s": 6.0}

``startup_s`` is the time to a ready SparkSession (imports included), ``build_s`` the
function's (parsing, authorizing, planning), ``write_s`` the job's, and ``job_cpu_s`` the
CPU time this process, the JVM and its workers spent from a ready session to the rows
written (what remains of the process's CPU once start-up and shutdown are left out).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any


def process_tree_cpu_s(pid: int) -> float:
    """CPU time (user + system, seconds) of process ``pid`` and every live descendant.

    Spark's Python workers (pandas UDFs, Python data sources) are children of the JVM, not
    threads in it. Waited-for children count through ``cutime``/``cstime``, so a worker
    that exits between two readings is neither lost nor counted twice.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        child = int(entry)
        children.setdefault(int(fields[1]), []).append(child)
        times[child] = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        total += times.get(current, 0)
        pending.extend(children.get(current, []))
    return total / ticks


def _function(path: str) -> Any:
    module, _, name = path.partition(":")
    if not name:
        raise SystemExit(f"--frame expects MODULE:FUNCTION, got {path!r}")
    return getattr(importlib.import_module(module), name)


def _args(entries: Sequence[str]) -> dict[str, str]:
    args = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep:
            raise SystemExit(f"--arg expects KEY=VALUE, got {entry!r}")
        args[key] = value
    return args


def main(argv: Sequence[str] | None = None) -> int:
    began = time.perf_counter()
    parser = argparse.ArgumentParser(prog="python -m bench.suite.job", description=__doc__.splitlines()[0])
    parser.add_argument("--frame", required=True, metavar="MODULE:FUNCTION",
                        help="called as FUNCTION(spark, **args); returns the DataFrame to write")
    parser.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE", help="a keyword argument (text)")
    parser.add_argument("--out", required=True, metavar="DIR", help="where the JSON part files go (replaced)")
    args = parser.parse_args(argv)
    build = _function(args.frame)

    from pyspark import SparkContext
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from streamwarden.engine.session import get_spark

    spark = get_spark()
    gateway = SparkContext._gateway
    ready, cpu_ready = time.perf_counter(), process_tree_cpu_s(os.getpid())  # this Python, the JVM, its workers
    frame = build(spark, **_args(args.arg))
    built = time.perf_counter()
    rows = Observation("rows")
    frame.observe(rows, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").json(args.out)
    written, cpu_written = time.perf_counter(), process_tree_cpu_s(os.getpid())
    rows_out = int(rows.get["rows"])
    spark.stop()
    if gateway is not None:  # the JVM exits once its stdin closes; reaping it hands its CPU time to our parent
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait()
    print(json.dumps({"rows_out": rows_out, "startup_s": round(ready - began, 3), "build_s": round(built - ready, 3),
                      "write_s": round(written - built, 3), "job_cpu_s": round(cpu_written - cpu_ready, 3)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
