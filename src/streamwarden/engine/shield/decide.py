"""Access decisions under streamed SPs, as Spark SQL expressions (no Python per tuple).

The part of each SP that does not depend on the tuple is settled once per SP record,
when the shield meets it (:mod:`streamwarden.security.punctuation.encode`): its *code* has an
attribute bitmask for the user and the parsed tuple pattern. The JVM shield matches the
governing SPs' tuple patterns against each tuple's key (:func:`key_text`,
:func:`key_number`) and gives the provider's mask (``SecurityShield.java``). Here:

* :func:`server_mask`: the stream's server policies as a per-tuple mask (their patterns
  are static, so they compile to plain predicates);
* :func:`combined_mask`: provider and server masks by intersect or union (an immutable
  provider policy ignores the server's).

Matching follows :mod:`streamwarden.language.patterns`: numbers compare as numbers
when both sides read as numbers, otherwise as text.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamwarden.catalog.punctuations import MAX_SN, SecurityPunctuation
from streamwarden.engine.shield.columns import key_number, key_text, pattern_column


def sp_problem(sp: str = "_sp") -> Column:
    """Why an SP record's sign or sn is unusable (NULL when they are fine).

    Its patterns are checked when the shield encodes it (:mod:`.encode`)."""
    record = F.col(sp)
    sign = F.lower(F.coalesce(record["sign"], F.lit("+")))
    problem = F.when(~sign.isin("+", "-", "positive", "negative"), F.lit("sign must be '+' or '-'"))
    return (F.when(record["sn"].isNull() | (record["sn"] < 1), F.lit("sn must be a positive integer"))
            .when(record["sn"] > MAX_SN, F.lit(f"sn must be at most {MAX_SN}")).otherwise(problem))


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


__all__ = ["combined_mask", "has_bit", "key_number", "key_text", "server_mask", "sp_problem"]
