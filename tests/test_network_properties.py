"""The running network against an independent oracle of issue 5's contract, over random
networks: random queries (sharing selections and joins or not), random listed users,
random access changes issued before the run and while it runs, a query registered while
it runs, and a restart.

Each user's rows must equal (1) the oracle below, written from the contract alone, and
(2) ``network replay``. The oracle knows four query shapes and computes their rows by
brute force in Python: a selection (a shared tuple group's member), a windowed join (a
pair's event time is the later ``ts``), a grouped count over tumbling windows (event
time: the window's end) and a count of one location's readings (an aggregate group's
member: its constant is a key); a user gets a row when their latest access change at or
before its event time is a grant (of two at one instant, the later issued).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.network import NetworkRuntime, read_user_rows
from streamwarden.runtime.network_replay import replay_network

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
users: {ann: {}, bob: {}, cid: {}}
""")
USERS = ("ann", "bob", "cid")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
SPLIT = 10  # minutes: the first part of the input; the rest arrives while the network runs
LATE_CHANGES = 13  # changes issued while it runs hold from here on (later than anything already emitted)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Shape:
    """One query of the random network, and how the oracle computes it."""

    kind: str  # select | join | count
    limit: int
    window: int  # minutes (join and count)

    def cql(self) -> str:
        if self.kind == "select":
            return f"SELECT streamid, heartRate FROM Stream1 WHERE heartRate > {self.limit}"
        if self.kind == "join":
            w = f"[RANGE {self.window} min]"
            return (f"SELECT s1.streamid, s2.speed FROM Stream1 AS s1 {w}, Stream2 AS s2 {w} "
                    f"WHERE s1.location = s2.location AND s2.speed < {self.limit}")
        if self.kind == "count_at":
            return f"SELECT COUNT(*) AS n FROM Stream2 [RANGE {self.window} min] WHERE location = '{self.location}'"
        return (f"SELECT location, COUNT(*) AS n FROM Stream2 [RANGE {self.window} min] WHERE speed < {self.limit} "
                "GROUP BY location")

    @property
    def location(self) -> str:
        return "y" if self.limit == 80 else "x"

    def rows(self, s1: list[dict], s2: list[dict]) -> list[tuple[datetime, dict]]:
        """(event time, row) of every result, by brute force."""
        if self.kind == "select":
            return [(a["ts"], {"streamid": a["streamid"], "heartRate": a["heartRate"]})
                    for a in s1 if a["heartRate"] > self.limit]
        if self.kind == "join":
            span = timedelta(minutes=self.window)
            return [(max(a["ts"], b["ts"]), {"streamid": a["streamid"], "speed": b["speed"]})
                    for a in s1 for b in s2
                    if a["location"] == b["location"] and b["speed"] < self.limit and abs(a["ts"] - b["ts"]) <= span]
        size = timedelta(minutes=self.window)
        counts: dict[tuple[datetime, str], int] = {}
        for b in s2:
            if (b["speed"] < self.limit) if self.kind == "count" else b["location"] == self.location:
                start = T0 + ((b["ts"] - T0) // size) * size  # T0 is aligned to every window size used
                counts[(start, b["location"])] = counts.get((start, b["location"]), 0) + 1
        return [(start + size, {"window_start": iso(start), "window_end": iso(start + size), "n": n,
                                **({"location": loc} if self.kind == "count" else {})})
                for (start, loc), n in counts.items()]


def entitled(changes: list[tuple[int, str, str, bool]], query: str, user: str, event: datetime) -> bool:
    """The user's latest change for the query at or before ``event`` is a grant (ties: the later issued)."""
    latest = None
    for seq, (minute, q, u, grant) in enumerate(changes):
        if q == query and u == user and at(minute) <= event:
            if latest is None or (at(minute), seq) >= latest[0]:
                latest = ((at(minute), seq), grant)
    return latest is not None and latest[1]


shapes = st.builds(Shape, st.sampled_from(["select", "join", "count", "count_at"]), st.sampled_from([20, 30, 80]),
                   st.sampled_from([1, 2]))
# registered while the network runs: an aggregate group's late member first (it must get the windows closed before it)
late_shapes = st.builds(Shape, st.sampled_from(["count_at", "select", "join", "count"]), st.sampled_from([20, 30, 80]),
                        st.sampled_from([1, 2]))
readings = st.fixed_dictionaries({
    "Stream1": st.lists(st.fixed_dictionaries({"second": st.integers(0, 20 * 60 - 1), "streamid": st.integers(1, 3),
                                                "heartRate": st.integers(10, 100),
                                                "location": st.sampled_from("xy")}), min_size=4, max_size=14),
    "Stream2": st.lists(st.fixed_dictionaries({"second": st.integers(0, 20 * 60 - 1), "location": st.sampled_from("xy"),
                                                "speed": st.sampled_from([5.0, 25.0, 50.0])}), min_size=4, max_size=14),
})


def change(minutes: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[int, int, str, bool]]:
    return st.tuples(minutes, st.integers(0, 2), st.sampled_from(USERS), st.sampled_from([True, True, False]))


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=st.lists(shapes, min_size=2, max_size=3), listed=st.lists(st.sets(st.sampled_from(USERS), min_size=1),
                                                                      min_size=3, max_size=3),
       data=readings, opening=st.integers(0, 8), before=st.lists(change(st.integers(0, 20)), min_size=2, max_size=6),
       during=st.lists(change(st.integers(LATE_CHANGES, 20)), min_size=1, max_size=4),
       late=late_shapes, late_users=st.sets(st.sampled_from(USERS), min_size=1))
def test_each_user_of_a_random_running_network_gets_what_the_oracle_says(spark, tmp_path_factory, plan, listed, data,
                                                                           opening, before, during, late,
                                                                           late_users) -> None:
    root = tmp_path_factory.mktemp("net")
    queries = [RegisteredQuery(f"q{i}", tuple(sorted(listed[i])), shape.cql()) for i, shape in enumerate(plan)]
    registered_late = RegisteredQuery("q9", tuple(sorted(late_users)), late.cql())
    s1 = sorted(({"ts": T0 + timedelta(seconds=r["second"]), **{k: v for k, v in r.items() if k != "second"}}
                 for r in data["Stream1"]), key=lambda r: r["ts"])
    s2 = sorted(({"ts": T0 + timedelta(seconds=r["second"]), **{k: v for k, v in r.items() if k != "second"}}
                 for r in data["Stream2"]), key=lambda r: r["ts"])
    # Tuples much later than the rest, which no query keeps, close every window (the watermark).
    flush1 = {"ts": at(300), "streamid": 9, "heartRate": 0, "location": "z"}
    flush2 = {"ts": at(300), "location": "z", "speed": 99.0}
    store = sqlite_url(root / "auth.db")
    server = AuthorizationServer(store)
    issued: list[tuple[int, str, str, bool]] = []

    def issue(changes: list[tuple[int, int, str, bool]]) -> None:
        for minute, q, user, grant in changes:
            q = min(q, len(plan) - 1)
            (server.grant if grant else server.revoke)(f"q{q}", user, at(minute))
            issued.append((minute, f"q{q}", user, grant))

    def feed(part: int, rows1: list[dict], rows2: list[dict]) -> None:
        for stream, rows in (("Stream1", rows1), ("Stream2", rows2)):
            folder = root / "in" / stream
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"part-{part}.jsonl").write_text("".join(json.dumps({**r, "ts": iso(r["ts"])}) + "\n"
                                                                for r in rows))

    first = lambda rows: [r for r in rows if r["ts"] < at(SPLIT)]  # noqa: E731
    rest = lambda rows: [r for r in rows if r["ts"] >= at(SPLIT)]  # noqa: E731
    inputs = {s: str(root / "in" / s) for s in ("Stream1", "Stream2")}
    issue([(opening, i, q.users[0], True) for i, q in enumerate(queries)] + before)  # each query has a user
    feed(0, first(s1), first(s2))
    rt = NetworkRuntime(spark, store, inputs, root / "out", root / "cp", trigger="1 second", queries=tuple(queries),
                        catalog=CATALOG).start()
    try:
        rt.process_all_available()
        issue(during)  # while the network runs
        server.register([registered_late])  # a query registered while it runs: it starts from the beginning
        for user in registered_late.users:
            server.grant("q9", user, at(opening))
            issued.append((opening, "q9", user, True))
        rt.poll()
        feed(1, [r for r in rest(s1) if r["ts"] < at(15)], [r for r in rest(s2) if r["ts"] < at(15)])
        rt.process_all_available()
    finally:
        rt.stop()
    # A restart: a new runtime over the same checkpoints resumes every pipeline's state.
    rt = NetworkRuntime(spark, store, inputs, root / "out", root / "cp", trigger="1 second").start()
    try:
        feed(2, [r for r in rest(s1) if r["ts"] >= at(15)] + [flush1],
             [r for r in rest(s2) if r["ts"] >= at(15)] + [flush2])
        rt.process_all_available()
    finally:
        rt.stop()
    queries.append(registered_late)
    replay_network(spark, CATALOG, queries, server.changes(), inputs, root / "replay")
    for q, shape in zip(queries, [*plan, late]):
        everything = shape.rows(s1 + [flush1], s2 + [flush2])
        for user in USERS:
            got = sorted(json.dumps({k: v for k, v in r.items() if not k.startswith("_")}, sort_keys=True)
                         for r in read_user_rows(spark, root / "out", user, q.id))
            expected = sorted(json.dumps(row, sort_keys=True) for event, row in everything
                              if user in q.users and entitled(issued, q.id, user, event))
            assert got == expected, (q.id, q.query, user, issued)
            if user in q.users:
                alone = (root / "replay" / user / f"{q.id}.jsonl").read_text().splitlines()
                assert got == sorted(json.dumps({k: v for k, v in json.loads(line).items() if not k.startswith("_")},
                                                sort_keys=True) for line in alone)
