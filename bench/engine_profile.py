"""Experiment 7's view of a running deployment: feeding it prepared files, reading its micro-batches.

* :func:`write_prepared` / :func:`land_prepared`: the workload writes every input file once
  (``Workload.prepare``); a pipeline lands file ``k`` of every stream into its own input
  folders, atomically (staged under a hidden name, which the file source skips, then
  renamed), so generating the data is never part of what is measured;
* :func:`progress_since` / :func:`median_phases`: Spark's progress reports of the
  micro-batches after a mark, and the median duration of each phase;
* :func:`profile_terminal_switch`: the network's terminal switch
  (``streamwarden.runtime.network._TerminalSwitch``, run in this Python process on py4j's
  callback thread once per micro-batch of a pipeline) under :class:`cProfile.Profile` while
  ``work`` drives some micro-batches: the time of the call and of what it called directly,
  per micro-batch (wall time: most of it is waiting for the JVM through py4j).

    >>> _label("/x/pyspark/sql/readwriter.py", "text"), _label("<string>", "<listcomp>")
    ('readwriter.text', '<listcomp>')
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.deployments import Deployment
from bench.stats import median

#: The phases of a micro-batch the report shows (Spark's ``durationMs`` keys).
PHASES = ("triggerExecution", "addBatch", "queryPlanning", "walCommit", "commitOffsets", "latestOffset")


def write_prepared(folder: Path, k: int, data: Mapping[str, Iterable[Mapping[str, object]]]) -> int:
    """File ``k`` of each stream of ``data`` as ``folder/<stream>/part-<k>.jsonl``; returns the records written."""
    records = 0
    for stream, rows in data.items():
        (folder / stream).mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r) + "\n" for r in rows]
        (folder / stream / f"part-{k:05d}.jsonl").write_text("".join(lines))
        records += len(lines)
    return records


def land_prepared(folder: Path, inputs: Mapping[str, Path], k: int) -> None:
    """Land prepared file ``k`` of every stream of ``inputs`` into its input folder."""
    for stream, target in inputs.items():
        source = folder / stream / f"part-{k:05d}.jsonl"
        staged = target / f".{source.name}.partial"
        shutil.copyfile(source, staged)
        os.replace(staged, target / source.name)


def input_folders(root: Path, streams: Iterable[str]) -> dict[str, Path]:
    """An empty input folder per stream under ``root/in``."""
    inputs = {stream: root / "in" / stream for stream in streams}
    for path in inputs.values():
        path.mkdir(parents=True, exist_ok=True)
    return inputs


def last_batches(d: Deployment) -> dict[str, int]:
    """The last micro-batch id of each streaming query (a mark for :func:`progress_since`)."""
    return {s.name: (s.lastProgress["batchId"] if s.lastProgress else -1) for s in d.streams}


def progress_since(d: Deployment, since: Mapping[str, int]) -> list[dict[str, Any]]:
    """The progress reports of every micro-batch after ``since`` (its queries' last ids)."""
    return [report for stream in d.streams for report in stream.recentProgress
            if report["batchId"] > since.get(stream.name, -1)]


def median_phases(reports: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``{"phase ms: addBatch": median, ...}`` over ``reports`` (the phases of :data:`PHASES`)."""
    phases: dict[str, list[float]] = {}
    for report in reports:
        for phase, ms in report["durationMs"].items():
            phases.setdefault(phase, []).append(float(ms))
    return {f"phase ms: {phase}": median(phases[phase]) for phase in PHASES if phase in phases}


def profile_terminal_switch(work: Callable[[], None], top: int = 8) -> dict[str, float]:
    """Run ``work`` with every terminal switch call profiled: ``switch batches``, ``switch ms``
    (per micro-batch) and ``switch ms: <callee>`` for its ``top`` direct callees by time."""
    from streamwarden.runtime import network

    switch = network._TerminalSwitch
    original = switch.__call__
    profiles: list[cProfile.Profile] = []
    calls: list[float] = []

    def profiled(self: Any, batch: Any, batch_id: int) -> None:
        profiler = cProfile.Profile()  # one per call: pipelines call it from several threads at once
        began = time.perf_counter()
        try:
            profiler.runcall(original, self, batch, batch_id)
        finally:
            calls.append(time.perf_counter() - began)
            profiles.append(profiler)

    switch.__call__ = profiled  # type: ignore[method-assign]
    try:
        work()
    finally:
        switch.__call__ = original  # type: ignore[method-assign]
    if not calls:
        return {"switch batches": 0}
    merged = pstats.Stats(profiles[0])
    for profiler in profiles[1:]:
        merged.add(profiler)
    stats = merged.stats  # type: ignore[attr-defined]
    root = next(key for key in stats if key[2] == "__call__" and key[0].endswith("network.py"))
    parts: dict[str, float] = {}
    for (path, _, name), (_, _, _, _, callers) in stats.items():
        if root in callers:
            parts[_label(path, name)] = parts.get(_label(path, name), 0.0) + callers[root][3]
    n = len(calls)
    ranked = sorted(parts.items(), key=lambda item: -item[1])[:top]
    return {"switch batches": n, "switch ms": 1000 * sum(calls) / n,
            **{f"switch ms: {label}": 1000 * seconds / n for label, seconds in ranked}}


def _label(path: str, name: str) -> str:
    """``readwriter.text`` for ``.../pyspark/sql/readwriter.py``'s ``text``."""
    module = path.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{name}" if module and not module.startswith("<") else name


__all__ = ["PHASES", "input_folders", "land_prepared", "last_batches", "median_phases", "profile_terminal_switch",
           "progress_since", "write_prepared"]
