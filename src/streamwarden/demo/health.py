"""The health scenario of security punctuations: patients stream their own policies.

Fig. 6's streams (HeartRate, BodyTemperature, BreathingRate) arrive in micro-batches;
every patient is a provider (``punctuated_by: Patient_id``) whose policy travels inline
with their readings and changes mid-stream. Each user's continuous query runs through
the Security Shield; the demo prints what each received, what was hidden (attributes
NULL) or withheld, and how one patient's policy change showed up in the results.
"""

from __future__ import annotations

import shutil
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.datagen.punctuated import health_records, write_jsonl
from streamwarden.demo.quiet import step
from streamwarden.engine.execute import build_job, unsecured_frame
from streamwarden.engine.session import get_spark
from streamwarden.engine.sinks import read_sink, start_stream
from streamwarden.explain import shields_of
from streamwarden.security.passes import secure

if TYPE_CHECKING:  # the engine holds the session; the demo only passes it on
    from pyspark.sql import SparkSession

QUERIES = [
    ("carol", "cardiologist", "SELECT ts, Patient_id, Beats_per_min FROM HeartRate"),
    ("gus", "general physician", "SELECT ts, Patient_id, Temperature FROM BodyTemperature WHERE Temperature > 99"),
    ("nina", "nurse on duty", "SELECT ts, Patient_id, Frequency, Depth FROM BreathingRate"),
    ("dave", "doctor", "SELECT h.ts, h.Patient_id, Beats_per_min, Temperature FROM HeartRate AS h [RANGE 30 seconds], "
                       "BodyTemperature AS b [RANGE 30 seconds] WHERE h.Patient_id = b.Patient_id"),
]
BATCHES = 3


def run_health_demo(workdir: Path, console: Console, *, patients: int = 8, minutes: float = 10.0) -> None:
    data, staging = workdir / "health", workdir / "health-staging"
    records = health_records(patients=patients, minutes=minutes, interval_s=10.0, changes=2)
    for stream, rows in records.items():  # each stream in BATCHES files, fed one after another
        size = -(-len(rows) // BATCHES)
        for part in range(BATCHES):
            write_jsonl(rows[part * size:(part + 1) * size], staging / stream / f"part-{part:05d}.jsonl")
        (data / stream).mkdir(parents=True, exist_ok=True)
    sps = sum(1 for rows in records.values() for r in rows if r.get("kind") == "sp")
    console.print(f"generated {sum(map(len, records.values())) - sps} readings of {patients} patients and {sps} "
                  f"security punctuations (each patient changes policy twice)")
    catalog = load_catalog_text(resources.files("streamwarden.demo").joinpath("health.yaml").read_text(),
                                "streamwarden/demo/health.yaml")
    store = CatalogStore(sqlite_url(workdir / "health-catalog.db"))
    store.save(catalog)
    spark = get_spark()
    inputs = {stream: str(data / stream) for stream in records}
    step(console, f"starting {len(QUERIES)} continuous queries, each through the Security Shield")
    streams = {}
    for user, _role, query in QUERIES:
        rewriting = secure(catalog, user, query)
        for shield in shields_of(rewriting):
            console.print(f"  {user}: shield {shield.id} on {shield.relation} [{shield.placement}] — {shield.reason}")
        used = {s: inputs[s] for s in inputs if s in query}
        job = build_job(spark, catalog, rewriting, used, streaming=True, store_url=store.url)
        streams[user] = (rewriting, used,
                         start_stream(job, str(workdir / "out" / user), workdir / "checkpoints" / user))
    for part in range(BATCHES):
        for name in records:
            shutil.copy(staging / name / f"part-{part:05d}.jsonl", data / name)
        step(console, f"  file {part + 1}/{BATCHES} of every stream arrived; the queries process it")
        started = time.monotonic()
        for _, _, running in streams.values():
            running.processAllAvailable()
        console.print(f"  file {part + 1}/{BATCHES} of every stream processed by {len(streams)} continuous queries "
                      f"in {time.monotonic() - started:.1f} s")
    step(console, "comparing with the same queries without access control")
    table = Table(title="What each user received from the patients' own policies")
    for column in ("user", "role", "rows delivered", "attributes hidden", "rows withheld"):
        table.add_column(column, justify="left" if column in ("user", "role") else "right")
    for (user, role, _query), (rewriting, used, running) in zip(QUERIES, streams.values()):
        running.stop()
        sink = workdir / "out" / user
        rows = read_sink(spark, sink) if any(sink.glob("*.json")) else []
        hidden = sum(1 for r in rows for k, v in r.items() if v is None and not k.startswith("_"))
        unsecured = unsecured_frame(spark, catalog, rewriting, used).count()
        table.add_row(user, role, str(len(rows)), str(hidden), str(unsecured - len(rows)))
    console.print(table)
    _policy_change(console, records["HeartRate"], workdir / "out" / "carol", spark)


def _policy_change(console: Console, heart: list[dict], sink: Path, spark: SparkSession) -> None:
    """One patient's HeartRate policies over time, and what carol received under each."""
    delivered = {(r["Patient_id"], r["ts"]) for r in read_sink(spark, sink)} if any(sink.glob("*.json")) else set()
    patient = heart[0]["Patient_id"]
    policies: dict[str, list[str]] = {}
    for r in heart:
        if r.get("Patient_id") == patient and r.get("kind") == "sp":
            policies.setdefault(r["ts"], []).append(f"{r['sign']}{r['streams']}/{r['tuples']}/{r['attributes']}"
                                                    f"→{r['roles']}")
    console.print(f"patient {patient}'s policies for HeartRate, and carol's (cardiologist) share under each "
                  "(an SP written sign streams/tuples/attributes→roles: + grants, - denies, * is any):")
    for ts, sps in policies.items():
        readings = [r for r in heart if r.get("Patient_id") == patient and r.get("sp_ts") == ts]
        seen = sum(1 for r in readings if (patient, r["ts"]) in delivered)
        console.print(f"  from {ts}: {escape('; '.join(sps))} — {seen} of {len(readings)} readings with the id "
                      "delivered")
