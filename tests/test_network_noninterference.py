"""Every mechanism at once in a running network, over random data, policies and grants.

One stream carries its patients' own security punctuations (who may read them) and a
security level (the hospital that sent it); users hold roles and clearances; queries
select, count over time windows and over the last n visible tuples. For a random user:

* **Exactness.** Their rows from ``network run`` (fed in two parts, restarted from its
  checkpoints in between) equal ``network replay``'s (the replay contract restricted to
  their grant periods).
* **Non-interference across the network.** Tuples they may not see, by level (the other
  hospital) or by their patients' SPs (roles they lack), change nothing they receive:
  every user's network fed with those tuples gives them the rows a network of theirs
  alone gives without them (other users' pipelines change nothing either). The
  hidden tuples stay within the visible tuples' times of their part: a hidden tuple
  later than everything visible moves the watermark, the event-time channel
  ``docs/security.md`` bounds (levels close it; the test keeps SP-hidden tuples inside).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery, load_queries_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.network import NetworkRuntime, read_user_rows
from streamwarden.runtime.network_replay import replay_network

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
lattice: {classes: {Hospitals: [north, south]}}
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, hospital: string, pulse: int}
    key: patient
    punctuated_by: patient
    level: {from: hospital}
roles: {Doctor: {}, Nurse: {}}
users:
  doc_north: {roles: [Doctor], clearance: "[north]"}
  nurse_north: {roles: [Nurse], clearance: "[north]"}
  doc_south: {roles: [Doctor], clearance: "[south]"}
""", "mixed.yaml")
USERS = {"doc_north": ("Doctor", "north"), "nurse_north": ("Nurse", "north"), "doc_south": ("Doctor", "south")}
QUERIES = load_queries_text("""
queries:
  - {id: high, users: [doc_north, nurse_north, doc_south],
     query: "SELECT patient, hospital, pulse FROM Vitals WHERE pulse > 80"}
  - {id: perminute, users: [doc_north, nurse_north, doc_south],
     query: "SELECT hospital, COUNT(*) AS n, MAX(pulse) AS top FROM Vitals [RANGE 1 min] GROUP BY hospital"}
  - {id: last3, users: [doc_north, nurse_north, doc_south],
     query: "SELECT COUNT(*) AS n, MIN(pulse) AS low FROM Vitals [ROWS 3]"}
""", CATALOG)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
PATIENTS = {1: "north", 2: "north", 3: "south", 4: "south"}
SPLIT = 120  # seconds: the first part of the input; the rest after a restart


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S") + "Z"


readings = st.lists(st.fixed_dictionaries({"second": st.integers(0, 239), "patient": st.sampled_from(sorted(PATIENTS)),
                                           "pulse": st.integers(50, 130)}), min_size=6, max_size=20,
                    unique_by=lambda r: (r["second"], r["patient"]))
policies = st.fixed_dictionaries({p: st.sampled_from(["Doctor", "Nurse", "{Doctor, Nurse}"]) for p in PATIENTS})
grants = st.fixed_dictionaries({q.id: st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(2, 4)))
                                for q in QUERIES})


def visible_to(user: str, patient: int, roles: dict[int, str]) -> bool:
    role, hospital = USERS[user]
    return PATIENTS[patient] == hospital and role in roles[patient]


def records(rows: list[dict], roles: dict[int, str]) -> list[dict]:
    """The stream as its providers send it: each patient's SP first, then readings by time."""
    sps = [{"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": roles[p], "sign": "+",
            "ts": iso(T0), "sn": 1, "patient": p} for p in sorted(PATIENTS)]
    return sps + [{"ts": iso(T0 + timedelta(seconds=r["second"])), "patient": r["patient"],
                   "hospital": PATIENTS[r["patient"]], "pulse": r["pulse"], "sp_ts": iso(T0), "sp_csn": 1}
                  for r in sorted(rows, key=lambda r: r["second"])]


def run_network(spark, root: Path, parts: list[list[dict]], roles: dict[int, str], access: dict,  # type: ignore[no-untyped-def]
                users: tuple[str, ...] = tuple(USERS)) -> Path:
    """The queries registered for ``users``, fed ``parts`` one after the other with a restart between."""
    store = sqlite_url(root / "store.db")
    server = AuthorizationServer(store)
    server.register([RegisteredQuery(q.id, users, q.query, q.level) for q in QUERIES], CATALOG)
    for query, (start, end) in access.items():
        for user in users:
            server.grant(query, user, T0 + timedelta(minutes=start),
                         until=None if end is None else T0 + timedelta(minutes=end))
    inputs = {"Vitals": str(root / "in")}
    (root / "in").mkdir(parents=True)
    for k, part in enumerate(parts):
        records_k = records(part, roles) if k == 0 else records(part, roles)[len(PATIENTS):]  # SPs come once
        (root / "in" / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records_k))
        # a new runtime per part: every pipeline resumes from its checkpoint
        NetworkRuntime(spark, store, inputs, root / "out", root / "cp").start(available_now=True).await_termination()
    return root


def rows_of(spark, root: Path, user: str) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    return {q.id: sorted(json.dumps(r, sort_keys=True) for r in read_user_rows(spark, root / "out", user, q.id))
            for q in QUERIES}


# No shrinking: an example takes minutes of Spark work, so a failure is reported as generated.
# One example that holds hidden tuples among the user's (the simplest example, which Hypothesis
# tries first, holds none and is rejected before any Spark work).
@settings(max_examples=1, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(visible=readings, noise=readings, roles=policies, access=grants, user=st.sampled_from(sorted(USERS)))
def test_a_random_mixed_network_is_exact_and_hidden_tuples_change_nothing(spark, tmp_path_factory, visible, noise,
                                                                            roles, access, user) -> None:
    mine = [r for r in visible if visible_to(user, r["patient"], roles)]
    hidden = [r for r in noise if not visible_to(user, r["patient"], roles)]
    parts_alone, parts_mixed = [], []
    for lo, hi in ((0, SPLIT), (SPLIT, 240)):
        seen = [r for r in mine if lo <= r["second"] < hi]
        latest = max((r["second"] for r in seen), default=lo - 1)
        # hidden tuples within the visible ones' times (a later one would move the watermark)
        extra = [r for r in hidden if lo <= r["second"] <= latest]
        parts_alone.append(seen)
        parts_mixed.append(seen + extra)
    assume(any(len(mixed) > len(alone) for mixed, alone in zip(parts_mixed, parts_alone)))  # something to hide
    # Every user's network with the hidden tuples, against a network of this user alone without them:
    # neither the tuples nor the other users' pipelines change what the user receives.
    mixed = run_network(spark, tmp_path_factory.mktemp("mixed"), parts_mixed, roles, access)
    alone = run_network(spark, tmp_path_factory.mktemp("alone"), parts_alone, roles, access, users=(user,))
    got = rows_of(spark, mixed, user)
    assert got == rows_of(spark, alone, user), user  # non-interference, for every query at once

    replay = mixed / "replay"
    replay_network(spark, CATALOG, QUERIES, AuthorizationServer(sqlite_url(mixed / "store.db")).changes(),
                   {"Vitals": str(mixed / "in")}, replay)
    for q in QUERIES:
        expected = [json.loads(line) for line in (replay / user / f"{q.id}.jsonl").read_text().splitlines()]
        if q.id == "perminute":  # a run closes the windows the watermark passed; replay closes all
            closed = max((json.loads(r)["window_end"] for r in got[q.id]), default="")
            expected = [r for r in expected if r["window_end"] <= closed]
        assert got[q.id] == sorted(json.dumps(r, sort_keys=True) for r in expected), (user, q.id)
