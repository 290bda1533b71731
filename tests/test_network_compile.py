"""Compiling a network at scale: what plan_network shares between users and queries, and why that
never hands one user another's rewriting (issue 25, internet scale; bench/network_compile.py).

plan_network binds a text once, secures it once per security class of user
(:class:`~streamwarden.security.passes.SecureCache`) and writes each distinct rewriting's graphs
for the fingerprint once. The adversarial tests here take pairs of users that differ in exactly
one thing :func:`secure` reads (roles, inherited roles, a profile value, its type or sign or
offset, a missing against a null value, the clearance, the query's options) and check that the
second never gets the first's rewriting: each gets what :func:`secure` computes for her alone.
A property test compares plan_network with the plain per-user loop it replaced."""

from __future__ import annotations

import gc
import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery, own_id
from streamwarden.catalog.store import sqlite_url
from streamwarden.errors import StreamwardenError
from streamwarden.language.binder import bound_query
from streamwarden.names import Taken, check_names, name_problem
from streamwarden.plan import expr as E
from streamwarden.plan.hashing import by_identity, stable_text
from streamwarden.plan.nodes import Filter, Source
from streamwarden.plan.templates import parameterize
from streamwarden.runtime.groups import group_of
from streamwarden.runtime.plan import Denial, collector_paused, pipeline_fingerprint, plan_network
from streamwarden.security.passes import SecureCache, SecurityOptions, secure
from streamwarden.security.rewrite.algorithm import Rewriting

PLUS_ONE = timezone(timedelta(hours=1))
SCHEMA = {"ts": "timestamp", "w": "string", "n": "int", "d": "double", "v": "double"}
ROLES = {"R": {}, "Q": {}, "Senior": {"inherits": ["R"]}, "Extra": {}}
POLICIES = [
    {"id": "ws", "subject": "R", "streams": ["S"], "attributes": "*", "where": "S.w = self.w", "privilege": "read"},
    {"id": "nd", "subject": "Q", "streams": ["S"], "attributes": ["ts", "v", "n"],
     "where": "S.n = self.n AND S.d > self.d", "privilege": "read"},
    {"id": "senior", "subject": "Senior", "streams": ["S"], "attributes": "*", "where": "S.v > 90",
     "privilege": "read"},
]
TEXTS = ("SELECT w FROM S", "SELECT v FROM S WHERE v > 5", "SELECT v FROM P",
         "SELECT AVG(v) AS m FROM S [RANGE 1 minute]",
         "SELECT s.v FROM S AS s [RANGE 1 minute], P AS p [RANGE 1 minute] WHERE s.v = p.v")


def catalog(users: dict[str, dict[str, Any]]) -> Catalog:
    """A catalog of a plain stream S under three role policies (one over two profile attributes),
    a punctuated stream P (its SPs decide, behind a shield holding the user's roles) and ``users``."""
    return load_catalog_text(yaml.safe_dump({
        "streams": {"S": {"schema": SCHEMA}, "P": {"schema": {"ts": "timestamp", "k": "int", "v": "double"},
                                                   "key": "k"}},
        "roles": ROLES, "users": users, "policies": POLICIES}))


LEVELS = load_catalog_text("""
lattice: {classes: {COI1: ["1", "2"], COI2: [A, B]}}
streams:
  Log: {schema: {ts: timestamp, sender: string}, level: {from: sender}}
users:
  hi: {clearance: "[1, T]"}
  hi2: {clearance: "[1, T]"}
  lo: {clearance: "[1, ⊥]"}
  other: {clearance: "[2, T]"}
""")

#: Pairs of users differing in exactly one thing secure() reads: (why, a, b).
PAIRS = [
    ("direct roles", {"roles": ["R"], "profile": {"w": "x"}}, {"roles": ["Q"], "profile": {"w": "x"}}),
    ("an inherited role", {"roles": ["R"], "profile": {"w": "x"}}, {"roles": ["Senior"], "profile": {"w": "x"}}),
    ("a role with no policy (a shield tests it)", {"roles": ["R"], "profile": {"w": "x"}},
     {"roles": ["R", "Extra"], "profile": {"w": "x"}}),
    ("a profile value", {"roles": ["R"], "profile": {"w": "x"}}, {"roles": ["R"], "profile": {"w": "y"}}),
    ("0.0 and -0.0 (equal in Python, not as text)", {"roles": ["R"], "profile": {"w": 0.0}},
     {"roles": ["R"], "profile": {"w": -0.0}}),
    ("1 and True (equal in Python)", {"roles": ["Q"], "profile": {"n": 1, "d": 0.5}},
     {"roles": ["Q"], "profile": {"n": True, "d": 0.5}}),
    ("1 and 1.0 (equal in Python)", {"roles": ["R"], "profile": {"w": 1}}, {"roles": ["R"], "profile": {"w": 1.0}}),
    ("one instant at two offsets (equal in Python)",
     {"roles": ["R"], "profile": {"w": datetime(2026, 1, 1, 10, tzinfo=PLUS_ONE)}},
     {"roles": ["R"], "profile": {"w": datetime(2026, 1, 1, 9, tzinfo=timezone.utc)}}),
    ("a missing value and a null one", {"roles": ["R"], "profile": {}}, {"roles": ["R"], "profile": {"w": None}}),
    ("a value and no value", {"roles": ["R"], "profile": {"w": "x"}}, {"roles": ["R"], "profile": {}}),
    ("a second attribute of one policy", {"roles": ["Q"], "profile": {"n": 3, "d": 0.5}},
     {"roles": ["Q"], "profile": {"n": 3, "d": 0.25}}),
]


def texts(rewriting: Rewriting) -> list[tuple[str, str]]:
    """What a rewriting runs: each deployed graph, written out."""
    return [(g.id, stable_text(g.root)) for g in rewriting.deployed]


def outcome(cat: Catalog, user: str, text: str, options: SecurityOptions | None = None) -> object:
    try:
        return texts(secure(cat, user, bound_query(text, cat), options))
    except StreamwardenError as exc:
        return str(exc)


@pytest.mark.parametrize(("why", "a", "b"), PAIRS, ids=[p[0] for p in PAIRS])
def test_users_differing_in_one_input_never_share_a_rewriting(why: str, a: dict[str, Any],
                                                              b: dict[str, Any]) -> None:
    cat = catalog({"a": a, "b": b})
    cache = SecureCache(cat)
    assert cache.user_key("a") != cache.user_key("b"), why
    for text in TEXTS:
        query = bound_query(text, cat)
        first = _cached(cache, "a", query)
        second = _cached(cache, "b", query)
        assert first is None or first is not second, (why, text)
        for user, got in (("a", first), ("b", second)):  # each her own, as secure() computes it for her alone
            assert (texts(got) if got is not None else None) == _fresh(cat, user, text), (why, text, user)
    queries = [RegisteredQuery(f"q{i}", ("a", "b"), text) for i, text in enumerate(TEXTS)]
    assert _pipelines(plan_network(cat, queries)) == _pipelines(_reference_plan(cat, queries)), why


def test_what_no_policy_reads_is_not_in_the_key_so_a_wards_users_share() -> None:
    cat = catalog({"ann": {"roles": ["R"], "profile": {"w": "x", "pager": 1}},
                   "bob": {"roles": ["R"], "profile": {"w": "x", "pager": 2, "nick": "B"}},
                   "cy": {"roles": ["R"], "profile": {"w": "y"}}})
    cache = SecureCache(cat)
    assert cache.attributes == ("d", "n", "w") and cache.user_key("ann") == cache.user_key("bob")
    query = bound_query(TEXTS[0], cat)
    assert cache.secure("bob", query) is cache.secure("ann", query) is not cache.secure("cy", query)
    plan = plan_network(cat, [RegisteredQuery("q", ("ann", "bob", "cy"), TEXTS[0]),
                              RegisteredQuery("r", ("bob",), TEXTS[0], owner="bob", opens=())])
    assert sorted((p.query.id, p.users) for p in plan.pipelines) == [("q", ("ann", "bob")), ("q", ("cy",)),
                                                                    ("r", ("bob",))]
    own = next(p for p in plan.pipelines if p.query.id == "r")  # another query of the same text: bob's class
    assert texts(own.rewriting) == texts(secure(cat, "bob", query))


def test_clearance_and_a_querys_level_are_in_the_key() -> None:
    cache = SecureCache(LEVELS)
    assert cache.user_key("hi") == cache.user_key("hi2") != cache.user_key("lo") != cache.user_key("other")
    query = bound_query("SELECT sender FROM Log", LEVELS)
    assert cache.secure("hi2", query) is cache.secure("hi", query)
    for user in ("hi", "lo", "other"):
        assert str(cache.secure(user, query).level) == str(LEVELS.clearance(user))
    low = SecurityOptions(level="[1, ⊥]")
    assert str(cache.secure("hi", query, low).level) == "[1, ⊥]" and cache.secure("hi", query).level != low.level
    # a refusal is never shared: each user is refused in her own words
    with pytest.raises(StreamwardenError, match="^lo is cleared"):
        cache.secure("lo", query, SecurityOptions(level="[1, T]"))
    with pytest.raises(StreamwardenError, match="^other is cleared"):
        cache.secure("other", query, SecurityOptions(level="[1, T]"))
    queries = [RegisteredQuery("all", ("hi", "hi2", "lo", "other"), "SELECT sender FROM Log", level="[1, ⊥]")]
    assert _pipelines(plan_network(LEVELS, queries)) == _pipelines(_reference_plan(LEVELS, queries))
    assert [d.user for d in plan_network(LEVELS, queries).denials] == ["other"]


def test_every_option_is_in_the_key() -> None:
    cat = catalog({"a": {"roles": ["R"], "profile": {"w": "x"}}})
    cache = SecureCache(cat)
    join = bound_query(TEXTS[4], cat)
    for options in (SecurityOptions(join_strategy="probe-and-filter"), SecurityOptions(placement="up"),
                    SecurityOptions(granted_streams=frozenset({"S"}))):
        assert texts(cache.secure("a", join, options)) == texts(secure(cat, "a", join, options))
        assert cache.secure("a", join, options) is not cache.secure("a", join)
    with pytest.raises(StreamwardenError, match="unknown user 'nobody'"):
        cache.secure("nobody", join)


VALUES = st.sampled_from(["x", "y", "0.0", "1", 0.0, -0.0, 1, 1.0, True, None, 3, 0.5,
                          datetime(2026, 1, 1, 10, tzinfo=PLUS_ONE), datetime(2026, 1, 1, 9, tzinfo=timezone.utc)])
USERS = st.dictionaries(
    st.sampled_from(["u1", "u2", "u3", "u4", "u5", "u6"]),
    st.fixed_dictionaries({"roles": st.lists(st.sampled_from(sorted(ROLES)), max_size=2, unique=True),
                           "profile": st.dictionaries(st.sampled_from(["w", "n", "d", "pager"]), VALUES, max_size=3)}),
    min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(users=USERS, data=st.data())
def test_plan_network_is_the_per_user_loop_it_replaced(users: dict[str, dict[str, Any]], data: st.DataObject) -> None:
    cat = catalog(users)
    names = sorted(users)
    queries = []
    for i, text in enumerate(TEXTS):
        listed = tuple(data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        queries.append(RegisteredQuery(f"shared{i}", listed, text))
        owner = data.draw(st.sampled_from(names))
        queries.append(RegisteredQuery(own_id(owner, f"q{i}"), (owner,), text, owner=owner, opens=()))
    got, want = plan_network(cat, queries), _reference_plan(cat, queries)
    assert _pipelines(got) == _pipelines(want)
    assert sorted(got.denials, key=_order) == sorted(want.denials, key=_order)
    for pipeline in got.pipelines:  # what runs is every member's own rewriting
        for user in pipeline.users:
            assert texts(pipeline.rewriting) == texts(secure(cat, user, bound_query(pipeline.query.query, cat)))


def test_the_fingerprint_is_the_first_versions() -> None:
    """It names checkpoints: the text it hashes is written out around the graphs now, and must
    stay the repr() of the tuple the first version hashed."""
    cat = catalog({"a": {"roles": ["R", "Q"], "profile": {"w": "x", "n": 1, "d": 0.5}}})
    for text in TEXTS:
        rewriting = secure(cat, "a", bound_query(text, cat))
        for query in (RegisteredQuery("q'1", ("a",), text), RegisteredQuery("u01a_q\"2", ("a",), text)):
            graphs = [(g.id, stable_text(g.root)) for g in rewriting.deployed]
            first = repr((query.id, str(rewriting.level), graphs, "0 seconds", bool(rewriting.on_result)))
            assert pipeline_fingerprint(query, rewriting, "0 seconds") == hashlib.sha256(first.encode()).hexdigest()
    level = secure(LEVELS, "hi", bound_query("SELECT sender FROM Log", LEVELS))
    query = RegisteredQuery("q", ("hi",), "SELECT sender FROM Log")
    first = repr(("q", "[1, T]", [(g.id, stable_text(g.root)) for g in level.deployed], "5 seconds", False))
    assert pipeline_fingerprint(query, level, "5 seconds") == hashlib.sha256(first.encode()).hexdigest()


def _first_stable_text(value: Any) -> str:
    """stable_text as first written (it names checkpoints: the faster one must write the same)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={_first_stable_text(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({fields})"
    if isinstance(value, (frozenset, set)):
        return "{" + ", ".join(sorted(_first_stable_text(v) for v in value)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_first_stable_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{_first_stable_text(k)}: {_first_stable_text(v)}"
                                      for k, v in value.items())) + "}"
    return repr(value)


LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4),
                   st.just(Source), st.just(-0.0))


@given(st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner), st.frozensets(st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=3), inner, max_size=3),
    st.builds(lambda a, b: E.Compare("=", E.Literal(a, "int"), E.Literal(b, "string")), inner, inner),
    st.builds(lambda a: E.Literal(a, "double"), inner)), max_leaves=12))
def test_stable_text_writes_what_it_first_wrote(value: Any) -> None:
    assert stable_text(value) == _first_stable_text(value)


def test_stable_text_writes_plans_as_it_first_did() -> None:
    cat = catalog({"a": {"roles": ["R", "Q", "Senior"], "profile": {"w": "x", "n": 1, "d": 0.5}}})
    for text in TEXTS:
        for graph in secure(cat, "a", bound_query(text, cat)).graphs:
            template = parameterize(graph.root)
            for value in (graph.root, template, template and (template.root, template.types, template.keys)):
                assert stable_text(value) == _first_stable_text(value)


def test_templates_are_memoized_by_identity_not_equality() -> None:
    """Literal(0.0) == Literal(-0.0): a memo by equality would give one graph the other's constant."""
    source = Source("S", "S", (("ts", "timestamp"), ("d", "double")))
    plus, minus = (Filter(source, E.Compare(">", E.Column("S", "d", "double"), E.Literal(z, "double")))
                   for z in (0.0, -0.0))
    assert plus == minus and hash(plus) == hash(minus)
    one, other = parameterize(plus), parameterize(minus)
    assert one is not None and other is not None and one is parameterize(plus)
    assert repr(one.values) == "(0.0,)" and repr(other.values) == "(-0.0,)"

    calls: list[object] = []

    @by_identity
    def seen(node: Filter) -> int:
        calls.append(node)
        return len(calls)

    first = seen(plus)
    assert seen(plus) == first and seen(minus) != first and len(calls) == 2
    del plus
    gc.collect()
    assert len(calls) == 2  # the entry went with its argument (no error, no stale hit)


def test_compiling_leaves_no_garbage_cycles() -> None:
    """The collector is paused during plan_network: that is safe because planning, placing and
    reducing to templates make no reference cycles (a closure calling itself is one)."""
    users = {f"u{i}": {"roles": ["R", "Q"] if i % 2 else ["Senior"], "profile": {"w": f"w{i % 3}", "n": i, "d": 0.5}}
             for i in range(12)}
    cat = catalog(users)
    queries = [RegisteredQuery(f"q{i}", tuple(users), text) for i, text in enumerate(TEXTS)]
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        plan = plan_network(cat, queries)
        places = [group_of(p.rewriting) for p in plan.pipelines]
        keys = [t.key for place in places if place is not None for _, t in place.graphs]
        assert plan.pipelines and keys
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()


def test_the_collector_pause_nests_and_restores() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before: off after
        gc.enable()
        with pytest.raises(ZeroDivisionError), collector_paused():
            raise ZeroDivisionError
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


# -- the store and the catalog at scale ----------------------------------------------------------
def test_open_owns_records_what_open_own_does_one_by_one(tmp_path: Path) -> None:
    cat = catalog({"ann": {"roles": ["R"]}, "bob": {"roles": ["R"]}})
    owned = [RegisteredQuery(own_id(u, f"q{i}"), (u,), TEXTS[i], owner=u, opens=()) for u in ("ann", "bob")
             for i in range(2)]
    made = []
    for bulk in (False, True):
        server = AuthorizationServer(sqlite_url(tmp_path / f"{bulk}" / "s.db"))
        server.register(owned, cat)
        if bulk:
            server.open_owns((q.id, q.owner) for q in owned if q.owner)
        else:
            for q in owned:
                assert q.owner is not None
                server.open_own(q.id, q.owner)
        live = server.changes()
        rids = {q.id: q.rid for q in server.registrations()}
        assert len(live) == 4 and [c.line for c in live] == [1, 2, 3, 4]
        made.append(([(c.query, c.user, c.grant, c.ts, c.scope) for c in live],
                     sorted(p.read_text() for p in server.sp_folder.iterdir())))
        assert all(rids[c.query] for c in live)
    assert made[0] == made[1]


def test_register_keeps_replaces_adds_and_claims_in_one_call(tmp_path: Path) -> None:
    """register() writes each kind of row in one statement now: the same outcome, row by row."""
    cat = catalog({"ann": {"roles": ["R"]}, "bob": {"roles": ["R"]}})
    server = AuthorizationServer(sqlite_url(tmp_path / "s.db"))
    server.grant("early", "bob", "2026-03-01T10:00:00Z")  # before anything is registered: claimable
    server.register([RegisteredQuery("same", ("ann",), TEXTS[0]), RegisteredQuery("other", ("ann",), TEXTS[0])],
                    cat)
    before = {q.id: q for q in server.registrations()}
    server.register([RegisteredQuery("same", ("ann", "bob"), TEXTS[0]),  # kept: its users replaced
                     RegisteredQuery("other", ("ann",), TEXTS[1]),  # another text: a new registration
                     RegisteredQuery("early", ("bob",), TEXTS[0]),  # new, and claims bob's early grant
                     RegisteredQuery(own_id("ann", "q1"), ("ann",), TEXTS[1], owner="ann", opens=())], cat)
    after = {q.id: q for q in server.registrations()}
    assert after["same"].rid == before["same"].rid and after["same"].users == ("ann", "bob")
    assert after["other"].rid != before["other"].rid and after["other"].query == TEXTS[1]
    assert after["other"].opens == after[own_id("ann", "q1")].opens == ()  # policies name S
    assert [(c.query, c.user, c.grant) for c in server.changes()] == [("early", "bob", True)]
    assert server.check("early", "bob") == [] and len(after) == 4


def test_taken_names_find_the_clash_a_pass_over_them_finds() -> None:
    names = ["ann", "Bob", "carl", "dora_1"]
    for kind in ("user", "query id", "role", "stream"):
        taken = Taken(names)
        for value in ("ann", "ANN", "bob", "Bob", "carl", "eve", "Dora_1", "x"):
            assert name_problem(kind, value, taken) == name_problem(kind, value, names), (kind, value)
    with pytest.raises(StreamwardenError, match="differs from 'ann' only in case"):
        check_names("user", ["ann", "bob", "Ann"])
    assert check_names("user", ["ann", "bob"]) == ["ann", "bob"]


def test_a_catalog_of_many_users_checks_its_names_in_one_pass() -> None:
    """Each user's name was compared with every earlier one (lower-cased): 10,000 users took
    50 million comparisons. Now a lookup each; the loader still refuses a repeat up to case."""
    many = {f"u{i:05d}": {"roles": ["R"], "profile": {"w": "x"}} for i in range(3_000)}
    assert len(catalog(many).users) == 3_000
    with pytest.raises(StreamwardenError, match="'u02999' differs from 'U02999' only in case"):
        catalog({**many, "U02999": {"roles": ["R"]}})


# -- the reference: the per-user loop plan_network replaced ---------------------------------------
def _reference_plan(cat: Catalog, queries: list[RegisteredQuery]) -> Any:
    """plan_network as it was: every query bound per query, secured per user, hashed per user."""
    from streamwarden.runtime.plan import NetworkPlan, Pipeline

    groups: dict[tuple[str, str], tuple[RegisteredQuery, Rewriting, list[str]]] = {}
    denials = []
    for q in queries:
        options = SecurityOptions(level=q.level, granted_streams=q.granted_streams(cat))
        try:
            bound = q.bind(cat)
        except StreamwardenError as exc:
            denials += [Denial(q.id, user, str(exc).splitlines()[0]) for user in q.users]
            continue
        for user in q.users:
            try:
                rewriting = secure(cat, user, bound, options)
            except StreamwardenError as exc:
                denials.append(Denial(q.id, user, str(exc).splitlines()[0]))
                continue
            if not rewriting.deployed:
                denials.append(Denial(q.id, user, "no role policy of yours authorizes any part of this query"))
                continue
            graphs = [(g.id, stable_text(g.root)) for g in rewriting.deployed]
            text = repr((q.id, str(rewriting.level), graphs, "0 seconds", bool(rewriting.on_result)))
            fingerprint = hashlib.sha256(text.encode()).hexdigest()
            groups.setdefault((q.id, fingerprint), (q, rewriting, []))[2].append(user)
    pipelines = tuple(Pipeline(q, r, tuple(users), f) for (_, f), (q, r, users) in sorted(groups.items()))
    return NetworkPlan(pipelines, tuple(denials), tuple(queries))


def _pipelines(plan: Any) -> list[tuple[str, tuple[str, ...], str, list[tuple[str, str]]]]:
    return [(p.query.id, p.users, p.fingerprint, texts(p.rewriting)) for p in plan.pipelines]


def _order(denial: Denial) -> tuple[str, str, str]:
    return denial.query, denial.user, denial.reason


def _cached(cache: SecureCache, user: str, query: Any) -> Rewriting | None:
    try:
        return cache.secure(user, query)
    except StreamwardenError:
        return None


def _fresh(cat: Catalog, user: str, text: str) -> list[tuple[str, str]] | None:
    got = outcome(cat, user, text)
    return got if isinstance(got, list) else None
