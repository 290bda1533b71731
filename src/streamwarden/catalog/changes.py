"""Every change made to a store is an audit record, in the trail the service writes too.

The methods that change what a store holds — :meth:`CatalogStore.save
<streamwarden.catalog.store.CatalogStore.save>` and ``set_action``, the authorization
server's ``register``, ``unregister``, ``grant``, ``revoke``, ``load`` and ``open_owns``,
and the token functions — each declare what they do (an action, an object, a detail) and
run through :func:`audited`: the change and its records commit in one database
transaction, or neither does (a record the trail cannot write undoes the change). A change
refused with a :class:`~streamwarden.errors.StreamwardenError` is recorded ``refused``
(it changed nothing) and the error raised again. The actions and objects are those the
service records for the same changes: ``catalog.update catalog``, ``action.update
action:a``, ``grant.create query:q1``, ``grant.revoke``, ``query.create``,
``query.delete``, ``token.create user:ann``, ``token.revoke``.

**Who.** A store is opened for an *actor*, who its changes are recorded under:
:data:`OPERATOR` (the default) is ``cli:<name>``, the name being ``$STREAMWARDEN_OPERATOR``
when set, else the OS user's (:func:`operator_principal`); a program may name another
(``actor="app:billing"``); ``None`` records nothing, for a caller whose own trail
records the change (the service: its trail records every request, and must not hold
a second record of the same change). A principal the trail cannot hold as given (a
newline, a control character, something shaped like a token) is cleaned, as the
service's fields are, and the record's detail says ``repaired`` and why.

    >>> import os, tempfile
    >>> from sqlalchemy import create_engine, text
    >>> from streamwarden.catalog.audit import records
    >>> engine = create_engine("sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db"))
    >>> with audited(engine, "app:demo", "action.update", "action:a", {"target": 5}) as change:
    ...     _ = change.commit(lambda conn: conn.execute(text("CREATE TABLE t (x INTEGER)")))
    >>> [(r.principal, r.action, r.object, r.outcome, r.detail) for r in records(engine)]
    [('app:demo', 'action.update', 'action:a', 'ok', {'target': 5})]
"""

from __future__ import annotations

import os
import secrets
from enum import Enum
from typing import Any, Callable, Literal, Mapping, TypeVar

from sqlalchemy.engine import Connection, Engine

from streamwarden.errors import StreamwardenError

#: The environment variable naming the operator (see :func:`operator_principal`).
OPERATOR_ENV = "STREAMWARDEN_OPERATOR"
#: How often a change's transaction is tried when its records lose their place in the trail
#: to another writer (in practice only while a new trail gets its first record).
ATTEMPTS = 5


class _Default(Enum):
    OPERATOR = "the operator"


#: The default actor: the operator, ``cli:<$STREAMWARDEN_OPERATOR or the OS user>``.
OPERATOR = _Default.OPERATOR
#: Who a change is recorded under: a principal's name, :data:`OPERATOR`, or None (not here).
Actor = str | None | Literal[_Default.OPERATOR]
T = TypeVar("T")


def operator_principal() -> str:
    """``cli:<name>``: the operator's name from ``$STREAMWARDEN_OPERATOR``, else the OS user's
    (``uid<N>`` when there is no login name), as given: a name the trail cannot hold is
    repaired when it is written (:func:`~streamwarden.catalog.audit.writable`).

    >>> os.environ[OPERATOR_ENV] = "alice"
    >>> operator_principal()
    'cli:alice'
    >>> del os.environ[OPERATOR_ENV]
    """
    name = os.environ.get(OPERATOR_ENV)
    if not name:
        import getpass

        try:
            name = getpass.getuser()
        except Exception:  # no login name and no passwd entry (some containers)
            name = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"cli:{name}"


def principal_of(actor: Actor) -> str | None:
    """The principal ``actor`` records under (None: nothing is recorded)."""
    return operator_principal() if actor is OPERATOR else actor


def check_actor(store_actor: Actor, named: Actor) -> None:
    """Refuse a call that names another actor than the store handle it is given: the actor
    belongs to the handle (``CatalogStore(url, actor=...)``), and a change must not be
    recorded under one name while the caller believes it is recorded under another."""
    if named is not OPERATOR and named != store_actor:
        raise ValueError(f"the store was opened for actor {store_actor!r}, not {named!r}: open it with "
                         "CatalogStore(url, actor=...) for the actor its changes are recorded under")


class AuditedChange:
    """One change and its audit records (see :func:`audited`): ``action``, ``object`` and
    ``detail`` say what it does, and may be completed while it runs; ``each`` lists the
    records of a change of several things at once (``(action, object, detail)``: one per
    query of a registration), in place of the one record."""

    def __init__(self, engine: Engine, actor: Actor, action: str, object: str,
                 detail: Mapping[str, Any] | None = None):
        self.engine = engine
        self.principal = principal_of(actor)
        self.action, self.object = action, object
        self.detail: dict[str, Any] = dict(detail or {})
        self.each: list[tuple[str, str, Mapping[str, Any]]] | None = None
        self.request_id = secrets.token_hex(8)  # one for all the records of this change
        self.committed = False
        self._unwritten = False  # its records could not be written: the change was undone, not refused

    @property
    def recording(self) -> bool:
        """Whether this change is recorded here (a detail that costs a read is computed only then)."""
        return self.principal is not None

    def __enter__(self) -> "AuditedChange":
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if isinstance(exc, StreamwardenError) and self.recording and not (self.committed or self._unwritten):
            self._refused(exc)
        return False

    def commit(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` in one transaction that also appends this change's records
        (``ok``), and return what it returns. A :class:`StreamwardenError` it raises is a
        refusal (nothing committed; recorded ``refused`` when the block ends). Records the
        trail cannot write roll the change back and raise
        :class:`~streamwarden.catalog.audit.AuditError`."""
        if self.principal is None:
            with self.engine.begin() as conn:
                result = work(conn)
            self.committed = True
            return result
        from streamwarden.catalog import audit  # audit reads the store's module: imported when first used

        audit.ready(self.engine)
        why = ""
        for _ in range(ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    self._write(audit.hold_head, conn, audit)  # head first: one lock order for every appender
                    result = work(conn)
                    self._append(conn, audit)
                self.committed = True
                return result
            except audit.Raced as exc:  # another writer took the records' place: the change is tried again
                why = str(exc)
            except Exception as exc:
                if not audit.is_contention(exc):
                    raise
                why = audit.clean_text(str(exc), 160)  # the database gave the transaction up: tried again
        self._unwritten = True
        raise audit.AuditError(f"the change was not made: its audit record could not be written ({why})")

    def _append(self, conn: Connection, audit: Any) -> None:
        entries = [self._entry(action, object, detail, "ok") for action, object, detail in self._records()]
        self._write(lambda c: audit.append_in(c, entries), conn, audit)

    def _write(self, write: Callable[[Connection], None], conn: Connection, audit: Any) -> None:
        """``write(conn)``, a write to the trail: a refusal by the store rolls the change back."""
        try:
            write(conn)
        except audit.Raced:
            raise
        except Exception as exc:  # the store refused the records: the transaction rolls the change back
            if audit.is_contention(exc):
                raise
            self._unwritten = True
            raise audit.AuditError("the change was not made: its audit record could not be written "
                                   f"({audit.clean_text(f'{type(exc).__name__}: {exc}', 200)})") from None

    def _records(self) -> list[tuple[str, str, Mapping[str, Any]]]:
        return self.each if self.each is not None else [(self.action, self.object, self.detail)]

    def _entry(self, action: str, object: str, detail: Mapping[str, Any], outcome: str) -> dict[str, Any]:
        from streamwarden.catalog.audit import writable

        fields, _ = writable(self.principal, action, object, outcome, request_id=self.request_id,
                             detail=dict(detail) or None)
        return fields

    def _refused(self, error: StreamwardenError) -> None:
        """Record the refusal (in a transaction of its own: the change committed nothing)."""
        from streamwarden.catalog import audit

        why = audit.clean_text((str(error).splitlines() or [""])[0] or type(error).__name__, 200)
        entry = self._entry(self.action, self.object, {**self.detail, "error": type(error).__name__, "why": why},
                            "refused")
        try:
            audit.append_all(self.engine, [entry])
        except Exception as exc:
            said = str(exc) if isinstance(exc, audit.AuditError) else f"{type(exc).__name__}: {exc}"
            raise audit.AuditError(f"{why} (and the refusal could not be recorded in the audit trail: "
                                   f"{audit.clean_text(said, 300)})") from error


def audited(engine: Engine, actor: Actor, action: str, object: str,
            detail: Mapping[str, Any] | None = None) -> AuditedChange:
    """A change of the store ``engine`` by ``actor``, recorded as ``action`` on ``object``:

        with audited(engine, actor, "grant.create", "query:q1", {"user": "ann"}) as change:
            ...checks and reads (a StreamwardenError here is recorded refused)...
            result = change.commit(lambda conn: ...the change's writes...)

    Nothing is recorded when ``actor`` is None, nor for a block that never commits and
    raises nothing (a change of nothing)."""
    return AuditedChange(engine, actor, action, object, detail)


__all__ = ["ATTEMPTS", "OPERATOR", "OPERATOR_ENV", "Actor", "AuditedChange", "audited", "check_actor",
           "operator_principal", "principal_of"]
