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
from typing import Hashable, Mapping

from streamwarden.catalog.lattice import Level
from streamwarden.catalog.model import Catalog
from streamwarden.errors import AuthorizationError, StreamwardenError
from streamwarden.language.binder import BoundQuery, bound_query
from streamwarden.language.insert_sp import InsertSp
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import LevelGuard, Node, Shield, sources, walk
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
    graphs = []
    for g in rewriting.graphs:
        root = level_pass(catalog, shield_pass(catalog, user, g.root, grant_only=bool(on_result),
                                               join_strategy=options.join_strategy, placement=options.placement),
                          level)
        graphs.append(replace(g, root=root, policies=g.policies + mechanisms(root)))
    return replace(rewriting, graphs=tuple(graphs), level=level, secured=True)


def mechanisms(root: Node) -> tuple[str, ...]:
    """What besides role policies authorizes ``root``'s rows, as a graph's policies name it (its
    rows name each instance: :func:`streamwarden.engine.execute.provenance`): each punctuated
    stream's providers' policies (``SP HeartRate``) and the level the inputs are guarded at
    (``level read at [1, ⊥]``).

        >>> from streamwarden.catalog.loader import load_catalog
        >>> mechanisms(secure(load_catalog("examples/health.yaml"), "carol",
        ...                   "SELECT Beats_per_min FROM HeartRate").graphs[0].root)
        ('SP HeartRate',)
    """
    shields = sorted({n.stream for n in walk(root) if isinstance(n, Shield)})
    levels = sorted({str(n.level) for n in walk(root) if isinstance(n, LevelGuard)})
    return (*(f"SP {stream}" for stream in shields), *(f"level read at {level}" for level in levels))


class SecureCache:
    """:func:`secure` over one catalog for many users and queries, run once per distinct input.

    A network of 100,000 registered queries secures each for each listed user; most share a
    query text with others and a *security class* with others (the same roles, the same
    values of the profile attributes the policies read: a ward's nurses). Of a user,
    :func:`secure` reads exactly this (:meth:`user_key`; the passes it calls in brackets):

    * that the user is declared (``check_user``);
    * the clearance (``query_level``: the level the query runs at; ``level_pass``);
    * the effective roles (``rewrite``: the user's policies, ``policies_for``, and its notes;
      ``shield_pass``: the roles a shield tests);
    * the profile values the policies' ``self.<attr>`` read (``instantiate``), each by its
      type and ``repr``, not by equality: ``1``, ``1.0``, ``True`` and ``"1"`` become different
      literals, and so do ``0.0`` and ``-0.0`` or two equal datetimes of different offsets,
      equal in Python but not as text; a missing value and a null one both refuse the
      policy, for different reasons, and are told apart too.

    Of the query it reads the bound query (text, plan, ``ON RESULT``) and every option. Users
    with equal keys get the same rewriting, computed for the first of them: equal graphs,
    level and ``ON RESULT``; only the texts that name a user (``user``, the notes, a
    decision's reason) name that first user. A refusal (not cleared, an unknown user) is
    never shared: each user gets it computed for her, in her own words.

        >>> from streamwarden.catalog.loader import load_catalog_text
        >>> from streamwarden.language.binder import bound_query
        >>> cat = load_catalog_text('''
        ... streams: {S: {schema: {ts: timestamp, w: string}}}
        ... roles: {R: {}}
        ... users: {ann: {roles: [R], profile: {w: a, nick: A}}, bob: {roles: [R], profile: {w: a, nick: B}},
        ...         cy: {roles: [R], profile: {w: b}}}
        ... policies: [{id: p, subject: R, streams: [S], attributes: '*', where: 'S.w = self.w', privilege: read}]
        ... ''')
        >>> cache, query = SecureCache(cat), bound_query("SELECT w FROM S", cat)
        >>> cache.secure("bob", query) is cache.secure("ann", query), cache.secure("cy", query).user
        (True, 'cy')
    """

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        # every profile attribute a policy reads (a superset of what one user's policies read)
        self.attributes = tuple(sorted({e.attr for p in catalog.policies if p.where is not None
                                        for e in E.walk(p.where) if isinstance(e, E.ProfileRef)}))
        self._users: dict[str, Hashable] = {}
        self._secured: dict[Hashable, Rewriting | None] = {}  # None: refused, so never shared

    def user_key(self, user: str) -> Hashable | None:
        """Everything :func:`secure` reads about ``user`` (see the class docstring); None for a
        user the catalog does not declare."""
        try:
            return self._users[user]
        except KeyError:
            pass
        declared = self.catalog.users.get(user)
        if declared is None:
            return None
        clearance = declared.clearance
        key = (self.catalog.effective_roles(user),
               None if clearance is None else (clearance.entries, clearance.bits),
               tuple(_profile_value(declared.profile, attr) for attr in self.attributes))
        self._users[user] = key
        return key

    def secure(self, user: str, query: BoundQuery, options: SecurityOptions | None = None) -> Rewriting:
        """:func:`secure` of ``query`` for ``user``: the rewriting of the first user of her key."""
        options = options or SecurityOptions()
        user_key = self.user_key(user)
        if user_key is None:
            return secure(self.catalog, user, query, options)  # refused: unknown user
        level = options.level
        key = (query, options.join_strategy, options.placement,
               (type(level).__name__, str(level), getattr(level, "bits", None)), options.granted_streams, user_key)
        found = self._secured.get(key, False)
        if isinstance(found, Rewriting):
            return found
        if found is None:  # refused for an earlier user: refused for this one, in her own words
            return secure(self.catalog, user, query, options)
        try:
            rewriting = secure(self.catalog, user, query, options)
        except StreamwardenError:
            self._secured[key] = None
            raise
        self._secured[key] = rewriting
        return rewriting


def _profile_value(profile: Mapping[str, object], attribute: str) -> tuple[str, ...]:
    """One profile value as a key: absent, or its type and ``repr`` (see :class:`SecureCache`)."""
    if attribute not in profile:
        return ("absent",)
    value = profile[attribute]
    return (f"{type(value).__module__}.{type(value).__qualname__}", repr(value))


__all__ = ["SecureCache", "SecurityOptions", "mechanisms", "secure"]
