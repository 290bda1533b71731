"""Shared groups against the contract, over random catalogs and members (issue 34).

Each example draws a catalog: a plain stream ``Readings`` (strings, an int, a double) at the
bottom level, and a punctuated, levelled stream ``Vitals`` whose patients send their own
security punctuations (hiding attributes from some roles), read through a Security Shield;
read policies with random ``attributes:`` subsets (so attributes are masked for some users)
and random ``where:`` conditions, some on ``self.`` profile attributes; an aggregate-only
privilege (a minimum window, maybe ``group_by`` and ``min_group``); users with random roles,
profiles and clearances in a lattice of two hospitals. Then random registered queries, each
listed for some users: selections and windowed aggregates (COUNT/SUM/AVG/MIN/MAX over
``[RANGE n minutes]``, with or without GROUP BY) with constants in WHERE on every attribute
(equalities on strings, the group-key case, and ranges on numbers).

For every listed user and query, with grants open from the start, the rows she receives
from ``network run`` (a NetworkRuntime with ``available_now``) and from ``network replay``
equal her own ``api.replay`` of the query over the same files (one user's own pipeline:
the contract). Nothing of the oracle comes from the group code. No group query may fail,
and no member's status may say the network cannot run her query.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streamwarden import api
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.network import NetworkRuntime, read_status, read_user_rows
from streamwarden.runtime.network_replay import replay_network

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
SPAN = 360  # seconds of data
FLUSH = T0 + timedelta(hours=2)  # a last tuple per stream and patient: the watermark closes every window before it
CUTOFF = "2026-03-01T11:00:00Z"  # aggregate rows compared: windows ending by then (the flush's stays open in a run)
USERS = ("u0", "u1", "u2")
ROLES = ("Nurse", "Doctor", "Analyst")
PATIENTS = {1: "north", 2: "north", 3: "south", 4: "south"}
READINGS = {"site": "string", "ward": "string", "sensor": "int", "value": "double"}
VITALS = {"patient": "int", "hospital": "string", "unit": "string", "pulse": "int", "temp": "double"}
STRINGS = {"site": ("s0", "s1"), "ward": ("w0", "w1", "w2"), "hospital": ("north", "south"), "unit": ("icu", "er")}


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the catalog ---------------------------------------------------------------------------------
# Each choice lists first what is most likely to break a group (Hypothesis starts from the
# first options): a view that hides an attribute a member's constants constrain, under a
# policy condition the shared plans can key on. Random draws cover the rest.
def attribute_sets(preferred: list[list[str]], names: tuple[str, ...]) -> st.SearchStrategy[object]:
    """A policy's ``attributes:``: mostly a strict subset, so that something is masked."""
    return st.one_of(st.sampled_from(preferred),
                     st.sets(st.sampled_from(names), min_size=1, max_size=len(names) - 1).map(sorted), st.just("*"))


reading_conditions = st.sampled_from(["site = self.site", "ward = self.ward", "ward = self.ward AND site = 's0'",
                                      "", "sensor >= 2", "value < 40", "ward <> self.ward"])
vital_conditions = st.sampled_from(["hospital = self.hospital", "unit = self.unit", "", "pulse > 70",
                                    "unit = self.unit AND temp < 38.5"])
read_policy = st.fixed_dictionaries({
    "attributes": attribute_sets([["sensor", "site", "value"], ["sensor", "value", "ward"], ["site", "value", "ward"]],
                                 tuple(READINGS)),
    "where": reading_conditions})
vital_policy = st.fixed_dictionaries({
    "attributes": attribute_sets([["hospital", "patient", "unit"], ["patient", "pulse", "temp"],
                                  ["patient", "pulse", "unit"]], tuple(VITALS)),
    "where": vital_conditions})
aggregate_policy = st.fixed_dictionaries({
    "privilege": st.sampled_from(["avg", "count", "sum", "min", "max"]),
    "attributes": st.sampled_from([["value"], ["sensor"], ["value", "sensor"]]),
    "where": st.sampled_from(["ward = self.ward", ""]),
    "window": st.sampled_from(["2 minutes", "1 minute"]),
    "group_by": st.sampled_from([None, ["site"]]),
    "min_group": st.sampled_from([2, None]),
})
user = st.fixed_dictionaries({
    "roles": st.lists(st.sampled_from(ROLES), min_size=1, max_size=2, unique=True).map(sorted),
    "profile": st.fixed_dictionaries({a: st.sampled_from(STRINGS[a]) for a in ("ward", "site", "hospital")},
                                     optional={"unit": st.sampled_from(STRINGS["unit"])}),
    "clearance": st.sampled_from(["[north]", "[T]", "[south]", None]),
})
# a patient's policy: one or two SPs, each granting (or, the second, denying) attribute patterns to roles
sp = st.tuples(st.sampled_from(["{patient, pulse}", "*", "{patient, hospital, unit}", "{patient, temp, pulse}",
                                "{pulse}"]),
               st.sampled_from(["{Nurse, Doctor, Analyst}", "{Nurse, Doctor}", "Doctor", "Nurse"]))
patient_policy = st.tuples(sp, st.none() | st.tuples(sp, st.sampled_from(["+", "-"])))
catalogs = st.fixed_dictionaries({
    "users": st.tuples(*[user for _ in USERS]),
    "reads": st.fixed_dictionaries({r: st.lists(read_policy, min_size=1, max_size=2) for r in ROLES}),
    "aggregate": aggregate_policy,
    "vitals": st.sampled_from([True, True, False]).flatmap(
        lambda some: st.fixed_dictionaries({r: vital_policy for r in ROLES}) if some else st.none()),
    "sps": st.fixed_dictionaries({p: patient_policy for p in PATIENTS}),
})


def catalog_text(drawn: dict) -> str:
    users = {}
    for name, u in zip(USERS, drawn["users"]):
        users[name] = {"roles": u["roles"], **({"profile": u["profile"]} if u["profile"] else {}),
                       **({"clearance": u["clearance"]} if u["clearance"] else {})}
    policies: list[dict] = []
    for role, reads in drawn["reads"].items():
        for k, p in enumerate(reads):
            policies.append({"id": f"read_{role.lower()}{k}", "subject": role, "streams": ["Readings"],
                             "privilege": "read", "attributes": p["attributes"], **({"where": p["where"]}
                                                                                     if p["where"] else {})})
    a = drawn["aggregate"]
    policies.append({"id": "stats", "subject": "Analyst", "streams": ["Readings"], "privilege": a["privilege"],
                     "attributes": a["attributes"], **({"where": a["where"]} if a["where"] else {}),
                     "window": {"size": a["window"]}, **({"group_by": a["group_by"]} if a["group_by"] else {}),
                     **({"min_group": a["min_group"]} if a["min_group"] else {})})
    for role, p in (drawn["vitals"] or {}).items():
        policies.append({"id": f"vitals_{role.lower()}", "subject": role, "streams": ["Vitals"], "privilege": "read",
                         "attributes": p["attributes"], **({"where": p["where"]} if p["where"] else {})})
    return yaml.dump({
        "lattice": {"classes": {"Hospitals": ["north", "south"]}},
        "streams": {
            "Readings": {"schema": {"ts": "timestamp", **READINGS}, "level": "[⊥]"},
            "Vitals": {"schema": {"ts": "timestamp", **VITALS}, "key": "patient", "punctuated_by": "patient",
                       "level": {"from": "hospital"}},
        },
        "roles": {r: {} for r in ROLES},
        "users": users,
        "policies": policies,
    }, Dumper=_Plain, sort_keys=False, allow_unicode=True)


class _Plain(yaml.SafeDumper):
    """YAML without anchors: a failing example's catalog reads as written."""

    def ignore_aliases(self, data: object) -> bool:
        return True


# -- the queries ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """A query family: its stream, whether it aggregates, and which attributes its WHERE constrains."""

    stream: str
    aggregate: str | None  # None: a selection; else COUNT, SUM, AVG, MIN or MAX
    argument: str  # the aggregated attribute, or the selection's items
    window: int
    group_by: str | None
    constrained: tuple[str, ...]  # attributes with a constant in WHERE


AGGREGATES = ["AVG", "COUNT", "SUM", "MIN", "MAX"]


@st.composite
def shapes(draw: st.DrawFn, stream: str) -> Shape:
    """A family over ``stream``: over Readings an aggregate first, over Vitals a selection first."""
    schema = READINGS if stream == "Readings" else VITALS
    numbers = [a for a, t in schema.items() if t != "string"]
    words = [a for a, t in schema.items() if t == "string"]
    if stream == "Readings":
        aggregate = draw(st.sampled_from(AGGREGATES) | st.none())
    else:
        aggregate = draw(st.none() | st.sampled_from(AGGREGATES))
    any_attributes = st.sets(st.sampled_from(list(schema)), min_size=1).map(sorted)
    if aggregate is None:
        argument = ", ".join(draw(any_attributes))
        # a constant on any attribute: equalities on strings, ranges on numbers
        constrained = draw(st.sampled_from([["pulse"], ["hospital", "temp"]] if stream == "Vitals" else
                                           [["sensor", "ward"], ["site", "value"]]) | any_attributes)
    else:
        argument = draw(st.sampled_from([n for n in reversed(numbers) if n != "patient"]))
        # mostly keys only (the shared aggregate); sometimes a range beside them (a pipeline of its own)
        constrained = draw(st.sampled_from([[w] for w in reversed(words)] + [words]))
        constrained += draw(st.sampled_from([[], [], *[[n] for n in numbers]]))
    return Shape(stream, aggregate, argument, draw(st.sampled_from([1, 2])),
                 draw(st.sampled_from([None, *words])) if aggregate is not None else None, tuple(constrained))


def conjunct(attribute: str, dtype: str, draw: st.DrawFn) -> str:
    if dtype == "string":
        return f"{attribute} = '{draw(st.sampled_from(STRINGS[attribute]))}'"
    op = draw(st.sampled_from(["<", "<=", ">", ">="]))
    value = {"sensor": st.integers(0, 9), "value": st.sampled_from([5.5, 20.0, 35.25]),
             "patient": st.integers(1, 4), "pulse": st.integers(60, 130),
             "temp": st.sampled_from([36.5, 37.75, 39.0])}[attribute]
    return f"{attribute} {op} {draw(value)}"


@st.composite
def instance(draw: st.DrawFn, shape: Shape) -> str:
    """One query of the family, with its own constants."""
    schema = READINGS if shape.stream == "Readings" else VITALS
    where = " AND ".join(conjunct(a, schema[a], draw) for a in shape.constrained)
    if shape.aggregate is None:
        return f"SELECT {shape.argument} FROM {shape.stream} WHERE {where}"
    items = ([shape.group_by] if shape.group_by else []) + [
        "COUNT(*) AS n", f"{shape.aggregate}({shape.argument if shape.aggregate != 'COUNT' else '*'}) AS x"]
    if shape.aggregate == "COUNT":
        items = items[:-1]
    unit = "minute" if shape.window == 1 else "minutes"
    text = f"SELECT {', '.join(items)} FROM {shape.stream} [RANGE {shape.window} {unit}] WHERE {where}"
    return text + (f" GROUP BY {shape.group_by}" if shape.group_by else "")


@st.composite
def networks(draw: st.DrawFn) -> list[tuple[str, tuple[str, ...]]]:
    """A query family over each stream, one or two queries each, each listed for one or two users."""
    queries = []
    for family in (draw(shapes("Readings")), draw(shapes("Vitals"))):
        for _ in range(draw(st.integers(1, 2))):
            listed = draw(st.sets(st.sampled_from(USERS), min_size=1, max_size=2).map(sorted))
            queries.append((draw(instance(family)), tuple(listed)))
    return queries


# -- the data ------------------------------------------------------------------------------------
def readings(seed: int) -> list[dict]:
    rnd = random.Random(seed)
    rows = [{"ts": iso(T0 + timedelta(seconds=s)), "site": rnd.choice(STRINGS["site"]),
             "ward": rnd.choice(STRINGS["ward"]), "sensor": rnd.randrange(10), "value": rnd.randrange(0, 100) / 2}
            for s in sorted(rnd.sample(range(SPAN), 120))]
    return rows + [{"ts": iso(FLUSH), "site": "s0", "ward": "w0", "sensor": 0, "value": 0.0}]


def vitals(seed: int, sps: dict) -> list[dict]:
    """Each patient's policy (its SPs at T0), then readings in time order, then the flush tuples."""
    rnd = random.Random(seed + 1)
    records: list[dict] = []
    csn: dict[int, int] = {}
    for patient, (first, second) in sps.items():
        listed = [(first[0], first[1], "+")] + ([(second[0][0], second[0][1], second[1])] if second else [])
        for sn, (attributes, roles, sign) in enumerate(listed, start=1):
            records.append({"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": attributes,
                            "roles": roles, "sign": sign, "ts": iso(T0), "sn": sn, "patient": patient})
        csn[patient] = len(listed)

    def reading(at: datetime, patient: int) -> dict:
        return {"ts": iso(at), "patient": patient, "hospital": PATIENTS[patient], "unit": rnd.choice(STRINGS["unit"]),
                "pulse": rnd.randrange(55, 140), "temp": rnd.randrange(72, 80) / 2, "sp_ts": iso(T0),
                "sp_csn": csn[patient]}

    records += [reading(T0 + timedelta(seconds=s), rnd.choice(sorted(PATIENTS)))
                for s in sorted(rnd.sample(range(1, SPAN), 100))]
    return records + [reading(FLUSH, p) for p in sorted(PATIENTS)]


def write(folder: Path, records: list[dict]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(folder)


# -- comparing -----------------------------------------------------------------------------------
def comparable(rows: list[dict]) -> Counter:
    """Rows as a multiset of sorted-key JSON; an aggregate's windows closed before the flush only."""
    return Counter(json.dumps(r, sort_keys=True) for r in rows
                   if "window_end" not in r or r["window_end"] <= CUTOFF)


def own_replay(spark, catalog: Catalog, user: str, text: str, inputs: dict[str, str]) -> Counter:  # type: ignore[no-untyped-def]
    """The contract: the user's own pipeline of the query over the files (``replay --user``)."""
    return comparable(api.replay(catalog, user, text, inputs, spark=spark))


def diff(got: Counter, want: Counter) -> str:
    extra, missing = sorted((got - want).elements()), sorted((want - got).elements())
    return f"{len(extra)} rows too many, e.g. {extra[:3]}; {len(missing)} missing, e.g. {missing[:3]}"


@settings(max_examples=4, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(drawn=catalogs, network=networks(), seed=st.integers(0, 2**16))
def test_each_member_of_a_random_group_gets_exactly_her_own_replay(spark, tmp_path_factory, drawn, network,
                                                                    seed) -> None:
    root = tmp_path_factory.mktemp("groups")
    text = catalog_text(drawn)
    catalog = load_catalog_text(text, "random.yaml")
    inputs = {"Readings": write(root / "in" / "Readings", readings(seed)),
              "Vitals": write(root / "in" / "Vitals", vitals(seed, drawn["sps"]))}
    queries = [RegisteredQuery(f"q{i}", users, query) for i, (query, users) in enumerate(network)]
    store = sqlite_url(root / "store.db")
    server = AuthorizationServer(store)
    server.register(queries, catalog)
    for q in queries:  # grants open from the start
        for u in q.users:
            server.grant(q.id, u, T0 - timedelta(days=1))
    context = (f"\n--- catalog\n{text}--- patients' SPs (attributes, roles[, sign])\n{drawn['sps']}\n--- queries\n"
               + "".join(f"{q.id} {list(q.users)}: {q.query}\n" for q in queries) + f"--- data seed {seed}")
    rt = NetworkRuntime(spark, store, inputs, root / "out", root / "cp").start(available_now=True)
    try:
        rt.await_termination()
        failures = rt.failures()
        groups = {name: (g.failure, sorted(g.members)) for name, g in rt.groups.items()}
    finally:
        rt.stop()
    replay_network(spark, catalog, queries, server.changes(), inputs, root / "replay")
    problems = [f"failed: {name}: {why}" for name, why in failures.items()]
    problems += [f"group {name} failed ({why}); its members: {members}"
                 for name, (why, members) in groups.items() if why]
    for q in queries:
        for u in q.users:
            want = own_replay(spark, catalog, u, q.query, inputs)
            status = read_status(root / "out", u, q.id)
            if "cannot run" in status["reason"]:
                problems.append(f"{u} {q.id}: her status says {status['reason']!r}")
            got = comparable(read_user_rows(spark, root / "out", u, q.id))
            if got != want:
                problems.append(f"{u} {q.id}: network run differs from her own replay: {diff(got, want)}")
            lines = (root / "replay" / u / f"{q.id}.jsonl").read_text().splitlines()
            replayed = comparable([json.loads(line) for line in lines])
            if replayed != want:
                problems.append(f"{u} {q.id}: network replay differs from her own replay: {diff(replayed, want)}")
    assert not problems, "\n".join(problems) + context
