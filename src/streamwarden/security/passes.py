"""The security passes, in order, over a bound query: what every entry point runs.

1. Role-based rewriting (Algorithm 1 of Carminati et al.): the authorized graphs.
2. Security punctuations (Nehme et al.): a Security Shield on every punctuated stream
   of every graph, placed by cost, and the SCJoin strategy of joins between them.
3. Information flow (Ray et al.): with a lattice in the catalog, the query runs at a
   security level and every input is guarded at it, below every window.

Each pass is a pure function of the graph; the result says which policies and which
placements fired (``explain`` prints them).

    >>> from streamwarden.catalog.loader import load_catalog
    >>> r = secure(load_catalog("examples/drill.yaml"), "paul", "SELECT SID, Pos FROM Position")
    >>> [g.id for g in r.deployed]
    ['ag1']
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamwarden.catalog.lattice import Level
from streamwarden.catalog.model import Catalog
from streamwarden.errors import AuthorizationError
from streamwarden.language.binder import BoundQuery, bound_query
from streamwarden.language.insert_sp import InsertSp
from streamwarden.plan.nodes import Node, sources
from streamwarden.security.levels.guard import level_pass, query_level
from streamwarden.security.punctuation.placement import shield_pass
from streamwarden.security.rewrite.algorithm import Rewriting, check_user, rewrite


@dataclass(frozen=True)
class SecurityOptions:
    """Knobs of the passes: the SCJoin strategy, the shields' placement, the level."""

    join_strategy: str = "adaptive"
    placement: str = "auto"  # of shields over selections: auto (cost rule), down or up
    level: str | Level | None = None  # the security level to run at (default: the user's clearance)
    # a shared network's query: the streams its grants alone open (RegisteredQuery.granted_streams; see rewrite())
    granted_streams: frozenset[str] = frozenset()


def secure(catalog: Catalog, user: str, query: str | BoundQuery | Node,
           options: SecurityOptions | None = None) -> Rewriting:
    """Run every security pass: the authorized graphs ``user`` may run for ``query`` (its
    text, or bound once with :func:`~streamwarden.language.binder.bound_query` for many users).

    A query with ``ON RESULT (INSERT SP ...)`` re-publishes its results under a new
    policy (delegation, Nehme et al. section 4.4): it may only use what the providers
    granted the user WITH GRANT OPTION, so every stream it reads must be punctuated and
    its shields keep only attributes granted that way.
    """
    options = options or SecurityOptions()
    on_result: tuple[InsertSp, ...] = ()
    check_user(catalog, user)
    level = query_level(catalog, user, options.level)
    if isinstance(query, str):
        query = bound_query(query, catalog)
    if isinstance(query, BoundQuery):
        on_result = query.on_result
        rewriting = replace(rewrite(catalog, user, query.plan, granted_streams=options.granted_streams),
                            query=query.text, on_result=on_result)
    else:
        rewriting = rewrite(catalog, user, query, granted_streams=options.granted_streams)
    if on_result:
        plain = sorted({s.stream for s in sources(rewriting.plan) if not catalog.streams[s.stream].punctuated})
        if plain:
            raise AuthorizationError(
                f"ON RESULT re-publishes results, which needs the providers' WITH GRANT OPTION; stream "
                f"{plain[0]} carries no security punctuations, so nothing in it can be delegated")
    graphs = tuple(
        replace(g, root=level_pass(catalog, shield_pass(catalog, user, g.root, grant_only=bool(on_result),
                                                        join_strategy=options.join_strategy,
                                                        placement=options.placement), level))
        for g in rewriting.graphs
    )
    return replace(rewriting, graphs=graphs, level=level, secured=True)


__all__ = ["SecurityOptions", "secure"]
