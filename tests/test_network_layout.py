"""``explain --network`` shows what runs (issue 25): the groups, their templates and members
(with their constants), and the pipelines that keep a Spark query of their own, with why."""

from __future__ import annotations

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery, own_id
from streamwarden.runtime.layout import network_layout
from streamwarden.runtime.plan import plan_network

USERS = {f"u{i}": f"w{i % 2}" for i in range(4)}
CATALOG = load_catalog_text(
    "streams:\n  Readings: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}\n"
    "roles: {Reader: {}}\n"
    "users:\n" + "".join(f"  {u}: {{roles: [Reader], profile: {{ward: {w}}}}}\n" for u, w in USERS.items())
    + "policies:\n"
    "  - {id: by_ward, subject: Reader, streams: [Readings], privilege: read, where: \"ward = self.ward\"}\n")


def own(user: str, text: str, name: str = "q1") -> RegisteredQuery:
    return RegisteredQuery(own_id(user, name), (user,), text, owner=user, opens=())


def test_selections_share_a_tuple_group_averages_an_aggregate_group_and_the_rest_says_why() -> None:
    queries = [own(u, f"SELECT sensor, value FROM Readings WHERE value > {10 * i}") for i, u in enumerate(USERS)]
    queries += [own(u, "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]", "q2") for u in USERS]
    queries += [own("u0", "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute] WHERE value > 5", "q3")]
    layout = network_layout(plan_network(CATALOG, queries))
    runs = layout.json()
    kinds = sorted((g["kind"], sum(len(t["members"]) for t in g["templates"])) for g in runs["groups"])
    assert kinds == [("aggregate", 4), ("tuple", 4)] and runs["spark_queries"] == 3
    (alone,) = runs["own"]
    assert alone["users"] == ["u0"] and "constant of its own beside the keys" in alone["why"]
    tuple_group = next(g for g in runs["groups"] if g["kind"] == "tuple")
    (template,) = tuple_group["templates"]  # one plan, four members looked up by their ward
    assert [k["attribute"] for k in template["keys"]] == ["ward"] and "?" in template["plan"]
    constants = {m["users"][0]: m["constants"] for m in template["members"]}  # each member's own, in one table
    assert constants == {u: [f"'{w}'", str(10 * i)] for i, (u, w) in enumerate(USERS.items())}
    text = layout.text()
    assert text.startswith("What runs: 3 Spark queries for 9 pipelines of 9 queries.")
    assert "aggregate group over stream Readings" in text and "(looked up by ward = ?" in text
