"""Issue 24, finding 7: no record of one provider stops the delivery of another provider's data.

Provider 1 (patient 1) writes broken records straight into the shared input folder of a
punctuated stream: an SP whose roles are null (the negative SP of its policy), a line that
is not JSON, a line that is not UTF-8, a reading dated past the year 9999. Provider 2's
readings must still reach exactly the users its SPs allow (ann, a Doctor; not bob, a
Nurse), provider 1's readings under the broken policy reach no one, the broken records
are counted with the place of the first (never their text) in the runtime, ``/v1/network``,
``/metrics`` and one ``network run`` warning per micro-batch, and a restart does not fail.
``replay`` and ``run`` still stop on the same input with exit 2 naming the file and line.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.identity import create_token
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.cli.main import main
from streamwarden.runtime.network import NetworkRuntime, read_user_rows

pytestmark = pytest.mark.spark

CATALOG_TEXT = """
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, pulse: int}
    key: patient
    punctuated_by: patient
roles: {Doctor: {}, Nurse: {}}
users:
  ann: {roles: [Doctor]}
  bob: {roles: [Nurse]}
  root: {roles: []}
"""
CATALOG = load_catalog_text(CATALOG_TEXT)
QUERIES_TEXT = 'queries:\n  - {id: pulse, users: [ann, bob], query: "SELECT patient, pulse FROM Vitals"}\n'
QUERIES = load_queries_text(QUERIES_TEXT, CATALOG)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def at(second: int) -> str:
    return f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}Z"


def sp(patient: int, sn: int, roles: str | None, sign: str = "+") -> str:
    return json.dumps({"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": roles,
                       "sign": sign, "ts": at(0), "sn": sn, "patient": patient})


def reading(patient: int, second: int, pulse: int, csn: int, ts: str | None = None) -> str:
    return json.dumps({"ts": ts or at(second), "patient": patient, "pulse": pulse, "sp_ts": at(0), "sp_csn": csn})


def first_part(folder: Path) -> Path:
    """Both providers' records, provider 1's broken ones among them (4 broken, the first on line 2)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "part-0.jsonl"
    lines = [sp(1, 1, "{Doctor, Nurse}"), sp(1, 2, None, "-"),  # line 2: the negative SP, roles null
             sp(2, 1, "Doctor"),
             reading(1, 1, 101, csn=1), reading(2, 1, 201, csn=1),  # 101: its policy lost an SP
             '{"kind": "sp", "patient": 1, ',  # not JSON
             None,  # not UTF-8
             reading(1, 2, 102, csn=2, ts="+10000-01-01T00:00:00Z"),  # past the year 9999
             reading(2, 3, 203, csn=1)]
    path.write_bytes(b"".join(b'{"ts": "2026-03-01T10:00:04Z", "patient": 1, "pulse": "\xff"}\n' if line is None
                              else (line + "\n").encode() for line in lines))
    return path


def second_part(folder: Path) -> Path:
    path = folder / "part-1.jsonl"
    path.write_text("\n".join([reading(2, 4, 204, csn=1), "not json", reading(2, 5, 205, csn=1),
                               reading(1, 6, 106, csn=1)]) + "\n")  # 106: still under provider 1's tainted policy
    return path


def pulses(spark, out: Path, user: str) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(r["pulse"] for r in read_user_rows(spark, out, user, "pulse"))


def granted_store(root: Path) -> str:
    store = sqlite_url(root / "auth.db")
    server = AuthorizationServer(store)
    server.register(QUERIES, CATALOG)
    for user in ("ann", "bob"):
        server.grant("pulse", user, T0)
    return store


def test_one_providers_broken_records_stop_no_delivery_and_are_reported(spark, tmp_path, caplog) -> None:
    from streamwarden.service.host import NetworkHost
    from streamwarden.service.app import create_app
    from streamwarden.service.server import ServeOptions, open_service

    folder, out = tmp_path / "in" / "Vitals", tmp_path / "out"
    part0 = first_part(folder)
    store = granted_store(tmp_path)

    def run() -> NetworkRuntime:
        runtime = NetworkRuntime(spark, store, {"Vitals": str(folder)}, out, tmp_path / "cp")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamwarden.network"):
            runtime.start(available_now=True)
            runtime.await_termination()  # before the fix: the broken SP stops the pipeline here
        run.warnings = [r.getMessage() for r in caplog.records if r.name == "streamwarden.network"]  # type: ignore[attr-defined]
        return runtime

    runtime = run()
    assert pulses(spark, out, "ann") == [201, 203]  # provider 2's, to the Doctor its SP names
    assert pulses(spark, out, "bob") == []  # not to the Nurse; provider 1's policy lost an SP: nothing of it
    pipelines = dict(runtime.pipelines())  # ann's and bob's (their roles give different plans): each counts
    assert {n: (r.quarantined, r.last_quarantined) for n, r in pipelines.items()} == {
        n: (4, f"{part0}:2") for n in pipelines}
    readers = {f"group-{r.group}" if r.group else n for n, r in pipelines.items()}  # a group reads for its members
    assert sorted(run.warnings) == sorted(  # type: ignore[attr-defined]
        f"pipeline {n}, micro-batch 0: quarantined 4 broken records of stream Vitals (the first at {part0}:2)"
        for n in readers)

    # Operators see it through the service: /v1/network and /metrics (as an admin).
    options = ServeOptions(store_url=store, output_dir=str(out), inputs={"Vitals": str(folder)})
    service = open_service(options, NetworkHost(runtime))
    token = create_token(store, "root", admin=True)
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        headers = {"Authorization": f"Bearer {token}"}
        listed = client.get("/v1/network", headers=headers).json()["pipelines"]
        assert {p["name"]: (p["quarantined"], p["last_quarantined"], p["failure"]) for p in listed} == {
            n: (4, f"{part0}:2", None) for n in pipelines}
        metrics = client.get("/metrics", headers=headers).text
        assert all(f'streamwarden_records_quarantined_total{{pipeline="{n}"}} 4' in metrics for n in pipelines)
    service.trail.close()

    part1 = second_part(folder)  # restarted on its checkpoint: only the new records are read
    runtime = run()
    assert pulses(spark, out, "ann") == [201, 203, 204, 205] and pulses(spark, out, "bob") == []
    assert {n: (r.quarantined, r.last_quarantined) for n, r in runtime.pipelines()} == {
        n: (1, f"{part1}:2") for n in pipelines}


def test_network_run_warns_per_micro_batch_while_replay_and_run_still_stop(spark, tmp_path, capsys) -> None:
    """The same input: ``network run`` delivers and prints one warning line per micro-batch that
    quarantined records (exit 0, restart too); ``replay`` and ``run`` stop with exit 2 and one
    line naming the file and line of the first broken record, never its text."""
    folder, out = tmp_path / "in" / "Vitals", tmp_path / "out"
    part0 = first_part(folder)
    store = granted_store(tmp_path)
    network = ["network", "run", "--input", f"Vitals={folder}", "--output-dir", str(out), "--store", store,
               "--checkpoint", str(tmp_path / "cp"), "--available-now"]
    assert main(network) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and all(w.endswith(  # one per pipeline (ann's, bob's) and micro-batch
        f"micro-batch 0: quarantined 4 broken records of stream Vitals (the first at {part0}:2)") for w in warnings)
    assert pulses(spark, out, "ann") == [201, 203]

    (tmp_path / "catalog.yaml").write_text(CATALOG_TEXT)
    query = ["--catalog", str(tmp_path / "catalog.yaml"), "--user", "ann",
             "--query", "SELECT patient, pulse FROM Vitals", "--input", f"Vitals={folder}"]
    assert main(["replay", *query, "--output", str(tmp_path / "o.jsonl")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: broken record in stream Vitals") and line.endswith(f"at {part0}:2"), line
    assert main(["run", *query, "--sink", str(tmp_path / "sink"), "--checkpoint", str(tmp_path / "cp-run"),
                 "--store", sqlite_url(tmp_path / "run.db"), "--available-now"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]  # after its "running ..." line
    assert line.startswith("error: broken record in stream Vitals") and line.endswith(f"at {part0}:2"), line

    part1 = second_part(folder)
    assert main(network) == 0  # restarted on its checkpoint: only the new file is read
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and all(w.endswith(f"quarantined 1 broken record of stream Vitals (the first at "
                                                 f"{part1}:2)") for w in warnings)
    assert pulses(spark, out, "ann") == [201, 203, 204, 205]
