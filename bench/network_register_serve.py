"""``streamwarden serve`` with its registrations' phases timed: the service of :mod:`bench.network_register`.

    python -m bench.network_register_serve PHASES.jsonl serve --store URL --input Readings=DIR ...

Runs the real ``serve`` (:func:`streamwarden.cli.main.main`, in this process, its flags
unchanged) after wrapping a few of the service's methods with timers, so that the benchmark
can say where a ``POST /v1/queries`` spends its time without a profiler. Each line of
``PHASES.jsonl`` is one of:

* ``{"kind": "register", "user": ..., "id": ..., "start": ..., "end": ..., "phases": {NAME: [wall_s, cpu_s]}}``:
  one registration that reached the network's poll, its phases in the order the route runs
  them (:data:`PHASES`), each with its wall time and the CPU time of the request's thread;
  ``start``/``end`` are wall-clock seconds (``time.time``, the client's clock);
* ``{"kind": "poll", ...}``: one of the network host's own polls (its thread, every second);
* ``{"kind": "batch", "batch": N, "members": M, ...}`` and ``{"kind": "backfill", "batch": N,
  "joiners": J, ...}``: a shared group's micro-batch (its ``foreachBatch``) and the batch job
  delivering to the members that joined at it what the group read before.

A phase called inside another (the poll reading the catalog) counts in the outer one. The
timers cost a few microseconds a call; a method the product no longer has is left alone
and named in a ``{"kind": "missing"}`` line (the benchmark then shows that phase as —).
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The registration route's phases, in order: (name, module, class, method).
PHASES = (
    ("auth", "streamwarden.service.auth", "Authenticator", "principal"),  # the token, from the store
    ("catalog", "streamwarden.catalog.store", "CatalogStore", "load"),  # the stored catalog
    ("explain", "streamwarden.service.queries", "QueryBook", "prepare_own"),  # every security pass, no Spark
    ("runnable", "streamwarden.service.app", "Service", "check_runnable"),  # Spark's check of the plan
    ("store", "streamwarden.service.queries", "QueryBook", "register_own"),  # the registration and grant stored
    ("poll", "streamwarden.service.app", "Service", "refresh"),  # the running network applies the store
)
#: Timed apart from registrations: (kind, module, class, method).
OTHERS = (
    ("poll", "streamwarden.service.host", "NetworkHost", "refresh"),
    ("batch", "streamwarden.runtime.groups", "StreamGroup", "_batch"),
    ("backfill", "streamwarden.runtime.groups", "StreamGroup", "_backfill"),
)


class Recorder:
    """Appends the timings to a JSON-lines file (one lock; a line is flushed as written)."""

    def __init__(self, path: Path):
        self._file = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._local = threading.local()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    # -- a registration's phases, per request thread ----------------------------------------
    def phase(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` timed as phase ``name`` of the request under way in this thread (the
        token check opens a request's record; the poll after a stored registration closes it)."""

        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            local = self._local
            if getattr(local, "active", None) is not None:  # inside another phase: counted there
                return method(*args, **kwargs)
            if name == "auth":
                local.span = {"start": time.time(), "phases": {}}
            span = getattr(local, "span", None)
            if span is None:
                return method(*args, **kwargs)
            local.active = name
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                local.active = None
                spent = span["phases"].setdefault(name, [0.0, 0.0])
                spent[0] += time.perf_counter() - wall
                spent[1] += time.thread_time() - cpu
                if name == "explain" and len(args) >= 3:  # prepare_own(self, caller, public, ...)
                    span.update(user=getattr(args[1], "name", None), id=args[2])
                if name == "poll" and "store" in span["phases"]:
                    local.span = None
                    self.write({"kind": "register", "user": span.get("user"), "id": span.get("id"),
                                "start": span["start"], "end": time.time(), "phases": span["phases"]})

        return timed

    def other(self, kind: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` timed on its own (outside a request's phases), one line a call."""

        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._local, "active", None) is not None:  # a request's poll: counted in its phases
                return method(*args, **kwargs)
            record: dict[str, Any] = {"kind": kind}
            if kind == "batch":  # _batch(self, batch, batch_id): its members as it starts
                record.update(batch=args[2], members=len(getattr(args[0], "members", ())))
            elif kind == "backfill":  # _backfill(self, joiners, decision, batch_id, spark)
                record.update(batch=args[3], joiners=len(args[1]))
            began, wall, cpu = time.time(), time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                record.update(start=began, wall=time.perf_counter() - wall, cpu=time.thread_time() - cpu)
                self.write(record)

        return timed


def install(path: Path) -> Recorder:
    """Wrap the methods of :data:`PHASES` and :data:`OTHERS` with ``path``'s recorder."""
    recorder = Recorder(path)
    wraps: list[tuple[str, str, str, str, Callable[[str, Callable[..., Any]], Callable[..., Any]]]] = [
        (name, module, cls, method, recorder.phase) for name, module, cls, method in PHASES]
    wraps += [(kind, module, cls, method, recorder.other) for kind, module, cls, method in OTHERS]
    for name, module, cls, method, wrap in wraps:
        owner = getattr(importlib.import_module(module), cls, None)
        original = getattr(owner, method, None) if owner is not None else None
        if original is None:
            recorder.write({"kind": "missing", "phase": name, "method": f"{module}.{cls}.{method}"})
            continue
        setattr(owner, method, wrap(name, original))
    return recorder


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m bench.network_register_serve PHASES.jsonl serve [FLAG ...]", file=sys.stderr)
        return 2
    install(Path(argv[0]))
    from streamwarden.cli.main import main as streamwarden

    return streamwarden(list(argv[1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
