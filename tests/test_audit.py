"""The hash-chained audit trail (issue 13, audit): appends, reading, and what verify finds
after each kind of tampering (and what it cannot find without an anchor). No Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlalchemy import create_engine, delete, insert, select, update
from sqlalchemy.pool import StaticPool

from streamwarden.catalog import audit
from streamwarden.catalog.audit import GENESIS, AuditError, append, records, verify
from streamwarden.catalog.store import CatalogStore, NoStore, sqlite_url

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path: Path) -> CatalogStore:
    return CatalogStore(sqlite_url(tmp_path / "s.db"))


def fill(where, n: int = 5) -> list[audit.AuditRecord]:
    return [append(where, f"user:u{i % 3}", "query.rows", f"query:q{i}", "ok" if i % 2 else "denied",
                   policies=[f"p{i}", "p0"], request_id=f"r{i}", detail={"rows": i, "why": "é"},
                   now=T0 + timedelta(seconds=i)) for i in range(n)]


def execute(store: CatalogStore, statement) -> None:
    with store.engine.begin() as conn:
        conn.execute(statement)


def rehash(store: CatalogStore, seq: int, **values) -> None:
    """What an attacker who knows the scheme does: change a record and recompute its hash."""
    with store.engine.begin() as conn:
        row = dict(conn.execute(select(audit._audit).where(audit._audit.c.seq == seq)).first()._mapping)
        row.update(values)
        conn.execute(update(audit._audit).where(audit._audit.c.seq == seq).values(**values, hash=audit._hash(row)))


# -- appending and reading ----------------------------------------------------------------------
def test_a_group_appended_at_once_chains_like_single_appends(store) -> None:
    fill(store, 2)
    entries = [{"principal": "user:ann", "action": "query.rows", "object": f"query:q{i}", "outcome": "ok",
                "request_id": f"g{i}", "now": T0} for i in range(3)]
    assert audit.append_all(store, entries) == 3
    fill(store, 1)
    read = records(store)
    assert [r.seq for r in read] == [1, 2, 3, 4, 5, 6]
    assert all(b.prev == a.hash for a, b in zip(read, read[1:])) and verify(store).ok
    with pytest.raises(AuditError):  # one bad entry: nothing of the group is written
        audit.append_all(store, [entries[0], {**entries[1], "object": "two\nlines"}])
    assert len(records(store)) == 6


def test_records_chain_from_genesis(store) -> None:
    written = fill(store)
    read = records(store)
    assert read == written and [r.seq for r in read] == [1, 2, 3, 4, 5]
    assert read[0].prev == GENESIS and all(b.prev == a.hash for a, b in zip(read, read[1:]))
    assert read[2].policies == ("p2", "p0") and read[2].detail == {"rows": 2, "why": "é"}
    assert read[2].time == T0 + timedelta(seconds=2) and read[2].time.tzinfo is not None
    result = verify(store)
    assert (result.ok, result.count, result.head) == (True, 5, (5, read[-1].hash))
    assert result.message == "audit trail intact: 5 records"


def test_an_empty_trail_is_intact(store) -> None:
    assert verify(store).ok and verify(store).count == 0 and records(store) == []


def test_the_hash_is_sha256_of_the_canonical_fields_and_the_previous_hash(store) -> None:
    import hashlib

    first = append(store, "user:ann", "query.create", "query:q1", "ok", now=T0)
    fields = {"seq": 1, "time": "2026-03-01T10:00:00.000000Z", "principal": "user:ann", "action": "query.create",
              "object": "query:q1", "outcome": "ok", "policies": "[]", "request_id": None, "detail": None,
              "prev": GENESIS}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    assert first.hash == hashlib.sha256(canonical.encode()).hexdigest()


def test_records_filter_by_time_and_principal(store) -> None:
    fill(store, 6)
    assert [r.seq for r in records(store, since=T0 + timedelta(seconds=3))] == [4, 5, 6]
    assert [r.seq for r in records(store, since="2026-03-01T11:00:03+01:00")] == [4, 5, 6]  # any offset, as UTC
    assert [r.seq for r in records(store, principal="user:u1")] == [2, 5]
    assert records(store, since=T0 + timedelta(days=1)) == []
    with pytest.raises(AuditError, match="not an ISO-8601 timestamp"):
        records(store, since="yesterday")


def test_times_are_utc_and_naive_ones_taken_as_utc(store) -> None:
    append(store, "user:a", "x", "y", "ok", now=datetime(2026, 3, 1, 11, 0, tzinfo=timezone(timedelta(hours=1))))
    append(store, "user:a", "x", "y", "ok", now=datetime(2026, 3, 1, 10, 0))
    assert {r.time for r in records(store)} == {T0}


@pytest.mark.parametrize("field, value, message", [
    ("principal", "user:ann\n#9 forged", "printable text on one line"),
    ("principal", "", "non-empty"),
    ("principal", "x" * 257, "longer than 256"),
    ("object", "query:q1\r", "printable"),
    ("object", "swt_0123456789abcdef_" + "A" * 43, "holds a token"),
    ("principal", "Bearer swt_0123456789abcdef_" + "A" * 43, "holds a token"),
    ("action", "Token Create", "lower-case word"),
    ("outcome", "OK; DROP", "lower-case word"),
    ("policies", ["p1", "p\n2"], "policy id"),
    ("request_id", "r\x00", "request id"),
    ("detail", {"token": "swt_0123456789abcdef_" + "A" * 43}, "holds a token"),
    ("detail", {"x": object()}, "not JSON"),
    ("detail", {"x": float("nan")}, "not JSON"),
    ("detail", {"x": "y" * 5000}, "longer than 4096"),
    ("detail", ["not", "a", "mapping"], "JSON object"),
])
def test_bad_fields_are_refused_and_nothing_is_written(store, field, value, message) -> None:
    fields = dict(principal="user:ann", action="query.rows", object="query:q1", outcome="ok")
    extra = {}
    if field in fields:
        fields[field] = value
    else:
        extra[field] = value
    with pytest.raises(AuditError, match=message):
        append(store, **fields, **extra)
    assert records(store) == [] and verify(store).ok


def test_a_missing_store_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    missing = sqlite_url(tmp_path / "none.db")
    for call in (lambda: verify(missing), lambda: records(missing),
                 lambda: append(missing, "user:a", "x", "y", "ok")):
        with pytest.raises(NoStore):
            call()
    assert not (tmp_path / "none.db").exists()


def test_a_url_an_engine_and_a_store_reach_the_same_trail(store) -> None:
    append(store, "user:a", "x", "y", "ok")
    append(store.url, "user:b", "x", "y", "ok")
    append(store.engine, "user:c", "x", "y", "ok")
    assert [r.principal for r in records(store.url)] == ["user:a", "user:b", "user:c"] and verify(store.url).ok


# -- tampering ----------------------------------------------------------------------------------
CHANGES = {"time": "2026-03-01T09:00:00.000000Z", "principal": "user:mallory", "action": "query.delete",
           "object": "query:other", "outcome": "allowed", "policies": '["p9"]', "request_id": "forged",
           "detail": '{"rows":0}', "prev": "1" * 64, "hash": "2" * 64}


@pytest.mark.parametrize("field", sorted(CHANGES))
@pytest.mark.parametrize("seq", [1, 3, 5])
def test_changing_any_field_of_any_record_is_found_there(store, field, seq) -> None:
    fill(store)
    execute(store, update(audit._audit).where(audit._audit.c.seq == seq).values(**{field: CHANGES[field]}))
    result = verify(store)
    assert (result.ok, result.bad_seq, result.reason) == (False, seq, "changed"), result
    assert result.message.startswith(f"record {seq} was changed: ")


@pytest.mark.parametrize("seq", [1, 3, 5])
def test_a_changed_record_with_a_recomputed_hash_is_found_by_the_next_link_or_the_head(store, seq) -> None:
    fill(store)
    rehash(store, seq, outcome="allowed")
    result = verify(store)
    assert (result.ok, result.bad_seq, result.reason) == (False, seq, "changed"), result


@pytest.mark.parametrize("seq, why", [(1, "record 1 is missing"), (3, "record 3 is missing"),
                                      (5, "the trail ends at record 4, but its head names record 5")])
def test_deleting_a_record_is_found_at_its_place(store, seq, why) -> None:
    fill(store)
    execute(store, delete(audit._audit).where(audit._audit.c.seq == seq))
    result = verify(store)
    assert (result.ok, result.bad_seq, result.reason) == (False, seq, "deleted") and why in result.why, result


def test_deleting_several_or_all_records_is_found(store) -> None:
    fill(store, 8)
    execute(store, delete(audit._audit).where(audit._audit.c.seq.in_([3, 4, 5])))
    assert (verify(store).bad_seq, verify(store).why) == (3, "records 3 to 5 are missing (the next record is 6)")
    execute(store, delete(audit._audit))
    result = verify(store)
    assert (result.ok, result.bad_seq, result.reason, result.count) == (False, 1, "deleted", 0)


def test_an_append_after_a_deletion_at_the_end_does_not_hide_it(store) -> None:
    fill(store)
    execute(store, delete(audit._audit).where(audit._audit.c.seq == 5))
    append(store, "user:a", "x", "y", "ok")  # chains to the head (record 5), not to the table's last
    result = verify(store)
    assert (result.bad_seq, result.reason) == (5, "deleted")


@pytest.mark.parametrize("a, b", [(1, 2), (2, 4), (4, 5), (1, 5)])
def test_swapping_two_records_is_found_at_the_first(store, a, b) -> None:
    fill(store)
    table = audit._audit
    execute(store, update(table).where(table.c.seq == a).values(seq=-1))
    execute(store, update(table).where(table.c.seq == b).values(seq=a))
    execute(store, update(table).where(table.c.seq == -1).values(seq=b))
    result = verify(store)
    assert (result.ok, result.bad_seq, result.reason) == (False, a, "reordered"), result


def test_a_record_inserted_behind_the_trails_back_is_found(store) -> None:
    written = fill(store)
    row = dict(written[-1].to_json(), seq=6, prev=written[-1].hash, policies="[]", detail=None)
    row["hash"] = audit._hash(row)
    execute(store, insert(audit._audit).values(**row))
    result = verify(store)
    assert (result.ok, result.bad_seq, result.reason) == (False, 6, "inserted"), result


def test_a_deleted_head_is_found(store) -> None:
    fill(store)
    execute(store, delete(audit._head))
    assert (verify(store).ok, verify(store).reason) == (False, "deleted")


def test_a_rewritten_suffix_passes_alone_but_not_against_an_anchor(store) -> None:
    """The limit verify documents: whoever can write the store and knows the scheme can
    rewrite the chain from a record on and set the head; an anchor kept elsewhere catches it."""
    fill(store)
    anchor = verify(store).head
    for seq in range(3, 6):  # rewrite record 3 and recompute every later hash and the head
        previous = records(store)[seq - 2].hash
        rehash(store, seq, outcome="allowed" if seq == 3 else "ok", prev=previous)
    last = records(store)[-1]
    execute(store, update(audit._head).values(seq=last.seq, hash=last.hash))
    assert verify(store).ok  # undetectable without an anchor
    result = verify(store, anchor)
    assert (result.ok, result.bad_seq, result.reason) == (False, 5, "changed")
    assert verify(store, (2, records(store)[1].hash)).ok  # an anchor before the rewrite still holds
    execute(store, delete(audit._audit).where(audit._audit.c.seq == 5))
    execute(store, update(audit._head).values(seq=4, hash=records(store)[-1].hash))  # the end cut, the head set back
    assert verify(store).ok and verify(store, anchor).reason == "deleted"


def test_parse_anchor() -> None:
    assert audit.parse_anchor("7:" + "ab" * 32) == (7, "ab" * 32)
    for bad in ("7", "x:" + "a" * 64, "7:" + "A" * 64, "7:abc", "-1:" + "a" * 64):
        with pytest.raises(AuditError, match="SEQ:HASH"):
            audit.parse_anchor(bad)


# -- concurrency --------------------------------------------------------------------------------
def test_concurrent_appenders_in_one_process_keep_one_chain(store) -> None:
    errors: list[BaseException] = []
    _ = store.engine  # the file exists before the writers start (a URL must name an existing store)

    def writer(n: int) -> None:
        try:
            for i in range(50):
                append(store if n % 2 else store.url, f"user:w{n}", "query.rows", f"query:q{i}", "ok")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    result = verify(store)
    assert (result.ok, result.count) == (True, 400)
    assert [r.seq for r in records(store)] == list(range(1, 401))
    assert {r.principal for r in records(store)} == {f"user:w{n}" for n in range(8)}


def test_concurrent_appenders_in_several_processes_keep_one_chain(store) -> None:
    """No shared lock across processes: the head's compare-and-set and the unique seq make
    a writer that lost the race read the head again."""
    _ = store.engine  # the file exists before the writers start
    script = ("import sys\nfrom streamwarden.catalog.audit import append\n"
              "for i in range(25):\n    append(sys.argv[1], 'user:p' + sys.argv[2], 'query.rows', 'query:q', 'ok')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    procs = [subprocess.Popen([sys.executable, "-c", script, store.url, str(n)], env=env, stderr=subprocess.PIPE)
             for n in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    result = verify(store)
    assert (result.ok, result.count) == (True, 75)


# -- property: any single tampering is found at or before the tampered record -------------------------------
FIELD_VALUES = {
    "time": st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)).map(
        lambda d: d.isoformat(timespec="microseconds") + "Z"),
    "principal": st.text(min_size=1, max_size=20), "action": st.text(min_size=1, max_size=10),
    "object": st.text(min_size=1, max_size=20), "outcome": st.sampled_from(["ok", "denied", "error", ""]),
    "policies": st.lists(st.text(max_size=5), max_size=3).map(json.dumps),
    "request_id": st.one_of(st.none(), st.text(max_size=10)),
    "detail": st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2).map(json.dumps)),
    "prev": st.text("0123456789abcdef", min_size=64, max_size=64), "hash": st.text("0123456789abcdef", min_size=64,
                                                                                   max_size=64),
}
APPENDS = st.lists(st.tuples(st.sampled_from(["user:ann", "user:bob", "provider:S/7"]),
                             st.sampled_from(["query.create", "query.rows", "token.create"]),
                             st.text(st.characters(min_codepoint=32, max_codepoint=0x2fff, categories=["L", "N", "P"]),
                                     min_size=1, max_size=12),
                             st.sampled_from(["ok", "denied"]),
                             st.lists(st.sampled_from(["p1", "p2", "p3"]), max_size=2)),
                   min_size=1, max_size=12)


@st.composite
def tamperings(draw):
    appended = draw(APPENDS)
    n = len(appended)
    kind = draw(st.sampled_from(["field", "delete", "swap", "rehash"] if n > 1 else ["field", "delete", "rehash"]))
    seq = draw(st.integers(1, n))
    if kind == "field":
        field = draw(st.sampled_from(sorted(FIELD_VALUES)))
        return appended, ("field", seq, field, draw(FIELD_VALUES[field]))
    if kind == "swap":
        other = draw(st.integers(1, n).filter(lambda s: s != seq))
        return appended, ("swap", min(seq, other), max(seq, other), None)
    if kind == "rehash":
        return appended, ("rehash", seq, "outcome", "tampered")
    return appended, ("delete", seq, None, None)


def memory_store() -> CatalogStore:
    engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    store = CatalogStore("sqlite:///:memory:", create=False)
    store._engine = engine
    return store


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tamperings())
def test_any_single_tampering_is_found_at_or_before_the_tampered_record(case) -> None:
    appended, (kind, seq, field, value) = case
    store = memory_store()
    for principal, action, obj, outcome, policies in appended:
        append(store, principal, action, obj, outcome, policies=policies)
    table = audit._audit
    before = records(store)
    if kind == "field":
        stored = {"time": audit._time_text(before[seq - 1].time), "policies": json.dumps(list(before[seq - 1].policies),
                                                                                         separators=(",", ":")),
                  "detail": None}.get(field, getattr(before[seq - 1], field, None))
        if value == stored:
            return  # not a change
        execute(store, update(table).where(table.c.seq == seq).values(**{field: value}))
    elif kind == "delete":
        execute(store, delete(table).where(table.c.seq == seq))
    elif kind == "swap":
        other = field
        execute(store, update(table).where(table.c.seq == seq).values(seq=-1))
        execute(store, update(table).where(table.c.seq == other).values(seq=seq))
        execute(store, update(table).where(table.c.seq == -1).values(seq=other))
    else:
        rehash(store, seq, outcome=value)
    result = verify(store)
    assert not result.ok and result.bad_seq is not None and result.bad_seq <= seq, (case, result)


def test_verify_while_appends_go_on_finds_nothing_wrong(store) -> None:
    """verify reads the head first and checks what lies beyond it in one statement, so
    records appended during a verify are never taken for records inserted by hand."""
    fill(store, 3)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            append(store.url, "user:w", "query.rows", "query:q", "ok")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        results = [verify(store.url) for _ in range(30)]
    finally:
        stop.set()
        thread.join()
    assert all(r.ok for r in results), [r for r in results if not r.ok][:1]
    assert verify(store).count == len(records(store)) > 3


# -- the service's writer: any record, any store error (issue 24, finding 9) -----------------------
from sqlalchemy.exc import OperationalError  # noqa: E402

from streamwarden.service import trail as trail_module  # noqa: E402
from streamwarden.service.trail import AuditTrail  # noqa: E402

TOKEN_SHAPED = "swt_0123456789abcdef_" + "A" * 43
ANY_TEXT = st.text(max_size=300) | st.sampled_from(["", "http.X|Y", "X" * 70, TOKEN_SHAPED, "a\nb", "\ud800"])
ANY_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
                         lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
                         max_leaves=20)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(principal=ANY_TEXT, action=ANY_TEXT, object=ANY_TEXT, outcome=ANY_TEXT,
       policies=st.lists(ANY_TEXT, max_size=3) | ANY_TEXT, request_id=st.none() | ANY_TEXT,
       detail=st.none() | st.dictionaries(ANY_TEXT, ANY_VALUE, max_size=5) | ANY_VALUE)
def test_any_record_is_writable_and_keeps_a_valid_principal(principal, action, object, outcome, policies,
                                                            request_id, detail) -> None:
    fields, why = audit.writable(principal, action, object, outcome, policies=policies, request_id=request_id,
                                 detail=detail, now=T0)
    written = append(memory_store(), **fields)  # never refused
    if why is None:
        assert (written.principal, written.action, written.object) == (principal, action, object)
    else:
        assert written.detail["repaired"] == why
        assert not audit.looks_like_token(json.dumps(written.to_json()))
    if isinstance(principal, str) and principal.isprintable() and 0 < len(principal) <= 256 \
            and TOKEN_SHAPED not in principal:
        assert written.principal == principal  # a valid principal is never replaced


def test_a_token_shaped_object_is_redacted_not_the_record_replaced(store) -> None:
    fields, why = audit.writable("user:eve", "query.rows", f"query:u03eve_{TOKEN_SHAPED}", "not-found",
                                 request_id="r1", detail={"status": 404})
    record = append(store, **fields)
    assert (record.principal, record.action, record.object) == ("user:eve", "query.rows", "query:u03eve_swt_…redacted")
    assert record.detail["given"] == {"status": 404} and "token" in why


def test_a_lone_surrogate_in_a_detail_is_refused_as_a_field_not_failed_in_the_store(store) -> None:
    with pytest.raises(AuditError, match="UTF-8"):
        append(store, "user:ann", "query.rows", "query:q1", "ok", detail={"why": "\ud800"})
    assert verify(store).ok and records(store) == []


@pytest.fixture
def writer(store: CatalogStore):
    trail = AuditTrail(store)
    yield trail
    trail.close(timeout=5)


@pytest.mark.parametrize("action", ["http." + "x" * 70, "http.x|y", "http.X|Y", "", "query rows"])
def test_the_writer_survives_a_record_it_refuses_and_keeps_its_principal(writer, store, action) -> None:
    writer.record("user:eve", action, "/v1/queries", "refused", request_id="r1", detail={"status": 405})
    writer.record("user:ann", "query.list", "queries", "ok", request_id="r2")
    assert writer.flush(timeout=10)
    writer.record("user:bob", "query.list", "queries", "ok", request_id="r3")  # the writer is still there
    assert writer.flush(timeout=10) and writer.problem() is None
    found = records(store)
    assert [(r.principal, r.request_id) for r in found] == [("user:eve", "r1"), ("user:ann", "r2"), ("user:bob", "r3")]
    assert found[0].action == "other" and found[0].detail["given_action"] == (action[:64] or "?")
    assert verify(store).ok


def _failing(monkeypatch, fails: int | None, calls: list[int]) -> None:
    """The store fails the trail's next ``fails`` appends (None: all of them)."""
    real = trail_module.append_all

    def append_all(store, entries):
        calls.append(len(entries))
        if fails is None or len(calls) <= fails:
            raise OperationalError("INSERT INTO audit_trail ...", {}, Exception("disk I/O error"))
        return real(store, entries)

    monkeypatch.setattr(trail_module, "append_all", append_all)


def test_a_failing_store_is_retried_and_nothing_is_lost_or_reordered(writer, store, monkeypatch, caplog) -> None:
    calls: list[int] = []
    _failing(monkeypatch, 3, calls)
    for i in range(5):
        writer.record(f"user:u{i}", "query.rows", f"query:q{i}", "ok", request_id=f"r{i}")
    assert writer.flush(timeout=20)
    assert writer.problem() is None and writer.lost == 0
    assert [r.request_id for r in records(store)] == [f"r{i}" for i in range(5)]  # none a substitute
    assert all(r.detail is None for r in records(store))
    assert "cannot write" in caplog.text and "disk I/O error" in caplog.text


def test_an_unwritable_store_makes_the_trail_unhealthy_and_no_wait_hangs(writer, store, monkeypatch) -> None:
    calls: list[int] = []
    _failing(monkeypatch, None, calls)
    writer.record("user:ann", "query.list", "queries", "ok", request_id="r1")
    assert not writer.flush(timeout=0.5)  # bounded: the store never takes it
    assert writer.problem() == "the audit trail cannot be written (the log says why)"
    started = time.monotonic()
    writer.close(timeout=2)
    assert time.monotonic() - started < 4
    assert writer.lost == 1 and writer.problem() == "the audit trail is closed"


def test_a_record_the_store_refuses_is_written_as_a_substitute_naming_its_request(writer, store, monkeypatch) -> None:
    real = trail_module.append_all

    def append_all(store, entries):  # the store refuses one record (whatever the reason), takes the others
        if any(e["object"] == "query:poison" for e in entries):
            raise OperationalError("INSERT ...", {}, Exception("value too long"))
        return real(store, entries)

    monkeypatch.setattr(trail_module, "append_all", append_all)
    for i, obj in enumerate(["query:q0", "query:poison", "query:q2"]):
        writer.record("user:eve", "query.rows", obj, "ok", policies=("p1",), request_id=f"r{i}")
    assert writer.flush(timeout=10) and writer.problem() is None
    found = records(store)
    assert [(r.principal, r.request_id) for r in found] == [("user:eve", "r0"), ("user:eve", "r1"), ("user:eve", "r2")]
    assert found[1].detail == {"repaired": "the store refused the record (OperationalError: value too long)"}
    assert verify(store).ok


def test_a_dead_writer_is_reported_and_flush_does_not_hang(writer, monkeypatch) -> None:
    monkeypatch.setattr(writer._thread, "is_alive", lambda: False)  # as if it had died
    writer.record("user:ann", "query.list", "queries", "ok")
    assert writer.problem() == "the audit trail's writer stopped"
    assert writer.flush(timeout=0.2) in (True, False)  # returns (the real writer may still have written it)
