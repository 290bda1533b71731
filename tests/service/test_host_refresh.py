"""NetworkHost.refresh is a group commit: concurrent registrations share polls, and each
returns only after a poll that read the store after its change (no sleeps: threads meet at
events the fake runtime sets)."""

from __future__ import annotations

import threading

from streamwarden.service.host import NetworkHost


class FakeRuntime:
    """Counts polls and records, for each, the store version it read; the first poll blocks
    until released, so the other callers pile up behind it."""

    def __init__(self) -> None:
        self.version = 0  # what "the store" holds: bumped by each caller before it refreshes
        self.read: list[int] = []
        self.first_started = threading.Event()
        self.release_first = threading.Event()

    def poll(self) -> None:
        self.read.append(self.version)
        if len(self.read) == 1:
            self.first_started.set()
            self.release_first.wait(timeout=30)


def test_callers_piled_behind_a_poll_share_the_next_one_and_each_sees_its_change_applied() -> None:
    runtime = FakeRuntime()
    host = NetworkHost(runtime)  # type: ignore[arg-type]  # a stand-in: refresh only calls poll
    applied: dict[int, int] = {}

    def register(version: int) -> None:
        runtime.version = max(runtime.version, version)  # the change is stored first
        host.refresh()
        applied[version] = max(runtime.read)  # the newest store version a finished poll read

    first = threading.Thread(target=register, args=(1,))
    first.start()
    assert runtime.first_started.wait(timeout=30)
    others = [threading.Thread(target=register, args=(v,)) for v in range(2, 10)]
    for thread in others:
        thread.start()
    with host._applying:  # every caller has asked (while the first poll ran)
        assert host._applying.wait_for(lambda: host._asked >= 9, timeout=30)
    runtime.release_first.set()
    for thread in [first, *others]:
        thread.join(timeout=30)
    assert len(runtime.read) == 2  # nine registrations, two polls: the first, and one for all who waited
    assert all(applied[v] >= v for v in applied) and len(applied) == 9  # each saw a poll read its change


class FakeQuery:
    def __init__(self, progress: dict | None, available: bool, active: bool = True) -> None:
        self.lastProgress, self.status, self.isActive = progress, {"isDataAvailable": available}, active


def test_the_network_is_catching_up_until_every_query_has_read_what_its_input_holds() -> None:
    from streamwarden.service.host import _behind

    assert _behind(FakeQuery(None, False))  # not a micro-batch yet: GET rows' [] means "not yet", not "none"
    assert _behind(FakeQuery({"batchId": 3}, True))  # files it has not read
    assert not _behind(FakeQuery({"batchId": 3}, False))
    assert not _behind(FakeQuery(None, True, active=False))  # a query that ended keeps no one waiting


class CountingQuery(FakeQuery):
    asked = 0

    @property
    def status(self) -> dict:  # type: ignore[override]
        CountingQuery.asked += 1
        return {"isDataAvailable": False}

    @status.setter
    def status(self, value: dict) -> None:
        pass


def test_a_live_network_asks_spark_nothing_until_another_query_starts() -> None:
    queries = [CountingQuery({"batchId": 1}, False) for _ in range(3)]
    runtime = FakeRuntime()
    runtime.streams = queries  # type: ignore[attr-defined]
    host = NetworkHost(runtime)  # type: ignore[arg-type]
    host._observe()
    assert host.state == "live" and CountingQuery.asked == 3
    for _ in range(5):
        host._observe()
    assert CountingQuery.asked == 3  # nothing asked while the same queries run
    runtime.streams = [*queries, CountingQuery(None, False)]  # type: ignore[attr-defined]  # a new pipeline
    host._observe()
    assert host.state == "catching_up"
