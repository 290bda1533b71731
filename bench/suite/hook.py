"""The suite's experiments as ``bench/run.py`` declares its own, until bench.run is folded into the suite.

``bench/run.py`` wants a module with ``Settings``, ``Settings.quick()`` and
``run(settings, log=...)``, a ``section(result, run)`` for its README and a
``plots(result, out)``; this is that module for NEXMark, so one line hooks it::

    Declared("nexmark", "experiment 9: NEXMark under policies", "bench.suite.hook", spark=False,
             section="bench.suite.hook:section", plots="bench.suite.hook:plots", format=1),

``spark=False``: the pipelines are whole processes that start their own Spark, so the
experiment runs before bench.run starts its session (no JVM of the parent competes with
them). The suite's own outputs (``bench/results/nexmark.json``, ``.md``, plots) are written too.

    >>> Settings.quick().repeats, Settings().experiment
    (1, 'nexmark')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.suite import report, runner
from bench.suite.registry import declaration


@dataclass(frozen=True)
class Settings:
    """Which experiment, its workload size (None: its default) and runs per pipeline."""

    experiment: str = "nexmark"
    events: int | None = None
    repeats: int = 3
    small: bool = False

    @classmethod
    def quick(cls) -> Settings:
        return cls(repeats=1, small=True)


def run(settings: Settings, log: Callable[[str], None] = print, spark: Any = None) -> dict[str, Any]:
    """Measure the experiment (the suite's runner; on ``spark`` when given) and return its results."""
    experiment = declaration(settings.experiment)(events=settings.events, quick=settings.small)
    return runner.run(experiment, repeats=settings.repeats, spark=spark, log=log, command="python -m bench.run")


def section(result: dict[str, Any], run_info: dict[str, Any] | None = None) -> str:
    """The suite's report one heading level down, for bench/run.py's README."""
    plots = [f"{result['experiment']}_rows_per_s.png"] + ([f"{result['experiment']}_per_core.png"]
                                                         if result.get("per_core") else [])
    return "\n".join(("#" + line) if line.startswith("#") else line
                     for line in report.markdown(result, plots).splitlines()) + "\n"


def plots(result: dict[str, Any], out: Path) -> list[str]:
    """Write the experiment's plots (and its own ``.md``) into ``out``; returns the names written."""
    return [p.name for p in report.render(result, out)]
