"""streamwarden on a cluster: ``replay``, ``run`` and the shared network's ``network run`` on
``local-cluster[2,1,1024]`` give the rows they give in local mode, with executors whose
Python lacks streamwarden.

``local-cluster[n,c,m]`` starts a standalone master, n workers and n executor JVMs, each
with its own Python workers: a cluster's layout on one machine. PySpark from pip runs it
as installed: its launcher points ``SPARK_HOME`` at the package folder, whose ``jars/``
the workers start the executors from. The workers also keep each executor's folder
(logs, shipped files) under ``SPARK_HOME/work``, so the test gives them a ``SPARK_HOME``
of its own: links to the package's ``bin``, ``jars``, ... in a temporary folder.

The CLI runs in a subprocess (its own SparkSession, not the tests' shared one) through
``streamwarden.cli.main.main``, with ``PYTHONPATH`` unset and, for Spark's Python workers,
``--conf spark.pyspark.python=`` a bare virtualenv: PySpark and its dependencies (a
``.pth`` onto this venv's site-packages) but no streamwarden (the editable install's
``.pth`` is not read from there). Every streamwarden class Spark runs in a Python worker
must then come from the zip the session ships, and every JVM operator (the Security
Shield, its SP encoder, the line numbering of punctuated files, the continuous ``[ROWS n]``
window) from the jar it ships. A task also reports where it imported streamwarden from.

The same driver then runs a shared network as a user would: ``network register``, a
``grant`` per user (plain store writes, no Spark), and ``network run --available-now``.
Its one query reads the punctuated HeartRate through the shield into a ``[ROWS n]``
aggregate, for two users whose roles (the patients' policies) and grants differ: one
pipeline each, whose terminal switch (``foreachBatch``, in the driver) writes every
user's rows into ``DIR/<user>/<query>/``. Each user's rows and ``_access.json`` equal
local mode's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import DRILL_CATALOG, ROOT, ts, write_jsonl
from streamwarden.cli.main import main
from streamwarden.runtime.network import read_status, read_user_rows
from test_replay import POSITION

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

MASTER = "local-cluster[2,1,1024]"
HEALTH_CATALOG = ROOT / "examples" / "health.yaml"
SHIELDED = "SELECT Patient_id, Beats_per_min FROM HeartRate"  # gus (GP): a punctuated stream, through the shield
ROWS = "SELECT MAX(Pos) AS top FROM Position [ROWS 2]"  # paul: a count-based window
# The network: a count-based aggregate over the shielded stream. gus (GP) counts 120's and
# 122's readings, carol (C) 121's and 122's; gus's grant is open, carol's expires.
NETWORK_QUERY = "SELECT COUNT(*) AS n, MAX(Beats_per_min) AS top FROM HeartRate [ROWS 3]"
NETWORK_USERS = ("gus", "carol")

# The CLI commands, run in the cluster's driver process one after the other (one session:
# a local-cluster takes its time to start), then where its executors import streamwarden from.
DRIVER = """
import json, sys, time
from streamwarden.cli.main import main

codes, seconds = [], []
for argv in json.loads(sys.argv[1]):
    started = time.monotonic()
    codes.append(main(argv))
    seconds.append(round(time.monotonic() - started, 1))
from pyspark.sql import SparkSession

spark = SparkSession.getActiveSession()
context = spark.sparkContext
where = context.parallelize(range(8), 8).map(lambda _: (__import__("sys").executable,
                                                          __import__("streamwarden").__file__)).distinct().collect()
print(json.dumps({
    "codes": codes, "seconds": seconds, "where": where, "master": context.master,
    "executors": context._jsc.sc().getExecutorMemoryStatus().size() - 1,  # less the driver's block manager
    "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
    "memory": context.getConf().get("spark.executor.memory"),
}))
spark.stop()  # before the interpreter exits: the workers would relaunch executors it takes down
"""


def sp(patient: int, roles: str, attributes: str = "*") -> dict:
    return {"kind": "sp", "streams": "HeartRate", "tuples": "*", "attributes": attributes, "roles": roles,
            "sign": "+", "ts": ts(0), "sn": 1, "Patient_id": patient}


def heart_rate() -> list[dict]:
    """Three patients' policies (GPs see 120; only cardiologists 121; doctors 122's beats, not
    whose they are), then their readings."""
    records = [sp(120, "{GP}"), sp(121, "{C}"), sp(122, "{D}", "{Beats_per_min}")]
    return records + [{"ts": ts(1 + 5 * i), "Patient_id": 120 + i % 3, "Beats_per_min": 60 + 3 * i,
                       "sp_ts": ts(0), "sp_csn": 1} for i in range(12)]


def commands(root: Path, tag: str) -> list[list[str]]:
    """replay of a shielded stream and of a [ROWS n] window, run --available-now of the
    shielded stream, and a network (register, grants, network run --available-now), writing
    under ``root/tag``. The network's queries file is ``root/queries.yaml``."""
    out = root / tag
    heart_rate = f"HeartRate={root / 'in' / 'HeartRate'}"
    health = ["--catalog", str(HEALTH_CATALOG), "--user", "gus", "--input", heart_rate]
    drill = ["--catalog", str(DRILL_CATALOG), "--user", "paul", "--input", f"Position={root / 'in' / 'Position'}"]
    network = ["--store", f"sqlite:///{out / 'network.db'}"]  # outside the output folder, as the CLI demands
    return [
        ["replay", *health, "--query", SHIELDED, "--output", str(out / "shielded.jsonl")],
        ["replay", *drill, "--query", ROWS, "--output", str(out / "rows.jsonl")],
        ["run", *health, "--query", SHIELDED, "--sink", str(out / "sink"), "--checkpoint", str(out / "checkpoint"),
         "--store", f"sqlite:///{out / 'store.db'}", "--available-now"],
        ["network", "register", str(root / "queries.yaml"), "--catalog", str(HEALTH_CATALOG), *network],
        ["grant", "--query", "top3", "--user", "gus", "--ts", ts(0), *network],
        ["grant", "--query", "top3", "--user", "carol", "--ts", ts(20), "--until", ts(45), *network],
        ["network", "run", "--input", heart_rate, "--output-dir", str(out / "network"),
         "--checkpoint", str(out / "network-checkpoint"), *network, "--available-now"],
    ]


def starts_spark(argv: list[str]) -> bool:
    """Does the command start Spark (and take --master and --conf)? register and grant only write the store."""
    return argv[0] in ("replay", "run") or argv[:2] == ["network", "run"]


def bare_python(folder: Path) -> Path:
    """A virtualenv with PySpark's dependencies (this venv's site-packages, by a .pth) but
    not streamwarden, whose editable install is itself a .pth there, read only by this venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "parent_site.pth").write_text("\n".join(paths) + "\n")
    check = "import pandas, pyarrow, pyspark\ntry:\n import streamwarden\nexcept ModuleNotFoundError:\n print('absent')"
    probe = subprocess.run([str(python), "-c", check], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    if probe.stdout.strip() != "absent":
        pytest.skip("streamwarden is installed in this venv's site-packages itself (not editable): no Python "
                    "without it can be made from this venv for the executors")
    return python


def spark_home(folder: Path) -> Path:
    """A SPARK_HOME whose ``work/`` is ``folder/work``: links to everything else of PySpark's."""
    import pyspark

    folder.mkdir()
    for entry in Path(pyspark.__file__).parent.iterdir():
        if entry.name != "work":
            (folder / entry.name).symlink_to(entry)
    return folder


def output_rows(folder: Path) -> dict[str, list[str]]:
    """Each output's rows as sorted JSON texts (a multiset): the replays' files, the sink's parts
    and each network user's rows (their batch folders' names carry a plan hash and batch
    number, not compared: only the rows are) and ``_access.json``."""
    def rows(files: list[Path]) -> list[str]:
        return sorted(json.dumps(json.loads(line), sort_keys=True) for f in files
                      for line in f.read_text().splitlines() if line.strip())

    network = {f"network/{user}": sorted(json.dumps(r, sort_keys=True)
                                         for r in read_user_rows(None, folder / "network", user, "top3"))
               for user in NETWORK_USERS}
    status = {f"status/{user}": [json.dumps(read_status(folder / "network", user, "top3"), sort_keys=True)]
              for user in NETWORK_USERS}
    return {
        "shielded": rows([folder / "shielded.jsonl"]),
        "rows": rows([folder / "rows.jsonl"]),
        "run": rows(sorted((folder / "sink").glob("part-*"))),
        **network, **status,
    }


def test_replay_run_and_network_run_on_a_cluster_equal_local_mode(spark, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "in" / "HeartRate" / "part-0.jsonl", heart_rate())
    write_jsonl(tmp_path / "in" / "Position" / "part-0.jsonl", POSITION)
    (tmp_path / "queries.yaml").write_text(
        f"queries:\n  - {{id: top3, users: [{', '.join(NETWORK_USERS)}], query: \"{NETWORK_QUERY}\"}}\n")
    python = bare_python(tmp_path / "bare")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "STREAMWARDEN_MASTER",
                                                           "STREAMWARDEN_SPARK_CONF")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), SPARK_HOME=str(spark_home(tmp_path / "spark")),
               # The driver's and executors' JVMs live a minute: C2's compilations would cost a
               # third more CPU than they save (measured), on a small machine that runs both modes.
               JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1")
    cluster_args = ["--master", MASTER, "--conf", "spark.executor.memory=768m",
                    "--conf", f"spark.pyspark.python={python}"]
    # The cluster's commands name paths relative to the driver's working folder (tmp_path), as a
    # user's would: an executor's working folder is its own (SPARK_HOME/work/...), so a path
    # resolved there and not on the driver would miss. (Local mode runs in this process, whose
    # JVM works in the repository: its paths stay absolute.)
    batch = json.dumps([argv + cluster_args if starts_spark(argv) else argv for argv in commands(Path("."), "cluster")])
    # Files, not pipes: Spark's Python workers write much on stderr, and a full pipe would
    # stop the driver while the local commands run.
    with (tmp_path / "cluster.out").open("w") as out, (tmp_path / "cluster.err").open("w") as err:
        cluster = subprocess.Popen([sys.executable, "-c", DRIVER, batch], cwd=tmp_path, env=env, stdout=out, stderr=err)
        try:
            # Meanwhile, the same commands in local mode, on the tests' session.
            local_codes = [main(argv) for argv in commands(tmp_path, "local")]
            assert local_codes == [0] * len(local_codes)
            cluster.wait(timeout=420)
        finally:
            cluster.kill()
    errors = (tmp_path / "cluster.err").read_text()[-3000:]
    assert cluster.returncode == 0, errors
    report = json.loads((tmp_path / "cluster.out").read_text().strip().splitlines()[-1])
    print("cluster driver:", report)  # shown when the test fails: the seconds each command took
    assert report["codes"] == [0] * len(local_codes), errors
    assert report["master"] == MASTER and report["executors"] == 2
    assert (report["partitions"], report["memory"]) == ("2", "768m")  # from the master's cores; --conf
    zips = list((tmp_path / "cache" / "streamwarden").glob("streamwarden-*.zip"))
    assert len(zips) == 1
    # Each executor's bare Python imports the copy Spark shipped into its working folder
    # (a relative path), not the cached zip nor the repository.
    assert report["where"], report
    for executable, where in report["where"]:
        assert executable == str(python), executable
        assert where.endswith(f"{zips[0].name}/streamwarden/__init__.py") and not where.startswith("/"), where

    local, on_cluster = output_rows(tmp_path / "local"), output_rows(tmp_path / "cluster")
    assert on_cluster == local
    assert len(local["shielded"]) == 8 and len(local["rows"]) == 3 and len(local["run"]) == 8
    # The shield did its work: patient 121 is hidden, and 122's readings are anonymous.
    assert {json.loads(r)["Patient_id"] for r in local["shielded"]} == {120, None}
    # The network: one row per reading a user sees (gus: 120's and 122's, every one; carol:
    # 121's and 122's inside her grant, 10:00:20 to 10:00:45), each the last three's top.
    gus, carol = ([json.loads(r) for r in local[f"network/{user}"]] for user in NETWORK_USERS)
    assert sorted(r["top"] for r in gus) == [60, 66, 69, 75, 78, 84, 87, 93]
    assert sorted((r["ts"], r["top"]) for r in carol) == [(ts(21), 72), (ts(26), 75), (ts(36), 81), (ts(41), 84)]
    statuses = [json.loads(local[f"status/{user}"][0]) for user in NETWORK_USERS]
    assert [s["receiving"] for s in statuses] == [True, False]  # carol's grant has expired
