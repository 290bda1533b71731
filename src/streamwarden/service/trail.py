"""Every request and decision into the audit trail, off the request path.

Requests queue their records; one thread appends them to the store's hash-chained trail
(:mod:`streamwarden.catalog.audit`) in order, what has queued meanwhile in one transaction. A request never waits for the store's
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

from streamwarden.catalog.audit import AuditError, append, append_all
from streamwarden.catalog.store import CatalogStore

log = logging.getLogger("streamwarden.service")
GROUP = 500  # records in one transaction at most


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
            group = [self._queue.get()]
            while len(group) < GROUP and group[-1] is not None:  # what else is queued: one commit for all
                try:
                    group.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            entries = [e for e in group if e is not None]
            try:
                self._write(entries)
            finally:
                for _ in group:
                    self._queue.task_done()
            if len(entries) < len(group):
                return

    def _write(self, entries: list[_Entry]) -> None:
        if not entries:
            return
        try:
            self.written += append_all(self.store, [_arguments(e) for e in entries])
            return
        except AuditError:  # one field the trail refuses: write the others one by one
            pass
        except Exception:  # the store is unreachable: say so in the log (never the records' values)
            self.failed += len(entries)
            log.error("cannot write %d audit records (requests %s ...)", len(entries), entries[0].request_id)
            return
        for entry in entries:
            try:
                append(self.store, **_arguments(entry))
            except AuditError as exc:  # record that the request happened, without the refused field
                append(self.store, "service", entry.action, "refused-record", entry.outcome,
                       request_id=entry.request_id, detail={"why": str(exc)[:200]}, now=entry.time)
            self.written += 1


def _arguments(entry: _Entry) -> dict[str, Any]:
    return {"principal": entry.principal, "action": entry.action, "object": entry.object, "outcome": entry.outcome,
            "policies": entry.policies, "request_id": entry.request_id, "detail": entry.detail, "now": entry.time}


__all__ = ["AuditTrail"]
