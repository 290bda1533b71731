"""One interface for every way of running secured queries: replay, one continuous query,
the level processors and the shared network.

A caller (the CLI, the API, a service) starts a :class:`Runner` and then only ever asks it
to apply live changes (:meth:`~Runner.poll`), to report a failure (:meth:`~Runner.check`),
to wait (:meth:`~Runner.wait`, :meth:`~Runner.process_all_available`) and to stop. Each
runner owns its checkpoints; none exposes how it maps onto Spark queries, except through
:attr:`~Runner.streams` for progress and metrics.

    >>> [name for name in ("poll", "check", "wait", "stop") if hasattr(QueryRunner, name)]
    ['poll', 'check', 'wait', 'stop']
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pyspark.sql.streaming import StreamingQuery



@runtime_checkable
class Runner(Protocol):
    """What every runner offers."""

    available_now: bool  # process what the inputs hold, then end (else run until stopped)

    def poll(self) -> bool:
        """Apply what changed in the store (grants, registrations, catalog); True if anything did."""

    def check(self) -> None:
        """Raise the failure of any part that stopped on an error."""

    def wait(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: as long as it takes); True once every part has ended."""

    def process_all_available(self) -> None:
        """Return once everything the inputs hold now has been processed (tests, the demo)."""

    def in_batch(self) -> bool:
        """Is a micro-batch under way (a clean stop lets it finish)?"""

    def stop(self) -> None:
        """Stop every part; what was committed stays."""

    @property
    def streams(self) -> list[StreamingQuery]:
        """The Spark streaming queries running now (none for a replay)."""


class StreamsRunner:
    """A runner made of Spark streaming queries: waits, checks and stops them together.
    Subclasses say which queries run now (:attr:`streams`)."""

    available_now = False

    @property
    def streams(self) -> list[StreamingQuery]:
        raise NotImplementedError

    def poll(self) -> bool:
        return False

    def check(self) -> None:
        for stream in self.streams:
            failure = stream.exception()
            if failure is not None:
                raise failure

    def wait(self, timeout: float | None) -> bool:
        for stream in self.streams:
            if timeout is None:
                stream.awaitTermination()  # returns None, not True, without a timeout
            elif not stream.awaitTermination(timeout):  # type: ignore[arg-type]  # it takes float seconds
                return False
        self.check()
        return True

    def process_all_available(self) -> None:
        for stream in self.streams:
            if stream.isActive:
                stream.processAllAvailable()
        self.check()

    def in_batch(self) -> bool:
        for stream in self.streams:
            try:
                if stream.isActive and stream.status.get("isTriggerActive"):
                    return True
            except Exception:  # a query stopping under us is not in a batch
                continue
        return False

    def stop(self) -> None:
        for stream in self.streams:
            if stream.isActive:
                stream.stop()


class QueryRunner(StreamsRunner):
    """One continuous query (``streamwarden run``): live action values reach it through its
    own source at every micro-batch, so there is nothing to poll."""

    def __init__(self, stream: StreamingQuery, *, available_now: bool = False):
        self.stream = stream
        self.available_now = available_now

    @property
    def streams(self) -> list[StreamingQuery]:
        return [self.stream]


__all__ = ["QueryRunner", "Runner", "StreamsRunner"]
