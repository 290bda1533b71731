"""The Spark SQL of an authorized graph, as ``explain`` shows it: Spark's own plan of what runs.

The text is derived from the job the executor runs, never written by hand beside it.
:func:`graph_sql` builds the replay job exactly as ``replay`` does
(:func:`~streamwarden.engine.execute.build_job`, the same readers over empty input
folders), watches the compiler build each operator's DataFrame
(:func:`~streamwarden.engine.compiler.watching`), and prints Spark's analyzed plan of
them (:mod:`streamwarden.engine.plan_sql`): one ``WITH`` step per operator of the graph,
named after its node (``#n1.sec`` is ``n1_sec``), over the inputs by relation name.

Why this design, and not the compiler producing SQL text beside its Columns from one
description of each operator: a second output of the compiler is still a second
rendering. Its SQL for a Column expression (``try_add``, the shield's lambdas, the level
functions) would be written by us and could drift from the Column (the hand-kept
rendering this replaced had drifted on ``[NOW]`` bounds and gapped windows), and turning
text into Columns instead would paste catalog values into SQL, which
:mod:`streamwarden.engine.columns` exists to avoid. Spark's plan has nothing to drift
from: it *is* what Spark optimizes and executes. The cost is a SparkSession (explain
starts one, a few seconds) and a compile over empty inputs (about a second per graph);
``explain_text(..., sql=False)`` needs neither.

What is shown is the user's own graph: the plans of the inputs (readers, shields'
SP kernels, the shepherd, action values) are cut out and only named, with their
columns. The graph holds only the user's policies, profile values and level, which
``explain`` shows anyway. It is the replay plan; a continuous run compiles the same
operators over streams, except that its joins keep no replay time buckets (the
watermark bounds their state) and a ``[ROWS n]`` window keeps its tuples in the state
store.

    >>> step_name("n1.sec"), step_name("")
    ('n1_sec', 'step')
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

from pyspark.sql import DataFrame, SparkSession

from streamwarden.catalog.model import Catalog
from streamwarden.engine.compiler import Compiled, action_names, watching
from streamwarden.engine.plan_sql import UnnamedInput, query_sql, quote
from streamwarden.errors import StreamwardenError
from streamwarden.plan.nodes import Node, Source, sources
from streamwarden.security.rewrite.algorithm import Rewriting


def graph_sql(catalog: Catalog, rewriting: Rewriting, spark: SparkSession | None = None) -> dict[str, str]:
    """Per deployed graph id, the Spark SQL its replay runs, or why Spark cannot run it."""
    if spark is None:
        from streamwarden.engine.session import get_spark

        try:
            spark = get_spark()
        except Exception as exc:  # no Java, or the JVM did not start: explain still says the rest
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return {g.id: f"-- not shown: Spark did not start ({reason})" for g in rewriting.deployed}
    with TemporaryDirectory(prefix="streamwarden-explain-") as folder:
        inputs = empty_inputs(Path(folder), rewriting.plan)
        return {g.id: _one_graph(spark, catalog, replace(rewriting, graphs=(g,)), inputs) for g in rewriting.deployed}


def _one_graph(spark: SparkSession, catalog: Catalog, rewriting: Rewriting, inputs: dict[str, Path]) -> str:
    """Each graph alone, so one that Spark cannot run does not hide the others."""
    from streamwarden.engine.execute import build_job  # execute imports this package's compiler

    with watching() as compiled:
        try:
            build_job(spark, catalog, rewriting, inputs, streaming=False)
        except StreamwardenError as exc:
            return f"-- Spark cannot run this graph: {exc}"
    try:
        return compiled_sql(compiled[-1])
    except UnnamedInput:  # rather nothing than a text that would show how an input is read
        return "-- not shown: the plan reads an input explain could not tell apart (please report this)"


def empty_inputs(folder: Path, plan: Node) -> dict[str, Path]:
    """An empty input folder per stream of ``plan``: the readers build their plans (and so
    the columns they give each relation) without any data."""
    inputs = {}
    for stream in sorted({s.stream for s in sources(plan)}):
        inputs[stream] = folder / stream
        inputs[stream].mkdir()
    return inputs


def compiled_sql(compiled: Compiled) -> str:
    """One compiled graph as a ``WITH`` query: a step per operator, the root's SELECT last."""
    used = {s.relation for s in sources(compiled.root)}
    inputs: list[tuple[str, DataFrame]] = [(quote(r), f) for r, f in compiled.inputs.frames.items() if r in used]
    if compiled.inputs.actions is not None and action_names(compiled.root):  # another graph's may be there
        inputs.append(("actions", compiled.inputs.actions))
    taken = {name for name, _ in inputs}
    steps: list[tuple[str, DataFrame]] = []
    *operators, (_, result) = compiled.operators
    for node, frame in operators:
        if isinstance(node, Source) and frame is compiled.inputs.frames.get(node.relation):
            continue  # the input itself
        name = _unique(step_name(node.id), taken)
        taken.add(name)
        steps.append((name, frame))
    return query_sql(result, steps, inputs)


def step_name(node_id: str) -> str:
    """A graph node's id as a SQL name."""
    return re.sub(r"\W", "_", node_id) or "step"


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    return candidate
