"""``streamwarden demo``: role-based policies on a drill, patients' own policies, auditing tiers.

Part one (role-based rewriting): three users with different roles query one drill.

Generates the drill scenario (soldiers moving on a road network, their health), loads
the embedded catalog into a SQLite store, and for each user registers a continuous
query, runs it over the data files as they are fed in micro-batches (progress shown),
then prints the authorized graphs, the rows delivered and the rows withheld (what the
same query would return without access control). Part two (security punctuations): see
:mod:`streamwarden.demo.health`. Part three (security levels): see
:mod:`streamwarden.demo.cloud`. Part four (shared networks with privacy switches): see
:mod:`streamwarden.demo.network`.

Spark's own output goes to ``logs/spark.log`` in the demo's folder
(:mod:`streamwarden.demo.quiet`), and the demo leaves there the catalogs and inputs
README's commands use (:mod:`streamwarden.demo.samples`).
"""

from __future__ import annotations

import shutil
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.datagen import generate_drill
from streamwarden.demo.cloud import run_cloud_demo
from streamwarden.demo.health import run_health_demo
from streamwarden.demo.network import run_network_demo
from streamwarden.demo.quiet import start_spark, step
from streamwarden.demo.samples import NAMES, write_samples
from streamwarden.engine.execute import build_job, unsecured_frame
from streamwarden.engine.sinks import read_sink, start_stream
from streamwarden.security.passes import secure

QUERIES = [
    ("paul", "Doctor", "SELECT ts, SID, Pos, Platoon FROM Position"),
    ("carla", "Cardiologist", "SELECT AVG(Heart) AS avg_heart, MAX(BPressure) AS max_bp FROM Health [RANGE 5 min]"),
    ("rick", "Captain", "SELECT Platoon, COUNT(*) AS reports FROM Position [RANGE 5 min] GROUP BY Platoon"),
]


def run_demo(workdir: Path, *, soldiers: int = 40, minutes: float = 20.0) -> int:
    console = Console()
    if workdir.exists():
        shutil.rmtree(workdir)
    data = workdir / "data"
    console.rule("[bold]streamwarden demo: access control for continuous queries on Spark")
    summary = generate_drill(data, soldiers=soldiers, minutes=minutes, interval_seconds=5.0, health="uni",
                             files_per_stream=4)
    console.print(f"generated {summary.describe()}")
    text = resources.files("streamwarden.demo").joinpath("drill.yaml").read_text()
    catalog = load_catalog_text(text, "streamwarden/demo/drill.yaml")
    # where every command run in the demo's folder finds its store by default (README's tour)
    store = CatalogStore(sqlite_url(workdir / ".streamwarden" / "catalog.db"))
    store.save(catalog)
    console.print(f"catalog: {len(catalog.policies)} policies for {', '.join(catalog.users)}; store {store.url}")
    write_samples(workdir)
    spark = start_spark(workdir / "logs", console)
    inputs = {"Position": str(data / "Position"), "Health": str(data / "Health")}
    results = []
    for user, role, query in QUERIES:
        console.rule(f"[bold]{escape(user)}[/] ({escape(role)})")
        console.print(f"  query: {escape(query)}")  # on its own line: a rule cuts what does not fit its width
        rewriting = secure(catalog, user, query)
        for g in rewriting.graphs:
            state = "deployed" if g.deployed else f"not deployed: {g.reason}"
            console.print(f"  {g.id} via {g.kind}, enforcing {escape(', '.join(g.policies))} — {escape(state)}")
        step(console, f"  running {user}'s query continuously over the drill's files, one file per micro-batch")
        job = build_job(spark, catalog, rewriting, inputs, streaming=True, store_url=store.url,
                        max_files_per_trigger=1)
        sink = workdir / "out" / user
        stream = start_stream(job, str(sink), workdir / "checkpoints" / user, available_now=True)
        started = time.monotonic()
        seen = 0
        while stream.isActive:
            stream.awaitTermination(0.5)  # type: ignore[arg-type]  # it takes float seconds
            progress = stream.recentProgress
            for p in progress[seen:]:
                console.print(f"  micro-batch {p['batchId']}: {p['numInputRows']} input rows, "
                              f"{p.get('processedRowsPerSecond', 0):.0f} rows/s")
            seen = len(progress)
        if stream.exception():
            raise RuntimeError(str(stream.exception()))
        step(console, "  counting what the same query returns without access control")
        delivered = len(read_sink(spark, sink)) if any(sink.glob("*.json")) else 0
        authorized = build_job(spark, catalog, rewriting, inputs, streaming=False).union()
        complete = authorized.count() if authorized is not None else 0
        unsecured = unsecured_frame(spark, catalog, rewriting, inputs).count()
        console.print(f"  done in {time.monotonic() - started:.1f} s")
        graphs = ", ".join(g.id for g in rewriting.deployed) or "none"
        results.append((user, role, graphs, delivered, complete - delivered, unsecured - complete))
    table = Table(title="What each user received")
    for column in ("user", "role", "authorized graphs", "rows delivered", "windows still open", "rows withheld"):
        table.add_column(column, justify="left" if column in ("user", "role", "authorized graphs") else "right")
    for row in results:
        table.add_row(*map(str, row))
    console.print(table)
    console.print("windows still open: closed only when later input moves the watermark past their end.\n"
                  "rows withheld: rows the same query returns without access control that the user may not see.\n"
                  f"Results are JSON files under {workdir / 'out'}; 'streamwarden explain' tells why.")
    console.rule("[bold]security punctuations: patients stream their own policies (Fig. 6)")
    run_health_demo(workdir, console)
    console.rule("[bold]security levels: the cloud's auditing tiers behind a Chinese Wall")
    run_cloud_demo(workdir, console)
    console.rule("[bold]shared operators with privacy switches: access granted and revoked while queries run")
    run_network_demo(workdir, console)
    console.rule("[bold]your turn")
    console.print(f"The README's five-minute tour and docs/cli.md run in {workdir}, on the files the demo left there: "
                  f"{', '.join(NAMES)}.\n"
                  "  source .venv/bin/activate    # puts streamwarden on the PATH (or call .venv/bin/streamwarden)\n"
                  f"  cd {workdir}\n"
                  "  streamwarden check drill.yaml\n"
                  f"Spark's log: {workdir / 'logs' / 'spark.log'}", highlight=False)
    return 0
