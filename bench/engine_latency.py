"""Experiment 7, latency: from a file landing in an input folder to its rows in each user's output.

Configurations (:data:`CONFIGS`), each a pipeline of :mod:`bench.network_engine` that starts
it with a processing-time trigger, feeds it a warm-up file that is not measured, then
``files`` measured files, and stops it:

* *plain*: a hand-written PySpark streaming query doing SEL1 (a selection on Stream1)
  into a JSON sink, the baseline;
* *run*: ``api.run`` of SEL1 for dr_lee (the secured single-query run);
* *network*: a ``NetworkRuntime`` with the three selections SEL1–SEL3 and three users
  (two per query): a file lands in each of the three input folders at once and every
  (user, query) output is watched;
* *plain ×3*: the three selections by hand, running side by side (a reference: the
  network's three pipelines without the runtime).

Every measured file carries a marker (its rows' ``streamid``); the driver lists the
output folders every ``poll_ms`` and notes when a completely written file with that
marker appears. Latency = that moment − the moment the input file was renamed into
place. After each file the driver waits until the queries are idle, then a random part
of a trigger interval, so files land at every phase of the trigger. After its measured
files, the network takes ``profile_files`` more with its terminal switch under cProfile
(:func:`~bench.engine_profile.profile_terminal_switch`).

    >>> [len(v) for v in marked_rows(3, 4).values()], marked_rows(3, 4)["Stream1"][0]["streamid"]
    ([4, 4, 4], 100003)
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from bench.deployments import Deployment, start_network, start_plain, start_separate
from bench.engine_profile import (input_folders, land_prepared, last_batches, median_phases, profile_terminal_switch,
                                  progress_since, write_prepared)
from bench.network_workload import SELECTIONS_TEXT, START, STREAMS, catalog, iso, plain_frame, queries
from bench.stats import median, percentile

MARK = 100_000  # streamid of the rows of file k: MARK + k
PLAIN, RUN, NETWORK, PLAIN3 = "plain", "run", "network", "plain ×3"
CONFIGS = (PLAIN, RUN, NETWORK, PLAIN3)


def marked_rows(k: int, rows: int) -> dict[str, list[dict]]:
    """File ``k`` of each stream: ``rows`` readings with streamid ``MARK + k``, half of them
    passing each selection, at event times k minutes after the start."""
    out: dict[str, list[dict]] = {stream: [] for stream in STREAMS}
    for j in range(rows):
        ts = iso(START + timedelta(minutes=k, seconds=j * 50 / max(rows, 1)))
        passing = j % 2 == 0
        out["Stream1"].append({"ts": ts, "streamid": MARK + k, "location": "ward", "heartRate": 120 if passing else 60})
        out["Stream2"].append({"ts": ts, "streamid": MARK + k, "location": "ward", "speed": 10.0 if passing else 50.0})
        out["Stream3"].append({"ts": ts, "streamid": MARK + k, "location": "ward",
                               "screentime": 7.0 if passing else 2.0, "category": "social"})
    return out


def prepare(folder: Path, files: int, rows: int) -> None:
    """Files ``0 .. files - 1`` of every stream (file 0 warms a configuration up)."""
    for k in range(files):
        write_prepared(folder, k, marked_rows(k, rows))


@dataclass
class OutputWatch:
    """The markers that have appeared in one output folder (files matching ``pattern``)."""

    folder: Path
    pattern: str
    seen: dict[Path, int] = field(default_factory=dict)  # complete files -> their marker

    def markers(self) -> set[int]:
        for path in self.folder.glob(self.pattern):
            if path in self.seen or path.name.startswith("."):
                continue
            try:
                text = path.read_text(encoding="utf-8")
                if not text.endswith("\n"):
                    continue  # still being written
                rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            except (OSError, ValueError):
                continue
            self.seen[path] = rows[0]["streamid"] if rows else -1
        return set(self.seen.values())


def measure(d: Deployment, prepared: Path, inputs: Mapping[str, Path], files: range, trigger_s: float,
            poll_s: float, rng: random.Random, timeout_s: float = 120.0) -> dict[str, list[float]]:
    """Land each prepared file of ``files``; per output, the latency (ms) of each."""
    pattern = "batch=*/part-*" if d.runtime is not None else "part-*"
    watches = {target: OutputWatch(folder, pattern) for target, folder in d.targets.items()}
    latencies: dict[str, list[float]] = {target: [] for target in watches}
    for k in files:
        land_prepared(prepared, inputs, k)
        landed = time.perf_counter()
        pending = set(watches)
        while pending and time.perf_counter() - landed < timeout_s:
            for target in list(pending):
                if MARK + k in watches[target].markers():
                    latencies[target].append(1000 * (time.perf_counter() - landed))
                    pending.discard(target)
            time.sleep(poll_s)
        if pending:
            raise TimeoutError(f"no rows of file {k} in {sorted(pending)} after {timeout_s:.0f} s")
        d.settle(trigger_s)
        time.sleep(rng.uniform(0, trigger_s))
    return latencies


def summary(latencies: Mapping[str, list[float]]) -> dict[str, float]:
    """Percentiles over every file and output, and the fastest and slowest output's median.

    >>> s = summary({"a": [100.0, 300.0], "b": [200.0, 400.0]})
    >>> s["p50_ms"], s["max_ms"], s["samples"], s["fastest_output_ms"], s["slowest_output_ms"]
    (250.0, 400.0, 4, 200.0, 300.0)
    """
    every = [v for values in latencies.values() for v in values]
    per_output = [median(values) for values in latencies.values()]
    return {"p50_ms": median(every), "p90_ms": percentile(every, 90), "p95_ms": percentile(every, 95),
            "max_ms": max(every), "samples": len(every), "outputs": len(latencies),
            "fastest_output_ms": min(per_output), "slowest_output_ms": max(per_output)}


def _start(spark: SparkSession, config: str, folder: Path, inputs: Mapping[str, Path], trigger: str) -> Deployment:
    cat = catalog()
    selections = queries(cat, SELECTIONS_TEXT)
    if config == PLAIN:
        return start_plain(folder, {"SEL1": lambda: plain_frame(spark, "SEL1", inputs)}, trigger=trigger)
    if config == RUN:
        return start_separate(spark, folder, inputs, cat, selections[:1], trigger=trigger)
    if config == NETWORK:
        return start_network(spark, folder, inputs, cat, selections, trigger=trigger)
    return start_plain(folder, {q.id: (lambda q=q: plain_frame(spark, q.id, inputs)) for q in selections},
                       trigger=trigger)


def latency_call(config: str, prepared: str, *, files: int, trigger_ms: int, poll_ms: int, profile_files: int,
                 seed: int) -> Callable[[SparkSession, Path, Path], dict[str, float]]:
    """The pipeline of ``config`` over the files prepared under ``work/prepared``: :func:`summary`
    of its measured files, the median phases of their micro-batches and, for the network, its
    terminal switch's profile."""
    def call(spark: SparkSession, work: Path, out: Path) -> dict[str, float]:
        inputs = input_folders(out, STREAMS)
        trigger_s, poll_s, rng = trigger_ms / 1000, poll_ms / 1000, random.Random(seed)
        d = _start(spark, config, out, inputs, f"{trigger_ms} milliseconds")
        try:
            measure(d, work / prepared, inputs, range(1), trigger_s, poll_s, rng)  # warm-up: not measured
            since = last_batches(d)
            latencies = measure(d, work / prepared, inputs, range(1, 1 + files), trigger_s, poll_s, rng)
            phases = median_phases(r for r in progress_since(d, since) if r["numInputRows"])
            switch = {}
            if config == NETWORK and profile_files:  # after the measured files: profiling slows it down
                switch = profile_terminal_switch(lambda: measure(
                    d, work / prepared, inputs, range(1 + files, 1 + files + profile_files), trigger_s, poll_s, rng))
        finally:
            d.stop()
        return {**summary(latencies), **phases, **switch}
    return call


__all__ = ["CONFIGS", "NETWORK", "PLAIN", "PLAIN3", "RUN", "OutputWatch", "latency_call", "marked_rows", "measure",
           "prepare", "summary"]
