"""Query templates (plan.templates): which secured graphs share one plan, and their constants."""

from __future__ import annotations

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import Aggregate, walk
from streamwarden.plan.templates import lift_keys, parameterize
from streamwarden.security.passes import secure

CATALOG = load_catalog_text("""
streams:
  R: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}
  V: {schema: {ts: timestamp, sensor: int, pulse: int}}
roles: {Reader: {}, Auditor: {}, Viewer: {}}
users:
  ann: {roles: [Reader], profile: {ward: w1}}
  bob: {roles: [Reader], profile: {ward: w2}}
  cid: {roles: [Reader, Auditor], profile: {ward: w1}}
  eve: {roles: [Viewer]}
policies:
  - {id: by_ward, subject: Reader, streams: [R], privilege: read, where: "ward = self.ward"}
  - {id: pulses, subject: Reader, streams: [V], privilege: read}
  - {id: audit, subject: Auditor, streams: [R], attributes: [ts, sensor], privilege: read, where: "value < 10"}
  - {id: no_ward, subject: Viewer, streams: [R], attributes: [ts, sensor, value], privilege: read}
  - {id: every_ward, subject: Viewer, streams: [V], privilege: read}
""")


def template(user: str, query: str):  # type: ignore[no-untyped-def]
    graphs = secure(CATALOG, user, query).deployed
    assert len(graphs) == 1
    return parameterize(graphs[0].root)


def test_users_of_one_policy_and_one_query_shape_share_a_template_with_their_own_constants() -> None:
    ann = template("ann", "SELECT sensor, value FROM R WHERE value > 40")
    bob = template("bob", "SELECT sensor, value FROM R AS r WHERE r.value > 7")  # an alias, another constant
    assert ann.key == bob.key
    assert sorted(map(str, ann.values)) == ["40", "w1"] and sorted(map(str, bob.values)) == ["7", "w2"]
    assert [ann.types[i] for _, i in ann.keys] == ["string"]  # ward = ?k: a hash key, the constant per user
    assert [attribute for attribute, _ in ann.keys] == ["ward"]


def test_different_shapes_roles_or_outputs_do_not_share() -> None:
    base = template("ann", "SELECT sensor, value FROM R WHERE value > 40")
    assert template("ann", "SELECT sensor FROM R WHERE value > 40").key != base.key  # another projection
    assert template("ann", "SELECT sensor, value FROM R WHERE value < 40").key != base.key  # another operator
    assert template("cid", "SELECT sensor, value FROM R WHERE value > 40").key != base.key  # two views merged


def test_two_merged_views_have_no_key_a_row_passes_when_either_holds() -> None:
    cid = template("cid", "SELECT sensor, value FROM R WHERE value > 40")
    assert cid.keys == ()  # ward = ?k is not necessary: the audit view alone lets a row through


def test_joins_and_count_windows_are_not_templates() -> None:
    for query in ("SELECT r.sensor FROM R AS r [RANGE 1 minute], V AS v [RANGE 1 minute] WHERE r.sensor = v.sensor",
                  "SELECT AVG(value) AS a FROM R [ROWS 5]"):
        for graph in secure(CATALOG, "ann", query).deployed:
            assert parameterize(graph.root) is None, query


def test_an_aggregate_over_a_range_window_is_a_stateful_template_whose_keys_lift_into_its_grouping() -> None:
    ann = template("ann", "SELECT AVG(value) AS a FROM R [RANGE 1 minute]")
    bob = template("bob", "SELECT AVG(value) AS a FROM R [RANGE 1 minute]")
    assert ann.stateful and ann.key == bob.key and ann.values == ("w1",) and bob.values == ("w2",)
    assert template("ann", "SELECT AVG(value) AS a FROM R [RANGE 2 minutes]").key != ann.key  # another window
    lifted = lift_keys(ann)
    assert isinstance(lifted, Aggregate)
    assert not any(isinstance(e, E.Param) for n in walk(lifted) for x in n.expressions() for e in E.walk(x))


def test_a_constant_outside_the_keys_stays_a_parameter_so_the_keys_do_not_lift() -> None:
    ann = template("ann", "SELECT AVG(value) AS a FROM R [RANGE 1 minute] WHERE value > 4")
    assert ann is None or lift_keys(ann) is None  # value > ?1 is each member's own: no shared state per key


def test_a_key_on_an_attribute_the_view_hides_finds_members_but_never_lifts_into_a_grouping() -> None:
    """Issue 34's leak: eve's view hides ward, so her WHERE ward = 'w1' sees NULL and selects
    nothing; grouped by the stream's ward, a shared aggregate would hand her w1's counts."""
    eve = template("eve", "SELECT COUNT(*) AS n, AVG(value) AS a FROM R [RANGE 1 minute] WHERE ward = 'w1'")
    assert [a for a, _ in eve.keys] == ["ward"]  # still a hash key: a hidden ward is NULL, and NULL meets no member
    assert eve.raw_keys == ()
    assert lift_keys(eve) is None
    seen = template("eve", "SELECT COUNT(*) AS n FROM V [RANGE 1 minute] WHERE sensor = 3")  # nothing hidden
    assert seen.raw_keys == seen.keys and [a for a, _ in seen.keys] == ["sensor"] and lift_keys(seen) is not None


def test_a_policy_condition_reads_the_tuple_before_its_view_hides_anything_so_its_key_lifts() -> None:
    ann = template("ann", "SELECT AVG(value) AS a FROM R [RANGE 1 minute]")  # ward = self.ward, ward granted
    assert ann.raw_keys == ann.keys and [a for a, _ in ann.keys] == ["ward"]
