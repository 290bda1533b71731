"""Experiment 7: one engine for every mechanism (issue 12, Performance).

Three parts, each measured side by side in one run on the Spark session of
:mod:`bench.run` (the modules say how):

* latency (:mod:`bench.engine_latency`): from a file landing in an input folder to its
  rows in each user's output, for ``api.run`` of a selection and a ``NetworkRuntime``
  with three selections and three users, against a plain PySpark streaming query doing
  the same selection with the same processing-time trigger;
* steady state (:mod:`bench.engine_steady`): CPU of every process and Spark jobs per
  micro-batch of the three-query network (CQ1–CQ3) against the plain query of its
  heaviest query alone and the three queries run separately; the network with one
  pipeline's users revoked and with that query unregistered;
* every mechanism at once (:mod:`bench.engine_mixed`): a network mixing role policies
  (one tied to a live action), a punctuated stream behind shields and security levels,
  against the same queries unsecured.

Before measuring (``warm_up``), one small network and one plain query run through a few
micro-batches, so that the first configuration does not pay the JVM's start (JIT, class
loading) alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.engine_latency import latency
from bench.engine_mixed import mixed
from bench.engine_steady import Feeder, plain_name, run_network, run_other, steady
from bench.levels import OtherWork
from bench.workdir import scratch_dir

#: Issue 12's targets (Performance).
TARGET_LATENCY_RATIO = 1.5  # median latency, run and network, against plain PySpark
TARGET_PLAIN_RATIO = 1.3  # three-query network CPU per micro-batch / its heaviest query, plain, alone
TARGET_SEPARATE_RATIO = 0.5  # network CPU / the same queries run separately
TARGET_OFF_SHARE = 0.10  # a branch whose users all lost access / the same branch on
TARGET_JOBS_PER_BATCH = 3.0
TARGET_MIXED_RATIO = 0.7  # secured mixed network throughput / the same queries unsecured


@dataclass(frozen=True)
class Settings:
    """Sizes of experiment 7; ``quick`` is the smoke version."""

    trigger_ms: int = 500
    seed: int = 12
    warm_up: bool = True
    # latency
    latency_files: int = 10
    rows_per_file: int = 40
    poll_ms: int = 10
    profile_files: int = 3  # after the network's measured files: its terminal switch under cProfile (0: off)
    latency_rounds: int = 2
    latency_configs: tuple[str, ...] = ("plain", "run", "network", "plain ×3")
    # steady state
    steady_files: int = 4
    per_minute: int = 60
    stream3_per_minute: int = 10
    minutes_per_file: int = 2
    steady_rounds: int = 2
    plain_queries: tuple[str, ...] = ("CQ1", "CQ2", "CQ3")
    steady_separate: bool = True
    steady_probe: bool = True  # the network without CQ2, and whether a revoked pipeline stops by itself
    # every mechanism at once
    mixed_chunks: int = 3
    chunk_minutes: int = 3
    patients: int = 20
    heart_interval_s: float = 1.0
    policy_changes: int = 2
    beds: int = 10
    ward_interval_s: int = 2
    log_rate_per_s: float = 6.0
    mixed_rounds: int = 2
    mixed_configs: tuple[str, ...] = ("secured network", "unsecured network", "plain")
    mixed_alone: bool = True  # a diagnostic after the rounds: each query alone, secured and unsecured

    @classmethod
    def quick(cls) -> "Settings":
        """The smoke version: one cold round of each part, the separate runs and the plain mixed
        queries left out, a shorter trigger (nothing is judged)."""
        return cls(trigger_ms=250, warm_up=False, latency_files=1, latency_rounds=1,
                   latency_configs=("plain", "run", "network"), profile_files=1, steady_files=1, steady_rounds=1,
                   plain_queries=("CQ2",), steady_separate=False, steady_probe=False, mixed_chunks=1, chunk_minutes=1, patients=4,
                   policy_changes=1, log_rate_per_s=3.0, mixed_rounds=1,
                   mixed_configs=("secured network", "unsecured network"), mixed_alone=False)

    @property
    def judged(self) -> bool:
        """Whether the run can support performance verdicts: warmed up, every part at least two rounds."""
        return self.warm_up and min(self.latency_rounds, self.steady_rounds, self.mixed_rounds) >= 2

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def warm_up(spark: SparkSession, settings: Settings, workdir: Path) -> None:
    """A few micro-batches of a small network and of a plain query (results thrown away)."""
    feeder = Feeder(spark, Settings(steady_files=2, trigger_ms=settings.trigger_ms))
    run_network(spark, feeder, workdir / "warm-network")  # its probe's diagnostic is thrown away too
    run_other(spark, feeder, plain_name("CQ2"), workdir / "warm-plain")


def run(spark: SparkSession, settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every part of experiment 7, as plain data for the report and the plot."""
    others = OtherWork(os.getpid())
    started = time.perf_counter()
    result: dict[str, Any] = {"settings": settings.as_dict()}
    with scratch_dir("streamwarden-engine-bench-") as workdir:
        if settings.warm_up:
            warm_up(spark, settings, workdir)
            log(f"  warm-up: {time.perf_counter() - started:.0f} s")
        for name, part in (("latency", latency), ("steady", steady), ("mixed", mixed)):
            began = time.perf_counter()
            result[name] = part(spark, settings, workdir, log)
            result[name]["measure_s"] = round(time.perf_counter() - began, 1)
    result["load_average"] = others.load_average()
    result["measure_s"] = round(time.perf_counter() - started, 1)
    return result


__all__ = ["Settings", "TARGET_JOBS_PER_BATCH", "TARGET_LATENCY_RATIO", "TARGET_MIXED_RATIO", "TARGET_OFF_SHARE",
           "TARGET_PLAIN_RATIO", "TARGET_SEPARATE_RATIO", "run"]
