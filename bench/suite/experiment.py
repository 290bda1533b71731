"""What an experiment is: a workload, the pipelines that run over it, and the targets they meet.

An experiment is a short declaration (frozen dataclasses, no behaviour of its own):
:mod:`bench.suite.runner` prepares the workload once, runs every pipeline the same way
and writes the measurements; :mod:`bench.suite.report` turns them into tables, plots
and each target's verdict. A pipeline is a whole process (:class:`Command`: the runner
times the process and everything it starts), a callable on the runner's own SparkSession
(:class:`InProcess`) or a callable that needs no Spark (:class:`Local`). A pipeline may
stand for one point of a sweep (its ``params``, e.g. ``{"policies": 50}``); the
experiment's :class:`Table` and :class:`Plot` declarations say which metrics to show
against which params, and ``explain`` turns the measurements into the report's
observations (where the time goes).

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


#: What an in-process pipeline returns: its rows out, or named numbers of its own (``rows_out``
#: among them when it has rows; e.g. ``{"cold_ms": 2.6, "graphs": 2}``), kept with the runner's timing.
Outcome = int | Mapping[str, float]


@dataclass(frozen=True)
class InProcess:
    """A pipeline run on the runner's SparkSession: ``call(spark, workdir, output_dir)`` returns
    its :data:`Outcome`. For experiments whose pipelines share warm state on purpose."""

    call: Callable[[Any, Path, Path], Outcome]


@dataclass(frozen=True)
class Local:
    """A pipeline run in the runner's process without Spark: ``call(workdir, output_dir)``
    returns its :data:`Outcome` (pure-Python work: rewriting, a simulation)."""

    call: Callable[[Path, Path], Outcome]


@dataclass(frozen=True)
class Pipeline:
    """One way of computing a result: its unique ``name``, how it runs, the report's row
    (``group``) and column (``variant``) it belongs to, and the workload facts it reads
    (their sum is its rows in). ``params`` place it in a sweep, for tables and plots
    (``group`` and ``variant`` are params too). ``check(workdir, output_dir)``, when given,
    reads what a run wrote, after it is timed and before its output is deleted, and returns
    named numbers kept with the run (row counts, digests: verifying is not the work measured)."""

    name: str
    run: Command | InProcess | Local
    group: str = ""
    variant: str = ""
    reads: tuple[str, ...] = ()
    params: Mapping[str, float | str] = field(default_factory=dict)
    check: Callable[[Path, Path], Mapping[str, float]] | None = None

    def coordinates(self) -> dict[str, float | str]:
        """``params`` with ``group`` and ``variant``: where the pipeline sits in tables and plots."""
        return {"group": self.group, "variant": self.variant, **self.params}


@dataclass(frozen=True)
class Verdict:
    """A target's outcome and the measured value that decided it, in words (``0.93×``);
    ``met`` is None when what it needs was not measured (a run of part of the experiment)."""

    met: bool | None
    measured: str


@dataclass(frozen=True)
class Measured:
    """The runs of an experiment, as targets read them: per pipeline, each run's numbers
    (``wall_s``, ``cpu_s``, ``rows_in``, ``rows_out``, ``rows_per_s``, ``per_core``, ...), each
    pipeline's coordinates and the workload's facts."""

    runs_by_pipeline: Mapping[str, Sequence[Mapping[str, float]]]
    coordinates: Mapping[str, Mapping[str, float | str]] = field(default_factory=dict)
    facts: Facts = field(default_factory=dict)

    def runs(self, pipeline: str) -> int:
        return len(self.runs_by_pipeline.get(pipeline, ()))

    def median(self, pipeline: str, metric: str) -> float:
        """The median of ``metric`` over the pipeline's runs (NaN when it has none)."""
        return statistic(self.runs_by_pipeline.get(pipeline, ()), metric, "median")

    def where(self, **coordinates: float | str) -> list[str]:
        """The pipelines (measured ones) at ``coordinates``, in declaration order.

        >>> m = Measured({"a": [], "b": []}, {"a": {"variant": "x", "n": 1}, "b": {"variant": "x", "n": 2}})
        >>> m.where(variant="x", n=2)
        ['b']
        """
        return [name for name, at in self.coordinates.items() if name in self.runs_by_pipeline
                and all(at.get(k) == v for k, v in coordinates.items())]

    def value(self, metric: str, stat: str = "median", **coordinates: float | str) -> float:
        """``stat`` of ``metric`` for the one pipeline at ``coordinates`` (NaN when none is, or more)."""
        names = self.where(**coordinates)
        return statistic(self.runs_by_pipeline[names[0]], metric, stat) if len(names) == 1 else float("nan")


def statistic(runs: Sequence[Mapping[str, Any]], metric: str, stat: str = "median") -> float:
    """``stat`` (``median``, ``min``, ``max``, ``p95``, ``mean``) of ``metric`` over ``runs``; NaN without values.

    >>> statistic([{"t": 1.0}, {"t": 3.0}, {"t": 2.0}, {"t": None}], "t", "max")
    3.0
    """
    values = sorted(float(r[metric]) for r in runs if r.get(metric) is not None and not math.isnan(float(r[metric])))
    if not values:
        return float("nan")
    if stat == "p95":
        return values[min(len(values) - 1, math.ceil(0.95 * len(values)) - 1)]
    return {"median": statistics.median, "min": min, "max": max, "mean": statistics.fmean}[stat](values)


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


#: How a column or plot reduces a pipeline's runs to one number (see :func:`statistic`).
STATS = ("median", "min", "max", "p95", "mean")


@dataclass(frozen=True)
class Column:
    """One column of a :class:`Table`: ``stat`` of ``metric`` over the runs of the row's pipeline
    whose ``variant`` is given (None: the row's only pipeline), times ``scale``; with ``over``,
    divided by the same of the pipeline of variant ``over`` in the row (a ratio, e.g.
    ``Column("relative CPU", "cpu_s", "rewritten", over="post-filtering", scale=100, unit=" %")``).
    A metric the runs do not have is shown as ``—``."""

    title: str
    metric: str
    variant: str | None = None
    over: str | None = None
    stat: str = "median"
    scale: float = 1.0
    unit: str = ""

    def __post_init__(self) -> None:
        if self.stat not in STATS:
            raise ValueError(f"column {self.title!r}: stat must be one of {STATS}, got {self.stat!r}")


@dataclass(frozen=True)
class Table:
    """A table of the report: one line per distinct value of the ``rows`` coordinates among the
    pipelines at ``where`` (coordinates: a pipeline's params, ``group`` and ``variant``), in
    declaration order; first the row's coordinates, then the ``columns``; ``text`` above it."""

    title: str
    rows: tuple[str, ...]
    columns: tuple[Column, ...]
    where: Mapping[str, float | str] = field(default_factory=dict)
    text: str = ""


@dataclass(frozen=True)
class Plot:
    """A PNG of the report (``<experiment>_<name>.png``): the ``y`` column against coordinate
    ``x``, one line (``lines``) or bar series (``bars``) per distinct value of the ``series``
    coordinates among the pipelines at ``where``; ``y.variant`` None means each series' own
    pipeline. Whiskers span the runs' min and max when ``y`` is not a ratio. ``log`` and
    ``log_x``: logarithmic axes (``log_x`` for numeric ``x`` on lines only). ``also``: more
    columns drawn on the same axes (each series once per column); ``references``: labelled
    horizontal lines, e.g. a paper's bound ``{"paper: 120 ms": 120}``."""

    name: str
    title: str
    x: str
    y: Column
    series: tuple[str, ...] = ("variant",)
    where: Mapping[str, float | str] = field(default_factory=dict)
    kind: str = "lines"
    log: bool = False
    log_x: bool = False
    also: tuple[Column, ...] = ()
    references: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("lines", "bars"):
            raise ValueError(f"plot {self.name!r}: kind must be 'lines' or 'bars', got {self.kind!r}")


@dataclass(frozen=True)
class Experiment:
    """An experiment: ``name`` (its results are ``bench/results/<name>.json``/``.md``), a title,
    the workload, the pipelines and the targets. ``per_core`` names the workload fact reported
    per CPU-second of each run (e.g. ``events``), next to ``reference`` when given; ``notes`` are
    paragraphs for the report (how the pipelines are made fair, what differs). ``tables`` and
    ``plots`` replace the default table (a line per pipeline: times, rows per second) and bar
    plot (rows in per second) when given; ``explain(measured, facts)`` returns the report's
    observations, markdown paragraphs computed from the measurements (where the time goes).
    ``repeats`` overrides the runner's runs per pipeline (an experiment whose pipelines repeat
    their own work many times: 1), ``warmup`` whether in-process pipelines run once unrecorded."""

    name: str
    title: str
    workload: Workload
    pipelines: tuple[Pipeline, ...]
    targets: tuple[Target, ...] = ()
    per_core: str | None = None
    reference: Reference | None = None
    notes: tuple[str, ...] = field(default=())
    tables: tuple[Table, ...] = ()
    plots: tuple[Plot, ...] = ()
    explain: Callable[[Measured, Facts], Sequence[str]] | None = None
    repeats: int | None = None
    warmup: bool = True

    def __post_init__(self) -> None:
        names = [p.name for p in self.pipelines]
        if len(set(names)) != len(names):
            raise ValueError(f"experiment {self.name}: pipeline names must be unique")
        plots = [p.name for p in self.plots]
        if len(set(plots)) != len(plots):
            raise ValueError(f"experiment {self.name}: plot names must be unique")

    def pipeline(self, name: str) -> Pipeline:
        return next(p for p in self.pipelines if p.name == name)

    def only(self, groups: Sequence[str]) -> Experiment:
        """The same experiment with only the pipelines of ``groups`` (targets on others: not measured)."""
        unknown = sorted(set(groups) - {p.group for p in self.pipelines})
        if unknown:
            raise ValueError(f"experiment {self.name} has no group {unknown[0]!r}")
        return replace(self, pipelines=tuple(p for p in self.pipelines if p.group in groups))
