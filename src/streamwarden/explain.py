"""Explain a rewriting to its user: graphs, policies, Spark SQL, and what was refused.

What a user is shown describes only their own query and roles: the policies listed are
those of the user's (effective) roles that the rewriting considered, the shields are
decided for the user's roles, and with security levels nothing is said about data above
the query's level (no counts, no sources). ``explain --network`` is the network
operator's view (every query, user and output of the network) and is kept apart:
:func:`network_json` / :func:`~streamwarden.papers.network.optimizer.network_text`.

The Spark SQL under each deployed graph is Spark's own plan of the job replay runs
(:mod:`streamwarden.engine.sql`), so it needs the catalog and a SparkSession (started if
none is active); ``sql=False`` leaves it out and needs neither. The inputs' plans are
never shown (only their columns), so the SQL says nothing the graph above it does not.

    >>> from streamwarden.catalog.loader import load_catalog
    >>> from streamwarden.security.rewrite.algorithm import rewrite
    >>> catalog = load_catalog("examples/drill.yaml")
    >>> r = rewrite(catalog, "paul", "SELECT SID, Platoon FROM Position")
    >>> print(explain_text(r, catalog, sql=False).splitlines()[0])
    Query for paul (roles: Doctor): SELECT SID, Platoon FROM Position
"""

from __future__ import annotations

import textwrap

from typing import TYPE_CHECKING

from streamwarden.catalog.model import Catalog
from streamwarden.plan.nodes import Shield, render_tree, walk
from streamwarden.security.rewrite.algorithm import Rewriting
from streamwarden.words import in_words

if TYPE_CHECKING:
    from streamwarden.papers.network.optimizer import SharedPlan
    from streamwarden.papers.network.switches import PlacedNetwork


def explain_text(rewriting: Rewriting, catalog: Catalog | None = None, *, sql: bool = True) -> str:
    """The explanation as text; ``sql`` (with the ``catalog``): each deployed graph's Spark SQL."""
    sql_of = graph_sql(rewriting, catalog) if sql else {}
    roles = ""
    if catalog is not None and rewriting.user in catalog.users:
        roles = f" (roles: {', '.join(sorted(catalog.effective_roles(rewriting.user)))})"
    lines = [f"Query for {rewriting.user}{roles}: {rewriting.query}".rstrip(), "", "In words:",
             *(f"  {sentence}" for sentence in in_words(rewriting)), "", "Query graph:",
             textwrap.indent(render_tree(rewriting.plan), "  "), ""]
    if not rewriting.graphs:
        lines.append("No authorized graph: no policy lets this user read these streams, so the query returns nothing.")
    for g in rewriting.graphs:
        status = "deployed" if g.deployed else "NOT DEPLOYED"
        lines.append(f"Authorized graph {g.id} [{status}] via {g.kind}; "
                     f"enforces {', '.join(g.policies) or 'no policy'}")
        if not g.deployed:
            lines.append(f"  reason: {g.reason}")
        lines.append(textwrap.indent(render_tree(g.root), "  "))
        if g.id in sql_of:
            lines.append("  Spark SQL (Spark's plan of the replay job):")
            lines.append(textwrap.indent(sql_of[g.id], "    "))
        lines.append("")
    if rewriting.level is not None:
        lines.append(f"Security level: the query runs at {rewriting.level}; every input is guarded there, below "
                     "its windows (only tuples whose level it dominates), and each row carries the LUB of its "
                     "tuples' levels.")
    shields = shields_of(rewriting)
    if shields:
        lines.append("Security shields (security punctuations decide these streams):")
        lines.extend(f"  {s.id} on {s.relation}: {s.placement} — {s.reason}" for s in shields)
    refused = [d for d in rewriting.decisions if not d.applied]
    applied = [d for d in rewriting.decisions if d.applied]
    if applied:
        lines.append("Policies applied:")
        lines.extend(f"  {d.policy_id} at {d.operator}" for d in applied)
    if refused:
        lines.append("Policies that did not apply:")
        lines.extend(f"  {d.policy_id} at {d.operator}: {d.reason}" for d in refused)
    if rewriting.notes:
        lines.append("Not authorized:")
        lines.extend(f"  {note}" for note in rewriting.notes)
    return "\n".join(lines).rstrip() + "\n"


def graph_sql(rewriting: Rewriting, catalog: Catalog | None) -> dict[str, str]:
    """Per deployed graph id, its Spark SQL (none without the catalog, which says how each
    stream is read). pyspark is imported here only when asked for, not with this module."""
    if catalog is None or not rewriting.deployed:
        return {}
    from streamwarden.engine.sql import graph_sql as spark_sql

    return spark_sql(catalog, rewriting)


def shields_of(rewriting: Rewriting) -> list[Shield]:
    """Every Security Shield of the rewriting's graphs, once each."""
    found: dict[str, Shield] = {}
    for g in rewriting.graphs:
        for node in walk(g.root):
            if isinstance(node, Shield):
                found.setdefault(node.id, node)
    return list(found.values())


def network_json(placed: "PlacedNetwork", shared: "SharedPlan") -> dict:
    """The shared network as ``explain --network --format json`` prints it: the same facts
    as :func:`~streamwarden.papers.network.optimizer.network_text`, as data."""
    network = placed.network
    return {
        "queries": list(network.queries),
        "vertices": [
            {"id": vid, "kind": network.vertex(vid).kind.value, "label": network.vertex(vid).label,
             "inputs": list(network.vertex(vid).inputs), "serves": sorted(network.vertex(vid).queries),
             "common_prefix": vid in network.common_prefix}
            for vid in network.topological_order()
        ],
        "outputs": [
            {"id": oid, "query": o.query, "vertex": dict(network.outputs).get(oid), "users": list(o.users),
             "graph": o.graph.id, "policies": list(o.graph.policies)}
            for oid, o in shared.outputs.items()
        ],
        "denied": {q: list(users) for q, users in shared.denied.items()},
        "switches": [
            {"id": site.id, "kind": site.kind.value, "query": site.query, "tail": site.tail, "head": site.head}
            for site in placed.switches
        ],
        "shut_off": {q: sorted(placed.shut_off({q})) for q in network.queries},
    }


def explain_json(rewriting: Rewriting, catalog: Catalog | None = None, *, sql: bool = True) -> dict:
    """The explanation as data; ``sql`` (with the ``catalog``): each deployed graph's Spark SQL."""
    sql_of = graph_sql(rewriting, catalog) if sql else {}
    return {
        "user": rewriting.user,
        "query": rewriting.query,
        "summary": in_words(rewriting),
        "plan": render_tree(rewriting.plan),
        "graphs": [
            {
                "id": g.id, "kind": g.kind, "policies": list(g.policies), "deployed": g.deployed,
                "reason": g.reason or None, "plan": render_tree(g.root),
                "sql": sql_of.get(g.id),
            }
            for g in rewriting.graphs
        ],
        "decisions": [
            {"policy": d.policy_id, "operator": d.operator, "applied": d.applied, "reason": d.reason or None}
            for d in rewriting.decisions
        ],
        "shields": [
            {"id": s.id, "stream": s.stream, "relation": s.relation, "placement": s.placement, "reason": s.reason,
             "roles": sorted(s.roles), "combine": s.combine if s.server else None}
            for s in shields_of(rewriting)
        ],
        "level": None if rewriting.level is None else str(rewriting.level),
        "notes": list(rewriting.notes),
    }
