"""Shared groups: registered queries over one plain stream run by ONE Spark streaming query
whatever their number (issue 25).

Each such pipeline (a registered query secured for the users with one plan) is a *member*
of a group: its graphs are reduced to query templates and constants
(:mod:`streamwarden.plan.templates`). There are two kinds of group:

- a stream's *tuple group* hosts every pipeline whose graphs evaluate a tuple at a time
  (selections, projections, the secure read view): each micro-batch evaluates all members
  of a template at once, finding each tuple's members by a hash join on the template's
  equality keys (:mod:`streamwarden.engine.shared`);
- an *aggregate group* hosts the pipelines of one windowed aggregate template whose
  members differ only in keys (``ward = self.ward``): the aggregate runs once per key value,
  its state in Spark's state store, and each window's rows go to the members of its key
  when the watermark closes it.

The members' rows then go through the same terminal switch as a pipeline of its own — who
receives which event times, decided once per micro-batch and recorded before anything is
written — in one write for the whole group (:mod:`streamwarden.engine.fanout`), each user's
batch then logged once under the key of the group's micro-batch, named by her own cursor.

**Members come and go without a restart.** The group reads its members at every
micro-batch. One that joins a running group at micro-batch N also receives what the
group read before N: a batch job over exactly those files (the file source's own log in
the group's checkpoint), recorded before N commits and run beside the group by its
backfill worker (never inside anyone's micro-batch), delivered once under its own key,
whatever crash comes between. So a member sees the same rows as a pipeline of its own
started from the input's beginning (the history may arrive after its first live rows);
for an aggregate group, the windows the group closed before N (a window still open at N
is in the group's state, the joiner's data included, and reaches it when it closes).

**Nothing a member does stops the group** (see :class:`StreamGroup`): the group's input
runs whole at every micro-batch whatever its members' plans, a member whose plan or
history fails fails alone, and a group whose Spark query fails restarts from its
checkpoint.

A stream read through a Security Shield or a level guard has a group per role set and
level (the template's shield and guard: members share how the stream is read); levels
never share an operator, state or watermark.

What a group does not host keeps its own pipeline: joins, aggregates with a member's own
constant outside the keys (``WHERE value > 4``), a pipeline with an aggregate and a second
graph, live action values, ``ON RESULT``, and pipelines that already ran as their own
Spark query (their checkpoint holds where they are).

    >>> # group = StreamGroup(runtime, "Readings"); group.host(running, hosting)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import access_periods
from streamwarden.engine.columns import MEMBER
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.fanout import IO_THREADS, write_per_recipient
from streamwarden.engine.jvm import is_stateful
from streamwarden.engine.reuse import BuiltOnce
from streamwarden.engine.shared import ROW, Member, SharedAggregate, group_rows, shared_input
from streamwarden.engine.sinks import committed_batches, start_writer, stream_writer
from streamwarden.language.expressions import parse_timestamp
from streamwarden.names import private_dir, safe_path
from streamwarden.plan.hashing import stable_text
from streamwarden.plan.templates import Template, parameterize, why_not
from streamwarden.runtime.handout import Handout, batch_key, hand_out
from streamwarden.runtime.plan import Pipeline
from streamwarden.runtime.quarantine import QuarantineLog
from streamwarden.security.rewrite.algorithm import Rewriting

if TYPE_CHECKING:
    from streamwarden.runtime.network import NetworkRuntime, _Running

GROUPS = ".groups"  # in the checkpoint root: one folder per group
log = logging.getLogger("streamwarden.network")  # as the network's own: network run prints it, serve logs it


@dataclass(frozen=True)
class Hosting:
    """How a group hosts a pipeline: the group's name, its stream, each deployed graph's template,
    and the shared aggregate (an aggregate group's; None for a stream's tuple group)."""

    group: str
    stream: str
    graphs: tuple[tuple[str, Template], ...]  # (graph id, template)
    aggregate: SharedAggregate | None = None

    @property
    def reading(self) -> Template:
        """A template of the group's: how it reads its stream (every member's is the same)."""
        return self.graphs[0][1]


def hosting(pipeline: Pipeline, checkpoint: Path) -> Hosting | None:
    """The pipeline's place in a group, or None when it keeps a pipeline of its own (see the
    module docstring)."""
    if committed_batches(checkpoint / "spark"):
        return None  # it ran as its own Spark query: its checkpoint holds where it is
    return group_of(pipeline.rewriting)


def group_of(rewriting: Rewriting) -> Hosting | None:
    """The group that can run ``rewriting``'s graphs with others', or None (see the module docstring)."""
    place = placement(rewriting)
    return place if isinstance(place, Hosting) else None


def placement(rewriting: Rewriting) -> Hosting | str:
    """The group that can run ``rewriting``'s graphs with others', or why none can (a phrase)."""
    if rewriting.on_result:
        return "it publishes its results (ON RESULT)"
    if not rewriting.deployed:
        return "nothing of it is authorized"
    graphs = []
    for graph in rewriting.deployed:
        template = parameterize(graph.root)
        if template is None:
            return why_not(graph.root)
        graphs.append((graph.id, template))
    streams = {t.stream for _, t in graphs}
    if len(streams) != 1:
        return "its graphs read different streams"
    stream = streams.pop()
    readings = {t.reading_key for _, t in graphs}
    if len(readings) != 1:
        return "its graphs read the stream for different roles or levels"
    stateful = [t for _, t in graphs if t.stateful]
    if not stateful:  # the stream's tuple group, one per shield and level the stream is read through
        reading = readings.pop()
        return Hosting(stream if reading == stable_text(()) else f"{stream}_read{_short_hash(reading)}", stream,
                       tuple(graphs))
    if len(graphs) > 1:
        return "it aggregates in one graph and has another"
    aggregate = SharedAggregate.of(stateful[0])
    if aggregate is None:
        hidden = sorted({a for a, _ in stateful[0].keys} - {a for a, _ in stateful[0].raw_keys})
        if hidden:  # grouped by the stream's value, the group would count what her view hides
            return (f"its aggregate selects on {', '.join(hidden)}, which a policy or a provider may hide from its "
                    "users (each member's own plan applies the selection to what she may see)")
        return "its aggregate has a constant of its own beside the keys (each member would need its own state)"
    # one group per shared plan: the plan's text names it, the same in every process
    return Hosting(f"{stream}_agg{_short_hash(aggregate.template.key)}", stream, tuple(graphs), aggregate)


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class GroupStopping(RuntimeError):
    """A micro-batch that ended because its group is being stopped (nothing of it was delivered)."""


#: Restarts of a group whose Spark query failed, in a row without a micro-batch done between
#: them, before its members are told it failed (they are tried again when the store changes).
MAX_RESTARTS = 5
#: Seconds before the n-th restart in a row: at once, then 1, 2, 4, ... at most this.
RESTART_PAUSE_MAX = 60.0
BACKFILLS = "backfills"  # in a group's checkpoint: what a joiner must still receive of the history
#: The pool of Spark's fair scheduler a backfill's jobs run in: beside the groups' micro-batches,
#: taking at most a fair share of the cores, never ahead of them in one queue.
BACKFILL_POOL = "streamwarden-backfill"


class StreamGroup:
    """One group: its Spark query, its members, and what it has delivered.

    **Nothing a member does stops the group.** A group whose Spark query keeps state (a shield,
    an aggregate) first runs its whole input once in each micro-batch (persisted: the shield and
    the aggregate move their state on whatever the members' plans are, even when every plan
    folds to nothing, as ``NULL > 100`` does once a policy hides ``pulse``); the members' plans
    then read it. A stateless group's members read the batch directly. A member whose plan
    fails is found (each template alone, then halves of its members) and fails alone, with the
    first line of the real cause; a joiner's backfill runs beside the group in a worker thread,
    in a pool of its own of Spark's fair scheduler, and one that cannot read its history fails
    that joiner alone, naming the file. A group whose Spark query fails anyway is restarted from
    its checkpoint (:meth:`failed`, :meth:`restart_due`).
    """

    def __init__(self, runtime: "NetworkRuntime", place: Hosting):
        self.runtime = runtime
        self.key = place.group
        self.stream = place.stream
        self.aggregate = place.aggregate
        self.reading = place.reading
        self.checkpoint = runtime.root / GROUPS / place.group
        self.members: dict[str, tuple["_Running", Hosting]] = {}  # by pipeline name
        self.query: StreamingQuery | None = None
        self.stateful = True  # its Spark query keeps state (known when it starts): see _batch
        self.failure: str | None = None  # why its Spark query last failed (None: it did not, or ran a batch since)
        self.restarts = 0  # failures in a row, without a micro-batch done between them
        self.restart_at = 0.0  # time.monotonic() from which it may start again
        self.quarantine_log = QuarantineLog(_tag(place.group))
        self._lock = threading.Lock()  # members change under the runtime's lock, batches read them under this
        self._joined_lock = threading.Lock()  # joined.json: written by micro-batches and the backfill worker
        self._stopping = threading.Event()  # set while stop() waits for Spark: a batch gives up the runtime's lock
        self._folders: dict[tuple[str, str], Path] = {}  # (user, query) -> her folder, its path checked
        self._plans = BuiltOnce()  # the members' plan, rebuilt when they change
        self._backfills: ThreadPoolExecutor | None = None  # one worker: the joiners' histories, in order
        self._backfilling: dict[int, Future[None]] = {}  # join batches submitted to the worker and not done

    @property
    def name(self) -> str:
        return f"group-{self.key}"

    @property
    def abandoned(self) -> bool:
        """Failed :data:`MAX_RESTARTS` times in a row: not restarted until the store changes."""
        return self.restarts > MAX_RESTARTS

    # -- members ---------------------------------------------------------------------------
    def host(self, running: "_Running", place: Hosting) -> None:
        with self._lock:
            self.members[running.pipeline.name] = (running, place)

    def release(self, name: str) -> None:
        with self._lock:
            self.members.pop(name, None)

    def _fail_member(self, running: "_Running", reason: str, detail: str) -> None:
        """``running`` fails alone: its users' status says ``reason``, the log ``detail``. It is
        forgotten as a member, so that when it is tried again (the store changed) it joins anew
        and receives, by a backfill, what the group delivered while it had failed."""
        if running.failure is not None:
            return
        running.failure = reason
        log.error("%s: member %s failed: %s", self.name, running.pipeline.name, detail)
        with self._joined_lock:
            joined = _read_json(self.checkpoint / "joined.json")
            if joined.pop(_member_key(running), None) is not None:
                _write_json(self.checkpoint / "joined.json", joined)

    # -- its Spark query -------------------------------------------------------------------
    def start(self, catalog: Catalog) -> None:
        runtime = self.runtime
        private_dir(self.checkpoint)
        tag = _tag(self.key)
        frame = shared_input(runtime.spark, catalog, self.reading, runtime.inputs[self.stream], tag=tag,
                             lateness=runtime.lateness)
        if self.aggregate is not None:  # the windows' rows per key value, as the watermark closes them
            frame = self.aggregate.rows(frame, catalog.lattice)
        self.stateful = is_stateful(frame)
        writer = stream_writer(frame, self.checkpoint / "spark", trigger=runtime.trigger,
                               available_now=runtime.available_now, query_name=self.name, each_batch=self._batch)
        self.query = start_writer(writer, runtime.spark)
        self._resume_backfills()

    def failed(self, reason: str) -> None:
        """Its Spark query failed (``reason``: one line). It starts again from its checkpoint at
        the next poll once :meth:`restart_due`: at once the first time, then after a growing pause;
        after :data:`MAX_RESTARTS` failures in a row its members fail with the reason."""
        self.query = None
        self.failure = reason
        self.restarts += 1
        pause = 0.0 if self.restarts == 1 else min(RESTART_PAUSE_MAX, 2.0 ** (self.restarts - 2))
        self.restart_at = time.monotonic() + pause
        if self.abandoned:
            log.error("%s failed %d times in a row, the last: %s; its members fail until the store changes",
                      self.name, self.restarts, reason)
        else:
            log.error("%s failed: %s; restarting it from its checkpoint%s", self.name, reason,
                      f" in {pause:.0f} s" if pause else "")

    def restart_due(self) -> bool:
        return not self.abandoned and time.monotonic() >= self.restart_at

    def stop(self) -> None:
        """Stop the group's Spark query and its backfill worker (a backfill in flight is cancelled
        and done again at the next start: it is delivered once, under its own key). Whoever stops
        it may hold the runtime's lock (a poll, or the runtime stopping), which a micro-batch
        deciding its recipients waits for: the batch gives up instead (see :meth:`_runtime_lock`),
        so that stopping never waits on itself."""
        if self.query is not None:
            self._stopping.set()
            try:
                self.query.stop()
            finally:
                self.query = None
                self._stopping.clear()
        self._stop_backfills()

    @contextmanager
    def _runtime_lock(self) -> Iterator[None]:
        """The runtime's lock, for a micro-batch: given up when the group is being stopped (Spark
        runs the batch again from its checkpoint when the group starts again)."""
        lock = self.runtime._lock
        while not lock.acquire(timeout=0.05):
            if self._stopping.is_set():
                raise GroupStopping(f"{self.name} is stopping: its micro-batch ends here, to run again on restart")
        try:
            yield
        finally:
            lock.release()

    # -- one micro-batch -------------------------------------------------------------------
    def _batch(self, batch: DataFrame, batch_id: int) -> None:
        decision = self._decide(batch_id)
        with self._lock:  # gone since this batch was decided, or failed: not a member now
            hosted = {name: self.members[name] for name in decision["members"]
                      if name in self.members and self.members[name][0].failure is None}
        members = {index: hosted[name] for index, name in enumerate(decision["members"]) if name in hosted}
        # A stateful group's whole input runs once, first: its operators commit their state whatever
        # the members' plans (Spark 4.1 fails a batch whose state some operator did not commit, and
        # a plan that folds to nothing would skip them), and every template reads it from memory. A
        # stateless group's members read the batch directly: one job less in every micro-batch.
        delivered: dict[tuple[int, str], int] = {}
        emitted: dict[int, tuple[int, str]] = {}
        if self.stateful:
            batch = batch.persist()
        try:
            if self.stateful:
                batch.write.format("noop").mode("overwrite").save()
            if members:
                delivered, emitted = self._deliver_isolated(batch, decision, hosted, members, batch_id)
        finally:
            if self.stateful:
                batch.unpersist()
        latest: list[tuple["_Running", datetime]] = []
        for index, name in enumerate(decision["members"]):
            if name not in hosted or hosted[name][0].failure is not None:
                continue
            running = hosted[name][0]
            emitted_rows, at = emitted.get(index, (0, None))
            for user in running.pipeline.users:
                running.withheld[user] = running.withheld.get(user, 0) + emitted_rows - delivered.get((index, user), 0)
            if at is not None:
                latest.append((running, parse_timestamp(at)))
            running.batches += 1
        with ThreadPoolExecutor(max_workers=IO_THREADS) as pool:  # a file in each member's checkpoint
            list(pool.map(lambda m: self.runtime._emitted(*m), latest))
        joiners = [name for name in decision["members"]  # joined now: what came before, beside the group
                   if name in hosted and (decision["joined"].get(name) or {}).get("batch") == batch_id]
        if joiners and batch_id > 0:
            self._schedule_backfill(decision, joiners, batch_id)
        self.restarts, self.failure = 0, None  # a batch done: a later failure is the first in a row

    def _deliver_isolated(self, batch: DataFrame, decision: dict[str, Any],
                          hosted: dict[str, tuple["_Running", Hosting]], members: dict[int, tuple["_Running", Hosting]],
                          batch_id: int) -> tuple[dict[tuple[int, str], int], dict[int, tuple[int, str]]]:
        """The members' rows of ``batch`` (persisted) delivered; when that fails, the members whose
        plans fail are found and fail alone (:meth:`_culprits`), and the others' rows are delivered.
        A failure no member's plan explains is the group's own (the disk, the store): raised."""
        for attempt in range(2):
            live = {i: m for i, m in members.items() if m[0].failure is None}
            rows = self._member_rows(batch, live, live=True) if live else None
            if rows is None:
                return {}, {}
            rows = rows.persist()
            try:
                return self._deliver(rows, decision, hosted, "live", batch_id)
            except GroupStopping:
                raise
            except Exception as exc:  # noqa: BLE001 - a member's plan, or the group's own failure
                if attempt or not self._quarantine_culprits(batch, live, exc):
                    raise
                self._plans.forget()
            finally:
                rows.unpersist()
        raise AssertionError("unreachable")  # pragma: no cover

    def _quarantine_culprits(self, batch: DataFrame, members: dict[int, tuple["_Running", Hosting]],
                             exc: Exception) -> bool:
        """Find the members whose plans fail over ``batch`` and fail each alone; whether any did."""
        culprits = self._culprits(batch, members)
        for index, cause in culprits.items():
            running = members[index][0]
            self._fail_member(running, f"its plan fails over the stream's tuples: {cause}",
                              f"{cause} (the micro-batch failed: {_first_line(exc)})")
        return bool(culprits)

    def _culprits(self, batch: DataFrame, members: dict[int, tuple["_Running", Hosting]]) -> dict[int, str]:
        """The members (by index) whose rows of ``batch`` Spark cannot compute, each with the first
        line of why: each template's members together, then halves of a failing template's."""
        by_template: dict[str, list[int]] = {}
        for index, (_, place) in members.items():
            for _, template in place.graphs:
                by_template.setdefault(template.key, []).append(index)
        found: dict[int, str] = {}

        def probe(indexes: list[int]) -> None:
            chosen = {i: members[i] for i in sorted(set(indexes))}
            try:
                rows = self._member_rows(batch, chosen)
                if rows is not None:
                    rows.write.format("noop").mode("overwrite").save()
            except Exception as exc:  # noqa: BLE001 - what Spark raises for these members
                if len(chosen) == 1:
                    found[next(iter(chosen))] = _first_line(exc)
                    return
                half = len(indexes) // 2
                probe(indexes[:half])
                probe(indexes[half:])

        for indexes in by_template.values():
            probe(indexes)
        return found

    def _member_rows(self, frame: DataFrame, members: dict[int, tuple["_Running", Hosting]], *,
                     live: bool = False) -> DataFrame | None:
        """Each member's rows of ``frame`` (a tuple group's input, an aggregate group's closed
        windows), keyed by its index in the batch's decision. ``live``: ``frame`` is a
        micro-batch, and the plan is built once for these members and reused."""
        listed = [(template, Member(index, graph, template.values)) for index, (_, place) in members.items()
                  for graph, template in place.graphs]
        catalog = self.runtime.catalog
        lattice = catalog.lattice if catalog is not None else None

        def failed(template: Template, failing: Sequence[Member], exc: Exception) -> None:
            """A template Spark no longer accepts (the catalog changed under it): its members fail,
            each reported as its own, and the group's other members go on. The user is told that
            it failed, not Spark's words, which may name what her policies hide; the log has them."""
            for member in failing:
                self._fail_member(members[member.index][0],
                                  "its plan no longer compiles against the stream (the network's log says why)",
                                  f"{member.graph}: {_first_line(exc)}")

        def build(over: DataFrame) -> DataFrame | None:
            return group_rows(over, listed, self.aggregate, lattice, on_failure=failed)

        if not live:
            return build(frame)
        # the members' templates and constants say the plan, with the levels' lattice it compiles against
        key = (lattice, tuple((template.key, member) for template, member in listed))
        return self._plans.over(frame, key, build)

    def _decide(self, batch_id: int) -> dict[str, Any]:
        """Who is a member and who receives which event times in micro-batch ``batch_id``: decided
        once (from the members and access changes now), recorded before anything is written,
        read back when Spark runs the batch again after a crash."""
        folder = self.checkpoint / "decisions"
        path = folder / f"{batch_id}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        runtime = self.runtime
        with self._runtime_lock():
            with self._lock:
                members = sorted(self.members)
                pipelines = {name: self.members[name][0] for name in members}
            changes = runtime.server.changes()
            identities = runtime.store.incarnations()
            registered = {q.id: q for q in runtime.server.registrations()}
            recipients = []
            for index, name in enumerate(members):
                running = pipelines[name]
                current = registered.get(running.pipeline.query.id)
                if current is None or current.rid != running.pipeline.query.rid:
                    continue  # replaced or removed since it was planned: its grants are not these
                for user in running.pipeline.users:
                    periods = _after(access_periods(changes, running.pipeline.query, user), running.after.get(user))
                    if periods:
                        recipients.append([index, user, [[_iso(a), _iso(b)] for a, b in periods],
                                           identities.get(user)])
        keys = {name: _member_key(pipelines[name]) for name in members}
        with self._joined_lock:
            joined = _read_json(self.checkpoint / "joined.json")
            for name in members:  # when each joined, and what its own checkpoint says it had emitted then
                if keys[name] not in joined and pipelines[name].failure is None:  # a failed one joins when it recovers
                    joined[keys[name]] = {"batch": batch_id, "emitted": _iso(pipelines[name].emitted)}
            decision = {"members": members, "recipients": recipients,
                        "joined": {n: joined[keys[n]] for n in members if keys[n] in joined}}
            private_dir(folder)
            _write_json(path, decision)
            _write_json(self.checkpoint / "joined.json", {keys[n]: joined[keys[n]] for n in members
                                                          if keys[n] in joined})
        for old in folder.glob("*.json"):  # Spark replays only its latest batch: earlier ones are committed
            if old.stem.isdigit() and int(old.stem) < batch_id:
                old.unlink(missing_ok=True)
        return decision

    def _deliver(self, rows: DataFrame, decision: dict[str, Any], hosted: dict[str, tuple["_Running", Hosting]],
                 kind: str, batch_id: int) -> tuple[dict[tuple[int, str], int], dict[int, tuple[int, str]]]:
        """Each recipient's rows of ``rows`` into their folder, in one fan-out (``rows`` is
        persisted): the delivered count per (member, user), and what each member emitted (its
        rows and latest event time)."""
        runtime = self.runtime
        identities = runtime.store.incarnations()
        recipients = [(r, index, user, periods) for r, (index, user, periods, identity)
                      in enumerate(decision["recipients"])
                      if decision["members"][index] in hosted
                      and hosted[decision["members"][index]][0].failure is None
                      and identities.get(user) == identity]  # a user declared again since: not hers
        table = [(r, index, parse_timestamp(a), None if b is None else parse_timestamp(b))
                 for r, index, _, periods in recipients for a, b in periods]
        scratch = runtime.root / ".staging" / f"{self.name}-{kind}-{batch_id}"
        with write_per_recipient(rows, table, scratch, emitted=True) as fanned:
            deliveries: list[tuple[int, int, str, Path, str]] = []
            for r, index, user, _ in recipients:
                if r not in fanned.received:
                    continue
                pipeline = hosted[decision["members"][index]][0].pipeline
                folder = self._folders.get((user, pipeline.query.id))
                if folder is None:  # the path checked once (a thousand users: 0.15 s a batch), not at every batch
                    folder = self._folders[(user, pipeline.query.id)] = safe_path(runtime.output, user,
                                                                                  pipeline.query.id)
                if not folder.is_dir():  # made private once, not at every batch
                    runtime._user_folder(user)
                    private_dir(folder)
                deliveries.append((r, index, user, folder, f"batch={pipeline.fingerprint[:12]}-g"))
            # this micro-batch of this group's Spark query, whatever its members
            hand_out(fanned, [Handout(r, folder, prefix) for r, _, _, folder, prefix in deliveries],
                     batch_key(self.checkpoint / "spark", kind, batch_id), runtime.output,
                     whole_log=kind == "backfill")  # done again after a crash, maybe many batches later
        delivered: dict[tuple[int, str], int] = {}
        for r, index, user, _, _ in deliveries:
            running = hosted[decision["members"][index]][0]
            running.rows[user] = running.rows.get(user, 0) + fanned.received[r]
            delivered[(index, user)] = fanned.received[r]
        return delivered, fanned.emitted

    # -- backfills: what a joiner missed, beside the group -------------------------------------
    def _schedule_backfill(self, decision: dict[str, Any], joiners: list[str], batch_id: int) -> None:
        """Record what the members that joined at ``batch_id`` must still receive of what the group
        read before (written before Spark commits the batch: a crash after it finds the record),
        and hand it to the backfill worker."""
        wanted = set(joiners)
        record = {"batch": batch_id, "members": decision["members"],
                  "recipients": [r for r in decision["recipients"] if decision["members"][r[0]] in wanted],
                  "joined": {name: decision["joined"][name] for name in joiners}}
        folder = private_dir(self.checkpoint / BACKFILLS)
        _write_json(folder / f"{batch_id}.json", record)
        self._submit_backfill(batch_id)

    def _resume_backfills(self) -> None:
        """The backfills recorded and not done (the process stopped or crashed meanwhile)."""
        for path in sorted((self.checkpoint / BACKFILLS).glob("*.json"), key=lambda p: (len(p.stem), p.stem)):
            if path.stem.isdigit():
                self._submit_backfill(int(path.stem))

    def _submit_backfill(self, batch_id: int) -> None:
        with self._lock:
            if batch_id in self._backfilling:
                return
            if self._backfills is None:
                self._backfills = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-backfill")
            self._backfilling[batch_id] = self._backfills.submit(self._run_backfill, batch_id)

    def wait_backfills(self, timeout: float | None = None) -> bool:
        """Wait for the backfills submitted so far (each ends delivered, failed alone, or cancelled);
        whether they all ended within ``timeout``."""
        with self._lock:
            pending = list(self._backfilling.values())
        _, left = wait_futures(pending, timeout=timeout)
        return not left

    def _stop_backfills(self) -> None:
        """Cancel the backfill in flight and wait for the worker (its record stays: done at the next start)."""
        with self._lock:
            worker, self._backfills = self._backfills, None
        if worker is None:
            return
        self._stopping.set()
        try:
            self.runtime.spark.sparkContext.cancelJobGroup(self._job_group)
        except Exception:  # Spark stopping under us
            pass
        worker.shutdown(wait=True, cancel_futures=True)
        self._stopping.clear()
        with self._lock:
            self._backfilling.clear()

    @property
    def _job_group(self) -> str:
        return f"streamwarden-{self.name}-backfill"

    def _run_backfill(self, batch_id: int) -> None:
        """The worker's: one recorded backfill delivered, then its record removed. A joiner whose
        history cannot be read fails alone; one that is no longer a member is left out."""
        path = self.checkpoint / BACKFILLS / f"{batch_id}.json"
        try:
            record = _read_json(path)
            if not record or self._stopping.is_set():
                return
            with self._lock:
                hosted = {name: self.members[name] for name in record["joined"]
                          if name in self.members and self.members[name][0].failure is None
                          and _member_key(self.members[name][0]) in self._joined_keys()}
            if hosted:
                context = self.runtime.spark.sparkContext  # the worker's thread runs backfills only
                context.setLocalProperty("spark.scheduler.pool", BACKFILL_POOL)
                context.setJobGroup(self._job_group, f"{self.name}: backfill of micro-batch {batch_id}",
                                    interruptOnCancel=True)
                self._backfill(record, hosted, batch_id)
            if not self._stopping.is_set():
                path.unlink(missing_ok=True)
        except Exception as exc:  # noqa: BLE001 - cancelled by a stop, or a failure of the group's own
            if not self._stopping.is_set():
                log.error("%s: the backfill of micro-batch %d failed: %s (tried again when the group starts)",
                          self.name, batch_id, _first_line(exc))
        finally:
            with self._lock:
                self._backfilling.pop(batch_id, None)

    def _joined_keys(self) -> set[str]:
        with self._joined_lock:
            return set(_read_json(self.checkpoint / "joined.json"))

    def _backfill(self, record: dict[str, Any], joiners: dict[str, tuple["_Running", Hosting]], batch_id: int) -> None:
        """What the group read before ``batch_id``, for the members that joined at it: the rows a
        pipeline of their own would have delivered, computed by one batch job for all of them
        over exactly the files of those micro-batches (hard links in a private folder), through
        the same templates, and delivered once. A member that had emitted rows before (it left
        and came back) gets only later ones."""
        files = _processed_files(self.checkpoint / "spark", before=batch_id)
        if not files:
            return
        missing = next((f for f in files if not Path(f).is_file()), None) if "://" not in files[0] else None
        if missing is not None:  # archived or deleted since the group read it: these joiners alone fail
            for running, _ in joiners.values():
                self._fail_member(running, "its history cannot be read: an input file the network read before it "
                                           f"joined is gone ({Path(missing).name})",
                                  f"the backfill of micro-batch {batch_id} needs {missing}, which is gone")
            return
        runtime = self.runtime
        links = runtime.root / ".staging" / f"{self.name}-files-{batch_id}"
        shutil.rmtree(links, ignore_errors=True)
        private_dir(links)
        for i, source in enumerate(files):
            target = links / f"{i:08d}-{Path(source).name}"
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        try:
            catalog = runtime.catalog
            assert catalog is not None
            spark = runtime.spark
            indexes = {name: i for i, name in enumerate(record["members"])}
            members = {indexes[name]: member for name, member in joiners.items()}
            history = shared_input(spark, catalog, self.reading, links, tag=_tag(self.key), streaming=False)
            if self.aggregate is not None:  # the windows the group closed before batch_id, per key value
                history = self.aggregate.rows(history, catalog.lattice)
                history = history.filter(F.col(EVENT) <= F.lit(self._closed_before(batch_id)))
            rows = self._member_rows(history, members)
            if rows is None:
                return
            cuts = [(indexes[name], parse_timestamp(joined["emitted"])) for name, joined in record["joined"].items()
                    if name in joiners and joined.get("emitted")]
            if cuts:  # members that had emitted before: only what is later
                schema = StructType([StructField("_m", LongType()), StructField("_cut", TimestampType())])
                cut = F.broadcast(spark.createDataFrame(cuts, schema))
                rows = (rows.join(cut, rows[MEMBER] == cut["_m"], "left")
                        .filter(cut["_cut"].isNull() | (F.col(EVENT) > cut["_cut"])).select(EVENT, MEMBER, ROW))
            rows = rows.persist()
            try:
                _, emitted = self._deliver(rows, record, joiners, "backfill", batch_id)
                for index, (_, latest) in emitted.items():
                    running = next(m[0] for name, m in joiners.items() if indexes[name] == index)
                    runtime._emitted(running, parse_timestamp(latest))
            finally:
                rows.unpersist()
        finally:
            shutil.rmtree(links, ignore_errors=True)

    def _closed_before(self, batch_id: int) -> datetime:
        """The latest window end (``_event``) among the windows Spark's state evicted, and so the
        group emitted, before micro-batch ``batch_id``: those ending at or before the watermark of
        micro-batch ``batch_id - 1`` (the offsets log records it), less the gap a hopping window's
        slide leaves after its end."""
        assert self.aggregate is not None
        size, slide = self.aggregate.window
        watermark_ms = _batch_watermark_ms(self.checkpoint / "spark", batch_id - 1)
        return datetime.fromtimestamp(0, timezone.utc) + timedelta(milliseconds=watermark_ms,
                                                                   seconds=-max(0.0, slide - size))


def _processed_files(checkpoint: Path, *, before: int) -> list[str]:
    """The files Spark's file source read in micro-batches before ``before`` (its log, compacted
    every few batches into ``N.compact``), as local paths."""
    from urllib.parse import unquote, urlparse

    log = checkpoint / "sources" / "0"
    entries: dict[str, int] = {}
    if not log.is_dir():
        return []
    for path in sorted(log.iterdir()):
        if path.name.startswith("."):
            continue
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:  # the first line is the log's version
            if not line.strip():
                continue
            entry = json.loads(line)
            if int(entry["batchId"]) < before:
                entries[entry["path"]] = int(entry["batchId"])
    paths = []
    for uri in sorted(entries, key=lambda u: (entries[u], u)):
        parsed = urlparse(uri)
        paths.append(unquote(parsed.path) if parsed.scheme in ("file", "") else uri)
    return paths


def _batch_watermark_ms(checkpoint: Path, batch_id: int) -> int:
    """The event-time watermark (ms) micro-batch ``batch_id`` ran with, from Spark's offsets log
    (0 before the first batch)."""
    path = checkpoint / "offsets" / str(batch_id)
    if batch_id < 0 or not path.is_file():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines()  # the log's version, then the batch's metadata
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0)) if len(lines) > 1 else 0


def _after(periods: list[tuple[datetime, datetime | None]], after: datetime | None
           ) -> list[tuple[datetime, datetime | None]]:
    from streamwarden.runtime.network import _delivered_after

    return _delivered_after(periods, after)


def _first_line(exc: BaseException) -> str:
    from streamwarden.runtime.network import _first_line as first_line

    return first_line(exc)


def _iso(t: datetime | None) -> str | None:
    from streamwarden.plan.expr import format_timestamp

    return None if t is None else format_timestamp(t)


def _member_key(running: "_Running") -> str:
    """A member as the group remembers when it joined: its pipeline in one registration (a query
    registered again under its id is a new member, and starts from the input's beginning)."""
    return f"{running.pipeline.name}@{running.pipeline.query.rid or ''}"


def _tag(stream: str) -> str:
    return f"_group_{stream}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, value: Any) -> None:
    from streamwarden.runtime.network import _write_text

    _write_text(path, json.dumps(value) + "\n")


__all__ = ["GROUPS", "GroupStopping", "Hosting", "StreamGroup", "group_of", "hosting", "placement"]
