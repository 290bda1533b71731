"""Independent test oracle for streamwarden's information-flow (Chinese-Wall) levels.

Paper: Ray, Adaikkalavan, Xie, Gamble, *Stream Processing with Secure Information Flow
Constraints* (DBSec 2015), sections 3-4 (``../shared/papers/information-flow-chinese-wall.md``).
This module computes, with plain loops over Python lists, what a query running at a security level
must answer.  It imports nothing from ``streamwarden`` except ``format_timestamp``.

Levels
------
A *lattice* is ``{class name: [company, ...]}`` in a fixed class order.  A level is a
plain ``tuple[str, ...]`` with one entry per class: a company of that class, ``BOT``
(``"⊥"``) or ``TOP`` (``"T"``).  ``l1 <= l2`` (l2 dominates l1) iff for every class k:
``l1[k] == l2[k] or l1[k] == ⊥ or l2[k] == T``.

Tuple levels (the trusted stream shepherd)
------------------------------------------
A stream's level spec is ``{"from": attr}`` (the company named by ``attr``; anything
unrecognised gives TOP), a fixed level text such as ``"[1, ⊥]"``, or ``None`` (TOP).

Queries
-------
A query runs at a level L and sees only the *visible* tuples (level <= L); this filter
comes before any window is formed.  Query shapes: :class:`Select`,
:class:`RowsAggregate`, :class:`RangeAggregate`, :class:`Join` (each has ``cql()``).
Entry point: :func:`run`.

Conditions use SQL three-valued logic: a comparison with NULL (``None`` or a missing
attribute) is not true.  Two values compare only when both are numbers (int/float, not
bool), both strings, both bools or both datetimes; any other mix is not true.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Sequence

from streamwarden.plan.expr import format_timestamp

BOT = "⊥"
TOP = "T"
_BOT_WORDS = {"⊥", "_", "bot"}  # compared after .lower()
_TOP_WORDS = {"top"}  # compared after .lower(); plain "T" is matched case-sensitively

Level = tuple  # tuple[str, ...]; an alias for readability only
Lattice = Mapping[str, Sequence[str]]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
AGG_FUNCS = ("COUNT", "MIN", "MAX", "SUM", "AVG")
OPS = ("=", "<>", "<", "<=", ">", ">=")


# --------------------------------------------------------------------------
# Lattice and levels
# --------------------------------------------------------------------------
def _is_bot_word(word: str) -> bool:
    return word.lower() in _BOT_WORDS


def _is_top_word(word: str) -> bool:
    return word == "T" or word.lower() in _TOP_WORDS


def check_lattice(lattice: Lattice) -> None:
    """Raise ValueError when a company name is ambiguous (a ⊥/T word, or one spelling
    ("c" or "Company" + c) naming two companies)."""
    spellings: dict[str, tuple[int, str]] = {}
    for k, companies in enumerate(lattice.values()):
        for company in companies:
            if not isinstance(company, str) or company != company.strip() or not company \
                    or any(c in company for c in ",[]"):
                raise ValueError(f"company names must be non-empty strings without spaces at the "
                                 f"ends or ',[]', got {company!r}")
            if _is_bot_word(company) or _is_top_word(company):
                raise ValueError(f"company name {company!r} reads as bottom/top")
            for spelling in (company, "Company" + company):
                if spelling in spellings and spellings[spelling] != (k, company):
                    raise ValueError(f"{spelling!r} names two companies")
                spellings[spelling] = (k, company)


def bottom(lattice: Lattice) -> Level:
    """The public level ``[⊥, ..., ⊥]``."""
    return tuple(BOT for _ in lattice)


def top(lattice: Lattice) -> Level:
    """The trusted level ``[T, ..., T]``."""
    return tuple(TOP for _ in lattice)


def level_text(level: Level) -> str:
    """Canonical text: ``"[1, ⊥]"``."""
    return "[" + ", ".join(level) + "]"


def parse_level(text: str, lattice: Lattice) -> Level:
    """Parse ``"[1, ⊥]"``; ``⊥``/``_``/``bot`` mean bottom, ``T``/``top`` mean top
    (bot/top case-insensitive), spaces optional.  Raises ValueError on anything else."""
    check_lattice(lattice)
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"a level is written in brackets, got {text!r}")
    entries = [e.strip() for e in body[1:-1].split(",")]
    classes = list(lattice.items())
    if len(entries) != len(classes):
        raise ValueError(f"{text!r} has {len(entries)} entries, the lattice has {len(classes)} classes")
    level = []
    for entry, (name, companies) in zip(entries, classes):
        if _is_bot_word(entry):
            level.append(BOT)
        elif _is_top_word(entry):
            level.append(TOP)
        elif entry in companies:
            level.append(entry)
        else:
            raise ValueError(f"{entry!r} is not a company of {name} in {text!r}")
    return tuple(level)


def dominates(a: Level, b: Level) -> bool:
    """True iff ``a`` dominates ``b``, i.e. ``b <= a``."""
    return dominated_by(b, a)


def dominated_by(a: Level, b: Level) -> bool:
    """True iff ``a <= b`` (Definition 4 of the paper)."""
    if len(a) != len(b):
        raise ValueError("levels of different lattices")
    return all(x == y or x == BOT or y == TOP for x, y in zip(a, b))


def lub(a: Level, b: Level) -> Level:
    """Least upper bound, per class: equal -> it; one is ⊥ -> the other; else T."""
    if len(a) != len(b):
        raise ValueError("levels of different lattices")
    return tuple(x if x == y else y if x == BOT else x if y == BOT else TOP for x, y in zip(a, b))


def lub_all(levels: Iterable[Level], lattice: Lattice) -> Level:
    """LUB of any number of levels; the LUB of nothing is the bottom level."""
    result = bottom(lattice)
    for level in levels:
        result = lub(result, level)
    return result


def company_level(value: Any, lattice: Lattice) -> Level:
    """Level of the company named by ``value`` (``c`` or ``"Company" + c``, exact and
    case-sensitive, strings only): that company in its class, ⊥ elsewhere.  Anything
    else (unknown, non-string, None) is TOP."""
    check_lattice(lattice)
    if isinstance(value, str):
        for k, companies in enumerate(lattice.values()):
            for company in companies:
                if value in (company, "Company" + company):
                    return tuple(company if i == k else BOT for i in range(len(lattice)))
    return top(lattice)


def tuple_level(record: Mapping[str, Any], spec: Any, lattice: Lattice) -> Level:
    """The level the trusted stream shepherd gives ``record`` under a stream level spec:
    ``{"from": attr}``, a fixed level text, or ``None`` (every tuple is TOP)."""
    if spec is None:
        return top(lattice)
    if isinstance(spec, str):
        return parse_level(spec, lattice)
    if isinstance(spec, Mapping) and set(spec) == {"from"}:
        return company_level(record.get(spec["from"]), lattice)
    raise ValueError(f"unsupported stream level spec {spec!r}")


# --------------------------------------------------------------------------
# Query shapes
# --------------------------------------------------------------------------
def _render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"no CQL literal for {value!r}")
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise ValueError(f"no CQL literal for {value!r}")


def _render_seconds(seconds: float) -> str:
    return f"{int(seconds)} seconds" if float(seconds).is_integer() else f"{seconds!r} seconds"


def _level_literal(text: str) -> str:
    """A level text with ⊥/T spellings made canonical (no lattice needed)."""
    entries = [e.strip() for e in text.strip().strip("[]").split(",")]
    return level_text(tuple(BOT if _is_bot_word(e) else TOP if _is_top_word(e) else e for e in entries))


def _is_level_attr(attr: str) -> bool:
    return attr.rsplit(".", 1)[-1] == "level"


@dataclass(frozen=True)
class Cond:
    """``attr op value``.  ``attr`` is unqualified for one stream, ``alias.attr`` in a
    join.  When ``attr`` is ``level`` the value is a level text, op is ``=`` or ``<>``."""

    attr: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown comparison {self.op!r}")
        if _is_level_attr(self.attr) and (self.op not in ("=", "<>") or not isinstance(self.value, str)):
            raise ValueError("a level condition is `level = <level>` or `level <> <level>`")

    def cql(self) -> str:
        value = _level_literal(self.value) if _is_level_attr(self.attr) else _render_value(self.value)
        return f"{self.attr} {self.op} {value}"


Aggregate = tuple  # (func, attr or None)


def _agg_name(agg: Aggregate) -> str:
    func, attr = agg
    return f"{func.upper()}({'*' if attr is None else attr})"


def _check_aggs(aggregates: Sequence[Aggregate]) -> None:
    if not aggregates:
        raise ValueError("an aggregate query needs at least one aggregate")
    for func, attr in aggregates:
        if func.upper() not in AGG_FUNCS:
            raise ValueError(f"unknown aggregate {func!r}")
        if attr is None and func.upper() != "COUNT":
            raise ValueError(f"{func}(*) is not an aggregate")
        if attr == "level":
            raise ValueError("aggregating the level attribute is not supported")


def _where_cql(where: Sequence[Cond]) -> str:
    return " WHERE " + " AND ".join(c.cql() for c in where) if where else ""


@dataclass(frozen=True)
class Select:
    """``SELECT items FROM stream WHERE c1 AND c2 ...``."""

    stream: str
    items: tuple[str, ...]
    where: tuple[Cond, ...] = ()

    def cql(self) -> str:
        return f"SELECT {', '.join(self.items)} FROM {self.stream}{_where_cql(self.where)}"


@dataclass(frozen=True)
class RowsAggregate:
    """``SELECT [g,] aggs FROM stream [ROWS n] WHERE ... [GROUP BY g]``."""

    stream: str
    n: int
    where: tuple[Cond, ...] = ()
    aggregates: tuple[Aggregate, ...] = (("COUNT", None),)
    group_by: str | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("ROWS needs a positive count")
        _check_aggs(self.aggregates)

    def cql(self) -> str:
        return _agg_cql(self.stream, f"[ROWS {self.n}]", self.where, self.aggregates, self.group_by)


@dataclass(frozen=True)
class RangeAggregate:
    """``SELECT [g,] aggs FROM stream [RANGE size seconds SLIDE slide seconds] ...``.
    ``slide_s=None`` means a tumbling window (slide = size)."""

    stream: str
    size_s: float
    slide_s: float | None = None
    where: tuple[Cond, ...] = ()
    aggregates: tuple[Aggregate, ...] = (("COUNT", None),)
    group_by: str | None = None

    def __post_init__(self) -> None:
        if self.size_s <= 0 or (self.slide_s is not None and self.slide_s <= 0):
            raise ValueError("window size and slide must be positive")
        _check_aggs(self.aggregates)

    def cql(self) -> str:
        window = f"[RANGE {_render_seconds(self.size_s)}"
        if self.slide_s is not None:
            window += f" SLIDE {_render_seconds(self.slide_s)}"
        return _agg_cql(self.stream, window + "]", self.where, self.aggregates, self.group_by)


def _agg_cql(stream: str, window: str, where: Sequence[Cond], aggregates: Sequence[Aggregate],
             group_by: str | None) -> str:
    items = ([group_by] if group_by else []) + [_agg_name(a) for a in aggregates]
    group = f" GROUP BY {group_by}" if group_by else ""
    return f"SELECT {', '.join(items)} FROM {stream} {window}{_where_cql(where)}{group}"


@dataclass(frozen=True)
class Join:
    """``SELECT a.x, b.y FROM L AS a [RANGE wa seconds], R AS b [RANGE wb seconds]
    WHERE a.k = b.k AND ...``.  ``on``: (left attr, right attr) equalities, unqualified;
    ``where`` and ``items``: qualified by alias.  A pair joins when
    ``a.ts - wb <= b.ts <= a.ts + wa``."""

    left_stream: str
    left_alias: str
    left_range_s: float
    right_stream: str
    right_alias: str
    right_range_s: float
    on: tuple[tuple[str, str], ...]
    where: tuple[Cond, ...] = ()
    items: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.left_alias == self.right_alias:
            raise ValueError("the two sides need different aliases")
        for item in self.items:
            alias, _, attr = item.partition(".")
            if alias not in (self.left_alias, self.right_alias) or not attr:
                raise ValueError(f"join item {item!r} must be qualified by an alias")
            if attr == "level":
                raise ValueError("a join item named level would clash with the output level")
        for cond in self.where:
            if cond.attr.partition(".")[0] not in (self.left_alias, self.right_alias):
                raise ValueError(f"join condition {cond.attr!r} must be qualified by an alias")

    def cql(self) -> str:
        a, b = self.left_alias, self.right_alias
        preds = [f"{a}.{x} = {b}.{y}" for x, y in self.on] + [c.cql() for c in self.where]
        where = " WHERE " + " AND ".join(preds) if preds else ""
        return (f"SELECT {', '.join(self.items)} FROM {self.left_stream} AS {a} "
                f"[RANGE {_render_seconds(self.left_range_s)}], {self.right_stream} AS {b} "
                f"[RANGE {_render_seconds(self.right_range_s)}]{where}")


Query = Select | RowsAggregate | RangeAggregate | Join


# --------------------------------------------------------------------------
# Evaluation helpers
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Tup:
    """A visible tuple: its record, its level, and its arrival position."""

    record: Mapping[str, Any]
    level: Level
    seq: int

    @property
    def ts(self) -> datetime:
        return self.record["ts"]

    def get(self, attr: str) -> Any:
        """Attribute value; ``level`` is the level text; missing is NULL."""
        if attr == "level":
            return level_text(self.level)
        return self.record.get(attr)


def _kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, datetime):
        return "datetime"
    return None


def compare(left: Any, op: str, right: Any) -> bool:
    """``left op right`` is TRUE: both non-NULL and of the same kind (see module doc)."""
    kind = _kind(left)
    if kind is None or kind != _kind(right):
        return False
    return {
        "=": left == right, "<>": left != right, "<": left < right,
        "<=": left <= right, ">": left > right, ">=": left >= right,
    }[op]


def _cond_holds(cond: Cond, tup: Tup, attr: str, lattice: Lattice) -> bool:
    if attr == "level":
        same = tup.level == parse_level(cond.value, lattice)
        return same if cond.op == "=" else not same
    return compare(tup.get(attr), cond.op, cond.value)


def _where_holds(where: Sequence[Cond], tup: Tup, lattice: Lattice) -> bool:
    return all(_cond_holds(c, tup, c.attr, lattice) for c in where)


def visible_tuples(stream: str, streams: Mapping[str, Mapping[str, Any]],
                   records: Mapping[str, Sequence[Mapping[str, Any]]], lattice: Lattice,
                   at: Level) -> list[Tup]:
    """The stream's tuples whose level is dominated by ``at``, in arrival order (by ts,
    ties by input order).  A stream absent from ``streams`` has no spec (all TOP)."""
    spec = (streams.get(stream) or {}).get("level")
    out = []
    for seq, record in enumerate(records.get(stream, ())):
        ts = record.get("ts")
        if not isinstance(ts, datetime) or ts.tzinfo is None:
            raise ValueError(f"record {record!r} needs a timezone-aware datetime ts")
        level = tuple_level(record, spec, lattice)
        if dominated_by(level, at):
            out.append(Tup(record, level, seq))
    out.sort(key=lambda t: (t.ts, t.seq))
    return out


def aggregate(func: str, attr: str | None, tuples: Sequence[Tup]) -> Any:
    """One aggregate over ``tuples``: NULLs skipped, COUNT(*) counts tuples, AVG is a
    float (None when no value), SUM of ints is an int."""
    func = func.upper()
    if attr is None:
        return len(tuples)
    values = [t.get(attr) for t in tuples if t.get(attr) is not None]
    if func == "COUNT":
        return len(values)
    if not values:
        return None
    if func == "MIN":
        return min(values)
    if func == "MAX":
        return max(values)
    if func == "SUM":
        return sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)
    if func == "AVG":
        total = sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)
        return total / len(values)
    raise ValueError(f"unknown aggregate {func!r}")


def _groups(tuples: Sequence[Tup], group_by: str | None) -> list[tuple[Any, list[Tup]]]:
    """(group value, tuples); without GROUP BY one group holding everything (maybe
    empty).  NULL is a group of its own, as in SQL."""
    if group_by is None:
        return [(None, list(tuples))]
    groups: dict[Any, list[Tup]] = {}
    for t in tuples:
        groups.setdefault(t.get(group_by), []).append(t)
    return list(groups.items())


def _agg_rows(tuples: Sequence[Tup], query: RowsAggregate | RangeAggregate, lattice: Lattice,
              extra: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for value, members in _groups(tuples, query.group_by):
        row = dict(extra)
        if query.group_by is not None:
            row[query.group_by] = value
        for agg in query.aggregates:
            row[_agg_name(agg)] = aggregate(agg[0], agg[1], members)
        row["level"] = level_text(lub_all((t.level for t in members), lattice))
        rows.append(row)
    return rows


def _micros(value: datetime | float) -> int:
    """Microseconds since the epoch (datetime) or in a duration (seconds)."""
    if isinstance(value, datetime):
        return (value - EPOCH) // timedelta(microseconds=1)
    return round(value * 1_000_000)


def window_starts(t: datetime, size_s: float, slide_s: float) -> list[datetime]:
    """Starts of the epoch-aligned windows ``[start, start+size)`` containing ``t``
    (starts are multiples of ``slide``)."""
    tm, size, slide = _micros(t), _micros(size_s), _micros(slide_s)
    first, last = (tm - size) // slide, tm // slide
    return [EPOCH + timedelta(microseconds=k * slide) for k in range(first, last + 1)
            if k * slide <= tm < k * slide + size]


# --------------------------------------------------------------------------
# Query evaluation
# --------------------------------------------------------------------------
def _run_select(q: Select, ctx: dict) -> list[dict[str, Any]]:
    rows = []
    for t in ctx["visible"](q.stream):
        if _where_holds(q.where, t, ctx["lattice"]):
            row = {item: t.get(item) for item in q.items}
            row["level"] = level_text(t.level)
            rows.append(row)
    return rows


def _run_rows(q: RowsAggregate, ctx: dict) -> list[dict[str, Any]]:
    visible = ctx["visible"](q.stream)
    rows = []
    for i, arriving in enumerate(visible):
        window = visible[max(0, i - q.n + 1): i + 1]
        qualifying = [t for t in window if _where_holds(q.where, t, ctx["lattice"])]
        rows += _agg_rows(qualifying, q, ctx["lattice"], {"ts": arriving.ts})
    return rows


def _run_range(q: RangeAggregate, ctx: dict) -> list[dict[str, Any]]:
    slide = q.slide_s if q.slide_s is not None else q.size_s
    windows: dict[datetime, list[Tup]] = {}
    for t in ctx["visible"](q.stream):
        if _where_holds(q.where, t, ctx["lattice"]):
            for start in window_starts(t.ts, q.size_s, slide):
                windows.setdefault(start, []).append(t)
    rows = []
    for start, members in windows.items():
        end = start + timedelta(microseconds=_micros(q.size_s))
        rows += _agg_rows(members, q, ctx["lattice"], {"window_start": start, "window_end": end})
    return rows


def _run_join(q: Join, ctx: dict) -> list[dict[str, Any]]:
    lattice = ctx["lattice"]
    wa = timedelta(microseconds=_micros(q.left_range_s))
    wb = timedelta(microseconds=_micros(q.right_range_s))
    rows = []
    for a in ctx["visible"](q.left_stream):
        for b in ctx["visible"](q.right_stream):
            if not a.ts - wb <= b.ts <= a.ts + wa:
                continue
            if not all(compare(a.get(x), "=", b.get(y)) for x, y in q.on):
                continue
            side = {q.left_alias: a, q.right_alias: b}
            if not all(_cond_holds(c, side[c.attr.partition(".")[0]], c.attr.partition(".")[2], lattice)
                       for c in q.where):
                continue
            row = {}
            for item in q.items:
                alias, _, attr = item.partition(".")
                row[attr] = side[alias].get(attr)
            row["level"] = level_text(lub(a.level, b.level))
            rows.append(row)
    return rows


def _format(value: Any) -> Any:
    return format_timestamp(value) if isinstance(value, datetime) else value


def sort_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with datetimes formatted, sorted by their canonical JSON text."""
    formatted = [{k: _format(v) for k, v in row.items()} for row in rows]
    return sorted(formatted, key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))


def run(lattice: dict[str, list[str]], streams: dict[str, dict], records: dict[str, list[dict]],
        query: Query, level: str) -> list[dict[str, Any]]:
    """Answer ``query`` run at ``level`` (a level text) over ``records`` (stream name ->
    records in input order).  Rows have timestamps formatted and are sorted."""
    check_lattice(lattice)
    at = parse_level(level, lattice)
    cache: dict[str, list[Tup]] = {}

    def visible(stream: str) -> list[Tup]:
        if stream not in cache:
            cache[stream] = visible_tuples(stream, streams, records, lattice, at)
        return cache[stream]

    ctx = {"lattice": lattice, "visible": visible}
    handlers = {Select: _run_select, RowsAggregate: _run_rows, RangeAggregate: _run_range, Join: _run_join}
    handler = handlers.get(type(query))
    if handler is None:
        raise TypeError(f"unsupported query {query!r}")
    return sort_rows(handler(query, ctx))


def all_levels(lattice: Lattice) -> list[Level]:
    """Every level of the lattice (for exhaustive checks on small lattices)."""
    levels: list[Level] = [()]
    for companies in lattice.values():
        levels = [lv + (e,) for lv in levels for e in (BOT, *companies, TOP)]
    return levels
