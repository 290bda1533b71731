"""Secure query rewriting: Algorithm 1 (Sec_Rewr) of Carminati et al.

Given a query graph G and a user u, :func:`rewrite` returns the authorized graphs: their
union outputs all and only the tuples of G that some policy authorizes u to see
(Theorems 5.5 and 5.6). The recursion follows the paper case by case:

* IN: Sec_Read. All of the user's read views on the stream are merged into one
  :class:`SecureView` (per tuple: passes if a view holds, each attribute visible if a
  view that holds grants it), so the graph count does not grow with the policy count.
* σ, π: applied on top of every authorized graph of the input.
* Join: the join of every pair of input graphs (AG_j) plus, when join policies apply,
  one graph with their merged Sec_Join view after the unsecured join (AG_sj).
* Σ: Σ over every input graph (AG_a) plus one graph per applicable aggregate policy,
  Sec_Aggr over the unsecured input with the enlarged window (AG_sa).

Graphs that cannot run (Example 5.6: an aggregate over an attribute the view projected
away) are kept, marked not deployed, with the reason.

    >>> from streamwarden.catalog.loader import load_catalog
    >>> cat = load_catalog("examples/drill.yaml")
    >>> r = rewrite(cat, "paul", "SELECT SID, Pos FROM Position")
    >>> [(g.id, g.policies) for g in r.graphs]
    [('ag1', ('p1',))]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamwarden.catalog.lattice import Level
from streamwarden.catalog.model import Catalog
from streamwarden.errors import AuthorizationError
from streamwarden.language.binder import bind_text
from streamwarden.language.insert_sp import InsertSp
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Aggregate, Filter, Join, Node, Project, SecureView, Source, walk
from streamwarden.security.rewrite.deploy import deployment_problem, unseen_columns
from streamwarden.security.rewrite.secure_ops import Context, Decision, Obj, sec_aggr, sec_join, sec_read


@dataclass(frozen=True)
class AuthorizedGraph:
    """One authorized graph: a plan that outputs only authorized tuples."""

    id: str
    root: Node
    kind: str  # how it authorizes: read views, join policies, aggregate policy <id>
    policies: tuple[str, ...]
    deployed: bool = True
    reason: str = ""


@dataclass(frozen=True)
class Rewriting:
    """The result of rewriting one query for one user."""

    user: str
    query: str
    plan: Node
    graphs: tuple[AuthorizedGraph, ...]
    decisions: tuple[Decision, ...]
    notes: tuple[str, ...] = field(default=())
    on_result: tuple[InsertSp, ...] = ()  # ON RESULT (INSERT SP ...): results are published under this policy
    level: Level | None = None  # the security level the query runs at, if any
    # every security pass ran (streamwarden.security.passes.secure): only then may the engine run it
    secured: bool = False

    @property
    def deployed(self) -> tuple[AuthorizedGraph, ...]:
        return tuple(g for g in self.graphs if g.deployed)


@dataclass(frozen=True)
class _Candidate:
    root: Node
    kind: str


def rewrite(catalog: Catalog, user: str, query: str | Node, *,
            granted_streams: frozenset[str] = frozenset()) -> Rewriting:
    """Rewrite ``query`` (CQL text or a bound plan) into authorized graphs for ``user``.

    ``granted_streams``: a shared network's query whose admin-given grants alone open these
    streams (the privacy switches of the shared-network paper; fixed when the query was
    registered, :meth:`~streamwarden.catalog.registry.RegisteredQuery.granted_streams`): they
    pass as they are, whatever policies the catalog has since gained or lost. Every other
    stream is read through the user's role policies (or its SPs, or its level), so a
    stream nothing opens gives nothing.
    """
    check_user(catalog, user)
    plan = bind_text(query, catalog) if isinstance(query, str) else query
    text = query if isinstance(query, str) else ""
    rewriter = _Rewriter(Context(catalog, catalog.users[user]), granted_streams)
    candidates, _ = rewriter.visit(plan)
    graphs = []
    for i, candidate in enumerate(candidates, start=1):
        problem = deployment_problem(candidate.root)
        policies = tuple(sorted({p for n in walk(candidate.root) if isinstance(n, SecureView) for p in n.policy_ids}))
        graphs.append(AuthorizedGraph(f"ag{i}", candidate.root, candidate.kind, policies, not problem, problem))
    notes = [note for note in (unseen_columns(g.root) for g in graphs if g.deployed) if note]
    considered = {d.policy_id for d in rewriter.decisions}
    mine = {p.id: p for p in catalog.policies_for(user)}
    for stream in sorted({s.stream for s in walk(plan) if isinstance(s, Source)}):
        if _decided_elsewhere(catalog, stream, granted_streams):
            continue  # its SPs, the security levels or the network's grants alone decide
        if not any(stream in mine[p].streams for p in considered if p in mine):
            notes.append(f"{stream}: none of {user}'s roles ({', '.join(sorted(catalog.effective_roles(user)))}) "
                         f"has a policy on this stream")
    return Rewriting(user, text, plan, tuple(graphs), tuple(rewriter.decisions), tuple(notes))


def check_user(catalog: Catalog, user: str) -> None:
    if user not in catalog.users:
        raise AuthorizationError(f"unknown user {user!r} "
                                 f"(the catalog declares: {', '.join(catalog.users) or 'no users'})")


class _Rewriter:
    def __init__(self, ctx: Context, granted_streams: frozenset[str] = frozenset()):
        self.ctx = ctx
        self.granted_streams = granted_streams
        self.decisions: list[Decision] = []

    def visit(self, node: Node) -> tuple[list[_Candidate], Obj]:
        if isinstance(node, Source):
            return self.source(node)
        if isinstance(node, (Filter, Project)):
            return self.unary(node)
        if isinstance(node, Join):
            return self.join(node)
        if isinstance(node, Aggregate):
            return self.aggregate(node)
        raise TypeError(f"cannot rewrite {type(node).__name__}")

    def source(self, node: Source) -> tuple[list[_Candidate], Obj]:
        obj = Obj(((node.relation, node.stream),), ())
        catalog = self.ctx.catalog
        if _decided_elsewhere(catalog, node.stream, self.granted_streams):
            # Without role policies on a punctuated stream its SPs alone decide (the Security
            # Shield pass guards it, streamwarden.security.punctuation.placement); with security levels
            # in force, the levels do (streamwarden.security.levels.guard); a shared query's
            # grants open the streams they were registered to open.
            kind = ("query grants" if node.stream in self.granted_streams else
                    "security punctuations" if catalog.streams[node.stream].punctuated else "security levels")
            return [_Candidate(node, kind)], obj
        views, decisions = sec_read(self.ctx, node, f"Sec_Read({node.relation})")
        self.decisions.extend(decisions)
        if not views:
            return [], obj
        secured = SecureView(node, tuple(views), "read", id=f"{node.id}.sec")
        return [_Candidate(secured, "read views")], obj

    def unary(self, node: Filter | Project) -> tuple[list[_Candidate], Obj]:
        children, obj = self.visit(node.child)
        graphs = [_Candidate(node.with_children((c.root,)), c.kind) for c in children]
        if isinstance(node, Filter):
            obj = Obj(obj.relations, obj.exps + (node.predicate,))
        return graphs, obj

    def join(self, node: Join) -> tuple[list[_Candidate], Obj]:
        lefts, left_obj = self.visit(node.left)
        rights, right_obj = self.visit(node.right)
        graphs = [
            _Candidate(node.with_children((left.root, right.root)), _combine(left.kind, right.kind))
            for left in lefts
            for right in rights
        ]
        views, decisions = sec_join(self.ctx, left_obj, right_obj, node, f"Sec_Join({E.render(node.predicate)})")
        self.decisions.extend(decisions)
        if views:
            graphs.append(_Candidate(SecureView(node, tuple(views), "join", id=f"{node.id}.sec"), "join policies"))
        return graphs, left_obj.union(right_obj, (node.predicate,))

    def aggregate(self, node: Aggregate) -> tuple[list[_Candidate], Obj]:
        children, obj = self.visit(node.child)
        graphs = [_Candidate(node.with_children((c.root,)), c.kind) for c in children]
        grants, decisions = sec_aggr(self.ctx, obj, node, f"Sec_Aggr({', '.join(map(str, node.aggregates))})")
        self.decisions.extend(decisions)
        for grant in grants:
            secured = SecureView(node.child, (grant.view,), "aggregate", id=f"{node.id}.sec.{grant.view.policy_id}")
            graphs.append(_Candidate(
                Aggregate(secured, grant.aggregates, node.group_by, grant.window, node.event_time, node.items,
                          id=f"{node.id}.{grant.view.policy_id}", min_group=grant.min_group),
                f"aggregate policy {grant.view.policy_id}",
            ))
        return graphs, obj


def _decided_elsewhere(catalog: Catalog, stream: str, granted_streams: frozenset[str] = frozenset()) -> bool:
    """A shared query's grants open ``stream``; or no role policy names it, and its SPs or the
    security levels guard it instead."""
    if stream in granted_streams:
        return True
    if any(stream in p.streams for p in catalog.policies):
        return False
    return catalog.streams[stream].punctuated or catalog.lattice is not None


def _combine(left: str, right: str) -> str:
    """The kinds of a join's two inputs, each named once ("read views + join policies")."""
    kinds = list(dict.fromkeys(left.split(" + ") + right.split(" + ")))
    return " + ".join(kinds)
