"""The information-flow pass: run a query at a security level (Ray et al., sections 3-4).

A query runs at a level *l*: the user's clearance, or a lower level they choose (the
simple security property: it may read only what *l* dominates). The pass puts a
:class:`LevelGuard` (the trusted stream shepherd plus the secure S2R filter) right on
every input, below every window, so windows, joins and aggregates only ever see tuples
whose level *l* dominates; the engine gives each output row the LUB of its tuples'
levels. Writing results into a stream is allowed only into a stream of level *l*
exactly (the restricted ★-property).

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> cat = load_catalog_text('''
    ... lattice: {classes: {COI1: ["1", "2"], COI2: [A, B]}}
    ... streams: {Log: {schema: {ts: timestamp, sender: string}, level: {from: sender}}}
    ... users: {ann: {clearance: "[1, T]"}}
    ... ''')
    >>> str(query_level(cat, "ann", None)), str(query_level(cat, "ann", "[1, ⊥]"))
    ('[1, T]', '[1, ⊥]')
    >>> query_level(cat, "ann", "[2, ⊥]")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    streamwarden.errors.AuthorizationError: ann is cleared for [1, T], which does not dominate [2, ⊥]: a query cannot
        run above its user's clearance
"""

from __future__ import annotations

from streamwarden.catalog.lattice import Level, LevelSource, query_level
from streamwarden.catalog.model import Catalog
from streamwarden.errors import AuthorizationError
from streamwarden.plan.nodes import LevelGuard, Node, Source, transform


def level_pass(catalog: Catalog, root: Node, level: Level | None) -> Node:
    """Guard every input of ``root`` at ``level`` (unchanged when levels are not in force)."""
    if level is None:
        return root

    def guard(node: Node) -> Node | None:
        if not isinstance(node, Source):
            return None
        source = catalog.streams[node.stream].level_source
        return LevelGuard(node, node.stream, node.relation, level, source, id=f"{node.id}.level")

    return transform(root, guard)


def check_write(catalog: Catalog, level: Level | None, stream: str) -> None:
    """Restricted ★-property: a query at ``level`` writes only into a stream of that level."""
    target = catalog.streams.get(stream)
    if target is None:
        raise AuthorizationError(f"cannot write into unknown stream {stream!r} "
                                 f"(catalog streams: {', '.join(catalog.streams)})")
    if level is None:
        return
    source = target.level_source
    fixed = source.fixed if isinstance(source, LevelSource) else None
    if fixed is None:
        origin = "their " + str(source.attribute) if isinstance(source, LevelSource) else "nowhere: top"
        raise AuthorizationError(f"a query at level {level} may write only into a stream of level {level}; "
                                 f"{stream} has no single level (its tuples' levels come from {origin})")
    if fixed != level:
        raise AuthorizationError(f"a query at level {level} may write only into a stream of level {level}; "
                                 f"{stream} is at level {fixed}")


__all__ = ["check_write", "level_pass", "query_level"]
