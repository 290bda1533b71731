"""Experiment 8's part of ``bench/results/README.md`` and its plot: the service under 50 clients (issue 13).

Issue 13's targets next to what the run measured, what the measurements say about where
the time goes (HTTP against reading the files, CPU of each process, the profile when one
was taken), the latency distributions, and one PNG: the CDFs of ``GET rows`` (with the
50 ms target) and of the SSE delays (with the 1 s target). The layout depends only on the
settings of the run, never on the numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.report import Check, _table
from bench.report_network_sim import _run_line
from bench.service_load import QS, QUERY, TARGET_P99_MS, TARGET_SSE_S
from bench.stats import ratio

SOURCE = "issue 13"


def _f(value: float | None, digits: int = 1) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.{digits}f}"


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) or "none"


def service_load_checks(sl: dict[str, Any]) -> list[Check]:
    """Issue 13's three targets (judged on a full run: at least 60 s of load)."""
    cfg, rows, sse, e2e = sl["settings"], sl["rows"], sl["sse"], sl["e2e"]
    judged = cfg["seconds"] >= 60

    def verdict(met: bool) -> bool | None:
        return met if judged else None
    errors = rows["errors"] + sse["errors"]
    checks = [
        Check(SOURCE, f"{cfg['pollers'] + cfg['streams']} concurrent clients reading rows and streams for "
              f"{cfg['seconds']:g} s: no errors",
              f"{rows['errors']} in {rows['requests']:,} `GET rows` ({_kinds(rows['error_kinds'])}); {sse['errors']} "
              f"on {cfg['streams']} SSE streams ({_kinds(sse['error_kinds'])}); the provider's POSTs: "
              f"{sl['provider']['errors']} of {sl['provider']['posts']:,} failed", verdict(errors == 0)),
        Check(SOURCE, f"p99 of `GET rows` ≤ {TARGET_P99_MS:g} ms",
              f"p99 {_f(rows['p99'])} ms (p50 {_f(rows['p50'])}, p95 {_f(rows['p95'])}, max {_f(rows['max'])}), "
              f"{rows['per_s']:,.0f} requests/s", verdict(rows["p99"] <= TARGET_P99_MS)),
        Check(SOURCE, f"a row reaches an SSE client within {TARGET_SSE_S:g} s of reaching its output",
              f"max {_f(sse['max'], 2)} s over {sse['events']:,} rows (p50 {_f(sse['p50'], 2)}, p99 "
              f"{_f(sse['p99'], 2)}); from the provider's POST: p50 {_f(e2e['p50'], 2)} s, p99 {_f(e2e['p99'], 2)}, "
              f"max {_f(e2e['max'], 2)}", verdict(sse["max"] <= TARGET_SSE_S))]
    if not judged:
        checks = [Check(k.source, k.claim, k.measured + " (smoke run: not judged)", k.met) for k in checks]
    return checks


def _observations(sl: dict[str, Any]) -> list[str]:
    rows, direct, health, cpu, wall = sl["rows"], sl["direct"], sl["health"], sl["cpu_s"], sl["wall_s"]
    load = sl["load_average"]
    served = {k.split('outcome="')[1].rstrip('"}'): v for k, v in sl["server_requests"].items() if "query.rows" in k}
    notes = [
        f"HTTP against the files: the same reads by `read_rows` in the client process took p50 "
        f"{_f(direct['p50'], 2)} ms, p99 {_f(direct['p99'], 2)} ms, against {_f(rows['p50'])} and {_f(rows['p99'])} ms "
        f"over HTTP: reading the files is {100 * ratio(direct['p50'], rows['p50']):.0f} % of the median and "
        f"{100 * ratio(direct['p99'], rows['p99']):.0f} % of the p99. `GET /health` (no token, no audit record, no "
        f"file) took p50 {_f(health['p50'])} ms, p99 {_f(health['p99'])} ms: the floor of one request through the "
        "client, the loopback and uvicorn's event loop under this load; the rest of `GET rows` is its route "
        "(token check and query lookup in the store, the read, the JSON answer, the audit record queued).",
        f"CPU over the {wall:.0f} s of load: the service's process tree {cpu['tree']:.1f} s "
        f"({cpu['tree'] / wall:.2f} cores), of which its Python process {cpu['python']:.1f} s "
        f"({cpu['python'] / wall:.2f} cores: the event loop's thread {cpu['main']:.1f} s; the other threads "
        f"{cpu['python'] - cpu['main']:.1f} s, i.e. the thread pool running the routes, the audit writer and "
        f"Spark's callbacks) and the JVM with its Python workers {cpu['tree'] - cpu['python']:.1f} s. The service "
        "counted these `GET rows` over the whole run (warm-up, profiles and diagnostics included) by outcome: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(served.items())) + ". The client process used "
        f"{cpu['client']:.1f} s ({cpu['client'] / wall:.2f} cores, {cpu['client_wait']:.1f} s waiting for a CPU); its "
        f"event loop lagged p50 "
        f"{_f(sl['loop_lag']['p50'], 2)} ms, p99 {_f(sl['loop_lag']['p99'])} ms, max {_f(sl['loop_lag']['max'])} ms "
        "behind a 10 ms sleep, which the client-side latencies include.",
        f"Waiting for a CPU: the service's Python threads spent {cpu['python_wait']:.1f} s runnable but not running "
        f"(`schedstat`), {ratio(cpu['python_wait'], cpu['python']):.1f}× their {cpu['python']:.1f} s of CPU; its "
        f"event loop's thread alone {cpu['main_wait']:.1f} s, i.e. {100 * cpu['main_wait'] / wall:.0f} % of the "
        f"run. Some task of the machine waited for a CPU {100 * cpu['pressure'] / wall:.0f} % of the time "
        "(`/proc/pressure/cpu`). A thread that waits for a CPU while it holds the GIL stops every other thread "
        "of the service's Python process as well.",
        f"An SSE row's delay, split at its batch's line in `_delivered.jsonl` (seen by a watcher in the client "
        f"polling the log's size every 20 ms): batch folder → line p50 {_f(sl['logging']['p50'], 2)} s, p99 "
        f"{_f(sl['logging']['p99'], 2)} s (the network's terminal switch: the user's part moved into place, the log "
        f"appended and fsynced, in Spark's callback in the service's Python process); line → event p50 "
        f"{_f(sl['sse_logged']['p50'], 2)} s, p99 {_f(sl['sse_logged']['p99'], 2)} s, max "
        f"{_f(sl['sse_logged']['max'], 2)} s (the service: each stream looks for new rows every 0.1 s, reads them "
        "and sends one event per row).",
        f"The audit trail: once the clients stopped, `GET /v1/audit` (which waits for the writer's queue) answered "
        f"after {sl['audit_flush_s']:.2f} s. Spark: {sl['pipelines']} pipelines (one per user's query, trigger "
        f"{sl['settings']['trigger']}), {sl['batches']:,} micro-batches in the whole run, the last ones "
        f"{_f(sl['last_batch_ms'], 0)} ms (median). 1-minute load average {sl['load_at_start'][0]:.1f} before the "
        f"service started, {load['before'][0]:.1f} when the clients started and {load['after'][0]:.1f} when they "
        f"stopped; other work (not the service, not the clients) kept {load['other_cores']:.2f} of the "
        f"{load['cpus']} cores busy meanwhile."]
    for key, when in (("profile", "under the same load after the measured run"),
                      ("idle_profile", "with the same clients and no records, after the diagnostics")):
        if sl.get(key):
            notes.append(_profile_note(sl[key], when))
    rn, idle = sl.get("reniced"), sl.get("idle")
    if rn and idle:
        notes.append(
            f"Two diagnostics after the measured run, the same clients for {rn['measured_s']:g} s each (table below): "
            f"with the service's JVM and Spark's Python workers at nice {sl['settings']['jvm_nice']}, `GET rows` took "
            f"p50 {_f(rn['rows']['p50'])} ms, p99 {_f(rn['rows']['p99'])} ms; with no more records (the network idle, "
            f"no SSE rows, no POSTs) p50 {_f(idle['rows']['p50'])} ms, p99 {_f(idle['rows']['p99'])} ms, against "
            f"{_f(rows['p50'])} and {_f(rows['p99'])} ms in the measured run. With no records the service's Python "
            f"process spent {1000 * idle['cpu_s']['python'] / max(idle['rows']['requests'], 1):.1f} ms of CPU per "
            f"`GET rows` ({idle['cpu_s']['python'] / idle['wall_s']:.2f} cores for {idle['rows']['per_s']:,.0f} "
            "requests/s; the idle SSE streams' polling and the health probe included): the HTTP service's own cost.")
    return notes


def _profile_note(profile: dict[str, Any], when: str) -> str:
    total = profile["samples"]
    loop, threads = (100 * sum(profile[k].values()) / total for k in ("loop", "threads"))

    def shares(counts: dict[str, int]) -> str:
        return ", ".join(f"{name} {100 * n / total:.0f} %" for name, n in counts.items()) or "—"
    return (f"Who holds the service's GIL {when} (py-spy `--gil`, {profile['rate']} Hz for {profile['seconds']:g} s; "
            f"{total:,} samples: the GIL held {100 * total / (profile['seconds'] * profile['rate']):.0f} % of the "
            f"time), shares of the samples: on the event loop's thread {loop:.0f} % ({shares(profile['loop'])}); on "
            f"the other threads {threads:.0f} % ({shares(profile['threads'])}). The largest, by frame of that code "
            "→ innermost frame: " + "; ".join(
                f"{name}: " + ", ".join(f"`{leaf}` {100 * n / total:.0f} %" for leaf, n in leaves.items())
                for name, leaves in profile["leaves"].items()) + ".")


def _compare(sl: dict[str, Any]) -> str:
    phases = (sl, sl["reniced"], sl["idle"])

    def row(name: str, pick: Any, digits: int = 1) -> tuple[str, ...]:
        return (name, *(_f(pick(d), digits) for d in phases))
    return _table(["measure", "measured run", f"JVM at nice {sl['settings']['jvm_nice']}", "no records"], [
        ("`GET rows` p50 / p99 (ms)", *(f"{_f(d['rows']['p50'])} / {_f(d['rows']['p99'])}" for d in phases)),
        row("`GET rows` requests/s", lambda d: d["rows"]["per_s"], 0),
        ("`GET /health` p50 / p99 (ms)", *(f"{_f(d['health']['p50'])} / {_f(d['health']['p99'])}" for d in phases)),
        row("SSE: batch folder → event, p99 (s)", lambda d: d["sse"]["p99"], 2),
        row("SSE: batch folder → event, max (s)", lambda d: d["sse"]["max"], 2),
        row("SSE: batch folder → `_delivered.jsonl` line, p99 (s)", lambda d: d["logging"]["p99"], 2),
        row("SSE: provider's POST → event, p50 (s)", lambda d: d["e2e"]["p50"], 2),
        row("errors (GET rows + SSE)", lambda d: d["rows"]["errors"] + d["sse"]["errors"], 0),
        row("service's JVM and workers (cores)",
            lambda d: (d["cpu_s"]["tree"] - d["cpu_s"]["python"]) / d["wall_s"], 2),
        row("service's Python process (cores)", lambda d: d["cpu_s"]["python"] / d["wall_s"], 2),
        row("… its event loop's thread (cores)", lambda d: d["cpu_s"]["main"] / d["wall_s"], 2),
        row("its threads waiting for a CPU (s per s)", lambda d: d["cpu_s"]["python_wait"] / d["wall_s"], 2),
        row("… its event loop's thread (s per s)", lambda d: d["cpu_s"]["main_wait"] / d["wall_s"], 2),
        row("client process (cores)", lambda d: d["cpu_s"]["client"] / d["wall_s"], 2),
        row("other work (cores)", lambda d: d["load_average"]["other_cores"], 2)])


def service_load_section(sl: dict[str, Any], run: dict[str, Any] | None = None) -> str:
    cfg = sl["settings"]
    checks = service_load_checks(sl)
    rows = [("`GET rows` over HTTP (ms)", sl["rows"]), ("`read_rows` in the client, no HTTP (ms)", sl["direct"]),
            ("`GET /health` (ms)", sl["health"]), ("SSE: batch folder → event (s)", sl["sse"]),
            ("SSE: provider's POST → event (s)", sl["e2e"]),
            ("SSE: batch folder → its line in `_delivered.jsonl` (s)", sl["logging"]),
            ("SSE: `_delivered.jsonl` line → event (s)", sl["sse_logged"]),
            ("provider's POST, the whole run (ms)", sl["provider"]),
            ("client event loop lag (ms)", sl["loop_lag"])]
    out = ["## Experiment 8: the service under 50 concurrent clients (issue 13)", "",
           _run_line(run) + f"`streamwarden serve` as its own process (its own Spark, trigger {cfg['trigger']}) on a "
           f"fresh store; {cfg['users']} users (Doctors every row, Nurses `value < 50`), each with `q1` = `{QUERY}`; a "
           f"provider POSTs {cfg['records_per_post']} records every {cfg['post_every_s']:g} s throughout. After every "
           f"query delivered and {cfg['warm_s']:g} s more, one client process (asyncio + httpx) ran "
           f"{cfg['pollers']} pollers (`GET rows` after their cursor, limit {cfg['limit']}; a full page: again at "
           f"once, else {cfg['think_s']:g} s of pause) and {cfg['streams']} SSE streams, spread over the users, for "
           f"{cfg['seconds']:g} s, all starting at the rows already delivered. Side by side in that process: one "
           "direct reader per user (`read_rows` on the same folders, the same pauses), a `GET /health` probe every "
           "0.2 s and an event-loop lag probe. Latencies are client-side (`perf_counter`); an SSE row's delay is its "
           "arrival minus the mtime of its batch folder (found by the row's cursor through `_delivered.jsonl`), and "
           "from the provider's POST (sent) to arrival. CPU from `/proc` (the service's tree) and `getrusage` "
           "(the client).", "", "### Issue targets (this experiment)", "",
           _table(["source", "claim / target", "this run", "verdict"],
                  [(c.source, c.claim, c.measured, c.verdict) for c in checks]), "", "### Where the time goes", ""]
    out += [f"- {n}" for n in _observations(sl)] + [""]
    out += ["### Distributions", "", _table(["measure", "samples", "p50", "p95", "p99", "max"], [
        (name, f"{d['n']:,}", _f(d["p50"], 2), _f(d["p95"], 2), _f(d["p99"], 2), _f(d["max"], 2)) for name, d in rows]),
        "", f"Rows received per poller: min {sl['rows']['received'][0]:,}, median "
        f"{sl['rows']['received'][1]:,.0f}, max {sl['rows']['received'][2]:,}; {sl['sse']['events']:,} rows by SSE; "
        f"{sl['direct']['received']:,} by the "
        "direct readers.", ""]
    if sl.get("reniced") and sl.get("idle"):
        out += [f"The measured run and the two diagnostics (the same clients; *JVM at nice {cfg['jvm_nice']}*: the "
                "service's JVM and Spark's Python workers behind every other process; *no records*: the provider "
                "stopped and the network idle):", "", _compare(sl), ""]
    out += ["![The service under 50 clients: GET rows and SSE delays](service_load.png)", ""]
    return "\n".join(out)


def service_load_plots(sl: dict[str, Any], out: Path) -> list[str]:
    """One PNG: the CDF of `GET rows` (and its references) against 50 ms, and of the SSE delays against 1 s."""
    from bench.plots import _save, plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.4))
    fractions = [q / 100 for q in QS]
    for axis, curves, target, unit in (
            (a1, (("GET rows (HTTP)", sl["rows"], "tab:blue"), ("read_rows, no HTTP", sl["direct"], "tab:green"),
                  ("GET /health", sl["health"], "tab:gray")), TARGET_P99_MS, "ms"),
            (a2, (("batch folder → SSE event", sl["sse"], "tab:blue"),
                  ("its _delivered.jsonl line → SSE event", sl["sse_logged"], "tab:green"),
                  ("provider POST → SSE event", sl["e2e"], "tab:orange")), TARGET_SSE_S, "s")):
        for label, d, color in curves:
            if d["cdf"]:
                axis.plot([max(v, 1e-3) for v in d["cdf"]], fractions, color=color, label=label)
        axis.axvline(target, color="tab:red", ls="--", lw=1.2, label=f"target {target:g} {unit}")
        axis.axhline(0.99, color="0.6", ls=":", lw=1)
        axis.set_xscale("log")
        axis.set_xlabel(unit)
        axis.set_ylabel("fraction of samples")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8, loc="lower right")
    a1.set_title(f"GET rows, {sl['rows']['per_s']:,.0f} requests/s (p99 {_f(sl['rows']['p99'])} ms)", fontsize=10)
    a2.set_title(f"SSE rows, {sl['sse']['events']:,} events", fontsize=10)
    fig.suptitle(f"The service under {sl['settings']['pollers'] + sl['settings']['streams']} clients (issue 13)",
                 fontsize=10)
    _save(fig, out / "service_load.png")
    return ["service_load.png"]


__all__ = ["service_load_checks", "service_load_plots", "service_load_section"]
