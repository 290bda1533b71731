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
import functools
import weakref
from typing import Any, Callable, TypeVar

C = TypeVar("C")
A = TypeVar("A")
R = TypeVar("R")


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


def by_identity(function: Callable[[A], R]) -> Callable[[A], R]:
    """Memoize a one-argument function by the identity of its argument, for as long as the
    argument lives (a weak reference: no argument is kept alive, and an entry goes with its
    argument, before its id can name another object). Not by equality: equal plans may still
    differ where ``==`` does not look (``Literal(0.0)`` and ``Literal(-0.0)`` are equal).

        >>> calls = []
        >>> @by_identity
        ... def size(node):
        ...     calls.append(node)
        ...     return len(node.items)
        >>> @dataclasses.dataclass(frozen=True)
        ... class Bag:
        ...     items: tuple
        >>> bag = Bag((1, 2))
        >>> size(bag), size(bag), size(Bag((1, 2))), len(calls)
        (2, 2, 2, 2)
    """
    memo: dict[int, tuple[_Ref, R]] = {}

    def forget(ref: weakref.ref[Any]) -> None:  # an argument is going: so is its entry
        assert isinstance(ref, _Ref)
        memo.pop(ref.key, None)

    @functools.wraps(function)
    def memoized(argument: A) -> R:
        key = id(argument)
        entry = memo.get(key)
        if entry is not None and entry[0]() is argument:
            return entry[1]
        result = function(argument)
        ref = _Ref(argument, forget)
        ref.key = key
        memo[key] = (ref, result)
        return result

    return memoized


class _Ref(weakref.ref[Any]):
    """A weak reference that knows its entry's key (one callback serves every entry)."""

    __slots__ = ("key",)
    key: int


def stable_text(value: Any) -> str:
    """A text of ``value`` (plan nodes, expressions, and what they hold) that is the same in
    every process: ``repr`` of a frozenset follows string hashing, which Python randomizes
    per process, so a hash of a plan's ``repr`` (a pipeline's fingerprint, which names its
    checkpoint) would change at every restart. Sets are written sorted, dataclasses field by
    field (not the cached hash).

        >>> stable_text(frozenset({"b", "a"})) == stable_text(frozenset({"a", "b"})) == "{'a', 'b'}"
        True

    It names checkpoints, so its text must never change: ``tests/test_plan_hashing.py`` holds
    it to the first version's, which read, for a dataclass instance,
    ``f"{type(v).__name__}({', '.join(f'{f.name}={stable_text(getattr(v, f.name))}' for f in fields(v))})"``,
    for a set its elements' texts sorted in braces, for a tuple or list its elements' in
    parentheses (a trailing comma for one), for a dict its ``key: value`` texts sorted in braces,
    and ``repr`` for anything else. This one writes the same, faster: a network of 100,000
    queries writes every plan's (the field names of each class are looked up once).
    """
    kind = type(value)
    try:
        how = _HOW[kind]
    except KeyError:
        how = _HOW[kind] = _how(value)
    if how is None:
        return repr(value)
    if how is _SET:
        return "{" + ", ".join(sorted([stable_text(v) for v in value])) + "}"
    if how is _SEQUENCE:
        if len(value) == 1:
            return "(" + stable_text(value[0]) + ",)"
        return "(" + ", ".join([stable_text(v) for v in value]) + ")"
    if how is _DICT:
        return "{" + ", ".join(sorted([f"{stable_text(k)}: {stable_text(v)}" for k, v in value.items()])) + "}"
    assert isinstance(how, _Fields)
    return how.name + "(" + ", ".join([f"{name}={stable_text(getattr(value, name))}" for name in how.names]) + ")"


class _Fields:
    """How :func:`stable_text` writes instances of one dataclass: its name and field names."""

    __slots__ = ("name", "names")

    def __init__(self, cls: type):
        self.name = cls.__name__
        self.names = tuple(f.name for f in dataclasses.fields(cls))


_SET, _SEQUENCE, _DICT = object(), object(), object()
#: By type: how stable_text writes its values (None: repr). A type is one of these for good.
_HOW: dict[type, object] = {}


def _how(value: Any) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _Fields(type(value))
    if isinstance(value, (frozenset, set)):
        return _SET
    if isinstance(value, (tuple, list)):
        return _SEQUENCE
    if isinstance(value, dict):
        return _DICT
    return None
