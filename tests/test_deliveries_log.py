"""deliver_once logs a batch once, reading only the log's tail: the cost of a delivery does not
grow with the length of the run, and a replayed batch (Spark replays its latest) is not logged
twice, nor its rows placed under a second name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.runtime.deliveries import (LOG, QUICK_BATCHES, QUICK_LOG_BYTES, TAIL_BYTES, deliver_once, deliveries,
                                             flush, read_rows, read_rows_quickly)


def test_a_replayed_batch_is_logged_once_however_long_the_log(tmp_path: Path) -> None:
    entries = TAIL_BYTES // 40 + 100  # more than the tail holds
    (tmp_path / LOG).write_text("".join(f'{{"batch": "b{i:08d}", "rows": 1, "end": {i + 1}, "key": "live-{i}"}}\n'
                                        for i in range(entries)))
    assert len(deliveries(tmp_path)) == entries  # the log's name and format, as deliver_once writes it
    placed: list[str] = []
    assert not deliver_once(tmp_path, f"live-{entries - 1}", 1, "b-", placed.append)  # the latest, again
    assert deliver_once(tmp_path, "live-new", 3, "b-", placed.append)
    assert not deliver_once(tmp_path, "live-new", 3, "b-", placed.append)
    logged = deliveries(tmp_path)
    assert placed == [f"b-{entries:015d}"]
    assert len(logged) == entries + 1 and logged[-1].rows == 3 and logged[-1].end == entries + 3


def _put(folder: Path, rows: int):  # type: ignore[no-untyped-def]
    def place(name: str) -> None:
        (folder / name).mkdir()
        (folder / name / "part-00000.txt").write_text("".join(f'{{"i": {i}}}\n' for i in range(rows)))
    return place


def test_a_group_delivery_is_named_by_the_users_own_cursor_and_made_once(tmp_path: Path) -> None:
    assert deliver_once(tmp_path, "q1:live-0", 2, "batch=f-g", _put(tmp_path, 2))
    assert deliver_once(tmp_path, "q1:live-3", 1, "batch=f-g", _put(tmp_path, 1))
    assert not deliver_once(tmp_path, "q1:live-3", 1, "batch=f-g", _put(tmp_path, 1))  # Spark runs it again
    logged = deliveries(tmp_path)
    # the names count her rows (0, then 2), not the group's micro-batches (0, then 3): gaps would
    # tell her how many batches brought rows she may not see
    assert [(d.batch, d.rows, d.end, d.key) for d in logged] == [
        ("batch=f-g000000000000000", 2, 2, "q1:live-0"), ("batch=f-g000000000000002", 1, 3, "q1:live-3")]
    assert read_rows(tmp_path, after=0, limit=10).next == 3


def test_a_delivery_cut_short_by_a_crash_is_made_again_under_the_same_name(tmp_path: Path) -> None:
    deliver_once(tmp_path, "q1:live-0", 2, "batch=f-g", _put(tmp_path, 2))
    crashed = tmp_path / "batch=f-g000000000000002"
    crashed.mkdir()  # the rows were placed, then the process died before the log line
    with (tmp_path / LOG).open("a") as log:
        log.write('{"batch": "batch=f-g0000000')  # and a line was cut
    placed: list[str] = []
    put = _put(tmp_path, 4)

    def again(name: str) -> None:
        placed.append(name)
        shutil.rmtree(tmp_path / name, ignore_errors=True)
        put(name)

    assert deliver_once(tmp_path, "q1:live-1", 4, "batch=f-g", again)
    assert placed == ["batch=f-g000000000000002"]
    assert [(d.batch, d.end) for d in deliveries(tmp_path)] == [("batch=f-g000000000000000", 2),
                                                                ("batch=f-g000000000000002", 6)]


def test_a_log_an_earlier_version_wrote_without_cursors_still_counts(tmp_path: Path) -> None:
    (tmp_path / LOG).write_text('{"batch": "batch=a-0000000000", "rows": 5}\n'
                                '{"batch": "batch=a-0000000001", "rows": 2}\n')
    deliver_once(tmp_path, "k", 1, "batch=f-g", _put(tmp_path, 1))
    assert deliveries(tmp_path)[-1].batch == "batch=f-g000000000000007"
    deliver_once(tmp_path, "k2", 3, "batch=f-g", _put(tmp_path, 3))
    assert deliveries(tmp_path)[-1].end == 11


def test_flush_makes_the_file_system_durable_in_one_call(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import streamwarden.runtime.deliveries as module

    flush(tmp_path)  # syncfs where the system has it
    synced: list[bool] = []
    module._syncfs.cache_clear()
    monkeypatch.setattr(module.ctypes, "CDLL", lambda *a, **k: object())  # a system without syncfs
    monkeypatch.setattr(module.os, "sync", lambda: synced.append(True))
    try:
        flush(tmp_path)
    finally:
        module._syncfs.cache_clear()
    assert synced == [True]


def _line(i: int) -> str:
    return f'{{"batch": "b{i:08d}", "rows": {i + 1}, "end": {sum(range(2, i + 3))}, "key": "live-{i}"}}\n'


def test_a_reader_parses_what_was_appended_since_it_last_read_and_the_same_as_a_fresh_read(tmp_path: Path) -> None:
    """The service reads each log at every poll: entries are kept parsed, and a read takes only the
    appended lines; a torn last line waits for its end; a file made again under the name (moved
    aside, its inode even reused) is read from its start."""
    from streamwarden.runtime.deliveries import _read_log

    log = tmp_path / LOG
    log.write_text("".join(_line(i) for i in range(3)))
    assert [d.batch for d in deliveries(tmp_path)] == ["b00000000", "b00000001", "b00000002"]
    with open(log, "a") as handle:
        handle.write(_line(3) + _line(4)[:20])  # a whole line, and one the writer has not finished
    assert [d.rows for d in deliveries(tmp_path)] == [1, 2, 3, 4]
    with open(log, "a") as handle:
        handle.write(_line(4)[20:])
    assert deliveries(tmp_path) == _read_log(log)[0] and len(deliveries(tmp_path)) == 5
    log.unlink()
    log.write_text(_line(7) * 6)  # another log, longer than the first: the same inode may come back
    assert [d.batch for d in deliveries(tmp_path)] == ["b00000007"] * 6
    log.write_text(_line(8))  # rewritten shorter
    assert [d.batch for d in deliveries(tmp_path)] == ["b00000008"]
    log.unlink()
    assert deliveries(tmp_path) == []


def test_the_parsed_logs_kept_are_bounded_in_entries_not_in_logs(tmp_path: Path) -> None:
    from streamwarden.runtime.deliveries import _ParsedLogs

    logs = _ParsedLogs(entries=10)
    for k in range(4):
        (tmp_path / str(k)).mkdir()
        (tmp_path / str(k) / LOG).write_text("".join(_line(i) for i in range(4)))
        assert len(logs.entries(tmp_path / str(k) / LOG)) == 4
    assert logs._held <= 10 and len(logs._logs) == 2  # the oldest forgotten
    (tmp_path / "long").mkdir()
    (tmp_path / "long" / LOG).write_text("".join(_line(i) for i in range(12)))
    assert len(logs.entries(tmp_path / "long" / LOG)) == 12 and logs._held <= 10  # read, not kept


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 6), min_size=0, max_size=30), after=st.integers(-3, 120),
       limit=st.integers(1, 40))
def test_a_page_is_found_by_bisection_as_a_walk_from_the_first_batch_finds_it(
        tmp_path_factory: pytest.TempPathFactory, sizes: list[int], after: int, limit: int) -> None:
    """read_rows finds the page's first batch by bisecting the cumulative row counts; the oracle
    walks every row from the start. No batches, cursors past the end and negative ones included."""
    folder = tmp_path_factory.mktemp("log")
    every: list[str] = []
    for n, rows in enumerate(sizes):
        deliver_once(folder, f"live-{n}", rows, "batch=p-", _rows_of(folder, n, rows))
        every += sorted(f'{{"b": {n:03d}, "i": {i}}}' for i in range(rows))
    page = read_rows(folder, after=after, limit=limit)
    start = min(max(after, 0), len(every))
    assert page.lines == every[start:start + limit]
    assert page.total == len(every)
    assert page.next == (start + len(page.lines) if page.lines else max(min(after, len(every)), after))
    quick = read_rows_quickly(folder, after=after, limit=limit)
    spanned = len({line[:11] for line in page.lines})  # the batches the page's rows came from
    if quick is not None:  # whenever it answers, it answers the same
        assert (quick.lines, quick.next, quick.total) == (page.lines, page.next, page.total)
    else:
        assert spanned > QUICK_BATCHES


def _rows_of(folder: Path, n: int, rows: int):  # type: ignore[no-untyped-def]
    def place(name: str) -> None:
        (folder / name).mkdir()
        (folder / name / "part-00000.txt").write_text("".join(f'{{"b": {n:03d}, "i": {i}}}\n' for i in range(rows)))
    return place


def test_a_quick_read_needs_a_log_parsed_already_and_a_short_page(tmp_path: Path) -> None:
    """What read_rows_quickly refuses (None: the caller reads where waiting is allowed): a log not
    parsed yet, one grown by more than QUICK_LOG_BYTES since, and a page over more batches than
    QUICK_BATCHES; a poller at the log's end is answered."""
    for n in range(40):
        deliver_once(tmp_path, f"live-{n}", 2, "batch=q-", _rows_of(tmp_path, n, 2))
    assert read_rows_quickly(tmp_path, after=0) is None  # never parsed by this process
    assert read_rows(tmp_path, after=0, limit=10).next == 10
    assert read_rows_quickly(tmp_path, after=0, limit=1000) is None  # 40 batches in one page
    assert read_rows_quickly(tmp_path, after=76, limit=1000).lines == read_rows(tmp_path, after=76).lines  # 2 batches
    with (tmp_path / LOG).open("a") as log:  # more appended than a quick read parses
        log.write("".join(f'{{"batch": "batch=z-{i}", "rows": 0, "key": "z-{i}"}}\n'
                          for i in range(QUICK_LOG_BYTES // 40)))
    assert read_rows_quickly(tmp_path, after=80) is None
    assert read_rows(tmp_path, after=80).next == 80
    assert read_rows_quickly(tmp_path, after=80) is not None


def test_a_grown_log_costs_its_new_lines_not_a_copy_of_the_old_ones(tmp_path: Path) -> None:
    """A day-old query's log holds ~170,000 entries and gains one a micro-batch: the parsed log's
    lists are extended, not copied, and an earlier snapshot still sees only its own entries."""
    from streamwarden.runtime.deliveries import _ParsedLogs

    logs = _ParsedLogs()
    log = tmp_path / LOG
    log.write_text("".join(_line(i) for i in range(3)))
    before = logs.log(log)
    with open(log, "a") as handle:
        handle.write(_line(3))
    after = logs.log(log)
    assert before is not None and after is not None
    assert after.all_entries is before.all_entries and after.all_ends is before.all_ends  # extended in place
    assert (before.count, before.total) == (3, 6) and (after.count, after.total) == (4, 10)
    stale = logs.log(log)  # nothing new: the same snapshot
    assert stale is after
