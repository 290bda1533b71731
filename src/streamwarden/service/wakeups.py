"""SSE streams woken when their rows are delivered, not only at their next look.

A stream reads its user's rows, then waits: until the network in this process delivers a batch
to that user's query (:func:`streamwarden.api.on_delivery`, called on Spark's callback thread
and handed to the event loop), or at most ``STREAM_POLL`` seconds, its next look either way (a
network in another process announces nothing). The service listens only while some stream
waits.

    >>> import asyncio, tempfile
    >>> async def demo():
    ...     wakeups = Wakeups(Path(tempfile.mkdtemp()))
    ...     event = wakeups.watch("ann", "q1")
    ...     wakeups._wake("ann", "q1")
    ...     woken = event.is_set()
    ...     wakeups.unwatch("ann", "q1", event)
    ...     return woken, wakeups.watching()
    >>> asyncio.run(demo())
    (True, 0)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from streamwarden.api import on_delivery


class Wakeups:
    """One event per waiting stream, set when its (user, query) gets a batch (see the module docstring)."""

    def __init__(self, output: Path):
        self.output = output
        self._events: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: Callable[[], None] | None = None

    def watch(self, user: str, query: str) -> asyncio.Event:
        """An event set at each delivery to ``user``'s ``query`` (call on the event loop)."""
        if self._stop is None:
            self._loop = asyncio.get_running_loop()
            self._stop = on_delivery(self.output, self._delivered)
        event = asyncio.Event()
        self._events.setdefault((user, query), set()).add(event)
        return event

    def unwatch(self, user: str, query: str, event: asyncio.Event) -> None:
        waiting = self._events.get((user, query))
        if waiting is not None:
            waiting.discard(event)
            if not waiting:
                del self._events[(user, query)]
        if not self._events and self._stop is not None:
            self._stop()
            self._stop = None

    def watching(self) -> int:
        return sum(len(events) for events in self._events.values())

    def _delivered(self, user: str, query: str) -> None:
        """On the delivering thread: hand the wake-up to the loop, if a stream of theirs waits."""
        loop = self._loop
        if loop is not None and (user, query) in self._events:
            try:
                loop.call_soon_threadsafe(self._wake, user, query)
            except RuntimeError:  # the loop has closed: no stream waits any more
                pass

    def _wake(self, user: str, query: str) -> None:
        for event in self._events.get((user, query), ()):
            event.set()


__all__ = ["Wakeups"]
