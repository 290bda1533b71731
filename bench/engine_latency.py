"""Experiment 7, latency: from a file landing in an input folder to its rows in each user's output.

Configurations (each started once, with the same processing-time trigger, fed a warm-up
file that is not measured, then ``latency_files`` measured files):

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
(:mod:`bench.engine_profile`): where its ``foreachBatch`` spends a micro-batch.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.deployments import Deployment, start_network, start_plain, start_separate
from bench.engine_profile import profile_terminal_switch
from bench.network_workload import (SELECTIONS_TEXT, START, STREAMS, catalog, iso, land_all, plain_frame,
                                    queries)
from bench.stats import median, percentile

MARK = 100_000  # streamid of the rows of measured file k: MARK + k
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


def _watches(d: Deployment) -> dict[str, OutputWatch]:
    pattern = "batch=*/part-*" if d.runtime is not None else "part-*"
    return {target: OutputWatch(folder, pattern) for target, folder in d.targets.items()}


def measure(d: Deployment, inputs: Mapping[str, Path], first: int, files: int, rows: int, trigger_s: float,
            poll_s: float, rng: random.Random, timeout_s: float = 120.0) -> dict[str, list[float]]:
    """Land files ``first .. first + files - 1``; per target, the latency (ms) of each."""
    watches = _watches(d)
    latencies: dict[str, list[float]] = {target: [] for target in watches}
    for k in range(first, first + files):
        land_all(inputs, f"part-{k:05d}.jsonl", marked_rows(k, rows))
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


def batch_phases(d: Deployment, since: Mapping[str, int]) -> dict[str, float]:
    """Median duration (ms) of each phase of the micro-batches with input rows after ``since``
    (batch id per query name), from Spark's progress reports."""
    phases: dict[str, list[float]] = {}
    for stream in d.streams:
        for report in stream.recentProgress:
            if report["batchId"] > since.get(stream.name, -1) and report["numInputRows"]:
                for phase, ms in report["durationMs"].items():
                    phases.setdefault(phase, []).append(float(ms))
    return {phase: median(values) for phase, values in sorted(phases.items())}


def _last_batches(d: Deployment) -> dict[str, int]:
    return {s.name: (s.lastProgress["batchId"] if s.lastProgress else -1) for s in d.streams}


def run_config(spark: SparkSession, config: str, folder: Path, settings: Any, first: int,
               rng: random.Random) -> dict[str, Any]:
    """Start ``config`` in ``folder``, warm it up with one file, measure ``settings.latency_files`` files."""
    cat = catalog()
    selections = queries(cat, SELECTIONS_TEXT)
    inputs = {stream: folder / "in" / stream for stream in STREAMS}
    for path in inputs.values():
        path.mkdir(parents=True, exist_ok=True)
    trigger = f"{settings.trigger_ms} milliseconds"
    starters: dict[str, Callable[[], Deployment]] = {
        PLAIN: lambda: start_plain(folder, {"SEL1": lambda: plain_frame(spark, "SEL1", inputs)}, trigger=trigger),
        RUN: lambda: start_separate(spark, folder, inputs, cat, selections[:1], trigger=trigger),
        NETWORK: lambda: start_network(spark, folder, inputs, cat, selections, trigger=trigger),
        PLAIN3: lambda: start_plain(folder, {q.id: (lambda q=q: plain_frame(spark, q.id, inputs))
                                             for q in selections}, trigger=trigger),
    }
    d = starters[config]()
    try:
        trigger_s = settings.trigger_ms / 1000
        measure(d, inputs, first, 1, settings.rows_per_file, trigger_s, settings.poll_ms / 1000, rng)  # warm-up
        since = _last_batches(d)
        latencies = measure(d, inputs, first + 1, settings.latency_files, settings.rows_per_file, trigger_s,
                            settings.poll_ms / 1000, rng)
        phases = batch_phases(d, since)
        switch = None
        if config == NETWORK and settings.profile_files:  # after the measured files: profiling slows it down
            switch = profile_terminal_switch(lambda: measure(
                d, inputs, first + 1 + settings.latency_files, settings.profile_files, settings.rows_per_file,
                trigger_s, settings.poll_ms / 1000, rng))
    finally:
        d.stop()
    every = [v for values in latencies.values() for v in values]
    return {"latencies_ms": {t: [round(v, 1) for v in values] for t, values in latencies.items()},
            "median_ms": median(every), "p90_ms": percentile(every, 90), "targets": len(latencies),
            "phases_ms": phases, "terminal_switch": switch}


def latency(spark: SparkSession, settings: Any, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Every configuration, ``settings.latency_rounds`` rounds (order reversed every other round);
    per configuration the median over every file and target of every round."""
    rng = random.Random(settings.seed)
    configs = tuple(settings.latency_configs)
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    count = 0
    for rnd in range(settings.latency_rounds):
        for config in reversed(configs) if rnd % 2 else configs:
            count += 1
            began = time.perf_counter()
            runs[config].append(run_config(spark, config, workdir / f"latency-{count:03d}", settings,
                                           first=count * 100, rng=rng))
            log(f"  latency, {config}: median {runs[config][-1]['median_ms']:.0f} ms "
                f"({time.perf_counter() - began:.0f} s)")
    out: dict[str, Any] = {"trigger_ms": settings.trigger_ms, "files": settings.latency_files,
                           "rounds": settings.latency_rounds, "configurations": {}}
    for config, rs in runs.items():
        every = [v for r in rs for values in r["latencies_ms"].values() for v in values]
        per_target: dict[str, list[float]] = {}
        for r in rs:
            for target, values in r["latencies_ms"].items():
                per_target.setdefault(target, []).extend(values)
        out["configurations"][config] = {
            "median_ms": median(every), "p90_ms": percentile(every, 90), "samples": len(every),
            "per_target_median_ms": {t: median(v) for t, v in sorted(per_target.items())},
            "round_medians_ms": [r["median_ms"] for r in rs], "phases_ms": rs[-1]["phases_ms"],
        }
    switches = [r["terminal_switch"] for r in runs.get(NETWORK, []) if r["terminal_switch"]]
    if switches:  # the last round's profile
        out["terminal_switch"] = switches[-1]
    return out


__all__ = ["CONFIGS", "NETWORK", "PLAIN", "PLAIN3", "RUN", "OutputWatch", "latency", "marked_rows", "measure"]
