"""What an experiment is: a workload, the pipelines that run over it, and the targets they meet.

An experiment is a short declaration (frozen dataclasses, no behaviour of its own):
:mod:`bench.suite.runner` prepares the workload once, runs every pipeline the same way
and writes the measurements; :mod:`bench.suite.report` turns them into a table, plots
and each target's verdict. A pipeline is either a whole process (:class:`Command`: the
runner times the process and everything it starts) or a callable on the runner's own
SparkSession (:class:`InProcess`).

    >>> from pathlib import Path
    >>> echo = Pipeline("echo", Command(lambda work, out: ["python3", "-c", "print('{\\"rows_out\\": 1}')"]),
    ...                 group="smoke", variant="python", reads=("lines",))
    >>> experiment = Experiment("smoke", "a smoke test", Workload("nothing", lambda work: {"lines": 1}),
    ...                         (echo,), (Target("echo runs", lambda m: Verdict(m.runs("echo") > 0, "ran")),))
    >>> [p.name for p in experiment.pipelines], experiment.pipeline("echo").variant
    (['echo'], 'python')
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: Named counts a workload reports once prepared, e.g. ``{"events": 1_000_000, "Bid": 920_000}``.
Facts = Mapping[str, int]


@dataclass(frozen=True)
class Workload:
    """The inputs of an experiment: ``prepare(workdir)`` writes them under ``workdir`` once,
    before any pipeline runs, and returns their :data:`Facts`."""

    description: str
    prepare: Callable[[Path], Facts]


@dataclass(frozen=True)
class Command:
    """A pipeline run as a whole process: ``argv(workdir, output_dir)``. The process writes its
    rows under ``output_dir`` and prints, as the last line of its standard output, a JSON object
    with at least ``rows_out`` (any other numbers it adds are kept, e.g. its start-up time)."""

    argv: Callable[[Path, Path], Sequence[str]]


@dataclass(frozen=True)
class InProcess:
    """A pipeline run on the runner's SparkSession: ``call(spark, workdir, output_dir)`` returns
    its rows out. For experiments whose pipelines share warm state on purpose."""

    call: Callable[[Any, Path, Path], int]


@dataclass(frozen=True)
class Pipeline:
    """One way of computing a result: its unique ``name``, how it runs, the report's row
    (``group``) and column (``variant``) it belongs to, and the workload facts it reads
    (their sum is its rows in)."""

    name: str
    run: Command | InProcess
    group: str = ""
    variant: str = ""
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A target's outcome and the measured value that decided it, in words (``0.93×``);
    ``met`` is None when what it needs was not measured (a run of part of the experiment)."""

    met: bool | None
    measured: str


@dataclass(frozen=True)
class Measured:
    """The runs of an experiment, as targets read them: per pipeline, each run's numbers
    (``wall_s``, ``cpu_s``, ``rows_in``, ``rows_out``, ``rows_per_s``, ``per_core``, ...)."""

    runs_by_pipeline: Mapping[str, Sequence[Mapping[str, float]]]

    def runs(self, pipeline: str) -> int:
        return len(self.runs_by_pipeline.get(pipeline, ()))

    def median(self, pipeline: str, metric: str) -> float:
        """The median of ``metric`` over the pipeline's runs (NaN when it has none)."""
        values = [float(r[metric]) for r in self.runs_by_pipeline.get(pipeline, ()) if metric in r]
        return statistics.median(values) if values else float("nan")


@dataclass(frozen=True)
class Target:
    """A claim the experiment checks: its text and ``check(measured) -> Verdict``."""

    text: str
    check: Callable[[Measured], Verdict]


def ratio_at_least(text: str, numerator: str, denominator: str, minimum: float,
                   metric: str = "rows_per_s", beside: str | None = "rows_per_cpu_s") -> Target:
    """A target ``median(numerator) / median(denominator) >= minimum`` on ``metric``; the same
    ratio on ``beside`` is shown next to it (on a shared machine, rows per CPU second tell
    what wall time cannot: whether a pipeline did more work, or waited for the CPU).

    >>> m = Measured({"a": [{"rows_per_s": 9.0}], "b": [{"rows_per_s": 10.0}]})
    >>> ratio_at_least("a >= 0.8 b", "a", "b", 0.8).check(m)
    Verdict(met=True, measured='0.90×')
    """

    def ratio(measured: Measured, name: str) -> float:
        return measured.median(numerator, name) / measured.median(denominator, name)

    def check(measured: Measured) -> Verdict:
        value = ratio(measured, metric)
        if math.isnan(value):
            return Verdict(None, "not measured")
        other = ratio(measured, beside) if beside else math.nan
        beside_text = "" if math.isnan(other) else f" (per CPU s: {other:.2f}×)"
        return Verdict(value >= minimum, f"{value:.2f}×{beside_text}")

    return Target(text, check)


@dataclass(frozen=True)
class Reference:
    """Published figures to show next to the measured ones: per group, in ``unit``, with where
    they come from (a claim not sourced is not shown)."""

    label: str
    unit: str
    values: Mapping[str, float]
    source: str


@dataclass(frozen=True)
class Experiment:
    """An experiment: ``name`` (its results are ``bench/results/<name>.json``/``.md``), a title,
    the workload, the pipelines and the targets. ``per_core`` names the workload fact reported
    per CPU-second of each run (e.g. ``events``), next to ``reference`` when given; ``notes`` are
    paragraphs for the report (how the pipelines are made fair, what differs)."""

    name: str
    title: str
    workload: Workload
    pipelines: tuple[Pipeline, ...]
    targets: tuple[Target, ...] = ()
    per_core: str | None = None
    reference: Reference | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        names = [p.name for p in self.pipelines]
        if len(set(names)) != len(names):
            raise ValueError(f"experiment {self.name}: pipeline names must be unique")

    def pipeline(self, name: str) -> Pipeline:
        return next(p for p in self.pipelines if p.name == name)

    def only(self, groups: Sequence[str]) -> Experiment:
        """The same experiment with only the pipelines of ``groups`` (targets on others: not measured)."""
        unknown = sorted(set(groups) - {p.group for p in self.pipelines})
        if unknown:
            raise ValueError(f"experiment {self.name} has no group {unknown[0]!r}")
        return replace(self, pipelines=tuple(p for p in self.pipelines if p.group in groups))
