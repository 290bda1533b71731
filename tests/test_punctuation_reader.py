"""Punctuated input: arrival order across files and lines (or seq), SPs told from tuples, bad records named."""

from __future__ import annotations

import json

import pytest

from conftest import ts
from streamwarden.catalog.model import StreamDef
from streamwarden.engine.execute import input_errors
from streamwarden.engine.shield.reader import read_punctuated, shielded_input
from streamwarden.errors import InputError

pytestmark = pytest.mark.spark

HEART = StreamDef("HeartRate", (("ts", "timestamp"), ("Patient_id", "int"), ("Beats_per_min", "int")), "Patient_id")
SP = {"kind": "sp", "streams": "HeartRate", "tuples": "[120, 133]", "attributes": "*", "roles": "{GP, C}",
      "sign": "+", "immutable": False, "grant": False, "ts": ts(0), "sn": 1}


def tuple_(second: int, pid: int = 120) -> dict:
    return {"ts": ts(second), "Patient_id": pid, "Beats_per_min": 70 + second, "sp_ts": ts(0), "sp_csn": 1}


def write(path, records) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))


def test_line_order_across_files_in_name_order(spark, tmp_path) -> None:
    write(tmp_path / "b.jsonl", [tuple_(3), tuple_(4)])
    write(tmp_path / "a.jsonl", [SP, tuple_(1), "", tuple_(2)])
    rows = read_punctuated(spark, HEART, tmp_path).orderBy("_file", "_line").collect()
    assert [(r["_is_sp"], r["Beats_per_min"]) for r in rows] == [(True, None), (False, 71), (False, 72), (False, 73),
                                                                 (False, 74)]
    sp_row = rows[0]["_sp"]
    assert (sp_row["tuples"], sp_row["roles"], sp_row["sn"], sp_row["sign"]) == ("[120, 133]", "{GP, C}", 1, "+")
    assert rows[1]["sp_csn"] == 1 and rows[1]["sp_ts"] is not None
    assert [r["_line"] for r in rows] == [1, 2, 4, 1, 2]  # blank lines are skipped but counted


def test_explicit_seq_overrides_line_order(spark, tmp_path) -> None:
    write(tmp_path / "x.jsonl", [{**tuple_(1), "seq": 2}, {**SP, "seq": 1}])
    rows = shielded_input(spark, HEART, tmp_path / "x.jsonl", {"GP"}, streaming=False).collect()
    assert [r["_gov"] is not None for r in rows] == [True]  # the SP (seq 1) came first


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ('{"ts": "2026-03-01T10:00:01Z", "Patient_id": "one"}', "not valid JSON of the catalog's types"),
        ('{"ts": "soon", "Patient_id": 1}', "not valid JSON of the catalog's types"),
        ('{"Patient_id": 1}', "record has no ts"),
        ('{"kind": "spx", "ts": "2026-03-01T10:00:01Z"}', "unknown kind spx"),
        ('{"ts": ', "not valid JSON"),
        (json.dumps({**SP, "tuples": "[120, 133"}), "malformed tuples pattern [120, 133"),
        (json.dumps({**SP, "roles": "{GP,"}), "malformed roles pattern"),
        (json.dumps({**SP, "sign": "maybe"}), "sign must be"),
        (json.dumps({**SP, "sn": 0}), "sn must be a positive integer"),
        (json.dumps({**SP, "sn": 4097}), "sn must be at most 4096"),  # a policy's SPs are the shield's state
        # Patterns are ASCII outside quotes: another script's space or digits make the SP malformed.
        (json.dumps({**SP, "roles": "{GP,\u00a0C}"}), "malformed roles pattern"),
        (json.dumps({**SP, "tuples": "[\u0661\u0662\u0660, 133]"}), "malformed tuples pattern"),
        (json.dumps({**SP, "tuples": "[1e400, 2]"}), "malformed tuples pattern"),
        (json.dumps({**SP, "attributes": "{Beats_per_min"}), "malformed attributes pattern"),
    ],
)
def test_broken_records_are_named_with_file_and_line(spark, tmp_path, record, problem) -> None:
    write(tmp_path / "p.jsonl", [SP, tuple_(1), record])
    with pytest.raises(InputError) as info, input_errors():
        shielded_input(spark, HEART, tmp_path, {"GP"}, streaming=False).collect()
    assert problem in str(info.value) and "p.jsonl:3" in str(info.value)


def test_a_policy_change_mid_file_governs_exactly_the_tuples_after_it(spark, tmp_path) -> None:
    later = {**SP, "ts": ts(150), "tuples": "{999}"}  # from line 152 on, no patient of ours is readable
    records = [SP] + [tuple_(i) for i in range(1, 151)] + [later] + [
        {**tuple_(i), "sp_ts": ts(150)} for i in range(151, 300)]
    write(tmp_path / "big.jsonl", records)
    rows = shielded_input(spark, HEART, tmp_path, {"GP"}, streaming=False).collect()
    # Both policies govern their tuples; only the first grants anything for patient 120.
    first = sorted(r["Beats_per_min"] - 70 for r in rows if r["_gov"] and r["_gov"]["mask"] != 0)
    second = sorted(r["Beats_per_min"] - 70 for r in rows if r["_gov"] and r["_gov"]["mask"] == 0)
    assert first == list(range(1, 151)) and second == list(range(151, 300))


def test_a_file_read_in_many_splits_keeps_its_order_and_names_lines(spark, tmp_path) -> None:
    """A large file is read in parallel splits (here: 300 bytes each): the lines keep their
    order, and a broken record in a later split is still named by its line number."""
    from bench.spark_probe import sql_conf

    path = tmp_path / "big.jsonl"
    records = [SP] + [tuple_(i % 60) | {"Beats_per_min": i} for i in range(1, 60)]
    write(path, records)
    with sql_conf(spark, "spark.sql.files.maxPartitionBytes", "300"):
        frame = read_punctuated(spark, HEART, path)
        assert frame.rdd.getNumPartitions() > 5
        rows = frame.orderBy("_file", "_line").collect()
        assert [r["Beats_per_min"] for r in rows[1:]] == list(range(1, 60))
        broken = records[:47] + ['{"ts": "2026-03-01T10:00:01Z", "Patient_id": "x"}'] + records[47:]
        write(path, broken)
        with pytest.raises(InputError, match=rf"not valid JSON of the catalog's types\) at {path}:48$"), input_errors():
            shielded_input(spark, HEART, path, {"GP"}, streaming=False).collect()


def test_a_place_is_only_ever_the_message_end_spark_wrote(tmp_path) -> None:
    """Attack: a record's text (an unknown kind) or a file's name holding ") at OTHER:@0+0" must
    not make the driver read another file to name a line: the place is the last word, a URI."""
    from streamwarden.engine.execute import readable_place

    secret = tmp_path / "secret.txt"
    secret.write_text("a\nb\nc\n")
    forged = f"broken record in stream S (unknown kind ) at {secret}:@0+1) at /data/x%29%20at%20y.jsonl:2"
    assert readable_place(forged).endswith(" at /data/x) at y.jsonl:2")
    assert str(secret) + ":" not in readable_place(forged).rsplit(" at ", 1)[1]
