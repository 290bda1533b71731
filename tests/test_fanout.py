"""The fan-out (engine/fanout.py): one Spark write lays every recipient's rows out sorted, and
each recipient's file is a byte range of it; a batch of a few rows is collected and written
from memory instead. The ranges come from sizes Spark counted, so the attack is a row whose
bytes are not its characters (UTF-8), a recipient with no rows, two recipients of one member
with different periods, and rows that are byte-for-byte equal. Every test runs both ways
(``few_rows`` 0: always laid out), and both must give the same bytes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine.columns import MEMBER
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.fanout import FEW_ROWS, write_per_recipient
from streamwarden.engine.shared import ROW

pytestmark = pytest.mark.spark
WAYS = pytest.mark.parametrize("few_rows", [FEW_ROWS, 0], ids=["collected", "laid-out"])

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
TEXTS = ["plain", "é", "日本語", "🩺 pulse", "quote\"d", "back\\slash", ""]


def frame(spark, rows: list[tuple[int, int, str]]):  # type: ignore[no-untyped-def]
    """(member, second, text) -> the group's rows: event time, member, row as JSON."""
    data = [(T0 + timedelta(seconds=s), m, json.dumps({"v": text, "s": s}, ensure_ascii=False)) for m, s, text in rows]
    return spark.createDataFrame(data, f"`{EVENT}` timestamp, `{MEMBER}` long, `{ROW}` string")


def expected(rows: list[tuple[int, int, str]], periods: list[tuple[int, int, datetime, datetime | None]]
             ) -> dict[int, list[str]]:
    """An oracle in Python: each recipient's rows, by event time then text."""
    out: dict[int, list[tuple[datetime, str]]] = {}
    for r, member, start, end in periods:
        for m, s, text in rows:
            at = T0 + timedelta(seconds=s)
            if m == member and at >= start and (end is None or at < end):
                out.setdefault(r, []).append((at, json.dumps({"v": text, "s": s}, ensure_ascii=False)))
    return {r: [row for _, row in sorted(items)] for r, items in out.items()}


def received(fanned, recipients: range, tmp_path: Path) -> dict[int, list[str]]:  # type: ignore[no-untyped-def]
    out = {}
    for r in recipients:
        if r in fanned.received:
            fanned.copy(r, tmp_path / f"r{r}.txt")
            out[r] = (tmp_path / f"r{r}.txt").read_text(encoding="utf-8").splitlines()
            assert len(out[r]) == fanned.received[r]
    return out


@WAYS
def test_each_recipient_gets_her_members_rows_in_her_periods_byte_exact(spark, tmp_path, few_rows) -> None:
    rows = [(m, s, TEXTS[(m + s) % len(TEXTS)]) for m in range(3) for s in range(40)]
    rows += [(1, 5, "dup"), (1, 5, "dup")]  # equal rows: both delivered
    periods = [(0, 0, T0, None), (1, 1, T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)),
               (1, 1, T0 + timedelta(seconds=30), None), (2, 1, T0, None), (3, 2, T0 + timedelta(hours=1), None)]
    with write_per_recipient(frame(spark, rows), periods, tmp_path / "scratch", emitted=True,
                             few_rows=few_rows) as fanned:
        assert 3 not in fanned.received  # a period with no rows: no file
        assert received(fanned, range(4), tmp_path) == expected(rows, periods)
        assert fanned.emitted[1][0] == 42 and fanned.emitted[2] == (40, "2026-03-01T10:00:39Z")
    assert not (tmp_path / "scratch").exists()


@WAYS
def test_no_recipient_no_write(spark, tmp_path, few_rows) -> None:
    with write_per_recipient(frame(spark, [(0, 1, "x")]), [], tmp_path / "scratch", emitted=True,
                             few_rows=few_rows) as fanned:
        assert fanned.received == {} and fanned.emitted == {0: (1, "2026-03-01T10:00:01Z")}
    assert not (tmp_path / "scratch").exists()


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.sampled_from(TEXTS)), max_size=60),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(1, 40)), max_size=8))
def test_random_rows_and_periods_match_the_oracle(spark, tmp_path_factory, rows, spans) -> None:  # type: ignore[no-untyped-def]
    periods = [(r, member, T0 + timedelta(seconds=start), T0 + timedelta(seconds=start + length))
               for r, (member, start, length) in enumerate(spans)]
    bytes_by_way = []
    for few_rows in (FEW_ROWS, 0):
        folder = tmp_path_factory.mktemp("fan")
        with write_per_recipient(frame(spark, rows), periods, folder / "scratch", few_rows=few_rows) as fanned:
            assert received(fanned, range(len(periods)), folder) == expected(rows, periods)
        bytes_by_way.append({p.name: p.read_bytes() for p in folder.glob("r*.txt")})
    assert bytes_by_way[0] == bytes_by_way[1]  # a batch run again the other way rewrites the same bytes


def test_one_row_more_than_few_is_laid_out_and_as_many_is_collected(spark, tmp_path) -> None:
    rows = [(0, s, "x") for s in range(5)]
    for few_rows, scratch_used in ((5, False), (4, True)):
        scratch = tmp_path / f"scratch{few_rows}"
        with write_per_recipient(frame(spark, rows), [(0, 0, T0, None)], scratch, few_rows=few_rows) as fanned:
            assert scratch.exists() is scratch_used and fanned.received == {0: 5}


@WAYS
def test_a_period_in_another_time_zone_or_naive_is_the_same_instant(spark, tmp_path, few_rows) -> None:
    """Periods are instants: 11:00+01:00 is 10:00 UTC; a naive time is the driver's local time,
    as Spark reads it."""
    rows = [(0, s, "x") for s in range(0, 120, 10)]
    plus_one = timezone(timedelta(hours=1))
    start = datetime(2026, 3, 1, 11, 0, 30, tzinfo=plus_one)
    naive = (T0 + timedelta(seconds=60)).astimezone().replace(tzinfo=None)
    periods = [(0, 0, start, None), (1, 0, T0, naive)]
    with write_per_recipient(frame(spark, rows), periods, tmp_path / "scratch", few_rows=few_rows) as fanned:
        assert fanned.received == {0: 9, 1: 6}


def test_a_long_row_is_laid_out_not_collected_and_arrives_whole(spark, tmp_path) -> None:
    """A provider's record as long as it likes must not fill the driver's memory: a batch with a
    row longer than SHORT_ROW_BYTES takes the laid-out road, with the same bytes."""
    from streamwarden.engine.fanout import SHORT_ROW_BYTES
    rows = [(0, 1, "x" * (SHORT_ROW_BYTES + 1)), (0, 2, "short")]
    with write_per_recipient(frame(spark, rows), [(0, 0, T0, None)], tmp_path / "scratch") as fanned:
        assert (tmp_path / "scratch").exists()  # laid out
        assert received(fanned, range(1), tmp_path) == expected(rows, [(0, 0, T0, None)])
