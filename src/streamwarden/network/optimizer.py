"""Multi-query optimization: registered queries' plans merged into one shared-operator network.

Each query is bound into the logical plan, then made canonical so that equal work looks
equal: relation aliases become the stream's name (an alias is kept only where a query
reads one stream twice), and a selection's conjuncts become a chain of single-predicate
selections in a fixed order, so two queries sharing some of their conditions share a
prefix of the chain. Plan nodes are immutable values compared by structure, so the same
selection on the same input, or the same join of the same inputs with the same
predicate and windows, is one vertex of the network (hash-consing); the network marks
the operators serving several queries as the common prefix (Definition 1).

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int, b: int}}}\\nusers: {u: {}}")
    >>> shared = shared_network(cat, [RegisteredQuery("q1", ("u",), "SELECT a FROM S WHERE a > 1"),
    ...                               RegisteredQuery("q2", ("u",), "SELECT b FROM S AS x WHERE x.a > 1 AND b < 5")])
    >>> [shared.network.vertex(v).label for v in sorted(shared.network.common_prefix)]
    ['σ S.a > 1']
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from streamwarden.catalog.model import Catalog
from streamwarden.language.binder import bind_query
from streamwarden.language.parser import parse_query
from streamwarden.network.dag import Network, NetworkBuilder
from streamwarden.network.registry import RegisteredQuery
from streamwarden.network.switches import PlacedNetwork
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import AggCall, Aggregate, Filter, Join, Node, Project, Source, transform, walk


@dataclass(frozen=True)
class SharedPlan:
    """The network of a group of queries and, per vertex, the plan node that computes it."""

    network: Network
    nodes: Mapping[str, Node]
    plans: Mapping[str, Node]  # query id -> its canonical plan (root)


def shared_network(catalog: Catalog, queries: Sequence[RegisteredQuery]) -> SharedPlan:
    builder = NetworkBuilder()
    vertex_of: dict[Node, str] = {}
    nodes: dict[str, Node] = {}
    plans: dict[str, Node] = {}

    def add(node: Node) -> str:
        if isinstance(node, Source):
            vid = builder.source(node.stream)  # windows belong to the joins and aggregates that use them
            nodes.setdefault(vid, node)
            return vid
        if node in vertex_of:
            return vertex_of[node]
        inputs = [add(child) for child in node.children()]
        if isinstance(node, Filter):
            vid = builder.select(inputs[0], E.render(node.predicate))
        elif isinstance(node, Join):
            windows = " ".join(str(w) for w in (node.left_window, node.right_window) if w is not None)
            vid = builder.join(inputs[0], inputs[1], f"{E.render(node.predicate)} {windows}".rstrip())
        elif isinstance(node, Project):
            vid = builder.project(inputs[0], ", ".join(name if E.render(e).split(".")[-1] == name
                                                       else f"{E.render(e)} AS {name}" for name, e in node.items))
        elif isinstance(node, Aggregate):
            vid = builder.aggregate(inputs[0], node.label.removeprefix("Σ "))
        else:
            raise TypeError(f"a shared network cannot hold {type(node).__name__} (node {node.id})")
        vertex_of[node] = vid
        nodes[vid] = node
        return vid

    for q in queries:
        plan = canonical(bind_query(parse_query(q.query, f"query {q.id}"), catalog))
        plans[q.id] = plan
        builder.output(q.id, add(plan))
    return SharedPlan(builder.build(), nodes, plans)


def canonical(plan: Node) -> Node:
    """The plan with stream names for aliases and selections split into sorted single conditions."""
    counts = Counter(s.stream for s in walk(plan) if isinstance(s, Source))
    mapping = {s.relation: s.stream for s in walk(plan) if isinstance(s, Source) and counts[s.stream] == 1}
    return transform(plan, lambda node: _canonical_node(node, mapping))


def _canonical_node(node: Node, mapping: dict[str, str]) -> Node | None:
    rename = lambda e: E.rename_relation(e, mapping)  # noqa: E731
    if isinstance(node, Source):
        return replace(node, relation=mapping.get(node.relation, node.relation))
    if isinstance(node, Filter):
        chain = node.child
        for condition in sorted((rename(c) for c in E.conjuncts(node.predicate)), key=E.render):
            chain = Filter(chain, condition, id=node.id)
        return chain
    if isinstance(node, Join):
        return replace(node, predicate=rename(node.predicate))
    if isinstance(node, Project):
        return replace(node, items=tuple((name, rename(e)) for name, e in node.items))
    if isinstance(node, Aggregate):
        return replace(node, aggregates=tuple(AggCall(a.func, None if a.arg is None else rename(a.arg), a.name,
                                                      a.granted) for a in node.aggregates),
                       group_by=tuple((n, rename(g)) for n, g in node.group_by), event_time=rename(node.event_time))
    return None




def network_text(placed: PlacedNetwork) -> str:
    """The network as ``explain --network`` prints it: operators bottom-up, then the switches."""
    network = placed.network
    lines = [f"Shared-operator network of {len(network.queries)} queries ({', '.join(network.queries)}): "
             f"{len(network.operators)} operators, {len(network.common_prefix)} in the common prefix", ""]
    for vid in network.topological_order():
        v = network.vertex(vid)
        mark = "  [common prefix]" if vid in network.common_prefix else ""
        uses = f" <- {', '.join(v.inputs)}" if v.inputs else ""
        serves = f"  serves {', '.join(sorted(v.queries))}" if v.queries else ""
        lines.append(f"  {vid:>4}  {v.label}{uses}{serves}{mark}")
    lines += ["", "Outputs: " + ", ".join(f"{q} = {out}" for q, out in network.outputs), "",
              f"Privacy switches (Algorithm 2): {len(placed.switches)}"]
    lines += [f"  {site.id}" for site in placed.switches]
    for q in network.queries:
        off = sorted(placed.shut_off({q}))
        lines.append(f"  if every user of {q} loses access, {len(off)} of {len(network.operators)} operators stop: "
                     f"{', '.join(off) or 'none'}")
    return "\n".join(lines) + "\n"


__all__ = ["SharedPlan", "canonical", "network_text", "shared_network"]
