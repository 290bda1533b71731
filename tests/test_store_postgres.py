"""The catalog store's contract on both backends it supports: SQLite (a file) and PostgreSQL
(by URL, on a throwaway server, see tests/postgres.py). Every test here runs on both, except
the one that needs two processes on one server; PostgreSQL cases are skipped, with the
reason, where no server can be started. No Spark.

What differs between the two and is pinned here: timestamps come back from PostgreSQL in
the session's time zone (the test server runs in UTC+05:30 on purpose) and must still be
aware UTC; PostgreSQL enforces column lengths and reserved words (``user``, ``grant``,
``end``) that SQLite lets pass; and only PostgreSQL has row locks, so only there do
appenders in separate processes wait for each other on the audit trail's head.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import text

from streamwarden.catalog import audit
from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.identity import (TokenError, authenticate, create_token, list_tokens,
                                           revoke_provider_tokens, revoke_token, revoke_tokens, token_id)
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.store import CatalogStore, NoStore, UnknownName, sqlite_url
from streamwarden.cli.main import main
from streamwarden.errors import StreamwardenError

ROOT = Path(__file__).resolve().parent.parent
CATALOG = """
streams:
  S: {schema: {ts: timestamp, v: int}}
  HeartRate: {schema: {ts: timestamp, Patient_id: int, bpm: int}, key: Patient_id, punctuated_by: Patient_id}
roles: {R: {}}
users: {ann: {roles: [R]}, bob: {roles: [R]}}
actions:
  a: {start: "2026-03-01T10:00:00Z", end: null, target: 5.0}
"""
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
PLUS_ONE = timezone(timedelta(hours=1))


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store's URL: a SQLite file not created yet, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "s.db")
    return request.getfixturevalue("pg_store_url")


@pytest.fixture
def store(url: str) -> Iterator[CatalogStore]:
    """A store holding :data:`CATALOG`; its connections closed after (before the database goes).
    The catalog is loaded for no actor: the tests of the trail start from an empty one."""
    store = CatalogStore(url, actor=None)
    store.save(load_catalog_text(CATALOG))
    store.engine.dispose()
    store = CatalogStore(url)
    yield store
    store.engine.dispose()


@pytest.fixture
def server(store: CatalogStore, tmp_path: Path) -> AuthorizationServer:
    """The authorization server of ``store`` with q1 (ann, bob) and q2 (ann) registered. The SP
    folder is named: a non-SQLite store has no folder of its own."""
    server = AuthorizationServer(store=store, sp_folder=tmp_path / "sps")
    server.register([RegisteredQuery("q1", ("ann", "bob"), "SELECT * FROM S"),
                     RegisteredQuery("q2", ("ann",), "SELECT * FROM S", "public")])
    return server


def sql(store: CatalogStore, statement: str) -> None:
    """Raw SQL on the backend, as someone with write access to the database would run it."""
    with store.engine.begin() as conn:
        conn.execute(text(statement))


def assert_utc(value: datetime | None, expected: datetime) -> None:
    """``value`` is ``expected`` as an aware UTC datetime (not merely the same instant)."""
    assert value is not None and value.tzinfo is not None and value.utcoffset() == timedelta(0), value
    assert value == expected


# -- catalog, actions, users ------------------------------------------------------------------
def test_an_empty_store_holds_no_catalog_and_is_not_opened_for_changes(url) -> None:
    assert not CatalogStore(url, create=False).has_catalog()
    with pytest.raises(NoStore):
        CatalogStore.existing(url)
    assert CatalogStore(url).users() == frozenset()


def test_a_saved_catalog_loads_back_with_its_live_actions(store) -> None:
    catalog = store.load()
    assert set(catalog.streams) == {"S", "HeartRate"} and set(catalog.users) == {"ann", "bob"}
    assert catalog.text == load_catalog_text(CATALOG).text
    assert_utc(catalog.actions["a"].start, T0)
    assert catalog.actions["a"].end is None and catalog.actions["a"].target == 5.0
    assert store.users() == frozenset({"ann", "bob"}) and CatalogStore.existing(store.url).has_catalog()


def test_set_action_is_live_and_survives_a_reload_unless_reset(store) -> None:
    store.set_action("a", target=7.0, end=T0 + timedelta(hours=1))
    assert store.save(load_catalog_text(CATALOG)).kept == ("a",)
    assert store.actions()["a"].target == 7.0
    assert_utc(store.actions()["a"].end, T0 + timedelta(hours=1))
    store.set_action("a", start=None)
    assert store.actions()["a"].start is None
    assert store.save(load_catalog_text(CATALOG), reset_actions=True).reset == ("a",)
    assert store.actions()["a"].target == 5.0 and store.actions()["a"].end is None


def test_action_times_come_back_as_aware_utc_whatever_offset_or_none_they_were_given(store) -> None:
    if store.engine.dialect.name == "postgresql":  # else this would pass by the server's zone alone
        with store.engine.connect() as conn:
            assert conn.execute(text("SHOW TIME ZONE")).scalar() != "UTC"
    store.set_action("a", start=datetime(2026, 3, 1, 11, 0, tzinfo=PLUS_ONE))
    assert_utc(store.actions()["a"].start, T0)
    store.set_action("a", start=datetime(2026, 3, 1, 10, 0))  # naive: taken as UTC (not the server's zone)
    assert_utc(store.actions()["a"].start, T0)


def test_set_action_refuses_an_unknown_action_or_field(store) -> None:
    with pytest.raises(UnknownName, match="unknown action 'b'"):
        store.set_action("b", target=1.0)
    with pytest.raises(ValueError, match="unknown action fields"):
        store.set_action("a", colour="red")


# -- the authorization server ------------------------------------------------------------------
def test_registrations_round_trip_and_unregister(server) -> None:
    assert server.registered() == {"q1": ("ann", "bob"), "q2": ("ann",)}
    assert [(q.id, q.users, q.level) for q in server.registrations()] == [("q1", ("ann", "bob"), None),
                                                                           ("q2", ("ann",), "public")]
    server.register([RegisteredQuery("q1", ("bob",), "SELECT v FROM S")])  # again: users replaced
    assert server.registered()["q1"] == ("bob",)
    server.unregister("q2")
    assert set(server.registered()) == {"q1"}
    with pytest.raises(UnknownName, match="unknown query 'q2'"):
        server.unregister("q2")


def test_grants_and_revocations_are_logged_in_order_and_published(server) -> None:
    server.grant("q1", "ann", "2026-03-01T10:00:00Z")
    server.revoke("q1", "ann", datetime(2026, 3, 1, 11, 5, tzinfo=PLUS_ONE))
    server.grant("q1", "bob")  # now
    changes = server.changes()
    assert [(c.line, c.query, c.user, c.grant) for c in changes] == [(1, "q1", "ann", True), (2, "q1", "ann", False),
                                                                     (3, "q1", "bob", True)]
    assert_utc(changes[0].ts, T0)
    assert_utc(changes[1].ts, T0 + timedelta(minutes=5))
    assert abs(changes[2].ts - datetime.now(timezone.utc)) < timedelta(minutes=1)
    assert sorted(p.name for p in server.sp_folder.iterdir()) == [f"sp-{n:012d}.jsonl" for n in (1, 2, 3)]
    assert '"ts": "2026-03-01T10:05:00Z"' in (server.sp_folder / "sp-000000000002.jsonl").read_text()


def test_a_grant_with_an_expiry_is_a_grant_and_its_revocation(server) -> None:
    server.grant("q2", "ann", "2026-03-01T10:00:00Z", until="2026-03-01T12:00:00+01:00")
    assert [(c.grant, c.ts) for c in server.changes()] == [(True, T0), (False, T0 + timedelta(hours=1))]
    with pytest.raises(StreamwardenError, match="must expire after it starts"):
        server.grant("q2", "ann", "2026-03-01T10:00:00Z", until="2026-03-01T10:00:00Z")
    assert len(server.changes()) == 2


def test_check_refuses_unknown_queries_and_users_and_notes_unlisted_ones(server) -> None:
    assert server.check("q1", "bob") == []
    assert "not listed for q2" in server.check("q2", "bob")[0]
    with pytest.raises(UnknownName, match="unknown query 'q9'"):
        server.check("q9", "ann")
    with pytest.raises(UnknownName, match="unknown user 'eve'"):
        server.grant("q1", "eve")
    assert server.changes() == ()


def test_publish_writes_the_sps_a_crash_left_unwritten(server) -> None:
    server.grant("q1", "ann", "2026-03-01T10:00:00Z")
    server.grant("q1", "bob", "2026-03-01T10:00:00Z")
    (server.sp_folder / "sp-000000000002.jsonl").unlink()
    assert server.publish() == 1 and server.publish() == 0


def test_a_store_from_before_query_texts_gets_the_columns(url, tmp_path) -> None:
    """``_add_missing_columns`` is raw SQL (ALTER TABLE): it must run on both backends."""
    store = CatalogStore(url)
    sql(store, "CREATE TABLE registered_queries (id VARCHAR NOT NULL PRIMARY KEY, users TEXT NOT NULL, "
               "registered_at TIMESTAMP WITH TIME ZONE NOT NULL)")
    sql(store, "INSERT INTO registered_queries (id, users, registered_at) "
               "VALUES ('old', '[\"ann\"]', '2026-03-01 10:00:00')")
    server = AuthorizationServer(store=store, sp_folder=tmp_path / "sps")
    assert server.registered() == {"old": ("ann",)} and server.registrations() == ()  # no text: to register again
    server.register([RegisteredQuery("old", ("ann",), "SELECT * FROM S", "public")])
    assert [(q.id, q.level) for q in server.registrations()] == [("old", "public")]
    store.engine.dispose()


# -- identity ------------------------------------------------------------------------------------
def test_a_user_token_authenticates_until_revoked(store) -> None:
    token = create_token(store.url, "ann", admin=True)
    principal = authenticate(store, token)
    assert principal is not None and (principal.label, principal.admin) == ("user:ann", True)
    assert authenticate(store.url, token) == principal and authenticate(store, token[:-1] + "x") is None
    assert revoke_tokens(store, "ann") == 1 and authenticate(store, token) is None
    with pytest.raises(UnknownName, match="unknown user 'eve'"):
        create_token(store, "eve")


def test_a_token_expires(store) -> None:
    token = create_token(store, "bob", expires=timedelta(hours=1), now=T0)
    assert authenticate(store, token, now=T0 + timedelta(minutes=59)) is not None
    assert authenticate(store, token, now=T0 + timedelta(hours=1)) is None
    with pytest.raises(TokenError):
        create_token(store, "bob", expires=timedelta(days=400))


def test_provider_tokens_by_stream_and_key(store) -> None:
    keyed = create_token(store, provider_stream="HeartRate", provider_key="7")
    whole = create_token(store, provider_stream="S")
    assert authenticate(store, keyed).label == "provider:HeartRate/7" and authenticate(store, keyed).key == 7
    assert authenticate(store, whole).label == "provider:S"
    assert revoke_provider_tokens(store, "HeartRate", "8") == 0
    assert revoke_provider_tokens(store, "HeartRate", 7) == 1 and authenticate(store, keyed) is None
    assert revoke_token(store, token_id(whole)) and not revoke_token(store, token_id(whole))
    assert authenticate(store, whole) is None


def test_token_listings_have_aware_utc_times(store) -> None:
    token = create_token(store, "ann", expires=timedelta(days=1), now=datetime(2026, 3, 1, 11, 0, tzinfo=PLUS_ONE))
    revoke_token(store, token_id(token), now=T0 + timedelta(hours=2))
    [info] = list_tokens(store)
    assert (info.id, info.label) == (token_id(token), "user:ann")
    assert_utc(info.created_at, T0)
    assert_utc(info.expires_at, T0 + timedelta(days=1))
    assert_utc(info.revoked_at, T0 + timedelta(hours=2))


# -- audit ----------------------------------------------------------------------------------------
def fill(store: CatalogStore, n: int = 5) -> list[audit.AuditRecord]:
    return [audit.append(store, f"user:u{i % 2}", "query.rows", f"query:q{i}", "ok", policies=[f"p{i}"],
                         request_id=f"r{i}", detail={"i": i}, now=T0 + timedelta(seconds=i)) for i in range(n)]


def test_audit_records_round_trip_and_filter(store) -> None:
    written = fill(store)
    read = audit.records(store.url)
    assert read == written and [r.seq for r in read] == [1, 2, 3, 4, 5]
    assert read[0].prev == audit.GENESIS and all(b.prev == a.hash for a, b in zip(read, read[1:]))
    assert_utc(read[2].time, T0 + timedelta(seconds=2))
    assert [r.seq for r in audit.records(store, since=T0 + timedelta(seconds=3))] == [4, 5]
    assert [r.seq for r in audit.records(store, since="2026-03-01T11:00:03+01:00")] == [4, 5]
    assert [r.seq for r in audit.records(store, principal="user:u1")] == [2, 4]
    result = audit.verify(store)
    assert (result.ok, result.count, result.head) == (True, 5, (5, written[-1].hash))


def test_audit_verify_finds_a_record_changed_in_sql(store) -> None:
    fill(store)
    sql(store, "UPDATE audit_trail SET outcome = 'denied' WHERE seq = 3")
    result = audit.verify(store.url)
    assert (result.ok, result.bad_seq, result.reason, result.count) == (False, 3, "changed", 2)


def test_audit_verify_finds_a_record_deleted_in_sql(store) -> None:
    fill(store)
    sql(store, "DELETE FROM audit_trail WHERE seq = 2")
    result = audit.verify(store)
    assert (result.ok, result.bad_seq, result.reason) == (False, 2, "deleted")
    assert result.why == "record 2 is missing (the next record is 3)"


def test_concurrent_audit_appends_from_threads_keep_one_chain(store) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(25):
                audit.append(store if n % 2 else store.url, f"user:w{n}", "query.rows", f"query:q{i}", "ok")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (audit.verify(store).ok, audit.verify(store).count) == (True, 100)
    assert [r.seq for r in audit.records(store)] == list(range(1, 101))


def test_changes_from_threads_and_the_services_appends_keep_one_chain(store) -> None:
    """Each change appends its record in its own transaction, after locking the trail's head
    (PostgreSQL: the row; SQLite: the file), while plain appends (the service's writer) go on."""
    errors: list[BaseException] = []

    def changer(n: int) -> None:
        try:
            mine = CatalogStore(store.url, actor=f"app:w{n}")
            for i in range(10):
                if n == 3:
                    audit.append(store, "user:svc", "query.rows", f"query:q{i}", "ok")
                else:
                    mine.set_action("a", target=float(n * 100 + i))
            mine.engine.dispose()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=changer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    result = audit.verify(store)
    assert (result.ok, result.count) == (True, 40), result.message
    found = [(r.principal, r.action) for r in audit.records(store)]
    assert all(found.count((f"app:w{n}", "action.update")) == 10 for n in range(3))


APPENDER = """
import sys
from streamwarden.catalog.audit import append
for i in range(int(sys.argv[3])):
    append(sys.argv[1], "user:p" + sys.argv[2], "query.rows", f"query:q{i}", "ok")
"""


def test_audit_appends_from_two_processes_on_postgres_keep_one_chain(pg_store_url) -> None:
    """Two processes share no lock: each append reads the head FOR UPDATE, so one waits for
    the other. Both also create the audit tables at once (the store has none yet)."""
    CatalogStore(pg_store_url).engine.dispose()  # the database holds the store, not yet the trail
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, pg_store_url, str(n), "40"], env=env,
                              stderr=subprocess.PIPE) for n in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
    result = audit.verify(pg_store_url)
    assert (result.ok, result.count) == (True, 80), result.message
    principals = [r.principal for r in audit.records(pg_store_url)]
    assert principals.count("user:p0") == principals.count("user:p1") == 40


# -- the command line -------------------------------------------------------------------------
def test_the_cli_creates_a_token_and_verifies_the_trail(url, tmp_path, capsys) -> None:
    (tmp_path / "c.yaml").write_text(CATALOG)
    assert main(["check", str(tmp_path / "c.yaml"), "--store", url]) == 0
    assert main(["token", "create", "--user", "ann", "--expires", "30 days", "--store", url]) == 0
    token = capsys.readouterr().out.splitlines()[-1]
    assert authenticate(url, token).label == "user:ann"
    assert main(["audit", "verify", "--store", url]) == 0
    assert capsys.readouterr().out.startswith("audit trail intact: 2 records; head 2:")  # the catalog, the token
    assert main(["token", "revoke", "--user", "ann", "--store", url]) == 0
    assert authenticate(url, token) is None
    sql(CatalogStore(url), "UPDATE audit_trail SET object = 'user:bob' WHERE seq = 2")
    capsys.readouterr()
    assert main(["audit", "verify", "--store", url]) == 1
    assert capsys.readouterr().out.startswith("audit trail broken: record 2 was changed")
