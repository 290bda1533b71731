"""The client process of experiment 8 (:mod:`bench.service_load`): the load on ``streamwarden serve``.

``python -m bench.service_load --client CONFIG`` runs :func:`clients` for ``CONFIG["seconds"]``
against the service at ``CONFIG["url"]`` and writes what it measured to ``CONFIG["result"]``
(JSON). It is a process of its own (asyncio + httpx), so that its CPU and its event loop are
not the runner's: ``pollers`` clients loop on ``GET rows`` after their cursor (a full page:
again at once, else ``think_s`` of pause), ``streams`` clients hold an SSE connection each,
spread over the users; side by side, one direct reader per user doing the same reads with
:func:`~streamwarden.runtime.deliveries.read_rows` on the same folders (no HTTP), a ``GET
/health`` probe every 0.2 s, an event-loop lag probe, and a watcher noting when each batch's
line reaches ``_delivered.jsonl``. Every client starts at the rows already delivered.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import json
import math
import os
import random
import resource
import time
from collections import Counter
from pathlib import Path
from typing import Any


async def clients(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run the clients of ``cfg`` for ``cfg["seconds"]``; returns their raw measurements: latencies (ms) of
    ``GET rows``, ``read_rows``, ``/health`` and the loop's lag, SSE delays (s; each row's batch found by
    its cursor through ``_delivered.jsonl``), counts, error kinds, and this process's CPU and wait."""
    import httpx

    from streamwarden.runtime.deliveries import deliveries, read_rows

    users, seconds, think, limit = cfg["users"], cfg["seconds"], cfg["think_s"], cfg["limit"]
    start = {u["name"]: sum(d.rows for d in deliveries(u["folder"])) for u in users}  # every client starts live
    r: dict[str, Any] = {"rows_ms": [], "direct_ms": [], "health_ms": [], "lag_ms": [], "requests": 0,
                         "received": [0] * cfg["pollers"], "direct_received": [0] * len(users),
                         "rows_errors": Counter(), "sse_errors": Counter(), "events": {}}
    watched = sorted({j % len(users) for j in range(cfg["streams"])})
    logged_at: dict[int, list[float]] = {k: [math.nan] * len(deliveries(users[k]["folder"])) for k in watched}

    def client(u: dict[str, Any], **kw: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=cfg["url"], headers={"Authorization": f"Bearer {u['token']}"}, **kw)

    # Every client is made before the clock starts: making one (its SSL context, even for
    # http://) takes ~15 ms of this process's event loop, which the first requests of the others
    # would otherwise count as the service's latency.
    pollers = [client(users[i % len(users)], timeout=10) for i in range(cfg["pollers"])]
    streamers = [client(users[j % len(users)], timeout=httpx.Timeout(10, read=60)) for j in range(cfg["streams"])]
    cpu0, wait0, end = own_cpu(), waited(os.getpid()), time.perf_counter() + seconds

    async def poller(i: int, u: dict[str, Any]) -> None:
        cursor = start[u["name"]]
        async with pollers[i] as http:
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
        async with streamers[j] as http:
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
                    for _n in range(len(logged_at[k]), len(deliveries(users[k]["folder"]))):
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
    r["cpu_s"], r["wait_s"] = own_cpu() - cpu0, waited(os.getpid()) - wait0
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


def own_cpu() -> float:
    """User + system CPU seconds of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def waited(pid: int, tid: int | None = None) -> float:
    """Seconds the threads of ``pid`` (or thread ``tid`` only) spent runnable but waiting for a CPU (schedstat)."""
    total = 0
    for task in [str(tid)] if tid else os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[1])
        except (OSError, IndexError):
            pass
    return total / 1e9


def main(config: Path) -> None:
    """Run the clients of ``config`` (a JSON file) and write their measurements where it says."""
    settings = json.loads(config.read_text())
    Path(settings["result"]).write_text(json.dumps(asyncio.run(clients(settings))))
