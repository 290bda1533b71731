"""The three ways experiments 6 and 7 run a set of queries over file streams, behind one interface.

* *network*: :class:`~streamwarden.runtime.network.NetworkRuntime` (one Spark streaming
  query per pipeline, a terminal switch writing each user's rows into
  ``OUT/<user>/<query>/``), with every listed user granted unless told otherwise;
* *separate*: each query as its own ``streamwarden.api.run`` (one secured streaming
  query for the query's first user, a JSON sink per query);
* *plain*: the same queries written by hand with ``readStream``/``writeStream`` (no
  security, a JSON sink per query).

Each starts with a processing-time ``trigger`` or ``available_now`` and gives back a
:class:`Deployment`: its streaming queries, where each output lands (``targets``:
``user/query`` for a network, the query id otherwise) and how to stop it.

    >>> # d = start_network(spark, folder, inputs, catalog, queries, trigger="500 milliseconds")
    >>> # d.process_all_available(); d.settle(); d.stop()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamwarden import api
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import RegisteredQuery
from streamwarden.catalog.store import sqlite_url
from streamwarden.runtime.network import NetworkRuntime

from bench.network_workload import grant_all
from bench.network_workload import start_plain as write_plain

NETWORK, SEPARATE, PLAIN = "network", "separate", "plain"


@dataclass
class Deployment:
    """Running queries of one kind (see the module docstring)."""

    kind: str
    targets: dict[str, Path]  # "user/query" (network) or "query" -> the folder its rows land in
    fixed: list[StreamingQuery] = field(default_factory=list)  # separate and plain
    runtime: NetworkRuntime | None = None
    store_url: str | None = None

    @property
    def streams(self) -> list[StreamingQuery]:
        return self.runtime.streams if self.runtime is not None else list(self.fixed)

    def process_all_available(self) -> None:
        if self.runtime is not None:
            self.runtime.process_all_available()
            return
        for stream in self.fixed:
            if stream.isActive:
                stream.processAllAvailable()
        self.check()

    def await_termination(self) -> None:
        if self.runtime is not None:
            self.runtime.await_termination()
            return
        for stream in self.fixed:
            stream.awaitTermination()
        self.check()

    def poll(self) -> None:
        """A network applies the store's changes (as ``network run`` does between micro-batches)."""
        if self.runtime is not None:
            self.runtime.poll()

    def check(self) -> None:
        for stream in self.fixed:
            if stream.exception() is not None:
                raise stream.exception()  # type: ignore[misc]

    def settle(self, trigger_s: float, timeout_s: float = 120.0) -> None:
        """Wait until no query runs a micro-batch and none started one for a whole trigger
        interval (the no-data batch a stateful query runs after data moved its watermark)."""
        deadline = time.monotonic() + timeout_s
        last: list[object] = []
        while time.monotonic() < deadline:
            now = [(s.status["isTriggerActive"], s.lastProgress and s.lastProgress["batchId"]) for s in self.streams
                   if s.isActive]
            if now == last and not any(active for active, _ in now):
                return
            last = now
            time.sleep(trigger_s * 1.2)

    def stop(self) -> None:
        if self.runtime is not None:
            self.runtime.stop()
        for stream in self.fixed:
            stream.stop()


def start_network(spark: SparkSession, folder: Path, inputs: Mapping[str, Path], catalog: Catalog,
                  queries: Sequence[RegisteredQuery], *, trigger: str | None = None, available_now: bool = False,
                  lost: Sequence[str] = (), grant: bool = True) -> Deployment:
    """The runtime over ``queries`` with a fresh store, output and checkpoint under ``folder``;
    every user granted (``grant``), the users of ``lost`` revoked at the input's start."""
    store = sqlite_url(folder / "store.db")
    runtime = NetworkRuntime(spark, store, {s: str(p) for s, p in inputs.items()}, folder / "out", folder / "cp",
                             trigger=trigger, queries=tuple(queries), catalog=catalog)
    if grant:
        grant_all(store, queries, lost)
    runtime.start(available_now=available_now)
    targets = {f"{u}/{q.id}": folder / "out" / u / q.id for q in queries for u in q.users}
    return Deployment(NETWORK, targets, runtime=runtime, store_url=store)


def start_separate(spark: SparkSession, folder: Path, inputs: Mapping[str, Path], catalog: Catalog,
                   queries: Sequence[RegisteredQuery], *, trigger: str | None = None,
                   available_now: bool = False) -> Deployment:
    """One ``api.run`` per query, for its first user, each with its own sink and checkpoint."""
    store = sqlite_url(folder / "store.db")
    streams, targets = [], {}
    for q in queries:
        sink = folder / "out" / q.id
        streams.append(api.run(catalog, q.users[0], q.query, {s: str(p) for s, p in inputs.items()}, str(sink),
                               checkpoint=folder / "cp" / q.id, store_url=store, spark=spark, trigger=trigger,
                               available_now=available_now))
        targets[q.id] = sink
    return Deployment(SEPARATE, targets, fixed=streams, store_url=store)


def start_plain(folder: Path, frames: Mapping[str, Callable[[], DataFrame]], *,
                trigger: str | None = None, available_now: bool = False) -> Deployment:
    """Each hand-written query of ``frames`` (query id -> a builder of its DataFrame) to a JSON sink."""
    streams, targets = [], {}
    for qid, build in frames.items():
        sink = folder / "out" / qid
        streams.append(write_plain(build(), sink, folder / "cp" / qid, trigger=trigger, available_now=available_now,
                             name=f"plain-{qid}-{folder.name}"))
        targets[qid] = sink
    return Deployment(PLAIN, targets, fixed=streams)


__all__ = ["NETWORK", "PLAIN", "SEPARATE", "Deployment", "start_network", "start_plain", "start_separate"]
