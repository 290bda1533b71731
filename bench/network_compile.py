"""Compiling a network at internet scale: N registered queries of U users, as a restarting driver does.

The declaration (:func:`experiment`) for :mod:`bench.suite`::

    python -m bench.suite network_compile [--quick]

Issue 25's target: 100,000 registered queries of 10,000 users compile in under 10 s with
under 2 GiB of driver memory. The sizes are 1,000 / 10,000 / 100,000 queries of 100 / 1,000
/ 10,000 users (10 each; ``--quick``: 200 of 20). What *compile* means is what a network's
driver does when it starts or replans (``NetworkRuntime._replan``), Spark aside:

Like the runtime's poll, the compile pauses Python's cyclic collector
(:func:`~streamwarden.runtime.plan.collector_paused`) while it loads, plans and places.

1. **load**: the catalog from the store, the registrations, the live access changes;
2. **plan**: :func:`~streamwarden.runtime.plan.plan_network` (bind, secure each query for
   each listed user, group users with equal plans into pipelines);
3. **place**: each pipeline's place in a group (:func:`~streamwarden.runtime.groups.group_of`:
   its graphs reduced to query templates);
4. **tables**: the member tables the groups would hand Spark, the Python side only (the rows
   of constants per template, as ``StreamGroup._member_rows`` and ``member_table`` build them).

Each size is one pipeline ``compile-N``, a whole process (:func:`measure`) that runs two
children: the first builds the store (the catalog, the N registrations and each owner's
grant, phase **register**), the second, a fresh process, loads it and compiles. Each phase
reports its wall and CPU seconds and the process's peak RSS after it (``getrusage``'s
``ru_maxrss``, a high-water mark) and its RSS then (``/proc/self/statm``).

The workload is a hospital's: one stream ``Readings (ts, sensor, ward, value)`` (the
schema of :mod:`bench.network_scale`), users in wards of 25 (user i in ward ``w{i mod W}``,
W = U / 25), three roles: ``Nurse`` (a read policy ``Readings.ward = self.ward``),
``Physician`` (every tenth user; inherits Nurse, and also reads the critical readings of
every ward, ``Readings.value > 98``) and ``Researcher`` (every fiftieth; averages per ward
only, windows of at least 5 minutes). Profiles also hold attributes no policy reads (a
name, a pager number). Each user registers 10 own queries: the first three the standard
queries of her role (the same texts across a ward, as a ward's dashboard), the other seven
her own picks of shapes and constants (selections above or below a threshold, one sensor's
readings, windowed averages and peaks, a per-sensor count no group hosts).

    >>> e = experiment(quick=True)
    >>> [(p.name, p.params["queries"], p.params["users"]) for p in e.pipelines]
    [('compile-200', 200, 20)]
    >>> [u["role"] for u in users(11)][:3], users(11)[10]["role"], users(100)[49]["role"]
    (['Physician', 'Nurse', 'Nurse'], 'Physician', 'Researcher')
    >>> queries(users(20)[1])[:3] == queries(users(20)[2])[:3]
    True
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.suite.experiment import (Column, Command, Experiment, Measured, Pipeline, Plot, Table, Target, Verdict,
                                    Workload)

#: (queries, users) per size.
SIZES = ((1_000, 100), (10_000, 1_000), (100_000, 10_000))
QUICK_SIZES = ((200, 20),)
PER_USER = 10
WARD_SIZE = 25
SEED = 25
#: Issue 25's target at 100,000 queries of 10,000 users.
TARGET_QUERIES, TARGET_S, TARGET_GIB = 100_000, 10.0, 2.0
#: The phases of the compiling process, in order (``register`` is the first child's).
PHASES = ("start", "load", "plan", "place", "tables")
TITLES = {"register": "register (store)", "start": "start (imports)", "load": "load", "plan": "plan_network",
          "place": "group placement", "tables": "member tables"}

STANDARD = {  # each role's dashboard: the same three texts for everyone of that role
    "Nurse": ("SELECT sensor, value FROM Readings WHERE value > 95",
              "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]",
              "SELECT ts, sensor, value FROM Readings WHERE value < 2"),
    "Physician": ("SELECT sensor, value FROM Readings WHERE value > 95",
                  "SELECT AVG(value) AS avg FROM Readings [RANGE 1 minute]",
                  "SELECT ts, sensor, ward, value FROM Readings WHERE value > 99"),
    "Researcher": ("SELECT ward, AVG(value) AS avg FROM Readings [RANGE 5 minutes] GROUP BY ward",
                   "SELECT AVG(value) AS avg FROM Readings [RANGE 1 hour]",
                   "SELECT ward, AVG(value) AS avg FROM Readings [RANGE 1 hour] GROUP BY ward"),
}


# -- the workload ---------------------------------------------------------------------------------
def users(n: int) -> list[dict[str, Any]]:
    """The hospital's ``n`` users: name, ward and role."""
    wards = max(1, n // WARD_SIZE)
    return [{"user": f"u{i:05d}", "ward": f"w{i % wards}",
             "role": "Researcher" if i % 50 == 49 else "Physician" if i % 10 == 0 else "Nurse"} for i in range(n)]


def _pick(rng: random.Random, role: str) -> str:
    """One query a user of ``role`` picks for herself."""
    if role == "Researcher":
        minutes = rng.choice((5, 10, 15, 30, 60))
        return (f"SELECT ward, AVG(value) AS avg FROM Readings [RANGE {minutes} minutes] GROUP BY ward"
                if rng.random() < 0.7 else f"SELECT AVG(value) AS avg FROM Readings [RANGE {minutes} minutes]")
    shape = rng.choices(("above", "sensor", "below", "peak", "avg", "count"), (40, 30, 10, 8, 8, 4))[0]
    if shape == "above":
        return f"SELECT sensor, value FROM Readings WHERE value > {90 + rng.randrange(20) / 2}"
    if shape == "sensor":
        return f"SELECT ts, value FROM Readings WHERE sensor = 's{rng.randrange(100):02d}'"
    if shape == "below":
        return f"SELECT ts, sensor, value FROM Readings WHERE value < {0.5 + rng.randrange(10) / 2}"
    if shape == "peak":
        return f"SELECT MAX(value) AS peak FROM Readings [RANGE {rng.choice((1, 5, 15))} minutes]"
    if shape == "avg":
        return f"SELECT AVG(value) AS avg FROM Readings [RANGE {rng.choice((5, 15))} minutes]"
    return "SELECT sensor, COUNT(*) AS n FROM Readings [RANGE 1 minute] WHERE value > 97 GROUP BY sensor"


def queries(user: Mapping[str, Any]) -> list[str]:
    """``user``'s 10 query texts: her role's three standard ones, then seven of her own (seeded by her name)."""
    rng = random.Random(f"{SEED}-{user['user']}")
    return [*STANDARD[user["role"]], *(_pick(rng, user["role"]) for _ in range(PER_USER - 3))]


def catalog_text(listed: Sequence[Mapping[str, Any]]) -> str:
    """The hospital's catalog: the stream, the three roles and their policies, the users."""
    lines = ["streams:", "  Readings: {schema: {ts: timestamp, sensor: string, ward: string, value: double}}",
             "roles: {Nurse: {}, Physician: {inherits: [Nurse]}, Researcher: {}}", "users:"]
    lines += [f"  {u['user']}: {{roles: [{u['role']}], profile: {{ward: {u['ward']}}}}}" for u in listed]
    lines += ["policies:",
              "  - {id: ward, subject: Nurse, streams: [Readings], attributes: '*',",
              "     where: 'Readings.ward = self.ward', privilege: read}",
              "  - {id: critical, subject: Physician, streams: [Readings], attributes: '*',",
              "     where: 'Readings.value > 98', privilege: read}",
              "  - {id: research, subject: Researcher, streams: [Readings], attributes: [value, ward],",
              "     privilege: avg, window: {size: 5 minutes, offset: 5 minutes}, group_by: [ward]}"]
    return "\n".join(lines) + "\n"


def _workload(sizes: Sequence[tuple[int, int]]) -> Workload:
    def prepare(work: Path) -> dict[str, int]:
        facts = {}
        for n, u in sizes:
            listed = users(u)
            texts = [t for user in listed for t in queries(user)]
            facts[f"distinct texts of {n} queries"] = len(set(texts))
            facts[f"distinct (ward, role, text) of {n} queries"] = len(
                {(user["ward"], user["role"], t) for user in listed for t in queries(user)})
        return facts

    return Workload(f"a hospital: U users in wards of {WARD_SIZE} (Nurse, Physician 1 in 10, Researcher 1 in 50), "
                    f"{PER_USER} own queries each over one stream Readings; N = "
                    + ", ".join(f"{n:,} queries of {u:,} users" for n, u in sizes), prepare)


# -- the processes --------------------------------------------------------------------------------
class _Phases:
    """Wall and CPU seconds of each phase of this process, its peak RSS after it and its RSS then."""

    def __init__(self) -> None:
        self.numbers: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began, cpu = time.perf_counter(), _cpu_s()
        yield
        self.numbers[f"{name}_wall_s"] = round(time.perf_counter() - began, 4)
        self.numbers[f"{name}_cpu_s"] = round(_cpu_s() - cpu, 4)
        self.numbers[f"{name}_peak_mib"] = round(_peak_mib(), 1)
        self.numbers[f"{name}_rss_mib"] = round(_rss_mib(), 1)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rss_mib() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def build(folder: Path, n: int, u: int) -> dict[str, float]:
    """The store of ``folder``: the hospital's catalog for ``u`` users and their ``n`` own queries,
    each with its owner's grant (as ``POST /v1/queries`` leaves one), registered in one call."""
    clock = _Phases()
    from streamwarden.catalog.authorization import AuthorizationServer
    from streamwarden.catalog.loader import load_catalog_text
    from streamwarden.catalog.registry import RegisteredQuery, own_id
    from streamwarden.catalog.store import sqlite_url

    listed = users(u)
    per_user = n // u
    with clock.phase("register"):
        catalog = load_catalog_text(catalog_text(listed), str(folder / "catalog.yaml"))
        server = AuthorizationServer(sqlite_url(folder / "store.db"))
        registered = [RegisteredQuery(own_id(user["user"], f"q{k + 1:02d}"), (user["user"],), text,
                                      owner=user["user"], opens=())
                      for user in listed for k, text in enumerate(queries(user)[:per_user])]
        server.register(registered, catalog)
        server.open_owns((q.id, q.users[0]) for q in registered)
    return {**clock.numbers, "registered": len(registered)}


def compile_network(folder: Path) -> dict[str, float]:
    """Load the store of ``folder`` and compile its network as a starting driver does (the
    module docstring's phases); the counts of what came out."""
    clock = _Phases()
    with clock.phase("start"):
        from streamwarden.catalog.authorization import AuthorizationServer
        from streamwarden.catalog.store import sqlite_url
        from streamwarden.runtime.groups import group_of
        from streamwarden.runtime.plan import collector_paused, plan_network
    with collector_paused():  # as NetworkRuntime.poll reads the store and replans
        with clock.phase("load"):
            server = AuthorizationServer(sqlite_url(folder / "store.db"))
            catalog = server.store.load()
            registered = server.registrations()
            changes = server.changes()
        with clock.phase("plan"):
            plan = plan_network(catalog, registered)
        with clock.phase("place"):
            places = [(pipeline, group_of(pipeline.rewriting)) for pipeline in plan.pipelines]
    with clock.phase("tables"):
        tables = member_tables(places)
    hosted = sum(1 for _, place in places if place is not None)
    return {**clock.numbers, "queries": len(registered), "users": len(catalog.users), "changes": len(changes),
            "pipelines": len(plan.pipelines), "denials": len(plan.denials), "hosted": hosted,
            "own_pipelines": len(places) - hosted, "groups": len({p.group for _, p in places if p is not None}),
            "templates": len(tables), "member_rows": sum(len(rows) for rows in tables.values())}


def member_tables(places: Sequence[tuple[Any, Any]]) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """Every group's member tables, Python side: per (group, template key), one row
    ``(member index, graph id, *constants)`` per member graph, as a group's micro-batch builds
    them (``StreamGroup._member_rows``: members numbered in name order, then ``member_table``)."""
    from streamwarden.engine.shared import Member

    groups: dict[str, list[tuple[str, Any]]] = {}
    for pipeline, place in places:
        if place is not None:
            groups.setdefault(place.group, []).append((pipeline.name, place))
    tables: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for group, members in groups.items():
        for index, (_, place) in enumerate(sorted(members, key=lambda m: m[0])):
            for graph, template in place.graphs:
                member = Member(index, graph, template.values)
                tables.setdefault((group, template.key), []).append((member.index, member.graph, *member.values))
    return tables


def _child(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> dict[str, float]:
    """``python -m bench.network_compile ARGV`` as a fresh process: what it printed, and its wall
    and CPU seconds and peak RSS (``*_process_*``, as ``wait4`` gives them)."""
    began = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "bench.network_compile", *argv], stdout=subprocess.PIPE,
                             text=True, env=None if environ is None else {**os.environ, **environ})
    assert child.stdout is not None
    printed = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    if child.returncode != 0:
        raise SystemExit(f"python -m bench.network_compile {' '.join(argv)} exited with {child.returncode}")
    return {**json.loads(printed.strip().splitlines()[-1]), "process_wall_s": round(time.perf_counter() - began, 3),
            "process_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "process_peak_mib": round(usage.ru_maxrss / 1024, 1)}


#: The environment variable that makes the compiling child pause the cyclic collector throughout.
PAUSED = "NETWORK_COMPILE_COLLECTOR_PAUSED"


def measure(out: Path, n: int, u: int) -> dict[str, float]:
    """Build the store in one process, then load and compile it in a fresh one, twice: as a
    driver does today, and with Python's cyclic collector paused for the whole compile (what
    a driver gains by pausing it around its replanning, not only around ``plan_network``).
    The numbers: the build's (``register_*``, ``build_process_*``), the compile's (each phase,
    ``process_*``) and the paused compile's (the same, prefixed ``paused_``)."""
    out.mkdir(parents=True, exist_ok=True)
    built = _child(["build", str(out), str(n), str(u)])
    numbers = {**{k: v for k, v in built.items() if not k.startswith("process_")},
               **{f"build_{k}": v for k, v in built.items() if k.startswith("process_")}}
    numbers.update(_child(["compile", str(out)]))
    numbers.update({f"paused_{k}": v for k, v in _child(["compile", str(out)], {PAUSED: "1"}).items()})
    for prefix in ("", "paused_"):
        numbers[f"{prefix}compile_s"] = round(sum(numbers[f"{prefix}{p}_wall_s"] for p in PHASES[1:]), 3)
        numbers[f"{prefix}compile_cpu_s"] = round(sum(numbers[f"{prefix}{p}_cpu_s"] for p in PHASES[1:]), 3)
    numbers["rows_out"] = numbers["member_rows"]
    return numbers


# -- the declaration ------------------------------------------------------------------------------
def _name(n: int) -> str:
    return f"compile-{n}"


def _pipelines(sizes: Sequence[tuple[int, int]]) -> tuple[Pipeline, ...]:
    def command(n: int, u: int) -> Command:
        return Command(lambda work, out: [sys.executable, "-m", "bench.network_compile", "measure", str(out),
                                          str(n), str(u)])

    return tuple(Pipeline(_name(n), command(n, u), "compile", "compile", (), {"queries": n, "users": u})
                 for n, u in sizes)


def _target_time(measured: Measured) -> Verdict:
    name = _name(TARGET_QUERIES)
    if not measured.runs(name):
        return Verdict(None, "not measured")
    wall, cpu = measured.median(name, "compile_s"), measured.median(name, "compile_cpu_s")
    paused = measured.median(name, "paused_compile_s")
    return Verdict(wall < TARGET_S, f"{wall:.1f} s wall ({cpu:.1f} s CPU; collector paused throughout: {paused:.1f} s)")


def _target_memory(measured: Measured) -> Verdict:
    name = _name(TARGET_QUERIES)
    if not measured.runs(name):
        return Verdict(None, "not measured")
    peak = measured.median(name, "process_peak_mib")
    return Verdict(peak < TARGET_GIB * 1024, f"{peak:,.0f} MiB peak RSS of the compiling process")


def _phase_columns(metric: str, unit: str, prefix: str = "") -> tuple[Column, ...]:
    return tuple(Column(f"{TITLES[p]} {unit}", f"{prefix}{p}_{metric}") for p in PHASES)


def explain(measured: Measured, facts: Mapping[str, int]) -> list[str]:
    """Where the time and the memory go, and how they grow with N."""
    sizes = sorted(int(at["queries"]) for name, at in measured.coordinates.items() if measured.runs(name))
    if not sizes:
        return []

    def m(n: int, metric: str) -> float:
        return measured.median(_name(n), metric)

    notes = []
    top = sizes[-1]
    total = m(top, "compile_s")
    shares = ", ".join(f"{TITLES[p]} {m(top, f'{p}_wall_s'):.2f} s ({m(top, f'{p}_wall_s') / total:.0%})"
                       for p in PHASES[1:])
    notes.append(f"At N = {top:,}: the compile takes {total:.1f} s wall, {m(top, 'compile_cpu_s'):.1f} s CPU: "
                 f"{shares}; the imports before it {m(top, 'start_wall_s'):.2f} s. It planned "
                 f"{m(top, 'pipelines'):,.0f} pipelines ({m(top, 'denials'):,.0f} denials), {m(top, 'hosted'):,.0f} "
                 f"of them members of {m(top, 'groups'):.0f} groups ({m(top, 'templates'):.0f} templates, "
                 f"{m(top, 'member_rows'):,.0f} member rows), {m(top, 'own_pipelines'):,.0f} on their own; "
                 f"{facts.get(f'distinct (ward, role, text) of {top} queries', 0):,} distinct (ward, role, text) "
                 f"among the {top:,} queries ({facts.get(f'distinct texts of {top} queries', 0)} texts).")
    notes.append("Memory (peak RSS of the compiling process after each phase, MiB): " + "; ".join(
        f"N = {n:,}: " + ", ".join(f"{TITLES[p]} {m(n, f'{p}_peak_mib'):,.0f}" for p in PHASES)
        + f" ({(m(n, 'tables_peak_mib') - m(n, 'start_peak_mib')) * 1024 / n:.1f} KiB per query above the imports)"
        for n in sizes) + ".")
    notes.append("Python's cyclic collector (the compile as a driver runs it, paused while the poll loads the store, "
                 "plans and places, against the same compile with the collector paused throughout): " + "; ".join(
                     f"N = {n:,}: {m(n, 'compile_s'):.1f} s against {m(n, 'paused_compile_s'):.1f} s "
                     f"(placement {m(n, 'place_wall_s'):.2f} against {m(n, 'paused_place_wall_s'):.2f} s, load "
                     f"{m(n, 'load_wall_s'):.2f} against {m(n, 'paused_load_wall_s'):.2f} s)" for n in sizes) + ".")
    notes.append("What is left: the catalog's YAML is parsed in pure Python (PyYAML's composer, with the loader's "
                 "bounds) and every distinct (text, security class) is secured, written out for its fingerprint "
                 "and reduced to a template once. The collector walks the new objects once, after the poll.")
    if len(sizes) > 1:
        notes.append("Growth (compile seconds per 1,000 queries, wall): " + ", ".join(
            f"N = {n:,}: {m(n, 'compile_s') / n * 1000:.3f}" for n in sizes) + "; between successive sizes "
            + ", ".join(f"{a:,}→{b:,}: ×{m(b, 'compile_s') / m(a, 'compile_s'):.1f} for ×{b / a:g} queries"
                        for a, b in zip(sizes, sizes[1:])) + ".")
    notes.append("Registration (the store built once per size, not part of the compile): " + "; ".join(
        f"N = {n:,}: {m(n, 'register_wall_s'):.1f} s wall, {m(n, 'register_cpu_s'):.1f} s CPU, "
        f"{m(n, 'build_process_peak_mib'):,.0f} MiB peak" for n in sizes) + ".")
    return notes


NOTES = (
    "Each size is one process (`python -m bench.network_compile measure`) running three fresh children: one "
    "builds the store (the catalog saved, the N queries registered with `AuthorizationServer.register` and their "
    "owners' grants with `open_owns`, one transaction each), then two load and compile it, one as a driver does "
    "(`NetworkRuntime.poll` pauses Python's cyclic collector while it loads the store and replans) and one with "
    "Python's cyclic garbage collector paused throughout. Phases are timed inside the child "
    "(wall: `perf_counter`; CPU: `getrusage`); peak RSS is `ru_maxrss` after each phase (a high-water mark).",
    "*compile* = load + plan_network + group placement + member tables, wall, of the first compiling child "
    "(the target's measure); the imports before it are shown apart. Placement is "
    "`streamwarden.runtime.groups.group_of` per pipeline, as `NetworkRuntime._replan` calls it through "
    "`hosting` (its checkpoint check aside: a fresh network has none); member tables are the rows of constants "
    "`StreamGroup._member_rows` and `member_table` would hand Spark, built in Python, Spark aside.",
    "The catalog's YAML may hold at most 100,000 nodes (`MAX_YAML_NODES`, a bound against alias bombs): 10,000 "
    "users of one role and one profile attribute take 90,000 of them, so the hospital's profiles hold the ward "
    "only; a profile attribute more would not fit.",
)


def experiment(events: int | None = None, quick: bool = False) -> Experiment:
    """The compile at 1,000 / 10,000 / 100,000 queries (``quick``: 200 queries of 20 users)."""
    del events  # the sizes are the experiment's
    sizes = QUICK_SIZES if quick else SIZES
    phases_wall = Table("Wall s per phase", ("queries", "users"),
                        (*_phase_columns("wall_s", "s"), Column("compile s", "compile_s"),
                         Column("register (store) s", "register_wall_s")),
                        text=f"Medians over the runs. Issue 25's target: {TARGET_QUERIES:,} queries compile in under "
                             f"{TARGET_S:g} s with under {TARGET_GIB:g} GiB.")
    phases_cpu = Table("CPU s per phase", ("queries", "users"),
                       (*_phase_columns("cpu_s", "CPU s"), Column("compile CPU s", "compile_cpu_s"),
                        Column("register (store) CPU s", "register_cpu_s")))
    memory = Table("Peak RSS after each phase, MiB", ("queries", "users"),
                   (*_phase_columns("peak_mib", "MiB"), Column("compiling process MiB", "process_peak_mib"),
                    Column("store building process MiB", "build_process_peak_mib")))
    paused = Table("The same compile with the cyclic collector paused throughout", ("queries", "users"),
                   (*_phase_columns("wall_s", "s", "paused_"), Column("compile s", "paused_compile_s"),
                    Column("compile CPU s", "paused_compile_cpu_s"), Column("peak MiB", "paused_process_peak_mib")))
    counts = Table("What the compile made", ("queries", "users"),
                   tuple(Column(title, metric) for title, metric in (
                       ("pipelines", "pipelines"), ("denials", "denials"), ("hosted in groups", "hosted"),
                       ("own pipelines", "own_pipelines"), ("groups", "groups"), ("templates", "templates"),
                       ("member rows", "member_rows"), ("access changes", "changes"))))
    return Experiment(
        name="network_compile",
        title="Compiling a network: N registered queries of U users, load to member tables (issue 25, internet scale)",
        workload=_workload(sizes), pipelines=_pipelines(sizes),
        targets=(Target(f"{TARGET_QUERIES:,} registered queries of {TARGET_QUERIES // PER_USER:,} users compile "
                        f"(load, plan, placement, member tables) in under {TARGET_S:g} s", _target_time),
                 Target(f"... with under {TARGET_GIB:g} GiB of driver memory (peak RSS)", _target_memory)),
        notes=NOTES, tables=(phases_wall, phases_cpu, memory, paused, counts),
        plots=(Plot("time", "Compile wall s against N (median, min-max), and each phase", "queries",
                    Column("compile s", "compile_s"), log=True, log_x=True,
                    also=tuple(Column(TITLES[p], f"{p}_wall_s") for p in PHASES[1:])
                    + (Column("compile, collector paused", "paused_compile_s"),),
                    references={f"target: {TARGET_S:g} s": TARGET_S}),
               Plot("memory", "Peak RSS of the compiling process against N, MiB", "queries",
                    Column("peak RSS MiB", "process_peak_mib"), log=True, log_x=True,
                    references={f"target: {TARGET_GIB:g} GiB": TARGET_GIB * 1024})),
        explain=explain, repeats=1 if quick else None, warmup=False)


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["build"] and len(argv) == 4:
        print(json.dumps(build(Path(argv[1]), int(argv[2]), int(argv[3]))))
        return 0
    if argv[:1] == ["compile"] and len(argv) == 2:
        if os.environ.get(PAUSED):
            gc.disable()  # the whole process: what a driver pausing the collector around its replanning gets
        print(json.dumps(compile_network(Path(argv[1]))))
        return 0
    if argv[:1] == ["measure"] and len(argv) == 4:
        print(json.dumps(measure(Path(argv[1]), int(argv[2]), int(argv[3]))))
        return 0
    print("usage: python -m bench.network_compile measure OUT QUERIES USERS | build DIR QUERIES USERS | compile DIR",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
