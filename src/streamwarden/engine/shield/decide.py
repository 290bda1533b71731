"""Access decisions under streamed SPs, as Spark SQL expressions (no Python per tuple).

The part of each SP that does not depend on the tuple is settled once per SP record,
when the shield meets it (:mod:`streamwarden.security.punctuation.encode`): its *code* has an
attribute bitmask for the user and the parsed tuple pattern. Here, per tuple:

* :func:`access_mask` evaluates, per tuple, the SPs of its governing policy (the
  shield attaches them as a JSON array): OR of the masks of the positive SPs whose
  tuple pattern matches the key, minus those of the negative ones; then combines with
  the stream's server policies (intersect or union; an immutable provider policy
  ignores them).

Matching follows :mod:`streamwarden.language.patterns`: numbers compare as numbers
when both sides read as numbers, otherwise as text.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamwarden.catalog.punctuations import SecurityPunctuation
from streamwarden.engine.shield.columns import pattern_column

#: Schema of one encoded SP (the shield's ``_gov`` is a JSON array of these).
SP_CODE = ("struct<p:boolean,i:boolean,g:boolean,m:bigint,k:string,ls:string,hs:string,"
           "ld:double,hd:double,vs:array<string>,vd:array<double>>")
GOVERNING = f"array<{SP_CODE}>"

_NUMBER = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"


def matches(p: Column, text: Column, number: Column) -> Column:
    """Does pattern struct ``p`` match a value (its text and, if it reads as one, number)?"""
    inclusive = p["k"] == "closed"
    # Each bound compares as numbers when it and the value both read as numbers, else as text.
    above = F.when(p["ld"].isNotNull() & number.isNotNull(),
                   F.when(inclusive, p["ld"] <= number).otherwise(p["ld"] < number)).otherwise(
                   F.when(inclusive, p["ls"] <= text).otherwise(p["ls"] < text))
    below = F.when(p["hd"].isNotNull() & number.isNotNull(),
                   F.when(inclusive, number <= p["hd"]).otherwise(number < p["hd"])).otherwise(
                   F.when(inclusive, text <= p["hs"]).otherwise(text < p["hs"]))
    in_range = above & below
    in_set = (F.coalesce(F.array_contains(p["vs"], text), F.lit(False))
              | (number.isNotNull() & F.coalesce(F.array_contains(p["vd"], number), F.lit(False))))
    return (F.when(p["k"] == "any", True)
            .when(p["k"].isin("const", "set"), in_set)
            .when(p["k"].isin("closed", "open"), F.coalesce(in_range, F.lit(False)))
            .otherwise(False))


def sp_problem(sp: str = "_sp") -> Column:
    """Why an SP record's sign or sn is unusable (NULL when they are fine).

    Its patterns are checked when the shield encodes it (:mod:`.encode`)."""
    record = F.col(sp)
    sign = F.lower(F.coalesce(record["sign"], F.lit("+")))
    problem = F.when(~sign.isin("+", "-", "positive", "negative"), F.lit("sign must be '+' or '-'"))
    return F.when(record["sn"].isNull() | (record["sn"] < 1), F.lit("sn must be a positive integer")).otherwise(problem)


def access_mask(governing: Column, key: Column, key_dtype: str, *, grant_only: bool = False) -> tuple[Column, Column]:
    """(provider mask, immutable) for each tuple from its governing SPs (parsed with
    ``from_json(_gov, GOVERNING)``; NULL when the shield denied the tuple)."""
    sps = governing
    text = key.cast("string")
    # try_cast: Java's regex \s takes characters (U+0085, ...) that a cast rejects, and a
    # provider's key must never stop the job (or quote itself in an error) for anyone.
    number = key.cast("double") if key_dtype in ("int", "long", "double") else F.when(
        text.rlike(_NUMBER), text.try_cast("double"))

    def union_of(positive: bool) -> Column:
        def step(acc: Column, s: Column) -> Column:
            wanted = s["p"] if positive else ~s["p"]
            if positive and grant_only:
                wanted = wanted & s["g"]
            return acc.bitwiseOR(F.when(wanted & matches(s, text, number), s["m"]).otherwise(F.lit(0).cast("bigint")))
        return F.aggregate(sps, F.lit(0).cast("bigint"), step)

    granted, denied = union_of(True), union_of(False)
    provider = F.coalesce(granted.bitwiseAND(F.bitwise_not(denied)), F.lit(0).cast("bigint"))
    immutable = F.coalesce(F.exists(sps, lambda s: s["i"]), F.lit(False))
    return provider, immutable


def server_mask(server: Sequence[SecurityPunctuation], stream: str, attributes: Sequence[str], roles: Iterable[str],
                key: str, key_dtype: str) -> Column:
    """The stream's server policies as a per-tuple attribute mask (static patterns)."""
    roles = tuple(roles)

    def union_of(positive: bool) -> Column:
        mask = F.lit(0).cast("bigint")
        for s in server:
            if s.positive != positive or not (s.streams.matches(stream) and s.matches_roles(roles)):
                continue
            bits = sum(1 << j for j, a in enumerate(attributes) if s.attributes.matches(a))
            if bits:
                mask = mask.bitwiseOR(F.when(pattern_column(s.tuples, key, key_dtype), F.lit(bits).cast("bigint"))
                                      .otherwise(F.lit(0).cast("bigint")))
        return mask

    return union_of(True).bitwiseAND(F.bitwise_not(union_of(False)))


def combined_mask(provider: Column, immutable: Column, server: Column | None, mode: str,
                  governed: Column) -> Column:
    """Section 4.2: provider and server masks by intersect or union; immutable ignores the server.

    Server policies only ever combine with a complete provider policy: a tuple the shield
    denied (``governed`` false) gets nothing, whatever the server would grant.
    """
    if server is None:
        return provider
    merged = provider.bitwiseAND(server) if mode == "intersect" else provider.bitwiseOR(server)
    return F.when(~governed, F.lit(0).cast("bigint")).when(immutable, provider).otherwise(merged)


def has_bit(mask: Column, j: int) -> Column:
    return mask.bitwiseAND(F.lit(1 << j).cast("bigint")) != 0


__all__ = ["GOVERNING", "SP_CODE", "access_mask", "combined_mask", "has_bit", "matches", "server_mask", "sp_problem"]
