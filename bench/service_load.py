"""Experiment 8: ``streamwarden serve`` under 50 concurrent clients (issues 13 and 26, Performance).

The declaration (:func:`experiment`) for :mod:`bench.suite`; :func:`_notes` says how it
measures. The workload is a store and its tokens; each pipeline is one life of the service
(``serve`` as a whole process with its own Spark, a provider thread POSTing records) under
one client process (``python -m bench.service_load --client CONFIG``, :mod:`bench.service_clients`:
pollers, SSE streams, direct readers, a health probe, an event-loop lag probe): the measured
run (then py-spy on the service's GIL holder during one more client run), and two diagnostics
(its JVM at low priority; no records). A pipeline returns named numbers: percentiles, CPU,
profile shares. ``events`` is ignored: the load is the clients and the provider's pace.

    >>> e = experiment(quick=True)
    >>> [p.name for p in e.pipelines], len(e.targets), e.repeats, e.warmup
    (['measured'], 4, 1, False)
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.service_clients import waited
from bench.spark_probe import process_tree_cpu_s
from bench.stats import median, percentile, ratio
from bench.suite.experiment import (Column, Experiment, Facts, Local, Measured, Pipeline, Plot, Table, Target,
                                    Verdict, Workload)

REPO = Path(__file__).resolve().parent.parent
TARGET_P99_MS = 50.0
TARGET_SSE_S = 1.0
QUERY = "SELECT sensor, value FROM Readings"
CATALOG = """streams:
  Readings: {schema: {ts: timestamp, sensor: int, site: string, value: double}}
roles: {Doctor: {}, Nurse: {}}
users:
%s  root: {roles: []}
policies:
  - {id: doctors_read, subject: Doctor, streams: [Readings], privilege: read}
  - {id: nurses_low, subject: Nurse, streams: [Readings], attributes: [ts, sensor, value], privilege: read,
     where: "value < 50"}
"""
PROFILE = (  # (category, regular expressions on a py-spy stack), the first that matches
    ("audit trail writer", (r"service/trail\.py", r"catalog/audit\.py")),
    ("provider POST (async route)", (r"\bappend \([^)]*service/app\.py", r"service/providers\.py")),
    ("token check (authenticate)", (r"service/auth\.py", r"catalog/identity\.py")),
    ("query lookup (registrations)", (r"service/queries\.py", r"catalog/authorization\.py")),
    ("reading rows (read_rows)", (r"runtime/deliveries\.py",)),
    ("Spark driver (py4j, terminal switch, host)",
     (r"py4j", r"pyspark", r"streamwarden/runtime/", r"service/host\.py")),
    ("SSE (sse_starlette, _events)", (r"sse_starlette", r"\b_events \(")),
    ("HTTP stack (uvicorn, starlette, fastapi, pydantic)", (r"uvicorn", r"h11", r"starlette", r"fastapi", r"pydantic",
                                                           r"anyio", r"service/app\.py")))


@dataclass(frozen=True)
class Load:
    """The clients, the provider's pace and the diagnostics of one experiment."""

    seconds: float = 60.0
    users: int = 10
    pollers: int = 40
    streams: int = 10
    records_per_post: int = 50
    post_every_s: float = 0.5
    think_s: float = 0.2
    limit: int = 1000
    trigger: str = "0.5 seconds"
    warm_s: float = 5.0
    profile_s: float = 20.0  # after the measured (and the idle) run: py-spy under the same clients (0: none)
    diagnostic_s: float = 30.0  # the clients' time in each diagnostic (0: no diagnostics)
    jvm_nice: int = 19
    quicker_trigger: str = "0.25 seconds"  # a diagnostic: what a shorter trigger buys from POST to SSE


QUICK = Load(seconds=10.0, users=3, warm_s=1.0, profile_s=0.0, diagnostic_s=0.0)


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]   {message}", flush=True)


# -- the workload: a store and its tokens, copied by every life of the service -------------------------
def _workload(load: Load) -> Workload:
    def prepare(work: Path) -> Facts:
        from streamwarden.catalog.identity import create_token
        from streamwarden.catalog.loader import load_catalog_text
        from streamwarden.catalog.store import CatalogStore

        url, users = f"sqlite:///{work / 'store.db'}", _users(load)
        roles = "".join(f"  {u}: {{roles: [{'Doctor' if i % 2 == 0 else 'Nurse'}]}}\n" for i, u in enumerate(users))
        CatalogStore(url).save(load_catalog_text(CATALOG % roles, "catalog.yaml"))
        hours = timedelta(hours=3)
        tokens = {u: create_token(url, u, expires=hours) for u in users}
        tokens.update(root=create_token(url, "root", admin=True, expires=hours),
                      provider=create_token(url, provider_stream="Readings", expires=hours))
        (work / "tokens.json").write_text(json.dumps(tokens))
        return {"users": load.users, "pollers": load.pollers, "SSE streams": load.streams,
                "records per POST": load.records_per_post}

    return Workload(f"a store with stream Readings and {load.users} readers (Doctors, Nurses), `q1` = `{QUERY}` "
                    f"each; a provider POSTing {load.records_per_post} records every {load.post_every_s:g} s", prepare)


def _users(load: Load) -> list[str]:
    return [f"reader{i:02d}" for i in range(load.users)]


# -- one life of the service -------------------------------------------------------------------------
def _launch(root: Path, url: str, trigger: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "streamwarden.cli.main", "serve", "--store", url, "--input",
               f"Readings={root / 'in' / 'Readings'}", "--output-dir", str(root / "out"), "--checkpoint",
               str(root / "checkpoint"), "--port", "0", "--trigger", trigger]
    with open(root / "serve.log", "w") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, cwd=root,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    assert process.stdout is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 1.0)[0]:
            line = process.stdout.readline()
            if line.startswith("listening on "):
                threading.Thread(target=process.stdout.read, daemon=True).start()  # keep the pipe drained
                return process, line.split(" ", 2)[2].strip()
    os.killpg(process.pid, signal.SIGKILL)
    raise RuntimeError(f"serve did not listen: {(root / 'serve.log').read_text()[-2000:]}")


class _Provider(threading.Thread):
    """POSTs ``records_per_post`` records every ``post_every_s``; sensor ``s`` is in post ``s // records_per_post``."""

    def __init__(self, base: str, token: str, load: Load):
        super().__init__(daemon=True)
        self.base, self.token, self.load = base, token, load
        self.posts: list[tuple[float, float, int]] = []  # (sent, answered, status), time.time()
        self._halt = threading.Event()

    def run(self) -> None:
        import httpx

        n, every = self.load.records_per_post, self.load.post_every_s
        with httpx.Client(base_url=self.base, timeout=30, headers={"Authorization": f"Bearer {self.token}"}) as c:
            start = time.monotonic()
            while not self._halt.is_set():
                k = len(self.posts)
                ts = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                body = "".join(json.dumps({"ts": ts, "sensor": s, "site": "s1", "value": 20.0 if s % 2 else 70.0})
                               + "\n" for s in range(k * n, (k + 1) * n))
                sent = time.time()
                try:
                    status = c.post("/v1/streams/Readings/records", content=body).status_code
                except Exception:
                    status = 0
                self.posts.append((sent, time.time(), status))
                self._halt.wait(max(0.0, start + (k + 1) * every - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        self.join(30)


def _pipeline(load: Load, condition: str) -> Local:
    """One life of the service under the clients: ``serve`` on a copy of the prepared store, every user's
    ``q1`` delivering, the provider feeding; then ``condition``: ``measured`` as it is, ``reniced`` with its
    JVM and Spark's Python workers at nice ``jvm_nice``, ``idle`` with the provider stopped and the network
    idle, ``quicker`` as measured with the network's trigger ``quicker_trigger``. Returns the client run's
    numbers (:func:`summary`), the service's state and the profile."""

    def call(work: Path, root: Path) -> dict[str, float]:
        import httpx

        from streamwarden.service.queries import own_id

        tokens, users = json.loads((work / "tokens.json").read_text()), _users(load)
        (root / "home").mkdir(parents=True)
        shutil.copy(work / "store.db", root / "home" / "store.db")
        numbers: dict[str, float] = {"load_start_1m": os.getloadavg()[0]}
        began = time.perf_counter()
        trigger = load.quicker_trigger if condition == "quicker" else load.trigger
        server, base = _launch(root, f"sqlite:///{root / 'home' / 'store.db'}", trigger)
        feed = _Provider(base, tokens["provider"], load)
        try:
            _log(f"serve listening on {base} after {time.perf_counter() - began:.0f} s")
            with httpx.Client(base_url=base, timeout=300) as http:
                for u in users:
                    answer = http.post("/v1/queries", json={"id": "q1", "query": QUERY},
                                       headers={"Authorization": f"Bearer {tokens[u]}"})
                    assert answer.status_code == 201, answer.text
                feed.start()
                deadline = time.monotonic() + 300
                for u in users:  # every pipeline delivers before the clients start
                    while not http.get("/v1/queries/q1/rows", headers={"Authorization": f"Bearer {tokens[u]}"}
                                       ).json()["rows"]:
                        assert time.monotonic() < deadline and server.poll() is None, "no rows in 300 s"
                        time.sleep(0.5)
                _log(f"{len(users)} queries delivering after {time.perf_counter() - began:.0f} s")
                time.sleep(load.warm_s)
                config = {"url": base, "seconds": load.seconds, "pollers": load.pollers, "streams": load.streams,
                          "think_s": load.think_s, "limit": load.limit,
                          "users": [{"name": u, "token": tokens[u], "folder": str(root / "out" / u / own_id(u, "q1"))}
                                    for u in users]}
                if condition == "reniced":  # HTTP first for the CPUs: is it Spark's share that delays it?
                    _log(f"{_renice(server.pid, load.jvm_nice)} threads of the service's JVM and workers at nice "
                         f"{load.jvm_nice}")
                    time.sleep(load.warm_s)
                elif condition == "idle":  # the HTTP service alone
                    feed.stop()
                    _log(f"no more records; the network is idle after {_settle(config):.0f} s")
                seconds = load.seconds if condition == "measured" else load.diagnostic_s
                numbers.update(_measure(root, dict(config, seconds=seconds), server.pid, feed))
                head = {"Authorization": f"Bearer {tokens['root']}"}
                flushing = time.perf_counter()
                http.get("/v1/audit?limit=1", headers=head).raise_for_status()  # waits for the trail's queue
                numbers["audit_flush_s"] = time.perf_counter() - flushing
                if load.profile_s > 0 and condition in ("measured", "idle"):
                    numbers.update(_profile(root, dict(config, seconds=load.profile_s), server.pid))
                pipelines = http.get("/v1/network", headers=head).json()["pipelines"]
                for line in http.get("/metrics", headers=head).text.splitlines():
                    if line.startswith("streamwarden_requests_total{") and 'action="query.rows"' in line:
                        key = "served:" + line.split('outcome="', 1)[1].split('"', 1)[0]
                        numbers[key] = numbers.get(key, 0) + float(line.rsplit(" ", 1)[1])
        finally:
            if feed.is_alive():
                feed.stop()
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)
        return {**numbers, "pipelines": len(pipelines), "batches": sum(p["batches"] for p in pipelines),
                "last_batch_ms": median([p["last_batch_ms"] for p in pipelines if p["last_batch_ms"] is not None])}

    return Local(call)


def _settle(config: dict[str, Any], quiet: float = 3.0, limit: float = 120.0) -> float:
    """Wait until no user's delivery log has grown for ``quiet`` seconds (at most ``limit``); returns the wait."""
    from streamwarden.runtime.deliveries import delivered

    began = changed = time.monotonic()
    last = None
    while time.monotonic() - changed < quiet and time.monotonic() - began < limit:
        now = [delivered(u["folder"]) for u in config["users"]]
        if now != last:
            last, changed = now, time.monotonic()
        time.sleep(0.25)
    return time.monotonic() - began


def _renice(pid: int, nice: int) -> int:
    """Every thread of the service's process group but those of its Python process (the JVM, Spark's Python
    workers) at ``nice``; threads and processes they start inherit it. Returns how many threads."""
    count = 0
    for entry in os.listdir("/proc"):
        try:
            if not entry.isdigit() or int(entry) == pid or int(
                    open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[2]) != pid:
                continue
            for tid in os.listdir(f"/proc/{entry}/task"):
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)
                count += 1
        except OSError:
            pass
    return count


# -- measuring: CPU from /proc around one run of the client process ------------------------------------
def _measure(root: Path, config: dict[str, Any], pid: int, feed: _Provider) -> dict[str, float]:
    """One run of the client process: its latencies, the service's CPU, the machine's other work."""
    load_before, cpu0, others0 = os.getloadavg()[0], _cpu(pid), _others()
    began = time.perf_counter()
    c = _client(root, config, "measured")
    wall = time.perf_counter() - began
    cpu1, others1 = _cpu(pid), _others()
    return {**summary(c, {k: cpu1[k] - cpu0[k] for k in cpu0}, wall, list(feed.posts), feed.load.records_per_post),
            "load_before_1m": load_before, "load_after_1m": os.getloadavg()[0], "cpus": len(os.sched_getaffinity(0)),
            "other_cores": max(0.0, (others1[0] - others0[0]) - (others1[1] - others0[1])) / wall}


def summary(c: dict[str, Any], cpu: dict[str, float], wall: float, posts: list[tuple[float, float, int]],
            per_post: int) -> dict[str, float]:
    """The named numbers of one client run ``c`` (what :func:`bench.service_clients.clients` returns),
    the service's CPU seconds over its ``wall`` seconds (see :func:`_cpu`) and the provider's
    ``posts`` of ``per_post`` records."""
    sent = [posts[n // per_post][0] if n // per_post < len(posts) else math.nan for n, _ in c["sse_sensors"]]
    e2e = [arrived - t for (_, arrived), t in zip(c["sse_sensors"], sent) if not math.isnan(t)]
    errors = {**{f"rows_error:{k}": v for k, v in c["rows_errors"].items()},
              **{f"sse_error:{k}": v for k, v in c["sse_errors"].items()}}
    return {
        "measured_s": c["seconds"], "load_s": wall, **_dist("rows", c["rows_ms"]), "rows_requests": c["requests"],
        "requests_per_s": c["requests"] / c["seconds"], "rows_errors": sum(c["rows_errors"].values()), **errors,
        "received_min": min(c["received"]), "received_median": median(c["received"]),
        "received_max": max(c["received"]), **_dist("direct", c["direct_ms"], 3),
        "direct_received": sum(c["direct_received"]), **_dist("health", c["health_ms"]),
        **_dist("lag", c["lag_ms"]), **_dist("sse", c["sse_delay_s"], 3), "sse_events": c["sse_events"],
        "sse_errors": sum(c["sse_errors"].values()), "sse_unresolved": c["sse_unresolved"],
        **_dist("logged", c["sse_logged_s"], 3), **_dist("logging", c["logging_s"], 3), **_dist("e2e", e2e, 3),
        **_dist("post", [(b - a) * 1000 for a, b, _ in posts], 1), "posts": len(posts),
        "post_errors": sum(1 for *_, status in posts if status != 201),
        **{f"{k}_s": v for k, v in cpu.items()}, "client_s": c["cpu_s"], "client_wait_s": c["wait_s"],
        "jvm_cores": (cpu["tree"] - cpu["python"]) / wall, "python_cores": cpu["python"] / wall,
        "main_cores": cpu["main"] / wall, "python_wait_per_s": cpu["python_wait"] / wall,
        "main_wait_per_s": cpu["main_wait"] / wall, "client_cores": c["cpu_s"] / wall,
        "pressure_share": 100 * cpu["pressure"] / wall}


def _dist(name: str, values: list[float], digits: int = 2) -> dict[str, float]:
    """``name_n`` and ``name_p50``, ``_p95``, ``_p99``, ``_max`` of ``values`` (NaN for none).

    >>> _dist("x", [1.0, 2.0, 3.0, 4.0])
    {'x_n': 4, 'x_p50': 2.5, 'x_p95': 3.85, 'x_p99': 3.97, 'x_max': 4.0}
    """
    found = {f"{name}_p{q}": round(percentile(values, q), digits) for q in (50, 95, 99)}
    return {f"{name}_n": len(values), **found, f"{name}_max": round(max(values), digits) if values else math.nan}


def _cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the service's process tree (JVM, Python workers), its Python process and that one's main
    thread; seconds its Python threads (and the main one) waited on a run queue; the machine's CPU pressure."""

    def stat(path: str) -> float:
        fields = open(path).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    return {"tree": process_tree_cpu_s(pid), "python": stat(f"/proc/{pid}/stat"),
            "main": stat(f"/proc/{pid}/task/{pid}/stat"), "python_wait": waited(pid),
            "main_wait": waited(pid, pid), "pressure": _pressure()}


def _others() -> tuple[float, float]:
    """Busy CPU seconds of the whole machine (``/proc/stat``, all but idle and iowait) and of this process's
    tree (the runner, the service, the client): their difference is the machine's other work."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
    return busy, process_tree_cpu_s(os.getpid())


def _pressure() -> float:
    """Seconds (since boot) in which some task of the machine waited for a CPU (/proc/pressure/cpu), NaN without PSI."""
    try:
        return int(open("/proc/pressure/cpu").readline().rsplit("total=", 1)[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return math.nan


def _client(root: Path, config: dict[str, Any], name: str) -> dict[str, Any]:
    path = root / f"client-{name}.json"
    (root / f"config-{name}.json").write_text(json.dumps(dict(config, result=str(path))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, "-m", "bench.service_load", "--client", str(root / f"config-{name}.json")],
                   check=True, timeout=config["seconds"] + 300, env=env)
    return json.loads(path.read_text())


def _profile(root: Path, config: dict[str, Any], pid: int, rate: int = 100) -> dict[str, float]:
    """py-spy on the service's GIL holder during one more client run: samples per category of :data:`PROFILE`,
    on the event loop's thread (``gil_loop:``) and the others (``gil_threads:``), and the largest categories'
    innermost frames (``gil_leaf:CATEGORY | FRAME``). Nothing without py-spy."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        _log("no py-spy: no profile")
        return {}
    out, seconds = root / "profile.txt", config["seconds"]
    spying = subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", str(rate), "--gil",
                               "--nonblocking", "-f", "raw", "-o", str(out)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    _client(root, config, "profiled")
    spying.wait(120)
    counts: Counter[str] = Counter()
    leaves: dict[str, Counter[str]] = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():  # a line py-spy cut short when it stopped
            continue
        category = next((c for c, marks in PROFILE if any(re.search(m, stack) for m in marks)), "other")
        counts[("gil_loop:" if "_run_module_as_main" in stack else "gil_threads:") + category] += int(n)
        leaves.setdefault(category, Counter())[_frame(stack, category)] += int(n)
    total = sum(counts.values())
    _log(f"py-spy: {total} samples holding the GIL")
    by_category = Counter({c: sum(v.values()) for c, v in leaves.items()})
    top = {f"gil_leaf:{c} | {leaf}": n for c, _ in by_category.most_common(4) for leaf, n in leaves[c].most_common(4)}
    return {"gil_samples": total, "gil_seconds": seconds, "gil_rate": rate, **counts, **top} if total else {}


def _frame(stack: str, category: str) -> str:
    """The innermost frame of ``stack`` in the code of ``category``, and the innermost frame of all."""
    frames = [f.split(" (", 1)[0] for f in stack.split(";")]
    marks = dict(PROFILE).get(category, ())
    inner = next((i for i in range(len(frames) - 1, -1, -1) if any(re.search(m, stack.split(";")[i]) for m in marks)),
                 len(frames) - 1)
    return frames[inner] + ("" if inner == len(frames) - 1 else " → " + frames[-1])


# -- the report: targets, tables, plots, where the time goes ------------------------------------------
def _f(value: float, digits: int = 1) -> str:
    return "—" if math.isnan(value) else f"{value:,.{digits}f}"


def _kinds(m: Measured, prefix: str) -> str:
    """The error kinds the measured run counted under ``prefix`` (``rows_error:``), most first."""
    runs = m.runs_by_pipeline.get("measured", [{}])
    kinds = {k[len(prefix):]: m.median("measured", k) for k in runs[0] if k.startswith(prefix)}
    return ", ".join(f"{k} {v:,.0f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) or "none"


def _judged(m: Measured, met: Callable[[Callable[[str], float]], bool],
            text: Callable[[Callable[[str], float]], str]) -> Verdict:
    """Issue 13's targets are judged on the measured run of a full experiment (at least 60 s of load);
    ``met`` and ``text`` read its numbers through the function they are given."""
    def v(metric: str) -> float:
        return m.median("measured", metric)
    if not m.runs("measured"):
        return Verdict(None, "not measured")
    if v("measured_s") < 60:
        return Verdict(None, text(v) + " (smoke run: not judged)")
    return Verdict(met(v), text(v))


def _targets(load: Load) -> tuple[Target, ...]:
    def no_errors(m: Measured) -> Verdict:
        return _judged(m, lambda v: v("rows_errors") + v("sse_errors") == 0, lambda v: (
            f"{v('rows_errors'):,.0f} in {v('rows_requests'):,.0f} `GET rows` ({_kinds(m, 'rows_error:')}); "
            f"{v('sse_errors'):,.0f} on {load.streams} SSE streams ({_kinds(m, 'sse_error:')}); the provider's "
            f"POSTs: {v('post_errors'):,.0f} of {v('posts'):,.0f} failed"))

    def p99(m: Measured) -> Verdict:
        return _judged(m, lambda v: v("rows_p99") <= TARGET_P99_MS, lambda v: (
            f"p99 {_f(v('rows_p99'))} ms (p50 {_f(v('rows_p50'))}, p95 {_f(v('rows_p95'))}, max "
            f"{_f(v('rows_max'))}), {v('requests_per_s'):,.0f} requests/s"))

    def post_to_event(m: Measured) -> Verdict:
        return _judged(m, lambda v: v("e2e_p99") <= TARGET_SSE_S, lambda v: (
            f"p99 {_f(v('e2e_p99'), 2)} s over {v('sse_events'):,.0f} rows (p50 {_f(v('e2e_p50'), 2)}, max "
            f"{_f(v('e2e_max'), 2)}), the network's trigger {load.trigger}"))

    def sse(m: Measured) -> Verdict:
        return _judged(m, lambda v: v("sse_max") <= TARGET_SSE_S, lambda v: (
            f"max {_f(v('sse_max'), 2)} s over {v('sse_events'):,.0f} rows (p50 {_f(v('sse_p50'), 2)}, p99 "
            f"{_f(v('sse_p99'), 2)}); from the provider's POST: p50 {_f(v('e2e_p50'), 2)} s, p99 "
            f"{_f(v('e2e_p99'), 2)}, max {_f(v('e2e_max'), 2)}"))

    return (Target(f"issue 13: {load.pollers + load.streams} concurrent clients reading rows and streams for "
                   f"{load.seconds:g} s: no errors", no_errors),
            Target(f"issues 13 and 26: p99 of `GET rows` ≤ {TARGET_P99_MS:g} ms", p99),
            Target(f"issue 13: a row reaches an SSE client within {TARGET_SSE_S:g} s of reaching its output", sse),
            Target(f"issue 26: p99 from a provider's POST to the row at an SSE client ≤ {TARGET_SSE_S:g} s",
                   post_to_event))


def _percentiles(title: str, name: str, stats: tuple[str, ...] = ("p50", "p95", "p99", "max")) -> tuple[Column, ...]:
    """Columns ``TITLE p50`` ... of the distribution ``name`` (see :func:`_dist`)."""
    return tuple(Column(f"{title} {s}".strip(), f"{name}_{s}") for s in stats)


TABLES = (
    Table("`GET rows` over HTTP (ms)", ("variant",), (
        Column("requests", "rows_requests"), Column("requests/s", "requests_per_s"), Column("errors", "rows_errors"),
        *_percentiles("", "rows"), *_percentiles("rows per poller", "received", ("min", "median", "max"))),
        text=f"Client-side, each poller's `GET rows` after its cursor (issue 13: p99 ≤ {TARGET_P99_MS:g} ms)."),
    Table("Beside it: the same reads without HTTP, and the floor of a request (ms)", ("variant",), (
        *_percentiles("`read_rows`", "direct"), Column("rows read", "direct_received"),
        *_percentiles("`/health`", "health")),
        text="`read_rows` on the same folders in the client process (no HTTP); `GET /health`: no token, no audit "
             "record, no file."),
    Table("SSE: a row's delay (s)", ("variant",), (
        Column("rows", "sse_events"), Column("errors", "sse_errors"), Column("not in the log", "sse_unresolved"),
        *_percentiles("folder → event", "sse"),
        *_percentiles("POST → event", "e2e", ("p50", "p99", "max"))),
        text=f"From the mtime of the row's batch folder to its arrival (issue 13: ≤ {TARGET_SSE_S:g} s), and from "
             "the provider's POST (sent)."),
    Table("SSE: the delay split at the batch's line in `_delivered.jsonl` (s)", ("variant",), (
        Column("batches", "logging_n"), *_percentiles("folder → line", "logging"),
        *_percentiles("line → event", "logged"))),
    Table("CPU over the client run (cores; waiting: seconds per second)", ("variant",), (
        Column("service's JVM and workers", "jvm_cores"), Column("service's Python", "python_cores"),
        Column("… its event loop", "main_cores"), Column("its threads waiting", "python_wait_per_s"),
        Column("… its event loop waiting", "main_wait_per_s"), Column("client", "client_cores"),
        Column("other work", "other_cores"), Column("machine waiting for a CPU (%)", "pressure_share"))),
    Table("The client's event loop and the provider (ms)", ("variant",), (
        *_percentiles("loop lag", "lag", ("p50", "p99", "max")), Column("POSTs", "posts"),
        Column("failed", "post_errors"), *_percentiles("POST", "post")),
        text="The client's lag behind a 10 ms sleep, which its latencies include; the provider's POSTs over the "
             "service's whole life."),
)
PLOTS = (
    Plot("get_rows", f"GET rows p99 (ms) per run; issue 13: ≤ {TARGET_P99_MS:g} ms", "variant",
         Column("GET rows p99 (ms)", "rows_p99"), series=(), kind="bars"),
    Plot("sse", f"SSE: batch folder → event, max (s) per run; issue 13: ≤ {TARGET_SSE_S:g} s", "variant",
         Column("SSE delay max (s)", "sse_max"), series=(), kind="bars"),
)


def _explain(load: Load) -> Callable[[Measured, Facts], list[str]]:
    def explain(m: Measured, facts: Facts) -> list[str]:
        notes: list[str] = []
        if m.runs("measured"):
            notes += _where_the_time_goes(m, load)
        for pipeline, when in (("measured", "under the same load after the measured run"),
                               ("idle", "with the same clients and no records")):
            if m.median(pipeline, "gil_samples") > 0:
                notes.append(_profile_note(m, pipeline, when))
        if m.runs("idle"):
            notes.append(_diagnostics_note(m))
        if m.runs("measured") and m.runs("quicker"):
            notes.append(_post_to_event_note(m, load))
        return notes

    return explain


def _post_to_event_note(m: Measured, load: Load) -> str:
    """Where a row's time from the provider's POST to an SSE client goes, and what the trigger changes."""
    def v(pipeline: str, metric: str) -> float:
        return m.median(pipeline, metric)
    share = 100 * load.records_per_post * load.streams / max(v("measured", "sse_events"), 1)
    return (f"From the provider's POST to an SSE client: p50 {_f(v('measured', 'e2e_p50'), 2)} s, of which the "
            f"batch folder → event part is {_f(v('measured', 'sse_p50'), 2)} s; the rest is the wait for the "
            f"network's next trigger (at most {load.trigger}) and the micro-batch itself (the last ones "
            f"{v('measured', 'last_batch_ms'):,.0f} ms, median). Each POST's {load.records_per_post} records reach "
            f"all {load.streams} streams, so {share:.1f} % of the rows ride on any one micro-batch: a single slow "
            f"one decides a run's p99 (here p99 {_f(v('measured', 'e2e_p99'), 2)} s, max "
            f"{_f(v('measured', 'e2e_max'), 2)}). With the trigger at {load.quicker_trigger} (a diagnostic, "
            f"{load.diagnostic_s:g} s): p50 {_f(v('quicker', 'e2e_p50'), 2)} s, p99 {_f(v('quicker', 'e2e_p99'), 2)}, "
            f"max {_f(v('quicker', 'e2e_max'), 2)}, with `GET rows` p99 {_f(v('quicker', 'rows_p99'))} ms and the "
            f"JVM at {v('quicker', 'jvm_cores'):.2f} cores (measured run: {v('measured', 'jvm_cores'):.2f}).")


def _where_the_time_goes(m: Measured, load: Load) -> list[str]:
    def v(metric: str) -> float:
        return m.median("measured", metric)
    wall = v("load_s")
    served = {k.split(":", 1)[1]: m.median("measured", k) for k in m.runs_by_pipeline["measured"][0]
              if k.startswith("served:")}
    return [
        f"HTTP against the files: the same reads by `read_rows` in the client process took p50 "
        f"{_f(v('direct_p50'), 2)} ms, p99 {_f(v('direct_p99'), 2)} ms, against {_f(v('rows_p50'))} and "
        f"{_f(v('rows_p99'))} ms over HTTP: reading the files is {100 * ratio(v('direct_p50'), v('rows_p50')):.0f} % "
        f"of the median and {100 * ratio(v('direct_p99'), v('rows_p99')):.0f} % of the p99. `GET /health` (no "
        f"token, no audit record, no file) took p50 {_f(v('health_p50'))} ms, p99 {_f(v('health_p99'))} ms: the "
        "floor of one request through the client, the loopback and uvicorn's event loop under this load; the rest "
        "of `GET rows` is its route, on the event loop (the token and the query answered from memory after one read "
        "of the store's generation, the read, the JSON answer, the audit record queued).",
        f"CPU over the {wall:.0f} s of load: the service's process tree {v('tree_s'):.1f} s "
        f"({v('tree_s') / wall:.2f} cores), of which its Python process {v('python_s'):.1f} s "
        f"({v('python_cores'):.2f} cores: the event loop's thread {v('main_s'):.1f} s; the other threads "
        f"{v('python_s') - v('main_s'):.1f} s, i.e. the audit writer, Spark's callbacks and the thread pool running "
        f"the other routes) and the JVM with its Python workers {v('tree_s') - v('python_s'):.1f} s. The service "
        "counted these `GET rows` over its whole life (warm-up and profile included) by outcome: "
        + (", ".join(f"{k} {n:,.0f}" for k, n in sorted(served.items())) or "none") + ". The client process used "
        f"{v('client_s'):.1f} s ({v('client_cores'):.2f} cores, {v('client_wait_s'):.1f} s waiting for a CPU); its "
        f"event loop lagged p50 {_f(v('lag_p50'), 2)} ms, p99 {_f(v('lag_p99'))} ms, max {_f(v('lag_max'))} ms "
        "behind a 10 ms sleep, which the client-side latencies include.",
        f"Waiting for a CPU: the service's Python threads spent {v('python_wait_s'):.1f} s runnable but not "
        f"running (`schedstat`), {ratio(v('python_wait_s'), v('python_s')):.1f}× their {v('python_s'):.1f} s of "
        f"CPU; its event loop's thread alone {v('main_wait_s'):.1f} s, i.e. {100 * v('main_wait_per_s'):.0f} % of "
        f"the run. Some task of the machine waited for a CPU {v('pressure_share'):.0f} % of the time "
        "(`/proc/pressure/cpu`). A thread that waits for a CPU while it holds the GIL stops every other thread "
        "of the service's Python process as well.",
        f"An SSE row's delay, split at its batch's line in `_delivered.jsonl` (seen by a watcher in the client "
        f"polling the log's size every 20 ms): batch folder → line p50 {_f(v('logging_p50'), 2)} s, p99 "
        f"{_f(v('logging_p99'), 2)} s (the network's terminal switch: the user's part moved into place, the log "
        f"appended, in Spark's callback in the service's Python process; a trace of those appends inside the "
        f"service on 2026-11-28 put each within 16 ms of its folder, so this split's tail is the watcher's own); "
        f"line → event p50 "
        f"{_f(v('logged_p50'), 2)} s, p99 {_f(v('logged_p99'), 2)} s, max {_f(v('logged_max'), 2)} s (the "
        "service: each stream looks for new rows every 0.1 s, reads them and sends one event per row).",
        f"The audit trail: once the clients stopped, `GET /v1/audit` (which waits for the writer's queue) answered "
        f"after {v('audit_flush_s'):.2f} s. Spark: {v('pipelines'):.0f} pipelines (one per user's query, trigger "
        f"{load.trigger}), {v('batches'):,.0f} micro-batches in the service's life, the last ones "
        f"{_f(v('last_batch_ms'), 0)} ms (median). 1-minute load average {v('load_start_1m'):.1f} before the "
        f"service started, {v('load_before_1m'):.1f} when the clients started and {v('load_after_1m'):.1f} when "
        f"they stopped; other work (not the service, not the clients) kept {v('other_cores'):.2f} of the "
        f"{v('cpus'):.0f} cores busy meanwhile."]


def _profile_note(m: Measured, pipeline: str, when: str) -> str:
    numbers = {k: m.median(pipeline, k) for k in m.runs_by_pipeline[pipeline][0] if k.startswith("gil_")}
    total, seconds, rate = numbers["gil_samples"], numbers["gil_seconds"], numbers["gil_rate"]

    def shares(prefix: str) -> str:
        found = sorted(((k[len(prefix):], n) for k, n in numbers.items() if k.startswith(prefix)), key=lambda x: -x[1])
        return ", ".join(f"{name} {100 * n / total:.0f} %" for name, n in found) or "—"
    loop, threads = (100 * sum(n for k, n in numbers.items() if k.startswith(p)) / total
                     for p in ("gil_loop:", "gil_threads:"))
    leaves: dict[str, list[str]] = {}
    for key, n in numbers.items():
        if key.startswith("gil_leaf:"):
            category, leaf = key[len("gil_leaf:"):].split(" | ", 1)
            leaves.setdefault(category, []).append(f"`{leaf}` {100 * n / total:.0f} %")
    return (f"Who holds the service's GIL {when} (py-spy `--gil`, {rate:.0f} Hz for {seconds:g} s; {total:,.0f} "
            f"samples: the GIL held {100 * total / (seconds * rate):.0f} % of the time), shares of the samples: on "
            f"the event loop's thread {loop:.0f} % ({shares('gil_loop:')}); on the other threads {threads:.0f} % "
            f"({shares('gil_threads:')}). The largest, by frame of that code → innermost frame: "
            + "; ".join(f"{name}: " + ", ".join(found) for name, found in leaves.items()) + ".")


def _diagnostics_note(m: Measured) -> str:
    python_s, requests = m.median("idle", "python_s"), m.median("idle", "rows_requests")
    return (f"With no records (the diagnostic's network idle) the service's Python process spent "
            f"{1000 * python_s / max(requests, 1):.1f} ms of CPU per `GET rows` "
            f"({m.median('idle', 'python_cores'):.2f} cores for {m.median('idle', 'requests_per_s'):,.0f} requests/s; "
            "the idle SSE streams' polling and the health probe included): the HTTP service's own cost.")


def _notes(load: Load) -> tuple[str, ...]:
    return (
        f"`streamwarden serve` as its own process (its own Spark, trigger {load.trigger}) on a fresh copy of the "
        f"store; {load.users} users (Doctors every row, Nurses `value < 50`), each with `q1` = `{QUERY}`; a provider "
        f"POSTs {load.records_per_post} records every {load.post_every_s:g} s throughout. After every query "
        f"delivered and {load.warm_s:g} s more, one client process (asyncio + httpx) ran {load.pollers} pollers "
        f"(`GET rows` after their cursor, limit {load.limit}; a full page: again at once, else {load.think_s:g} s "
        f"of pause) and {load.streams} SSE streams, spread over the users, for {load.seconds:g} s, all starting at "
        "the rows already delivered. Side by side in that process: one direct reader per user (`read_rows` on "
        "the same folders, the same pauses), a `GET /health` probe every 0.2 s and an event-loop lag probe.",
        "Latencies are client-side (`perf_counter`); an SSE row's delay is its arrival minus the mtime of its "
        "batch folder (found by the row's cursor through `_delivered.jsonl`), and from the provider's POST (sent) "
        "to arrival. CPU from `/proc` around the client run (the service's tree, its Python process and event "
        "loop thread, `schedstat` waits, `/proc/pressure/cpu`) and `getrusage` (the client).",
        "Each pipeline is one life of the service, run once: the runner's wall and CPU time cover all of it "
        "(start-up, queries delivering, warm-up, the client run, the profile; CPU: the runner's own process, "
        "i.e. the provider thread), so neither is a finding here: the tables' numbers are the client run's.",
        f"Diagnostics, each on a fresh service, the same clients for {load.diagnostic_s:g} s, not judged: *JVM at "
        f"nice {load.jvm_nice}*: the service's JVM and Spark's Python workers behind every other process; *no "
        f"records*: the provider stopped and the network idle; *trigger {load.quicker_trigger}*: the network's "
        f"trigger shorter than the measured run's {load.trigger}. The targets are judged on a full run (≥ 60 s of "
        "load).",
    )


def experiment(events: int | None = None, quick: bool = False, load: Load | None = None) -> Experiment:
    """Experiment 8 under ``load`` (default :class:`Load`; ``quick``: :data:`QUICK`, 10 s, no diagnostics).
    ``events`` is ignored: the load is set by the clients and the provider's pace."""
    load = load or (QUICK if quick else Load())
    pipelines = [Pipeline("measured", _pipeline(load, "measured"), "load", "measured run")]
    if load.diagnostic_s > 0:
        pipelines += [Pipeline("reniced", _pipeline(load, "reniced"), "diagnostic", f"JVM at nice {load.jvm_nice}"),
                      Pipeline("idle", _pipeline(load, "idle"), "diagnostic", "no records"),
                      Pipeline("quicker", _pipeline(load, "quicker"), "diagnostic", f"trigger {load.quicker_trigger}")]
    return Experiment(
        "service_load", f"The service under {load.pollers + load.streams} concurrent clients (issues 13 and 26)",
        _workload(load), tuple(pipelines), _targets(load), notes=_notes(load), tables=TABLES, plots=PLOTS,
        explain=_explain(load), repeats=1, warmup=False)


if __name__ == "__main__" and sys.argv[1:2] == ["--client"]:
    from bench.service_clients import main

    main(Path(sys.argv[2]))
