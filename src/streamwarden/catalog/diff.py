"""What replacing one catalog by another changes, by name: for the person who replaces it.

A store holds one catalog; loading another replaces it whole (``check``, ``network run
--catalog``, the service's ``PUT /v1/catalog``). What goes with it — a stream a running
query reads, the users an admin granted, the action a drill is run by — should never go
unnoticed: :func:`diff_catalogs` lists what the new catalog adds, removes and redefines,
:meth:`CatalogDiff.describe` says it in one line, and :meth:`CatalogDiff.detail` gives it
to the audit trail.

    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> drill = load_catalog_text("streams: {Position: {schema: {ts: timestamp}}}\\n"
    ...                           "users: {paul: {}}\\nactions: {a: {}}", "drill.yaml")
    >>> other = load_catalog_text("streams: {S: {schema: {ts: timestamp}}}\\nusers: {paul: {}}", "c.yaml")
    >>> diff_catalogs(drill, other).describe()
    'replaced the catalog drill.yaml: removed stream Position, action a; added stream S'
    >>> diff_catalogs(drill, drill).describe()
    'the same catalog as stored (drill.yaml): nothing changed'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamwarden.catalog.model import Catalog

#: The kinds of name a catalog declares, in the order they are reported.
KINDS = ("streams", "roles", "users", "policies", "actions")
#: At most this many names of one kind and change are listed, then how many more.
MAX_NAMES = 10
_SINGULAR = {"streams": "stream", "roles": "role", "users": "user", "policies": "policy", "actions": "action"}


@dataclass(frozen=True)
class CatalogDiff:
    """The names of each kind (:data:`KINDS`) the new catalog adds, removes or redefines."""

    before: str
    after: str
    added: Mapping[str, tuple[str, ...]]
    removed: Mapping[str, tuple[str, ...]]
    changed: Mapping[str, tuple[str, ...]]

    @property
    def unchanged(self) -> bool:
        return not any(self.added.values()) and not any(self.removed.values()) and not any(self.changed.values())

    def describe(self) -> str:
        """One line: what was replaced and what it lost first (what a reader must not miss)."""
        if self.unchanged:
            return f"the same catalog as stored ({self.before}): nothing changed"
        parts = [f"{what} {', '.join(self._named(names))}" for what, names in (
            ("removed", self.removed), ("redefined", self.changed), ("added", self.added)) if any(names.values())]
        return f"replaced the catalog {self.before}: " + "; ".join(parts)

    def detail(self, limit: int = MAX_NAMES) -> dict[str, Any]:
        """For the audit trail: ``{"catalog": after, "streams_removed": [...], ...}``, at most
        ``limit`` names of a kind and change."""
        detail: dict[str, Any] = {"catalog": self.after}
        for kind in KINDS:
            for what, names in (("added", self.added), ("removed", self.removed), ("changed", self.changed)):
                if names.get(kind):
                    detail[f"{kind}_{what}"] = capped_names(names[kind], limit)
        return detail

    @staticmethod
    def _named(names: Mapping[str, tuple[str, ...]]) -> list[str]:
        return [f"{_SINGULAR[kind] if len(names[kind]) == 1 else kind} {', '.join(capped_names(names[kind]))}"
                for kind in KINDS if names.get(kind)]


def diff_catalogs(before: Catalog, after: Catalog) -> CatalogDiff:
    """What replacing ``before`` by ``after`` changes (a user's profile counts: it is not in the
    user's equality; live action values do not: they stay)."""
    sections: dict[str, tuple[Mapping[str, object], Mapping[str, object]]] = {
        "streams": (dict(before.streams), dict(after.streams)),
        "roles": (dict(before.roles), dict(after.roles)),
        "users": ({n: (u, dict(u.profile)) for n, u in before.users.items()},
                  {n: (u, dict(u.profile)) for n, u in after.users.items()}),
        "policies": ({p.id: p for p in before.policies}, {p.id: p for p in after.policies}),
        "actions": (dict.fromkeys(before.actions), dict.fromkeys(after.actions)),
    }
    added, removed, changed = {}, {}, {}
    for kind, (old, new) in sections.items():
        added[kind] = tuple(sorted(new.keys() - old.keys()))
        removed[kind] = tuple(sorted(old.keys() - new.keys()))
        changed[kind] = tuple(sorted(n for n in old.keys() & new.keys() if old[n] != new[n]))
    return CatalogDiff(before.name, after.name, added, removed, changed)


def capped_names(names: Iterable[str], limit: int = MAX_NAMES) -> list[str]:
    """At most ``limit`` names, sorted, then how many more."""
    listed = sorted(names)
    return listed[:limit] + ([f"+{len(listed) - limit} more"] if len(listed) > limit else [])


__all__ = ["CatalogDiff", "KINDS", "MAX_NAMES", "capped_names", "diff_catalogs"]
