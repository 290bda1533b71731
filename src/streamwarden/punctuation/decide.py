"""Access decisions under streamed SPs, as Spark SQL expressions (no Python per tuple).

Two halves, both in the JVM:

* :func:`encode_sp` turns each SP record into a compact JSON text, once per SP. Every
  part of the decision that does not depend on the tuple is settled there: the stream
  pattern against the stream's name, the role pattern against the user's effective
  roles and the attribute pattern against each schema attribute become one bitmask
  (bit *j*: the SP speaks for schema attribute *j* and one of the user's roles). The
  tuple pattern is kept, parsed, for the per-tuple part.
* :func:`access_mask` evaluates, per tuple, the SPs of its governing policy (the
  shield attaches them as a JSON array): OR of the masks of the positive SPs whose
  tuple pattern matches the key, minus those of the negative ones; then combines with
  the stream's server policies (intersect or union; an immutable provider policy
  ignores them).

A pattern whose text does not parse makes the record broken (``pattern_problem``), so
a malformed policy stops the job with the record named instead of granting anything.
Matching follows :mod:`streamwarden.punctuation.patterns`: numbers compare as numbers
when both sides read as numbers, otherwise as text.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamwarden.errors import UnsupportedError
from streamwarden.punctuation.columns import pattern_column
from streamwarden.punctuation.model import SecurityPunctuation

#: Schema of one encoded SP (the shield's ``_gov`` is a JSON array of these).
SP_CODE = ("struct<p:boolean,i:boolean,g:boolean,m:bigint,k:string,ls:string,hs:string,"
           "ld:double,hd:double,vs:array<string>,vd:array<double>>")
GOVERNING = f"array<{SP_CODE}>"
MAX_ATTRIBUTES = 62

_VALUE = r"""(-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|[A-Za-z_][A-Za-z0-9_.]*|"[^"]*"|'[^']*')"""


def _unquote(item: Column) -> Column:
    return F.regexp_replace(F.trim(item), r"""^"(.*)"$|^'(.*)'$""", "$1$2")


PATTERNS = ("streams", "tuples", "attributes", "roles")


def pattern_column_name(name: str) -> str:
    return f"__pat_{name}"


PATTERN_COLUMNS = tuple(pattern_column_name(n) for n in PATTERNS)


_NUMBER = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
_SEP = r"\s*,\s*"
#: The whole pattern grammar (Fig. 5), so a malformed pattern is caught by one regex.
_GRAMMAR = (rf"^(\*|(?i:ALL)|\{{\s*\}}|\{{\s*{_VALUE}({_SEP}{_VALUE})*\s*\}}|"
            rf"\[\s*{_VALUE}{_SEP}{_VALUE}\s*\]|\(\s*{_VALUE}{_SEP}{_VALUE}\s*\)|{_VALUE})$")
_ITEM = r"""("[^"]*"|'[^']*'|[^\s,\[\]\(\)\{\}]+)"""


def with_parsed_patterns(frame: DataFrame, sp: str = "_sp") -> DataFrame:
    """Add ``__pat_<name>``: each pattern of the SP struct ``sp`` parsed (see :data:`SP_CODE`),
    on the rows where ``_is_sp`` holds.

    Two stages, so each pattern's text is trimmed once and its values extracted once:
    one regex checks the whole grammar, one extracts the values.
    """
    def text(name: str) -> Column:
        value = F.col(f"{sp}.{name}")
        trimmed = F.trim(value if name == "roles" else F.coalesce(value, F.lit("*")))
        return F.when(F.col("_is_sp"), trimmed)  # tuples have no patterns: skip the regexes

    frame = frame.select("*", *[text(n).alias(f"__t_{n}") for n in PATTERNS])
    parsed = []
    for n in PATTERNS:
        t = F.col(f"__t_{n}")
        first = F.substring(t, 1, 1)
        valid = F.coalesce(t.rlike(_GRAMMAR), F.lit(False))
        kind = (F.when(~valid, "invalid")
                .when((t == "*") | (F.upper(t) == "ALL"), "any")
                .when(t.rlike(r"^\{\s*\}$"), "none")
                .when(first == "{", "set").when(first == "[", "closed").when(first == "(", "open")
                .otherwise("const"))
        values = F.transform(F.regexp_extract_all(t, F.lit(_ITEM), 1), _unquote)
        parsed.append(F.struct(kind.alias("k"), values.alias("vs"), valid.alias("valid")).alias(f"__s_{n}"))
    frame = frame.select("*", *parsed).drop(*[f"__t_{n}" for n in PATTERNS])
    finished = []
    for n in PATTERNS:
        p = F.col(f"__s_{n}")
        # Only tuple patterns compare with numbers (keys); stream, attribute and role names are
        # text. The regex guard keeps Spark from failing (slowly: it throws) on every name.
        numbers = (F.transform(p["vs"], lambda v: F.when(v.rlike(_NUMBER), v.cast("double"))) if n == "tuples"
                   else F.array().cast("array<double>"))
        finished.append(F.struct(p["k"].alias("k"), F.get(p["vs"], 0).alias("ls"), F.get(p["vs"], 1).alias("hs"),
                                 F.get(numbers, 0).alias("ld"), F.get(numbers, 1).alias("hd"), p["vs"].alias("vs"),
                                 numbers.alias("vd"), p["valid"].alias("valid")).alias(pattern_column_name(n)))
    return frame.select("*", *finished).drop(*[f"__s_{n}" for n in PATTERNS])


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


def _literal(value: str) -> tuple[Column, Column]:
    return F.lit(value), F.lit(_number(value)).cast("double")


def sp_code(stream: str, attributes: Sequence[str], roles: Iterable[str], sp: str = "_sp") -> Column:
    """The JSON code of each SP record for a user (needs :func:`with_parsed_patterns` first)."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise UnsupportedError(f"punctuated stream {stream} has {len(attributes)} attributes; "
                               f"SP masks hold at most {MAX_ATTRIBUTES}")
    streams, attrs, role_p, key = (F.col(pattern_column_name(n)) for n in ("streams", "attributes", "roles", "tuples"))
    role_ok = _role_matches(role_p, sorted(set(roles)))
    applies = matches(streams, *_literal(stream)) & role_ok
    bits = [F.when(matches(attrs, *_literal(name)), F.lit(1 << j)).otherwise(F.lit(0)).cast("bigint")
            for j, name in enumerate(attributes)]
    mask = F.when(applies, sum(bits[1:], bits[0])).otherwise(F.lit(0).cast("bigint"))
    record = F.col(sp)
    code = F.struct(
        F.coalesce(F.lower(record["sign"]).isin("+", "positive"), F.lit(True)).alias("p"),
        F.coalesce(record["immutable"], F.lit(False)).alias("i"),
        F.coalesce(record["grant"], F.lit(False)).alias("g"),
        mask.alias("m"), key["k"].alias("k"), key["ls"].alias("ls"), key["hs"].alias("hs"),
        key["ld"].alias("ld"), key["hd"].alias("hd"), key["vs"].alias("vs"), key["vd"].alias("vd"),
    )
    return F.to_json(code)


def _role_matches(p: Column, roles: list[str]) -> Column:
    """Does the role pattern name one of ``roles``? Sets and constants (nearly every SRP)
    probe a hash set of the roles (``IN`` over literals), so a user with 500 roles costs
    one lookup per listed role, not 500 comparisons; ranges compare role by role."""
    if not roles:
        return F.lit(False)
    numbers = [n for n in (_number(r) for r in roles) if n is not None]
    listed = F.exists(p["vs"], lambda v: v.isin(*roles) | (v.try_cast("double").isin(*numbers) if numbers else F.lit(False)))
    ranged = F.exists(F.array(*[F.lit(r) for r in roles]), lambda r: matches(p, r, r.try_cast("double")))
    return (F.when(p["k"] == "any", True).when(p["k"].isin("const", "set"), F.coalesce(listed, F.lit(False)))
            .when(p["k"].isin("closed", "open"), ranged).otherwise(False))


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def pattern_problem(sp: str = "_sp") -> Column:
    """Why an SP record's patterns, sign or sn are unusable (NULL when they are fine)."""
    record = F.col(sp)
    sign = F.lower(F.coalesce(record["sign"], F.lit("+")))
    problem = F.when(~sign.isin("+", "-", "positive", "negative"), F.lit("sign must be '+' or '-'"))
    for name in ("roles", "tuples", "attributes", "streams"):
        problem = F.when(~F.col(pattern_column_name(name))["valid"], F.concat(
            F.lit(f"malformed {name} pattern "), F.coalesce(record[name], F.lit("(missing)")))).otherwise(problem)
    return F.when(record["sn"].isNull() | (record["sn"] < 1), F.lit("sn must be a positive integer")).otherwise(problem)


def access_mask(governing: Column, key: Column, key_dtype: str, *, grant_only: bool = False) -> tuple[Column, Column]:
    """(provider mask, immutable) for each tuple from its governing SPs (parsed with
    ``from_json(_gov, GOVERNING)``; NULL when the shield denied the tuple)."""
    sps = governing
    text = key.cast("string")
    number = key.cast("double") if key_dtype in ("int", "long", "double") else F.when(
        text.rlike(_NUMBER), text.cast("double"))

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


__all__ = ["GOVERNING", "PATTERN_COLUMNS", "SP_CODE", "access_mask", "combined_mask", "has_bit", "matches",
           "pattern_problem", "server_mask", "sp_code", "with_parsed_patterns"]
