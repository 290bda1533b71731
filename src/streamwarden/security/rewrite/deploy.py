"""Static checks on an authorized graph: can it run, and what will always be NULL?

A secure view masks the attributes no policy grants. An aggregate over such an
attribute is the graph the paper calls "syntactically wrong" in Example 5.6: it is not
deployed. A projected attribute that no view grants is deployed, and is NULL in every row
(the user is told in ``explain``).
"""

from __future__ import annotations

from functools import lru_cache

from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Aggregate, Filter, Join, Node, Project, SecureView, Source, walk

Key = tuple[str, str]  # (relation or "", attribute)


@lru_cache(maxsize=4096)
def visible(node: Node) -> frozenset[Key]:
    """Columns of ``node`` that can hold a value (are not masked to NULL everywhere)."""
    if isinstance(node, Source):
        return frozenset((node.relation, name) for name, _ in node.schema)
    if isinstance(node, SecureView):
        below = visible(node.child)
        return frozenset((f.relation or "", f.name) for f in node.fields
                         if node.granted(f) and (f.relation or "", f.name) in below)
    if isinstance(node, Filter):
        return visible(node.child)
    if isinstance(node, Join):
        return visible(node.left) | visible(node.right)
    if isinstance(node, Project):
        below = visible(node.child)
        return frozenset(("", name) for name, expr in node.items if _keys(expr) <= below)
    if isinstance(node, Aggregate):
        below = visible(node.child)
        out = {("", "window_start"), ("", "window_end")}
        out |= {("", n) for n, g in node.group_by if _keys(g) <= below}
        out |= {("", a.name) for a in node.aggregates if a.granted and (a.arg is None or _keys(a.arg) <= below)}
        return frozenset(out)
    raise TypeError(type(node).__name__)


def _keys(expr: E.Expr) -> frozenset[Key]:
    return frozenset((c.relation, c.name) for c in E.columns(expr))


def deployment_problem(root: Node) -> str:
    """Why ``root`` cannot be deployed, or '' when it can."""
    for node in walk(root):
        if isinstance(node, Aggregate):
            below = visible(node.child)
            for agg in node.aggregates:
                if agg.granted and agg.arg is not None and not _keys(agg.arg) <= below:
                    missing = ", ".join(sorted(f"{r}.{a}" for r, a in _keys(agg.arg) - below))
                    views = [n for n in walk(node.child) if isinstance(n, SecureView)]
                    granted = "; ".join(_describe_grants(v) for v in views)
                    return (f"{agg} aggregates {missing}, which its authorized view projects away"
                            + (f" ({granted})" if granted else ""))
    return ""


def unseen_columns(root: Node) -> str:
    """A note naming requested output columns that are NULL in every row of ``root``."""
    if not isinstance(root, Project):
        return ""
    hidden = [name for name, _ in root.items if ("", name) not in visible(root)]
    if not hidden:
        return ""
    return f"{', '.join(hidden)}: no policy that authorizes these tuples grants it, so it is NULL in every row"


def _describe_grants(view: SecureView) -> str:
    parts = []
    for v in view.views:
        atts = "all attributes" if v.attributes is None else ", ".join(sorted(f"{r}.{a}" for r, a in v.attributes))
        parts.append(f"{v.policy_id} grants {atts}")
    return "; ".join(parts)
