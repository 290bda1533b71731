"""Catalog loading: the contract's YAML, and one clear positioned error for bad input."""

from __future__ import annotations

import pytest

from streamwarden.catalog.loader import load_catalog, load_catalog_text
from streamwarden.catalog.store import CatalogStore
from streamwarden.errors import BindError, CatalogError, QuerySyntaxError

BASE = """streams:
  Position: {schema: {ts: timestamp, SID: int, Pos: double, Platoon: string}}
roles:
  Doctor: {}
  Cardiologist: {inherits: [Doctor]}
users:
  paul: {roles: [Doctor], profile: {Platoon: X}}
"""


def test_contract_catalog_loads(drill_catalog) -> None:
    assert set(drill_catalog.streams) == {"Position", "Health"}
    p2 = next(p for p in drill_catalog.policies if p.id == "p2")
    assert p2.privilege == "avg" and p2.window == (3600.0, 3600.0)
    assert str(p2.time[0]) == "start(a)"
    assert drill_catalog.actions["a"].target == 500.0 and drill_catalog.actions["a"].end is None


def test_role_inheritance_is_transitive() -> None:
    cat = load_catalog_text(BASE.replace("Doctor: {}", "Doctor: {inherits: [Staff]}\n  Staff: {}")
                            + "  cleo: {roles: [Cardiologist]}\n")
    assert cat.effective_roles("cleo") == {"Cardiologist", "Doctor", "Staff"}


@pytest.mark.parametrize(
    ("extra", "line", "message"),
    [
        ("policies:\n  - {id: p, subject: Nurse, streams: [Position], privilege: read}\n", 9, "unknown role 'Nurse'"),
        ("policies:\n  - {id: p, subject: Doctor, streams: [Pos], privilege: read}\n", 9, "unknown stream 'Pos'"),
        ("policies:\n  - {id: p, subject: Doctor, streams: [Position], privilege: write}\n", 9, "privilege must be"),
        ("policies:\n  - {id: p, subject: Doctor, streams: [Position], attributes: [Heart], privilege: read}\n", 9,
         "attribute 'Heart'"),
        ("policies:\n  - {id: p, subject: Doctor, streams: [Position], privilege: read, typo: 1}\n", 9,
         "unknown key 'typo'"),
        ("policies:\n  - {id: p, subject: Doctor, streams: [Position], privilege: read, time: [start(zz), end(zz)]}\n",
         9, "unknown action 'zz'"),
        ("policies:\n  - {id: p, streams: [Position], privilege: read}\n", 9, "missing 'subject'"),
        ("actions:\n  a: {start: yesterday}\n", 9, "not an ISO-8601 timestamp"),
    ],
)
def test_bad_catalog_names_line(extra: str, line: int, message: str) -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog_text(BASE + extra, "cat.yaml")
    assert info.value.line == line
    assert message in str(info.value)
    assert str(info.value).startswith(f"cat.yaml:{line}:")


def test_bad_policy_expression_points_into_the_file() -> None:
    text = BASE + ('policies:\n  - id: p\n    subject: Doctor\n    streams: [Position]\n    privilege: read\n'
                   '    where: "Pos >> 3"\n')
    with pytest.raises(QuerySyntaxError) as info:
        load_catalog_text(text, "cat.yaml")
    assert (info.value.line, info.value.column) == (13, 18)  # the second ">"
    text = BASE + 'policies:\n  - {id: p, subject: Doctor, streams: [Position], privilege: read, where: "Heart > 3"}\n'
    with pytest.raises(BindError, match="unknown attribute 'Heart'"):
        load_catalog_text(text, "cat.yaml")


def test_cycles_and_invalid_yaml_are_reported() -> None:
    with pytest.raises(CatalogError, match="cycle"):
        load_catalog_text("roles:\n  A: {inherits: [B]}\n  B: {inherits: [A]}\n")
    with pytest.raises(CatalogError, match="invalid YAML") as info:
        load_catalog_text("streams: [\n", "x.yaml")
    assert info.value.line is not None
    with pytest.raises(CatalogError, match="needs an event-time attribute"):
        load_catalog_text("streams:\n  S: {schema: {a: int}}\n")


def test_missing_file_is_an_error(tmp_path) -> None:
    with pytest.raises(CatalogError, match="cannot read catalog"):
        load_catalog(tmp_path / "nope.yaml")


def test_store_round_trip_and_live_actions(tmp_path, drill_catalog) -> None:
    store = CatalogStore(f"sqlite:///{tmp_path / 'store.db'}")
    store.save(drill_catalog)
    loaded = store.load()
    assert [p.id for p in loaded.policies] == [p.id for p in drill_catalog.policies]
    store.set_action("a", start=None)
    assert store.load().actions["a"].start is None
    store.set_action("a", target=7.0)
    assert store.actions()["a"].target == 7.0


def test_saving_again_can_keep_live_action_values(tmp_path, drill_catalog) -> None:
    store = CatalogStore(f"sqlite:///{tmp_path / 'store.db'}")
    store.save(drill_catalog)
    store.set_action("a", start=None)
    store.save(drill_catalog, keep_live_actions=True)
    assert store.actions()["a"].start is None  # the live value survives
    store.save(drill_catalog)
    assert store.actions()["a"].start is None  # a plain save keeps live values too (issue 11, class 7)
    store.save(drill_catalog, reset_actions=True)
    assert store.actions()["a"].start is not None  # only an explicit reset goes back to the file
