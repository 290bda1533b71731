"""The range index of a template with many members (engine/shared._ranked): a tuple meets only
the members whose constant it may pass. The oracle is the same template without the index
(every tuple meets every member of its key, and the template's predicate decides): the rows
must be the same multiset, whatever the values — NULL, NaN, ±infinity, -0.0 beside 0.0,
constants equal to a value or to each other, an int constant against a double column, the
comparison written either way round."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine import shared
from streamwarden.engine.shared import Member, shared_input, template_rows
from streamwarden.plan.templates import Template, parameterize
from streamwarden.security.passes import secure
from test_reuse import CATALOG  # R (ts, sensor, ward, value) under `ward = self.ward`

pytestmark = pytest.mark.spark

QUERIES = {  # constant 0 stands for each member's own
    "value > c": "SELECT sensor, value FROM R WHERE value > 0.5",
    "value <= c": "SELECT sensor, value FROM R WHERE value <= 0.5",
    "c < value": "SELECT sensor, value FROM R WHERE 0.5 < value",
    "value >= int": "SELECT sensor, value FROM R WHERE value >= 1",
    "sensor < int": "SELECT sensor FROM R WHERE sensor < 1",
}
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.0, 2.5]


def template(name: str) -> Template:
    t = parameterize(secure(CATALOG, "ann", QUERIES[name]).deployed[0].root)
    assert t is not None and t.bounds, name  # the index applies
    return t


def members(t: Template, constants: list[Any]) -> list[Member]:
    """One member per constant, in ward w1 or w2 (the key), each its own graph."""
    ranged = t.bounds[0][2]
    out = []
    for i, c in enumerate(constants):
        values = tuple(c if k == ranged else ("w1", "w2")[i % 2] if t.types[k] == "string" else v
                       for k, v in enumerate(t.values))
        out.append(Member(i, f"g{i}", values))
    return out


def rows(spark, t: Template, batch, ms: list[Member], indexed: bool, monkeypatch) -> Counter:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(shared, "INDEXED_FROM", 1 if indexed else 10**9)
    monkeypatch.setattr(shared, "BUCKET_MEMBERS", 2)
    return Counter(tuple(r) for r in template_rows(batch, t, ms).collect())


def batch_of(spark, folder: Path, readings: list[tuple[Any, Any, Any]]):  # type: ignore[no-untyped-def]
    folder.mkdir(parents=True)
    lines = [json.dumps({"ts": f"2026-03-01T10:00:{i % 60:02d}Z", "sensor": s, "ward": w, "value": v})
             for i, (s, w, v) in enumerate(readings)]
    (folder / "r.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return shared_input(spark, CATALOG, template("value > c"), folder, tag="test", streaming=False)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_the_index_gives_what_every_member_meeting_every_tuple_gives(spark, tmp_path, monkeypatch, name) -> None:
    t = template(name)
    ints = t.types[t.bounds[0][2]] == "int"
    constants = [-3, 0, 0, 1, 2, 2, 5, 9] if ints else SPECIAL + [0.5, 0.5, 3.0, -1.0]
    readings = [(s, w, v) for s in (None, -5, 0, 1, 2, 3, 10) for w, v in
                (("w1", None), ("w2", float("nan")), ("w1", -0.0), ("w2", 0.0), ("w1", 2.5), ("w2", float("inf")),
                 ("w1", float("-inf")), ("w2", 0.5), ("w1", 1.0))]
    batch = batch_of(spark, tmp_path / "b", readings)
    ms = members(t, constants)
    indexed = rows(spark, t, batch, ms, True, monkeypatch)
    assert indexed == rows(spark, t, batch, ms, False, monkeypatch)
    assert sum(indexed.values()) > 0  # the test means something


@settings(max_examples=6, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SPECIAL), st.floats(-5, 5)), min_size=1, max_size=40),
       st.lists(st.tuples(st.sampled_from(["w1", "w2"]), st.one_of(st.none(), st.sampled_from(SPECIAL),
                                                                    st.floats(-5, 5))), max_size=30),
       st.sampled_from(["value > c", "value <= c", "c < value"]))
def test_random_constants_and_values_match_the_unindexed_plan(spark, tmp_path_factory, constants, cells,
                                                            name) -> None:  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as monkeypatch:
        t = template(name)
        batch = batch_of(spark, tmp_path_factory.mktemp("ix") / "b", [(1, w, v) for w, v in cells])
        ms = members(t, constants)
        assert rows(spark, t, batch, ms, True, monkeypatch) == rows(spark, t, batch, ms, False, monkeypatch)
