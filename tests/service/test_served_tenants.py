"""``streamwarden serve`` on Spark: no tenant opens what no policy opens, and none stops the others
(issue 24, findings 1 and 6, through HTTP against a real service).

* eve, with no policy on Payroll, cannot register a query over it for herself, while ann
  receives the salaries of the shared query an admin registered and granted her;
* a query the engine cannot run is refused at registration (422), and one that reaches the
  network anyway (registered in the store, as ``network register`` does) fails alone: the
  other users keep receiving rows, its users' status and ``/v1/network`` say why, and the
  service stops cleanly and starts again.
"""

from __future__ import annotations

import json
import time

import pytest

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.identity import create_token
from streamwarden.catalog.registry import RegisteredQuery, own_id

from .conftest import CATALOG
from .served import Served

pytestmark = pytest.mark.spark
PAYROLL = CATALOG.replace("roles:", "  Payroll:\n    schema: {ts: timestamp, emp: string, salary: double}\nroles:", 1)
T0 = "2026-03-01T10:00:00Z"


def lines(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tenants")
    with Served.start(root, catalog=PAYROLL, extra=("--input", f"Payroll={root / 'in' / 'Payroll'}")) as running:
        running.tokens["payroll"] = create_token(running.store_url, provider_stream="Payroll")
        yield running


def test_an_own_query_never_opens_a_stream_a_shared_one_was_granted(served: Served) -> None:
    salaries = {"query": "SELECT emp, salary FROM Payroll"}
    refused = served.post("/v1/queries", "eve", json={"id": "pay", **salaries})
    assert refused.status_code == 422 and "Payroll" in refused.json()["error"], refused.text
    shared = served.post("/v1/queries", "root", json={"id": "payroll", "users": ["ann"], **salaries})
    assert shared.status_code == 201, shared.text
    granted = served.post("/v1/grants", "root", json={"query": "payroll", "user": "ann", "sign": "+", "ts": T0})
    assert granted.status_code == 201, granted.text
    posted = served.post("/v1/streams/Payroll/records", "payroll",
                         content=lines({"ts": T0, "emp": "kim", "salary": 5000.0}))
    assert posted.status_code == 201, posted.text
    assert [r["emp"] for r in served.wait_rows("payroll", "ann", 1)] == ["kim"]
    assert served.get("/v1/queries/payroll/rows", "eve").status_code == 404
    assert served.get("/v1/queries", "eve").json()["queries"] == []


def test_a_query_the_engine_cannot_run_stops_no_one(served: Served) -> None:
    unrunnable = {"id": "count", "query": "SELECT COUNT(*) AS n FROM Readings"}
    refused = served.post("/v1/queries", "ann", json=unrunnable)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"].startswith("the network cannot run this query"), refused.text
    assert served.post("/v1/queries", "bob", json={"id": "q1", "query": "SELECT sensor, value FROM Readings"}
                       ).status_code == 201
    # One gets past the service (registered in the store, as `network register` does) and fails alone.
    server = AuthorizationServer(served.store_url)
    server.register([RegisteredQuery("broken", ("bob",), unrunnable["query"])])
    server.grant("broken", "bob", T0)
    for first in (1, 3):  # before and after a restart
        posted = served.post("/v1/streams/Readings/records", "readings", content=lines(
            {"ts": T0, "sensor": first, "site": "s", "value": 10.0},
            {"ts": T0, "sensor": first + 1, "site": "s", "value": 20.0}))
        assert posted.status_code == 201, posted.text
        assert sorted(r["sensor"] for r in served.wait_rows("q1", "bob", first + 1)) == list(range(1, first + 2))
        status = served.get("/v1/queries/broken", "bob").json()["status"]
        deadline = time.monotonic() + 60
        while "cannot run this query" not in (status["reason"] or "") and time.monotonic() < deadline:
            time.sleep(0.25)  # the network reports at its next poll (about a second): polled from outside
            status = served.get("/v1/queries/broken", "bob").json()["status"]
        assert status["receiving"] is False and "cannot run this query" in status["reason"], status
        failures = [p["failure"] for p in served.get("/v1/network", "root").json()["pipelines"]
                    if p["query"] == "broken"]
        assert failures and "aggregation needs a [RANGE" in failures[0], failures
        if first == 1:
            assert served.terminate() == 0
            served.restart()


def test_a_deleted_query_leaves_no_rows_or_state_behind(served: Served) -> None:
    """The service removes a deleted query's rows and checkpoints through the API
    (:func:`streamwarden.api.forget_query`), never through its own knowledge of the folders."""
    internal = own_id("ann", "gone")
    query = {"id": "gone", "query": "SELECT sensor, value FROM Readings WHERE value > 60"}
    assert served.post("/v1/queries", "ann", json=query).status_code == 201
    posted = served.post("/v1/streams/Readings/records", "readings", content=lines(
        {"ts": T0, "sensor": 90, "site": "s", "value": 90.0}))
    assert posted.status_code == 201, posted.text
    assert [r["sensor"] for r in served.wait_rows("gone", "ann", 1)] == [90]
    folders = (served.root / "out" / "ann" / internal, served.root / "checkpoint" / internal)
    assert all(folder.is_dir() for folder in folders)
    assert served.request("DELETE", "/v1/queries/gone", "ann").status_code == 200
    assert not any(folder.exists() for folder in folders)
    assert served.post("/v1/queries", "ann", json=query).status_code == 201  # the same id again, afresh
