"""No path runs a protected stream unprotected (issue 12, "Structure").

Before: ``build_job`` decided from the graphs whether to read a punctuated stream through
its shield, and the public ``rewrite()`` returned bare sources for a punctuated or levelled
stream without role policies, so ``build_job(rewrite(...))`` ran it unsecured. Now the
engine runs only what ``secure()`` produced, checks every graph for its shields and level
guards, and its scan refuses a protected stream read bare.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ts, write_jsonl
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.engine.execute import build_job, read_relations
from streamwarden.errors import UnsupportedError
from streamwarden.plan.nodes import LevelGuard, Node, Shield, transform
from streamwarden.security.passes import secure
from streamwarden.security.rewrite.algorithm import rewrite

pytestmark = pytest.mark.spark

PUNCTUATED = load_catalog_text("""
streams:
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}, key: Patient_id, punctuated_by: Patient_id}
roles: {GP: {}}
users: {gina: {roles: [GP]}}
""")
LEVELLED = load_catalog_text("""
lattice: {classes: {COI1: ["1", "2"]}}
streams:
  Log: {schema: {ts: timestamp, sender: string}, level: {from: sender}}
users: {c1: {clearance: "[1]"}}
""")
QUERY = {"gina": "SELECT Patient_id, Beats_per_min FROM HeartRate", "c1": "SELECT sender FROM Log"}


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    write_jsonl(tmp_path / "hr.jsonl", [{"ts": ts(1), "Patient_id": 1, "Beats_per_min": 70, "sp_ts": ts(0),
                                         "sp_csn": 1}])
    write_jsonl(tmp_path / "log.jsonl", [{"ts": ts(1), "sender": "1"}])
    return {"HeartRate": str(tmp_path / "hr.jsonl"), "Log": str(tmp_path / "log.jsonl")}


@pytest.mark.parametrize("catalog, user", [(PUNCTUATED, "gina"), (LEVELLED, "c1")])
def test_a_bare_rewrite_is_refused_by_the_engine(spark, inputs, catalog, user) -> None:
    bare = rewrite(catalog, user, QUERY[user])
    assert bare.deployed  # the rewriting itself authorizes something: the engine must still refuse it
    with pytest.raises(UnsupportedError, match="runs only secured rewritings"):
        build_job(spark, catalog, bare, inputs, streaming=False)


def strip(node: Node) -> Node | None:
    return node.child if isinstance(node, (Shield, LevelGuard)) else None  # type: ignore[attr-defined]


@pytest.mark.parametrize("catalog, user, message", [
    (PUNCTUATED, "gina", "without its Security Shield"), (LEVELLED, "c1", "without a level guard")])
def test_a_secured_rewriting_whose_protection_was_removed_is_refused(spark, inputs, catalog, user, message) -> None:
    secured = secure(catalog, user, QUERY[user])
    tampered = replace(secured, graphs=tuple(replace(g, root=transform(g.root, strip)) for g in secured.graphs))
    with pytest.raises(UnsupportedError, match=message):
        build_job(spark, catalog, tampered, inputs, streaming=False)


@pytest.mark.parametrize("catalog, user, message", [
    (PUNCTUATED, "gina", "read only through its Security Shield"), (LEVELLED, "c1", "through its level guard")])
def test_the_scan_refuses_a_protected_stream_read_bare(spark, inputs, catalog, user, message) -> None:
    with pytest.raises(UnsupportedError, match=message):
        read_relations(spark, catalog, rewrite(catalog, user, QUERY[user]).plan,
                       {k: v for k, v in inputs.items() if k in catalog.streams}, streaming=False)
