"""Bounds on what one caller may cost the shared service: a rate of registrations, and one check at a time.

**Churn.** Every registration and removal makes the shared network plan again, and a
registration fills the new member in (a back-fill of what its group already read), so a
user who registers and deletes in a loop slows everyone's micro-batches. :class:`RateLimit`
is a token bucket per caller: at most :data:`CHURN_PER_MINUTE` registrations plus removals
a minute, in a burst or spread out; beyond it a request is answered 429 with
``Retry-After`` before anything is loaded or compiled. An admin's shared registrations
count against that admin. Dry runs (``?dry_run=true``) run every security pass but plan
nothing on the network: they have a bucket of their own, :data:`DRY_RUNS_PER_MINUTE`.
The buckets live in the service process's memory: a restart refills them, and two
service processes over one store keep two sets.

    >>> clock = [0.0]
    >>> limit = RateLimit(2, clock=lambda: clock[0])
    >>> limit.wait("user:ann"), limit.wait("user:ann"), limit.wait("user:ann"), limit.wait("user:bob")
    (None, None, 30, None)
    >>> clock[0] = 30.0
    >>> limit.wait("user:ann")

**One registration check at a time.** Before a registration is stored, Spark analyses its
streaming plan in the driver every pipeline shares (:func:`streamwarden.api.runnable_problem`).
:class:`OneAtATime` runs those checks one after another, each for at most
:data:`CHECK_SECONDS`; a request waits at most :data:`CHECK_WAIT_SECONDS` for its turn, and
at most :data:`MAX_WAITING_CHECKS` requests wait at once. A check Spark has not finished in
time refuses its registration (:class:`CheckTimedOut`), but Spark cannot be interrupted in
the middle of an analysis: it goes on in its own thread and keeps the checker busy until
it ends, so that two analyses never run at once.

    >>> checks = OneAtATime(seconds=1.0)
    >>> checks.run(lambda: "checked")
    'checked'
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

#: Registrations plus removals one caller may make in a minute (the bucket's size and its refill).
CHURN_PER_MINUTE = 20
#: Dry runs (``POST /v1/queries?dry_run=true``) one caller may make in a minute.
DRY_RUNS_PER_MINUTE = 60
#: Seconds Spark's check of one registration may take before the registration is refused.
CHECK_SECONDS = 10.0
#: Seconds a registration waits for the checker (busy with others) before it is answered 503.
CHECK_WAIT_SECONDS = 20.0
#: Registrations that may wait for the checker at once; one more is answered 503 at once.
MAX_WAITING_CHECKS = 16
#: Buckets kept before the full ones (callers idle for a minute) are forgotten.
_KEPT_BUCKETS = 4096


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimit:
    """A token bucket per key (``per_minute`` tokens, refilled continuously), thread-safe."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic):
        if per_minute < 1:
            raise ValueError("a rate limit allows at least one request a minute")
        self.per_minute = per_minute
        self._rate = per_minute / 60.0  # tokens a second
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def wait(self, key: str) -> int | None:
        """Take a token for ``key``: None if there was one, else the whole seconds until there is
        one (nothing taken)."""
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= _KEPT_BUCKETS:
                    self._forget_full(now)
                bucket = self._buckets[key] = _Bucket(float(self.per_minute), now)
            bucket.tokens = min(float(self.per_minute), bucket.tokens + (now - bucket.at) * self._rate)
            bucket.at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            return max(1, math.ceil((1.0 - bucket.tokens) / self._rate))

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled (forgetting one changes nothing for its key)."""
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.at) * self._rate >= self.per_minute]
        for key in full:
            del self._buckets[key]


class CheckTimedOut(Exception):
    """The check did not finish within its bound (it goes on, keeping the checker busy)."""

    def __init__(self, seconds: float):
        super().__init__(f"not finished within {seconds:g} s")
        self.seconds = seconds


class CheckerBusy(Exception):
    """No turn at the checker within the wait allowed: ``retry_after`` whole seconds is a fair wait."""

    def __init__(self, retry_after: int):
        super().__init__(f"the checker is busy: try again in {retry_after} s")
        self.retry_after = retry_after


class _Outcome(Generic[T]):
    """What a check returned or raised, once its thread has finished."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


class OneAtATime:
    """Run checks one after another, each bounded in time (see the module docstring)."""

    def __init__(self, seconds: float = CHECK_SECONDS, *, wait: float = CHECK_WAIT_SECONDS,
                 max_waiting: int = MAX_WAITING_CHECKS):
        self.seconds = seconds
        self.wait = wait
        self.max_waiting = max_waiting
        self._turn = threading.Semaphore(1)  # released by the check's own thread when it ends
        self._waiting = 0
        self._lock = threading.Lock()

    def run(self, check: Callable[[], T]) -> T:
        """``check()``'s answer; :class:`CheckerBusy` when no turn came in time, :class:`CheckTimedOut`
        when the check did not finish within :attr:`seconds` (whatever ``check`` raises, raised)."""
        self._queue()
        outcome: _Outcome[T] = _Outcome()
        threading.Thread(target=self._work, args=(check, outcome), name="streamwarden-check", daemon=True).start()
        if not outcome.done.wait(self.seconds):
            raise CheckTimedOut(self.seconds)
        if outcome.error is not None:
            raise outcome.error
        return outcome.value  # type: ignore[return-value]  # set when done without an error

    def _queue(self) -> None:
        """Wait for the turn (taken when this returns), or raise :class:`CheckerBusy`."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise CheckerBusy(self._retry_after())
            self._waiting += 1
        try:
            if not self._turn.acquire(timeout=self.wait):
                raise CheckerBusy(self._retry_after())
        finally:
            with self._lock:
                self._waiting -= 1

    def _retry_after(self) -> int:
        return max(1, math.ceil(self.seconds))

    def _work(self, check: Callable[[], T], outcome: _Outcome[T]) -> None:
        try:
            outcome.value = check()
        except BaseException as exc:  # handed to the caller (or dropped, if it gave up waiting)
            outcome.error = exc
        finally:
            self._turn.release()
            outcome.done.set()

    def idle(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for no check to be running; whether none is."""
        if not self._turn.acquire(timeout=timeout):
            return False
        self._turn.release()
        return True


__all__ = ["CHECK_SECONDS", "CHECK_WAIT_SECONDS", "CHURN_PER_MINUTE", "DRY_RUNS_PER_MINUTE", "MAX_WAITING_CHECKS",
           "CheckTimedOut", "CheckerBusy", "OneAtATime", "RateLimit"]
