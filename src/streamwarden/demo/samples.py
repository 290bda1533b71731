"""The files README's commands name, left by ``streamwarden demo`` in its folder.

README's examples run in the demo's folder (``cd .streamwarden/demo`` after ``make
demo``), so everything they read is here, under the names they use:

* ``drill.yaml``: the drill's catalog (the demo's, with the captain's policy);
  ``data/Position``, ``data/Health``: the drill's recorded files (written by the demo
  before this); ``incoming/Position``: the first of them, for ``streamwarden run``
  (copy more in while it runs);
* ``cloud.yaml`` and ``data/MessageLog.jsonl``: the cloud-auditing catalog and log;
* ``health.yaml`` and ``data/HeartRate.jsonl``: patients who stream their own policies
  (security punctuations) with their heart rates, four patients for five minutes;
* ``c.yaml``, ``QUERIES.yaml`` (README's ``q1`` for ``ann`` and ``bob``),
  ``MORE.yaml`` (a query registered later), ``ACCESS.jsonl``, ``s1.jsonl``, ``s2.jsonl`` and the
  folders ``in/s1``, ``in/s2``:
  a shared network's catalog, queries, access changes and inputs.

Nothing here needs Spark.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

from streamwarden.datagen.punctuated import health_records
from streamwarden.demo.cloud import audit_log
from streamwarden.demo.network import FILES, MINUTES_PER_FILE, readings

#: README's network section: its catalog (Stream1 and Stream2 of the demo's network) ...
NETWORK_CATALOG = """\
# README's shared-network examples (streamwarden demo wrote this): wearables report heart
# rates (Stream1), vehicles their speed (Stream2); ann and bob are granted access to q1.
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, location: string, heartRate: int}}
  Stream2: {schema: {ts: timestamp, streamid: int, location: string, speed: double}}
users:
  ann: {}
  bob: {}
"""
#: ... its QUERIES.yaml, as README shows it ...
NETWORK_QUERIES = """\
# QUERIES.yaml
queries:
  - {id: q1, users: [ann, bob], query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 [RANGE 5 min SLIDE 1 min], Stream2 AS s2 [RANGE 5 min SLIDE 1 min] WHERE s1.location = s2.location AND s2.speed < 30"}
"""  # noqa: E501  # README's QUERIES.yaml, line for line
#: ... a second query registered later (docs/cli.md's MORE.yaml) ...
MORE_QUERIES = """\
# MORE.yaml: registered into a running network
queries:
  - {id: q2, users: [bob], query: "SELECT streamid, speed FROM Stream2 WHERE speed < 30"}
"""
#: ... and the access changes of a replay: ann from the start until 10:15, bob from 10:10.
ACCESS = [
    {"ts": "2026-03-01T10:00:00Z", "query": "q1", "user": "ann", "sign": "+"},
    {"ts": "2026-03-01T10:10:00Z", "query": "q1", "user": "bob", "sign": "+"},
    {"ts": "2026-03-01T10:15:00Z", "query": "q1", "user": "ann", "sign": "-"},
]

#: What :func:`write_samples` leaves, for the demo's closing lines.
NAMES = ("drill.yaml", "data/", "incoming/", "cloud.yaml", "c.yaml", "QUERIES.yaml", "ACCESS.jsonl",
         "s1.jsonl", "s2.jsonl", "in/")


def write_samples(workdir: Path) -> None:
    """Write README's files into ``workdir``, whose ``data/Position`` the drill has filled."""
    demo = resources.files("streamwarden.demo")
    (workdir / "drill.yaml").write_text(demo.joinpath("drill.yaml").read_text())
    incoming = workdir / "incoming" / "Position"
    incoming.mkdir(parents=True, exist_ok=True)
    for first in sorted((workdir / "data" / "Position").glob("*.jsonl"))[:1]:
        shutil.copy(first, incoming / first.name)
    (workdir / "cloud.yaml").write_text(demo.joinpath("cloud.yaml").read_text())
    _jsonl(workdir / "data" / "MessageLog.jsonl", audit_log().records)
    (workdir / "health.yaml").write_text(demo.joinpath("health.yaml").read_text())
    _jsonl(workdir / "data" / "HeartRate.jsonl", health_records(patients=4, minutes=5, changes=1)["HeartRate"])
    (workdir / "c.yaml").write_text(NETWORK_CATALOG)
    (workdir / "QUERIES.yaml").write_text(NETWORK_QUERIES)
    (workdir / "MORE.yaml").write_text(MORE_QUERIES)
    _jsonl(workdir / "ACCESS.jsonl", ACCESS)
    data = readings(FILES * MINUTES_PER_FILE)
    for stream, short in (("Stream1", "s1"), ("Stream2", "s2")):
        rows = data[stream]
        _jsonl(workdir / f"{short}.jsonl", rows)
        _jsonl(workdir / "in" / short / "part-00000.jsonl", rows[:len(rows) // FILES])  # the first ten minutes


def _jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
