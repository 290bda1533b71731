"""Where a network's terminal switch spends a micro-batch: cProfile inside ``foreachBatch``.

The runtime's terminal switch (``streamwarden.runtime.network._TerminalSwitch``) runs in
this Python process, on py4j's callback thread, once per micro-batch of a pipeline.
:func:`profile_terminal_switch` wraps it (for the benchmark only, restored afterwards)
so that each call runs under its own :class:`cProfile.Profile` (pipelines call it from
several threads at once), lets ``work`` drive some
micro-batches, and returns the time of the call and of what it called directly, per
micro-batch (wall time: most of it is waiting for the JVM through py4j).

    >>> # profile_terminal_switch(lambda: feed_three_files())
    >>> # {"batches": 9, "total_ms": 1500.0, "parts_ms": {"DataFrameWriter.text": 900.0, ...}}
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable
from typing import Any


def profile_terminal_switch(work: Callable[[], None], top: int = 8) -> dict[str, Any]:
    """Run ``work`` with every terminal switch call profiled; the ``top`` direct callees by time."""
    from streamwarden.runtime import network

    switch = network._TerminalSwitch
    original = switch.__call__
    profiles: list[cProfile.Profile] = []
    calls: list[float] = []

    def profiled(self: Any, batch: Any, batch_id: int) -> None:
        profiler = cProfile.Profile()
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
        return {"batches": 0, "total_ms": 0.0, "parts_ms": {}}
    merged = pstats.Stats(profiles[0])
    for profiler in profiles[1:]:
        merged.add(profiler)
    stats = merged.stats  # type: ignore[attr-defined]
    root = next(key for key in stats if key[2] == "__call__" and key[0].endswith("network.py"))
    parts: dict[str, float] = {}
    for (path, _, name), (_, _, _, _, callers) in stats.items():
        if root in callers:
            label = _label(path, name)
            parts[label] = parts.get(label, 0.0) + callers[root][3]
    ranked = sorted(parts.items(), key=lambda item: -item[1])[:top]
    n = len(calls)
    return {"batches": n, "total_ms": 1000 * sum(calls) / n,
            "parts_ms": {label: 1000 * seconds / n for label, seconds in ranked}}


def _label(path: str, name: str) -> str:
    """``readwriter.text`` for ``.../pyspark/sql/readwriter.py``'s ``text``."""
    module = path.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{name}" if module and not module.startswith("<") else name


__all__ = ["profile_terminal_switch"]
