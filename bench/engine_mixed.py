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
pipelines. Configurations (:data:`CONFIGS`), each a pipeline of :mod:`bench.network_engine`
that starts it with a processing-time trigger, feeds it a warm-up chunk, then ``chunks``
chunks of all three streams (prepared once), one at a time (land, ``processAllAvailable``,
wait until idle), and stops it:

* *secured network*: the ``NetworkRuntime`` on :data:`MIXED`;
* *unsecured network*: the same runtime and queries on :data:`UNSECURED` (the same
  streams without SPs, policies, actions or levels: only grants decide, one pipeline per
  query);
* *plain*: the three queries by hand with ``readStream``/``writeStream``.

Throughput: input records (SP records included) per second of wall time from landing a
chunk until every query is idle again, and per CPU second of every process. With
``only``, one query alone in a network (secured or unsecured), so the secured network's
cost can be told apart by query (shields, role policies, levels).

    >>> [len(c["Ward"]) for c in mixed_data(MixedSizes(chunks=1, chunk_minutes=1, patients=2, beds=2))]
    [60, 60]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.datagen.cloud import message_log
from streamwarden.datagen.punctuated import health_records

from bench.cost_meter import CostMeter
from bench.deployments import Deployment, start_network, start_plain
from bench.engine_profile import input_folders, land_prepared, write_prepared
from bench.network_workload import START, iso
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
QUERIES = ("beats", "ward", "sends")


@dataclass(frozen=True)
class MixedSizes:
    """The mixed streams: ``1 + chunks`` chunks (the first warms up) of ``chunk_minutes`` each."""

    chunks: int = 3
    chunk_minutes: int = 3
    patients: int = 20
    heart_interval_s: float = 1.0
    policy_changes: int = 2
    beds: int = 10
    ward_interval_s: int = 2
    log_rate_per_s: float = 6.0
    seed: int = 12


def mixed_data(sizes: MixedSizes) -> list[dict[str, list[dict]]]:
    """The three streams in ``1 + chunks`` chunks of ``chunk_minutes`` minutes each (by event time)."""
    chunks = 1 + sizes.chunks
    minutes = chunks * sizes.chunk_minutes
    heart = health_records(patients=sizes.patients, minutes=minutes, interval_s=sizes.heart_interval_s,
                           changes=sizes.policy_changes, seed=sizes.seed)["HeartRate"]
    ward = [{"ts": iso(START + timedelta(seconds=s)), "bed": bed, "temp": round(36.5 + ((s + bed) % 9) * 0.25, 2)}
            for s in range(0, minutes * 60, sizes.ward_interval_s) for bed in range(sizes.beds)]
    log = message_log(minutes=minutes, services=6, rate_per_s=sizes.log_rate_per_s, seed=sizes.seed).records
    bounds = [iso(START + timedelta(minutes=k * sizes.chunk_minutes))[:19] for k in range(chunks)] + ["9999"]

    def part(rows: list[dict], k: int) -> list[dict]:
        return [r for r in rows if bounds[k] <= r["ts"][:19] < bounds[k + 1]]

    return [{"HeartRate": part(heart, k), "Ward": part(ward, k), "MessageLog": part(log, k)} for k in range(chunks)]


def prepare(folder: Path, sizes: MixedSizes) -> dict[str, int]:
    """Every chunk of :func:`mixed_data` under ``folder``; the median records per measured chunk, by stream."""
    chunks = mixed_data(sizes)
    for k, chunk in enumerate(chunks):
        write_prepared(folder, k, chunk)
    return {stream: round(median([len(c[stream]) for c in chunks[1:]])) for stream in STREAMS}


def plain_frames(spark: SparkSession, inputs: Mapping[str, Path]) -> dict[str, Callable[[], DataFrame]]:
    """The three queries by hand (SP records have no ``Beats_per_min``: the selection drops them)."""
    def read(stream: str) -> DataFrame:
        return spark.readStream.schema(SCHEMAS[stream]).json(str(inputs[stream]))
    return {
        "beats": lambda: read("HeartRate").filter(F.col("Beats_per_min") > 60).select("Patient_id", "Beats_per_min"),
        "ward": lambda: read("Ward").filter(F.col("bed") < 8).select("bed", "temp"),
        "sends": lambda: read("MessageLog").filter(F.col("msgType") == "send").select("serviceId", "sender",
                                                                                       "outcome"),
    }


def _start(spark: SparkSession, config: str, folder: Path, inputs: Mapping[str, Path], trigger: str,
           only: str | None = None) -> Deployment:
    """``config`` over every query, or over query ``only`` alone."""
    if config == PLAIN:
        frames = plain_frames(spark, inputs)
        return start_plain(folder, {q: f for q, f in frames.items() if only in (None, q)}, trigger=trigger)
    catalog = load_catalog_text(MIXED if config == SECURED else UNSECURED, f"<bench {config}>")
    registered = [q for q in load_queries_text(MIXED_QUERIES, catalog) if only in (None, q.id)]
    return start_network(spark, folder, inputs, catalog, registered, trigger=trigger)


def _delivered(d: Deployment) -> dict[str, int]:
    """Rows in each output (``user/query`` or query), counted from the files (SP records left out)."""
    pattern = "batch=*/part-*" if d.runtime is not None else "part-*"
    return {target: sum(sum(1 for line in path.open(encoding="utf-8")
                            if line.strip() and not line.startswith('{"kind"')) for path in folder.glob(pattern))
            for target, folder in d.targets.items()}


def _per_query(d: Deployment) -> dict[str, float]:
    """Per query, from its pipelines' progress reports: the slowest pipeline's median micro-batch
    with input after the first, its ``addBatch``, and the slowest first micro-batch (the start:
    state stores, Python workers), in ms."""
    out: dict[str, float] = {}
    for qid in QUERIES:
        # a network names a pipeline's query "<query>-<plan>", a plain query is "plain-<query>-<folder>"
        reports = [s.recentProgress for s in d.streams
                   if (s.name or "").removeprefix("plain-").startswith(qid + "-")]
        if not reports:
            continue
        later = [[r for r in rs if r["batchId"] > 0 and r["numInputRows"]] for rs in reports]
        batch = [median([float(r["durationMs"].get("triggerExecution", 0)) for r in rs]) for rs in later]
        slowest = max(range(len(batch)), key=lambda i: batch[i])
        out[f"{qid}: batch ms"] = batch[slowest]
        out[f"{qid}: addBatch ms"] = median([float(r["durationMs"].get("addBatch", 0)) for r in later[slowest]])
        out[f"{qid}: first batch ms"] = max(float(sum(r["durationMs"].get("triggerExecution", 0) for r in rs
                                                      if r["batchId"] == 0)) for rs in reports)
    return out


def mixed_call(config: str, prepared: str, *, chunks: int, trigger_ms: int,
               only: str | None = None) -> Callable[[SparkSession, Path, Path], dict[str, float]]:
    """The pipeline of ``config`` (over query ``only`` alone when given) over the chunks prepared
    under ``work/prepared``: throughput and cost over the measured chunks."""
    def call(spark: SparkSession, work: Path, out: Path) -> dict[str, float]:
        meter, inputs, trigger_s = CostMeter(spark), input_folders(out, STREAMS), trigger_ms / 1000
        records = sum(sum(1 for _ in (work / prepared / s / f"part-{k:05d}.jsonl").open()) for s in STREAMS
                      for k in range(1, 1 + chunks))
        d = _start(spark, config, out, inputs, f"{trigger_ms} milliseconds", only)
        try:
            for k in range(1 + chunks):  # chunk 0 warms up
                if k == 1:
                    mark = meter.mark()
                land_prepared(work / prepared, inputs, k)
                d.process_all_available()
                d.settle(trigger_s)
            cost = meter.since(mark)
            delivered, per_query, pipelines = _delivered(d), _per_query(d), len(d.streams)
        finally:
            d.stop()
        return {"records": records, "records_per_s": ratio(records, cost.wall_s),
                "records_per_cpu_s": ratio(records, cost.cpu_s), "chunks_wall_s": cost.wall_s,
                "chunks_cpu_s": cost.cpu_s, "workers_cpu_s": max(cost.workers_cpu_s, 0.0), "jobs": cost.jobs,
                "tasks": cost.tasks, "pipelines": pipelines, "python_workers": cost.python_workers,
                "rows_out": sum(delivered.values()), **{f"delivered: {t}": n for t, n in delivered.items()},
                **per_query, **{f"thread ms: {kind}": 1000 * s for kind, s in cost.jvm_threads_s.items()}}
    return call


__all__ = ["CONFIGS", "MIXED", "MIXED_QUERIES", "MixedSizes", "PLAIN", "QUERIES", "SECURED", "UNSECURED",
           "UNSECURED_NETWORK", "mixed_call", "mixed_data", "prepare"]
