"""Punctuated input: arrival order across files and lines (or seq), SPs told from tuples, bad records named."""

from __future__ import annotations

import json

import pytest

from conftest import ts
from streamwarden.catalog.model import StreamDef
from streamwarden.errors import InputError
from streamwarden.punctuation.reader import check_records, read_punctuated

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
    rows = read_punctuated(spark, HEART, tmp_path).orderBy("_order").collect()
    assert [(r["_is_sp"], r["Beats_per_min"]) for r in rows] == [(True, None), (False, 71), (False, 72), (False, 73), (False, 74)]
    sp_row = rows[0]
    assert (sp_row["sp_tuples"], sp_row["sp_roles"], sp_row["sp_sn"], sp_row["sp_sign"]) == ("[120, 133]", "{GP, C}", 1, "+")
    assert rows[1]["sp_csn"] == 1 and rows[1]["sp_ts"] is not None
    assert [r["_line"] for r in rows] == [1, 2, 4, 1, 2]  # blank lines are skipped but counted


def test_explicit_seq_overrides_line_order(spark, tmp_path) -> None:
    write(tmp_path / "x.jsonl", [{**tuple_(1), "seq": 2}, {**SP, "seq": 1}])
    rows = read_punctuated(spark, HEART, tmp_path / "x.jsonl").orderBy("_order").collect()
    assert [r["_is_sp"] for r in rows] == [True, False]


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ('{"ts": "2026-03-01T10:00:01Z", "Patient_id": "one"}', "not valid JSON of the catalog's types"),
        ('{"ts": "soon", "Patient_id": 1}', "not valid JSON of the catalog's types"),
        ('{"Patient_id": 1}', "record has no ts"),
        ('{"kind": "spx", "ts": "2026-03-01T10:00:01Z"}', "unknown kind spx"),
        ('{"ts": ', "not valid JSON"),
    ],
)
def test_broken_records_are_named_with_file_and_line(spark, tmp_path, record, problem) -> None:
    write(tmp_path / "p.jsonl", [SP, tuple_(1), record])
    with pytest.raises(InputError) as info:
        check_records(read_punctuated(spark, HEART, tmp_path), HEART)
    assert problem in str(info.value) and "p.jsonl:3" in str(info.value)


def test_order_holds_across_the_splits_of_a_large_file(spark, tmp_path) -> None:
    write(tmp_path / "big.jsonl", [SP] + [tuple_(i) for i in range(1, 300)])
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "2048")  # about 20 splits of one file
    try:
        rows = read_punctuated(spark, HEART, tmp_path).orderBy("_order").collect()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    assert len({r["_order"]["file_block_start"] for r in rows}) > 5  # the file really was split
    assert [r["_line"] for r in rows] == list(range(1, 301))
    assert [r["Beats_per_min"] for r in rows[1:]] == [70 + i for i in range(1, 300)]
