"""Experiment 8: ``streamwarden serve`` under 50 concurrent clients (issue 13, Performance).

The service runs as a whole process (``python -m streamwarden.cli.main serve --port 0``,
its own Spark) over a temporary store: stream ``Readings``, ``users`` readers (Doctors see
every row, Nurses those with ``value < 50``), each registering ``q1``; a provider thread
POSTs ``records_per_post`` records every ``post_every_s`` for the whole run. A separate
client process (``python -m bench.service_load --client CONFIG``: asyncio + httpx) then runs
``pollers`` + ``streams`` clients for ``seconds``: each poller loops on ``GET rows`` after its
cursor (a full page: again at once, else ``think_s`` of pause), each stream holds an SSE
connection. Side by side in that process: one direct reader per user doing the same reads
with :func:`~streamwarden.runtime.deliveries.read_rows` on the same folders (no HTTP), a
``GET /health`` probe and an event-loop lag probe. An SSE row's delay is its arrival minus
the mtime of its batch folder, found by its cursor through ``_delivered.jsonl``. With
``profile_s`` and py-spy installed, a second client run follows with py-spy sampling the
service's GIL holder (``--gil --nonblocking``); that run is not measured. With ``diagnostic_s``,
two more client runs: with the service's JVM and Python workers at nice ``jvm_nice`` (HTTP
first for the CPUs), then with the provider stopped and the network idle (the HTTP service
alone), the latter profiled as well. The report is :mod:`bench.report_service_load`.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import json
import math
import os
import random
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from bench.stats import median, percentile

TARGET_P99_MS = 50.0
TARGET_SSE_S = 1.0
QUERY = "SELECT sensor, value FROM Readings"
QS = [*range(0, 100, 2), 99, 99.5, 99.9, 100]  # percentiles kept for the CDF plot
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
class Settings:
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
    profile_s: float = 20.0  # after the measured run: py-spy on the service under the same load (0: none)
    diagnostic_s: float = 30.0  # then the same clients with the JVM at nice jvm_nice, and with no records (0: none)
    jvm_nice: int = 19

    @classmethod
    def quick(cls) -> "Settings":
        return cls(seconds=15.0, users=3, warm_s=2.0, profile_s=0.0, diagnostic_s=0.0)


def run(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    from bench.workdir import scratch_dir
    from streamwarden.catalog.identity import create_token
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.catalog.store import CatalogStore
    from streamwarden.service.queries import own_id

    import httpx
    load_at_start = [round(v, 2) for v in os.getloadavg()]
    users = [f"reader{i:02d}" for i in range(settings.users)]
    with scratch_dir("streamwarden-service-bench-") as root:
        (root / "home").mkdir()
        url = f"sqlite:///{root / 'home' / 'store.db'}"
        roles = "".join(f"  {u}: {{roles: [{'Doctor' if i % 2 == 0 else 'Nurse'}]}}\n" for i, u in enumerate(users))
        CatalogStore(url).save(load_catalog_text(CATALOG % roles, "catalog.yaml"))
        hours = timedelta(hours=3)
        tokens = {u: create_token(url, u, expires=hours) for u in users}
        admin, provider = create_token(url, "root", admin=True, expires=hours), create_token(
            url, provider_stream="Readings", expires=hours)
        began = time.perf_counter()
        server, base = _launch(root, url, settings)
        feed = _Provider(base, provider, settings)
        try:
            log(f"  serve listening on {base} after {time.perf_counter() - began:.0f} s")
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
                log(f"  {len(users)} queries delivering after {time.perf_counter() - began:.0f} s; clients start")
                time.sleep(settings.warm_s)
                config = {"url": base, "seconds": settings.seconds, "pollers": settings.pollers,
                          "streams": settings.streams, "think_s": settings.think_s, "limit": settings.limit,
                          "users": [{"name": u, "token": tokens[u], "folder": str(root / "out" / u / own_id(u, "q1"))}
                                    for u in users]}
                measured = _measure(root, config, server.pid, "measured")
                flush0 = time.perf_counter()
                head = {"Authorization": f"Bearer {admin}"}
                http.get("/v1/audit?limit=1", headers=head).raise_for_status()  # waits for the trail's queue
                audit_flush_s = time.perf_counter() - flush0
                profile = idle_profile = None
                if settings.profile_s > 0:
                    profile = _profile(root, config, server.pid, settings.profile_s, "loaded", log)
                pipelines = http.get("/v1/network", headers=head).json()["pipelines"]
                metrics = http.get("/metrics", headers=head).text
                diagnostics = {}
                if settings.diagnostic_s > 0:  # the same clients: the service's JVM behind everything; no records
                    short = dict(config, seconds=settings.diagnostic_s)
                    threads = _renice(server.pid, settings.jvm_nice)
                    log(f"  {threads} threads of the service's JVM and Python workers at nice {settings.jvm_nice}")
                    time.sleep(settings.warm_s)
                    diagnostics["reniced"] = _measure(root, short, server.pid, "reniced")
                    _renice(server.pid, 0)
                    feed.stop()
                    log(f"  no more records; the network is idle after {_settle(config):.0f} s")
                    diagnostics["idle"] = _measure(root, short, server.pid, "idle")
                    if settings.profile_s > 0:
                        idle_profile = _profile(root, config, server.pid, settings.profile_s, "idle", log)
                feed.stop()
        finally:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)
            if feed.is_alive():
                feed.stop()
    result = _summary(settings, *measured, feed, pipelines, metrics)
    result.update(audit_flush_s=round(audit_flush_s, 3), profile=profile, idle_profile=idle_profile,
                  load_at_start=load_at_start)
    for name, phase in diagnostics.items():  # no plot: no CDFs
        result[name] = {k: {a: b for a, b in v.items() if a != "cdf"} if isinstance(v, dict) else v
                        for k, v in _summary(settings, *phase, feed, [], "").items() if k != "settings"}
    return result


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


def _measure(root: Path, config: dict[str, Any], pid: int, name: str) -> tuple[Any, ...]:
    """One run of the client process: its results, the service's CPU before and after, the wall time, the load."""
    from bench.levels import OtherWork
    others = OtherWork(os.getpid())  # this process's tree holds the service and the client
    cpu0, wall0 = _cpu(pid), time.perf_counter()
    client = _client(root, config, name)
    return client, cpu0, _cpu(pid), time.perf_counter() - wall0, others.load_average()


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


def _launch(root: Path, url: str, settings: Settings) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "streamwarden.cli.main", "serve", "--store", url, "--input",
               f"Readings={root / 'in' / 'Readings'}", "--output-dir", str(root / "out"), "--checkpoint",
               str(root / "checkpoint"), "--port", "0", "--trigger", settings.trigger]
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

    def __init__(self, base: str, token: str, settings: Settings):
        super().__init__(daemon=True)
        self.base, self.token, self.settings = base, token, settings
        self.posts: list[tuple[float, float, int]] = []  # (sent, answered, status), time.time()
        self._halt = threading.Event()

    def run(self) -> None:
        import httpx
        n, every = self.settings.records_per_post, self.settings.post_every_s
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


def _cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the service's process tree (JVM, Python workers), its Python process and that one's main
    thread; seconds its Python threads (and the main one) waited on a run queue; the machine's CPU pressure."""
    from bench.spark_probe import process_tree_cpu_s

    def stat(path: str) -> float:
        fields = open(path).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return {"tree": process_tree_cpu_s(pid), "python": stat(f"/proc/{pid}/stat"),
            "main": stat(f"/proc/{pid}/task/{pid}/stat"), "python_wait": _waited(pid),
            "main_wait": _waited(pid, pid), "pressure": _pressure()}


def _waited(pid: int, tid: int | None = None) -> float:
    """Seconds the threads of ``pid`` (or thread ``tid`` only) spent runnable but waiting for a CPU (schedstat)."""
    total = 0
    for task in [str(tid)] if tid else os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[1])
        except (OSError, IndexError):
            pass
    return total / 1e9


def _pressure() -> float:
    """Seconds (since boot) in which some task of the machine waited for a CPU (/proc/pressure/cpu), NaN without PSI."""
    try:
        return int(open("/proc/pressure/cpu").readline().rsplit("total=", 1)[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return math.nan


def _client(root: Path, config: dict[str, Any], name: str) -> dict[str, Any]:
    path = root / f"client-{name}.json"
    (root / f"config-{name}.json").write_text(json.dumps(dict(config, result=str(path))))
    subprocess.run([sys.executable, "-m", "bench.service_load", "--client", str(root / f"config-{name}.json")],
                   check=True, timeout=config["seconds"] + 300)
    return json.loads(path.read_text())


def _profile(root: Path, config: dict[str, Any], pid: int, seconds: float, name: str, log: Callable[[str], None]
             ) -> dict[str, Any] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        log("  no py-spy: no profile")
        return None
    out, rate = root / f"profile-{name}.txt", 100
    spying = subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", str(rate),
                               "--gil", "--nonblocking", "-f", "raw", "-o", str(out)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    _client(root, dict(config, seconds=seconds), f"profiled-{name}")
    spying.wait(120)
    counts: dict[str, Counter[str]] = {"loop": Counter(), "threads": Counter()}
    leaves: dict[str, Counter[str]] = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():  # a line py-spy cut short when it stopped
            continue
        category = next((c for c, marks in PROFILE if any(re.search(m, stack) for m in marks)), "other")
        counts["loop" if "_run_module_as_main" in stack else "threads"][category] += int(n)  # the main thread
        leaves.setdefault(category, Counter())[_frame(stack, category)] += int(n)
    total = sum(sum(c.values()) for c in counts.values())
    log(f"  py-spy ({name}): {total} samples holding the GIL")
    top = (counts["loop"] + counts["threads"]).most_common(4)
    return {"seconds": seconds, "rate": rate, "samples": total,
            **{k: dict(c.most_common()) for k, c in counts.items()},
            "leaves": {c: dict(leaves[c].most_common(4)) for c, _ in top}} if total else None


def _frame(stack: str, category: str) -> str:
    """The innermost frame of ``stack`` in the code of ``category``, and the innermost frame of all."""
    frames = [f.split(" (", 1)[0] for f in stack.split(";")]
    marks = dict(PROFILE).get(category, ())
    inner = next((i for i in range(len(frames) - 1, -1, -1) if any(re.search(m, stack.split(";")[i]) for m in marks)),
                 len(frames) - 1)
    return frames[inner] + ("" if inner == len(frames) - 1 else " → " + frames[-1])


def _dist(values: list[float], digits: int = 2, cdf: bool = False) -> dict[str, Any]:
    """Percentiles of ``values`` (NaN for none), with those of :data:`QS` for a plot when ``cdf``."""
    found = {"n": len(values), **{f"p{q}": round(percentile(values, q), digits) for q in (50, 95, 99)},
             "max": round(max(values), digits) if values else math.nan}
    return dict(found, cdf=[round(percentile(values, q), digits) for q in QS] if values else []) if cdf else found


def _summary(settings: Settings, c: dict[str, Any], cpu0: dict[str, float], cpu1: dict[str, float], wall: float,
             load: dict[str, Any], feed: _Provider, pipelines: list[dict[str, Any]], metrics: str) -> dict[str, Any]:
    per = settings.records_per_post
    sent = [feed.posts[s // per][0] if s // per < len(feed.posts) else math.nan for s, _ in c["sse_sensors"]]
    e2e = [arrived - t for (_, arrived), t in zip(c["sse_sensors"], sent) if not math.isnan(t)]
    cpu = {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0}
    served = Counter()
    for line in metrics.splitlines():
        if line.startswith("streamwarden_requests_total{") and 'action="query.' in line:
            served[line[line.index("{"):line.rindex("}") + 1]] += int(float(line.rsplit(" ", 1)[1]))
    return {"settings": asdict(settings), "wall_s": round(wall, 1), "load_average": load, "measured_s": c["seconds"],
            "rows": dict(_dist(c["rows_ms"], cdf=True), requests=c["requests"],
                         per_s=round(c["requests"] / c["seconds"], 1), errors=sum(c["rows_errors"].values()),
                         error_kinds=c["rows_errors"],
                         received=[min(c["received"]), median(c["received"]), max(c["received"])]),
            "direct": dict(_dist(c["direct_ms"], 3, cdf=True), received=sum(c["direct_received"])),
            "health": _dist(c["health_ms"], cdf=True), "loop_lag": _dist(c["lag_ms"]),
            "sse": dict(_dist(c["sse_delay_s"], 3, cdf=True), events=c["sse_events"],
                        errors=sum(c["sse_errors"].values()), error_kinds=c["sse_errors"],
                        unresolved=c["sse_unresolved"]),
            "sse_logged": _dist(c["sse_logged_s"], 3, cdf=True), "logging": _dist(c["logging_s"], 3),
            "e2e": _dist(e2e, 3, cdf=True),
            "provider": dict(_dist([(b - a) * 1000 for a, b, _ in feed.posts], 1), posts=len(feed.posts),
                             errors=sum(1 for *_, s in feed.posts if s != 201)),
            "cpu_s": dict(cpu, client=round(c["cpu_s"], 2), client_wait=round(c["wait_s"], 2)),
            "server_requests": dict(served),
            "pipelines": len(pipelines), "batches": sum(p["batches"] for p in pipelines),
            "last_batch_ms": median([p["last_batch_ms"] for p in pipelines if p["last_batch_ms"] is not None])}


# -- the client process ------------------------------------------------------------------------------
async def _clients(cfg: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from streamwarden.runtime.deliveries import deliveries, read_rows
    users, seconds, think, limit = cfg["users"], cfg["seconds"], cfg["think_s"], cfg["limit"]
    start = {u["name"]: sum(d.rows for d in deliveries(u["folder"])) for u in users}  # every client starts live
    r: dict[str, Any] = {"rows_ms": [], "direct_ms": [], "health_ms": [], "lag_ms": [], "requests": 0,
                         "received": [0] * cfg["pollers"], "direct_received": [0] * len(users),
                         "rows_errors": Counter(), "sse_errors": Counter(), "events": {}}
    cpu0, wait0, end = _own_cpu(), _waited(os.getpid()), time.perf_counter() + seconds
    watched = sorted({j % len(users) for j in range(cfg["streams"])})
    logged_at: dict[int, list[float]] = {k: [math.nan] * len(deliveries(users[k]["folder"])) for k in watched}

    def client(u: dict[str, Any], **kw: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=cfg["url"], headers={"Authorization": f"Bearer {u['token']}"}, **kw)

    async def poller(i: int, u: dict[str, Any]) -> None:
        cursor = start[u["name"]]
        async with client(u, timeout=10) as http:
            await asyncio.sleep(random.uniform(0, think))
            while time.perf_counter() < end:
                t0, full = time.perf_counter(), False
                try:
                    answer = await http.get("/v1/queries/q1/rows", params={"after": cursor, "limit": limit})
                    ms = 1000 * (time.perf_counter() - t0)
                    body = answer.json() if answer.status_code == 200 else None
                    r["requests"] += 1
                    if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
                        r["rows_errors"][f"status {answer.status_code}"] += 1
                    elif int(body["next"]) != cursor + len(body["rows"]):
                        r["rows_errors"]["cursor mismatch"] += 1
                    else:
                        r["rows_ms"].append(ms)
                        cursor, full = int(body["next"]), len(body["rows"]) >= limit
                        r["received"][i] += len(body["rows"])
                except Exception as exc:
                    r["rows_errors"][type(exc).__name__] += 1
                if not full:
                    await asyncio.sleep(think)

    async def direct(j: int, u: dict[str, Any]) -> None:
        cursor = start[u["name"]]
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            page = read_rows(u["folder"], after=cursor, limit=limit)
            r["direct_ms"].append(1000 * (time.perf_counter() - t0))
            cursor, r["direct_received"][j] = page.next, r["direct_received"][j] + len(page.rows)
            await asyncio.sleep(0 if len(page.rows) >= limit else think)

    async def stream(j: int, u: dict[str, Any]) -> None:
        events: list[tuple[int, int, float]] = r["events"].setdefault(j, [])
        last = start[u["name"]]
        async with client(u, timeout=httpx.Timeout(10, read=60)) as http:
            while True:
                try:
                    async with http.stream("GET", "/v1/queries/q1/stream", headers={"Last-Event-ID": str(last)}) as s:
                        if s.status_code != 200:
                            r["sse_errors"][f"status {s.status_code}"] += 1
                            await asyncio.sleep(1)
                            continue
                        kind = ""
                        async for line in s.aiter_lines():
                            if line.startswith("event:"):
                                kind = line[6:].strip()
                            elif line.startswith("id:"):
                                cursor = int(line[3:].strip())
                            elif line.startswith("data:") and kind == "row":
                                arrived = time.time()
                                if cursor != last + 1:
                                    r["sse_errors"]["cursor gap"] += 1
                                events.append((cursor, json.loads(line[5:])["sensor"], arrived))
                                last = cursor
                            elif line.startswith("data:") and kind == "end":
                                r["sse_errors"]["stream ended"] += 1
                        r["sse_errors"]["disconnected"] += 1
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    r["sse_errors"][type(exc).__name__] += 1
                await asyncio.sleep(0.5)

    async def health() -> None:
        async with httpx.AsyncClient(base_url=cfg["url"], timeout=10) as http:
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                try:
                    if (await http.get("/health")).status_code == 200:
                        r["health_ms"].append(1000 * (time.perf_counter() - t0))
                except httpx.HTTPError:
                    pass  # a probe, not a client: its failures are not the clients' errors
                await asyncio.sleep(0.2)

    async def watch() -> None:  # when each batch of an SSE user becomes readable: its line in _delivered.jsonl
        sizes: dict[int, int] = {}
        while time.perf_counter() < end + 2:
            for k in watched:
                size = os.stat(Path(users[k]["folder"]) / "_delivered.jsonl").st_size
                if size != sizes.get(k):
                    sizes[k], now = size, time.time()
                    for n in range(len(logged_at[k]), len(deliveries(users[k]["folder"]))):
                        logged_at[k].append(now)
            await asyncio.sleep(0.02)

    async def lag() -> None:
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            await asyncio.sleep(0.01)
            r["lag_ms"].append(1000 * (time.perf_counter() - t0) - 10)

    streams = [asyncio.create_task(stream(j, users[j % len(users)])) for j in range(cfg["streams"])]
    streams.append(asyncio.create_task(watch()))
    await asyncio.gather(*[poller(i, users[i % len(users)]) for i in range(cfg["pollers"])],
                         *[direct(j, u) for j, u in enumerate(users)], health(), lag())
    for task in streams:
        task.cancel()
    await asyncio.gather(*streams, return_exceptions=True)
    r["cpu_s"], r["wait_s"] = _own_cpu() - cpu0, _waited(os.getpid()) - wait0
    delays, sensors, unresolved, after_log, logging_s = [], [], 0, [], []
    for j, events in r.pop("events").items():  # each row's batch folder, by its cursor, through _delivered.jsonl
        folder = Path(users[j % len(users)]["folder"])
        logged = deliveries(folder)
        ends = list(itertools.accumulate(d.rows for d in logged))
        mtimes = [(folder / d.batch).stat().st_mtime for d in logged]
        seen = logged_at[j % len(users)]
        if j < len(users):  # each user's batches once: folder mtime → its line in the log
            logging_s += [seen[k] - mtimes[k] for k in range(min(len(seen), len(mtimes))) if not math.isnan(seen[k])]
        for cursor, sensor, arrived in events:
            k = bisect.bisect_left(ends, cursor)
            if k < len(ends):
                delays.append(arrived - mtimes[k])
                if k < len(seen) and not math.isnan(seen[k]):
                    after_log.append(arrived - seen[k])
            else:
                unresolved += 1
            sensors.append((sensor, arrived))
    r.update(sse_delay_s=delays, sse_logged_s=after_log, logging_s=logging_s, sse_sensors=sensors,
             sse_unresolved=unresolved, sse_events=len(sensors), seconds=seconds)
    return r


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__" and sys.argv[1:2] == ["--client"]:
    settings_ = json.loads(Path(sys.argv[2]).read_text())
    Path(settings_["result"]).write_text(json.dumps(asyncio.run(_clients(settings_))))
