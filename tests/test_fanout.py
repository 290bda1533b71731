"""The fan-out (engine/fanout.py): one Spark write lays every recipient's rows out sorted, and
each recipient's file is a byte range of it. The ranges come from sizes Spark counted, so
the attack is a row whose bytes are not its characters (UTF-8), a recipient with no rows,
two recipients of one member with different periods, and rows that are byte-for-byte equal."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine.columns import MEMBER
from streamwarden.engine.compiler import EVENT
from streamwarden.engine.fanout import write_per_recipient
from streamwarden.engine.shared import ROW

pytestmark = pytest.mark.spark

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


def test_each_recipient_gets_her_members_rows_in_her_periods_byte_exact(spark, tmp_path) -> None:
    rows = [(m, s, TEXTS[(m + s) % len(TEXTS)]) for m in range(3) for s in range(40)]
    rows += [(1, 5, "dup"), (1, 5, "dup")]  # equal rows: both delivered
    periods = [(0, 0, T0, None), (1, 1, T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)),
               (1, 1, T0 + timedelta(seconds=30), None), (2, 1, T0, None), (3, 2, T0 + timedelta(hours=1), None)]
    with write_per_recipient(frame(spark, rows), periods, tmp_path / "scratch", emitted=True) as fanned:
        assert 3 not in fanned.received  # a period with no rows: no file
        assert received(fanned, range(4), tmp_path) == expected(rows, periods)
        assert fanned.emitted[1][0] == 42 and fanned.emitted[2] == (40, "2026-03-01T10:00:39Z")
    assert not (tmp_path / "scratch").exists()


def test_no_recipient_no_write(spark, tmp_path) -> None:
    with write_per_recipient(frame(spark, [(0, 1, "x")]), [], tmp_path / "scratch", emitted=True) as fanned:
        assert fanned.received == {} and fanned.emitted == {0: (1, "2026-03-01T10:00:01Z")}
    assert not (tmp_path / "scratch").exists()


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.sampled_from(TEXTS)), max_size=60),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(1, 40)), max_size=8))
def test_random_rows_and_periods_match_the_oracle(spark, tmp_path_factory, rows, spans) -> None:  # type: ignore[no-untyped-def]
    periods = [(r, member, T0 + timedelta(seconds=start), T0 + timedelta(seconds=start + length))
               for r, (member, start, length) in enumerate(spans)]
    folder = tmp_path_factory.mktemp("fan")
    with write_per_recipient(frame(spark, rows), periods, folder / "scratch") as fanned:
        assert received(fanned, range(len(periods)), folder) == expected(rows, periods)
