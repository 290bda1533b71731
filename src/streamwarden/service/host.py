"""The shared network the service hosts, kept up to date with the store.

:class:`NetworkHost` owns a running network (:func:`streamwarden.api.start_network`) and one
thread that polls the store every ``poll_seconds``: grants, revocations, registrations and
catalogs that requests store take effect there, as they would for ``network run``. A
request that must see its change applied at once (a registration, a removal) calls
:meth:`NetworkHost.refresh`. A pipeline that cannot start or fails is reported in
:meth:`NetworkHost.pipelines`, its users' status and the log, once; the other pipelines and
the HTTP service keep running. A registration is first compiled as the network would run
it (:meth:`NetworkHost.runnable_problem`), so a query Spark cannot run is refused up front;
those checks run one at a time, each for at most ``check_seconds``
(:class:`~streamwarden.service.limits.OneAtATime`): parallel registrations queue for Spark's
analysis in the driver every pipeline shares instead of each analysing at once.
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
from pathlib import Path
from typing import TYPE_CHECKING

from streamwarden.api import (Catalog, NetworkRuntime, PipelineStatus, RegisteredQuery, deployed_policies,
                              network_info, pipeline_statuses, runnable_problem, silence_spark_log)

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

from streamwarden.service.limits import CHECK_SECONDS, CHECK_WAIT_SECONDS, OneAtATime

log = logging.getLogger("streamwarden.service")


class NetworkHost:
    """The running network behind the service (see the module docstring)."""

    def __init__(self, runtime: NetworkRuntime, *, poll_seconds: float = 1.0, check_seconds: float = CHECK_SECONDS,
                 check_wait: float = CHECK_WAIT_SECONDS):
        self.runtime = runtime  # started (streamwarden.api.start_network)
        self.poll_seconds = poll_seconds
        #: registrations' checks (runnable_problem): one at a time, each bounded
        self.checks = OneAtATime(check_seconds, wait=check_wait)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamwarden-network", daemon=True)
        self._applying = threading.Condition(threading.Lock())  # refresh(): who asked, which poll covers them
        self._asked = self._applied = 0
        self._polling = False
        #: ``catching_up`` until every Spark query of the network has processed what its input held
        #: (right after a start, a restart or a new group), then ``live``; read by ``GET rows``
        self.state = "catching_up"
        #: the queries running when it last became live (held, so no other object takes an id of theirs)
        self._live: dict[int, "StreamingQuery"] = {}

    @property
    def checkpoint_root(self) -> Path:
        """Where the network keeps its pipelines' state (for :func:`streamwarden.api.forget_query`)."""
        return network_info(self.runtime).checkpoint_root

    def start(self) -> "NetworkHost":
        """Start polling the store for the running network."""
        self._thread.start()
        return self

    def refresh(self) -> None:
        """Apply the store's changes now (registrations, removals, catalogs); returns once a poll
        that started after this call has finished.

        Concurrent callers share polls (a group commit): each caller stored its change before
        calling, so one poll started after several calls applies all of them. Eight clients
        registering a thousand queries cost about a thousand / eight polls, not a thousand."""
        with self._applying:
            self._asked += 1
            mine = self._asked
            self._applying.notify_all()  # who waits on the asks (tests) sees this one
            while self._applied < mine:
                if self._polling:  # one under way read the store before this call: wait for the next
                    self._applying.wait()
                    continue
                self._polling, covers = True, self._asked
                self._applying.release()
                try:
                    self._poll()
                finally:
                    self._applying.acquire()
                    self._polling, self._applied = False, max(self._applied, covers)
                    self._applying.notify_all()

    def _poll(self) -> None:
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
        self.checks.idle(timeout=self.checks.seconds)  # a registration's check under way: its Spark analysis ends
        while time.monotonic() < deadline and self.runtime.in_batch():
            time.sleep(0.05)
        try:
            silence_spark_log()  # tasks a stop interrupts log errors: not for the operator
        except Exception:
            pass
        self.runtime.stop()

    def pipelines(self) -> list[PipelineStatus]:
        return pipeline_statuses(self.runtime)

    def runnable_problem(self, query: RegisteredQuery, catalog: Catalog) -> str | None:
        """Why the network could not run ``query`` (None: it can); see
        :func:`streamwarden.api.runnable_problem`. One check at a time, for at most
        ``check_seconds``: raises :class:`~streamwarden.service.limits.CheckTimedOut` when Spark
        has not answered by then, :class:`~streamwarden.service.limits.CheckerBusy` when the checker
        was busy with other registrations for longer than ``check_wait``."""
        return self.checks.run(lambda: runnable_problem(self.runtime, query, catalog))

    def policies(self, query: str, user: str) -> tuple[str, ...]:
        """The policy ids of the graphs deployed for ``user``'s pipeline of ``query`` (none: not running)."""
        return deployed_policies(self.runtime, query, user)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.refresh()
            self.runtime.check()  # notes (and logs, once) a pipeline that failed since
            self._observe()

    def _observe(self) -> None:
        """Move :attr:`state`: once every query has read what its input held, the network is live
        until another query starts (a registration, a restart of a pipeline). Spark is asked only
        while it catches up: a thousand live pipelines cost no calls into the JVM each second."""
        streams = self.runtime.streams  # the same Python objects while their pipelines run
        if self.state == "live" and all(self._live.get(id(s)) is s for s in streams):
            return
        if any(_behind(stream) for stream in streams):
            self.state = "catching_up"
        else:
            self.state, self._live = "live", {id(s): s for s in streams}


def _behind(stream: "StreamingQuery") -> bool:
    """Has ``stream`` not yet run a micro-batch, or does its input hold data it has not read?
    (Spark's own status, as of its last trigger.)"""
    try:
        return stream.isActive and (stream.lastProgress is None or bool(stream.status.get("isDataAvailable")))
    except Exception:  # a query stopping under us: not what keeps a user waiting
        return False


__all__ = ["NetworkHost", "PipelineStatus"]
