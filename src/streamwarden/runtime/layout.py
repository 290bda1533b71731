"""What a network runs: its groups (one Spark query each, their templates and members) and
the pipelines that keep a Spark query of their own, with why (``explain --network``).

Pure planning, no Spark: the same :func:`~streamwarden.runtime.plan.plan_network` and
:func:`~streamwarden.runtime.groups.placement` the running network uses, so what this
shows is what runs.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> from streamwarden.catalog.registry import RegisteredQuery
    >>> from streamwarden.runtime.plan import plan_network
    >>> cat = load_catalog_text("streams: {S: {schema: {ts: timestamp, a: int}}}\\nusers: {ann: {}, bob: {}}")
    >>> queries = [RegisteredQuery("q1", ("ann",), "SELECT a FROM S WHERE a > 1", opens=("S",)),
    ...            RegisteredQuery("q2", ("bob",), "SELECT a FROM S WHERE a > 5", opens=("S",))]
    >>> print(network_layout(plan_network(cat, queries)).text(), end="")
    What runs: 1 Spark query for 2 pipelines of 2 queries.
    <BLANKLINE>
    group S: one Spark query, tuple group over stream S, 2 members
      template π S.a ← σ S.a > ?0 ← IN S
        q1 for ann: 1
        q2 for bob: 5
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamwarden.plan import expr as E
from streamwarden.plan.nodes import LevelGuard, Node, Shield
from streamwarden.plan.templates import Template
from streamwarden.runtime.groups import Hosting, placement
from streamwarden.runtime.plan import NetworkPlan, Pipeline


@dataclass
class GroupLayout:
    """One group: its name, stream, kind, how it reads the stream, and its members by template."""

    name: str
    stream: str
    kind: str  # "tuple" or "aggregate"
    reads: str
    templates: dict[str, tuple[Template, list[tuple[Pipeline, Template]]]] = field(default_factory=dict)

    @property
    def members(self) -> int:
        return sum(len(members) for _, members in self.templates.values())


@dataclass(frozen=True)
class NetworkLayout:
    """The groups and the pipelines of their own of one network plan."""

    groups: tuple[GroupLayout, ...]
    own: tuple[tuple[Pipeline, str], ...]  # (pipeline, why no group hosts it)
    queries: int

    def spark_queries(self) -> int:
        return len(self.groups) + len(self.own)

    def text(self) -> str:
        pipelines = sum(g.members for g in self.groups) + len(self.own)
        count = self.spark_queries()
        lines = [f"What runs: {count} Spark quer{'y' if count == 1 else 'ies'} for {pipelines} pipeline"
                 f"{'' if pipelines == 1 else 's'} of {self.queries} quer{'y' if self.queries == 1 else 'ies'}."]
        for group in self.groups:
            lines += ["", f"group {group.name}: one Spark query, {group.kind} group over stream {group.stream}"
                          f"{group.reads}, {group.members} member{'' if group.members == 1 else 's'}"]
            for template, members in group.templates.values():
                keys = ", ".join(f"{attribute} = ?{index}" for attribute, index in template.keys)
                lines.append(f"  template {_chain(template.root)}" + (f"   (looked up by {keys})" if keys else ""))
                lines += [f"    {p.query.id} for {', '.join(p.users)}: {_constants(t)}" for p, t in members]
        for pipeline, why in self.own:
            lines += ["", f"pipeline {pipeline.name} of its own (one Spark query) for {', '.join(pipeline.users)}: "
                          f"{why}"]
        return "\n".join(lines) + "\n"

    def json(self) -> dict[str, Any]:
        return {
            "spark_queries": self.spark_queries(),
            "groups": [{"name": g.name, "stream": g.stream, "kind": g.kind, "reads": g.reads.strip(", "),
                        "templates": [{"plan": _chain(t.root), "keys": [{"attribute": a, "parameter": i}
                                                                         for a, i in t.keys],
                                       "members": [{"query": p.query.id, "users": list(p.users),
                                                    "pipeline": p.name, "constants": [_value(v) for v in m.values]}
                                                   for p, m in members]}
                                      for t, members in g.templates.values()]}
                       for g in self.groups],
            "own": [{"pipeline": p.name, "query": p.query.id, "users": list(p.users), "why": why}
                    for p, why in self.own],
        }


def network_layout(plan: NetworkPlan) -> NetworkLayout:
    """What ``plan`` runs: the groups that host its pipelines, and the pipelines of their own."""
    groups: dict[str, GroupLayout] = {}
    own: list[tuple[Pipeline, str]] = []
    for pipeline in plan.pipelines:
        place = placement(pipeline.rewriting)
        if not isinstance(place, Hosting):
            own.append((pipeline, place))
            continue
        group = groups.setdefault(place.group, GroupLayout(
            place.group, place.stream, "aggregate" if place.aggregate is not None else "tuple",
            _reads(place.reading)))
        for _, template in place.graphs:
            group.templates.setdefault(template.key, (template, []))[1].append((pipeline, template))
    return NetworkLayout(tuple(groups.values()), tuple(own), len(plan.queries))


def _reads(template: Template) -> str:
    parts = []
    for node in template.reading:
        if isinstance(node, Shield):
            parts.append(f"through its Security Shield for roles {{{', '.join(sorted(node.roles))}}}")
        elif isinstance(node, LevelGuard):
            parts.append(f"at level {node.level}")
    return "".join(", " + p for p in parts)


def _chain(root: Node) -> str:
    """A template's operators from the output down to the stream, ``?k`` for its parameters."""
    labels = []
    node: Node | None = root
    while node is not None:
        labels.append(node.label)
        children = node.children()
        node = children[0] if children else None
    return " ← ".join(labels)


def _constants(template: Template) -> str:
    return ", ".join(_value(v) for v in template.values) or "(none)"


def _value(value: Any) -> str:
    return E.render_literal(E.Literal(value, "string")) if isinstance(value, str) else str(value)


__all__ = ["GroupLayout", "NetworkLayout", "network_layout"]
