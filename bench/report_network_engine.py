"""Experiment 7's part of ``bench/results/README.md``: one engine (issue 12, Performance).

Every target of the issue next to what this run measured, met or not, and for each what
the measurements say about where the time goes. The layout depends only on the settings
of the run, never on the numbers.
"""

from __future__ import annotations

import math
from typing import Any

from bench.engine_latency import NETWORK as LAT_NETWORK
from bench.engine_latency import PLAIN as LAT_PLAIN
from bench.engine_latency import PLAIN3, RUN
from bench.engine_mixed import PLAIN as MIX_PLAIN
from bench.engine_mixed import SECURED, UNSECURED_NETWORK
from bench.engine_steady import BRANCH, GONE, NETWORK, OFF, SEPARATE
from bench.network_engine import (TARGET_JOBS_PER_BATCH, TARGET_LATENCY_RATIO, TARGET_MIXED_RATIO, TARGET_OFF_SHARE,
                                  TARGET_PLAIN_RATIO, TARGET_SEPARATE_RATIO)
from bench.report import Check, _table
from bench.report_network_sim import _run_line
from bench.stats import ratio

SOURCE = "issue 12"


def _f(value: float | None, digits: int = 0) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.{digits}f}"


def _x(value: float) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.2f}×"


# -- derived numbers ----------------------------------------------------------------------------
def heaviest_plain(st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The plain query alone with the most CPU per file."""
    plains = {n: c for n, c in st["configurations"].items() if n.startswith("plain ")}
    name = max(plains, key=lambda n: plains[n]["cpu_ms_per_file"])
    return name, plains[name]


def branch(st: dict[str, Any]) -> dict[str, float] | None:
    """CQ2's cost per file on and off: the network (and with CQ2 off) minus the network without CQ2
    (None when that was not measured)."""
    c = st["configurations"]
    if GONE not in c:
        return None
    on = c[NETWORK]["cpu_ms_per_file"] - c[GONE]["cpu_ms_per_file"]
    off = c[OFF]["cpu_ms_per_file"] - c[GONE]["cpu_ms_per_file"]
    return {"on_ms": on, "off_ms": off, "share": ratio(off, on)}


def _phases(phases: dict[str, float]) -> str:
    keys = ("triggerExecution", "addBatch", "queryPlanning", "walCommit", "commitOffsets", "latestOffset")
    return ", ".join(f"{k} {phases[k]:.0f}" for k in keys if k in phases) or "—"


# -- checks -------------------------------------------------------------------------------------
def network_engine_checks(ne: dict[str, Any]) -> list[Check]:
    """Issue 12's performance targets (verdicts only for a warmed-up run with two rounds of every part)."""
    cfg = ne["settings"]
    judged = bool(cfg["warm_up"]) and min(cfg["latency_rounds"], cfg["steady_rounds"], cfg["mixed_rounds"]) >= 2

    def verdict(met: bool) -> bool | None:
        return met if judged else None
    checks = []
    lat = ne["latency"]["configurations"]
    plain = lat[LAT_PLAIN]["median_ms"]
    for config, what in ((RUN, "`api.run` of the selection"),
                         (LAT_NETWORK, "`NetworkRuntime`, three queries and three users (every user's output)")):
        r = ratio(lat[config]["median_ms"], plain)
        checks.append(Check(SOURCE, f"latency, file landing → rows in each user's output: {what} ≤ "
                            f"{TARGET_LATENCY_RATIO:g}× a plain PySpark streaming query doing the same selection "
                            f"(trigger {ne['latency']['trigger_ms']} ms)",
                            f"{_x(r)}: median {lat[config]['median_ms']:.0f} ms (p90 {lat[config]['p90_ms']:.0f}) "
                            f"against {plain:.0f} ms (p90 {lat[LAT_PLAIN]['p90_ms']:.0f})",
                            verdict(r <= TARGET_LATENCY_RATIO)))
    st = ne["steady"]
    c = st["configurations"]
    net = c[NETWORK]
    name, heavy = heaviest_plain(st)
    r = ratio(net["cpu_ms_per_file"], heavy["cpu_ms_per_file"])
    checks.append(Check(SOURCE, f"steady state: the three-query network ≤ {TARGET_PLAIN_RATIO:g}× the CPU per "
                        "micro-batch of its heaviest query as a plain PySpark streaming query alone",
                        f"{_x(r)}: {net['cpu_ms_per_file']:,.0f} ms CPU per file against "
                        f"{heavy['cpu_ms_per_file']:,.0f} ms ({name}, the heaviest of "
                        f"{', '.join(n for n in c if n.startswith('plain '))})",
                        verdict(r <= TARGET_PLAIN_RATIO)))
    claim = (f"steady state: the shared network ≤ {TARGET_SEPARATE_RATIO:g}× the CPU of running its queries "
             "separately (three `api.run`)")
    if SEPARATE in c:
        r = ratio(net["cpu_ms_per_file"], c[SEPARATE]["cpu_ms_per_file"])
        checks.append(Check(SOURCE, claim, f"{_x(r)}: {net['cpu_ms_per_file']:,.0f} ms against "
                            f"{c[SEPARATE]['cpu_ms_per_file']:,.0f} ms CPU per file",
                            verdict(r <= TARGET_SEPARATE_RATIO)))
    else:
        checks.append(Check(SOURCE, claim, "not measured in this run", None))
    b = branch(st)
    claim = f"steady state: a branch whose users all lost access ≤ {100 * TARGET_OFF_SHARE:g} % of its cost when on"
    if b is None:
        checks.append(Check(SOURCE, claim, f"not measured in this run ({BRANCH} off: {c[OFF]['cpu_ms_per_file']:,.0f} "
                            f"ms CPU per file, on: {net['cpu_ms_per_file']:,.0f} ms)", None))
    else:
        checks.append(Check(SOURCE, claim,
                            f"{100 * b['share']:.0f} %: {BRANCH} off {b['off_ms']:+,.0f} ms, on {b['on_ms']:+,.0f} ms "
                            f"CPU per file (the network with {BRANCH} off, and on, minus the network without it: "
                            f"{c[OFF]['cpu_ms_per_file']:,.0f}, {net['cpu_ms_per_file']:,.0f} and "
                            f"{c[GONE]['cpu_ms_per_file']:,.0f} ms)", verdict(b["share"] <= TARGET_OFF_SHARE)))
    checks.append(Check(SOURCE, f"at most {TARGET_JOBS_PER_BATCH:g} Spark jobs per micro-batch",
                        f"{net['jobs_per_batch']:.2f} jobs per pipeline micro-batch ({net['jobs_per_file']:.1f} jobs, "
                        f"{net['batches_per_file']:.1f} micro-batches of {net['queries_running']:.0f} pipelines per "
                        "file)", verdict(net["jobs_per_batch"] <= TARGET_JOBS_PER_BATCH)))
    mx = ne["mixed"]["configurations"]
    r = ratio(mx[SECURED]["records_per_s"], mx[UNSECURED_NETWORK]["records_per_s"])
    checks.append(Check(SOURCE, f"a network mixing role policies, shields and levels ≥ {TARGET_MIXED_RATIO:g}× the "
                        "throughput of the same queries unsecured",
                        f"{_x(r)}: {mx[SECURED]['records_per_s']:,.0f} against "
                        f"{mx[UNSECURED_NETWORK]['records_per_s']:,.0f} input records/s (the same runtime and "
                        "queries without security); "
                        + (f"against the plain queries "
                           f"{_x(ratio(mx[SECURED]['records_per_s'], mx[MIX_PLAIN]['records_per_s']))}; "
                           if MIX_PLAIN in mx else "") + "per CPU second "
                        f"{_x(ratio(mx[SECURED]['records_per_cpu_s'], mx[UNSECURED_NETWORK]['records_per_cpu_s']))}",
                        verdict(r >= TARGET_MIXED_RATIO)))
    stops = st.get("switch_stops_by_itself")
    if stops is not None:
        checks.append(Check(SOURCE, f"a pipeline whose users were revoked stops by itself once its rows pass the "
                            "revocation (no other change in the store)",
                            f"{BRANCH} revoked as of a later file's first minute, that file processed, `poll()`: "
                            + ("stopped" if stops else "still running"), stops))
    if not judged:
        checks = [Check(k.source, k.claim, k.measured + " (smoke run: not judged)", k.met) if k.met is None else k
                  for k in checks]
    return checks


# -- where the time goes -------------------------------------------------------------------------
def _observations(ne: dict[str, Any]) -> list[str]:
    notes = []
    lat = ne["latency"]["configurations"]
    p, n, r = lat[LAT_PLAIN], lat[LAT_NETWORK], lat[RUN]
    three = lat.get(PLAIN3)
    notes.append(
        "Latency, median micro-batch phases (ms, batches with input, Spark's progress reports): plain "
        f"{_phases(p['phases_ms'])}; `api.run` {_phases(r['phases_ms'])}; network {_phases(n['phases_ms'])}"
        + (f"; three plain selections side by side {_phases(three['phases_ms'])}" if three else "") + ". "
        "`addBatch` of the network is its terminal switch (`foreachBatch`: reading the grants, the partitioned "
        "write, moving each user's part); `queryPlanning` is the plan of the micro-batch, made again for every "
        "micro-batch as for any streaming query."
        + (f" With three selections at once, the plain queries' median was {three['median_ms']:.0f} ms against "
           f"{p['median_ms']:.0f} ms for one: that much of the network's latency is three queries sharing "
           f"{ne['load_average']['cpus']} cores." if three else ""))
    switch = ne["latency"].get("terminal_switch")
    if switch:
        notes.append(
            f"Inside the network's terminal switch (cProfile of {switch['batches']} micro-batches of the latency "
            f"network after its measured files, {switch['total_ms']:.0f} ms per micro-batch in `foreachBatch`): "
            + ", ".join(f"{name} {ms:.0f} ms" for name, ms in switch["parts_ms"].items()) + " per micro-batch.")
    st = ne["steady"]["configurations"]
    net = st[NETWORK]
    name, heavy = heaviest_plain(ne["steady"])
    sep = st.get(SEPARATE)

    def shares(c: dict[str, Any]) -> str:
        return (f"{c['cpu_ms_per_file']:,.0f} ms CPU (JVM {c['jvm_ms_per_file']:,.0f}, this Python process "
                f"{c['driver_ms_per_file']:,.0f}, Python workers {max(c['workers_ms_per_file'], 0.0):,.0f}), "
                f"{c['jobs_per_file']:.1f} jobs, {c['tasks_per_file']:.0f} tasks, {c['batches_per_file']:.1f} "
                f"micro-batches ({c['data_batches_per_file']:.1f} with data), {c['codegen_per_file']:.0f} classes "
                f"generated, {c['jit_ms_per_file']:,.0f} ms JIT; JVM threads: "
                + ", ".join(f"{k} {v:,.0f}" for k, v in c["threads_ms_per_file"].items()) + " ms")
    compared = [("network", net), (name, heavy)] + ([("separate", sep)] if sep else [])
    notes.append("Steady state per file: " + "; ".join(f"{n} {shares(c)}" for n, c in compared)
                 + ". Median micro-batch phases (ms): "
                 + "; ".join(f"{n} {_phases(c['phases_ms_per_batch'])}" for n, c in compared) + ".")
    kids = net["threads_ms_per_file"].get("child processes")
    if kids is not None:
        spawned = ne["steady"].get("spawned_per_file")
        notes.append(
            f"Child processes: {kids:,.0f} ms of the network's {net['cpu_ms_per_file']:,.0f} ms CPU per file "
            f"({100 * ratio(kids, net['cpu_ms_per_file']):.0f} %), and "
            f"{heavy['threads_ms_per_file']['child processes']:,.0f} of {name}'s {heavy['cpu_ms_per_file']:,.0f} ms, "
            "is the CPU of processes the JVM started and reaped"
            + (f"; while the network processed one file, the JVM started {sum(spawned.values()):,} processes (last "
               "name seen: " + ", ".join(f"{n} {c:,}" for n, c in spawned.items()) + "; `jspawnhelper` is Java's "
               "launcher, seen before it runs the program)" if spawned else "")
            + ". Hadoop's local file system runs `chmod` and `readlink` as programs when its native library is not "
            "loaded (Spark warns of that at start): for the permissions of every file and folder a micro-batch "
            "writes (checkpoint, state store, output) and to resolve links when the checkpoint renames files.")
    notes.append(
        f"Sharing: the network ran {net['queries_running']:.0f} Spark streaming queries, one per pipeline"
        + (f", as many as the separate runs ({sep['queries_running']:.0f})" if sep else "") + ": the runtime "
        "compiles one Spark query per pipeline and shares no operator, state or scan between queries, so the "
        "network does the separate runs' work plus its terminal switches, and every stateful query also runs a "
        "no-data micro-batch after each batch that moved its watermark (micro-batches per file above).")
    b = branch(ne["steady"])
    notes.append(
        f"Switches: with {BRANCH}'s users revoked its pipeline is stopped ({st[OFF]['queries_running']:.0f} queries "
        f"running, against {net['queries_running']:.0f}) and runs no Spark work; the network then cost "
        f"{st[OFF]['cpu_ms_per_file']:,.0f} ms per file"
        + (f", and {st[GONE]['cpu_ms_per_file']:,.0f} ms without {BRANCH} registered at all: the difference "
           f"({b['off_ms']:+,.0f} ms) is what the other two pipelines' cost varied by between the two phases "
           "(per round, ms per file: " + "; ".join(
               f"{phase} " + " / ".join(f"{v:,.0f}" for v in ne["steady"]["rounds_cpu_ms"][phase])
               for phase in (OFF, GONE)) + ")."
           if b else "."))
    if ne["steady"].get("switch_stops_by_itself") is False:
        notes.append(
            f"When {BRANCH}'s users were revoked as of a later event time, its pipeline kept running after rows "
            "past the revocation had been emitted: `NetworkRuntime.poll()` re-evaluates the switches only when "
            "the store changed since the last poll (its key is the registrations, the catalog and the last "
            "access change), and a pipeline's emitted event time moving past a revocation is not such a change. "
            "It stopped at the next change in the store.")
    mx = ne["mixed"]["configurations"]
    sec, uns = mx[SECURED], mx[UNSECURED_NETWORK]
    chunks = max(ne["mixed"]["chunks"], 1)
    notes.append(
        f"Every mechanism at once: the secured network ran {sec['pipelines']} pipelines for the 3 queries (users with "
        "different roles or clearances get different plans, and levels share no operator), the unsecured one "
        f"{uns['pipelines']}. Per measured chunk: {sec['jobs'] / chunks:.1f} Spark jobs against "
        f"{uns['jobs'] / chunks:.1f}, {sec['tasks'] / chunks:.0f} tasks against {uns['tasks'] / chunks:.0f}; CPU "
        f"{sec['cpu_s']:.1f} s against {uns['cpu_s']:.1f} s, of which Spark's Python workers (Python data sources: "
        "the punctuated files and the live action values; the shields' `transformWithStateInPandas`) "
        f"{max(sec['workers_cpu_s'], 0):.1f} s against {max(uns['workers_cpu_s'], 0):.1f} s.")
    queries: dict[str, list[float]] = {}
    for name, q in sec["per_query"].items():
        queries.setdefault(name.rsplit("-", 1)[0], []).append(q["trigger_ms"])
    plain_by_query = {name.rsplit("-", 1)[0]: q["trigger_ms"] for name, q in uns["per_query"].items()}
    if queries:
        notes.append("Median micro-batch of each query's pipelines, secured against unsecured (ms): " + "; ".join(
            f"{qid} " + " and ".join(f"{v:,.0f}" for v in sorted(values))
            + f" against {plain_by_query.get(qid, float('nan')):,.0f}"
            for qid, values in sorted(queries.items())) + " (table below; the first micro-batch of each, which "
            "starts its state stores and Python workers, is shown apart).")
    alone = ne["mixed"].get("alone")
    if alone:
        extra = {qid: c[SECURED]["cpu_s"] - c[UNSECURED_NETWORK]["cpu_s"] for qid, c in alone.items()}
        notes.append("Each query alone (secured − unsecured CPU over the same chunks): " + "; ".join(
            f"{qid} {alone[qid][SECURED]['cpu_s']:.1f} − {alone[qid][UNSECURED_NETWORK]['cpu_s']:.1f} = "
            f"{extra[qid]:+.1f} s ({alone[qid][SECURED]['pipelines']} pipelines, Python workers "
            f"{max(alone[qid][SECURED]['workers_cpu_s'], 0):.1f} s)" for qid in sorted(extra, key=lambda q: -extra[q]))
            + ".")
    return notes


# -- tables and section ------------------------------------------------------------------------
def _latency_table(ne: dict[str, Any]) -> str:
    lat = ne["latency"]["configurations"]
    plain = lat[LAT_PLAIN]["median_ms"]
    rows = [(name, f"{c['median_ms']:.0f}", f"{c['p90_ms']:.0f}", _x(ratio(c["median_ms"], plain)), c["samples"],
             ", ".join(f"{t} {v:.0f}" for t, v in c["per_target_median_ms"].items()),
             _phases(c["phases_ms"])) for name, c in lat.items()]
    return _table(["configuration", "median ms", "p90 ms", "× plain", "samples", "median per output (ms)",
                   "median batch phases (ms)"], rows)


def _steady_table(ne: dict[str, Any]) -> str:
    rows = []
    for name, c in ne["steady"]["configurations"].items():
        rows.append((name, _f(c["cpu_ms_per_file"]), _f(c["wall_ms_per_file"]), _f(c["jvm_ms_per_file"]),
                     _f(c["driver_ms_per_file"]), _f(max(c["workers_ms_per_file"], 0.0)), f"{c['queries_running']:.0f}",
                     f"{c['batches_per_file']:.1f}", f"{c['jobs_per_file']:.1f}", f"{c['jobs_per_batch']:.2f}",
                     f"{c['tasks_per_file']:.0f}", f"{c['codegen_per_file']:.0f}", _f(c["jit_ms_per_file"]),
                     _phases(c["phases_ms_per_batch"])))
    return _table(["configuration", "CPU ms per file", "wall ms per file", "JVM", "this Python", "Python workers",
                   "queries running", "micro-batches per file", "jobs per file", "jobs per micro-batch",
                   "tasks per file", "classes generated per file", "JIT ms per file", "median batch phases (ms)"],
                  rows)


def _threads_table(rows: list[tuple[str, dict[str, float]]], unit: str) -> str:
    """JVM CPU by kind of thread, one row per configuration."""
    kinds = list(rows[0][1]) if rows else []
    return _table(["configuration"] + [f"{k} ({unit})" for k in kinds],
                  [(name, *[_f(v[k]) for k in kinds]) for name, v in rows])


def _mixed_table(ne: dict[str, Any]) -> str:
    mx = ne["mixed"]["configurations"]
    base = mx[UNSECURED_NETWORK]["records_per_s"]
    rows = [(name, c["pipelines"], f"{c['records']:,}", _f(c["wall_s"], 1), _f(c["cpu_s"], 1),
             _f(c["records_per_s"]), _f(c["records_per_cpu_s"]), _x(ratio(c["records_per_s"], base)),
             _f(max(c["workers_cpu_s"], 0.0), 1), f"{c['jobs']:.0f}", f"{c['tasks']:.0f}",
             ", ".join(f"{t} {v:,}" for t, v in c["delivered"].items())) for name, c in mx.items()]
    return _table(["configuration", "streaming queries", "input records", "wall s", "CPU s", "records/s",
                   "records per CPU s", "× unsecured network", "Python workers CPU s", "Spark jobs", "tasks",
                   "rows delivered"], rows)


def _per_query_table(ne: dict[str, Any]) -> str:
    rows = []
    for config in (SECURED, UNSECURED_NETWORK):
        for name, q in ne["mixed"]["configurations"][config]["per_query"].items():
            rows.append((config, name, _f(q["first_batch_ms"]), q["batches"], _f(q["rows_per_batch"]),
                         _f(q["trigger_ms"]), _f(q["add_batch_ms"])))
    return _table(["configuration", "streaming query", "first micro-batch ms", "later micro-batches with input",
                   "input rows per micro-batch", "median micro-batch ms", "of which addBatch ms"], rows)


def _alone_table(ne: dict[str, Any]) -> str:
    rows = []
    for qid, configs in ne["mixed"]["alone"].items():
        sec, uns = configs[SECURED], configs[UNSECURED_NETWORK]
        rows.append((qid, sec["pipelines"], _f(sec["cpu_s"], 1), _f(uns["cpu_s"], 1),
                     _x(ratio(sec["cpu_s"], uns["cpu_s"])),
                     _f(max(sec["workers_cpu_s"], 0.0), 1), f"{sec['jobs']:.0f} / {uns['jobs']:.0f}",
                     f"{sec['tasks']:.0f} / {uns['tasks']:.0f}", _f(sec["records_per_s"]), _f(uns["records_per_s"])))
    return _table(["query alone", "secured pipelines", "secured CPU s", "unsecured CPU s", "secured / unsecured CPU",
                   "secured: Python workers CPU s", "Spark jobs (secured / unsecured)", "tasks (secured / unsecured)",
                   "secured records/s", "unsecured records/s"], rows)


def network_engine_section(ne: dict[str, Any], run: dict[str, Any] | None = None) -> str:
    cfg, load = ne["settings"], ne["load_average"]
    st, mx = ne["steady"], ne["mixed"]
    tuples = ", ".join(f"{k} {v:,}" for k, v in st["tuples_per_file"].items())
    per_chunk = ", ".join(f"{k} {v:,}" for k, v in mx["records_per_chunk"].items())
    checks = network_engine_checks(ne)
    out = ["## 7. One engine: latency, steady state, every mechanism at once (issue 12)", "",
           _run_line(run)
           + f"All parts use a processing-time trigger of {cfg['trigger_ms']} ms and run one configuration at a "
           "time, each started once into fresh folders"
           + (", after a warm-up (a small network and a plain query through a few micro-batches)" if cfg["warm_up"]
              else ", no warm-up") + ". CPU: user + system time of this Python process and every descendant (the "
           "Spark JVM with its driver and executor threads, JIT and GC, Spark's Python workers), from `/proc`; "
           "Spark jobs and tasks from the status store; micro-batches and their phases from Spark's progress "
           f"reports. 1-minute load average {load['before'][0]:.1f} before and {load['after'][0]:.1f} after; other "
           f"work on the machine kept {load['other_cores']:.2f} of its {load['cpus']} cores busy on average "
           "meanwhile (wall times and latencies include that contention, CPU times do not).", "",
           "- **Latency**: a plain PySpark query doing `SEL1` (`SELECT streamid, heartRate FROM Stream1 WHERE "
           "heartRate > 100`), `api.run` of it for dr_lee, a `NetworkRuntime` with `SEL1`–`SEL3` (one selection "
           "per stream) for three users (two per query)"
           + (", and the three selections by hand side by side" if PLAIN3 in ne["latency"]["configurations"] else "")
           + f". A warm-up file, then {cfg['latency_files']} files of {cfg['rows_per_file']} readings per stream "
           f"(each file's rows marked), {cfg['latency_rounds']} round(s), the order reversed every other round; the "
           f"driver lists the output folders every {cfg['poll_ms']} ms. Latency: from the input file's rename into "
           "place to the first completely written output file holding its rows, per output (each user and query of the "
           "network); after each file the driver waits until the queries are idle and a random part of a "
           "trigger interval.",
           f"- **Steady state**: the queries of experiment 6 (CQ1–CQ3), fed {cfg['minutes_per_file']} minutes of "
           f"readings per file ({tuples} tuples); " + ("a warm-up file, then " if cfg["warm_up"] else "")
           + f"{cfg['steady_files']} measured files, each "
           "landed, processed (`processAllAvailable`), followed by the network's `poll()` and a wait until every "
           "query is idle (the no-data micro-batch of a stateful query included); costs per file, "
           f"{cfg['steady_rounds']} round(s), medians. *network*: the runtime, every user granted; in the same "
           f"running network then *{OFF}* ({BRANCH}'s users revoked: its pipeline stopped) and *{GONE}* ({BRANCH} "
           f"unregistered). The branch costs *network − {GONE}* when on and *{OFF} − {GONE}* when off. "
           "*separate*: three `api.run` side by side; *plain CQn*: each query by hand, alone.",
           f"- **Every mechanism at once**: a network of three queries over a punctuated `HeartRate` (each "
           f"patient's SPs, shields; {cfg['patients']} patients, one reading per {cfg['heart_interval_s']:g} s), a "
           "`Ward` stream under role policies (one tied to a live action) and a levelled `MessageLog` (two users "
           "cleared for different levels): see `bench/engine_mixed.py`. " + ("A warm-up chunk, then " if cfg["warm_up"]
                                                                               else "") + f"{cfg['mixed_chunks']} "
           f"chunks of {cfg['chunk_minutes']} minutes ({per_chunk} records), each landed and processed until idle; "
           "throughput = input records / wall seconds, medians of "
           f"{cfg['mixed_rounds']} round(s). *unsecured network*: the same runtime and queries over the same "
           "streams without SPs, policies, actions or levels; *plain*: the three queries by hand.", "",
           "### Issue targets (this experiment)", "",
           _table(["source", "claim / target", "this run", "verdict"],
                  [(c.source, c.claim, c.measured, c.verdict) for c in checks]), "",
           "### Where the time goes", ""]
    out += [f"- {n}" for n in _observations(ne)] + [""]
    out += ["### Latency", "", _latency_table(ne), "",
            "### Steady state per file (one micro-batch with data per running query)", "", _steady_table(ne), "",
            "The JVM's CPU per file by kind of thread (native thread names under `/proc`, see "
            "`bench/cost_meter.py`; *ended threads*: the JVM's CPU not in a thread alive at the end):", "",
            _threads_table([(n, c["threads_ms_per_file"]) for n, c in ne["steady"]["configurations"].items()], "ms"),
            "",
            "### Every mechanism at once", "", _mixed_table(ne), "",
            "The JVM's CPU over the measured chunks by kind of thread:", "",
            _threads_table([(n, {k: 1000 * v for k, v in c["jvm_threads_s"].items()})
                            for n, c in ne["mixed"]["configurations"].items()], "ms"), "",
            "Each streaming query of the last round (its progress reports; a pipeline is named by its query and "
            "plan):", "", _per_query_table(ne), ""]
    if ne["mixed"].get("alone"):
        out += ["Each query alone in a network, secured and unsecured, over the same chunks (one run each, after the "
                "rounds; input records/s counts all three streams' records, so only the CPU compares across "
                "queries):", "", _alone_table(ne), ""]
    out += ["![One engine: latency, CPU per micro-batch, throughput with every mechanism](network_engine.png)", ""]
    return "\n".join(out)


__all__ = ["branch", "heaviest_plain", "network_engine_checks", "network_engine_section"]
