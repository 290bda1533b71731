"""Nothing a member does stops its group (issue 34): a policy change that makes a member's plan
fold to nothing, a joiner whose history is gone, a group whose micro-batch fails for a reason
of the machine's — each time the group's other members keep receiving exactly their rows, and
what failed says why in its own words.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery, own_id
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.runtime.network import NetworkRuntime, read_status, read_user_rows

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
VITALS = """
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, hospital: string, pulse: int}
    key: patient
    punctuated_by: patient
roles: {Doctor: {}, Nurse: {}}
users:
  dr_lee: {roles: [Doctor]}
  nurse_kim: {roles: [Nurse]}
  nurse_ana: {roles: [Nurse]}
"""
PULSES = "SELECT patient, pulse FROM Vitals WHERE pulse > 100"
PATIENTS = "SELECT patient, hospital FROM Vitals WHERE patient > 0"


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def vitals(first: int, count: int, *, policies: bool = False) -> list[dict]:
    """Readings of patients 1-4 (every SP lets doctors and nurses read everything); their SPs first."""
    sps = [{"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "{Doctor, Nurse}",
            "sign": "+", "ts": iso(T0), "sn": 1, "patient": p} for p in range(1, 5)] if policies else []
    return sps + [{"ts": iso(T0 + timedelta(seconds=i)), "patient": 1 + i % 4, "hospital": "north",
                   "pulse": 60 + (i * 7) % 90, "sp_ts": iso(T0), "sp_csn": 1} for i in range(first, first + count)]


def write(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def own(user: str, text: str) -> RegisteredQuery:
    return RegisteredQuery(own_id(user, "q1"), (user,), text, owner=user, opens=())


def register(server: AuthorizationServer, texts: dict[str, str], catalog: Catalog | None = None) -> None:
    server.register([own(u, t) for u, t in texts.items()], catalog)
    for user in texts:
        server.open_own(own_id(user, "q1"), user)


def rows_of(spark, out: Path, user: str) -> Counter:  # type: ignore[no-untyped-def]
    return Counter(json.dumps(r, sort_keys=True) for r in read_user_rows(spark, out, user, own_id(user, "q1")))


def replayed(spark, catalog: Catalog, user: str, text: str, folder: Path) -> Counter:  # type: ignore[no-untyped-def]
    rows = api.replay(catalog, user, text, {"Vitals": str(folder)}, spark=spark)
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def test_a_policy_that_hides_a_members_predicate_attribute_leaves_the_shielded_group_running(spark, tmp_path):
    """The demo's last part (issue 34): the nurses' new policy hides pulse; nurse_kim's plan becomes
    ``NULL > 100`` and folds to nothing, yet the group's stateful Security Shield commits its state
    at every micro-batch, nurse_ana (the same group) receives every row of hers, and when the old
    policy returns nurse_kim receives again."""
    before = load_catalog_text(VITALS + "policies:\n"
                               "  - {id: nurses, subject: Nurse, streams: [Vitals], privilege: read}\n", "v.yaml")
    hiding = load_catalog_text(VITALS + "policies:\n"
                               "  - {id: nurses, subject: Nurse, streams: [Vitals], attributes: [patient, hospital],"
                               " privilege: read}\n", "v.yaml")
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register(server, {"nurse_kim": PULSES, "nurse_ana": PATIENTS}, before)
    folder, out = tmp_path / "in" / "Vitals", tmp_path / "out"
    write(folder, "a.jsonl", vitals(0, 60, policies=True))
    rt = NetworkRuntime(spark, store, {"Vitals": str(folder)}, out, tmp_path / "cp", trigger="1 second").start()
    try:
        rt.process_all_available()
        (group,) = rt.groups.values()
        assert {r.group for r in rt.running.values()} == {group.key}  # both nurses in the one shielded group
        kim_before = sum(rows_of(spark, out, "nurse_kim").values())
        assert kim_before > 0
        CatalogStore(store).save(hiding)
        rt.poll()
        write(folder, "b.jsonl", vitals(60, 60))
        rt.process_all_available()
        assert group.query is not None and group.query.isActive and group.failure is None
        assert sum(rows_of(spark, out, "nurse_kim").values()) == kim_before  # NULL > 100: nothing more
        CatalogStore(store).save(before)
        rt.poll()
        write(folder, "c.jsonl", vitals(120, 60))
        rt.process_all_available()
        assert rt.failures() == {}
        assert group.query is not None and group.query.isActive
    finally:
        rt.stop()
    # and its checkpoint loads: a restart carries on where it stopped
    write(folder, "d.jsonl", vitals(180, 60))
    again = NetworkRuntime(spark, store, {"Vitals": str(folder)}, out, tmp_path / "cp").start(available_now=True)
    try:
        again.await_termination()
        assert again.failures() == {} and all(g.failure is None for g in again.groups.values())
    finally:
        again.stop()
    whole = tmp_path / "whole"
    whole.mkdir()
    for name in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"):
        shutil.copy(folder / name, whole / name)
    assert rows_of(spark, out, "nurse_ana") == replayed(spark, before, "nurse_ana", PATIENTS, whole)
    # nurse_kim's pipeline of the middle emitted nothing (it saw NULL pulses), so the one that comes
    # back with the old policy resumes where it left, as a pipeline of her own resumes from its
    # checkpoint: a change applies to the rows emitted after it
    assert rows_of(spark, out, "nurse_kim") == replayed(spark, before, "nurse_kim", PULSES, whole)


PLAIN = load_catalog_text("""
streams:
  Readings: {schema: {ts: timestamp, sensor: int, ward: string, value: double}}
roles: {Reader: {}}
users: {ann: {roles: [Reader]}, bob: {roles: [Reader]}}
policies:
  - {id: all, subject: Reader, streams: [Readings], privilege: read}
""", "plain.yaml")


def readings(first: int, count: int) -> list[dict]:
    return [{"ts": iso(T0 + timedelta(seconds=i)), "sensor": i, "ward": f"w{i % 3}", "value": float(i % 50)}
            for i in range(first, first + count)]


def selection(limit: int) -> str:
    return f"SELECT sensor, value FROM Readings WHERE value > {limit}"


def test_a_joiner_whose_history_is_gone_fails_alone_and_names_the_file(spark, tmp_path) -> None:
    """An operator archives a file the group read long ago; bob registers: his backfill cannot be
    computed, so he alone fails (his status names the file), and ann's rows go on."""
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register(server, {"ann": selection(10)}, PLAIN)
    folder, out = tmp_path / "in" / "Readings", tmp_path / "out"
    write(folder, "a.jsonl", readings(0, 100))
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, out, tmp_path / "cp", trigger="1 second").start()
    try:
        rt.process_all_available()
        (folder / "a.jsonl").unlink()  # archived
        register(server, {"bob": selection(20)})
        rt.poll()
        write(folder, "b.jsonl", readings(100, 100))
        rt.process_all_available()
        write(folder, "c.jsonl", readings(200, 100))
        rt.process_all_available()
        (group,) = rt.groups.values()
        assert group.query is not None and group.query.isActive and group.failure is None
        bob = rt.running[next(n for n, r in rt.running.items() if r.pipeline.query.id == own_id("bob", "q1"))]
        assert bob.failure is not None and "a.jsonl" in bob.failure
        rt.poll()  # nothing changed in the store: the status says what happened
        assert "a.jsonl" in read_status(out, "bob", own_id("bob", "q1"))["reason"]
    finally:
        rt.stop()
    expected = tmp_path / "expected"
    write(expected, "all.jsonl", readings(0, 300))
    ann = api.replay(PLAIN, "ann", selection(10), {"Readings": str(expected)}, spark=spark)
    assert rows_of(spark, out, "ann") == Counter(json.dumps(r, sort_keys=True) for r in ann)


def test_a_late_member_gets_its_history_beside_the_group_and_exactly_once(spark, tmp_path) -> None:
    """bob's backfill runs in the group's worker, not in its micro-batch; with the history and the
    live batches interleaved, bob has every row of his own replay once."""
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register(server, {"ann": selection(10)}, PLAIN)
    folder, out = tmp_path / "in" / "Readings", tmp_path / "out"
    for part in range(3):
        write(folder, f"{part}.jsonl", readings(100 * part, 100))
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, out, tmp_path / "cp", trigger="1 second").start()
    try:
        rt.process_all_available()
        register(server, {"bob": selection(20)})
        rt.poll()
        write(folder, "3.jsonl", readings(300, 100))
        rt.process_all_available()
        (group,) = rt.groups.values()
        assert not list((group.checkpoint / "backfills").glob("*.json"))  # done, its record gone
    finally:
        rt.stop()
    expected = tmp_path / "expected"
    write(expected, "all.jsonl", readings(0, 400))
    for user, limit in (("ann", 10), ("bob", 20)):
        rows = api.replay(PLAIN, user, selection(limit), {"Readings": str(expected)}, spark=spark)
        assert rows_of(spark, out, user) == Counter(json.dumps(r, sort_keys=True) for r in rows), user


def test_a_group_whose_micro_batch_fails_restarts_from_its_checkpoint_and_loses_nothing(spark, tmp_path) -> None:
    """ann's output folder is blocked (a file where her folder goes): the group's micro-batch fails,
    the group says why in the machine's own words, and once the folder is free again it restarts
    from its checkpoint by itself and delivers every row, once."""
    store = sqlite_url(tmp_path / "store.db")
    server = AuthorizationServer(store)
    register(server, {"ann": selection(10)}, PLAIN)
    folder, out = tmp_path / "in" / "Readings", tmp_path / "out"
    write(folder, "a.jsonl", readings(0, 100))
    (out / "ann").mkdir(parents=True)
    blocker = out / "ann" / own_id("ann", "q1")
    blocker.write_text("not a folder")
    rt = NetworkRuntime(spark, store, {"Readings": str(folder)}, out, tmp_path / "cp", trigger="1 second")
    try:
        rt.start()
        (group,) = rt.groups.values()
        if group.query is not None:
            try:
                group.query.processAllAvailable()
            except Exception:
                pass
        rt.check()
        assert group.failure is not None and "awaitResult" not in group.failure and "Py4J" not in group.failure
        assert "File exists" in group.failure or "Not a directory" in group.failure, group.failure
        blocker.unlink()
        rt.process_all_available()  # restarted (its first restart is at once) and caught up
        assert group.query is not None and group.query.isActive and rt.failures() == {}
        write(folder, "b.jsonl", readings(100, 100))
        rt.process_all_available()
    finally:
        rt.stop()
    expected = tmp_path / "expected"
    write(expected, "all.jsonl", readings(0, 200))
    ann = api.replay(PLAIN, "ann", selection(10), {"Readings": str(expected)}, spark=spark)
    assert rows_of(spark, out, "ann") == Counter(json.dumps(r, sort_keys=True) for r in ann)
