"""Issue 34's two findings, each as one small deterministic case.

* **The leak.** A shared aggregate whose member selects on an attribute her view hides
  (eve: her policy shows ``ts, site, value``, not ``ward``; ``WHERE ward = 'w1'``) must give
  her what her own replay gives: nothing, since her WHERE reads the masked tuple (``NULL =
  'w1'``). The group lifted the conjunct as a key and grouped by the stream's raw ward, so
  she received ward w1's count and average for every window. The same through a Security
  Shield: the nurse's patients' SPs hide ``hospital`` from her, yet she received the north's
  per-window counts for ``WHERE hospital = 'north'``.
* **The group's death.** A catalog change that hides ``pulse`` from the nurses while their
  ``WHERE pulse > c`` queries run made Spark fold their plans to nothing (``NULL > c``); the
  group's stateful Security Shield then committed no state and Spark failed the group's query
  (``STATE_STORE_COMMIT_VALIDATION_FAILED``) for every member, for good.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery, own_id
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.runtime.network import NetworkRuntime, read_status, read_user_rows
from streamwarden.runtime.network_replay import replay_network

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def write(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def rows(records: list[dict]) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in records)


def own(user: str, text: str) -> RegisteredQuery:
    return RegisteredQuery(own_id(user, "q1"), (user,), text, owner=user, opens=())


EVE = load_catalog_text("""
streams:
  Readings: {schema: {ts: timestamp, site: string, ward: string, value: double}}
roles: {Reader: {}}
users:
  eve: {roles: [Reader], profile: {site: s0}}
policies:
  - {id: sites, subject: Reader, streams: [Readings], privilege: read, attributes: [ts, site, value],
     where: "site = self.site"}
""", "eve.yaml")
NURSE = load_catalog_text("""
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, hospital: string, pulse: int}
    key: patient
    punctuated_by: patient
roles: {Doctor: {}, Nurse: {}}
users:
  nurse: {roles: [Nurse]}
""", "nurse.yaml")


def readings() -> list[dict]:
    return ([{"ts": at(7 * i), "site": "s0", "ward": f"w{i % 3}", "value": float(i % 10)} for i in range(60)]
            + [{"ts": at(7200), "site": "s0", "ward": "w0", "value": 0.0}])  # closes every window


def vitals(hidden: str) -> list[dict]:
    """Two patients in the north whose SPs let nurses see everything but ``hidden``."""
    granted = "{" + ", ".join(a for a in ("patient", "hospital", "pulse") if a != hidden) + "}"
    return ([{"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": granted, "roles": "{Doctor, Nurse}",
              "sign": "+", "ts": at(0), "sn": 1, "patient": p} for p in (1, 2)]
            + [{"ts": at(s), "patient": 1 + s % 2, "hospital": "north", "pulse": 60 + (s * 7) % 80, "sp_ts": at(0),
                "sp_csn": 1} for s in range(1, 200, 3)]
            + [{"ts": at(7200), "patient": 1, "hospital": "north", "pulse": 0, "sp_ts": at(0), "sp_csn": 1}])


@pytest.mark.parametrize("masked", ["by her view", "by the providers' SPs"])
def test_a_shared_aggregate_never_selects_on_what_a_member_may_not_see(spark, tmp_path, masked) -> None:
    if masked == "by her view":  # eve's policy hides ward
        catalog, user, stream, records = EVE, "eve", "Readings", readings()
        text = "SELECT COUNT(*) AS n, AVG(value) AS a FROM Readings [RANGE 1 minute] WHERE ward = 'w1'"
    else:  # the patients' SPs hide hospital from the nurse
        catalog, user, stream, records = NURSE, "nurse", "Vitals", vitals(hidden="hospital")
        text = "SELECT COUNT(*) AS n, MAX(pulse) AS top FROM Vitals [RANGE 1 minute] WHERE hospital = 'north'"
    folder = tmp_path / "in" / stream
    write(folder, "a.jsonl", records)
    inputs = {stream: str(folder)}
    want = rows(api.replay(catalog, user, text, inputs, spark=spark))
    assert want == Counter()  # her WHERE reads the masked tuple: NULL never equals the constant
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register([own(user, text)], catalog)
    server.open_own(own_id(user, "q1"), user)
    rt = NetworkRuntime(spark, store, inputs, tmp_path / "out", tmp_path / "cp").start(available_now=True)
    try:
        rt.await_termination()
        assert rt.failures() == {}
    finally:
        rt.stop()
    got = rows(read_user_rows(spark, tmp_path / "out", user, own_id(user, "q1")))
    assert got == want, f"the network gave {user} {sum(got.values())} rows over what she may not see: {list(got)[:2]}"
    replay_network(spark, catalog, [own(user, text)], server.changes(), inputs, tmp_path / "replay")
    replayed = (tmp_path / "replay" / user / f"{own_id(user, 'q1')}.jsonl").read_text().splitlines()
    assert replayed == [], f"network replay gave {user} {len(replayed)} rows over what she may not see"


GROUP = """
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, hospital: string, pulse: int}
    key: patient
    punctuated_by: patient
roles: {Doctor: {}, Nurse: {}}
users:
  nurse: {roles: [Nurse]}
  nina: {roles: [Nurse]}
policies:
  - {id: nurses, subject: Nurse, streams: [Vitals], privilege: read, attributes: ATTRIBUTES}
"""
SEES_PULSE = load_catalog_text(GROUP.replace("ATTRIBUTES", "[patient, hospital, pulse]"), "ward.yaml")
NO_PULSE = load_catalog_text(GROUP.replace("ATTRIBUTES", "[patient, hospital]"), "ward.yaml")


def test_a_policy_that_hides_what_the_members_select_on_does_not_kill_their_group(spark, tmp_path) -> None:
    texts = {"nurse": "SELECT patient, pulse FROM Vitals WHERE pulse > 100",
             "nina": "SELECT patient FROM Vitals WHERE pulse > 120"}
    folder = tmp_path / "in" / "Vitals"
    records = vitals(hidden="none")
    write(folder, "p0.jsonl", records[:40])  # the SPs and the first readings
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    server.register([own(u, text) for u, text in texts.items()], SEES_PULSE)
    for user in texts:
        server.open_own(own_id(user, "q1"), user)
    rt = NetworkRuntime(spark, store, {"Vitals": str(folder)}, tmp_path / "out", tmp_path / "cp",
                        trigger="1 second").start()
    try:
        rt.process_all_available()
        (name, group), = rt.groups.items()  # one shielded group for the nurses
        query = group.query
        before = {u: rows(api.replay(SEES_PULSE, u, text, {"Vitals": str(folder)}, spark=spark))
                  for u, text in texts.items()}
        assert all(before.values())
        CatalogStore(store).save(NO_PULSE)  # the nurses' policy loses pulse: `NULL > 100` from now on
        assert rt.poll()
        assert {r.group for r in rt.running.values()} == {name}  # still members of the same group
        write(folder, "p1.jsonl", records[40:60])
        rt.process_all_available()
        write(folder, "p2.jsonl", records[60:])
        rt.process_all_available()
        rt.poll()
        assert rt.failures() == {}, rt.failures()
        assert rt.groups[name].failure is None and rt.groups[name].query is query and query.isActive
    finally:
        rt.stop()
    for user in texts:
        status = read_status(tmp_path / "out", user, own_id(user, "q1"))
        assert "cannot run" not in status["reason"], status
        # what she received before the change, and nothing after: her replay under the new policy is empty
        assert api.replay(NO_PULSE, user, texts[user], {"Vitals": str(folder)}, spark=spark) == []
        assert rows(read_user_rows(spark, tmp_path / "out", user, own_id(user, "q1"))) == before[user], user
