"""Cached hashes for immutable plan and expression nodes, and their stable text.

Frozen dataclasses hash by hashing every field, recursively: for a tree that is
O(subtree) per call, and caches keyed by nodes (memoized analyses, the implication
cache) would pay it on every lookup, O(n²) over a plan. Nodes never change, so the
hash is computed once and kept (the ibis approach).

    >>> from dataclasses import dataclass
    >>> @cached_hash
    ... @dataclass(frozen=True)
    ... class Pair:
    ...     left: object
    ...     right: object
    >>> hash(Pair(1, 2)) == hash(Pair(1, 2))
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

C = TypeVar("C")


def cached_hash(cls: type[C]) -> type[C]:
    """Wrap a frozen dataclass's generated ``__hash__`` so it runs once per instance."""
    generated = cls.__hash__

    def __hash__(self: Any) -> int:
        try:
            return self.__dict__["_cached_hash"]
        except KeyError:
            value = generated(self)
            object.__setattr__(self, "_cached_hash", value)
            return value

    cls.__hash__ = __hash__  # type: ignore[method-assign]  # replacing the generated hash is this decorator's job
    return cls


def stable_text(value: Any) -> str:
    """A text of ``value`` (plan nodes, expressions, and what they hold) that is the same in
    every process: ``repr`` of a frozenset follows string hashing, which Python randomizes
    per process, so a hash of a plan's ``repr`` (a pipeline's fingerprint, which names its
    checkpoint) would change at every restart. Sets are written sorted, dataclasses field by
    field (not the cached hash).

        >>> stable_text(frozenset({"b", "a"})) == stable_text(frozenset({"a", "b"})) == "{'a', 'b'}"
        True
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={stable_text(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({fields})"
    if isinstance(value, (frozenset, set)):
        return "{" + ", ".join(sorted(stable_text(v) for v in value)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(stable_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{stable_text(k)}: {stable_text(v)}" for k, v in value.items())) + "}"
    return repr(value)
