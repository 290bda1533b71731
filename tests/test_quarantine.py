"""Quarantine mode (issue 24, finding 7): a broken record is dropped and counted, never stops
the others' delivery, and never widens access.

Attacks tried here: a provider's broken negative SP (dropped, its batch's positive SP would
grant more than the provider declared), the same SP re-sent broken under the sequence
number it should replace, a broken SP in one micro-batch and the tuples it governs in the
next (the taint crosses the shield's checkpointed state), a broken line without ``seq``
among sequenced records (it must not reorder the others), a broken record naming no
provider or another provider's sub-stream.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ts
from streamwarden.catalog.model import StreamDef
from streamwarden.engine.quarantine import metric_name
from streamwarden.engine.shield.reader import shielded_input
from streamwarden.engine.sources import read_input

pytestmark = pytest.mark.spark

VITALS = StreamDef("Vitals", (("ts", "timestamp"), ("patient", "int"), ("pulse", "int")), "patient",
                   {"punctuated_by": "patient"})


def sp(patient: int, at: float, sn: int, sign: str = "+", **fields: object) -> dict:
    return {"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "GP", "sign": sign,
            "ts": ts(at), "sn": sn, "patient": patient, **fields}


def reading(patient: int, second: float, pulse: int, sp_at: float = 0, csn: int = 1, **fields: object) -> dict:
    return {"ts": ts(second), "patient": patient, "pulse": pulse, "sp_ts": ts(sp_at), "sp_csn": csn, **fields}


def write(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(r if isinstance(r, bytes) else
                              ((r if isinstance(r, str) else json.dumps(r)) + "\n").encode() for r in records))
    return path


def granted(rows) -> dict[int, bool]:  # type: ignore[no-untyped-def]
    """Per pulse (each reading's id here): does the shield grant the tuple anything?"""
    return {r["pulse"]: r["_gov"] is not None and r["_gov"]["mask"] != 0 for r in rows}


def shield_rows(spark, path: Path):  # type: ignore[no-untyped-def]
    return shielded_input(spark, VITALS, path, {"GP"}, streaming=False, on_broken="quarantine").collect()


def test_a_broken_negative_sp_leaves_its_policy_granting_nothing(spark, tmp_path) -> None:
    """Provider 1 declares a policy of a positive SP and a negative one, whose roles are null
    (broken). Dropping the negative one must not leave the positive one to grant, even to a
    tuple that counts only SP 1 (``sp_csn`` 1, which a plain drop would match): every tuple
    of that policy is withheld, until the provider's next complete policy. Provider 2's
    tuples, and provider 1's under the later policy, are decided as if nothing was broken."""
    write(tmp_path / "in" / "a.jsonl", [
        sp(1, 0, 1), sp(1, 0, 2, "-", roles=None),       # broken: roles null
        sp(2, 0, 1),
        reading(1, 1, 101), reading(2, 1, 201),
        reading(1, 2, 102), reading(2, 2, 202),
        sp(1, 10, 1),                                    # provider 1's next policy, complete
        reading(1, 11, 111, sp_at=10), reading(2, 11, 211),
    ])
    rows = shield_rows(spark, tmp_path / "in")
    assert granted(rows) == {101: False, 102: False, 111: True, 201: True, 202: True, 211: True}
    tuple_counting_both = write(tmp_path / "two" / "a.jsonl", [sp(1, 0, 1), sp(1, 0, 2, "-", roles=None),
                                                               reading(1, 1, 101, csn=2)])
    assert granted(shield_rows(spark, tuple_counting_both)) == {101: False}


def test_a_broken_sp_sent_under_the_number_it_replaces_taints_the_policy(spark, tmp_path) -> None:
    """The attack a plain drop would let through: the provider re-sends SP 1 of its policy as a
    negative one (a duplicate sequence number replaces the old SP), but broken. Dropped, the
    positive SP 1 would still govern and grant (the csn still matches): the tuple is withheld."""
    write(tmp_path / "in" / "a.jsonl", [
        sp(1, 0, 1), reading(1, 1, 101),
        {**sp(1, 0, 1, "-"), "grant": "maybe"},          # broken: grant is not a boolean
        reading(1, 2, 102),
    ])
    assert granted(shield_rows(spark, tmp_path / "in")) == {101: True, 102: False}


def test_a_broken_sp_whose_time_is_unreadable_taints_the_policy_in_force(spark, tmp_path) -> None:
    write(tmp_path / "in" / "a.jsonl", [
        sp(1, 0, 1), reading(1, 1, 101),
        {**sp(1, 0, 2, "-"), "ts": "soon"},              # broken: no readable time
        reading(1, 2, 102),
        '{"kind": "sp", "patient": 2, ',                 # not JSON: no provider can be told from it
        sp(2, 0, 1), reading(2, 3, 203),
    ])
    assert granted(shield_rows(spark, tmp_path / "in")) == {101: True, 102: False, 203: True}


def test_a_broken_tuple_is_dropped_and_acts_on_the_state_as_its_tuple_would(spark, tmp_path) -> None:
    """A broken tuple (a pulse that is not an int) never leaves; naming another policy than the
    current one, it drops the current policy as any tuple would (so no later tuple of the old
    policy is granted)."""
    write(tmp_path / "in" / "a.jsonl", [
        sp(1, 0, 1), reading(1, 1, 101),
        {**reading(1, 2, 0, sp_at=5), "pulse": "fast"},  # broken, names a policy that does not exist
        reading(1, 3, 103),
        b'{"ts": "2026-03-01T10:00:04Z", "patient": 1, "pulse": "\xff"}\n',  # not UTF-8
        sp(1, 10, 1), reading(1, 11, 111, sp_at=10),
    ])
    rows = shield_rows(spark, tmp_path / "in")
    assert granted(rows) == {101: True, 103: False, 111: True}  # 103: its policy was dropped by the broken tuple


def test_a_broken_line_without_seq_does_not_reorder_the_sequenced_records(spark, tmp_path) -> None:
    """Records sequenced by ``seq`` are ordered by it; a broken line carries none. It must not
    make the shield fall back to file order (then the tuple would come before its SP)."""
    broken = {**reading(1, 5, 0), "pulse": "fast"}  # provider 1's, so its shield hears of it; no seq
    write(tmp_path / "in" / "a.jsonl", [{**reading(1, 1, 101), "seq": 2}, {**sp(1, 0, 1), "seq": 1}, broken])
    assert granted(shield_rows(spark, tmp_path / "in")) == {101: True}


def test_the_taint_crosses_micro_batches_and_restarts(spark, tmp_path) -> None:
    """A broken SP (SP 1 re-sent as a negative one) in one micro-batch, the tuples of its policy
    in the next and after a restart: the shield's checkpointed state keeps the taint. The
    quarantined records are counted in the query's progress, with the place of the first,
    never the record."""
    from streamwarden.runtime.quarantine import QuarantineLog

    folder, checkpoint = tmp_path / "in", tmp_path / "cp"
    write(folder / "p1.jsonl", [sp(1, 0, 1), sp(2, 0, 1), sp(1, 0, 1, "-", roles=None),
                                '{"ts": "+10000-01-01T00:00:00Z", "patient": 2, "pulse": 1}'])
    log, delivered = QuarantineLog(), {}

    def run() -> None:
        frame = shielded_input(spark, VITALS, folder, {"GP"}, streaming=True, on_broken="quarantine")
        query = (frame.select("pulse", (frame["_gov"].isNotNull() & (frame["_gov.mask"] != 0)).alias("ok"))
                 .writeStream.foreachBatch(lambda batch, _: delivered.update({r["pulse"]: r["ok"]
                                                                               for r in batch.collect()}))
                 .option("checkpointLocation", str(checkpoint)).option("maxFilesPerTrigger", 1)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return log.read(query.recentProgress)

    first = run()
    assert [(q.stream, q.records, q.first) for q in first] == [("Vitals", 2, f"{folder / 'p1.jsonl'}:3")]
    write(folder / "p2.jsonl", [reading(1, 1, 101), reading(2, 1, 201)])
    assert run() == [] and delivered == {101: False, 201: True}
    write(folder / "p3.jsonl", [reading(1, 2, 102), reading(2, 2, 202)])
    run()
    assert delivered == {101: False, 201: True, 102: False, 202: True}


def test_plain_streams_drop_and_count_broken_records(spark, tmp_path) -> None:
    """Not JSON, a wrong type, no ts, a time past the year 9999: each dropped, the good records kept."""
    stream = StreamDef("S", (("ts", "timestamp"), ("a", "int")))
    write(tmp_path / "S" / "a.jsonl", [{"ts": ts(1), "a": 1}, "{", {"ts": ts(2), "a": "x"}, {"a": 3},
                                       {"ts": "+10000-01-01T00:00:00Z", "a": 4}, {"ts": ts(5), "a": 5}])
    frame = read_input(spark, stream, tmp_path / "S", streaming=False, on_broken="quarantine")
    assert sorted(r["a"] for r in frame.collect()) == [1, 5]
    assert metric_name("S") == "quarantine_S"
