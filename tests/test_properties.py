"""Theorems 5.5 and 5.6 (correctness and completeness), property-tested.

For random catalogs (roles with inheritance, profiles, an action that may or may not have
started, read and aggregate policies with conditions, attribute lists, time and window
constraints), random streams and random queries, the rows streamwarden's Spark replay
delivers equal the rows of an independent oracle (``tests/oracle.py``) that applies the
definitions directly to the tuples: nothing unauthorized is delivered (correctness) and
nothing authorized is missing (completeness).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import oracle as O
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text

pytestmark = pytest.mark.spark

BASE = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
SCHEMAS = {
    "S": [("ts", "timestamp"), ("a", "int"), ("b", "int"), ("g", "string")],
    "T": [("ts", "timestamp"), ("k", "int"), ("c", "int"), ("g", "string")],
}
INTS = {"S": ("a", "b"), "T": ("k", "c")}
O.INTEGER_ATTRIBUTES |= {f"{s}.{a}" for s, schema in SCHEMAS.items() for a, t in schema if t == "int"}
EXAMPLES = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


# -- predicates, rendered both as CQL text and as oracle tuples ------------------------------
@dataclass(frozen=True)
class Atom:
    stream: str
    attr: str
    op: str
    value: object  # int, str, ("self", "g") or ("attr", "T.k")

    def text(self) -> str:
        if isinstance(self.value, tuple):
            right = f"self.{self.value[1]}" if self.value[0] == "self" else self.value[1]
        elif isinstance(self.value, str):
            right = f"'{self.value}'"
        else:
            right = str(self.value)
        return f"{self.stream}.{self.attr} {self.op} {right}"

    def tree(self) -> tuple:
        if isinstance(self.value, tuple):
            right = self.value
        else:
            right = ("const", self.value)
        return ("cmp", ("attr", f"{self.stream}.{self.attr}"), self.op, right)


@dataclass(frozen=True)
class Pred:
    atoms: tuple[Atom, ...]
    disjunctive: bool = False

    def text(self) -> str:
        return f" {'OR' if self.disjunctive else 'AND'} ".join(f"({a.text()})" for a in self.atoms)

    def tree(self) -> tuple:
        tree = self.atoms[0].tree()
        for atom in self.atoms[1:]:
            tree = ("or" if self.disjunctive else "and", tree, atom.tree())
        return tree


def atoms(stream: str, *, profile: bool) -> st.SearchStrategy[Atom]:
    numeric = st.builds(Atom, st.just(stream), st.sampled_from(INTS[stream]),
                        st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), st.integers(0, 4))
    values = [st.sampled_from(["x", "y"])] + ([st.just(("self", "g"))] if profile else [])
    text = st.builds(Atom, st.just(stream), st.just("g"), st.sampled_from(["=", "<>"]), st.one_of(*values))
    return st.one_of(numeric, text)


def preds(stream: str, *, profile: bool) -> st.SearchStrategy[Pred | None]:
    # Often no predicate, so that a fair share of cases delivers rows.
    some = st.builds(Pred, st.lists(atoms(stream, profile=profile), min_size=1, max_size=2).map(tuple), st.booleans())
    return st.one_of(st.none(), some, st.builds(Pred, st.tuples(atoms(stream, profile=profile))))


# -- catalogs ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    id: str
    subject: str
    streams: tuple[str, ...]
    attributes: tuple[str, ...] | None
    where: Pred | None
    privilege: str
    during_a: bool
    window: tuple[int, int] | None
    group_by: tuple[str, ...] = ()
    min_group: int | None = None

    def yaml(self) -> str:
        fields = [f"id: {self.id}", f"subject: {self.subject}", f"streams: [{', '.join(self.streams)}]",
                  f"privilege: {self.privilege}",
                  "attributes: '*'" if self.attributes is None else f"attributes: [{', '.join(self.attributes)}]"]
        if self.where is not None:
            fields.append(f'where: "{self.where.text()}"')
        if self.during_a:
            fields.append('time: ["start(a)", "end(a)"]')
        if self.window:
            fields.append(f"window: {{size: {self.window[0]}, offset: {self.window[1]}}}")
        if self.group_by:
            fields.append(f"group_by: [{', '.join(self.group_by)}]")
        if self.min_group:
            fields.append(f"min_group: {self.min_group}")
        return "  - {" + ", ".join(fields) + "}"

    def oracle(self) -> O.OPolicy:
        time = (("action", "start", "a"), ("action", "end", "a")) if self.during_a else None
        return O.OPolicy(self.id, self.subject, self.streams, self.attributes or "*",
                         self.where.tree() if self.where else None, self.privilege, time,
                         (float(self.window[0]), float(self.window[1])) if self.window else None,
                         self.group_by, self.min_group)


@st.composite
def policies(draw, streams: tuple[str, ...], privileges: list[str], join_pred: bool = False) -> Policy:
    attrs = sorted({a for s in streams for a, _ in SCHEMAS[s] if a != "ts"})
    chosen = draw(st.one_of(st.none(), st.lists(st.sampled_from(attrs), min_size=1, max_size=len(attrs), unique=True)))
    where = draw(preds(streams[0], profile=True))
    if join_pred:
        link = Pred((Atom("S", "a", "=", ("attr", "T.k")),))
        where = link if where is None else Pred(link.atoms + where.atoms)
    subject = draw(st.sampled_from(["R1", "R2", "R2", "R3"]))  # R3 is not the user's
    privilege = draw(st.sampled_from(privileges))
    during_a = draw(st.sampled_from([False, False, True]))
    window = draw(st.one_of(st.none(), st.sampled_from([(60, 60), (120, 60), (120, 120), (90, 45)])))
    # inference control (aggregate privileges only): grouping allowed by g or not at all, a minimum group
    group_by = draw(st.sampled_from([(), ("g",)])) if privilege != "read" else ()
    min_group = draw(st.sampled_from([None, None, 2, 3])) if privilege != "read" else None
    return Policy("", subject, streams, tuple(sorted(chosen)) if chosen else None, where, privilege, during_a,
                  window, group_by, min_group)


@dataclass(frozen=True)
class World:
    policies: tuple[Policy, ...]
    action_start: int | None
    action_end: int | None

    def catalog_yaml(self) -> str:
        start = f'"{iso(self.action_start)}"' if self.action_start is not None else "null"
        end = f'"{iso(self.action_end)}"' if self.action_end is not None else "null"
        body = "\n".join(p.yaml() for p in self.policies) or "  []"
        streams = "\n".join(f"  {name}: {{schema: {{{', '.join(f'{a}: {t}' for a, t in schema)}}}}}"
                            for name, schema in SCHEMAS.items())
        return (f"streams:\n{streams}\nroles:\n  R1: {{}}\n  R2: {{inherits: [R1]}}\n  R3: {{}}\n"
                f"users:\n  u: {{roles: [R2], profile: {{g: x}}}}\n"
                f"actions:\n  a: {{start: {start}, end: {end}, target: 2.0}}\n"
                + ("policies:\n" + body if self.policies else "policies: []") + "\n")

    def oracle(self) -> O.OCatalog:
        action = O.OAction(at(self.action_start), at(self.action_end), 2.0 if self.action_start is not None else None)
        return O.OCatalog({"R1": (), "R2": ("R1",), "R3": ()}, {"u": (("R2",), {"g": "x"})}, {"a": action},
                          tuple(p.oracle() for p in self.policies))


@st.composite
def worlds(draw, kinds: list[tuple[tuple[str, ...], list[str], bool]]) -> World:
    drawn = []
    for streams, privileges, join_pred in kinds:
        for _ in range(draw(st.integers(1, 3))):
            drawn.append(draw(policies(streams, privileges, join_pred)))
    drawn = [_with_id(p, i) for i, p in enumerate(drawn)]
    start = draw(st.sampled_from([None, 0, 0, 60, 150]))
    end = draw(st.one_of(st.none(), st.just(240))) if start is not None else None
    return World(tuple(drawn), start, end)


def _with_id(policy: Policy, i: int) -> Policy:
    return Policy(f"p{i}", *list(policy.__dict__.values())[1:])


# -- streams -------------------------------------------------------------------------------------
def tuples(stream: str, span: int = 299) -> st.SearchStrategy[list[dict]]:
    ints = INTS[stream]
    record = st.fixed_dictionaries({
        "ts": st.integers(0, span), ints[0]: st.integers(0, 4), ints[1]: st.integers(0, 4),
        "g": st.sampled_from(["x", "y"]),
    })
    return st.lists(record, min_size=1, max_size=12).map(lambda rows: sorted(rows, key=lambda r: r["ts"]))


def iso(seconds: int | None) -> str:
    assert seconds is not None
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def at(seconds: int | None) -> datetime | None:
    return None if seconds is None else BASE + timedelta(seconds=seconds)


def as_json(rows: list[dict]) -> list[dict]:
    return [{**r, "ts": iso(r["ts"])} for r in rows]


def as_oracle(rows: list[dict]) -> list[dict]:
    return [{**r, "ts": at(r["ts"])} for r in rows]


def check(actual: list[dict], expected: list[dict]) -> None:
    """Equal as multisets; the event shows in --hypothesis-show-statistics that cases are not vacuous."""
    event("oracle delivers rows" if expected else "oracle delivers nothing")
    for kind in sorted({str(r["_kind"]).split(":")[0] for r in expected}):
        event(f"rows from the {kind} path")
    assert normalize(actual) == normalize(expected)


def normalize(rows: list[dict]) -> list[str]:
    out = []
    for row in rows:
        clean = {}
        for key, value in row.items():
            if key in ("_graph", "_kind"):
                continue
            if isinstance(value, datetime):
                value = value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            if isinstance(value, float):
                value = round(value, 6)
            clean[key] = value
        out.append(json.dumps(clean, sort_keys=True))
    return sorted(out)


def replay(world: World, query: str, data: dict[str, list[dict]], spark) -> list[dict]:
    catalog = load_catalog_text(world.catalog_yaml(), "random.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {}
        for stream, rows in data.items():
            path = Path(tmp) / f"{stream}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in as_json(rows)))
            inputs[stream] = str(path)
        return api.replay(catalog, "u", query, inputs, spark=spark)


# -- the properties -----------------------------------------------------------------------------
@EXAMPLES
@given(world=worlds([(("S",), ["read", "read", "avg"], False)]), rows=tuples("S"),
       items=st.one_of(st.just("*"), st.lists(st.sampled_from(["ts", "a", "b", "g"]), min_size=1, unique=True)),
       where=preds("S", profile=False))
def test_selection_projection_matches_oracle(spark, world, rows, items, where) -> None:
    select = "*" if items == "*" else ", ".join(items)
    query = f"SELECT {select} FROM S" + (f" WHERE {where.text()}" if where else "")
    expected = O.select_rows(world.oracle(), "u", "S", as_oracle(rows),
                             "*" if items == "*" else [(i, i) for i in items], where.tree() if where else None,
                             schema=[a for a, _ in SCHEMAS["S"]])
    check(replay(world, query, {"S": rows}, spark), expected)


@EXAMPLES
@given(world=worlds([(("S",), ["read", "avg", "count", "sum", "min", "max"], False)]), rows=tuples("S"),
       func=st.sampled_from(["avg", "count", "sum", "min", "max", "count*"]), attr=st.sampled_from(["a", "b"]),
       grouped=st.booleans(), window=st.sampled_from([(60, None), (60, 30), (120, 60), (60, 120)]),
       where=preds("S", profile=False))
def test_aggregation_matches_oracle(spark, world, rows, func, attr, grouped, window, where) -> None:
    size, slide = window
    call = "COUNT(*)" if func == "count*" else f"{func.upper()}({attr})"
    query = (f"SELECT {'g, ' if grouped else ''}{call} AS v FROM S [RANGE {size} seconds"
             f"{f' SLIDE {slide} seconds' if slide else ''}]" + (f" WHERE {where.text()}" if where else "")
             + (" GROUP BY g" if grouped else ""))
    aggs = [("count", None, "v")] if func == "count*" else [(func, attr, "v")]
    expected = O.aggregate_rows(world.oracle(), "u", "S", as_oracle(rows), aggs, ["g"] if grouped else [],
                                where.tree() if where else None, float(size), float(slide or size))
    check(replay(world, query, {"S": rows}, spark), expected)


@settings(EXAMPLES, max_examples=20)  # each example is a stream-stream join on Spark: the suite's time budget
@given(world=worlds([(("S",), ["read"], False), (("T",), ["read"], False), (("S", "T"), ["read"], True)]),
       s_rows=tuples("S", 90), t_rows=tuples("T", 90), wa=st.sampled_from([0, 30, 120]),
       wb=st.sampled_from([0, 30, 120]),
       s_where=preds("S", profile=False), t_where=preds("T", profile=False))
def test_join_matches_oracle(spark, world, s_rows, t_rows, wa, wb, s_where, t_where) -> None:
    conditions = ["S.a = T.k"] + [f"({p.text()})" for p in (s_where, t_where) if p]
    window = lambda w: "[NOW]" if w == 0 else f"[RANGE {w} seconds]"  # noqa: E731
    query = (f"SELECT S.a AS sa, S.g AS sg, T.c AS tc, T.ts AS tts FROM S {window(wa)}, "
             f"T {window(wb)} WHERE " + " AND ".join(conditions))
    where = Atom("S", "a", "=", ("attr", "T.k")).tree()
    for p in (s_where, t_where):
        if p:
            where = ("and", where, p.tree())
    expected = O.join_rows(world.oracle(), "u", "S", as_oracle(s_rows), float(wa), "T", as_oracle(t_rows), float(wb),
                           [("S.a", "sa"), ("S.g", "sg"), ("T.c", "tc"), ("T.ts", "tts")], where)
    check(replay(world, query, {"S": s_rows, "T": t_rows}, spark), expected)


@EXAMPLES
@given(data=st.data(), rows=tuples("S"), func=st.sampled_from(["avg", "count", "sum", "min", "max"]),
       attr=st.sampled_from(["a", "b"]), window=st.sampled_from([(60, None), (60, 30), (120, 60)]))
def test_aggregate_policies_match_oracle(spark, data, rows, func, attr, window) -> None:
    """Sec_Aggr: policies granting the queried function, queries whose WHERE a policy may imply."""
    world = data.draw(worlds([(("S",), [func], False)]))
    implied = [a for p in world.policies if p.where and not p.where.disjunctive for a in p.where.atoms
               if a.value != ("self", "g")]
    where = data.draw(st.one_of(st.none(), st.sampled_from(implied).map(lambda a: Pred((a,))))
                      if implied else st.none())
    size, slide = window
    query = (f"SELECT {func.upper()}({attr}) AS v FROM S [RANGE {size} seconds"
             f"{f' SLIDE {slide} seconds' if slide else ''}]" + (f" WHERE {where.text()}" if where else ""))
    expected = O.aggregate_rows(world.oracle(), "u", "S", as_oracle(rows), [(func, attr, "v")], [],
                                where.tree() if where else None, float(size), float(slide or size))
    check(replay(world, query, {"S": rows}, spark), expected)
