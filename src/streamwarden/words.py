"""What a user would receive from a secured query, said in words before any algebra.

A registration's preview answers "what will I get, and what not, and why" for a person,
not a planner: the columns she receives, from which streams, under which conditions; what
is hidden and which policy or mechanism hides it; what no policy lets through at all.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> from streamwarden.security.passes import secure
    >>> cat = load_catalog_text('''
    ... streams: {Vitals: {schema: {ts: timestamp, patient: int, hospital: string, pulse: int}}}
    ... roles: {Nurse: {}}
    ... users: {ann: {roles: [Nurse], profile: {hospital: north}}}
    ... policies:
    ...   - {id: own_hospital, subject: Nurse, streams: [Vitals], attributes: [pulse, hospital], privilege: read,
    ...      where: "Vitals.hospital = self.hospital"}
    ... ''')
    >>> import textwrap
    >>> for line in in_words(secure(cat, "ann", "SELECT patient, pulse FROM Vitals WHERE pulse > 140")):
    ...     print(textwrap.fill(line, 80))
    You will receive patient and pulse of Vitals, where Vitals.hospital = 'north'
    (policy own_hospital) and Vitals.pulse > 140.
    Hidden: patient is always empty (no policy of yours grants it).
"""

from __future__ import annotations

from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Aggregate, Filter, LevelGuard, Node, SecureView, Shield, Source, walk
from streamwarden.security.rewrite.algorithm import AuthorizedGraph, Rewriting


def in_words(rewriting: Rewriting) -> list[str]:
    """Sentences: one per authorized graph that runs, then what is withheld and why."""
    lines = []
    for graph in rewriting.deployed:
        lines += _graph_words(graph)
    withheld = [g for g in rewriting.graphs if not g.deployed]
    if not rewriting.deployed:
        lines.append("You will receive nothing: no policy of yours authorizes this query.")
    for graph in withheld:
        lines.append(f"Not run: {graph.kind} ({graph.id}), because {graph.reason or 'it is not authorized'}.")
    return lines


def _graph_words(graph: AuthorizedGraph) -> list[str]:
    root = graph.root
    columns = [f.name for f in root.fields if f.name != "ts"] or ["ts"]
    streams = sorted({n.stream for n in walk(root) if isinstance(n, Source)})
    conditions = []
    for node in walk(root):
        if isinstance(node, Filter):
            conditions += [E.render(c) for c in E.conjuncts(node.predicate) if E.render(c) != "TRUE"]
        elif isinstance(node, SecureView):
            held = [f"{E.render(v.condition)} (policy {v.policy_id})" for v in node.views
                    if E.render(v.condition) != "TRUE"]
            if len(held) == 1:
                conditions.append(held[0])
            elif held:
                conditions.append("one of " + "; ".join(held))
    what = _listed(columns)
    aggregate = next((n for n in walk(root) if isinstance(n, Aggregate)), None)
    window = f" per {aggregate.window} window" if aggregate is not None and aggregate.window is not None else ""
    where = f", where {' and '.join(dict.fromkeys(conditions))}" if conditions else ""
    lines = [f"You will receive {what} of {_listed(streams)}{window}{where}."]
    hidden = _always_hidden(root)
    if hidden:
        lines.append(f"Hidden: {_listed(hidden)} {'is' if len(hidden) == 1 else 'are'} always empty "
                     "(no policy of yours grants it).")
    for shield in (n for n in walk(root) if isinstance(n, Shield)):
        lines.append(f"From {shield.stream}, each provider decides: a row arrives only as far as the security "
                     "punctuations its provider sent grant your roles (attributes they do not grant are empty).")
    levels = sorted({str(n.level) for n in walk(root) if isinstance(n, LevelGuard)})
    if levels:
        lines.append(f"You read at level {', '.join(levels)}: tuples above it never reach you, nor anything "
                     "computed from them.")
    return lines


def _always_hidden(root: Node) -> list[str]:
    """Output columns whose value every secure view of the graph masks (NULL on every row)."""
    hidden = []
    views = [n for n in walk(root) if isinstance(n, SecureView)]
    for view in views:
        for field in view.fields:
            if field.name != "ts" and not any(v.grants(field) for v in view.views):
                hidden.append(field.name)
    outputs = {f.name for f in root.fields}
    return sorted({h for h in hidden if h in outputs})


def _listed(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


__all__ = ["in_words"]
