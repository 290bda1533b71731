"""Every request and decision into the audit trail, off the request path.

Requests queue their records; one thread appends them to the store's hash-chained trail
(:mod:`streamwarden.catalog.audit`) in order, what has queued meanwhile in one transaction
(at most one transaction every :data:`LINGER` seconds while records keep coming).
A request never waits for the store's commit, so a slow disk does not slow reads.

**The writer survives any record and any store error.** A record the trail refuses (a
field too long, an action outside the grammar, something shaped like a token) is written
repaired (:func:`~streamwarden.catalog.audit.writable`: principal kept, what was refused
cleaned or redacted, and why); a record the store itself refuses is written as a
substitute naming its request. A store error is logged and retried, with a growing pause,
until the records are in; meanwhile :meth:`AuditTrail.problem` says why the trail is
unhealthy, and the service answers 503 rather than serve requests it cannot audit.

**Waits are bounded.** :meth:`AuditTrail.flush` waits for what is queued (tests, ``GET
/v1/audit``) at most ``timeout`` seconds; :meth:`AuditTrail.close` drains the queue before
the service exits, giving up (and logging how many records it lost) after ``timeout``.

    >>> import tempfile, os
    >>> from streamwarden.api import CatalogStore
    >>> trail = AuditTrail(CatalogStore("sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")))
    >>> trail.record("user:ann", "query.list", "queries", "ok", request_id="r1"); trail.flush()
    True
    >>> trail.record("anonymous", "http.X|Y", "/v1/queries", "refused", request_id="r2"); trail.flush()
    True
    >>> trail.close(); trail.written, trail.problem()
    (2, 'the audit trail is closed')
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from streamwarden.api import AuditError, CatalogStore, append_all, clean_text, writable

log = logging.getLogger("streamwarden.service")
GROUP = 500  # records in one transaction at most
#: Seconds a group waits after the writer's last commit for more records: under load one commit
#: (the store's fsync and ~0.3 ms of Python) serves the requests of 20 ms, not each request alone.
LINGER = 0.02
#: Records queued and not yet written beyond which the service refuses requests (503): what a
#: crash can lose is bounded by it (and normally it is the last few milliseconds' records).
MAX_BACKLOG = 2_000
RETRY_FIRST, RETRY_MAX = 0.05, 2.0  # seconds between attempts while the store fails, doubling
REFUSALS = 3  # attempts a record fails alone before substitutes are tried (a store that is down refuses those too)
FLUSH_TIMEOUT = 30.0
CLOSE_TIMEOUT = 30.0


@dataclass(frozen=True)
class _Entry:
    principal: str
    action: str
    object: str
    outcome: str
    policies: tuple[str, ...]
    request_id: str | None
    detail: Mapping[str, Any] | None
    time: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


class AuditTrail:
    """The service's writer of the audit trail (one thread, records in the order queued)."""

    def __init__(self, store: CatalogStore):
        self.store = store
        self.written = 0  # records in the store (repaired or substituted ones included)
        self.repaired = 0  # of those, written repaired or as a substitute
        self.lost = 0  # records never written: the store still failed when the trail closed
        self._pending: deque[_Entry] = deque()
        self._queued = 0  # records ever queued
        self._done = 0  # of those, written or given up
        self._refused = 0  # requests refused (503) while unhealthy, not yet in a record
        self._error: str | None = None  # why the last attempt to write failed (None: it did not)
        self._closing = False
        self._deadline = float("inf")  # when closing: give up on a failing store after this
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="streamwarden-audit", daemon=True)
        self._thread.start()

    # -- requests' side ------------------------------------------------------------------------
    def record(self, principal: str, action: str, object: str, outcome: str, *, policies: Iterable[str] = (),
               request_id: str | None = None, detail: Mapping[str, Any] | None = None, poll: bool = False) -> None:
        """Queue one record (never raises, never blocks on the store). ``poll``: a request that
        says it is a timer's (``X-Streamwarden-Poll: 1``, the console refreshing its lists) is
        recorded like any other, marked ``"poll": true`` in its detail so that a reader of the
        trail can set a timer's records apart from what a person did. Every poll is its own
        record: a count kept in memory would be lost with the process."""
        if poll:
            detail = {**(detail if isinstance(detail, Mapping) else {}), "poll": True}
        try:
            entry = _Entry(principal, action, object, outcome, tuple(policies), request_id, detail)
        except Exception:  # policies that cannot be read: the writer repairs the rest
            entry = _Entry(principal, action, object, outcome, (), request_id, detail)
        self._queue(entry)

    def _queue(self, entry: _Entry, *, closing: bool = False) -> None:
        with self._changed:
            if self._closing and not closing:
                self.lost += 1
                log.error("an audit record came after the trail closed (request %s)", clean_text(entry.request_id))
                return
            self._pending.append(entry)
            self._queued += 1
            self._changed.notify_all()

    def refused(self) -> None:
        """Count a request refused because the trail is unhealthy (one record says how many, later)."""
        with self._changed:
            self._refused += 1

    def problem(self) -> str | None:
        """Why requests cannot be audited now (None: they can). One sentence."""
        if self._closing:
            return "the audit trail is closed"
        if not self._thread.is_alive():
            return "the audit trail's writer stopped"
        if self._error is not None:  # what the store said is in the log, not in an answer to anyone
            return "the audit trail cannot be written (the log says why)"
        backlog = self._queued - self._done
        if backlog >= MAX_BACKLOG:
            return f"the audit trail is {backlog} records behind"
        return None

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait until every record queued so far is in the store (or given up); False if that
        did not happen within ``timeout`` seconds or the writer is gone."""
        deadline = time.monotonic() + timeout
        with self._changed:
            target = self._queued
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._changed.wait(min(left, 0.5))  # wake now and then: a dead writer notifies nobody
        return True

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Write what is queued and stop the writer: within ``timeout`` seconds, whatever the store does."""
        with self._changed:
            self._closing = True
            self._deadline = time.monotonic() + max(timeout - 1.0, 0.0)
            self._changed.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():  # stuck in the store: the thread is a daemon, the process may exit
            with self._changed:
                behind = self._queued - self._done
            log.error("the audit writer did not finish within %.0f s: up to %d records are not written",
                      timeout, behind)
        elif self.lost:
            log.error("%d audit records could not be written before the service stopped", self.lost)

    # -- the writer ------------------------------------------------------------------------------
    def _run(self) -> None:
        committed = 0.0  # monotonic time of the last commit
        while True:
            with self._changed:
                if not self._pending and not self._closing:
                    self._changed.wait()  # a record, or the close
                if not self._pending:
                    if self._closing:
                        return  # everything is written
                    continue
                while len(self._pending) < GROUP and not self._closing and \
                        (lingering := committed + LINGER - time.monotonic()) > 0:
                    self._changed.wait(timeout=lingering)  # more records join this group meanwhile
                group = [self._pending.popleft() for _ in range(min(GROUP, len(self._pending)))]
            try:
                committed = time.monotonic()
                self._commit(group)
            except Exception:  # a bug of ours: never let it end the writer (the records are counted lost)
                log.exception("the audit writer failed on %d records", len(group))
                self.lost += len(group)
            with self._changed:
                self._done += len(group)
                self._changed.notify_all()
            self._summarize_refusals()

    def _commit(self, group: list[_Entry]) -> None:
        """Write ``group`` in order: as given, repaired, or (a record the store refuses) as a
        substitute; a failing store is retried until it works or the trail has closed."""
        pending = [_arguments(e) for e in group]
        try:
            self._append(pending)
            return
        except Exception as exc:  # a record the trail refuses is repaired at once; a store error waits
            error = None if isinstance(exc, AuditError) and "concurrent writers" not in str(exc) else exc
        self._retry([self._writable(arguments) for arguments in pending], error)

    def _retry(self, pending: list[dict[str, Any]], error: BaseException | None) -> None:
        """Write ``pending`` until the store takes it, one record at a time after a failed
        group, so that a record the store keeps refusing (REFUSALS attempts) is written as a
        substitute and cannot hold back the others."""
        delay = RETRY_FIRST
        refusals = 0  # attempts the first pending record failed as given
        while pending:
            if error is not None:
                self._failing(error, len(pending))
                if self._closing and time.monotonic() >= self._deadline:
                    self.lost += len(pending)
                    return
                with self._changed:
                    self._changed.wait(min(delay, max(self._deadline - time.monotonic(), 0.0)))
                delay = min(delay * 2, RETRY_MAX)
            try:
                self._append(pending)
                return
            except Exception as exc:
                error = exc
            while pending:
                try:
                    self._append(pending[:1])
                except Exception as exc:
                    error, refusals = exc, refusals + 1
                    if refusals < REFUSALS or not self._substituted(pending[0], exc):
                        break  # the store fails (or not yet known to refuse this one record): wait
                pending.pop(0)
                refusals = 0

    def _substituted(self, arguments: Mapping[str, Any], error: BaseException) -> bool:
        """Write a substitute for a record the store refuses: the same record without its detail
        and policies, else the request and the principal only, else the request only."""
        for substitute in _substitutes(arguments, error):
            try:
                self._append([substitute])
            except Exception:
                continue
            self.repaired += 1
            return True
        return False

    def _append(self, pending: list[dict[str, Any]]) -> None:
        self.written += append_all(self.store, pending)
        if self._error is not None:
            log.warning("the audit trail is written again")
        self._error = None

    def _writable(self, arguments: dict[str, Any]) -> dict[str, Any]:
        fields, why = writable(**arguments)
        if why is not None:
            self.repaired += 1
        return fields

    def _failing(self, error: BaseException, count: int) -> None:
        reason = _why(error)
        if self._error != reason:
            log.error("cannot write %d audit records: %s; retrying (the service answers 503 meanwhile)",
                      count, reason)
        self._error = reason

    def _summarize_refusals(self) -> None:
        """One record of the requests refused (503) while the trail could not write."""
        with self._changed:
            count, self._refused = self._refused, 0
        if count:  # queued even while closing: the writer is still running
            self._queue(_Entry("service", "audit.unavailable", "service", "refused", (), None,
                               {"requests": count, "why": "the audit trail could not be written"}), closing=True)


def _arguments(entry: _Entry) -> dict[str, Any]:
    return {"principal": entry.principal, "action": entry.action, "object": entry.object, "outcome": entry.outcome,
            "policies": entry.policies, "request_id": entry.request_id, "detail": entry.detail, "now": entry.time}


def _substitutes(arguments: Mapping[str, Any], error: BaseException) -> list[dict[str, Any]]:
    """Ever smaller stand-ins for a record the store refused: each names who (while it can),
    what, when and which request, and why."""
    fields, _ = writable(**arguments)
    why = {"repaired": f"the store refused the record ({_why(error)})"}
    request = f"request:{fields['request_id'] or '-'}"
    return [dict(fields, policies=(), detail=why),
            dict(fields, action="audit.unwritable", object=request, outcome="unknown", policies=(), detail=why),
            dict(fields, principal="service", action="audit.unwritable", object=request, outcome="unknown",
                 policies=(), detail=why)]


def _why(error: BaseException) -> str:
    """A store error in a few words (the driver's message, never the statement's parameters)."""
    try:
        message = (str(getattr(error, "orig", None) or error).splitlines() or [""])[0]
    except Exception:
        message = ""
    return clean_text(f"{type(error).__name__}: {message}" if message else type(error).__name__, 160)


__all__ = ["AuditTrail", "MAX_BACKLOG"]
