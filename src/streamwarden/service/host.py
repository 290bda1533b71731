"""The shared network the service hosts, kept up to date with the store.

:class:`NetworkHost` owns a :class:`~streamwarden.runtime.network.NetworkRuntime` and one
thread that polls the store every ``poll_seconds``: grants, revocations, registrations and
catalogs that requests store take effect there, as they would for ``network run``. A
request that must see its change applied at once (a registration, a removal) calls
:meth:`NetworkHost.refresh`. A pipeline that cannot start or fails is reported in
:meth:`NetworkHost.pipelines`, its users' status and the log, once; the other pipelines and
the HTTP service keep running. A registration is first compiled as the network would run
it (:meth:`NetworkHost.runnable_problem`), so a query Spark cannot run is refused up front.
A broken input record stops nothing: the network quarantines it, and
:meth:`NetworkHost.pipelines` counts them per pipeline, with the place of the latest
micro-batch's first.

The service works without a host too (``host=None``): its HTTP contract reads the store
and the output folder only, which is how the contract's tests run without Spark.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.engine.spark_log import silence_spark_log
from streamwarden.plan.nodes import sources
from streamwarden.runtime.network import NetworkRuntime

log = logging.getLogger("streamwarden.service")


@dataclass(frozen=True)
class PipelineStatus:
    """What operators see of one pipeline."""

    name: str
    query: str
    users: tuple[str, ...]
    streams: tuple[str, ...]
    active: bool
    batches: int
    last_batch_ms: int | None
    input_rows: int | None
    rows: Mapping[str, int]  # delivered by this process (since it started)
    withheld: Mapping[str, int]  # emitted outside each user's grants, since this process started
    failure: str | None
    quarantined: int = 0  # broken input records dropped, since this process started
    last_quarantined: str | None = None  # where the latest micro-batch's first one was (file:line), never its text


class NetworkHost:
    """The running network behind the service (see the module docstring)."""

    def __init__(self, runtime: NetworkRuntime, *, poll_seconds: float = 1.0):
        self.runtime = runtime
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamwarden-network", daemon=True)

    @property
    def checkpoint_root(self) -> Path:
        return self.runtime.root

    def start(self) -> "NetworkHost":
        self.runtime.start()
        self._thread.start()
        return self

    def refresh(self) -> None:
        """Apply the store's changes now (registrations, removals, catalogs)."""
        try:
            self.runtime.poll()
        except Exception as exc:  # a bad change must not stop the service: the next poll retries
            log.error("applying the store's changes failed: %s", str(exc).splitlines()[0] if str(exc) else exc)

    def stop(self, *, batch_grace: float = 60.0) -> None:
        """Stop polling, let the micro-batch under way finish (at most ``batch_grace`` seconds),
        then stop every pipeline: what Spark committed stays, nothing is cut half-way."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        deadline = time.monotonic() + batch_grace
        while time.monotonic() < deadline and self.runtime.in_batch():
            time.sleep(0.05)
        try:
            silence_spark_log()  # tasks a stop interrupts log errors: not for the operator
        except Exception:
            pass
        self.runtime.stop()

    def pipelines(self) -> list[PipelineStatus]:
        running = self.runtime.pipelines()
        statuses = []
        for name, r in running:
            progress: Mapping[str, Any] | None = None
            active = False
            query = self.runtime.query_of(r)  # its own Spark query, or its shared group's
            if query is not None:
                try:
                    active = query.isActive
                    progress = query.lastProgress
                except Exception:  # stopping under us
                    progress = None
            durations = (progress or {}).get("durationMs") or {}
            statuses.append(PipelineStatus(
                name, r.pipeline.query.id, r.pipeline.users,
                tuple(sorted({s.stream for s in sources(r.pipeline.rewriting.plan)})), active, r.batches,
                durations.get("triggerExecution"), (progress or {}).get("numInputRows"), dict(r.rows),
                dict(r.withheld), r.failure, r.quarantined, r.last_quarantined))
        return statuses

    def runnable_problem(self, query: RegisteredQuery, catalog: Catalog) -> str | None:
        """Why the network could not run ``query`` (None: it can); see
        :meth:`~streamwarden.runtime.network.NetworkRuntime.runnable_problem`."""
        return self.runtime.runnable_problem(query, catalog)

    def policies(self, query: str, user: str) -> tuple[str, ...]:
        """The policy ids of the graphs deployed for ``user``'s pipeline of ``query`` (none: not running)."""
        pipeline = self.runtime.plan.pipeline_of(query, user)
        if pipeline is None:
            return ()
        return tuple(sorted({p for g in pipeline.rewriting.deployed for p in g.policies}))

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.refresh()
            self.runtime.check()  # notes (and logs, once) a pipeline that failed since


__all__ = ["NetworkHost", "PipelineStatus"]
