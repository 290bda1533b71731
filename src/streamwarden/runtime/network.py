"""The shared network on Spark's own streaming operators, with live changes.

The runtime keeps a network of registered queries running over file streams:

* **Compiled once per change.** The registrations and the catalog come from the store;
  :func:`~streamwarden.runtime.plan.plan_network` secures each query for each listed
  user and groups them into pipelines, and each pipeline is compiled by the one
  compiler (:func:`~streamwarden.engine.execute.build_job`) into one Spark streaming
  query: stream-stream joins and windowed aggregates with watermarks, shields and
  ``[ROWS n]`` windows in ``transformWithState``, all state in Spark's state store
  under the pipeline's own checkpoint. Nothing is planned per micro-batch.
* **One write per micro-batch.** Each micro-batch of a pipeline goes through its
  terminal switch: the access changes in the store decide, row by row (by the row's
  event time, :func:`~streamwarden.catalog.registry.access_periods`), which users get
  it, and one partitioned write puts every user's rows into ``DIR/<user>/<query>/``.
  That decision is recorded in the pipeline's checkpoint before anything is written, so a
  micro-batch Spark replays after a crash delivers exactly what its first attempt did,
  whatever access changed in between (cursors count rows that never move).
* **Live changes.** :meth:`NetworkRuntime.poll` (the CLI calls it between micro-batches)
  reads the store: grants, revocations and expiries take effect at the next
  micro-batch (the terminal switch reads them); a new registration, or a user whose
  roles give a new plan, starts a pipeline; an unregistered query stops its; a new
  catalog recompiles, restarts the pipelines whose graphs it changed with a fresh state
  and leaves the others' state alone. A user who moves to another pipeline (their plan
  changed) receives from it only rows after the latest one the old pipeline emitted
  (its *handover*), so nothing is delivered twice.
* **Switches.** A pipeline none of whose users can receive another row (every grant
  ended before what it has emitted) is stopped: it does no work at all. Its checkpoint
  stays, so when a grant returns it resumes where it stopped and its windows still
  hold their partners.
* **Isolation.** A pipeline that cannot start or fails (a query Spark refuses, an input it
  cannot read) stops alone: the other pipelines keep running, and its users' status says
  why. It is tried again when the store's registrations or catalog change.
* **Status.** Each listed user's ``DIR/<user>/<query>/_access.json`` says whether they
  receive the query's rows now and why not (no grant, a grant that ended by the event time
  the pipeline has reached, not cleared, no role policy, a failed pipeline), rewritten
  when that changes.
* **A new registration, a new identity, start with nothing.** A query registered again
  under an earlier id (:attr:`~streamwarden.catalog.registry.RegisteredQuery.rid`) and a
  user declared again after being removed from the catalog
  (:meth:`~streamwarden.catalog.store.CatalogStore.incarnations`) do not inherit the rows,
  state or handover of the earlier one: those are moved aside into ``DIR/.retired/`` and
  ``CHECKPOINTS/.retired/`` (hidden, private: the operator's to inspect or delete).
* **Broken records.** Every pipeline reads in quarantine mode: a provider's broken record
  is dropped and counted (per pipeline, :attr:`_Running.quarantined`, with the place of the
  latest micro-batch's first), with one warning per micro-batch in the log
  ``streamwarden.network`` (:mod:`streamwarden.runtime.quarantine`); it never stops the
  delivery of anyone's rows.

**Queries as data, where the shape allows.** Every pipeline that evaluates a tuple at a
time over one plain stream (selections and projections under read policies) is a member
of its stream's *group* (:mod:`streamwarden.runtime.groups`): one Spark query for all of
them, whatever their number, which joins each micro-batch with the members' constants
and registers members without a restart. Sharing *subplans* between Spark queries is
not the way: Spark SQL plans are trees, a subplan used by two consumers runs twice in
one query (exchange reuse does not apply: column pruning makes the branches differ), and
stateful operators added to a running query would be renumbered and restored into the
wrong state. So every other pipeline (windows, joins, shields, levels) still runs as a
Spark query of its own.

    >>> # rt = NetworkRuntime(spark, store_url, {"S": "in/S"}, "out", "cp"); rt.start(available_now=True)
    >>> # rt.await_termination(); read_user_rows(spark, "out", "ann", "q1")
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.model import Catalog
from streamwarden.catalog.registry import AccessChange, Period, RegisteredQuery, access_periods
from streamwarden.catalog.store import CatalogStore
from streamwarden.engine.columns import MEMBER
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.execute import broken_record, build_job, check_inputs, iso_timestamp, single_value
from streamwarden.engine.failures import root_cause
from streamwarden.engine.fanout import write_per_recipient
from streamwarden.engine.jvm import jvm_view
from streamwarden.engine.shared import ROW
from streamwarden.engine.sinks import (check_checkpoint, committed_batches, read_parts, start_writer,
                                      stream_writer)
from streamwarden.errors import InputError, StreamwardenError, UnsupportedError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.names import check_name, open_private, private_dir, safe_path
from streamwarden.plan.nodes import sources
from streamwarden.runtime.deliveries import deliveries
from streamwarden.runtime.groups import MAX_RESTARTS, Hosting, StreamGroup, group_of, hosting
from streamwarden.runtime.handout import Handout, batch_key, hand_out
from streamwarden.runtime.plan import NetworkPlan, Pipeline, collector_paused, plan_network
from streamwarden.runtime.quarantine import QuarantineLog
from streamwarden.runtime.runner import StreamsRunner
from streamwarden.security.punctuation.generate import policy_from_statements
from streamwarden.security.punctuation.spgen import spgen_lines

EARLIEST = "_earliest"  # ON RESULT: a row's earliest result timestamp (SPGen's date)
RETIRED = ".retired"  # in the output and checkpoint folders: what an earlier registration or identity left
IDENTITY = ".identity"  # in a user's output folder: the identity (incarnation) its rows were delivered to
REGISTRATION = "registration.json"  # in a query's checkpoint folder: the registration its state belongs to
DECISIONS = "decisions"  # in a pipeline's checkpoint: each micro-batch's delivery decision, until committed
MARKER = ".streamwarden-network"  # in the output folder: which checkpoint root writes into it
STATUS = "_access.json"  # per user and query: do they receive it now, and why not
EVENT_TIME_EVERY_S = 10.0  # a status whose only news is the event time reached: rewritten this often
log = logging.getLogger("streamwarden.network")  # network run prints its warnings, serve logs them
#: Each access change a running network picks up, at INFO (network run prints them: a grant
#: given from another shell is seen taking effect).
access_log = logging.getLogger("streamwarden.network.access")


@dataclass
class _Running:
    """A started pipeline: its plan, its Spark query and what it has emitted so far."""

    pipeline: Pipeline
    stream: StreamingQuery | None  # None: stopped by its switch
    checkpoint: Path
    after: dict[str, datetime | None]  # per user: deliver only rows after this event time (see _handover)
    emitted: datetime | None = None  # the latest event time of a row it emitted (delivered or not)
    batches: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # per user: rows delivered
    withheld: dict[str, int] = field(default_factory=dict)  # per user: rows emitted outside their grants
    spgen: datetime | None = None  # ON RESULT: the date of SPGen's policy (the pipeline's earliest result)
    failure: str | None = None  # why it could not start or stopped on an error (not started again until replanned)
    quarantined: int = 0  # broken input records dropped (since this process started)
    last_quarantined: str | None = None  # where the latest micro-batch's first one was (file:line), never its text
    quarantine_log: QuarantineLog = field(default_factory=QuarantineLog)  # which micro-batches were counted
    group: str | None = None  # the group that hosts it (streamwarden.runtime.groups); None: its own query
    place: Hosting | None = None  # where a group can host it, decided when it is prepared (None: its own query)


#: What a user's ``_access.json`` for a query says: receiving, why, her periods, the event time
#: reached, and her pipeline (its name holds the level and graphs) or the query's level.
_StatusFacts = tuple[bool, str, tuple[Period, ...], datetime | None, str | None]


class NetworkRuntime(StreamsRunner):
    """Keeps the store's registered queries running as pipelines (see the module docstring).

    ``queries`` are registered (with ``catalog``, stored) before anything starts; without
    them the store's registrations and catalog are used. Checkpoints live under
    ``checkpoint_root/<query>/<fingerprint>``, which must lie outside ``output_dir``.
    """

    def __init__(self, spark: SparkSession, store_url: str, inputs: Mapping[str, str | Path],
                 output_dir: str | Path, checkpoint_root: str | Path, *, lateness: str = "0 seconds",
                 trigger: str | None = None, queries: tuple[RegisteredQuery, ...] | None = None,
                 catalog: Catalog | None = None, sp_folder: str | Path | None = None):
        self.spark = spark
        self.server = AuthorizationServer(store_url, sp_folder)
        self.store: CatalogStore = self.server.store
        if queries is not None:
            self.server.register(queries, catalog)
        self.inputs = dict(inputs)
        self.output = Path(output_dir)
        self.root = Path(checkpoint_root)
        check_checkpoint(self.root, self.output, sink_written=True)  # never overlapping
        self.lateness = lateness
        self.trigger = trigger
        self.available_now = False
        self.running: dict[str, _Running] = {}  # by pipeline name
        self.groups: dict[str, StreamGroup] = {}  # by name: the shared groups (streamwarden.runtime.groups)
        self.plan = NetworkPlan(())
        self._planned: dict[tuple[str, RegisteredQuery], NetworkPlan] = {}  # each registration's, for one catalog
        self._statuses: dict[tuple[str, str], _StatusFacts] = {}  # (user, query): what its _access.json says
        self._status_folders: dict[tuple[str, str], Path] = {}  # (user, query): her folder, checked once
        self._status_times: dict[tuple[str, str], float] = {}  # (user, query): when its status was written
        self._status_problems: dict[tuple[str, str], str] = {}  # (user, query): why it could not be, said once
        self._runnable: set[tuple[str, str, tuple[str, ...]]] = set()  # group templates Spark checked
        self._bound: dict[str, str] = {}  # query id -> the registration (rid) its checkpoint folder is for, checked
        self._owners: dict[str, str] = {}  # user folder -> the identity it was checked to belong to
        self.catalog: Catalog | None = None
        self._seen: tuple[str, int] | None = None  # (registrations and catalog hash, last access change seq)
        self._lock = threading.RLock()
        self._emitted_lock = threading.Lock()
        self._stopped = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, *, available_now: bool = False) -> "NetworkRuntime":
        """Compile the store's network and start its pipelines (``available_now``: each processes
        what its inputs hold, then stops; :meth:`await_termination` waits for them)."""
        self.available_now = available_now
        marker = self.output / MARKER
        if not marker.is_file() and any(committed_batches(p / "spark") for p in self.root.glob("*/*")):
            raise InputError(f"the checkpoint {self.root} has already committed results to {self.output}, which is "
                             "gone or empty: resuming from it would write nothing for what it already processed. "
                             "Remove the checkpoint to start over, or pass a new one with --checkpoint")
        private_dir(self.root)
        private_dir(self.output)
        if not marker.is_file():
            marker.write_text(json.dumps({"checkpoints": str(self.root.resolve())}) + "\n", encoding="utf-8")
        self.poll(force=True)
        return self

    def poll(self, *, force: bool = False) -> bool:
        """Apply what changed in the store since the last poll; returns whether anything did."""
        with self._lock, collector_paused():  # reading and planning make no garbage cycles: see collector_paused
            catalog, queries = self._read_store()
            changes = self.server.changes()
            # the users' identities too: one removed and declared again between two polls leaves
            # the catalog's text as it was, but her rows must still be moved aside (a replan does it)
            key = (_digest(catalog.text, queries, self.store.incarnations()), changes[-1].line if changes else 0)
            if not force and key == self._seen:
                # Nothing new in the store, but pipelines move on: one whose rows now pass every
                # user's revocation stops here (a switch follows what it has emitted, too), and a
                # grant's end may now lie behind the event time reached (the status says so).
                self._switch(changes)
                self._write_status(changes)
                return False
            if force or self._seen is None or key[0] != self._seen[0]:
                self._replan(catalog, queries)
            self._switch(changes)
            self._write_status(changes)
            if self._seen is not None:  # changes made while it runs (not those it started with)
                for change in changes:
                    if change.line > self._seen[1]:
                        access_log.info("%s %s on %s from %s: in effect from the next micro-batch",
                                        "grant for" if change.grant else "revocation of", change.user, change.query,
                                        _iso(change.ts))
            self._seen = key
            return True

    def stop(self) -> None:
        """Stop every pipeline (each checkpoint stays consistent: Spark commits whole batches)."""
        with self._lock:
            for running in self.running.values():
                _stop(running)
            for group in self.groups.values():
                group.stop()
            self._stopped.set()

    def await_termination(self) -> None:
        """Wait for every started pipeline (with ``available_now``: until each has processed its input)."""
        self.wait(None)

    def wait(self, timeout: float | None) -> bool:
        """With ``available_now``, wait for every pipeline to process its input. A continuous
        network ends only when stopped: with no pipeline running (no user can receive a row
        now) it still waits for the grant that starts one. A pipeline that fails ends alone
        (:meth:`failures`)."""
        try:
            if self.available_now:
                for _ in range(MAX_RESTARTS + 2):  # a group that failed is restarted, and waited for again
                    for stream in self.streams:
                        try:
                            if timeout is None:
                                stream.awaitTermination()
                            elif not stream.awaitTermination(timeout):  # type: ignore[arg-type]  # float seconds
                                return False
                        except Exception:  # it failed: noted below, the others are still waited for
                            continue
                    self.check()
                    if not self._restart_groups(wait=timeout is None):
                        break
                for group in list(self.groups.values()):  # the joiners' histories, delivered beside the groups
                    if not group.wait_backfills(timeout):
                        return False
                with self._lock:  # the status as the processed input leaves it (the event time reached)
                    self._write_status(self.server.changes(), final=True)
                return True
            self.check()
            return self._stopped.wait(timeout)
        finally:
            self._read_quarantines()

    def process_all_available(self) -> None:
        """Return once every running pipeline has processed what its inputs hold now (a group that
        failed meanwhile restarted from its checkpoint, when its restart is due, and waited for)."""
        for _ in range(MAX_RESTARTS + 2):
            for stream in self.streams:
                try:
                    if stream.isActive:
                        stream.processAllAvailable()
                except Exception:  # it failed: noted by check(), the others go on
                    continue
            self.check()
            if not self._restart_groups(wait=False):
                break
        for group in list(self.groups.values()):  # the joiners' histories, delivered beside the groups
            group.wait_backfills()

    def _restart_groups(self, *, wait: bool) -> bool:
        """Start again the groups whose Spark query failed and whose restart is due (``wait``: also
        those due later, after their pause); whether any started."""
        with self._lock:
            failed = [g for g in self.groups.values() if g.query is None and g.failure is not None and not g.abandoned]
        if wait and failed:
            time.sleep(max(0.0, min(g.restart_at for g in failed) - time.monotonic()))
        with self._lock:
            changes = self.server.changes()
            restarted = False
            for group in failed:
                if group.query is None and group.restart_due():
                    restarted = self._start_group(group, changes) or restarted
            return restarted

    @property
    def streams(self) -> list[StreamingQuery]:
        """The Spark queries of the pipelines running (or done) now, failed ones left out."""
        with self._lock:
            own = [r.stream for r in self.running.values() if r.stream is not None and r.failure is None
                   and _failure(r.stream) is None]
            return own + [g.query for g in self.groups.values() if g.query is not None and _failure(g.query) is None]

    def delivery_totals(self) -> tuple[int, int, int]:
        """(rows delivered, users who received rows, rows withheld outside grants) over the
        pipelines this process runs (a progress line; read without the lock a batch may hold:
        counts a batch is adding may be seen at the next line)."""
        delivered: dict[str, int] = {}
        withheld = 0
        for running in list(self.running.values()):
            for user, count in list(running.rows.items()):
                delivered[user] = delivered.get(user, 0) + count
            withheld += sum(list(running.withheld.values()))
        return sum(delivered.values()), sum(1 for n in delivered.values() if n), withheld

    def check(self) -> None:
        """Note the pipelines that stopped on an error (each alone: the others run on); never
        raises for them. :meth:`failures` says which, and why."""
        with self._lock:
            for name, running in self.running.items():
                if running.failure is None and (failed := _failure(running.stream)) is not None:
                    running.failure = failed
                    log.error("pipeline %s failed: %s", name, failed)
            for group in self.groups.values():
                if group.query is not None and (failed := _failure(group.query)) is not None:
                    group.failed(failed)  # restarted from its checkpoint at the next poll, then after pauses
                if group.abandoned:  # failed again and again: its members fail with it, each reported as its own
                    for running, _ in group.members.values():
                        running.failure = running.failure or group.failure

    def failures(self) -> dict[str, str]:
        """Failed pipelines by name, each with its one-line reason."""
        self.check()
        with self._lock:
            return {name: r.failure for name, r in self.running.items() if r.failure is not None}

    def pipelines(self) -> list[tuple[str, _Running]]:
        """The pipelines planned now, by name (a copy, taken under the runtime's lock)."""
        self._read_quarantines()
        with self._lock:
            return list(self.running.items())

    def _read_quarantines(self) -> None:
        """The broken records every query quarantined since the last read (a group's count for each
        of its members: their input is the group's)."""
        with self._lock:
            for running in self.running.values():
                _read_quarantine(running)
            for group in self.groups.values():
                if group.query is None:
                    continue
                try:
                    found_now = group.quarantine_log.read_query(group.query)
                except Exception:  # stopping under us
                    continue
                for found in found_now:
                    log.warning("%s", found.line(group.name))
                    for running, _ in group.members.values():
                        running.quarantined += found.records
                        running.last_quarantined = found.first

    # -- planning ----------------------------------------------------------------------------
    def _read_store(self) -> tuple[Catalog, tuple[RegisteredQuery, ...]]:
        if not self.store.has_catalog():
            raise StreamwardenError(f"the store {self.store.url} holds no catalog: load one with `streamwarden check "
                                    f"CATALOG --store {self.store.url}` or register queries with --catalog")
        return self.store.load(), self.server.registrations()

    def _replan(self, catalog: Catalog, queries: tuple[RegisteredQuery, ...]) -> None:
        """Compile the network again: start new pipelines, stop retired ones, keep the rest."""
        for q in queries:
            check_name("query id", q.id)
            for user in q.users:
                check_name("user", user)
        self._retire_identities()
        self._retire_registrations(queries)
        plan = self._plan(catalog, queries)
        wanted = {p.name: p for p in plan.pipelines}
        for name in [n for n in self.running if n not in wanted]:  # retired: unregistered, or a new plan
            retired = self.running.pop(name)
            _stop(retired)
            if retired.group is not None:
                self.groups[retired.group].release(name)
            self._handover(retired.pipeline.query.id, retired.pipeline.users, retired.emitted)
        if not self.running:  # starting: pipelines that ran before but are not wanted now retired meanwhile
            self._handover_stale({p.fingerprint[:32] for p in plan.pipelines})
        for name, pipeline in wanted.items():
            if name in self.running:
                running = self.running[name]
                if running.pipeline.users != pipeline.users:  # users joined or left: what each must not get again
                    running.after = self._after(running.checkpoint, pipeline)
                running.pipeline = pipeline  # the switch reads its users live
                if running.failure is not None:  # the store changed: a failed pipeline is tried again
                    running.failure, running.stream = None, None
                continue
            running = self.running[name] = self._prepare(pipeline)
            if running.place is not None:  # a shared group hosts it (streamwarden.runtime.groups)
                place = running.place
                group = self.groups.get(place.group) or self.groups.setdefault(place.group, StreamGroup(self, place))
                group.host(running, place)
                running.group = place.group
        for group in self.groups.values():  # the store changed: a group that kept failing is tried again
            if group.abandoned:
                group.restarts, group.restart_at = 0, 0.0
        self.plan = plan
        self.catalog = catalog

    def _plan(self, catalog: Catalog, queries: tuple[RegisteredQuery, ...]) -> NetworkPlan:
        """:func:`plan_network` of ``queries``, each registration planned once for one catalog: a
        registration among a thousand costs its own planning, not the thousand's (a query's
        pipelines depend only on it and the catalog)."""
        planned = {}
        for q in queries:
            key = (catalog.text or "", q)
            if key not in self._planned:  # new, or registered again: its folders may be new too
                self._forget_statuses(query=q.id)
            planned[key] = self._planned.get(key) or plan_network(catalog, (q,), lateness=self.lateness)
        self._planned = planned  # what is no longer registered is forgotten
        pipelines = sorted((p for part in planned.values() for p in part.pipelines),
                           key=lambda p: (p.query.id, p.fingerprint))
        return NetworkPlan(tuple(pipelines), tuple(d for part in planned.values() for d in part.denials), queries)

    # -- a new registration or identity starts with nothing ------------------------------------------
    def _retire_registrations(self, queries: tuple[RegisteredQuery, ...]) -> None:
        """A query id whose registration is not the one its checkpoint folder was made for: stop
        its pipelines and move its state and every user's rows of it aside."""
        for q in queries:
            if q.rid is None or self._bound.get(q.id) == q.rid:
                continue  # checked before (a thousand registrations: not a thousand files read per poll)
            marker = self.root / q.id / REGISTRATION
            try:
                recorded = json.loads(marker.read_text(encoding="utf-8")).get("rid")
            except (OSError, ValueError, AttributeError):
                recorded = None
            if recorded == q.rid:
                self._bound[q.id] = q.rid
                continue
            if recorded is not None:
                for name in [n for n, r in self.running.items() if r.pipeline.query.id == q.id]:
                    retired = self.running.pop(name)
                    _stop(retired)
                    if retired.group is not None:
                        self.groups[retired.group].release(name)
                stamp = f"{q.id}-{recorded}"
                _move_aside(self.root / q.id, self.root / RETIRED / stamp)
                for folder in self.output.glob(f"*/{q.id}"):
                    _move_aside(folder, self.output / RETIRED / folder.parent.name / stamp)
            private_dir(self.root / q.id)
            _write_text(marker, json.dumps({"rid": q.rid}) + "\n")
            self._bound[q.id] = q.rid

    def _retire_identities(self) -> None:
        """A user folder of the output delivered to another identity than the user's now (or to
        a user no longer declared): moved aside, so no later holder of the name reads it."""
        current = self.store.incarnations()
        if not self.output.is_dir():
            return
        for folder in self.output.iterdir():
            if folder.name.startswith(".") or self._owners.get(folder.name) == current.get(folder.name, ""):
                continue  # checked before, and the user has the same identity now
            if not folder.is_dir():
                continue
            marker = folder / IDENTITY
            try:
                recorded: str | None = marker.read_text(encoding="utf-8").strip()
            except OSError:
                recorded = None
            now = current.get(folder.name)
            if now is not None and recorded in (None, now):
                if recorded is None:  # written before identities: it is this user's
                    _write_text(marker, now + "\n")
                self._owners[folder.name] = now
                continue
            _move_aside(folder, self.output / RETIRED / f"{folder.name}-{recorded or 'undeclared'}")
            self._forget_statuses(user=folder.name)

    def _forget_statuses(self, *, user: str | None = None, query: str | None = None) -> None:
        """Write the statuses of ``user`` (or of ``query``) at the next poll even if unchanged: their
        folders moved or are new."""
        for written in (self._statuses, self._status_folders, self._status_times,  # all keyed (user, query)
                        self._status_problems):
            for key in [k for k in written if k[0] == user or k[1] == query]:
                del written[key]

    def _user_folder(self, user: str, identities: Mapping[str, str] | None = None) -> Path:
        """``DIR/<user>/``: private, and marked with the identity its rows go to (``identities``:
        the store's, when the caller has read them already)."""
        folder = private_dir(safe_path(self.output, user), tighten=True)
        marker = folder / IDENTITY
        if not marker.is_file():
            identity = (identities if identities is not None else self.store.incarnations()).get(user)
            if identity is not None:
                _write_text(marker, identity + "\n")
        return folder

    def _emitted(self, running: _Running, at: datetime) -> None:
        """A pipeline emitted a row at event time ``at`` (kept in its checkpoint: switches, handovers
        and statuses follow it). A group's micro-batch and its backfill may say so at once: the
        latest wins, under a lock of its own."""
        with self._emitted_lock:
            if running.emitted is None or at > running.emitted:
                running.emitted = at
                _write_time(running.checkpoint / "emitted.json", at)

    def query_of(self, running: _Running) -> StreamingQuery | None:
        """The Spark query that runs a pipeline: its own, or its group's."""
        return self.groups[running.group].query if running.group is not None else running.stream

    # -- can the network run it? -----------------------------------------------------------------
    def runnable_problem(self, query: RegisteredQuery, catalog: Catalog) -> str | None:
        """Why the network could not run ``query`` for its users (None: it can), found by
        compiling each of its pipelines exactly as :meth:`_start` would and asking Spark's own
        checker of streaming plans, without starting anything. A group's template passed once
        passes for every member (the same plan, other constants): a thousand users registering
        one query template cost Spark one check."""
        plan = plan_network(catalog, [query], lateness=self.lateness)
        for pipeline in plan.pipelines:
            place = group_of(pipeline.rewriting)
            template = (catalog.text or "", place.group, tuple(t.key for _, t in place.graphs)) if place else None
            if template is not None and template in self._runnable:
                continue
            try:
                _check_streaming(self._frame(pipeline, catalog))
            except Exception as exc:  # whatever Spark or the compiler refuses: the message, one line
                return _first_line(exc)
            if template is not None:
                self._runnable.add(template)
        return None

    def _prepare(self, pipeline: Pipeline) -> _Running:
        """A pipeline's checkpoint (kept across runs: a pipeline wanted again resumes its state)."""
        checkpoint = self.root / pipeline.query.id / pipeline.fingerprint[:32]
        private_dir(checkpoint)
        return _Running(pipeline, None, checkpoint, self._after(checkpoint, pipeline),
                        _read_time(checkpoint / "emitted.json"), spgen=_read_time(checkpoint / "spgen.json"),
                        place=hosting(pipeline, checkpoint))

    # -- handover: no row twice when a user moves between pipelines -------------------------------
    def _handover(self, query: str, users: tuple[str, ...], emitted: datetime | None) -> None:
        """A pipeline retires (its plan changed, or its query was unregistered): remember, per user,
        the latest event time it emitted; whichever pipeline serves them next delivers only later rows."""
        if emitted is None:
            return
        path = self.root / query / "handover.json"
        marks = _read_marks(path)
        for user in users:
            mark = marks.get(user)
            if mark is None or emitted > mark:
                marks[user] = emitted
        _write_marks(path, marks)

    def _handover_stale(self, wanted: set[str]) -> None:
        """At start: checkpoints of pipelines no longer wanted (the catalog changed while nothing ran)."""
        for users_file in self.root.glob("*/*/users.json"):
            if users_file.parent.name not in wanted:
                users = tuple(json.loads(users_file.read_text(encoding="utf-8")))
                self._handover(users_file.parent.parent.name, users, _read_time(users_file.parent / "emitted.json"))

    def _after(self, checkpoint: Path, pipeline: Pipeline) -> dict[str, datetime | None]:
        """Per user, what this pipeline must not deliver again: the handover of the pipeline that
        served them last (nothing for a user new to the query), taken when the user joins it and
        again whenever it is prepared: a user who comes back to a pipeline she left (a policy
        changed, then changed back) must not receive again what the pipeline that served her
        meanwhile delivered, which the returning pipeline, resuming from its checkpoint, emits too."""
        after = _read_marks(checkpoint / "after.json")
        handover = _read_marks(self.root / pipeline.query.id / "handover.json")
        moved = False
        for user in pipeline.users:
            mark, kept = handover.get(user), after.get(user)
            if user not in after or (mark is not None and (kept is None or mark > kept)):
                moved = moved or user not in after or kept != mark
                after[user] = mark
        if moved:
            _write_marks(checkpoint / "after.json", after)
        users = checkpoint / "users.json"
        if not users.is_file() or json.loads(users.read_text(encoding="utf-8")) != list(pipeline.users):
            _write_text(users, json.dumps(list(pipeline.users)) + "\n")
        return after

    # -- switches ----------------------------------------------------------------------------
    def _switch(self, changes: tuple[AccessChange, ...]) -> None:
        """Start the pipelines some user can still receive rows of; stop the others."""
        for name, running in self.running.items():
            if running.failure is not None or running.group is not None:
                continue
            failed = _failure(running.stream)
            if failed is not None:  # stopped on an error: alone, reported, not restarted in a loop
                running.failure = failed
                log.error("pipeline %s failed: %s", name, failed)
                continue
            wanted = self._receivable(running, changes)
            if wanted and (running.stream is None or not running.stream.isActive):
                try:
                    running.stream = self._start(running)
                except Exception as exc:  # this pipeline alone: the others start and run
                    running.stream = None
                    running.failure = _first_line(exc)
                    log.error("pipeline %s cannot start: %s", name, running.failure)
            elif not wanted and running.stream is not None and running.stream.isActive:
                _stop(running)
        for group in self.groups.values():  # a group runs while one of its members can receive a row
            if group.abandoned:
                continue
            if group.query is not None and (failed := _failure(group.query)) is not None:
                group.failed(failed)
            active = group.query is not None and group.query.isActive
            if not active and group.restart_due():
                self._start_group(group, changes)
            elif active and not self._group_wanted(group, changes):
                group.stop()

    def _group_wanted(self, group: StreamGroup, changes: tuple[AccessChange, ...]) -> bool:
        return any(self._receivable(r, changes) for r, _ in list(group.members.values()))

    def _start_group(self, group: StreamGroup, changes: tuple[AccessChange, ...]) -> bool:
        """Start ``group``'s Spark query if one of its members can receive a row; whether it started.
        A group that cannot start counts as failed (restarted later; its members fail only when
        it keeps failing), and the others run."""
        if not self._group_wanted(group, changes):
            return False
        try:
            assert self.catalog is not None
            group.start(self.catalog)
            return True
        except Exception as exc:  # the group alone
            group.failed(f"it cannot start: {_first_line(exc)}")
            return False

    def _receivable(self, running: _Running, changes: tuple[AccessChange, ...]) -> bool:
        """Can some user of the pipeline still receive a row: a grant open, or ending after the
        latest event time the pipeline has emitted (nothing emitted yet: any grant)?"""
        for user in running.pipeline.users:
            for _start, end in access_periods(changes, running.pipeline.query, user):
                if end is None or running.emitted is None or end > running.emitted:
                    return True
        return False

    def _start(self, running: _Running) -> StreamingQuery:
        assert self.catalog is not None
        rows = self._frame(running.pipeline, self.catalog)
        running.quarantine_log.tag = _metrics_tag(running.pipeline)  # the names its counts are observed under
        writer = stream_writer(rows, running.checkpoint / "spark", trigger=self.trigger,
                               available_now=self.available_now, query_name=running.pipeline.name,
                               each_batch=_TerminalSwitch(self, running))
        return start_writer(writer, self.spark)

    def _frame(self, pipeline: Pipeline, catalog: Catalog) -> DataFrame:
        """The streaming frame a pipeline runs: its event time and each row as JSON."""
        streams = {s.stream for s in sources(pipeline.rewriting.plan)}
        line_read = {s.stream for s in sources(pipeline.rewriting.plan)
                     if s.window is not None and s.window.kind == "rows"}
        check_inputs(catalog, streams, self.inputs, line_read=line_read, must_exist=False)
        tag = _metrics_tag(pipeline)
        job = build_job(self.spark, catalog, pipeline.rewriting, {s: self.inputs[s] for s in streams},
                        streaming=True, store_url=self.store.url, lateness=self.lateness, event_time=True,
                        metrics_tag=tag, on_broken="quarantine")
        frame = job.union()
        if frame is None:  # pragma: no cover - plan_network denies users with no deployed graph
            raise UnsupportedError(f"query {pipeline.query.id}: no authorized graph can be deployed")
        columns = [F.col(EVENT), F.to_json(F.struct(*[F.col(f"`{c}`") for c in frame.columns if c != EVENT]))
                   .alias("_row")]
        if job.rewriting.on_result:  # SPGen dates its policy by the earliest result: keep the results' times
            times = sorted({f.name for g in job.rewriting.deployed for f in g.root.fields if f.dtype == "timestamp"})
            earliest = [F.col(f"`{t}`").cast("timestamp") for t in times]
            columns.append((F.least(*earliest) if len(earliest) > 1 else earliest[0]).alias(EARLIEST))
        return frame.select(*columns)

    # -- status --------------------------------------------------------------------------------
    def _write_status(self, changes: tuple[AccessChange, ...], *, final: bool = False) -> None:
        """Each listed user's ``_access.json`` for each query: receiving it now, and why not. A
        grant's end is judged by the event time the pipeline has reached, not the wall clock.

        A status whose only news is the event time reached is rewritten at most every
        :data:`EVENT_TIME_EVERY_S` (and when the run ends, ``final``): a group moves every
        member's event time at every micro-batch, and a file per user and poll cost 4,096
        users 2.8 s under the runtime's lock, which the group's batches wait for."""
        identities: Mapping[str, str] | None = None  # read once, when a folder is new
        now = time.monotonic()
        for q in self.plan.queries:
            for user in q.users:
                pipeline = self.plan.pipeline_of(q.id, user)
                running = self.running.get(pipeline.name) if pipeline is not None else None
                periods = access_periods(changes, q, user)
                receiving, reason = _receiving(self.plan, q, user, periods, running)
                facts: _StatusFacts = (receiving, reason, tuple(periods), running.emitted if running else None,
                                       pipeline.name if pipeline is not None else q.level)
                before = self._statuses.get((user, q.id))
                if before == facts:
                    continue  # written already: a thousand users' folders are not visited every poll
                if (not final and before is not None and before[:3] == facts[:3] and before[4] == facts[4]
                        and now - self._status_times.get((user, q.id), now) < EVENT_TIME_EVERY_S):
                    continue  # only the event time moved, and it was written a moment ago
                status = {"query": q.id, "user": user, "receiving": receiving, "reason": reason,
                          "periods": [[_iso(a), None if b is None else _iso(b)] for a, b in periods],
                          "event_time": _iso(running.emitted) if running and running.emitted else None,
                          "level": pipeline.level if pipeline is not None else q.level,
                          "graphs": [g.id for g in pipeline.rewriting.deployed] if pipeline is not None else []}
                text = json.dumps(status, indent=2) + "\n"
                folder = self._status_folders.get((user, q.id))
                if folder is not None:  # its path checked once: 4,096 users' checks took 4 s a poll
                    try:
                        _write_text(folder / STATUS, text)
                    except FileNotFoundError:  # the folder went (a query unregistered meanwhile): check anew
                        folder = None
                if folder is None:
                    if identities is None:
                        identities = self.store.incarnations()
                    try:
                        self._user_folder(user, identities)
                        folder = private_dir(safe_path(self.output, user, q.id))
                        target = folder / STATUS
                        if not (target.is_file() and target.read_text(encoding="utf-8") == text):
                            _write_text(target, text)
                    except OSError as exc:  # her folder alone (something else stands where it goes): said, tried again
                        if self._status_problems.get((user, q.id)) != str(exc):
                            log.warning("the status of %s for %s cannot be written: %s", user, q.id, exc)
                            self._status_problems[(user, q.id)] = str(exc)
                        continue
                    self._status_problems.pop((user, q.id), None)
                    self._status_folders[(user, q.id)] = folder
                self._statuses[(user, q.id)] = facts
                self._status_times[(user, q.id)] = now


def _receiving(plan: NetworkPlan, query: RegisteredQuery, user: str, periods: list[Period],
               running: _Running | None) -> tuple[bool, str]:
    """Does ``user`` receive ``query``'s rows now, and if not, why (one sentence)?"""
    denial = plan.denial_of(query.id, user)
    if denial is not None:
        return False, denial.reason
    if running is not None and running.failure is not None:
        return False, f"the network cannot run this query: {running.failure}"
    if not periods:
        return False, "no grant for this query yet"
    end = periods[-1][1]
    if end is None:
        return True, ""
    reached = running.emitted if running is not None else None
    if reached is not None and end <= reached:
        return False, f"access ended at {_iso(end)} (event time)"
    return True, f"access ends at {_iso(end)} (event time)"


class _TerminalSwitch:
    """``foreachBatch``: every user of the pipeline gets the batch's rows inside their grant
    periods, by the same road as a shared group's members: one fan-out
    (:mod:`streamwarden.engine.fanout`), then each user's share handed out once
    (:mod:`streamwarden.runtime.handout`)."""

    def __init__(self, runtime: NetworkRuntime, running: _Running):
        self.runtime = runtime
        self.running = running  # kept: a batch in flight still finds it when a replan retires it
        self.name = running.pipeline.name

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        runtime = self.runtime
        running = self.running
        pipeline = running.pipeline
        recipients = self._decide(batch_id)
        on_result = pipeline.rewriting.on_result
        if on_result:
            batch = self._spgen(batch, running)
        # the pipeline is the one member of its rows; read twice (each user's share, what it emitted)
        rows = batch.select(F.col(EVENT), F.lit(0).cast("long").alias(MEMBER), F.col(ROW)).persist()
        try:
            periods = [(i, 0, start, end) for i, _, spans in recipients for start, end in spans]
            scratch = runtime.root / ".staging" / f"{self.name}-{batch_id}"
            with write_per_recipient(rows, periods, scratch, emitted=True) as fanned:
                handouts = []
                for i, user, _ in recipients:
                    if i not in fanned.received:
                        continue
                    runtime._user_folder(user)
                    folder = private_dir(safe_path(runtime.output, user, pipeline.query.id))
                    if _numbered_before(running.checkpoint, folder, pipeline.fingerprint, user, batch_id):
                        continue
                    handouts.append(Handout(i, folder, f"batch={pipeline.fingerprint[:12]}-",
                                            self._policy_for(user) if on_result else None))
                # named by the user's own cursor, not Spark's batch id: gaps in Spark's ids would
                # count the micro-batches whose rows she did not receive (hidden arrivals)
                hand_out(fanned, handouts, batch_key(running.checkpoint / "spark", "live", batch_id), runtime.output)
        finally:
            rows.unpersist()
        delivered_rows = {user: fanned.received.get(i, 0) for i, user, _ in recipients}
        for user, count in delivered_rows.items():
            running.rows[user] = running.rows.get(user, 0) + count
        emitted_rows, latest = fanned.emitted.get(0, (0, None))
        for user in pipeline.users:  # the terminal switch's decisions, for operators (metrics)
            running.withheld[user] = running.withheld.get(user, 0) + emitted_rows - delivered_rows.get(user, 0)
        if latest is not None:
            runtime._emitted(running, parse_timestamp(latest))
        running.batches += 1

    def _decide(self, batch_id: int) -> list[tuple[int, str, list[Period]]]:
        """Who receives which event times of micro-batch ``batch_id``: decided once, from the access
        changes in the store now, and recorded in the checkpoint before anything is written. A
        batch Spark runs again after a crash (same id, same input) reads the recorded decision,
        so it delivers the same rows to the same users, and every logged count stays true; a
        user declared again meanwhile (another identity, with a new folder) gets nothing of it."""
        running = self.running
        pipeline = running.pipeline
        folder = running.checkpoint / DECISIONS
        path = folder / f"{batch_id}.json"
        identities = self.runtime.store.incarnations()
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
            decided = recorded.get("identities", {})
            # a user declared again since the first attempt is a new identity: its share is not hers
            kept = [(user, periods) for user, periods in recorded["recipients"]
                    if decided.get(user, identities.get(user)) == identities.get(user)]
            return [(i, user, [(parse_timestamp(a), None if b is None else parse_timestamp(b)) for a, b in periods])
                    for i, (user, periods) in enumerate(kept)]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        changes = self.runtime.server.changes()  # read now: a change recorded before this batch applies to it
        current = self.runtime.server.registration(pipeline.query.id)
        # a query unregistered or registered again since this pipeline was planned (the next poll
        # stops it): the live grants of its id are another registration's, and give it nothing
        ours = current is not None and current.rid == pipeline.query.rid
        chosen = [(user, periods) for user in pipeline.users
                  if ours and (periods := _delivered_after(access_periods(changes, pipeline.query, user),
                                                           running.after.get(user)))]
        private_dir(folder)
        _write_text(path, json.dumps({"recipients": [[user, [[_iso(a), None if b is None else _iso(b)]
                                                             for a, b in periods]] for user, periods in chosen],
                                      "identities": {user: identities.get(user) for user, _ in chosen}}) + "\n")
        for old in folder.glob("*.json"):  # Spark replays only the last batch: earlier ones are committed
            if old.stem.isdigit() and int(old.stem) < batch_id:
                old.unlink(missing_ok=True)
        return [(i, user, periods) for i, (user, periods) in enumerate(chosen)]

    def _spgen(self, batch: DataFrame, running: _Running) -> DataFrame:
        """ON RESULT: every row stamped with SPGen's policy, dated by the pipeline's earliest result
        (found in the first micro-batch with results, kept in the checkpoint for restarts)."""
        if running.spgen is None:
            first = single_value(batch.agg(iso_timestamp(F.min(EARLIEST))))  # until the first results only
            if first is None:
                return batch.drop(EARLIEST)
            running.spgen = parse_timestamp(first)
            _write_time(running.checkpoint / "spgen.json", running.spgen)
        sps = len(policy_from_statements(running.pipeline.rewriting.on_result, running.spgen))
        stamp = f',"sp_ts":"{_iso(running.spgen)}","sp_csn":{sps}}}'
        return batch.drop(EARLIEST).withColumn("_row", F.concat(F.expr("substring(_row, 1, length(_row) - 1)"),
                                                                 F.lit(stamp)))

    def _policy_for(self, user: str) -> Callable[[str], None] | None:
        """ON RESULT: what puts SPGen's policy ahead of ``user``'s rows in a batch folder."""
        running = self.running
        at = running.spgen
        if at is None:
            return None
        return lambda batch_folder: self._policy_first(user, running.pipeline, batch_folder, at=at)

    def _policy_first(self, user: str, pipeline: Pipeline, batch_folder: str, *, at: datetime) -> None:
        """SPGen's policy records ahead of the first rows a user receives (a file that sorts before
        Spark's parts in the same batch folder: the user's output is itself a punctuated stream)."""
        folder = safe_path(self.runtime.output, user, pipeline.query.id)
        name = "part-00000-0-spgen.txt"
        if any(p.parent.name != batch_folder for p in folder.glob(f"batch={pipeline.fingerprint[:12]}-*/{name}")):
            return  # an earlier batch already carried it (this one may be a retry of that batch: rewritten)
        lines = list(spgen_lines(pipeline.rewriting.on_result, at, []))
        target = folder / batch_folder / name
        with open_private(target) as handle:
            handle.write("".join(line + "\n" for line in lines))


def _numbered_before(checkpoint: Path, folder: Path, fingerprint: str, user: str, batch_id: int) -> bool:
    """Whether an earlier version of streamwarden delivered micro-batch ``batch_id`` to ``user``
    already: it numbered her batches by a sequence kept in the checkpoint (``numbers/<user>.json``:
    the last batch id and its number) and logged ``batch=<pipeline>-<number>``, with no record of
    the micro-batch. Spark runs the batch a crash interrupted again after an upgrade; without
    this check its rows would reach her twice, under a cursor name."""
    record = checkpoint / "numbers" / f"{user}.json"
    try:
        numbered = json.loads(record.read_text(encoding="utf-8"))
        if int(numbered["batch"]) != batch_id:
            return False
        name = f"batch={fingerprint[:12]}-{int(numbered['number']):010d}"
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return any(d.batch == name for d in deliveries(folder))


def _move_aside(source: Path, target: Path) -> None:
    """Move ``source`` (if there) to ``target`` (hidden, private): kept for the operator, never served."""
    if not source.exists():
        return
    private_dir(target.parent)
    if target.exists():
        target = target.with_name(f"{target.name}-{time.time_ns()}")
    shutil.move(str(source), str(target))


def _check_streaming(frame: DataFrame) -> None:
    """Spark's own check that a streaming plan can run in append mode (what ``start`` would
    raise), without starting it."""
    jvm = jvm_view(frame.sparkSession)
    plan = frame._jdf.queryExecution().analyzed()
    append = jvm.org.apache.spark.sql.streaming.OutputMode.Append()
    jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker.checkForStreaming(plan, append)


def _first_line(exc: BaseException) -> str:
    """An error as one line for an operator or a user: a broken record by its place (never its
    text), else the first line of what actually failed (:func:`~streamwarden.engine.failures.root_cause`:
    never "Exception thrown in awaitResult" or a Py4J wrapper), without its trace."""
    record = broken_record(exc)
    return record if record is not None else root_cause(exc)


def _failure(stream: StreamingQuery | None) -> str | None:
    """Why ``stream`` stopped, if it stopped on an error."""
    if stream is None:
        return None
    try:
        failed = stream.exception()
    except Exception:  # stopping under us
        return None
    return None if failed is None else _first_line(failed)


def _metrics_tag(pipeline: Pipeline) -> str:
    """The suffix of a pipeline's observed metrics (Spark names them per query)."""
    return f"_{pipeline.name.replace('-', '_')}"


def _read_quarantine(running: _Running) -> None:
    """Count the broken records the pipeline's query quarantined in micro-batches not read yet,
    with one warning line for each (stream, count and place, never the record)."""
    if running.stream is None:
        return
    try:
        found_now = running.quarantine_log.read_query(running.stream)
    except Exception:  # stopping under us: its batches are read at its stop
        return
    for found in found_now:
        running.quarantined += found.records
        running.last_quarantined = found.first
        log.warning("%s", found.line(running.pipeline.name))


def _stop(running: _Running) -> None:
    _read_quarantine(running)  # what it quarantined before it stops still counts
    if running.stream is not None:
        try:
            running.stream.stop()
        finally:
            running.stream = None


def _digest(catalog_text: str | None, queries: tuple[RegisteredQuery, ...], identities: Mapping[str, str]) -> str:
    text = json.dumps([catalog_text or "", [[q.id, list(q.users), q.query, q.level, q.owner, q.opens, q.rid]
                                            for q in queries], sorted(identities.items())])
    return hashlib.sha256(text.encode()).hexdigest()


def _iso(t: datetime) -> str:
    t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}" if t.microsecond else "") + "Z"


def _delivered_after(periods: list[tuple[datetime, datetime | None]], after: datetime | None
                     ) -> list[tuple[datetime, datetime | None]]:
    """A user's grant periods, cut to event times after ``after`` (what an earlier pipeline
    already covered for them); an instant after ``after``: rows strictly later."""
    if after is None:
        return periods
    cut = []
    for start, end in periods:
        if end is not None and end <= after:
            continue
        cut.append((max(start, after + timedelta(microseconds=1)), end))
    return cut


def _read_marks(path: Path) -> dict[str, datetime | None]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {user: None if at is None else parse_timestamp(at) for user, at in raw.items()}


def _write_marks(path: Path, marks: dict[str, datetime | None]) -> None:
    _write_text(path, json.dumps({u: None if t is None else _iso(t) for u, t in sorted(marks.items())}) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Replace a small control file atomically, readable by its owner only."""
    partial = path.with_name("." + path.name + ".partial")
    partial.unlink(missing_ok=True)
    with open_private(partial) as handle:
        handle.write(text)
    partial.replace(path)


def _read_time(path: Path) -> datetime | None:
    try:
        return parse_timestamp(json.loads(path.read_text(encoding="utf-8"))["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_time(path: Path, at: datetime) -> None:
    _write_text(path, json.dumps({"at": _iso(at)}) + "\n")


def read_user_rows(spark: SparkSession, output_dir: str | Path, user: str, query: str) -> list[dict]:
    """The rows a running network has delivered to ``user`` for ``query``."""
    return read_parts(safe_path(output_dir, user, query))


def read_status(output_dir: str | Path, user: str, query: str) -> dict:
    """A user's ``_access.json`` for a query (receiving, reason, grant periods)."""
    return json.loads((safe_path(output_dir, user, query) / STATUS).read_text(encoding="utf-8"))


def default_checkpoint_root(home: str | Path, output_dir: str | Path) -> Path:
    """``HOME/checkpoints/network-<hash of the output folder>``: next to the store, never in an output."""
    key = hashlib.sha256(str(Path(output_dir).resolve()).encode()).hexdigest()[:16]
    return Path(home) / "checkpoints" / f"network-{key}"


def forget_query(output_dir: str | Path, query: str, users: Iterable[str], checkpoint_root: str | Path | None = None
                 ) -> None:
    """Remove what ``query`` left: each of ``users``' rows and status of it and, with the network's
    ``checkpoint_root``, its state and handover marks, so that a query registered again under its
    id starts afresh. Only for a query no pipeline runs any more (unregistered, and the running
    network has applied that): a running pipeline would write into the folders as they go."""
    for user in users:
        shutil.rmtree(safe_path(output_dir, user, query), ignore_errors=True)
    if checkpoint_root is not None:
        shutil.rmtree(safe_path(checkpoint_root, query), ignore_errors=True)


__all__ = ["MARKER", "STATUS", "NetworkRuntime", "default_checkpoint_root", "forget_query", "read_status",
           "read_user_rows"]
