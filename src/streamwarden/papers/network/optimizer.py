"""Multi-query optimization: registered queries' plans merged into one shared-operator network.

Each query is secured for each of its users (the security passes, with the network's
grants deciding where no role policy applies), so role policies apply on top of the
grants; users whose authorized plans are equal (the same roles, say) share one output,
and a query whose users all see the same thing is one output named by its id. Where
users differ, the query has an output per group of users, ``<id>@1``, ``<id>@2``, ...
(and one per authorized graph, when the rewriting unions several). Plans are then made
canonical so that equal work looks equal: relation aliases become the stream's name (an alias is kept only where a query
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
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.errors import StreamwardenError, UnsupportedError
from streamwarden.papers.network.dag import Network, NetworkBuilder
from streamwarden.papers.network.switches import PlacedNetwork
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import (AggCall, Aggregate, Filter, Join, LevelGuard, Node, Project, SecureView, Shield,
                                     Source, View, transform, walk)
from streamwarden.security.rewrite.algorithm import AuthorizedGraph


@dataclass(frozen=True)
class Output:
    """One output of the network: an authorized graph of a registered query, for some of its users."""

    query: str  # the registered query's id
    users: tuple[str, ...]  # the listed users this output serves (the same authorized plan)
    graph: AuthorizedGraph  # root: the canonical plan; id: as replay names it (``_graph``)


@dataclass(frozen=True)
class SharedPlan:
    """The network of a group of queries and, per vertex, the plan node that computes it."""

    network: Network
    nodes: Mapping[str, Node]
    outputs: Mapping[str, Output]  # output id -> what it is and whom it serves
    denied: Mapping[str, tuple[str, ...]]  # query id -> listed users whose roles authorize nothing of it


def shared_network(catalog: Catalog, queries: Sequence[RegisteredQuery]) -> SharedPlan:
    """The shared-operator network of ``queries``, each secured for each of its users."""
    # the passes import the catalog; keep this module light
    from streamwarden.security.passes import SecurityOptions, secure

    builder = NetworkBuilder()
    vertex_of: dict[Node, str] = {}
    nodes: dict[str, Node] = {}
    outputs: dict[str, Output] = {}
    denied: dict[str, tuple[str, ...]] = {}

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
        elif isinstance(node, SecureView):
            vid = builder.select(inputs[0], _view_label(node))
        elif isinstance(node, Shield):  # per-tuple, like a selection (and masking): roles decide its vertex
            vid = builder.select(inputs[0], f"Shield {node.relation} for {', '.join(sorted(node.roles))}")
        elif isinstance(node, LevelGuard):  # levels never share: the level is in the label, so in the vertex
            vid = builder.select(inputs[0], f"Level guard {node.relation} at {node.level}")
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
        options = SecurityOptions(level=q.level, granted_streams=q.granted_streams(catalog))
        groups: dict[tuple[AuthorizedGraph, ...], list[str]] = {}
        bound = q.bind(catalog)  # once for all its users
        for user in q.users:
            try:
                deployed = secure(catalog, user, bound, options).deployed
            except StreamwardenError:  # e.g. not cleared for the query's level: like no policy, nothing
                deployed = ()
            graphs = tuple(replace(g, root=canonical(g.root)) for g in deployed)
            if graphs:
                groups.setdefault(graphs, []).append(user)
            else:
                denied[q.id] = denied.get(q.id, ()) + (user,)
        named = [(graph, tuple(users)) for graphs, users in groups.items() for graph in graphs]
        for k, (graph, users) in enumerate(named, start=1):
            oid = q.id if len(named) == 1 else f"{q.id}@{k}"
            outputs[oid] = Output(q.id, users, graph)
            builder.output(oid, add(graph.root))
    if not outputs:
        raise UnsupportedError("no listed user of any query is authorized to see anything: the network would be empty")
    return SharedPlan(builder.build(), nodes, outputs, denied)


def _view_label(node: SecureView) -> str:
    """A secure view as the network shows it: the policies and what each condition keeps."""
    views = "; ".join(f"{v.policy_id}: {E.render(v.condition)}" for v in node.views)
    return f"Sec_View[{node.kind}] {views}"


def canonical(plan: Node) -> Node:
    """The plan with stream names for aliases and selections split into sorted single conditions."""
    counts = Counter(s.stream for s in walk(plan) if isinstance(s, Source))
    mapping = {s.relation: s.stream for s in walk(plan) if isinstance(s, Source) and counts[s.stream] == 1}
    return transform(plan, lambda node: _canonical_node(node, mapping))


def _canonical_node(node: Node, mapping: dict[str, str]) -> Node | None:

    def rename(e: E.Expr) -> E.Expr:
        return E.rename_relation(e, mapping)

    if isinstance(node, Source):
        return replace(node, relation=mapping.get(node.relation, node.relation))
    if isinstance(node, Filter):
        chain = node.child
        for condition in sorted((rename(c) for c in E.conjuncts(node.predicate)), key=E.render):
            chain = Filter(chain, condition, id=node.id)
        return chain
    if isinstance(node, Join):
        return replace(node, predicate=rename(node.predicate))
    if isinstance(node, SecureView):
        return replace(node, views=tuple(
            View(v.policy_id, rename(v.condition),
                 None if v.attributes is None else frozenset((mapping.get(r, r), a) for r, a in v.attributes))
            for v in node.views))
    if isinstance(node, Project):
        return replace(node, items=tuple((name, rename(e)) for name, e in node.items))
    if isinstance(node, Aggregate):
        return replace(node, aggregates=tuple(AggCall(a.func, None if a.arg is None else rename(a.arg), a.name,
                                                      a.granted) for a in node.aggregates),
                       group_by=tuple((n, rename(g)) for n, g in node.group_by), event_time=rename(node.event_time))
    return None


def network_text(placed: PlacedNetwork, shared: SharedPlan) -> str:
    """The network as ``explain --network`` prints it: operators bottom-up, the users each
    output serves (and who role policies deny), then the switches."""
    network = placed.network
    lines = [f"Shared-operator network of {len(network.queries)} queries ({', '.join(network.queries)}): "
             f"{len(network.operators)} operators, {len(network.common_prefix)} in the common prefix", ""]
    for vid in network.topological_order():
        v = network.vertex(vid)
        mark = "  [common prefix]" if vid in network.common_prefix else ""
        uses = f" <- {', '.join(v.inputs)}" if v.inputs else ""
        serves = f"  serves {', '.join(sorted(v.queries))}" if v.queries else ""
        lines.append(f"  {vid:>4}  {v.label}{uses}{serves}{mark}")
    lines += ["", "Outputs: " + ", ".join(f"{q} = {out}" for q, out in network.outputs)]
    lines += [f"  {oid}{'' if oid == o.query else ' (' + o.query + ')'} for {', '.join(o.users)} "
              f"(authorized by: {', '.join(o.graph.policies) or 'nothing'})" for oid, o in shared.outputs.items()]
    lines += [f"  {q}: nothing for {', '.join(users)} (no role policy of theirs authorizes it)"
              for q, users in shared.denied.items()]
    lines += ["", f"Privacy switches (Algorithm 2): {len(placed.switches)}"]
    lines += [f"  {site.id}" for site in placed.switches]
    for q in network.queries:
        off = sorted(placed.shut_off({q}))
        lines.append(f"  if every user of {q} loses access, {len(off)} of {len(network.operators)} operators stop: "
                     f"{', '.join(off) or 'none'}")
    return "\n".join(lines) + "\n"


__all__ = ["Output", "SharedPlan", "canonical", "network_text", "shared_network"]
