"""Encode SP records for one user, once per distinct policy text.

An SP record's patterns are texts; everything about them that does not depend on the
tuple is settled here, in Python, when the shield meets the record: the stream pattern
against the stream's name, the role pattern against the user's effective roles and the
attribute pattern against each schema attribute become one bitmask (bit *j*: the SP
speaks for schema attribute *j* and one of the user's roles). The tuple pattern is
kept, parsed, for the per-tuple part, which the JVM shield evaluates against each
tuple's key (``SpCode.java``). The result is the SP's *code*, a JSON object: ``p``
(positive), ``i`` (immutable), ``g`` (grant option), ``m`` (the attribute mask) and the
tuple pattern's kind ``k`` with its bounds and values as text (``ls``, ``hs``, ``vs``)
and, where they read as finite numbers, as numbers (``ld``, ``hd``, ``vd``).

Why Python: data providers repeat a handful of policy templates, so the codes are
memoized by the record's text. An SP listing 500 roles is parsed and matched once,
then costs one dictionary lookup each time it comes again; in Spark SQL every record
paid for splitting and probing its whole role list (0.8 µs per role name).

    >>> encode = SpEncoder("HeartRate", ("ts", "Patient_id", "Beats_per_min"), {"GP"})
    >>> encode(SpText("HeartRate", "[120, 133]", "Beats_per_min", "{GP, C}"))
    '{"p":true,"i":false,"g":false,"m":4,"k":"closed","ls":"120","hs":"133","ld":120.0,"hd":133.0,"vs":["120","133"],"vd":[120.0,133.0]}'
    >>> encode(SpText("HeartRate", "[120, 133", "*", "{GP}"))
    Traceback (most recent call last):
    ...
    streamwarden.security.punctuation.encode.MalformedSp: malformed tuples pattern [120, 133
"""

from __future__ import annotations

import json
import math
import re
from typing import Callable, Iterable, NamedTuple, Sequence, TypeVar

from streamwarden.errors import StreamwardenError, UnsupportedError
from streamwarden.language.patterns import (Constant, Empty, Pattern, Range, SetOf, Value, Wildcard, number_of,
                                            parse_pattern)

MAX_ATTRIBUTES = 62
#: Distinct SP texts remembered per shield worker before the memo starts over.
MEMO_LIMIT = 65_536
T = TypeVar("T")


class MalformedSp(ValueError):
    """An SP record whose pattern does not parse (the message names the pattern)."""


class SpText(NamedTuple):
    """The parts of an SP record its code depends on, as they arrived."""

    streams: str | None
    tuples: str | None
    attributes: str | None
    roles: str | None
    sign: str | None = "+"
    immutable: bool | None = False
    grant: bool | None = False


class SpEncoder:
    """Turns SP records into codes for one stream and one user's effective roles.

    Each pattern text is parsed and decided once (per kind of pattern): a role list
    shared by many SPs costs one parse, whatever their tuple patterns are.
    """

    def __init__(self, stream: str, attributes: Sequence[str], roles: Iterable[str]):
        if len(attributes) > MAX_ATTRIBUTES:
            raise UnsupportedError(f"punctuated stream {stream} has {len(attributes)} attributes; "
                                   f"SP masks hold at most {MAX_ATTRIBUTES}")
        self.stream = stream
        self.attributes = tuple(attributes)
        self.roles = frozenset(roles)
        self._numeric_roles = {n for n in map(_number, self.roles) if n is not None}
        self._memo: dict[SpText, str] = {}
        self._streams: dict[str | None, bool] = {}
        self._role_lists: dict[str | None, bool] = {}
        self._attribute_masks: dict[str | None, int] = {}
        self._tuple_parts: dict[str | None, str] = {}

    def __call__(self, record: SpText) -> str:
        code = self._memo.get(record)
        if code is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
                for cache in (self._streams, self._role_lists, self._attribute_masks, self._tuple_parts):
                    cache.clear()
            code = self._memo[record] = self._encode(record)
        return code

    def _encode(self, record: SpText) -> str:
        # Parse every pattern before deciding anything, so a malformed one is always reported.
        tuples = self._decided(self._tuple_parts, "tuples", record.tuples, "*", _tuple_part)
        streams = self._decided(self._streams, "streams", record.streams, "*", lambda p: p.matches(self.stream))
        attributes = self._decided(self._attribute_masks, "attributes", record.attributes, "*", self._mask)
        roles = self._role_lists.get(record.roles)
        if roles is None:
            names = _plain_set(record.roles)  # most role lists: {R1, R2, ...}, decided without the tokenizer
            roles = (self._names_a_role(SetOf(names)) if names is not None else
                     self._decided(self._role_lists, "roles", record.roles, None, self._names_a_role))
            self._role_lists[record.roles] = roles
        mask = attributes if streams and roles else 0
        positive = str(record.sign or "+").lower() in ("+", "positive")
        return (f'{{"p":{_json(positive)},"i":{_json(bool(record.immutable))},"g":{_json(bool(record.grant))},'
                f'"m":{mask},{tuples}}}')

    @staticmethod
    def _decided(cache: dict[str | None, T], name: str, text: str | None, default: str | None,
                 decide: Callable[[Pattern], T]) -> T:
        if text in cache:
            return cache[text]
        value = cache[text] = decide(_parse(name, text, default))
        return value

    def _mask(self, pattern: Pattern) -> int:
        return sum(1 << j for j, name in enumerate(self.attributes) if pattern.matches(name))

    def _names_a_role(self, pattern: Pattern) -> bool:
        """Does the role pattern name one of the user's roles? Sets probe the role set."""
        if isinstance(pattern, (Constant, SetOf)):
            values = (pattern.value,) if isinstance(pattern, Constant) else pattern.values
            if any(str(v) in self.roles for v in values):
                return True
            # "1" and "1.0" are the same role only as numbers.
            return bool(self._numeric_roles) and any(_number(v) in self._numeric_roles for v in values)
        return any(pattern.matches(role) for role in self.roles)


# ASCII whitespace only, as the pattern tokenizer reads it (streamwarden.language.lexer).
_PLAIN_SET = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*\}", re.ASCII)
_ASCII_SPACE = " \t\n\r\f\v"


def _plain_set(text: str | None) -> tuple[str, ...] | None:
    """The names of a set pattern of plain identifiers (what the pattern parser would give), else None."""
    if text is None:
        return None
    match = _PLAIN_SET.fullmatch(text.strip(_ASCII_SPACE))
    if match is None:
        return None
    return tuple(part.strip() for part in match.group(1).split(","))


def _json(flag: bool) -> str:
    return "true" if flag else "false"


def _parse(name: str, text: str | None, default: str | None) -> Pattern:
    if text is None and default is None:
        raise MalformedSp(f"malformed {name} pattern (missing)")
    try:
        return parse_pattern(str(text if text is not None else default), name)
    except StreamwardenError:
        raise MalformedSp(f"malformed {name} pattern {text}") from None


def _tuple_part(pattern: Pattern) -> str:
    """The tuple pattern as ``SpCode.java`` reads it (JSON members)."""
    values: tuple[Value, ...]
    if isinstance(pattern, Wildcard):
        kind, values = "any", ()
    elif isinstance(pattern, Empty):
        kind, values = "none", ()
    elif isinstance(pattern, Constant):
        kind, values = "const", (pattern.value,)
    elif isinstance(pattern, SetOf):
        kind, values = "set", pattern.values
    elif isinstance(pattern, Range):
        kind, values = ("closed" if pattern.inclusive else "open"), (pattern.low, pattern.high)
    else:
        raise TypeError(f"unknown pattern {pattern!r}")
    texts = [str(v) for v in values]
    numbers = [_number(v) for v in values]
    part = {"k": kind, "ls": texts[0] if texts else None, "hs": texts[1] if len(texts) > 1 else None,
            "ld": numbers[0] if numbers else None, "hd": numbers[1] if len(numbers) > 1 else None,
            "vs": texts, "vd": numbers}
    return json.dumps(part, separators=(",", ":"))[1:-1]


def _number(value: object) -> float | None:
    """The value as a finite number, when it reads as one (as :mod:`.patterns` compares)."""
    number = number_of(value)
    return number if number is not None and math.isfinite(number) else None


__all__ = ["MAX_ATTRIBUTES", "MalformedSp", "SpEncoder", "SpText"]
