"""Synthetic catalogs, query plans and policy sets for the rewriting benchmark.

Queries are shaped like Table III of Carminati et al. (2010): a number of input streams,
σ, π, Join and Σ operators. The CQL dialect has one SELECT per query, and a query with
several Σ needs sub-queries, so plans are built directly from the plan node classes.

Shape of a query with ``n`` inputs and ``m`` aggregates (everything deterministic):

* inputs ``S1..Sn`` (distinct catalog streams), each ``[RANGE 30 s]``;
* leaf ``i``: ``IN Si`` → σ ``Si.a >= 10`` (one per leaf, while the σ budget lasts) →
  either π (keep ``ts, id, a, b``) or, for the ``m`` "aggregated" leaves, Σ
  ``AVG(Si.b) GROUP BY Si.id [RANGE 1 min]`` followed by a π renaming its output;
* the leaves are joined in one left-deep chain on ``S1.id = Si.id`` — the shape the
  binder gives a multi-stream FROM — with the σ left over placed above the first joins
  (``S1.a + Si.a >= 20``) and, budget permitting, a final π at the root.

π columns are named with the engine's physical names (``Si__a``), so the columns of the
predicates above them still resolve when a plan is compiled.

Policies (all for the user's role, over the query's streams, from a seeded RNG):
60 % read policies on single streams (round-robin first, so every input gets one when
there are enough), 20 % join policies over adjacent stream pairs, 20 % aggregate
policies on single streams with a random privilege among AVG, MAX, MIN, COUNT, SUM
(each allows grouping by ``id``, as the query's Σ groups).
Conditions vary so that some implications are proved syntactically, some need the SMT
solver and some are refuted by it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.engine.columns import physical_name
from streamwarden.language.ast import Window
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import AggCall, Aggregate, Filter, Join, Node, Project, Source, walk

USER = "ana"
ROLE = "Analyst"
SCHEMA: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"), ("id", "int"), ("a", "int"), ("b", "double"), ("zone", "string"),
)
_KEPT = ("ts", "id", "a", "b")  # what a leaf π keeps
_INPUT_WINDOW = Window("range", 30.0, None)
_AGG_WINDOW = Window("range", 60.0, None)
AGG_FUNCTIONS = ("avg", "max", "min", "count", "sum")


@dataclass(frozen=True)
class QueryShape:
    """How many operators of each kind to build; ``paper`` is Table III's row."""

    name: str
    inputs: int
    aggregates: int
    selections: int
    projections: int
    paper: str = ""


@dataclass(frozen=True)
class OperatorCounts:
    """Operators counted in a built plan (IN nodes are inputs, not operators, as in Table III)."""

    inputs: int
    projections: int
    selections: int
    joins: int
    aggregates: int

    @property
    def total(self) -> int:
        return self.projections + self.selections + self.joins + self.aggregates

    def describe(self) -> str:
        return (f"{self.inputs} in; {self.total} ops: {self.projections} π, {self.selections} σ, "
                f"{self.joins} Join, {self.aggregates} Σ")


# Table III, with the closest shape a tree of binary joins allows: n inputs need n - 1
# joins (the paper's Q3-Q5 list fewer), and π/σ are then adjusted to the same total.
TABLE_III: tuple[QueryShape, ...] = (
    QueryShape("Q1", 2, 0, 2, 2, "2 in; 5 ops: 2 π, 2 σ, 1 Join"),
    QueryShape("Q2", 3, 1, 3, 4, "3 in; 10 ops: 4 π, 3 σ, 2 Join, 1 Σ"),
    QueryShape("Q3", 6, 1, 7, 7, "6 in; 20 ops: 8 π, 7 σ, 4 Join, 1 Σ"),
    QueryShape("Q4", 9, 2, 10, 10, "9 in; 30 ops: 12 π, 9 σ, 7 Join, 2 Σ"),
    QueryShape("Q5", 18, 4, 20, 19, "18 in; 60 ops: 24 π, 18 σ, 14 Join, 4 Σ"),
)
# The large query: 200 operators, Σ about as dense as in Q5 (4 per 60 operators).
Q200 = QueryShape("Q200", 64, 13, 59, 65, "not in the paper (issue target)")


def catalog_text(streams: int, policies: list[str]) -> str:
    """Catalog YAML with streams ``S1..S<streams>``, one role, one user and ``policies``."""
    schema = ", ".join(f"{name}: {dtype}" for name, dtype in SCHEMA)
    lines = ["streams:"]
    lines += [f"  S{i}: {{schema: {{{schema}}}}}" for i in range(1, streams + 1)]
    lines += ["roles:", f"  {ROLE}: {{}}", "users:", f"  {USER}: {{roles: [{ROLE}], profile: {{zone: Z1}}}}"]
    lines += ["policies:"] + policies if policies else ["policies: []"]
    return "\n".join(lines) + "\n"


def build_catalog(shape: QueryShape, policies: int, *, applicable_aggregates: int | None = None) -> Catalog:
    """The catalog for ``shape`` with ``policies`` policies for the user's role."""
    specs = policy_specs(shape, policies, applicable_aggregates=applicable_aggregates)
    return load_catalog_text(catalog_text(shape.inputs, specs), f"<{shape.name}>")


# -- policies ---------------------------------------------------------------------------
def policy_mix(total: int) -> tuple[int, int, int]:
    """(read, join, aggregate) counts: 60 / 20 / 20 %, rounding in favour of reads."""
    join = total // 5
    aggregate = total // 5
    return total - join - aggregate, join, aggregate


def policy_specs(shape: QueryShape, total: int, *, seed: int = 1,
                 applicable_aggregates: int | None = None) -> list[str]:
    """YAML list items of ``total`` policies over the streams of ``shape``.

    Read policies go round-robin over the streams first (so that, given enough of them,
    every input is authorized); everything else is drawn from a seeded RNG, so the same
    arguments always give the same catalog. ``applicable_aggregates=k`` instead makes
    exactly the first ``k`` aggregated streams get one AVG policy that applies, and
    every other aggregate policy one that does not (for the graph blow-up experiment).
    """
    rng = random.Random(f"{shape.name}/{total}/{seed}")
    n = shape.inputs
    read, join, aggregate = policy_mix(total)
    out: list[str] = []
    for k in range(read):
        s = f"S{k % n + 1}"
        variant = 0 if k < n else rng.randrange(3)
        where = (f"{s}.a >= {rng.randrange(10)}", f"{s}.zone = self.zone",
                 f"{s}.b < {rng.randrange(100, 200)} OR {s}.a > {rng.randrange(10)}")[variant]
        attributes = "[id, a, b]" if variant == 1 else '"*"'
        out.append(_policy(f"r{k + 1}", [s], attributes, "read", where))
    for k in range(join):
        i = rng.randrange(1, n) if n > 1 else 1
        left, right = f"S{i}", f"S{min(i + 1, n)}"
        variant = rng.randrange(4)
        if variant == 0:  # the join predicate as the query writes it: proved syntactically
            where = f"{left}.id = {right}.id AND {left}.a >= {rng.randrange(10)}"
        elif variant == 1:  # the same predicate written the other way round: needs the solver
            where = f"{right}.id = {left}.id AND {right}.b > {rng.randrange(50)}"
        elif variant == 2:  # implies it through arithmetic: needs the solver
            where = f"{left}.id - {right}.id = 0 AND {left}.a <= {rng.randrange(50, 100)}"
        else:  # does not imply it: the solver refutes it, the policy does not apply
            where = f"{left}.a = {right}.a"
        out.append(_policy(f"j{k + 1}", [left, right], '"*"', "read", where))
    aggregated = [f"S{i + 1}" for i in aggregated_leaves(shape)]
    for k in range(aggregate):
        if applicable_aggregates is None:
            s = f"S{rng.randrange(n) + 1}"
            function = rng.choice(AGG_FUNCTIONS)
            implied = rng.random() < 0.5
        elif k < min(applicable_aggregates, len(aggregated)):
            s, function, implied = aggregated[k], "avg", True
        else:
            s, function, implied = f"S{rng.randrange(n) + 1}", rng.choice(AGG_FUNCTIONS[1:]), rng.random() < 0.5
        # The query selects a >= 10: a >= 12 implies it (proved by the solver), a >= 5 does not.
        where = f"{s}.a >= {12 if implied else 5}"
        # group_by: the query's Σ groups by id, and an aggregate policy allows no grouping unless it
        # says so (inference control); without it no aggregate policy would ever apply.
        out.append(_policy(f"g{k + 1}", [s], "[id, b]", function, where, window="{size: 60, offset: 60}",
                           group_by="[id]"))
    return out


def _policy(pid: str, streams: list[str], attributes: str, privilege: str, where: str,
            window: str | None = None, group_by: str | None = None) -> str:
    extra = (f", window: {window}" if window else "") + (f", group_by: {group_by}" if group_by else "")
    return (f"  - {{id: {pid}, subject: {ROLE}, streams: [{', '.join(streams)}], attributes: {attributes}, "
            f'privilege: {privilege}, where: "{where}"{extra}}}')


# -- queries ----------------------------------------------------------------------------
def aggregated_leaves(shape: QueryShape) -> list[int]:
    """0-based leaves topped by Σ: the last leaf of each of ``m`` equal segments."""
    n, m = shape.inputs, shape.aggregates
    return [(k + 1) * n // m - 1 for k in range(m)]


def build_query(shape: QueryShape) -> Node:
    """The plan of ``shape`` (see the module docstring); raises if the budget cannot be placed."""
    ids = _Ids()
    n = shape.inputs
    aggregated = set(aggregated_leaves(shape))
    plain = [i for i in range(n) if i not in aggregated]
    # π budget: after every Σ first, then plain leaves in order, then one at the root.
    pi_left = shape.projections - len(aggregated)
    if pi_left < 0 or pi_left > len(plain) + 1:
        raise ValueError(f"{shape.name}: cannot place {shape.projections} π")
    projected = set(plain[:pi_left])
    root_projection = pi_left > len(plain)
    sigma_leaves = min(shape.selections, n)
    sigma_joins = shape.selections - sigma_leaves
    if sigma_joins > n - 1:
        raise ValueError(f"{shape.name}: cannot place {shape.selections} σ")

    leaves = [_leaf(i, i < sigma_leaves, i in aggregated, i in projected, ids) for i in range(n)]
    tree = leaves[0]
    for i in range(1, n):
        predicate = E.Compare("=", _col(1, "id"), _col(i + 1, "id"))
        left_window = _INPUT_WINDOW if i == 1 and 0 not in aggregated else None
        right_window = _INPUT_WINDOW if i not in aggregated else None
        tree = Join(tree, leaves[i], predicate, left_window, right_window, id=ids.next())
        if i <= sigma_joins:
            cross = E.Compare(">=", E.Arith("+", _col(1, "a"), _col(i + 1, "a"), "long"), E.Literal(20, "int"))
            tree = Filter(tree, cross, id=ids.next())
    if root_projection:
        tree = Project(tree, ((physical_name("S1", "id"), _col(1, "id")), (physical_name("S1", "a"), _col(1, "a"))),
                       id=ids.next())
    built = count_operators(tree)
    expected = (shape.projections, shape.selections, n - 1, shape.aggregates)
    if (built.projections, built.selections, built.joins, built.aggregates) != expected:
        raise AssertionError(f"{shape.name}: built {built.describe()}, wanted {expected}")
    return tree


def _leaf(i: int, select: bool, aggregate: bool, project: bool, ids: "_Ids") -> Node:
    rel = f"S{i + 1}"
    node: Node = Source(rel, rel, SCHEMA, _INPUT_WINDOW, id=ids.next())
    if select:
        node = Filter(node, E.Compare(">=", _col(i + 1, "a"), E.Literal(10, "int")), id=ids.next())
    if aggregate:
        node = Aggregate(node, (AggCall("avg", _col(i + 1, "b"), "avg_b"),), (("id", _col(i + 1, "id")),),
                         _AGG_WINDOW, (_col(i + 1, "ts"),), ("id", "avg_b"), id=ids.next())
        # Rename Σ's output to the physical names of the relation, so joins above resolve.
        items = (
            (physical_name(rel, "ts"), E.Column("", "window_end", "timestamp")),
            (physical_name(rel, "id"), E.Column("", "id", "int")),
            (physical_name(rel, "b"), E.Column("", "avg_b", "double")),
        )
        return Project(node, items, id=ids.next())
    if project:
        node = Project(node, tuple((physical_name(rel, a), _col(i + 1, a)) for a in _KEPT), id=ids.next())
    return node


def _col(i: int, name: str) -> E.Column:
    return E.Column(f"S{i}", name, dict(SCHEMA)[name])


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> str:
        self.n += 1
        return f"n{self.n}"


def count_operators(plan: Node) -> OperatorCounts:
    """Count the operators of ``plan`` by walking it (IN nodes counted as inputs)."""
    nodes = list(walk(plan))
    return OperatorCounts(
        inputs=sum(isinstance(x, Source) for x in nodes),
        projections=sum(isinstance(x, Project) for x in nodes),
        selections=sum(isinstance(x, Filter) for x in nodes),
        joins=sum(isinstance(x, Join) for x in nodes),
        aggregates=sum(isinstance(x, Aggregate) for x in nodes),
    )
