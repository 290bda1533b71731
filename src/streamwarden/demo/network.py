"""The smart-healthcare network: two queries share operators, users lose and regain access.

Zaki et al.'s CQ1 and CQ2 run as one shared-operator network, one Spark streaming query.
The demo feeds the three streams ten minutes at a time and, between files, the
authorization server grants and revokes access while the query keeps running: a nurse
loses CQ1 (partial loss: the terminal switch stops her rows), every user of CQ2 loses
it (total loss: CQ2's own operators stop working), then the doctor gets CQ2 back. It
prints the network with its switches, which operators ran for each file, and what each
user received.
"""

from __future__ import annotations

import json
import random
import time
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from rich.console import Console
from rich.table import Table

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.engine.session import get_spark
from streamwarden.network.authorization import AuthorizationServer
from streamwarden.network.draw import draw
from streamwarden.network.optimizer import network_text
from streamwarden.network.registry import load_queries_text
from streamwarden.network.spark_runner import SharedNetworkRun
from streamwarden.demo.quiet import step

START = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
FILES = 3
MINUTES_PER_FILE = 10
# (before file, change): the authorization server's decisions, stamped at the file's start.
CHANGES = {
    0: [("grant", "CQ1", "dr_lee"), ("grant", "CQ1", "nurse_kim"), ("grant", "CQ2", "dr_lee"),
        ("grant", "CQ2", "wellness_app")],
    1: [("revoke", "CQ1", "nurse_kim"), ("revoke", "CQ2", "dr_lee"), ("revoke", "CQ2", "wellness_app")],
    2: [("grant", "CQ2", "dr_lee")],
}


def readings(minutes: int, seed: int = 3) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    places = ["ward-a", "ward-b", "street-1", "street-2"]
    out: dict[str, list[dict]] = {"Stream1": [], "Stream2": [], "Stream3": []}
    for second in range(0, minutes * 60, 20):
        ts = START + timedelta(seconds=second)
        for device in range(4):
            where = rng.choice(places)
            text = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
            out["Stream1"].append({"ts": text, "streamid": device, "location": where, "heartRate": rng.randint(55, 140)})
            out["Stream2"].append({"ts": text, "streamid": device, "location": rng.choice(places),
                                   "speed": round(rng.uniform(0, 60), 1)})
            out["Stream3"].append({"ts": text, "streamid": device, "location": rng.choice(places),
                                   "screentime": round(rng.uniform(0, 9), 1), "category": rng.choice(["social", "work"])})
    return out


class _DemoNetwork(SharedNetworkRun):
    """The demo's network: notes each micro-batch it ran, and says when one starts.

    The demo tells each file's rows by the micro-batches that processed it, so it needs
    their ids as they ran; Spark's progress events cannot tell them: a trigger that finds
    nothing new reports the id of the batch that has *not* run yet, so counting from
    ``lastProgress`` skipped the batch that then read the first file (its rows, on disk in
    ``batch=0000000000``, were shown as 0).
    """

    def __init__(self, *args: Any, console: Console, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.console = console
        self.ran: list[int] = []

    def process(self, batch: DataFrame, batch_id: int) -> None:
        step(self.console, f"    network: micro-batch {batch_id} running")
        super().process(batch, batch_id)
        self.ran.append(batch_id)


def run_network_demo(workdir: Path, console: Console) -> None:
    catalog = load_catalog_text(resources.files("streamwarden.demo").joinpath("network.yaml").read_text(),
                                "streamwarden/demo/network.yaml")
    queries = load_queries_text(resources.files("streamwarden.demo").joinpath("network_queries.yaml").read_text(),
                                catalog, "streamwarden/demo/network_queries.yaml")
    data = readings(FILES * MINUTES_PER_FILE)
    inputs = {stream: workdir / "network" / stream for stream in data}
    store = sqlite_url(workdir / "network-auth.db")
    server = AuthorizationServer(store)
    spark = get_spark()
    run = _DemoNetwork(spark, catalog, queries, {s: str(p) for s, p in inputs.items()}, workdir / "network-out",
                       store, workdir / "network-checkpoint", console=console)
    console.print(network_text(run.placed, run.shared), end="")
    picture = draw(run.placed, workdir / "network.png", title="CQ1 and CQ2 sharing operators")
    console.print(f"network drawn to {picture}")
    step(console, "starting the network: one Spark streaming query, a micro-batch a second when input arrives")
    stream = run.start(trigger="1 second")
    per_file = len(data["Stream1"]) // FILES
    batches: list[set[int]] = []  # the micro-batches that processed each file (and its access changes)
    try:
        for part in range(FILES):
            stamp = START + timedelta(minutes=part * MINUTES_PER_FILE)
            for verb, query, user in CHANGES[part]:
                (server.grant if verb == "grant" else server.revoke)(query, user, stamp)
                console.print(f"  {stamp:%H:%M} {verb} {user} on {query} (the Spark query keeps running)")
            before, done = dict(run.counters), len(run.ran)
            for name, rows in data.items():
                inputs[name].mkdir(parents=True, exist_ok=True)
                chunk = rows[part * per_file:(part + 1) * per_file]
                (inputs[name] / f"part-{part:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chunk))
            step(console, f"  minutes {part * MINUTES_PER_FILE}-{(part + 1) * MINUTES_PER_FILE}: a file of each stream "
                          "arrived; waiting for the network's micro-batches")
            started = time.monotonic()
            stream.processAllAvailable()  # returns once every batch reading them is committed: each is in run.ran
            batches.append(set(run.ran[done:]))
            ran = sorted(v for v in run.counters if run.counters[v] > before.get(v, 0))
            idle = sorted(v.id for v in run.shared.network.operators if v.id not in ran)
            console.print(f"  minutes {part * MINUTES_PER_FILE}-{(part + 1) * MINUTES_PER_FILE}: operators that ran "
                          f"{', '.join(ran) or 'none'}; switched off: {', '.join(idle) or 'none'} "
                          f"({time.monotonic() - started:.1f} s)")
    finally:
        stream.stop()
    table = Table(title="Rows each user received while each file was processed")
    for column in ("user", "query", *[f"minutes {p * MINUTES_PER_FILE}-{(p + 1) * MINUTES_PER_FILE}"
                                      for p in range(FILES)]):
        table.add_column(column, justify="left" if column in ("user", "query") else "right")
    for q in queries:
        for user in q.users:
            per_batch = _rows_per_batch(workdir / "network-out" / user / q.id)
            table.add_row(user, q.id, *[str(sum(n for b, n in per_batch.items() if b in batches[p]))
                                        for p in range(FILES)])
    console.print(table)
    console.print("nurse_kim lost CQ1 at 10:10 (her terminal switch); CQ2 lost every user at 10:10, so its own "
                  "operators stopped, and dr_lee regained it at 10:20 without a restart.")


def _rows_per_batch(folder: Path) -> dict[int, int]:
    """Rows the terminal switch wrote per micro-batch (``batch=N`` folders of JSON lines;
    ``batch=N-g`` for group ``g`` of a query whose users' plans differ)."""
    counts: dict[int, int] = {}
    for part in folder.glob("batch=*/part-*.json"):
        batch = int(part.parent.name.removeprefix("batch=").partition("-")[0])
        counts[batch] = counts.get(batch, 0) + sum(1 for line in part.read_text().splitlines() if line.strip())
    return counts
