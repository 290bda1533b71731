"""Cached hashes for immutable plan and expression nodes.

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

from typing import TypeVar

T = TypeVar("T", bound=type)


def cached_hash(cls: T) -> T:
    """Wrap a frozen dataclass's generated ``__hash__`` so it runs once per instance."""
    generated = cls.__hash__

    def __hash__(self: object) -> int:
        try:
            return self.__dict__["_cached_hash"]
        except KeyError:
            value = generated(self)  # type: ignore[misc]
            object.__setattr__(self, "_cached_hash", value)
            return value

    cls.__hash__ = __hash__  # type: ignore[assignment]
    return cls
