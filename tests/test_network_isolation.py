"""One tenant cannot stop the network, and a crash never breaks anyone's cursors (issue 24).

* A query the engine cannot run (an aggregate without a window, registered past the
  service's check, e.g. by ``network register``) fails alone: every other pipeline starts and
  delivers, its users' status says why, and the network starts again after a restart.
* The service asks the runtime first: :meth:`NetworkRuntime.runnable_problem` compiles a
  registration exactly as the network would and asks Spark's own checker of streaming plans.
* A micro-batch Spark replays after a crash delivers what its first attempt did, even when
  access changed in between: the terminal switch records its decision before it writes.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery, load_queries_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.engine.compiler import EVENT
from streamwarden.runtime.deliveries import deliveries, read_rows
from streamwarden.runtime.network import NetworkRuntime, _TerminalSwitch, read_status, read_user_rows

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("streams:\n  S: {schema: {ts: timestamp, a: int}}\nusers: {ann: {}, bob: {}}\n")
QUERIES = load_queries_text("""
queries:
  - {id: good, users: [ann], query: "SELECT a FROM S WHERE a > 1"}
  - {id: bad, users: [ann, bob], query: "SELECT COUNT(*) AS n FROM S"}
""", CATALOG)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def write_input(folder: Path, values: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"ts": (T0 + timedelta(seconds=v)).strftime("%Y-%m-%dT%H:%M:%SZ"), "a": v}) for v in values]
    (folder / f"part-{values.start}.jsonl").write_text("\n".join(lines) + "\n")


def network(spark, tmp_path: Path, store: str) -> NetworkRuntime:  # type: ignore[no-untyped-def]
    return NetworkRuntime(spark, store, {"S": str(tmp_path / "in" / "S")}, tmp_path / "out", tmp_path / "cp")


def test_an_unrunnable_query_fails_alone_and_says_why(spark, tmp_path) -> None:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register(QUERIES, CATALOG)  # as `network register` would: bound, not compiled
    for query, user in (("good", "ann"), ("bad", "ann"), ("bad", "bob")):
        server.grant(query, user, T0)
    write_input(tmp_path / "in" / "S", range(0, 6))
    for _attempt in range(2):  # and again after a restart: the network starts whatever one query does
        rt = network(spark, tmp_path, store).start(available_now=True)
        try:
            rt.await_termination()
        finally:
            rt.stop()
        assert [r["a"] for r in read_user_rows(spark, tmp_path / "out", "ann", "good")] == [2, 3, 4, 5]
        failed = rt.failures()
        assert [name.split("-")[0] for name in failed] == ["bad"], failed
        assert "aggregation needs a [RANGE" in next(iter(failed.values()))
        for user in ("ann", "bob"):
            status = read_status(tmp_path / "out", user, "bad")
            assert status["receiving"] is False
            assert status["reason"].startswith("the network cannot run this query: aggregation needs"), status
        assert read_status(tmp_path / "out", "ann", "good")["receiving"] is True


def test_runnable_problem_compiles_as_the_network_would(spark, tmp_path) -> None:
    store = sqlite_url(tmp_path / "store.db")
    AuthorizationServer(store).register([], CATALOG)
    rt = network(spark, tmp_path, store)
    assert rt.runnable_problem(QUERIES[0], CATALOG) is None
    problem = rt.runnable_problem(QUERIES[1], CATALOG)
    assert problem is not None and "aggregation needs a [RANGE" in problem and "\n" not in problem
    assert rt.running == {} and not (tmp_path / "out").exists()  # nothing started, nothing written


def test_a_replayed_micro_batch_delivers_what_its_first_attempt_did(spark, tmp_path) -> None:
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    shared = RegisteredQuery("q1", ("ann", "bob"), "SELECT a FROM S")
    server.register([shared], CATALOG)
    rt = network(spark, tmp_path, store)
    rt.poll(force=True)  # planned; no grant yet, so nothing starts
    running = next(iter(rt.running.values()))
    switch = _TerminalSwitch(rt, running)
    batch = spark.createDataFrame([(T0 + timedelta(minutes=m), json.dumps({"a": m})) for m in range(10)],
                                  f"{EVENT} timestamp, _row string")
    server.grant("q1", "ann", T0)
    switch(batch, 7)  # the first attempt: ann receives ten rows, logged ...
    ann = tmp_path / "out" / "ann" / "q1"
    assert [d.rows for d in deliveries(ann)] == [10]
    # ... and the process dies before Spark commits batch 7. Access changes meanwhile:
    server.revoke("q1", "ann", T0 + timedelta(minutes=3))
    server.grant("q1", "bob", T0)
    switch(batch, 7)  # Spark runs batch 7 again, with the same input
    assert [d.rows for d in deliveries(ann)] == [10]
    page = read_rows(ann, after=0, limit=100)
    assert len(page.lines) == 10 and page.next == 10  # the cursors still mean the same rows
    assert deliveries(tmp_path / "out" / "bob" / "q1") == []  # bob's grant came after batch 7 was decided
    switch(batch, 8)  # the next batch follows the changes
    assert [d.rows for d in deliveries(ann)] == [10, 3]
    assert [d.rows for d in deliveries(tmp_path / "out" / "bob" / "q1")] == [10]
    assert sorted(p.name for p in (running.checkpoint / "decisions").iterdir()) == ["8.json"]


def test_a_users_folders_do_not_count_the_micro_batches_she_received_nothing_of(spark, tmp_path) -> None:
    """Spark numbers every micro-batch, also those whose tuples the policies removed: folders
    named by Spark's batch ids would count, in their gaps, arrivals she may not see."""
    names = []
    for case, batch_ids in (("hidden", (1, 2, 3)), ("none", (1, 2))):
        store = sqlite_url(tmp_path / case / "store.db")
        server = AuthorizationServer(store)
        server.register([RegisteredQuery("q1", ("ann",), "SELECT a FROM S")], CATALOG)
        server.grant("q1", "ann", T0)
        rt = network(spark, tmp_path / case, store)
        rt.poll(force=True)
        rt.stop()
        switch = _TerminalSwitch(rt, next(iter(rt.running.values())))
        rows = spark.createDataFrame([(T0, json.dumps({"a": 1}))], f"{EVENT} timestamp, _row string")
        nothing = rows.limit(0)  # a micro-batch of hidden tuples only: the secure view emitted nothing
        batches = [rows, nothing, rows] if case == "hidden" else [rows, rows]
        for batch_id, batch in zip(batch_ids, batches):
            switch(batch, batch_id)
        names.append(sorted(p.name.split("-")[-1] for p in (tmp_path / case / "out" / "ann" / "q1").glob("batch=*")))
    assert names[0] == names[1] == ["000000000000000", "000000000000001"]  # her cursor: 0 rows before, then 1


def test_a_batch_an_earlier_version_delivered_is_not_delivered_again_after_an_upgrade(spark, tmp_path) -> None:
    """An earlier version numbered a user's batches by a sequence in the checkpoint and logged no
    micro-batch id. It delivered micro-batch 5 and died before Spark committed it; the upgraded
    network runs batch 5 again. She must not get its rows twice; batch 6 is hers as usual."""
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register([RegisteredQuery("q1", ("ann",), "SELECT a FROM S")], CATALOG)
    server.grant("q1", "ann", T0)
    rt = network(spark, tmp_path, store)
    rt.poll(force=True)
    rt.stop()
    running = next(iter(rt.running.values()))
    switch = _TerminalSwitch(rt, running)
    rows = spark.createDataFrame([(T0, json.dumps({"a": 1})), (T0, json.dumps({"a": 2}))],
                                 f"{EVENT} timestamp, _row string")
    ann = tmp_path / "out" / "ann" / "q1"
    old = f"batch={running.pipeline.fingerprint[:12]}-0000000003"  # what the earlier version wrote
    (ann / old).mkdir(parents=True)
    (ann / old / "part-00000.txt").write_text('{"a":1}\n{"a":2}\n', encoding="utf-8")
    (ann / "_delivered.jsonl").write_text(json.dumps({"batch": old, "rows": 2}) + "\n", encoding="utf-8")
    (running.checkpoint / "numbers").mkdir(parents=True, exist_ok=True)
    (running.checkpoint / "numbers" / "ann.json").write_text('{"batch": 5, "number": 3}\n', encoding="utf-8")
    switch(rows, 5)
    assert [d.rows for d in deliveries(ann)] == [2]
    switch(rows, 6)
    assert [d.rows for d in deliveries(ann)] == [2, 2] and read_rows(ann, after=0, limit=10).next == 4
