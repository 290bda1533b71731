"""Every request and decision into the audit trail, off the request path.

Requests queue their records; one thread appends them to the store's hash-chained trail
(:mod:`streamwarden.catalog.audit`) in order. A request never waits for the store's
commit, so a slow disk does not slow reads; :meth:`AuditTrail.flush` waits for what is
queued (tests, ``GET /v1/audit`` and shutdown call it), and :meth:`AuditTrail.close`
drains the queue before the service exits. A record the trail refuses (it never holds a
token or a row value) is replaced by one saying so, so the request still leaves a trace.

    >>> import tempfile, os
    >>> from streamwarden.catalog.store import CatalogStore
    >>> trail = AuditTrail(CatalogStore("sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")))
    >>> trail.record("user:ann", "query.list", "queries", "ok", request_id="r1"); trail.flush()
    >>> trail.close(); trail.written
    1
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from streamwarden.catalog.audit import AuditError, append
from streamwarden.catalog.store import CatalogStore

log = logging.getLogger("streamwarden.service")


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
        self.written = 0
        self.failed = 0
        self._queue: "queue.Queue[_Entry | None]" = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="streamwarden-audit", daemon=True)
        self._thread.start()

    def record(self, principal: str, action: str, object: str, outcome: str, *, policies: tuple[str, ...] = (),
               request_id: str | None = None, detail: Mapping[str, Any] | None = None) -> None:
        self._queue.put(_Entry(principal, action, object, outcome, tuple(policies), request_id, detail))

    def flush(self) -> None:
        """Wait until every record queued so far is in the store."""
        self._queue.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            entry = self._queue.get()
            try:
                if entry is None:
                    return
                self._write(entry)
            finally:
                self._queue.task_done()

    def _write(self, entry: _Entry) -> None:
        try:
            append(self.store, entry.principal, entry.action, entry.object, entry.outcome, policies=entry.policies,
                   request_id=entry.request_id, detail=entry.detail, now=entry.time)
            self.written += 1
        except AuditError as exc:  # a field the trail refuses: record that the request happened, without it
            try:
                append(self.store, "service", entry.action, "refused-record", entry.outcome,
                       request_id=entry.request_id, detail={"why": str(exc)[:200]}, now=entry.time)
                self.written += 1
            except Exception:  # pragma: no cover - the store is gone
                self.failed += 1
                log.exception("cannot write to the audit trail")
        except Exception:  # the store is unreachable: say so in the log (never the record's values)
            self.failed += 1
            log.error("cannot write an audit record for %s (request %s)", entry.action, entry.request_id)


__all__ = ["AuditTrail"]
