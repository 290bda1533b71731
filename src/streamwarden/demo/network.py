"""The smart-healthcare network: two queries share operators, users lose and regain access.

Zaki et al.'s CQ1 and CQ2, and CQ3 over two hospitals' bedside monitors, run as one
network (the runtime: a pipeline per query, level and plan, each on Spark's own
streaming operators), with every mechanism at once: the monitors carry their patients'
security punctuations, the hospitals sit on either side of a level boundary, and the
grants of the authorization server decide who receives what. The demo feeds the streams
ten minutes at a time and, between files, changes things while the network keeps
running: a nurse loses CQ1 (partial loss: the terminal switch stops her rows), every
user of CQ2 loses it (total loss: its pipelines stop once nobody can receive them),
the doctor gets CQ2 back (it resumes from its checkpoint), and the hospitals load new
role policies (only CQ3's pipelines restart). It prints the paper's network with its
switches, which pipelines ran for each file, and what each user received.
"""

from __future__ import annotations

import json
import random
import time
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.table import Table

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.demo.quiet import step
from streamwarden.engine.session import get_spark
from streamwarden.papers.network.draw import draw
from streamwarden.papers.network.optimizer import network_text, shared_network
from streamwarden.papers.network.switches import place_switches
from streamwarden.runtime.network import NetworkRuntime

START = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
FILES = 3
MINUTES_PER_FILE = 10
# (before file, change): the authorization server's decisions, stamped at the file's start.
CHANGES = {
    0: [("grant", "CQ1", "dr_lee"), ("grant", "CQ1", "nurse_kim"), ("grant", "CQ2", "dr_lee"),
        ("grant", "CQ2", "wellness_app"), ("grant", "CQ3", "dr_lee"), ("grant", "CQ3", "nurse_kim"),
        ("grant", "CQ3", "dr_sato")],
    1: [("revoke", "CQ1", "nurse_kim"), ("revoke", "CQ2", "dr_lee"), ("revoke", "CQ2", "wellness_app")],
    2: [("grant", "CQ2", "dr_lee")],
}
# Before the last file the hospitals change policy while the network runs: role policies on the
# monitors, on top of the patients' SPs; nurses no longer see pulses (so CQ3 gives them nothing).
POLICY_CHANGE = 2
NEW_POLICIES = """
policies:
  - {id: doctors_vitals, subject: Doctor, streams: [Vitals], privilege: read}
  - {id: nurses_vitals, subject: Nurse, streams: [Vitals], attributes: [patient, hospital], privilege: read}
"""
# Patients 1-3 lie in the north hospital, 4-6 in the south; 3 and 6 let only doctors read them.
PATIENTS = {1: ("north", "{Doctor, Nurse}"), 2: ("north", "{Doctor, Nurse}"), 3: ("north", "Doctor"),
            4: ("south", "{Doctor, Nurse}"), 5: ("south", "{Doctor, Nurse}"), 6: ("south", "Doctor")}


def readings(minutes: int, seed: int = 3) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    places = ["ward-a", "ward-b", "street-1", "street-2"]
    out: dict[str, list[dict]] = {"Stream1": [], "Stream2": [], "Stream3": [], "Vitals": []}
    for second in range(0, minutes * 60, 20):
        ts = START + timedelta(seconds=second)
        for device in range(4):
            where = rng.choice(places)
            text = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
            out["Stream1"].append({"ts": text, "streamid": device, "location": where,
                                   "heartRate": rng.randint(55, 140)})
            out["Stream2"].append({"ts": text, "streamid": device, "location": rng.choice(places),
                                   "speed": round(rng.uniform(0, 60), 1)})
            out["Stream3"].append({"ts": text, "streamid": device, "location": rng.choice(places),
                                   "screentime": round(rng.uniform(0, 9), 1),
                                   "category": rng.choice(["social", "work"])})
        for patient, (hospital, _) in PATIENTS.items():
            out["Vitals"].append({"ts": text, "patient": patient, "hospital": hospital,
                                  "pulse": rng.randint(60, 140), "sp_ts": START.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                  "sp_csn": 1})
    return out


def patients_policies() -> list[dict]:
    """Each patient's monitor's security punctuation, sent ahead of its first reading."""
    return [{"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": roles, "sign": "+",
             "ts": START.strftime("%Y-%m-%dT%H:%M:%SZ"), "sn": 1, "patient": patient}
            for patient, (_, roles) in PATIENTS.items()]


def run_network_demo(workdir: Path, console: Console) -> None:
    catalog = load_catalog_text(resources.files("streamwarden.demo").joinpath("network.yaml").read_text(),
                                "streamwarden/demo/network.yaml")
    queries = load_queries_text(resources.files("streamwarden.demo").joinpath("network_queries.yaml").read_text(),
                                catalog, "streamwarden/demo/network_queries.yaml")
    data = readings(FILES * MINUTES_PER_FILE)
    inputs = {stream: workdir / "network" / stream for stream in data}
    for folder in inputs.values():
        folder.mkdir(parents=True, exist_ok=True)
    store = sqlite_url(workdir / "network-auth.db")
    server = AuthorizationServer(store)
    shared = shared_network(catalog, queries)  # the paper's view: operators, common prefix, switches
    placed = place_switches(shared.network)
    console.print(network_text(placed, shared), end="", markup=False)  # its levels are [north], not Rich tags
    picture = draw(placed, workdir / "network.png", title="CQ1, CQ2 and CQ3 (the paper's view)")
    console.print(f"network drawn to {picture}")
    runtime = NetworkRuntime(get_spark(), store, {s: str(p) for s, p in inputs.items()}, workdir / "network-out",
                             workdir / "network-checkpoint", trigger="1 second", queries=queries, catalog=catalog)
    step(console, "starting the network: one Spark streaming query per pipeline, a micro-batch a second")
    runtime.start()
    for pipeline in runtime.plan.pipelines:
        console.print(f"  pipeline {pipeline.name}: {pipeline.query.id} for {', '.join(pipeline.users)}", markup=False)

    def per_file(name: str) -> int:
        return len(data[name]) // FILES

    received: list[dict[tuple[str, str], int]] = []  # rows per (user, query) while each file was processed
    try:
        for part in range(FILES):
            stamp = START + timedelta(minutes=part * MINUTES_PER_FILE)
            for verb, query, user in CHANGES[part]:
                (server.grant if verb == "grant" else server.revoke)(query, user, stamp)
                console.print(f"  {stamp:%H:%M} {verb} {user} on {query} (the network keeps running)")
            if part == POLICY_CHANGE:
                previous = set(runtime.running)
                CatalogStore(store).save(load_catalog_text(catalog.text + NEW_POLICIES, "network.yaml (new)"))
                runtime.poll()
                console.print(f"  {stamp:%H:%M} new catalog: the hospitals add role policies on Vitals (nurses lose "
                              "pulse); restarted with a fresh state: "
                              f"{', '.join(sorted(set(runtime.running) - previous))}"
                              f"; untouched: {', '.join(sorted(set(runtime.running) & previous))}")
            runtime.poll()  # applies at the next micro-batch; a pipeline nobody can receive stops
            before = _delivered(runtime)
            for name, rows in data.items():
                chunk = rows[part * per_file(name):(part + 1) * per_file(name)]
                if name == "Vitals" and part == 0:
                    chunk = patients_policies() + chunk
                (inputs[name] / f"part-{part:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chunk))
            step(console, f"  minutes {part * MINUTES_PER_FILE}-{(part + 1) * MINUTES_PER_FILE}: a file of each stream "
                          "arrived; waiting for the pipelines' micro-batches")
            started = time.monotonic()
            runtime.process_all_available()
            after = _delivered(runtime)
            received.append({k: after.get(k, 0) - before.get(k, 0) for k in after})
            active = sorted(s.name or "" for s in runtime.streams if s.isActive)
            stopped = sorted(n for n in runtime.running if n not in active)
            console.print(f"  minutes {part * MINUTES_PER_FILE}-{(part + 1) * MINUTES_PER_FILE}: pipelines running "
                          f"{', '.join(active) or 'none'}; stopped: {', '.join(stopped) or 'none'} "
                          f"({time.monotonic() - started:.1f} s)")
        failed = {**runtime.failures(), **{g.name: g.failure for g in runtime.groups.values() if g.failure}}
    finally:
        runtime.stop()
    if failed:
        for name, why in sorted(failed.items()):
            console.print(f"  {name} failed: {why}", markup=False)
    else:
        console.print(f"  no pipeline or group failed: {len(runtime.running)} pipelines, {len(runtime.groups)} shared "
                      "groups ran to the end through every grant, revocation and policy change")
    table = Table(title="Rows each user received while each file was processed")
    for column in ("user", "query", *[f"minutes {p * MINUTES_PER_FILE}-{(p + 1) * MINUTES_PER_FILE}"
                                      for p in range(FILES)]):
        table.add_column(column, justify="left" if column in ("user", "query") else "right")
    for q in queries:
        for user in q.users:
            table.add_row(user, q.id, *[str(received[p].get((user, q.id), 0)) for p in range(FILES)])
    console.print(table)
    console.print("nurse_kim lost CQ1 at 10:10 (the terminal switch stops her rows). CQ2 lost every user at 10:10: "
                  "nobody received its rows from then on, and once a pipeline had emitted past 10:10 with no user "
                  "left to receive it, it stopped and did no work (wellness_app's, minutes 20-30); dr_lee "
                  "regained CQ2 at 10:20 without a restart, its windows still holding their partners. CQ3: dr_lee and "
                  "nurse_kim see only the north hospital's patients, dr_sato only the south's (the level "
                  "boundary), nurses only the patients whose own SPs name them, and from 10:20 (the new "
                  "policies) nurse_kim no pulses at all.")


def _delivered(runtime: NetworkRuntime) -> dict[tuple[str, str], int]:
    """Rows delivered so far per (user, query), over every pipeline of the query."""
    total: dict[tuple[str, str], int] = {}
    for running in runtime.running.values():
        for user, rows in running.rows.items():
            key = (user, running.pipeline.query.id)
            total[key] = total.get(key, 0) + rows
    return total
