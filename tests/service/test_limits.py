"""Issue 34: what one user may cost the service — registration churn, Spark's check of a
registration, and a window's cost refused before anything else.

* A user who registers and deletes in a loop makes the shared network plan and fill in again
  and again: beyond ``CHURN_PER_MINUTE`` registrations plus removals a minute she is answered
  429 with ``Retry-After``, audited, while every other user still registers.
* Spark's analysis of a registration runs one at a time (``OneAtATime``) and for at most its
  bound: a check that takes longer refuses the registration (422), a request that cannot get
  a turn is answered 503 with ``Retry-After``.
* ``[RANGE 1 day SLIDE 1 second]`` is refused by the language, before the per-user cap on
  queries and before Spark (the last test runs a real network host on Spark).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from streamwarden.catalog.audit import records
from streamwarden.service.app import Service, create_app
from streamwarden.service.limits import (CHURN_PER_MINUTE, CheckerBusy, CheckTimedOut, OneAtATime, RateLimit)
from streamwarden.service.queries import MAX_OWN_QUERIES

from .conftest import Tokens

Q = "SELECT sensor, value FROM Readings"
DAY_BY_SECONDS = "SELECT AVG(value) AS v FROM Readings [RANGE 1 day SLIDE 1 second]"


class Clock:
    """A clock the test moves (the bucket's time), so that no test sleeps a minute."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def one_line_error(answer: Any, status: int) -> str:
    assert answer.status_code == status, (answer.status_code, answer.text)
    error = answer.json()["error"]
    assert isinstance(error, str) and "\n" not in error and "Traceback" not in answer.text
    return error


# -- registration churn ---------------------------------------------------------------------------
def test_a_user_registering_in_a_loop_is_throttled_and_another_still_registers(client: TestClient, tokens: Tokens,
                                                                               service: Service) -> None:
    answers = [client.post("/v1/queries", json={"id": f"q{i}", "query": Q}, headers=tokens.header("ann"))
               for i in range(25)]
    assert CHURN_PER_MINUTE == MAX_OWN_QUERIES == 20  # so the 21st is the rate's, not the cap's (checked first)
    assert [a.status_code for a in answers] == [201] * 20 + [429] * 5
    for refused in answers[20:]:
        wait = int(refused.headers["Retry-After"])
        assert 1 <= wait <= 60
        assert one_line_error(refused, 429) == (f"you may make at most 20 registrations and removals of queries a "
                                                f"minute: try again in {wait} s")
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    assert client.delete("/v1/queries/q0", headers=tokens.header("ann")).status_code == 429  # removals count too
    assert service.trail.flush()
    seen = [(r.principal, r.action, r.outcome) for r in records(service.store)]
    assert seen.count(("user:ann", "query.create", "throttled")) == 5
    assert ("user:ann", "query.delete", "throttled") in seen and ("user:bob", "query.create", "ok") in seen


def test_the_bucket_refills_counts_removals_and_an_admins_shared_registrations(client: TestClient, tokens: Tokens,
                                                                                service: Service) -> None:
    clock = Clock()
    service.churn = RateLimit(3, clock=clock)  # a token every 20 s
    ann = tokens.header("ann")
    assert client.post("/v1/queries", json={"id": "a", "query": Q}, headers=ann).status_code == 201
    assert client.delete("/v1/queries/a", headers=ann).status_code == 200
    assert client.post("/v1/queries", json={"id": "b", "query": Q}, headers=ann).status_code == 201
    refused = client.post("/v1/queries", json={"id": "c", "query": Q}, headers=ann)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "20"
    clock.now += 19.5
    assert client.post("/v1/queries", json={"id": "c", "query": Q}, headers=ann).headers["Retry-After"] == "1"
    clock.now += 0.5
    assert client.post("/v1/queries", json={"id": "c", "query": Q}, headers=ann).status_code == 201
    shared = [client.post("/v1/queries", json={"id": f"s{i}", "query": Q, "users": ["ann", "bob"]},
                          headers=tokens.header("root")).status_code for i in range(4)]
    assert shared == [201, 201, 201, 429]  # an admin's registrations for others count against the admin


def test_dry_runs_are_counted_apart(client: TestClient, tokens: Tokens, service: Service) -> None:
    clock = Clock()
    service.churn, service.dry_runs = RateLimit(1, clock=clock), RateLimit(2, clock=clock)
    ann = tokens.header("ann")
    dry = [client.post("/v1/queries?dry_run=true", json={"id": "a", "query": Q}, headers=ann) for _ in range(3)]
    assert [a.status_code for a in dry] == [200, 200, 429]
    assert one_line_error(dry[2], 429) == "you may make at most 2 dry runs a minute: try again in 30 s"
    assert client.post("/v1/queries", json={"id": "a", "query": Q}, headers=ann).status_code == 201  # its own bucket


def test_a_rate_limit_is_safe_across_threads() -> None:
    limit = RateLimit(50, clock=Clock())
    allowed: list[bool] = []

    def take() -> None:
        for _ in range(20):
            allowed.append(limit.wait("user:ann") is None)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 50 and len(allowed) == 160  # the clock stands still: exactly the bucket


# -- one check at a time, each bounded ---------------------------------------------------------------
def test_parallel_checks_run_one_at_a_time() -> None:
    checks = OneAtATime(seconds=30.0)
    running, most, lock = 0, 0, threading.Lock()
    answers: list[int] = []

    def check(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)  # a check that takes a moment (Spark's analysis): others must queue for it
        with lock:
            running -= 1
        return n

    threads = [threading.Thread(target=lambda n=n: answers.append(checks.run(lambda: check(n)))) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert most == 1 and sorted(answers) == list(range(8))


def test_a_check_beyond_its_bound_is_refused_and_keeps_the_checker_until_it_ends() -> None:
    checks = OneAtATime(seconds=0.05, wait=0.05)
    release = threading.Event()
    began = time.perf_counter()
    with pytest.raises(CheckTimedOut):
        checks.run(release.wait)  # a check Spark does not finish in time
    assert time.perf_counter() - began < 2
    with pytest.raises(CheckerBusy) as busy:  # it still runs: the next waits, then is told to come back
        checks.run(lambda: "next")
    assert busy.value.retry_after == 1
    release.set()
    assert checks.idle(timeout=5) and checks.run(lambda: "next") == "next"
    with pytest.raises(ZeroDivisionError):  # what a check raises reaches its caller
        checks.run(lambda: 1 // 0)


def test_no_more_than_the_bound_wait_for_the_checker() -> None:
    checks = OneAtATime(seconds=30.0, wait=30.0, max_waiting=1)
    release, started = threading.Event(), threading.Event()
    holder = threading.Thread(target=lambda: checks.run(lambda: (started.set(), release.wait())))
    holder.start()
    assert started.wait(5)
    waiter = threading.Thread(target=lambda: checks.run(lambda: None))
    waiter.start()
    deadline = time.monotonic() + 5
    while checks._waiting < 1 and time.monotonic() < deadline:
        time.sleep(0.005)  # until the waiter queues (threads meet at the checker's own count)
    began = time.perf_counter()
    with pytest.raises(CheckerBusy):
        checks.run(lambda: None)  # a second waiter: refused at once, not after the wait
    assert time.perf_counter() - began < 1
    release.set()
    holder.join(5)
    waiter.join(5)


# -- a window's cost, before the cap and before Spark ---------------------------------------------------
def test_a_costly_window_is_refused_before_her_queries_are_counted(client: TestClient, tokens: Tokens,
                                                                   service: Service) -> None:
    service.churn = RateLimit(100)
    ann = tokens.header("ann")
    for i in range(MAX_OWN_QUERIES):
        assert client.post("/v1/queries", json={"id": f"q{i}", "query": Q}, headers=ann).status_code == 201
    for path in ("/v1/queries", "/v1/queries?dry_run=true"):
        answer = client.post(path, json={"id": "day", "query": DAY_BY_SECONDS}, headers=ann)
        assert one_line_error(answer, 422).startswith("RANGE 1 day SLIDE 1 second puts each tuple in 86,400 windows")
        assert (answer.json()["line"], answer.json()["column"], answer.json()["field"]) == (1, 38, "query")
    shared = client.post("/v1/queries", json={"id": "day", "query": DAY_BY_SECONDS, "users": ["ann", "bob"]},
                         headers=tokens.header("root"))
    assert (shared.status_code, shared.json().get("line"), shared.json().get("column")) == (422, 1, 38)
    alias = client.post("/v1/queries", json={"id": "g", "query": "SELECT value AS _graph FROM Readings"},
                        headers=tokens.header("bob"))
    assert one_line_error(alias, 422).startswith("output column '_graph' is reserved")
    assert (alias.json()["line"], alias.json()["column"]) == (1, 17)


@pytest.mark.spark
def test_on_a_real_network_the_check_is_bounded_and_queued(spark: Any, tmp_path: Any, store_url: str,
                                                           tokens: Tokens) -> None:
    """The network host on Spark: the costly window never reaches Spark; a check beyond its bound
    (here set to a millisecond) is a 422 in bounded time; a checker busy past the wait is a 503."""
    from streamwarden.api import start_network
    from streamwarden.service.host import NetworkHost
    from streamwarden.service.server import ServeOptions, open_service

    inputs = {"Readings": str(tmp_path / "in" / "Readings"), "Vitals": str(tmp_path / "in" / "Vitals")}
    options = ServeOptions(store_url=store_url, output_dir=str(tmp_path / "out"), sp_folder=str(tmp_path / "sps"),
                           inputs=inputs)
    service = open_service(options)
    runtime = start_network(inputs, options.output_dir, store_url=store_url, checkpoint_root=tmp_path / "cp",
                            spark=spark, sp_folder=options.sp_folder)
    host = service.host = NetworkHost(runtime, check_seconds=0.001, check_wait=0.2)
    try:
        with TestClient(create_app(service), raise_server_exceptions=False) as client:
            ann = tokens.header("ann")
            began = time.perf_counter()
            day = client.post("/v1/queries", json={"id": "day", "query": DAY_BY_SECONDS}, headers=ann)
            assert time.perf_counter() - began < 1 and day.status_code == 422 and "86,400 windows" in day.text
            assert host.checks.idle(timeout=0)  # Spark was never asked

            began = time.perf_counter()
            slow = client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=ann)
            assert time.perf_counter() - began < 5
            assert one_line_error(slow, 422).startswith("the network could not check this query within 0.001 s: ")
            assert client.get("/v1/queries", headers=ann).json()["queries"] == []  # nothing stored
            assert host.checks.idle(timeout=60)  # Spark's analysis ran on, alone, and ended

            release, started = threading.Event(), threading.Event()

            def hold() -> None:  # another registration's check, which holds the checker beyond its bound
                with contextlib.suppress(CheckTimedOut):
                    host.checks.run(lambda: (started.set(), release.wait()))

            holder = threading.Thread(target=hold)
            holder.start()
            assert started.wait(5)
            busy = client.post("/v1/queries", json={"id": "q2", "query": Q}, headers=tokens.header("bob"))
            release.set()
            holder.join(5)
            assert one_line_error(busy, 503) == "the network is busy checking other registrations: try again in 1 s"
            assert busy.headers["Retry-After"] == "1"
        assert service.trail.flush()
        outcomes = [(r.principal, r.outcome, r.detail.get("status")) for r in records(service.store)
                    if r.action == "query.create"]
        assert ("user:ann", "refused", 422) in outcomes and ("user:bob", "busy", 503) in outcomes
    finally:
        runtime.stop()
        service.trail.close()
