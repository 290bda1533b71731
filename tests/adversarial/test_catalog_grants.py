"""Issue 11, class 3: catalog loading must never widen a grant.

Attacks (each test names one): a stream-qualified attribute (``Health.Platoon``) that
used to lose its qualifier and be granted on every stream of the policy with that name;
a qualified name whose stream is not the policy's, or whose attribute is not on its
stream, that used to be accepted; and a null profile value (``Platoon: null`` or ``~``)
that used to be substituted as the text 'None', so that tuples whose attribute held
'None' matched ``Position.Platoon = self.Platoon``.
"""

from __future__ import annotations

import pytest

from conftest import ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.errors import CatalogError
from streamwarden.plan.nodes import SecureView, render_tree, walk
from streamwarden.security.passes import secure
from streamwarden.security.rewrite.instantiate import granted_attributes, instantiate

STREAMS = """
streams:
  Position: {schema: {ts: timestamp, SID: int, Pos: double, Platoon: string}}
  Health:   {schema: {ts: timestamp, SID: int, Platoon: string, Heart: int, BPressure: int}}
roles: {Doctor: {}}
users:
  paul: {roles: [Doctor], profile: {Platoon: X}}
"""


def catalog_with(policy: str, users: str = "", name: str = "cat.yaml"):  # type: ignore[no-untyped-def]
    return load_catalog_text(STREAMS + users + "policies:\n" + policy, name)


def view_attributes(rewriting) -> set:  # type: ignore[no-untyped-def]
    """Every (relation, attribute) some secure view of the rewriting grants (None: all)."""
    granted: set = set()
    for graph in rewriting.graphs:
        for node in walk(graph.root):
            if isinstance(node, SecureView):
                for view in node.views:
                    granted |= view.attributes if view.attributes is not None else {("*", "*")}
    return granted


def test_qualified_attribute_grants_only_that_streams_attribute() -> None:
    """Attack: `attributes: [Position.Platoon, ...]` on a join policy over Position and Health
    was read as the bare `Platoon`, granting Health.Platoon too. Now exactly Position's."""
    cat = catalog_with("  - {id: j, subject: Doctor, streams: [Position, Health], privilege: read,\n"
                       "     attributes: [Position.Platoon, Health.BPressure, SID],\n"
                       "     where: \"Position.SID = Health.SID\"}\n")
    (policy,) = cat.policies
    assert granted_attributes(policy, "Position", cat.streams) == {"Platoon", "SID"}
    assert granted_attributes(policy, "Health", cat.streams) == {"BPressure", "SID"}  # bare SID: both streams
    view = instantiate(policy, cat.users["paul"], {"Position": "P", "Health": "H"}, cat.streams)
    assert view.attributes == {("P", "Platoon"), ("P", "SID"), ("H", "BPressure"), ("H", "SID")}
    r = secure(cat, "paul", "SELECT Health.Platoon, Position.Platoon AS pp FROM Position, Health "
                            "WHERE Position.SID = Health.SID")
    granted = view_attributes(r)
    assert ("Health", "Platoon") not in granted and ("Position", "Platoon") in granted


def test_qualified_and_bare_names_agree_on_a_single_stream() -> None:
    """Attack variant: a qualified name on a one-stream policy grants what the bare name does, no more."""
    qualified = catalog_with("  - {id: r, subject: Doctor, streams: [Position], privilege: read, "
                             "attributes: [Position.Pos, position.SID]}\n")
    bare = catalog_with("  - {id: r, subject: Doctor, streams: [Position], privilege: read, attributes: [Pos, SID]}\n")
    assert qualified.policies[0].attributes == ("Position.Pos", "Position.SID")  # canonical stream name kept
    q = secure(qualified, "paul", "SELECT * FROM Position")
    b = secure(bare, "paul", "SELECT * FROM Position")
    assert view_attributes(q) == view_attributes(b) == {("Position", "Pos"), ("Position", "SID")}


@pytest.mark.parametrize(
    ("streams", "attribute", "message"),
    [
        ("[Position]", "Health.Heart", "names stream 'Health', which is not one of the policy's streams"),
        ("[Position, Health]", "Position.Heart", "stream Position has no attribute 'Heart'"),
        ("[Position, Health]", "Nowhere.SID", "names stream 'Nowhere'"),
        ("[Position]", "Position.Nope", "stream Position has no attribute 'Nope'"),
    ],
)
def test_qualified_name_that_does_not_exist_is_an_error_at_its_position(streams: str, attribute: str,
                                                                         message: str) -> None:
    """Attack: a qualified name whose stream is not the policy's, or whose attribute its stream
    lacks (though another stream has it), was accepted as the bare name. Now a CatalogError
    naming file:line:col of that very entry."""
    policy = f"  - {{id: q, subject: Doctor, streams: {streams}, privilege: read, attributes: [Pos, {attribute}]}}\n"
    with pytest.raises(CatalogError) as info:
        catalog_with(policy)
    error = info.value
    assert message in str(error)
    line = (STREAMS + "policies:\n").count("\n") + 1
    column = policy.index(attribute) + 1
    assert (error.line, error.column) == (line, column)
    assert str(error).startswith(f"cat.yaml:{line}:{column}: ")


NULL_PROFILES = """users:
  paul: {roles: [Doctor], profile: {Platoon: X}}
  nul: {roles: [Doctor], profile: {Platoon: null}}
  tilde: {roles: [Doctor], profile: {Platoon: ~}}
  empty: {roles: [Doctor], profile: {Platoon: }}
  missing: {roles: [Doctor]}
"""
BASELINE = ("  - {id: p0, subject: Doctor, streams: [Position], attributes: [SID], privilege: read, "
            "where: \"Position.Pos > 1000\"}\n")
PROFILE_POLICIES = (
    "  - {id: p1, subject: Doctor, streams: [Position], attributes: [Pos, SID, Platoon], privilege: read,\n"
    "     where: \"Position.Platoon = self.Platoon\"}\n"
    "  - {id: p2, subject: Doctor, streams: [Position], attributes: [Pos], privilege: avg,\n"
    "     where: \"Position.Platoon <> self.Platoon OR self.Platoon IS NULL\"}\n"
    "  - {id: p3, subject: Doctor, streams: [Health, Position], attributes: '*', privilege: read,\n"
    "     where: \"Position.SID = Health.SID AND Health.Platoon = self.Platoon\"}\n"
)
QUERIES = [
    "SELECT SID, Pos, Platoon FROM Position",
    "SELECT AVG(Pos) FROM Position [RANGE 1 hour]",
    "SELECT Health.SID, Heart FROM Position [RANGE 1 min], Health [RANGE 1 min] WHERE Position.SID = Health.SID",
]


def shape(rewriting) -> list:  # type: ignore[no-untyped-def]
    return [(g.kind, g.policies, g.deployed, render_tree(g.root)) for g in rewriting.graphs]


@pytest.mark.parametrize("user", ["nul", "tilde", "empty", "missing"])
@pytest.mark.parametrize("query", QUERIES)
def test_null_profile_value_makes_the_policy_not_apply(user: str, query: str) -> None:
    """Attack: a profile value that is YAML null (`null`, `~`, nothing) was substituted as the
    text 'None' and matched tuples holding 'None'. Now every policy that uses it does not
    apply (with the reason), exactly as if the catalog did not have it."""
    with_policies = load_catalog_text(STREAMS.split("users:")[0] + NULL_PROFILES + "policies:\n" + BASELINE
                                      + PROFILE_POLICIES)
    without = load_catalog_text(STREAMS.split("users:")[0] + NULL_PROFILES + "policies:\n" + BASELINE)
    r = secure(with_policies, user, query)
    assert shape(r) == shape(secure(without, user, query))
    refused = {d.policy_id: d.reason for d in r.decisions if not d.applied and "profile attribute" in d.reason}
    assert refused, r.decisions
    assert all("Platoon" in reason and ("null" in reason or "has no" in reason) for reason in refused.values())
    for graph in r.graphs:  # and no literal 'None' anywhere in what runs
        assert "'None'" not in render_tree(graph.root)


@pytest.mark.spark
def test_null_profile_value_gets_no_rows_on_spark(spark, tmp_path) -> None:
    """Attack, end to end: tuples whose Platoon is the text 'None' (and NULL) are not delivered
    to a user whose profile Platoon is null, by a replay on Spark: the rows equal those of a
    catalog without the profile policies."""
    position = write_jsonl(tmp_path / "Position.jsonl", [
        {"ts": ts(0), "SID": 1, "Pos": 100.0, "Platoon": "None"},
        {"ts": ts(1), "SID": 2, "Pos": 2000.0, "Platoon": "None"},
        {"ts": ts(2), "SID": 3, "Pos": 300.0, "Platoon": None},
        {"ts": ts(3), "SID": 4, "Pos": 400.0, "Platoon": "X"},
    ])
    head = STREAMS.split("users:")[0] + NULL_PROFILES + "policies:\n" + BASELINE
    query = "SELECT SID, Pos, Platoon FROM Position"
    inputs = {"Position": str(position)}
    rows = api.replay(load_catalog_text(head + PROFILE_POLICIES), "nul", query, inputs, spark=spark)
    baseline = api.replay(load_catalog_text(head), "nul", query, inputs, spark=spark)
    assert rows == baseline
    assert [(r["SID"], r["Pos"], r["_policies"]) for r in rows] == [(2, None, ["p0"])]  # p0 alone: SID only
    paul = api.replay(load_catalog_text(head + PROFILE_POLICIES), "paul", query, inputs, spark=spark)
    assert {r["SID"] for r in paul} == {2, 4}  # a real profile value still works


@pytest.mark.spark
def test_qualified_grant_masks_the_other_streams_attribute_on_spark(spark, tmp_path) -> None:
    """Attack, end to end: the join policy grants Position.Platoon only; a join query asking
    for Health.Platoon gets NULL there (it used to get the value), Position.Platoon intact."""
    cat = catalog_with("  - {id: j, subject: Doctor, streams: [Position, Health], privilege: read,\n"
                       "     attributes: [Position.Platoon, SID], where: \"Position.SID = Health.SID\"}\n")
    inputs = {
        "Position": str(write_jsonl(tmp_path / "Position.jsonl",
                                    [{"ts": ts(0), "SID": 1, "Pos": 1.0, "Platoon": "X"}])),
        "Health": str(write_jsonl(tmp_path / "Health.jsonl",
                                  [{"ts": ts(1), "SID": 1, "Platoon": "secret", "Heart": 70, "BPressure": 120}])),
    }
    rows = api.replay(cat, "paul", "SELECT Health.Platoon AS hp, Position.Platoon AS pp FROM Position [RANGE 1 min], "
                                   "Health [RANGE 1 min] WHERE Position.SID = Health.SID", inputs, spark=spark)
    assert [(r["hp"], r["pp"]) for r in rows] == [(None, "X")]
