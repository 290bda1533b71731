"""The continuous benchmark's baseline: the users' queries by hand, one plain PySpark streaming query, no streamwarden.

    python -m bench.network_latency_plain INPUT_DIR QUERIES.json OUT_DIR CHECKPOINT TRIGGER_MS SPARK_CONF.json

Each entry ``{"user", "query", "ward", "above"}`` of ``QUERIES.json`` is one user's query
``SELECT ts, sensor, value FROM Readings WHERE value > above`` over the readings of her ward
(what the role policy ``Readings.ward = self.ward`` lets her read). By hand, the queries are
a small table broadcast and joined with the stream on the ward (``value > above`` in the
join condition): one streaming query over the folder, with a processing-time trigger of
``TRIGGER_MS``. Each micro-batch (``foreachBatch``) writes its rows in one write
partitioned by user, then moves each user's part into her folder and appends a line to her
delivery log, the layout a running network writes (:mod:`streamwarden.runtime.deliveries`)::

    OUT_DIR/<user>/<query>/batch=<N>/part-*.json
    OUT_DIR/<user>/<query>/_delivered.jsonl     {"batch": "batch=<N>", "rows": 12}

What a hand-written query need not do, it does not: no fsync, no replay-safe numbering, no
provenance columns. The settings are streamwarden's (``SPARK_CONF.json``, computed by the
caller). It says ``plain query running as 1 pipelines`` on standard error once started, runs
until SIGTERM or SIGINT, then stops the query and prints one JSON line with the rows it delivered.

    >>> _condition_text()
    'ward = qward AND value > above'
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SCHEMA = "ts TIMESTAMP, sensor STRING, ward STRING, value DOUBLE"
LOG = "_delivered.jsonl"


def _condition_text() -> str:
    return "ward = qward AND value > above"


def deliver(staged: Path, out: Path, batch_id: int, queries: Mapping[str, str]) -> int:
    """Move each user's part of a batch (``staged/user=<u>/``) into ``out/<u>/<query>/batch=<id>``
    and log it; the rows delivered.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp()); (root / "s" / "user=u1").mkdir(parents=True)
    >>> _ = (root / "s" / "user=u1" / "part-0.json").write_text('{"value": 1}\\n{"value": 2}\\n')
    >>> deliver(root / "s", root / "o", 3, {"u1": "q"}), (root / "o" / "u1" / "q" / LOG).read_text()
    (2, '{"batch": "batch=3", "rows": 2}\\n')
    """
    total = 0
    for part in sorted(staged.glob("user=*")):
        user = part.name.removeprefix("user=")
        rows = sum(p.read_bytes().count(b"\n") for p in part.iterdir() if p.name.startswith("part-"))
        if not rows:
            continue
        folder = out / user / queries[user]
        folder.mkdir(parents=True, exist_ok=True)
        name = f"batch={batch_id}"
        shutil.rmtree(folder / name, ignore_errors=True)
        part.rename(folder / name)
        with open(folder / LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"batch": name, "rows": rows}) + "\n")
        total += rows
    return total


def start(spark: Any, folder: str, queries: Sequence[Mapping[str, Any]], out: Path, checkpoint: str,
          trigger_ms: int) -> tuple[Any, list[int]]:
    """The streaming query, started; and the rows delivered so far (one number, updated per batch)."""
    from pyspark.sql import functions as F

    table = F.broadcast(spark.createDataFrame([(q["user"], q["ward"], float(q["above"])) for q in queries],
                                              "user STRING, qward STRING, above DOUBLE"))
    readings = spark.readStream.schema(SCHEMA).json(folder)
    selected = readings.join(table, F.expr(_condition_text())).select("user", "ts", "sensor", "value")
    folders = {q["user"]: q["query"] for q in queries}
    delivered = [0]

    def each_batch(batch: Any, batch_id: int) -> None:
        staged = out / ".staging" / str(batch_id)
        shutil.rmtree(staged, ignore_errors=True)
        batch.write.partitionBy("user").json(str(staged))
        delivered[0] += deliver(staged, out, batch_id, folders)
        shutil.rmtree(staged, ignore_errors=True)

    query = (selected.writeStream.foreachBatch(each_batch).option("checkpointLocation", checkpoint)
             .trigger(processingTime=f"{trigger_ms} milliseconds").start())
    return query, delivered


def main(argv: Sequence[str]) -> int:
    if len(argv) != 6:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    folder, queries_file, out, checkpoint, trigger_ms, conf = argv
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stopping.set())
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("plain latency")
    for key, value in json.loads(conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    query, delivered = start(spark, folder, queries, Path(out), checkpoint, int(trigger_ms))
    print("plain query running as 1 pipelines", file=sys.stderr, flush=True)
    while not stopping.wait(0.5):
        if not query.isActive:
            print(f"the plain query stopped: {query.exception()}", file=sys.stderr)
            return 1
    try:
        query.stop()  # a batch in flight is interrupted: the run is over, what it delivered is counted
        spark.stop()  # the JVM exits once this Python does; the driver reaps it and counts its time
    except Exception:  # noqa: BLE001 (stopping on the way out: nothing left to save)
        pass
    print(json.dumps({"rows_out": delivered[0]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
