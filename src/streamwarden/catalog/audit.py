"""The audit trail: an append-only, hash-chained table of who did what, in the catalog store.

Each record has a sequence number (``seq``, 1, 2, ... without gaps), a UTC time, the
principal, the action, the object acted on, the outcome, the ids of the policies that
authorized or denied it, a request id and a short JSON detail. Its ``hash`` is the
SHA-256 of the canonical JSON (sorted keys, no spaces, UTF-8) of all those fields plus
``prev``, the previous record's hash (:data:`GENESIS` for the first). A one-row head
table keeps the last record's seq and hash, updated in the same transaction as each
append, and the next append chains to the head, not to whatever the table ends with.

**What goes in.** Names only: principals as :attr:`~streamwarden.catalog.identity.Principal.label`
gives them, actions, objects (``user:ann``, ``query:q1``), policy ids. Never a token (an
append holding anything shaped like one is refused), never a row value: the trail is
read by administrators who may not see the data. Text fields are single-line printable
text, so a record can never forge a line of ``audit show``.

**What** :func:`verify` **detects**, naming the first bad record: a record whose fields
or hash were changed (``changed``); a record deleted from the middle, the start or the
end (``deleted``: the seq gap, or the head naming a later record than the table
holds); records swapped or moved (``reordered``: a record chained to another than its
predecessor); a record added by hand behind the trail's back (``inserted``). **What it
cannot detect:** someone who can write to the store and knows this scheme can rewrite
the records from any point on, recompute every hash after it and set the head to match
(the hashes have no secret key); and deleting records from the end while setting the
head back. To catch those, keep the head (``audit verify`` prints it) somewhere the
store's writers cannot reach, and pass it later as an anchor: the trail must still hold
that record with that hash (which protects the records up to it; later ones, up to the
next anchor kept).

Appends are atomic (one transaction reads the head and inserts) and serialised within
a process by a lock; across processes the head's compare-and-set and the unique seq
make a losing writer retry. On PostgreSQL the head row is also read ``FOR UPDATE``, so a
writer in another process waits for the one ahead of it and then chains to its record
(SQLite has no row locks and ignores it).

    >>> import tempfile, os
    >>> from streamwarden.catalog.store import CatalogStore
    >>> store = CatalogStore("sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db"))
    >>> append(store, "user:ann", "query.register", "query:q1", "ok", policies=["p1"]).seq
    1
    >>> append(store, "user:bob", "query.rows", "query:q1", "denied").prev == records(store)[0].hash
    True
    >>> verify(store).ok, verify(store).count
    (True, 2)
    >>> with store.engine.begin() as conn:
    ...     _ = conn.execute(_audit.update().where(_audit.c.seq == 1).values(outcome="denied"))
    >>> verify(store).message
    'record 1 was changed: its fields no longer match its hash'
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping

from sqlalchemy import (Column, Integer, MetaData, RowMapping, String, Table, Text, create_engine, func, insert, select,
                        update)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError

from streamwarden.catalog.identity import PREFIX, looks_like_token
from streamwarden.catalog.store import CatalogStore, NoStore, create_tables
from streamwarden.errors import StreamwardenError

#: A record as a dict, or a row as SQLAlchemy reads it.
_Row = Mapping[str, Any] | RowMapping
#: The ``prev`` of the first record.
GENESIS = "0" * 64
MAX_TEXT = 256  # principal, object
MAX_DETAIL = 4096  # characters of the detail's canonical JSON
MAX_POLICIES = 1000
_ACTION = re.compile(r"[a-z][a-z0-9_.-]{0,63}")  # token.create, query.rows, catalog.put
_OUTCOME = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # ok, denied, refused, error
_RETRIES = 50  # a writer in another process took the seq: read the head again
#: What stands in a repaired record for anything shaped like a token.
REDACTED = PREFIX + "…redacted"
_TOKEN_RUN = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_-]*")  # a token and whatever it runs on into

Reason = Literal["changed", "deleted", "reordered", "inserted"]

_metadata = MetaData()
_audit = Table(
    "audit_trail", _metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("time", String(32), nullable=False),  # fixed-width UTC ISO text: hashed as stored, sorts as time
    Column("principal", String(MAX_TEXT), nullable=False),
    Column("action", String(64), nullable=False),
    Column("object", String(MAX_TEXT), nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("policies", Text, nullable=False),  # canonical JSON list of policy ids
    Column("request_id", String(128), nullable=True),
    Column("detail", Text, nullable=True),  # canonical JSON object
    Column("prev", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
)
_head = Table(
    "audit_head", _metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # always 1: one row
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)
_HASHED = ("seq", "time", "principal", "action", "object", "outcome", "policies", "request_id", "detail", "prev")
_lock = threading.Lock()  # one appender at a time in this process
_ready: "weakref.WeakSet[Engine]" = weakref.WeakSet()  # engines whose audit tables exist


class AuditError(StreamwardenError):
    """An audit record cannot be written as given (a field too long, multi-line, token-shaped, ...)."""


@dataclass(frozen=True)
class AuditRecord:
    """One record of the trail, as stored."""

    seq: int
    time: datetime
    principal: str
    action: str
    object: str
    outcome: str
    policies: tuple[str, ...]
    request_id: str | None
    detail: Mapping[str, Any] | None
    prev: str
    hash: str

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values (time as ISO-8601 UTC)."""
        return {"seq": self.seq, "time": _time_text(self.time), "principal": self.principal, "action": self.action,
                "object": self.object, "outcome": self.outcome, "policies": list(self.policies),
                "request_id": self.request_id, "detail": self.detail, "prev": self.prev, "hash": self.hash}

    def line(self) -> str:
        """One line of ``audit show``: every text field is single-line, so one record is one line.

        >>> AuditRecord(3, datetime(2026, 3, 1, 10, tzinfo=timezone.utc), "cli:root", "token.create", "user:ann",
        ...             "ok", ("p1",), "r1", {"token": "ab12"}, GENESIS, "f" * 64).line()
        '#3 2026-03-01T10:00:00.000000Z cli:root token.create user:ann ok policies=p1 request=r1 {"token":"ab12"}'
        """
        parts = [f"#{self.seq}", _time_text(self.time), self.principal, self.action, self.object, self.outcome]
        if self.policies:
            parts.append("policies=" + ",".join(self.policies))
        if self.request_id:
            parts.append(f"request={self.request_id}")
        if self.detail is not None:
            parts.append(_canonical(self.detail))
        return " ".join(parts)


@dataclass(frozen=True)
class VerifyResult:
    """What :func:`verify` found: ``ok``; ``count``, the records found intact (all of them
    when ``ok``; those before the first bad one otherwise); for a broken trail, the first
    bad record's ``bad_seq``, the ``reason`` and ``why`` in words; ``head``, the last intact
    record's (seq, hash), to keep elsewhere as an anchor."""

    ok: bool
    count: int
    bad_seq: int | None = None
    reason: Reason | None = None
    why: str = ""
    head: tuple[int, str] | None = None

    @property
    def message(self) -> str:
        """One line for the command line."""
        if self.ok:
            return f"audit trail intact: {self.count} records"
        return f"record {self.bad_seq} was {self.reason}: {self.why}"


# -- writing ---------------------------------------------------------------------------------
def append(store: str | CatalogStore | Engine, principal: str, action: str, object: str, outcome: str, *,
           policies: Iterable[str] = (), request_id: str | None = None, detail: Mapping[str, Any] | None = None,
           now: datetime | None = None) -> AuditRecord:
    """Append one record and return it. ``principal`` and ``object`` are names (at most
    256 printable characters on one line), ``action`` like ``token.create`` and
    ``outcome`` like ``ok`` or ``denied`` (lower-case words), ``policies`` policy ids,
    ``detail`` a small JSON object (at most 4096 characters). Nothing may hold a token or
    a row value: raises :class:`AuditError` for a bad field (nothing is written then).

    >>> import tempfile, os
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> append(CatalogStore(url), "user:ann", "query.create", "query:q1\\nforged line", "ok")
    Traceback (most recent call last):
    streamwarden.catalog.audit.AuditError: the audit record's object must be printable text on one line
    """
    values = _fields(principal, action, object, outcome, policies, request_id, detail,
                     datetime.now(timezone.utc) if now is None else now)
    with _opened(store) as engine, _lock:
        for _ in range(_RETRIES):
            try:
                with engine.begin() as conn:
                    return _append(conn, values)
            except (IntegrityError, Raced, OperationalError) as exc:
                if isinstance(exc, OperationalError) and not is_contention(exc):
                    raise
                why = _refusal(exc)  # another process appended between our read of the head and our write, the
                #                      database gave up on a deadlock, or the store refuses the record (said at the end)
    raise AuditError(f"could not append to the audit trail: {_RETRIES} concurrent writers were faster, or the store "
                     f"refuses the record ({why})")


def append_all(store: str | CatalogStore | Engine, entries: Iterable[Mapping[str, Any]]) -> int:
    """Append several records in one transaction (a service's writer: one commit per group of
    requests, not per request); each entry holds :func:`append`'s arguments by name. All
    fields are checked first: one bad entry raises :class:`AuditError` and nothing is written."""
    rows = _checked(entries)
    if not rows:
        return 0
    with _opened(store) as engine, _lock:
        for _ in range(_RETRIES):
            try:
                with engine.begin() as conn:
                    _append_chain(conn, rows)
                return len(rows)
            except (IntegrityError, Raced, OperationalError) as exc:
                if isinstance(exc, OperationalError) and not is_contention(exc):
                    raise
                why = _refusal(exc)
    raise AuditError(f"could not append to the audit trail: {_RETRIES} concurrent writers were faster, or the store "
                     f"refuses the records ({why})")


def _refusal(exc: Exception) -> str:
    """What the store said when an append lost its place (a race, or a constraint of the store's own)."""
    if isinstance(exc, (IntegrityError, OperationalError)):
        return clean_text(f"{type(exc.orig).__name__}: {exc.orig}", 160)
    return str(exc) or "the head moved"


def append_in(conn: Connection, entries: Iterable[Mapping[str, Any]]) -> None:
    """Append records (:func:`append_all`'s entries) in the caller's transaction, so that a
    change to the store and its records commit together or not at all
    (:mod:`streamwarden.catalog.changes`). The head row is written first, which takes the
    store's write lock (SQLite) or the row's (PostgreSQL): no other writer moves the head
    before these records are chained to it. Call :func:`ready` before the transaction opens.
    Raises :class:`AuditError` for a bad field and :class:`Raced` when another writer took
    the records' place (roll back, and try the whole transaction again)."""
    rows = _checked(entries)
    if not rows:
        return
    try:
        hold_head(conn)
        _append_chain(conn, rows)
    except IntegrityError as exc:  # a seq taken (a new trail's first records, raced), or the store refused
        raise Raced(_refusal(exc)) from exc


def hold_head(conn: Connection) -> None:
    """Lock the trail's head in the caller's transaction (an update that changes nothing: the
    write lock on SQLite, the row's on PostgreSQL). An audited change takes it *before* its own
    writes, so every transaction that appends takes its locks in one order, head first, and
    two changes can never wait for each other (PostgreSQL reported that deadlock when a
    change locked its rows first and the head second while a plain append held the head)."""
    conn.execute(update(_head).where(_head.c.id == 1).values(seq=_head.c.seq))


def is_contention(exc: BaseException) -> bool:
    """Did the database give up a transaction because of another one (PostgreSQL's deadlock
    or serialization failure, SQLite's busy store)? Such a transaction is simply tried again."""
    if not isinstance(exc, OperationalError):
        return False
    code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    return code in ("40P01", "40001") or "database is locked" in str(exc.orig)


def ready(engine: Engine) -> None:
    """Make the trail's tables in ``engine`` if missing: before a transaction that appends with
    :func:`append_in` opens (creating them inside it would wait for its own lock)."""
    if engine not in _ready:
        create_tables(engine, _metadata)
        with engine.begin() as conn:  # a new trail gets its head now, so that hold_head has a row to lock
            if conn.execute(select(_head.c.id)).first() is None and conn.execute(select(_audit.c.seq)).first() is None:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(_head).values(id=1, seq=0, hash=GENESIS))
                except IntegrityError:  # another writer made it first
                    pass
        _ready.add(engine)


def _checked(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each entry's stored fields, checked (:func:`_fields`)."""
    return [_fields(e["principal"], e["action"], e["object"], e["outcome"], e.get("policies", ()),
                    e.get("request_id"), e.get("detail"), e.get("now") or datetime.now(timezone.utc))
            for e in entries]


class Raced(Exception):
    """The head moved between reading it and updating it, or another writer took a record's seq."""


def _append(conn: Connection, values: dict[str, Any]) -> AuditRecord:
    """In one transaction: chain to the head, insert, move the head (compare-and-set)."""
    head = conn.execute(select(_head.c.seq, _head.c.hash).where(_head.c.id == 1).with_for_update()).first()
    if head is not None:
        last_seq, prev = head.seq, head.hash
    else:  # a new trail (or a lost head, which verify reports): chain to the table's last record
        last = conn.execute(select(_audit.c.seq, _audit.c.hash).order_by(_audit.c.seq.desc()).limit(1)).first()
        last_seq, prev = (last.seq, last.hash) if last is not None else (0, GENESIS)
    row = dict(values, seq=last_seq + 1, prev=prev)
    row["hash"] = _hash(row)
    conn.execute(insert(_audit).values(**row))  # IntegrityError if another writer took this seq
    if head is None:
        conn.execute(insert(_head).values(id=1, seq=row["seq"], hash=row["hash"]))  # IntegrityError if raced
    elif conn.execute(update(_head).where(_head.c.id == 1, _head.c.seq == last_seq)
                      .values(seq=row["seq"], hash=row["hash"])).rowcount != 1:
        raise Raced()
    return _record(row)


def _append_chain(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """:func:`_append` for several records: the head read once, the records chained in
    memory, inserted in one statement, the head moved once (compare-and-set)."""
    head = conn.execute(select(_head.c.seq, _head.c.hash).where(_head.c.id == 1).with_for_update()).first()
    if head is not None:
        last_seq, prev = head.seq, head.hash
    else:
        last = conn.execute(select(_audit.c.seq, _audit.c.hash).order_by(_audit.c.seq.desc()).limit(1)).first()
        last_seq, prev = (last.seq, last.hash) if last is not None else (0, GENESIS)
    chained = []
    seq = last_seq
    for values in rows:
        seq += 1
        row = dict(values, seq=seq, prev=prev)
        row["hash"] = prev = _hash(row)
        chained.append(row)
    conn.execute(insert(_audit), chained)  # IntegrityError if another writer took one of these seqs
    if head is None:
        conn.execute(insert(_head).values(id=1, seq=seq, hash=prev))
    elif conn.execute(update(_head).where(_head.c.id == 1, _head.c.seq == last_seq)
                      .values(seq=seq, hash=prev)).rowcount != 1:
        raise Raced()


def _fields(principal: str, action: str, object: str, outcome: str, policies: Iterable[str],
            request_id: str | None, detail: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """The stored (and hashed) text of each field, checked."""
    _text("principal", principal)
    _text("object", object)
    for what, value, pattern in (("action", action, _ACTION), ("outcome", outcome, _OUTCOME)):
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise AuditError(f"the audit record's {what} must be a lower-case word like "
                             f"{'token.create' if what == 'action' else 'ok'}, not {str(value)[:40]!r}")
    policy_ids = [policies] if isinstance(policies, str) else list(policies)
    if len(policy_ids) > MAX_POLICIES:
        raise AuditError(f"an audit record names at most {MAX_POLICIES} policies")
    for policy in policy_ids:
        _text("policy id", policy, limit=128)
    if request_id is not None:
        _text("request id", request_id, limit=128)
    detail_text = None
    if detail is not None:
        if not isinstance(detail, Mapping):
            raise AuditError("the audit record's detail must be a JSON object (a mapping)")
        try:
            detail_text = _canonical(dict(detail))
        except (TypeError, ValueError) as exc:
            raise AuditError(f"the audit record's detail is not JSON: {exc}") from None
        if len(detail_text) > MAX_DETAIL:
            raise AuditError(f"the audit record's detail is longer than {MAX_DETAIL} characters of JSON")
        if looks_like_token(detail_text):
            raise AuditError("the audit record's detail holds a token: the trail never holds one")
        try:  # a lone surrogate passes json.dumps but not the hash's UTF-8: refuse it here, not in the store
            detail_text.encode("utf-8")
        except UnicodeEncodeError:
            raise AuditError("the audit record's detail is not UTF-8 text (a lone surrogate)") from None
    if not isinstance(now, datetime):
        raise AuditError("the audit record's time must be a datetime")
    return {"time": _time_text(now), "principal": principal, "action": action, "object": object,
            "outcome": outcome, "policies": _canonical(policy_ids), "request_id": request_id, "detail": detail_text}


def _text(what: str, value: object, *, limit: int = MAX_TEXT) -> None:
    if not isinstance(value, str) or not value:
        raise AuditError(f"the audit record's {what} must be non-empty text")
    if len(value) > limit:
        raise AuditError(f"the audit record's {what} is longer than {limit} characters")
    if not value.isprintable():  # no newline, tab or control character: one record, one line
        raise AuditError(f"the audit record's {what} must be printable text on one line")
    if looks_like_token(value):
        raise AuditError(f"the audit record's {what} holds a token: the trail never holds one")


def writable(principal: Any, action: Any, object: Any, outcome: Any, *, policies: Any = (),
             request_id: Any = None, detail: Any = None, now: Any = None) -> tuple[dict[str, Any], str | None]:
    """:func:`append`'s arguments as it takes them, and why they had to be repaired (None: taken as given).

    A record :func:`append` would refuse is repaired, never dropped: the principal and the
    object are kept, cleaned (printable, one line, cut to length, anything shaped like a
    token replaced by :data:`REDACTED`); an action or outcome outside the grammar becomes
    ``other`` or ``unknown``, the one given kept (cleaned) in the detail; the detail is
    cleaned the same way (dropped if still too long) and says why under ``repaired``.

    >>> token = "swt_0123456789abcdef_" + "A" * 43
    >>> fields, why = writable("user:eve", "query.rows", "query:" + token, "ok")
    >>> fields["principal"], fields["object"], fields["detail"]["repaired"]
    ('user:eve', 'query:swt_…redacted', "the audit record's object holds a token: the trail never holds one")
    >>> writable("anonymous", "http.x|y", "/v1/queries", "ok")[0]["action"]
    'other'
    """
    arguments = {"principal": principal, "action": action, "object": object, "outcome": outcome,
                 "policies": policies, "request_id": request_id, "detail": detail, "now": now}
    try:
        _fields(principal, action, object, outcome, policies, request_id, detail,
                datetime.now(timezone.utc) if now is None else now)
        return arguments, None
    except AuditError as exc:
        why = clean_text(str(exc), 200)
    except Exception as exc:  # a field whose str() or iteration fails: repair it all the same
        why = f"the audit record could not be read ({type(exc).__name__})"
    return _repaired(arguments, why), why


def clean_text(value: Any, limit: int = MAX_TEXT, empty: str = "?") -> str:
    """``value`` as a record's text field takes it: printable text on one line (``?`` for
    anything else), at most ``limit`` characters, anything shaped like a token redacted.

    >>> clean_text("query:swt_0123456789abcdef_" + "A" * 43), clean_text("a\\nb\\ud800"), clean_text("")
    ('query:swt_…redacted', 'a?b?', '?')
    """
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = type(value).__name__
    text = "".join(c if c.isprintable() else "?" for c in text[:limit])
    if looks_like_token(text):
        text = _TOKEN_RUN.sub(REDACTED, text)[:limit]  # a cut cannot make a token: it only shortens the text
    return text or empty


def _repaired(arguments: Mapping[str, Any], why: str) -> dict[str, Any]:
    """Every field of a refused record made one :func:`append` takes (see :func:`writable`)."""
    action, outcome = arguments["action"], arguments["outcome"]
    detail: dict[str, Any] = {}
    if not (isinstance(action, str) and _ACTION.fullmatch(action)):
        detail["given_action"], action = clean_text(action, 64), "other"
    if not (isinstance(outcome, str) and _OUTCOME.fullmatch(outcome)):
        detail["given_outcome"], outcome = clean_text(outcome, 32), "unknown"
    original = _clean_json(arguments["detail"]) if arguments["detail"] is not None else None
    if original is not None:
        detail["given"] = original
    detail["repaired"] = why
    if len(_canonical(detail)) > MAX_DETAIL:
        detail.pop("given")
        detail["dropped"] = f"the detail was longer than {MAX_DETAIL} characters"
    policies = arguments["policies"]
    try:
        listed = [policies] if isinstance(policies, str) else list(policies)
    except Exception:
        listed = []
    now = arguments["now"]
    return {"principal": clean_text(arguments["principal"], empty="unknown"), "action": action,
            "object": clean_text(arguments["object"]), "outcome": outcome,
            "policies": [clean_text(p, 128) for p in listed[:MAX_POLICIES]],
            "request_id": None if arguments["request_id"] is None else clean_text(arguments["request_id"], 128),
            "detail": detail, "now": now if isinstance(now, datetime) else None}


def _clean_json(value: Any, depth: int = 0) -> Any:
    """A JSON value with every string cleaned (:func:`clean_text`), cut at depth 8 and 100 entries a level."""
    if value is None or isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2 ** 63):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth < 8 and isinstance(value, Mapping):
        return {clean_text(k, 64): _clean_json(v, depth + 1) for k, v in list(value.items())[:100]}
    if depth < 8 and isinstance(value, (list, tuple)):
        return [_clean_json(v, depth + 1) for v in value[:100]]
    return clean_text(value, MAX_DETAIL)


# -- reading ---------------------------------------------------------------------------------
def records(store: str | CatalogStore | Engine, since: datetime | str | None = None,
            principal: str | None = None) -> list[AuditRecord]:
    """The records in order (``seq``), those at or after ``since`` (a datetime or ISO-8601
    text) and of ``principal`` (exact) when given. Reading does not verify: use :func:`verify`."""
    query = select(_audit).order_by(_audit.c.seq)
    if since is not None:
        query = query.where(_audit.c.time >= _time_text(_since(since)))  # fixed-width UTC text sorts as time
    if principal is not None:
        query = query.where(_audit.c.principal == principal)
    with _opened(store) as engine, engine.connect() as conn:
        return [_record(row._mapping) for row in conn.execute(query)]


def verify(store: str | CatalogStore | Engine, anchor: tuple[int, str] | None = None) -> VerifyResult:
    """Check the whole chain and the head; with ``anchor`` (a (seq, hash) printed by an
    earlier verify and kept elsewhere), also that the trail still holds that record with
    that hash. See the module's text for what this detects and what it cannot. It reads
    the trail in batches; on SQLite without WAL, appends wait while it reads (up to
    SQLite's busy timeout), so verify a long trail of a busy store in quiet hours.

    >>> import tempfile, os
    >>> store = CatalogStore("sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db"))
    >>> for i in range(3):
    ...     _ = append(store, "user:ann", "query.rows", f"query:q{i}", "ok")
    >>> with store.engine.begin() as conn:
    ...     _ = conn.execute(_audit.delete().where(_audit.c.seq == 3))
    >>> verify(store).message
    'record 3 was deleted: the trail ends at record 2, but its head names record 3'
    """
    # Appends may go on while this runs: the walk stops at the head read first, and what
    # lies beyond the head is checked in one statement at the end.
    with _opened(store) as engine, engine.connect() as conn:
        head_row = conn.execute(select(_head.c.seq, _head.c.hash).where(_head.c.id == 1)).first()
        head = None if head_row is None else (int(head_row.seq), str(head_row.hash))
        walk = _Walk(anchor)
        result = conn.execution_options(yield_per=1000).execute(
            select(_audit).where(_audit.c.seq <= (head[0] if head else 0)).order_by(_audit.c.seq))
        try:
            for row in result:
                if not walk.step(row._mapping):
                    break
        finally:
            result.close()
        problem = walk.problem(lambda digest: _seq_of(conn, digest)) or _head_problem(walk.last, head) \
            or _beyond_head_problem(conn, head) or walk.anchor_problem()
    if problem is not None:
        seq, reason, why = problem
        return VerifyResult(False, walk.count, seq, reason, why, walk.last)
    return VerifyResult(True, walk.count, head=walk.last)


def parse_anchor(text: str) -> tuple[int, str]:
    """``SEQ:HASH`` (as ``audit verify`` prints the head) as a (seq, hash) pair.

    >>> parse_anchor("12:" + "a" * 64)[0]
    12
    """
    seq, _, digest = text.partition(":")
    if not seq.isdigit() or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise AuditError(f"--anchor expects SEQ:HASH as audit verify prints the head (e.g. 12:3fa9...), "
                         f"got {text[:80]!r}")
    return int(seq), digest


Problem = tuple[int, Reason, str]  # the first bad record's seq, the reason, why in words


class _Walk:
    """The chain check, one record at a time in seq order (a trail may not fit in memory)."""

    def __init__(self, anchor: tuple[int, str] | None) -> None:
        self.expected_seq, self.expected_prev = 1, GENESIS
        self.count = 0
        self.last: tuple[int, str] | None = None
        self.anchor, self.anchor_seen = anchor, False
        self.bad: Mapping[str, Any] | None = None  # the record the chain breaks at

    def step(self, row: _Row) -> bool:
        """Check one record; False (and it is kept) when the chain breaks at it."""
        if row["seq"] != self.expected_seq or row["prev"] != self.expected_prev or _hash(row) != row["hash"]:
            self.bad = dict(row)
            return False
        self.count += 1
        self.last = (row["seq"], row["hash"])
        self.expected_seq, self.expected_prev = row["seq"] + 1, row["hash"]
        if self.anchor is not None and row["seq"] == self.anchor[0]:
            self.anchor_seen = True
            if row["hash"] != self.anchor[1]:
                self.bad = {"anchor": True, "seq": row["seq"]}
                return False
        return True

    def problem(self, seq_of: Callable[[str], int | None]) -> Problem | None:
        """Why the chain broke (``seq_of`` finds the record with a given hash, if any)."""
        row = self.bad
        if row is None:
            return None
        seq = row["seq"]
        if "anchor" in row:
            return seq, "changed", "its hash is not the anchor's: the trail was rewritten from it or before it"
        if seq > self.expected_seq:
            missing = (f"record {self.expected_seq} is" if seq == self.expected_seq + 1
                       else f"records {self.expected_seq} to {seq - 1} are")
            return self.expected_seq, "deleted", f"{missing} missing (the next record is {seq})"
        if seq < self.expected_seq:
            return seq, "changed", f"its sequence number is out of place (expected {self.expected_seq})"
        intact = _hash(row) == row["hash"]
        if row["prev"] != self.expected_prev:
            chained_to = seq_of(row["prev"])
            if chained_to is not None and chained_to != seq - 1:
                place = f"not to record {seq - 1}" if seq > 1 else "but it comes first"
                return seq, "reordered", f"it is chained to record {chained_to}, {place}"
            if intact and seq > 1:  # it is as written: its predecessor was rewritten (hash recomputed)
                return seq - 1, "changed", f"its hash is no longer the one record {seq} was chained to"
            return seq, "changed", "it is not chained to the record before it"
        return seq, "changed", "its fields no longer match its hash"

    def anchor_problem(self) -> Problem | None:
        if self.anchor is None or self.anchor_seen:
            return None
        return self.anchor[0], "deleted", "the anchor names it, but the trail no longer holds it"


def _head_problem(last: tuple[int, str] | None, head: tuple[int, str] | None) -> Problem | None:
    """The intact chain (up to the head) must end at the record the head names."""
    if head is None:
        return None  # a new trail, or a lost head: _beyond_head_problem tells them apart
    last_seq = 0 if last is None else last[0]
    if head[0] > last_seq:
        return last_seq + 1, "deleted", (f"the trail ends at record {last_seq}, but its head names record {head[0]}"
                                         if last_seq else f"the trail is empty, but its head names record {head[0]}")
    if last is not None and head[1] != last[1]:
        return last_seq, "changed", "it is not the record the trail's head names (it, or the head, was rewritten)"
    return None


def _beyond_head_problem(conn: Connection, head: tuple[int, str] | None) -> Problem | None:
    """Records after the head as it is *now* (one statement: appends running meanwhile move
    the head in the same transaction as their record, so they never show up here)."""
    current = select(_head.c.seq).where(_head.c.id == 1).scalar_subquery()
    first = conn.execute(select(func.min(_audit.c.seq)).where(_audit.c.seq > func.coalesce(current, 0))).scalar()
    if first is None:
        return None
    if head is None and conn.execute(select(_head.c.seq)).first() is None:
        return first, "deleted", "the trail's head (which names its last record) is missing"
    return first, "inserted", "it lies beyond the trail's head: it was not appended through the trail"


def _seq_of(conn: Connection, digest: str) -> int | None:
    found = conn.execute(select(_audit.c.seq).where(_audit.c.hash == digest).limit(1)).first()
    return None if found is None else int(found.seq)


# -- helpers ---------------------------------------------------------------------------------
@contextmanager
def _opened(store: str | CatalogStore | Engine) -> Iterator[Engine]:
    """An engine with the audit tables. A URL is opened for this call only and must name a
    store that exists: a mistyped URL is an error, never a new, empty trail."""
    if isinstance(store, (Engine, CatalogStore)):
        engine, owned = (store if isinstance(store, Engine) else store.engine), False
    else:
        the_store = CatalogStore(store, create=False)
        if the_store.path is not None and not the_store.path.is_file():
            raise NoStore(f"no store at {the_store.url}")
        engine, owned = create_engine(the_store.url), True
    try:
        if owned:
            create_tables(engine, _metadata)
        else:
            ready(engine)
        yield engine
    finally:
        if owned:
            engine.dispose()


def _hash(row: _Row) -> str:
    return hashlib.sha256(_canonical({name: row[name] for name in _HASHED}).encode("utf-8")).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _time_text(value: datetime) -> str:
    """Fixed width (``2026-03-01T10:00:00.000000Z``), so text order is time order."""
    utc = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _since(value: datetime | str) -> datetime:
    if isinstance(value, datetime):
        return value
    from streamwarden.language.expressions import parse_timestamp

    try:
        return parse_timestamp(value)
    except ValueError:
        raise AuditError(f"--since {value[:80]!r} is not an ISO-8601 timestamp") from None


def _record(row: _Row) -> AuditRecord:
    try:
        time = datetime.fromisoformat(row["time"].removesuffix("Z")).replace(tzinfo=timezone.utc)
        policies = tuple(json.loads(row["policies"]))
        detail = None if row["detail"] is None else json.loads(row["detail"])
    except (ValueError, TypeError, AttributeError):
        raise AuditError(f"audit record {row['seq']} is unreadable (run `streamwarden audit verify`)") from None
    return AuditRecord(row["seq"], time, row["principal"], row["action"], row["object"], row["outcome"], policies,
                       row["request_id"], detail, row["prev"], row["hash"])


__all__ = ["append_all", "append_in", "AuditError", "AuditRecord", "GENESIS", "REDACTED", "Raced", "VerifyResult",
           "append", "clean_text", "parse_anchor", "ready", "records", "verify", "writable"]
