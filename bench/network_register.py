"""Issue 25, registration: N users register their queries over HTTP with a running ``streamwarden serve``.

The declaration (:func:`experiment`) for :mod:`bench.suite`::

    python -m bench.suite network_register [--quick] [--events READINGS_PER_S]

The workload is :mod:`bench.network_scale`'s: one stream ``Readings (ts, sensor, ward,
value)`` (100 sensors, 10 per ward ``w0``..``w9``) under one role policy ``Readings.ward =
self.ward``, fed live ``rate`` readings a second (default 200), one JSON-lines file a second (values
in hundredths 0.00-99.99, :func:`bench.network_latency.feed_file`). Every user (user i in
ward ``w{i % 10}``) is declared in the catalog with a token; her query is ``SELECT sensor,
value FROM Readings WHERE value > c`` with ``c`` = 94.0, 94.5, ..., 98.0 (cycling), which
passes 2-6 % of her ward's readings. Three kinds of user:

* ``early`` ones (10): their queries are in the store before the service starts; they
  receive rows throughout, and must lose or repeat none while the others register;
* ``registering`` ones (N = 1,000): each POSTs her own query (``POST /v1/queries``,
  ``{"id": "q1", ...}``, her token) from one of ``clients`` (8) concurrent client threads;
* one ``probe``: registers alone once the others are live; her first row is timed.

The one pipeline is one life of the service under :mod:`bench.network_register_drive`
(whole processes: the driver and its clients, ``serve`` with its Spark), the service timed
phase by phase by :mod:`bench.network_register_serve`. After the run, untimed,
:func:`received` compares every user's rows (from the output folders the service serves
``GET rows`` from) with an independent count of the landed readings she should get
(:func:`bench.network_latency.expected`: count and a digest of their multiset).

    >>> e = experiment(quick=True)
    >>> [p.name for p in e.pipelines], [t.text.split(",")[0] for t in e.targets][:1]
    (['serve-50'], ['50 registrations over HTTP from 4 clients in under 60 s'])
    >>> [(u["user"], u["role"], u["above"]) for u in users(3, 4)[2:4]] + [users(3, 4)[-1]["role"]]
    [('u0002', 'early', 95.0), ('u0003', 'register', 95.5), 'probe']
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import network_latency as L
from bench.network_scale import _hash, catalog_text
from bench.suite.experiment import (Column, Command, Experiment, Facts, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload, statistic)

WARDS = 10
#: Issue 25's targets (registration).
TARGET_S, TARGET_BATCHES = 60.0, 2
GROUP = "register"
FEED = "feed"  # the prepared files, in the workdir


@dataclass(frozen=True)
class Sizes:
    """The experiment's sizes (:data:`QUICK`: the smoke version, whose time target is not judged)."""

    registrations: int = 1000
    early: int = 10
    clients: int = 8
    rate: int = 200  # readings per second, one file each interval
    interval_s: float = 1.0
    warmup_files: int = 10
    steady_files: int = 10  # the early users' latency before the registrations (the baseline)
    tail_files: int = 3  # landed after the probe's first row
    max_files: int = 900  # prepared: the feed runs out after this many intervals
    trigger: str = "1 second"
    drain_timeout_s: float = 600.0
    judged: bool = True


QUICK = Sizes(registrations=50, early=5, clients=4, warmup_files=3, steady_files=5, tail_files=2, max_files=300,
              drain_timeout_s=300.0, judged=False)


# -- the workload ---------------------------------------------------------------------------------
def users(early: int, registering: int) -> list[dict[str, Any]]:
    """The users: ``early`` ones, ``registering`` ones and the probe; user i in ward ``w{i % 10}``,
    her query's constant 94.0, 94.5, ..., 98.0 (cycling)."""
    listed = []
    for i in range(early + registering + 1):
        role = "early" if i < early else "register" if i < early + registering else "probe"
        above = 94.0 + (i % 9) * 0.5
        listed.append({"user": f"u{i:04d}", "ward": f"w{i % WARDS}", "above": above, "role": role,
                       "text": query_text(above)})
    return listed


def query_text(above: float) -> str:
    """The CQL a user registers (network_scale's selection).

    >>> query_text(94.5)
    'SELECT sensor, value FROM Readings WHERE value > 94.5'
    """
    return f"SELECT sensor, value FROM Readings WHERE value > {above}"


def row_key(row: Mapping[str, Any]) -> str:
    """A reading as her query shows it, or one of her rows, as text.

    >>> row_key({"sensor": "s01", "value": 99.5, "_policies": ["ward"]}), row_key({"sensor": "s01", "value": 99.5})
    ('s01|99.5', 's01|99.5')
    """
    return f"{row['sensor']}|{float(row['value'])!r}"


def _store(folder: Path, listed: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The store of ``folder``: the catalog (every user), the early users' queries registered and
    granted as the service does, and a token for every user (returned)."""
    from streamwarden.catalog.authorization import AuthorizationServer
    from streamwarden.catalog.identity import create_token
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.catalog.registry import RegisteredQuery, own_id
    from streamwarden.catalog.store import CatalogStore, sqlite_url

    text = catalog_text(listed)
    catalog = load_catalog_text(text, str(folder / "catalog.yaml"))
    url = sqlite_url(folder / "store" / "store.db")
    server = AuthorizationServer(url)
    early = [u for u in listed if u["role"] == "early"]
    server.register([RegisteredQuery(own_id(u["user"], "q1"), (u["user"],), u["text"], owner=u["user"], opens=())
                     for u in early], catalog)
    for u in early:
        server.open_own(own_id(u["user"], "q1"), u["user"])
    store = CatalogStore(url)
    return {u["user"]: create_token(store, u["user"], expires=timedelta(days=2)) for u in listed}


def _read_feed(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _workload(s: Sizes) -> Workload:
    def prepare(work: Path) -> Facts:
        from streamwarden.catalog.registry import own_id

        feed = work / FEED
        feed.mkdir(parents=True, exist_ok=True)
        files = [L.feed_file(k, s.rate, s.interval_s) for k in range(s.max_files)]
        names = [f"part-{k:05d}.jsonl" for k in range(s.max_files)]
        for name, rows in zip(names, files):
            (feed / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        listed = users(s.early, s.registrations)
        tokens = _store(work, listed)
        counts, _ = L.expected(files, listed, key=row_key)
        plan = {"feed": str(feed), "names": names, "interval_s": s.interval_s, "warmup": s.warmup_files,
                "steady": s.steady_files, "tail": s.tail_files,
                "users": [{**u, "query": own_id(u["user"], "q1"), "token": tokens[u["user"]]} for u in listed],
                "counts": counts}
        (work / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
        return {"users": len(listed), "registrations": s.registrations, "early users": s.early,
                "clients": s.clients, "readings per file": len(files[0]) if files else 0,
                "interval ms": round(1000 * s.interval_s), "files prepared": s.max_files,
                "cores": len(os.sched_getaffinity(0))}

    return Workload(f"one stream Readings (ts, sensor, ward, value) fed {s.rate:,} readings per second, one file "
                    f"every {s.interval_s:g} s; one role policy `Readings.ward = self.ward`; {s.early} early users' "
                    f"queries in the store, {s.registrations:,} users registering theirs over HTTP from {s.clients} "
                    "clients, then one probe; each query passes 2-6 % of its ward's readings", prepare)


# -- the process ----------------------------------------------------------------------------------
def _command(s: Sizes) -> Command:
    def argv(work: Path, out: Path) -> list[str]:
        from streamwarden.catalog.store import sqlite_url

        # A fresh copy of the prepared store (its tokens, the early queries) for every run, made
        # before the runner starts its clock; Spark's log goes next to it.
        shutil.copytree(work / "store", out / "store")
        inputs = out / "in" / "Readings"
        inputs.mkdir(parents=True, exist_ok=True)
        serve = [sys.executable, "-m", "bench.network_register_serve", str(out / "phases.jsonl"), "serve",
                 "--store", sqlite_url(out / "store" / "store.db"), "--input", f"Readings={inputs}",
                 "--output-dir", str(out / "rows"), "--checkpoint", str(out / "checkpoint"), "--port", "0",
                 "--trigger", s.trigger]
        return [sys.executable, "-m", "bench.network_register_drive", str(work / "plan.json"), "--input",
                str(inputs), "--out", str(out), "--clients", str(s.clients), "--drain-timeout",
                str(s.drain_timeout_s), "--", *serve]
    return Command(argv)


def received(work: Path, out: Path) -> dict[str, float]:
    """The run's check: every user's rows (the output folders ``GET rows`` reads) against what the
    landed files hold for her (count and digest of their multiset), by kind of user."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    plan = json.loads((work / "plan.json").read_text(encoding="utf-8"))
    landed = int(json.loads((out / "landed.json").read_text(encoding="utf-8"))["landed"])
    files = [_read_feed(Path(plan["feed"]) / name) for name in plan["names"][:landed]]
    listed = plan["users"]
    _, want = L.expected(files, listed, key=row_key)
    got = {u["user"]: [0, 0] for u in listed}
    strangers = 0
    for user, path in L._part_files(out / "rows"):
        if user not in got:
            strangers += 1
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                got[user][0] += 1
                got[user][1] = (got[user][1] + _hash(row_key(json.loads(line)))) % (1 << 48)
    numbers = {"users_checked": float(len(listed)), "stray_files": float(strangers),
               "rows_expected": float(sum(rows for rows, _ in want.values())),
               "rows_checked": float(sum(rows for rows, _ in got.values())),
               "rows_missing": float(sum(max(0, want[u][0] - got[u][0]) for u in got)),
               "rows_extra": float(sum(max(0, got[u][0] - want[u][0]) for u in got))}
    for role in ("early", "register", "probe"):
        mine = [u["user"] for u in listed if u["role"] == role]
        numbers[f"{role}_wrong"] = float(sum(1 for u in mine if tuple(got[u]) != tuple(want[u])))
    numbers["users_wrong"] = sum(numbers[f"{role}_wrong"] for role in ("early", "register", "probe"))
    done = resource.getrusage(resource.RUSAGE_SELF)
    numbers["check_cpu_s"] = done.ru_utime + done.ru_stime - before.ru_utime - before.ru_stime
    return numbers


# -- targets --------------------------------------------------------------------------------------
def _name(s: Sizes) -> str:
    return f"serve-{s.registrations}"


def _f(value: float, digits: int = 0) -> str:
    return "—" if math.isnan(value) else f"{value:,.{digits}f}"


def _time_target(s: Sizes) -> Target:
    def check(m: Measured) -> Verdict:
        name = _name(s)
        if not m.runs(name):
            return Verdict(None, "not measured")

        def v(metric: str) -> float:
            return m.median(name, metric)
        text = (f"{_f(v('register_wall_s'), 1)} s ({_f(v('registrations_per_s'), 1)} per s; POST p50 "
                f"{_f(v('post_p50_ms'))} ms, p99 {_f(v('post_p99_ms'))} ms; {_f(v('post_errors'))} not 201)")
        if not s.judged:
            return Verdict(None, f"{text}; quick form: not judged")
        return Verdict(v("register_wall_s") < TARGET_S and v("post_errors") == 0, text)

    return Target(f"{s.registrations:,} registrations over HTTP from {s.clients} clients in under {TARGET_S:g} s, "
                  "every one answered 201 (issue 25, registration)", check)


def _first_row_target(s: Sizes) -> Target:
    def check(m: Measured) -> Verdict:
        name = _name(s)
        if not m.runs(name):
            return Verdict(None, "not measured")

        def v(metric: str, stat: str = "median") -> float:
            return statistic(m.runs_by_pipeline[name], metric, stat)
        probe, worst, none = v("probe_batches", "max"), v("first_row_batches_max", "max"), v("no_first_row", "max")
        text = (f"the probe: {_f(probe)} micro-batch(es), its row in `GET rows` {_f(v('probe_first_row_s'), 2)} s "
                f"after the 201; the {s.registrations:,} registered together: at most {_f(worst)} "
                f"(median {_f(v('first_row_batches_p50'))}), {_f(v('first_row_over_two', 'max'))} over "
                f"{TARGET_BATCHES}, {_f(none)} without a row; first row p50 {_f(v('first_row_p50_s'), 2)} s, "
                f"p99 {_f(v('first_row_p99_s'), 2)} s after the 201")
        if math.isnan(probe) or math.isnan(worst):
            return Verdict(False, text)
        return Verdict(probe <= TARGET_BATCHES and worst <= TARGET_BATCHES and none == 0, text)

    return Target(f"a query registered over HTTP delivers its first row within {TARGET_BATCHES} micro-batches of the "
                  "201, counting the one under way (the probe, registered alone while the stream is fed; and each "
                  "registration of the storm) (issue 25, registration)", check)


def _rows_target(s: Sizes) -> Target:
    def check(m: Measured) -> Verdict:
        problems, runs = [], 0
        for name, listed in m.runs_by_pipeline.items():
            for i, run in enumerate(listed):
                runs += 1
                at = f"{name} run {i + 1}"
                for role, who in (("early", "early user(s)"), ("register", "registered user(s)"),
                                  ("probe", "probe")):
                    if run.get(f"{role}_wrong"):
                        problems.append(f"{at}: {run[f'{role}_wrong']:.0f} {who} with other rows")
                for key, what in (("rows_missing", "row(s) lost"), ("rows_extra", "row(s) repeated or foreign"),
                                  ("stray_files", "file(s) of rows for no known user"),
                                  ("during_missing", "file(s) never reached every early user")):
                    if run.get(key):
                        problems.append(f"{at}: {run[key]:.0f} {what}")
                if not run.get("drained", 1):
                    problems.append(f"{at}: not every row arrived within {s.drain_timeout_s:g} s")
        if not runs:
            return Verdict(None, "not measured")
        return Verdict(not problems, "; ".join(problems[:6]) or (
            f"{runs} run(s): every one of the {s.early + s.registrations + 1:,} users got exactly her rows"))

    return Target("no user's rows lost or repeated: every user (the early ones receiving throughout, each registered "
                  "one, the probe) receives exactly the rows of the landed readings her query selects (count and a "
                  "digest of their multiset, against an independent count), and nobody else any (issue 25, "
                  "registration)", check)


# -- the report -----------------------------------------------------------------------------------
PHASES = (("token check", "auth"), ("catalog read", "catalog"), ("security passes", "explain"),
          ("Spark's check", "runnable"), ("store write", "store"), ("network poll", "poll"),
          ("HTTP and waiting", "rest"))


def _tables(s: Sizes) -> tuple[Table, ...]:
    registrations = Table(
        "Registrations over HTTP", ("registrations",),
        (Column("clients", "clients"), Column("wall s", "register_wall_s"),
         Column("per s", "registrations_per_s"), Column("POST p50 ms", "post_p50_ms"),
         Column("p95 ms", "post_p95_ms"), Column("p99 ms", "post_p99_ms"), Column("max ms", "post_max_ms"),
         Column("first tenth p50 ms", "post_first_tenth_p50_ms"), Column("last tenth p50 ms", "post_last_tenth_p50_ms"),
         Column("not 201", "post_errors"), Column("service CPU s", "service_cpu_s"),
         Column("service cores busy", "service_cores")),
        text=f"Issue 25's target: {s.registrations:,} in under {TARGET_S:g} s. *First/last tenth*: the median POST "
             "of the first and the last tenth of the registrations sent (does a POST cost more as the network "
             "grows?). *Service CPU*: its Python, its JVM and the JVM's Python workers, over the registrations.")
    split = Table(
        "Where a POST's time goes, ms (median over the registrations; CPU: of the request's thread)",
        ("registrations",),
        tuple(Column(title, f"phase_{key}_p50_ms") for title, key in PHASES)
        + (Column("poll p99", "phase_poll_p99_ms"), Column("store write p99", "phase_store_p99_ms"),
           Column("Spark's check max", "phase_runnable_max_ms"), Column("Spark checks run", "spark_checks"),
           Column("security passes CPU", "phase_explain_cpu_p50_ms"),
           Column("store write CPU", "phase_store_cpu_p50_ms"), Column("poll CPU", "phase_poll_cpu_p50_ms")),
        text="Timed inside the service (`bench/network_register_serve.py`): the token check, the catalog read, "
             "every security pass (`prepare_own`), Spark's runnable check, the store write (registration and "
             "grant, under the service's registration lock), the running network's poll (under the runtime's "
             "lock); *HTTP and waiting*: the client's time less those. *Spark checks run*: registrations whose "
             "runnable check took over 0.1 s (Spark analysed the plan; a template it passed once is not checked "
             "again).")
    first = Table(
        "First row of a registration", ("registrations",),
        (Column("probe POST ms", "probe_post_ms"), Column("probe: 201 → row in GET rows, s", "probe_first_row_s"),
         Column("probe: 201 → delivery log, s", "probe_log_s"), Column("probe micro-batches", "probe_batches"),
         Column("storm: 201 → first row p50 s", "first_row_p50_s"), Column("p99 s", "first_row_p99_s"),
         Column("max s", "first_row_max_s"), Column("micro-batches p50", "first_row_batches_p50"),
         Column("micro-batches max", "first_row_batches_max"), Column("over two", "first_row_over_two"),
         Column("no row", "no_first_row")),
        text=f"Micro-batches of the group's Spark query from the 201 to the one that wrote the row, both counted "
             f"(issue 25: at most {TARGET_BATCHES}). *Storm*: each of the registrations made together, its first "
             "row seen in its delivery log.")
    others = Table(
        "The other users' rows, and the group's micro-batches", ("registrations",),
        (Column("early: file → rows p50 s, before", "steady_p50_s"), Column("max s, before", "steady_max_s"),
         Column("p50 s, during", "during_p50_s"), Column("max s, during", "during_max_s"),
         Column("catch-up s", "catch_up_s"), Column("micro-batches", "group_batches_during"),
         Column("batch p50 s", "group_batch_p50_s"), Column("batch max s", "group_batch_max_s"),
         Column("backfills", "backfills"), Column("backfill p50 s", "backfill_p50_s"),
         Column("users wrong", "users_wrong"), Column("rows lost", "rows_missing"),
         Column("rows repeated", "rows_extra")),
        text="*Early*: the time from a file landing to every early user having its rows, for the files landed "
             "before and during the registrations. *Catch-up*: from the last 201 until every registered user had a "
             "row and every early user the rows of every file landed by then. *Micro-batches*, *backfills*: those "
             "that started from the first registration to the end of the catch-up. *Backfill*: the batch job "
             "delivering to the members that joined at a micro-batch what the group read before.")
    cpu = Table(
        "CPU during the registrations", ("registrations",),
        (Column("service Python s", "service_python_cpu_s"), Column("service JVM s", "service_jvm_cpu_s"),
         Column("JVM's Python workers s", "service_other_cpu_s"), Column("network polls", "polls"),
         Column("poll p50 s", "poll_p50_s"), Column("poll max s", "poll_max_s"), Column("clients s", "clients_cpu_s"),
         Column("whole run CPU s", "cpu_s"), Column("whole run wall s", "wall_s"), Column("load (1 min)", "load")),
        text="*Network polls*: the service's own polls of the store (every second, its thread), beside those the "
             "registrations make. *Clients*: the driver's process (the client threads and the watchers).")
    return registrations, split, first, others, cpu


PLOTS = (
    Plot("split", "Where a POST's time goes, ms (median over the registrations)", "registrations",
         Column(PHASES[0][0], f"phase_{PHASES[0][1]}_p50_ms"), kind="bars",
         also=tuple(Column(title, f"phase_{key}_p50_ms") for title, key in PHASES[1:])),
    Plot("first_row", "201 → first row, s (beside one micro-batch)", "registrations",
         Column("probe (GET rows)", "probe_first_row_s"), kind="bars",
         also=(Column("storm p50", "first_row_p50_s"), Column("storm p99", "first_row_p99_s"),
               Column("a micro-batch, p50", "group_batch_p50_s"))),
)


def _run_notes(measured: Measured, name: str) -> list[str]:
    """Pipeline ``name``'s registrations: where their time goes, the service's CPU, the first rows."""
    def v(metric: str) -> float:
        return measured.median(name, metric)
    notes = []
    n = int(v("registrations"))
    parts = {title: v(f"phase_{key}_p50_ms") for title, key in PHASES}
    parts = {k: p for k, p in parts.items() if not math.isnan(p)}
    said = (f"{n:,} registrations from {v('clients'):.0f} clients took {_f(v('register_wall_s'), 1)} s "
            f"({_f(v('registrations_per_s'), 1)} per s); a POST p50 {_f(v('post_p50_ms'))} ms, p99 "
            f"{_f(v('post_p99_ms'))} ms")
    if parts:
        largest = max(parts, key=lambda k: parts[k])
        total = sum(parts.values())
        said += (
            ", of which (medians) " + ", ".join(f"{k} {p:,.1f} ms" for k, p in parts.items())
            + f". The largest is {largest} ({100 * parts[largest] / total:.0f} % of the medians' sum). "
            f"The security passes cost {_f(v('phase_explain_cpu_p50_ms'), 1)} ms of CPU, the poll "
            f"{_f(v('phase_poll_cpu_p50_ms'), 1)} ms of its {_f(v('phase_poll_p50_ms'), 1)} ms (the rest of it "
            "waiting: for the runtime's lock, which the other requests' polls, the host's own poll and each "
            "micro-batch's delivery decision take, or for a core)")
    notes.append(said + ".")
    totals = {title: v(f"phase_{key}_total_s") for title, key in PHASES if key != "rest"}
    totals = {k: t for k, t in totals.items() if not math.isnan(t)}
    if totals:
        said = ("Summed over the registrations (the clients overlap, so the sums exceed the wall time): "
                + ", ".join(f"{k} {t:,.1f} s" for k, t in sorted(totals.items(), key=lambda kv: -kv[1])))
        if v("spark_checks") > 0:
            said += (f". Spark's runnable check ran {_f(v('spark_checks'))} time(s), the longest "
                     f"{_f(v('phase_runnable_max_ms'))} ms: the registrations that came before the template's first "
                     "check had passed each ran one (a passed template is not checked again), which is why the first "
                     "POSTs took longest")
        notes.append(said + ".")
    notes.append(
        f"A POST's median went from {_f(v('post_first_tenth_p50_ms'))} ms in the first tenth of the registrations "
        f"to {_f(v('post_last_tenth_p50_ms'))} ms in the last. Over the registrations the service used "
        f"{_f(v('service_cpu_s'), 1)} s of CPU ({_f(v('service_cores'), 2)} cores): its Python "
        f"{_f(v('service_python_cpu_s'), 1)} s, its JVM {_f(v('service_jvm_cpu_s'), 1)} s, the JVM's Python "
        f"workers {_f(v('service_other_cpu_s'), 1)} s; its own polls {_f(v('polls'))} (p50 "
        f"{_f(v('poll_p50_s'), 3)} s), the group {_f(v('group_batches_during'))} micro-batches (p50 "
        f"{_f(v('group_batch_p50_s'), 2)} s, max {_f(v('group_batch_max_s'), 2)} s, with up to "
        f"{_f(v('batch_members_max'))} members) and {_f(v('backfills'))} backfills "
        f"({_f(v('backfill_total_s'), 1)} s in all, {_f(v('backfill_joiners_p50'))} joiners each at the median).")
    notes.append(
        f"The probe, registered alone once every registered user had rows: its POST took "
        f"{_f(v('probe_post_ms'))} ms (poll {_f(v('probe_phase_poll_p50_ms'))} ms), its first row reached its "
        f"delivery log {_f(v('probe_log_s'), 2)} s and `GET rows` {_f(v('probe_first_row_s'), 2)} s after the "
        f"201, {_f(v('probe_batches'))} micro-batch(es). The early users' rows reached them "
        f"{_f(v('steady_p50_s'), 2)} s after a file landed before the registrations (p50; max "
        f"{_f(v('steady_max_s'), 2)} s) and {_f(v('during_p50_s'), 2)} s during them (max "
        f"{_f(v('during_max_s'), 2)} s).")
    return notes


def explain(measured: Measured, facts: Facts) -> list[str]:
    """Where a registration's time goes, what the service's CPU did, what the others saw."""
    notes = [note for name in measured.runs_by_pipeline if measured.runs(name) for note in _run_notes(measured, name)]
    loads = [r["load"] for rs in measured.runs_by_pipeline.values() for r in rs if r.get("load") is not None]
    if loads:
        notes.append(f"Machine load (1 min) at the runs' ends: {min(loads):.1f} to {max(loads):.1f} on "
                     f"{facts.get('cores', os.cpu_count())} CPUs; shared with other work, the times swing with it.")
    return notes


def _notes(s: Sizes) -> tuple[str, ...]:
    return (
        f"One life of `streamwarden serve` (its own Spark, `local[2]` at nice 10, trigger {s.trigger}) on a fresh "
        f"copy of the prepared store, under `bench/network_register_drive.py`, which starts it, lands one file of "
        f"{s.rate:,} readings every {s.interval_s:g} s into its input folder from then on (copied beside it, renamed "
        f"in), waits until the {s.early} early users have the first {s.warmup_files} files' rows, lets "
        f"{s.steady_files} more land (the baseline), then POSTs the {s.registrations:,} registrations from "
        f"{s.clients} client threads (httpx, a connection each), each user with her own token, as fast as the "
        "service answers. Then it waits until every registered user has a first row, registers the probe and polls "
        f"her `GET rows?limit=1` every 50 ms, lets {s.tail_files} more files land, stops the feed, waits until "
        "every user has every row the landed files hold for her and 3 s more, and stops the service with SIGTERM.",
        "Client-side times: each POST from sending to its answer (`perf_counter`), the registrations' wall time "
        "from the first sent to the last answered. Inside the service, `bench/network_register_serve.py` runs the "
        "real `serve` after wrapping the registration route's steps with timers (wall and the thread's CPU, "
        "written to a JSON-lines file): no profiler, a few microseconds a call. CPU of the service from /proc "
        "before and after the registrations (its Python process, its JVM, the JVM's Python workers).",
        "First rows: a registered user's first row is seen in her delivery log (`rows/<user>/<query>/"
        "_delivered.jsonl`, one `stat` per user still waiting, every 50 ms or 20 times a look's time); the probe's "
        "in `GET rows`. Micro-batches are the group's Spark query's (`CHECKPOINT/.groups/<group>/spark`: "
        "`offsets/N` written when a batch starts, `commits/N` when it commits); the batch that wrote a first row is "
        "the one under way when its folder was written (the folder's mtime); the count runs from the batch not yet "
        "committed at the 201.",
        "Rows: after the run, untimed, every user's rows in the output folders (what `GET rows` serves) against an "
        "independent count of the landed readings of her ward above her constant (count and a digest of the "
        "multiset of (sensor, value)); a registered user receives what the group read before she joined too (the "
        "group's backfill), so every user's expected rows are all landed files'.",
        f"The time target is judged on the full form only ({Sizes().registrations:,} registrations; the quick "
        "form's is shown). The machine has 2 cores shared with other work: the times swing with its load.",
    )


def experiment(events: int | None = None, quick: bool = False, sizes: Sizes | None = None) -> Experiment:
    """The registration experiment (``events``: readings per second, default 200; ``quick``: 50
    registrations, 5 early users, 4 clients)."""
    s = sizes or (QUICK if quick else Sizes())
    if events:
        s = replace(s, rate=events)
    pipeline = Pipeline(_name(s), _command(s), GROUP, "streamwarden serve", params={"registrations": s.registrations},
                        check=received)
    return Experiment(
        name="network_register",
        title=f"Registration: {s.registrations:,} users register their queries over HTTP with a running service "
              "fed a stream",
        workload=_workload(s), pipelines=(pipeline,),
        targets=(_time_target(s), _first_row_target(s), _rows_target(s)),
        notes=_notes(s), tables=_tables(s), plots=PLOTS, explain=explain, warmup=False)


__all__ = ["QUICK", "Sizes", "experiment", "explain", "query_text", "received", "row_key", "users"]

