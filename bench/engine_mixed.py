"""Experiment 7, every mechanism at once: a secured mixed network against the same queries unsecured.

The catalog (:data:`MIXED`) joins the hospital of ``tests/test_network_mechanisms.py``
and the cloud audit of ``streamwarden/demo/cloud.yaml``:

* ``HeartRate`` is punctuated: each patient's own policies arrive inline as SPs
  (:func:`streamwarden.datagen.punctuated.health_records`), read by a Python data source
  and enforced by a shield per provider (``transformWithStateInPandas``, a Python
  stateful processor);
* ``Ward`` is governed by role policies, one of them tied to a live action (nurses see
  the ward while their rounds last), the other masking the temperature for GPs;
* ``MessageLog`` carries security levels (each tuple at its sender's company,
  :func:`streamwarden.datagen.cloud.message_log`); one user is cleared for ``[T, T]``,
  one for ``[1, ⊥]``.

Three queries, one per stream, two users each (:data:`MIXED_QUERIES`). Users with
different roles or clearances get different plans, so the secured network runs six
pipelines. Configurations, each started once with a processing-time trigger, fed a
warm-up chunk, then ``mixed_chunks`` chunks of ``chunk_minutes`` minutes of all three
streams, one at a time (land, ``processAllAvailable``, wait until idle):

* *secured*: the ``NetworkRuntime`` on :data:`MIXED`;
* *unsecured network*: the same runtime and queries on :data:`UNSECURED` (the same
  streams without SPs, policies, actions or levels: only grants decide, one pipeline per
  query);
* *plain*: the three queries by hand with ``readStream``/``writeStream``.

Throughput: input records (SP records included) per second of wall time from landing a
chunk until every query is idle again, and per CPU second of every process. With
``mixed_alone``, a diagnostic after the rounds: each query alone in a network (secured
and unsecured) over the same chunks, so the secured network's cost can be told apart by
query (shields, role policies, levels).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.datagen.cloud import message_log
from streamwarden.datagen.punctuated import health_records

from bench.cost_meter import CostMeter
from bench.deployments import Deployment, start_network, start_plain
from bench.network_workload import START, iso, land
from bench.stats import median, ratio

MIXED = """
lattice:
  classes: {COI1: ["1", "2"], COI2: [A, B, C]}
streams:
  HeartRate:
    schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}
    key: Patient_id
    punctuated_by: Patient_id
  Ward: {schema: {ts: timestamp, bed: int, temp: double}}
  MessageLog:
    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, outcome: string}
    level: {from: sender}
roles: {E: {}, D: {inherits: [E]}, ND: {inherits: [E]}, DM: {inherits: [E]}, C: {inherits: [D]}, GP: {inherits: [D]}}
users:
  gus: {roles: [GP], clearance: "[T, T]"}
  nina: {roles: [ND], clearance: "[T, T]"}
  c1: {roles: [E], clearance: "[1, ⊥]"}
actions: {rounds: {start: "2026-03-01T10:00:00Z", end: null}}
policies:
  - {id: nurses_on_rounds, subject: ND, streams: [Ward], privilege: read, time: ["start(rounds)", "end(rounds)"]}
  - {id: gps_ward, subject: GP, streams: [Ward], attributes: [bed], privilege: read}
"""
UNSECURED = """
streams:
  HeartRate: {schema: {ts: timestamp, Patient_id: int, Beats_per_min: int}}
  Ward: {schema: {ts: timestamp, bed: int, temp: double}}
  MessageLog:
    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, outcome: string}
users: {gus: {}, nina: {}, c1: {}}
"""
MIXED_QUERIES = """
queries:
  - {id: beats, users: [gus, nina], query: "SELECT Patient_id, Beats_per_min FROM HeartRate WHERE Beats_per_min > 60"}
  - {id: ward, users: [gus, nina], query: "SELECT bed, temp FROM Ward WHERE bed < 8"}
  - {id: sends, users: [gus, c1], query: "SELECT serviceId, sender, outcome FROM MessageLog WHERE msgType = 'send'"}
"""
STREAMS = ("HeartRate", "Ward", "MessageLog")
SCHEMAS = {"HeartRate": "ts TIMESTAMP, Patient_id INT, Beats_per_min INT", "Ward": "ts TIMESTAMP, bed INT, temp DOUBLE",
           "MessageLog": "ts TIMESTAMP, serviceId STRING, msgType STRING, sender STRING, receiver STRING, "
                         "outcome STRING"}
SECURED, UNSECURED_NETWORK, PLAIN = "secured network", "unsecured network", "plain"
CONFIGS = (SECURED, UNSECURED_NETWORK, PLAIN)


def mixed_data(settings: Any) -> list[dict[str, list[dict]]]:
    """The three streams in ``1 + mixed_chunks`` chunks of ``chunk_minutes`` minutes each (by event time)."""
    chunks = 1 + settings.mixed_chunks
    minutes = chunks * settings.chunk_minutes
    heart = health_records(patients=settings.patients, minutes=minutes, interval_s=settings.heart_interval_s,
                           changes=settings.policy_changes, seed=settings.seed)["HeartRate"]
    ward = [{"ts": iso(START + timedelta(seconds=s)), "bed": bed, "temp": round(36.5 + ((s + bed) % 9) * 0.25, 2)}
            for s in range(0, minutes * 60, settings.ward_interval_s) for bed in range(settings.beds)]
    log = message_log(minutes=minutes, services=6, rate_per_s=settings.log_rate_per_s, seed=settings.seed).records
    bounds = [iso(START + timedelta(minutes=k * settings.chunk_minutes))[:19] for k in range(chunks)] + ["9999"]
    out = []
    for k in range(chunks):
        def part(rows: list[dict]) -> list[dict]:
            return [r for r in rows if bounds[k] <= r["ts"][:19] < bounds[k + 1]]
        out.append({"HeartRate": part(heart), "Ward": part(ward), "MessageLog": part(log)})
    return out


def plain_frames(spark: SparkSession, inputs: dict[str, Path]) -> dict[str, Callable[[], DataFrame]]:
    """The three queries by hand (SP records have no ``Beats_per_min``: the selection drops them)."""
    def read(stream: str) -> DataFrame:
        return spark.readStream.schema(SCHEMAS[stream]).json(str(inputs[stream]))
    return {
        "beats": lambda: read("HeartRate").filter(F.col("Beats_per_min") > 60).select("Patient_id", "Beats_per_min"),
        "ward": lambda: read("Ward").filter(F.col("bed") < 8).select("bed", "temp"),
        "sends": lambda: read("MessageLog").filter(F.col("msgType") == "send").select("serviceId", "sender",
                                                                                       "outcome"),
    }


def _start(spark: SparkSession, config: str, folder: Path, inputs: dict[str, Path], trigger: str,
           only: str | None = None) -> Deployment:
    """``config`` over every query, or over query ``only`` alone."""
    if config == PLAIN:
        frames = plain_frames(spark, inputs)
        return start_plain(folder, {q: f for q, f in frames.items() if only in (None, q)}, trigger=trigger)
    catalog = load_catalog_text(MIXED if config == SECURED else UNSECURED, f"<bench {config}>")
    registered = [q for q in load_queries_text(MIXED_QUERIES, catalog) if only in (None, q.id)]
    return start_network(spark, folder, inputs, catalog, registered, trigger=trigger)


def _delivered(d: Deployment) -> dict[str, int]:
    """Rows in each output (``user/query`` or query), counted from the files."""
    pattern = "batch=*/part-*" if d.runtime is not None else "part-*"
    counts = {}
    for target, folder in d.targets.items():
        counts[target] = sum(sum(1 for line in path.open(encoding="utf-8")
                                 if line.strip() and not line.startswith('{"kind"'))
                             for path in folder.glob(pattern))
    return counts


def _per_query(d: Deployment) -> dict[str, dict[str, float]]:
    """Per streaming query, from its progress reports: its first micro-batch (the start: state
    stores, Python workers) and the median of its later micro-batches with input (ms)."""
    out = {}
    for stream in d.streams:
        reports = stream.recentProgress
        later = [r for r in reports if r["batchId"] > 0 and r["numInputRows"]]
        first = [r["durationMs"].get("triggerExecution", 0) for r in reports if r["batchId"] == 0]
        out[stream.name] = {"first_batch_ms": float(sum(first)), "batches": len(later),
                            "trigger_ms": median([float(r["durationMs"].get("triggerExecution", 0)) for r in later]),
                            "add_batch_ms": median([float(r["durationMs"].get("addBatch", 0)) for r in later]),
                            "rows_per_batch": median([float(r["numInputRows"]) for r in later])}
    return out


def run_config(spark: SparkSession, config: str, folder: Path, chunks: list[dict[str, list[dict]]],
               settings: Any, only: str | None = None) -> dict[str, Any]:
    meter = CostMeter(spark)
    inputs = {stream: folder / "in" / stream for stream in STREAMS}
    for path in inputs.values():
        path.mkdir(parents=True, exist_ok=True)
    trigger_s = settings.trigger_ms / 1000
    d = _start(spark, config, folder, inputs, f"{settings.trigger_ms} milliseconds", only)
    per_chunk = []
    try:
        for k, chunk in enumerate(chunks):
            mark = meter.mark()
            for stream, rows in chunk.items():
                land(inputs[stream], f"part-{k:05d}.jsonl", rows)
            d.process_all_available()
            d.settle(trigger_s)
            cost = meter.since(mark)
            if k or not settings.warm_up:  # the first chunk warms up
                records = sum(len(rows) for rows in chunk.values())
                per_chunk.append({"records": records, **cost.as_dict()})
        delivered = _delivered(d)
        pipelines = len(d.streams)
        per_query = _per_query(d)
    finally:
        d.stop()
    records = sum(c["records"] for c in per_chunk)
    wall = sum(c["wall_s"] for c in per_chunk)
    cpu = sum(c["cpu_s"] for c in per_chunk)
    return {"records": records, "wall_s": wall, "cpu_s": cpu, "records_per_s": ratio(records, wall),
            "records_per_cpu_s": ratio(records, cpu),
            "workers_cpu_s": sum(c["workers_cpu_s"] for c in per_chunk),
            "jobs": sum(c["jobs"] for c in per_chunk), "tasks": sum(c["tasks"] for c in per_chunk),
            "jvm_threads_s": {kind: sum(c["jvm_threads_s"][kind] for c in per_chunk)
                              for kind in (per_chunk[0]["jvm_threads_s"] if per_chunk else {})},
            "python_workers": per_chunk[-1]["python_workers"] if per_chunk else 0, "pipelines": pipelines,
            "delivered": delivered, "per_query": per_query}


def mixed(spark: SparkSession, settings: Any, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Every configuration, ``settings.mixed_rounds`` rounds (order reversed every other round)."""
    chunks = mixed_data(settings)
    configs = tuple(settings.mixed_configs)
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    count = 0
    for rnd in range(settings.mixed_rounds):
        for config in reversed(configs) if rnd % 2 else configs:
            count += 1
            began = time.perf_counter()
            runs[config].append(run_config(spark, config, workdir / f"mixed-{count:03d}", chunks, settings))
            r = runs[config][-1]
            log(f"  mixed network, {config}: {r['records_per_s']:,.0f} records/s, {r['records_per_cpu_s']:,.0f} "
                f"per CPU s, {r['pipelines']} queries ({time.perf_counter() - began:.0f} s)")
    out: dict[str, Any] = {"records_per_chunk": {s: round(median([len(c[s]) for c in chunks[1:]])) for s in STREAMS},
                           "chunks": settings.mixed_chunks, "rounds": settings.mixed_rounds, "configurations": {}}
    for config, rs in runs.items():
        out["configurations"][config] = {
            **{key: median([r[key] for r in rs]) for key in ("records_per_s", "records_per_cpu_s", "wall_s", "cpu_s",
                                                             "workers_cpu_s", "jobs", "tasks")},
            "records": rs[0]["records"], "pipelines": rs[0]["pipelines"], "python_workers": rs[-1]["python_workers"],
            "delivered": rs[0]["delivered"], "round_records_per_s": [r["records_per_s"] for r in rs],
            "per_query": rs[-1]["per_query"],
            "jvm_threads_s": {kind: median([r["jvm_threads_s"][kind] for r in rs]) for kind in rs[0]["jvm_threads_s"]},
        }
    if settings.mixed_alone:  # a diagnostic, after the rounds: each query alone, secured and not
        out["alone"] = {}
        for qid in ("beats", "ward", "sends"):
            for config in (SECURED, UNSECURED_NETWORK):
                count += 1
                r = run_config(spark, config, workdir / f"mixed-{count:03d}", chunks, settings, only=qid)
                out["alone"].setdefault(qid, {})[config] = {k: r[k] for k in ("cpu_s", "wall_s", "records_per_s",
                                                                             "workers_cpu_s", "jobs", "tasks",
                                                                             "pipelines")}
            log(f"  mixed network, {qid} alone: " + ", ".join(
                f"{c} {v['cpu_s']:.1f} s CPU" for c, v in out["alone"][qid].items()))
    return out


__all__ = ["CONFIGS", "MIXED", "MIXED_QUERIES", "PLAIN", "SECURED", "UNSECURED", "UNSECURED_NETWORK", "mixed",
           "mixed_data"]
