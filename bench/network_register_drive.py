"""The registration benchmark's driver: a running service fed a stream, N users registering over HTTP.

    python -m bench.network_register_drive PLAN.json --input DIR --out DIR [--clients 8] -- COMMAND [ARG ...]

``COMMAND`` is the service as an operator starts it (``streamwarden serve ... --port 0``,
under :mod:`bench.network_register_serve`, which times the registration route's phases into
``--out``/phases.jsonl), reading the empty folder ``--input`` and writing each user's rows
under ``--out``/rows. It prints ``listening on URL`` once it serves. ``PLAN.json`` (written
by :mod:`bench.network_register` when it prepares the workload) names the feed's files and
the users: *early* ones, whose queries the store held before the service started, the
*registering* ones and one *probe*, each with her token, her query's internal id and how
many rows of each file she should receive.

The driver, a child subreaper (Spark's JVM outliving the service is reaped here, its CPU counted):

1. starts the command and waits for ``listening on``; lands one file of the feed per
   interval from then on (:class:`Feed`: copied beside the folder, renamed in);
2. warm-up: waits until every early user has the first ``warmup`` files' rows; then lets
   ``steady`` more files land, noting when each reaches every early user (the baseline);
3. **registrations**: ``clients`` threads POST the registering users' queries
   (``POST /v1/queries``, each user with her own token), as fast as the service answers,
   while the main thread watches the early users' rows (:class:`~bench.network_latency_drive.Watch`)
   and each registered user's first row (:class:`FirstRows`); the service's CPU (its
   Python, its JVM, the JVM's Python workers) is read from /proc before and after;
4. waits until every registered user has a first row and every early user the rows of every
   file landed by the last 201;
5. **the probe**: one more registration, then ``GET /v1/queries/q1/rows?limit=1`` every
   50 ms until her first row is there (and the time it reached her delivery log);
6. lets ``tail`` more files land, stops the feed, waits until every user has every row the
   landed files hold for her (and ``settle`` seconds more: a row delivered twice would come
   late), stops the command with SIGTERM and reaps everything;
7. reads the group's micro-batches from its Spark checkpoint (``CHECKPOINT/.groups/<group>/spark``:
   ``offsets/N`` when a batch started, ``commits/N`` when it committed), the phases the
   service timed, and prints one JSON line (:func:`summary` and the others). It writes
   ``--out``/landed.json: how many files landed (the rows check reads it).

A registration's first row is counted in micro-batches (:func:`batches_to_first_row`): from
the batch under way when the 201 came (or the next to start) to the one that wrote the
row, both counted; the row's batch is the one under way when its folder was written.

    >>> batches = {0: Batch(10.0, 11.0, ()), 1: Batch(12.0, 13.5, ()), 2: Batch(14.0, None, ())}
    >>> batches_to_first_row(batches, answered=12.5, written=13.2), batches_to_first_row(batches, 11.5, 14.1)
    (1.0, 2.0)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.network_latency_drive import Batch, Watch, _Command, checkpoints, cpu_split, spark_batches
from bench.stats import median, percentile
from bench.suite.launch import become_subreaper

LOG = "_delivered.jsonl"  # streamwarden.runtime.deliveries.LOG (the driver imports no streamwarden)
LISTENING = "listening on "
QUERY_ID = "q1"  # every user calls her query q1
PROBE_POLL_S = 0.05  # GET rows of the probe this often
SWEEP_S, SWEEP_REST = 0.05, 20  # as the latency driver: sweep at most this often, rest 20× a sweep's time


# -- the feed -------------------------------------------------------------------------------------
class Feed(threading.Thread):
    """Lands ``files`` into ``target`` one per ``interval_s`` from when it starts (each copied into
    ``staging`` beside it first, then renamed in) until they run out or :meth:`halt`;
    ``landed[k]``: when file ``k`` landed (wall-clock seconds)."""

    def __init__(self, files: Sequence[Path], interval_s: float, staging: Path, target: Path):
        super().__init__(name="feed", daemon=True)
        self.files, self.interval_s, self.staging, self.target = list(files), interval_s, staging, target
        self.landed: list[float] = []
        self.failure: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
            began = time.time()
            for k, source in enumerate(self.files):
                staged = self.staging / source.name
                shutil.copyfile(source, staged)
                if self._halt.wait(max(0.0, began + k * self.interval_s - time.time())):
                    return
                os.replace(staged, self.target / source.name)
                self.landed.append(time.time())
        except BaseException as error:  # noqa: BLE001 (the main thread reports it)
            self.failure = error

    def halt(self) -> int:
        """Land no more files; returns how many landed."""
        self._halt.set()
        self.join(timeout=30)
        return len(self.landed)

    def wait_for(self, count: int, deadline: float) -> bool:
        """Wait until ``count`` files landed (False: the deadline passed or the feed ran out)."""
        while len(self.landed) < count:
            if time.time() >= deadline or not self.is_alive():
                return len(self.landed) >= count
            time.sleep(0.05)
        return True


# -- first rows -----------------------------------------------------------------------------------
@dataclass
class FirstRows:
    """When each user's first row reached her delivery log (``logs[user]``): ``seen[user]``, by
    one ``stat`` per user still waiting, for the users in ``waiting``."""

    logs: Mapping[str, Path]
    waiting: set[str] = field(default_factory=set)
    seen: dict[str, float] = field(default_factory=dict)

    def sweep(self) -> None:
        for user in list(self.waiting):
            try:
                if os.stat(self.logs[user]).st_size > 0:
                    self.seen[user] = time.time()
                    self.waiting.discard(user)
            except FileNotFoundError:
                continue

    def written(self, user: str) -> float | None:
        """When the folder of her first delivery was written (its mtime: within the micro-batch
        that wrote it), from the first line of her log."""
        try:
            with open(self.logs[user], encoding="utf-8") as handle:
                first = json.loads(handle.readline())["batch"]
            return (self.logs[user].parent / first).stat().st_mtime
        except (OSError, ValueError, KeyError, TypeError):
            return None


def batches_to_first_row(batches: Mapping[int, Batch], answered: float, written: float | None) -> float:
    """Micro-batches from the registration's 201 (``answered``) to the one that wrote her first
    row (under way at ``written``), both counted: the first is the batch not yet committed at
    the 201. NaN when the checkpoint does not tell."""
    if written is None or not batches:
        return float("nan")
    ids = sorted(batches)
    first = next((i for i in ids if (done := batches[i].committed) is None or done > answered), ids[-1] + 1)
    started = [i for i in ids if batches[i].started <= written]
    return float(started[-1] - first + 1) if started else float("nan")


# -- the registrations ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Post:
    """One ``POST /v1/queries``: whose, when it was sent and answered (wall clock), how long it took
    (ms, monotonic), its status (0: no answer) and, when it was not 201, the first words of why."""

    user: str
    sent: float
    answered: float
    ms: float
    status: int
    error: str = ""


def register(base: str, users: Sequence[Mapping[str, Any]], clients: int, posts: list[Post],
             timeout_s: float = 600.0) -> None:
    """Every user's query POSTed by ``clients`` threads (each its own connection, the users in
    turn), as fast as the service answers; each answer appended to ``posts`` as it comes."""
    import httpx

    pending: queue.SimpleQueue[Mapping[str, Any]] = queue.SimpleQueue()
    for user in users:
        pending.put(user)

    def client() -> None:
        with httpx.Client(base_url=base, timeout=timeout_s) as http:
            while True:
                try:
                    user = pending.get_nowait()
                except queue.Empty:
                    return
                posts.append(post_query(http, user))

    threads = [threading.Thread(target=client, name=f"client-{i}", daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def post_query(http: Any, user: Mapping[str, Any]) -> Post:
    """``user`` registers her query (``q1``) over ``http`` (an ``httpx.Client``)."""
    import httpx

    sent, began = time.time(), time.perf_counter()
    try:
        answer = http.post("/v1/queries", json={"id": QUERY_ID, "query": user["text"]},
                           headers={"Authorization": f"Bearer {user['token']}"})
        status, error = answer.status_code, "" if answer.status_code == 201 else answer.text[:200]
    except httpx.HTTPError as exc:
        status, error = 0, f"{type(exc).__name__}: {exc}"[:200]
    return Post(user["user"], sent, time.time(), 1000 * (time.perf_counter() - began), status, error)


# -- the numbers ----------------------------------------------------------------------------------
def post_numbers(posts: Sequence[Post]) -> dict[str, float]:
    """The registrations' wall time (first sent to last answered), rate, latency percentiles
    (201s only), the median of the first and last tenth (does a POST cost more as the network
    grows?) and the answers by status.

    >>> p = [Post("a", 0.0, 0.1, 100.0, 201), Post("b", 0.05, 0.3, 250.0, 201), Post("c", 0.1, 0.2, 90.0, 500, "x")]
    >>> n = post_numbers(p)
    >>> n["register_wall_s"], n["post_p50_ms"], n["post_errors"], n["status:500"]
    (0.3, 175.0, 1.0, 1.0)
    """
    ok = [p.ms for p in posts if p.status == 201]
    wall = max((p.answered for p in posts), default=0.0) - min((p.sent for p in posts), default=0.0)
    tenth = max(1, len(posts) // 10)
    first, last = [p.ms for p in posts[:tenth] if p.status == 201], [p.ms for p in posts[-tenth:] if p.status == 201]
    numbers = {"registrations": float(len(posts)), "registered": float(len(ok)),
               "post_errors": float(len(posts) - len(ok)), "register_wall_s": round(wall, 3),
               "registrations_per_s": round(len(ok) / wall, 3) if wall > 0 else float("nan"),
               "post_p50_ms": median(ok), "post_p95_ms": percentile(ok, 95), "post_p99_ms": percentile(ok, 99),
               "post_max_ms": max(ok, default=float("nan")), "post_first_tenth_p50_ms": median(first),
               "post_last_tenth_p50_ms": median(last)}
    numbers.update({f"status:{status}": float(n) for status, n in Counter(p.status for p in posts).items()})
    return {k: round(v, 3) for k, v in numbers.items()}


def read_phases(path: Path) -> list[dict[str, Any]]:
    """The lines the instrumented service wrote (none when it was not instrumented)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # the last line, cut by the service's end
    return found


#: The registration route's phases, as :mod:`bench.network_register_serve` names them.
PHASE_NAMES = ("auth", "catalog", "explain", "runnable", "store", "poll")
#: A runnable check longer than this ran Spark's analysis (a cached template's takes about a millisecond).
SPARK_CHECK_S = 0.1


def phase_numbers(records: Sequence[Mapping[str, Any]], posts: Sequence[Post], prefix: str = "") -> dict[str, float]:
    """Per phase of the registration route, the median and p99 of its wall time and the median of
    its thread's CPU time (ms) over ``posts``' registrations; ``rest``: the client's time less
    the phases (HTTP, the body's validation, waiting for a worker thread, the audit record).

    >>> rec = [{"kind": "register", "user": "a", "phases": {"auth": [0.002, 0.001], "poll": [0.05, 0.01]}}]
    >>> n = phase_numbers(rec, [Post("a", 0.0, 0.1, 60.0, 201)])
    >>> n["phase_auth_p50_ms"], n["phase_poll_cpu_p50_ms"], n["phase_rest_p50_ms"], n["phased"]
    (2.0, 10.0, 8.0, 1.0)
    """
    wanted = {p.user: p for p in posts if p.status == 201}
    spans = {r["user"]: r for r in records if r.get("kind") == "register" and r.get("user") in wanted}
    numbers: dict[str, float] = {f"{prefix}phased": float(len(spans))}
    if not spans:
        return numbers
    for name in PHASE_NAMES:
        walls = [1000 * s["phases"].get(name, [0.0, 0.0])[0] for s in spans.values()]
        cpus = [1000 * s["phases"].get(name, [0.0, 0.0])[1] for s in spans.values()]
        numbers.update({f"{prefix}phase_{name}_p50_ms": median(walls), f"{prefix}phase_{name}_p99_ms":
                        percentile(walls, 99), f"{prefix}phase_{name}_max_ms": max(walls),
                        f"{prefix}phase_{name}_cpu_p50_ms": median(cpus),
                        f"{prefix}phase_{name}_total_s": sum(walls) / 1000})
    # Spark checks a group's template once; the registrations that came before its first check ended each ran one
    numbers[f"{prefix}spark_checks"] = float(sum(1 for s in spans.values()
                                                 if s["phases"].get("runnable", [0.0])[0] > SPARK_CHECK_S))
    rest = [wanted[u].ms - 1000 * sum(w for w, _ in s["phases"].values()) for u, s in spans.items()]
    numbers.update({f"{prefix}phase_rest_p50_ms": median(rest), f"{prefix}phase_rest_p99_ms": percentile(rest, 99)})
    return {k: round(v, 3) for k, v in numbers.items()}


def background_numbers(records: Sequence[Mapping[str, Any]], begin: float, end: float,
                       until: float | None = None) -> dict[str, float]:
    """The host's own polls started within [begin, end], the group's micro-batches (their
    ``foreachBatch``) and backfills (the batch jobs for members that joined) within [begin,
    until] (default ``end``): how many, their median, longest and total wall time, the joiners a
    backfill served (median) and the most members a batch had."""
    until = end if until is None else until
    inside = [r for r in records if begin <= r.get("start", -1.0) <= until
              and (r.get("kind") != "poll" or r["start"] <= end)]
    numbers: dict[str, float] = {}
    for kind, plural in (("poll", "polls"), ("batch", "batches"), ("backfill", "backfills")):
        walls = [r["wall"] for r in inside if r.get("kind") == kind]
        numbers.update({plural: float(len(walls)), f"{kind}_p50_s": median(walls),
                        f"{kind}_max_s": max(walls, default=float("nan")), f"{kind}_total_s": sum(walls)})
    numbers["backfill_joiners_p50"] = median([float(r["joiners"]) for r in inside if r.get("kind") == "backfill"])
    numbers["batch_members_max"] = max((float(r["members"]) for r in inside if r.get("kind") == "batch"),
                                       default=float("nan"))
    return {k: round(v, 4) for k, v in numbers.items()}


def file_latency(watch: Watch, landed: Sequence[float], files: Iterable[int]) -> dict[str, float]:
    """Of ``files`` (indexes): the time from each landing to the last watched user who should get
    rows of it having them (p50, max), and how many never reached them all."""
    per_file, missing = [], 0
    for k in files:
        users = [u for u, counts in watch.counts.items() if k < len(counts) and counts[k]]
        if not users or k >= len(landed):
            continue
        if any(k not in watch.seen[u] for u in users):
            missing += 1
            continue
        per_file.append(max(watch.seen[u][k] for u in users) - landed[k])
    return {"p50_s": round(median(per_file), 3), "max_s": round(max(per_file, default=float("nan")), 3),
            "files": float(len(per_file)), "missing": float(missing)}


def group_batches(checkpoint_root: Path, rows: Path) -> tuple[dict[int, Batch], int]:
    """The micro-batches of the shared group that ran most of them (the one every registered query
    joined), and how many Spark queries left checkpoints."""
    found = [spark_batches(c) for c in checkpoints(checkpoint_root, rows)]
    return max(found, key=len, default={}), len(found)


# -- the run --------------------------------------------------------------------------------------
class _Served(_Command):
    """The service under test: ready once it prints where it listens (stdout)."""

    url = ""

    def _out(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.stdout.append(line)
            if line.startswith(LISTENING) and not self.ready.is_set():
                self.url, self.ready_at = line.split(" ", 2)[2].strip(), time.time()
                self.ready.set()


def _sweep(*watchers: Any, landed: int) -> float:
    """One look by every watcher; returns how long to rest before the next."""
    began = time.perf_counter()
    for watcher in watchers:
        if isinstance(watcher, Watch):
            watcher.sweep(landed)
        else:
            watcher.sweep()
    return max(SWEEP_S, SWEEP_REST * (time.perf_counter() - began))


def _own_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _probe(base: str, user: Mapping[str, Any], log: Path, deadline: float) -> dict[str, float]:
    """The probe registers, then looks for her first row (``GET rows?limit=1``) every 50 ms."""
    import httpx

    with httpx.Client(base_url=base, timeout=600) as http:
        post = post_query(http, user)
        numbers = {"probe_status": float(post.status), "probe_post_ms": round(post.ms, 1)}
        if post.status != 201:
            return numbers
        head = {"Authorization": f"Bearer {user['token']}"}
        seen_log = float("nan")
        while time.time() < deadline:
            if seen_log != seen_log and log.is_file() and log.stat().st_size > 0:
                seen_log = time.time()
            answer = http.get(f"/v1/queries/{QUERY_ID}/rows", params={"limit": 1}, headers=head)
            if answer.status_code == 200 and answer.json()["rows"]:
                now = time.time()
                return {**numbers, "probe_answered": post.answered, "probe_first_row_s": round(now - post.answered, 3),
                        "probe_log_s": round((seen_log if seen_log == seen_log else now) - post.answered, 3)}
            if answer.status_code != 200:
                numbers["probe_rows_errors"] = numbers.get("probe_rows_errors", 0.0) + 1
            time.sleep(PROBE_POLL_S)
        return {**numbers, "probe_answered": post.answered}


def drive(plan: Mapping[str, Any], inputs: Path, out: Path, argv: Sequence[str], *, clients: int,
          start_timeout_s: float, drain_timeout_s: float, settle_s: float) -> dict[str, float]:
    """Run the command, feed it, register, probe, drain, as the module docstring says; its numbers."""
    adopted = become_subreaper()
    rows, users = out / "rows", plan["users"]
    logs = {u["user"]: rows / u["user"] / u["query"] / LOG for u in users}
    early = [u for u in users if u["role"] == "early"]
    registering = [u for u in users if u["role"] == "register"]
    probe = next(u for u in users if u["role"] == "probe")
    warmup, steady, tail, interval = (int(plan["warmup"]), int(plan["steady"]), int(plan["tail"]),
                                      float(plan["interval_s"]))
    early_watch = Watch({u["user"]: logs[u["user"]] for u in early}, {u["user"]: plan["counts"][u["user"]]
                                                                      for u in early})
    firsts = FirstRows({u["user"]: logs[u["user"]] for u in registering}, {u["user"] for u in registering})
    probe_first = FirstRows({probe["user"]: logs[probe["user"]]})
    feed = Feed([Path(plan["feed"]) / name for name in plan["names"]], interval, inputs.parent / ".staged", inputs)
    command = _Served(argv)
    numbers: dict[str, float] = {}
    landed = 0
    try:
        while not command.ready.wait(0.5):
            if not command.running() or time.time() - command.began > start_timeout_s:
                raise RuntimeError(f"{argv[0]} did not listen within {start_timeout_s:.0f} s:\n{command.tail()}")
        feed.start()
        deadline = time.time() + start_timeout_s
        if not feed.wait_for(warmup, deadline) or not early_watch.until(warmup, deadline):
            raise RuntimeError(f"the warm-up files did not reach every early user within {start_timeout_s:.0f} s "
                               f"({early_watch.pending(warmup)} waiting):\n{command.tail()}")
        steady_from = len(feed.landed)
        while len(feed.landed) < steady_from + steady and feed.is_alive():
            time.sleep(_sweep(early_watch, landed=len(feed.landed)))
        steady_to = len(feed.landed)
        # -- the registrations, watched --------------------------------------------------------
        cpu_before, own_before, began = cpu_split(command.process.pid), _own_cpu(), time.time()
        posts: list[Post] = []
        storm = threading.Thread(target=register, args=(command.url, registering, clients, posts),
                                 name="registrations", daemon=True)
        storm.start()
        while storm.is_alive():
            time.sleep(_sweep(early_watch, firsts, landed=len(feed.landed)))
            if not command.running():
                raise RuntimeError(f"{argv[0]} stopped while users registered:\n{command.tail()}")
        ended = time.time()
        posts.sort(key=lambda p: p.sent)
        cpu_after, own = cpu_split(command.process.pid), _own_cpu() - own_before
        during_to = len(feed.landed)
        # -- every registered user live, every early user caught up -----------------------------
        firsts.waiting &= {p.user for p in posts if p.status == 201}  # a refused one never gets a row

        def owed() -> set[str]:  # who should have a row by now: the landed files hold some for her
            return {u for u in firsts.waiting if sum(plan["counts"][u][:len(feed.landed)])}
        catch_deadline = time.time() + drain_timeout_s
        # the files landed by the last 201 (the feed goes on: later ones are always on their way)
        while (owed() or early_watch.pending(during_to)) and time.time() < catch_deadline:
            time.sleep(_sweep(early_watch, firsts, landed=len(feed.landed)))
        caught_up, missing_first = time.time(), len(owed())
        # -- the probe, registered alone --------------------------------------------------------
        probed = _probe(command.url, probe, logs[probe["user"]], time.time() + drain_timeout_s)
        # -- the tail, then every user's every row ---------------------------------------------
        feed.wait_for(len(feed.landed) + tail, time.time() + tail * interval + 60)
        landed = feed.halt()
        if feed.failure is not None:
            raise RuntimeError(f"the feed failed: {feed.failure}")
        every = Watch(logs, {u["user"]: plan["counts"][u["user"]] for u in users})
        drain_began = time.time()
        drained = every.until(landed, drain_began + drain_timeout_s)
        drain_s = time.time() - drain_began
        time.sleep(settle_s)
        every.sweep(landed)
    finally:
        status, command_cpu, left_cpu = command.stop(grace_s=120.0)
    if status not in (0, -signal.SIGTERM):
        raise RuntimeError(f"{argv[0]} exited with {status}:\n{command.tail()}")
    (out / "landed.json").write_text(json.dumps({"landed": landed, "times": feed.landed}), encoding="utf-8")
    batches, spark_queries = group_batches(out, rows)
    records = read_phases(out / "phases.jsonl")
    window = ended - began
    cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
    answered = {p.user: p.answered for p in posts if p.status == 201}
    first_s = [firsts.seen[u] - answered[u] for u in answered if u in firsts.seen]
    counted = [batches_to_first_row(batches, answered[u], firsts.written(u)) for u in answered if u in firsts.seen]
    counted = [c for c in counted if c == c]
    probe_batches = (batches_to_first_row(batches, probed["probe_answered"], probe_first.written(probe["user"]))
                     if "probe_first_row_s" in probed else float("nan"))
    steady_lat = file_latency(early_watch, feed.landed, range(steady_from, steady_to))
    during_lat = file_latency(early_watch, feed.landed, range(steady_to, during_to))
    in_window = [b for b in batches.values() if began <= b.started <= caught_up]
    durations = [b.committed - b.started for b in in_window if b.committed is not None]
    numbers.update(post_numbers(posts))
    numbers.update(phase_numbers(records, posts))
    numbers.update(phase_numbers(records, [Post(probe["user"], 0.0, 0.0, probed.get("probe_post_ms", 0.0), 201)]
                                 if probed.get("probe_status") == 201 else [], prefix="probe_"))
    numbers.update(background_numbers(records, began, ended, caught_up))
    numbers.update({k: v for k, v in probed.items() if k != "probe_answered"})
    numbers.update({
        "clients": float(clients), "service_python_cpu_s": round(cpu["python"], 3),
        "service_jvm_cpu_s": round(cpu["jvm"], 3), "service_other_cpu_s": round(cpu["other"], 3),
        "service_cpu_s": round(sum(cpu.values()), 3), "service_cores": round(sum(cpu.values()) / window, 3),
        "clients_cpu_s": round(own, 3), "first_rows": float(len(first_s)),
        "no_first_row": float(missing_first), "first_row_p50_s": round(median(first_s), 3),
        "first_row_p99_s": round(percentile(first_s, 99), 3),
        "first_row_max_s": round(max(first_s, default=float("nan")), 3),
        "first_row_batches_p50": median(counted), "first_row_batches_max": max(counted, default=float("nan")),
        "first_row_over_two": float(sum(1 for c in counted if c > 2)), "probe_batches": probe_batches,
        "catch_up_s": round(caught_up - ended, 3), "steady_p50_s": steady_lat["p50_s"],
        "steady_max_s": steady_lat["max_s"], "during_p50_s": during_lat["p50_s"], "during_max_s": during_lat["max_s"],
        "during_files": during_lat["files"], "during_missing": during_lat["missing"],
        "group_batches_during": float(len(in_window)), "group_batch_p50_s": round(median(durations), 3),
        "group_batch_max_s": round(max(durations, default=float("nan")), 3), "spark_queries": float(spark_queries),
        "landed": float(landed), "feed_ran_out": float(landed >= len(plan["names"])), "drained": float(drained),
        "drain_s": round(drain_s, 3), "rows_out": float(every.delivered()),
        "start_s": round(command.ready_at - command.began, 3), "command_cpu_s": round(command_cpu, 3),
        "left_running_cpu_s": round(left_cpu, 3), "load": os.getloadavg()[0], "subreaper": float(adopted)})
    for post in posts:  # the first refusals, for the log (the JSON line carries counts only)
        if post.status != 201:
            print(f"network_register_drive: {post.user}: {post.status} {post.error}", file=sys.stderr)
    return numbers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.network_register_drive",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="the plan the workload wrote (files, users, tokens, counts)")
    parser.add_argument("--input", type=Path, required=True, help="the (empty) folder the service reads")
    parser.add_argument("--out", type=Path, required=True, help="the run's folder: rows/, checkpoint/, phases.jsonl")
    parser.add_argument("--clients", type=int, default=8, help="threads POSTing the registrations (default 8)")
    parser.add_argument("--start-timeout", type=float, default=600.0, metavar="S")
    parser.add_argument("--drain-timeout", type=float, default=300.0, metavar="S")
    parser.add_argument("--settle", type=float, default=3.0, metavar="S",
                        help="after every row arrived, wait this long for rows that should not")
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("give the command after --: ... -- COMMAND [ARG ...]")
    args = parser.parse_args(argv[:argv.index("--")])
    plan = json.loads(args.plan.read_text(encoding="utf-8"))
    try:
        numbers = drive(plan, args.input, args.out, argv[argv.index("--") + 1:], clients=args.clients,
                        start_timeout_s=args.start_timeout, drain_timeout_s=args.drain_timeout,
                        settle_s=args.settle)
    except RuntimeError as error:
        print(f"network_register_drive: {error}", file=sys.stderr)
        return 1
    print(json.dumps({k: (None if v != v else v) for k, v in numbers.items()}), flush=True)  # NaN is not JSON
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Feed", "FirstRows", "Post", "background_numbers", "batches_to_first_row", "drive", "file_latency",
           "phase_numbers", "post_numbers", "register"]
