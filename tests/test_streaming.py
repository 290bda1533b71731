"""Continuous runs: same rows as replay, exactly once across restarts, live action values."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from conftest import ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore, sqlite_url
from streamwarden.engine.sinks import read_sink
from test_replay import HEALTH, POSITION

pytestmark = pytest.mark.spark


def strip(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows)


def test_run_equals_replay_and_restarts_exactly_once(spark, drill_catalog, tmp_path) -> None:
    incoming = tmp_path / "Position"
    write_jsonl(incoming / "part-0.jsonl", POSITION[:3])
    query = "SELECT ts, SID, Pos FROM Position"
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    store = sqlite_url(tmp_path / "store.db")

    def run_once() -> None:
        stream = api.run(drill_catalog, "paul", query, {"Position": incoming}, str(sink), checkpoint=checkpoint,
                         store_url=store, spark=spark, available_now=True)
        stream.awaitTermination()
        assert stream.exception() is None

    run_once()
    assert len(read_sink(spark, sink)) == 1  # only soldier 1 of paul's platoon so far
    write_jsonl(incoming / "part-1.jsonl", POSITION[3:])
    run_once()  # restart on the same checkpoint: picks up only the new file
    streamed = read_sink(spark, sink)
    replayed = api.replay(drill_catalog, "paul", query, {"Position": incoming}, spark=spark)
    assert strip(streamed) == strip(replayed)
    assert len(streamed) == 3


def test_windows_emit_once_closed_and_match_replay(spark, drill_catalog, tmp_path) -> None:
    incoming = tmp_path / "Position"
    write_jsonl(incoming / "part-0.jsonl", POSITION)
    query = "SELECT AVG(Pos) FROM Position [RANGE 1 min]"
    replayed = api.replay(drill_catalog, "paul", query, {"Position": incoming}, spark=spark)
    # A later tuple outside paul's platoon moves the watermark past every window above.
    write_jsonl(incoming / "part-1.jsonl", [{"ts": ts(4 * 3600), "SID": 9, "Pos": 1.0, "Platoon": "Z"}])
    sink = tmp_path / "sink"
    stream = api.run(drill_catalog, "paul", query, {"Position": incoming}, str(sink), checkpoint=tmp_path / "c",
                     store_url=sqlite_url(tmp_path / "s.db"), spark=spark, max_files_per_trigger=1,
                     available_now=True)
    stream.awaitTermination()  # availableNow ends with a no-data batch that emits the closed windows
    assert strip(read_sink(spark, sink)) == strip(replayed)


def test_action_starting_mid_run_takes_effect(spark, tmp_path) -> None:
    catalog = load_catalog_text("""
streams: {S: {schema: {ts: timestamp, v: int}}}
roles: {R: {}}
users: {u: {roles: [R]}}
actions: {a: {target: 1.0}}
policies:
  - {id: during_a, subject: R, streams: [S], privilege: read, time: ["start(a)", "end(a)"]}
""", "live.yaml")
    store_url = sqlite_url(tmp_path / "store.db")
    incoming, sink = tmp_path / "S", tmp_path / "sink"
    write_jsonl(incoming / "a.jsonl", [{"ts": ts(0), "v": 1}])
    stream = api.run(catalog, "u", "SELECT v FROM S", {"S": incoming}, str(sink), checkpoint=tmp_path / "c",
                     store_url=store_url, spark=spark)
    try:
        stream.processAllAvailable()
        assert not any(sink.glob("*.json")) or read_sink(spark, sink) == []  # a has not started: nothing
        CatalogStore(store_url).set_action("a", start=datetime(2026, 3, 1, 10, 0, 30, tzinfo=timezone.utc))
        write_jsonl(incoming / "b.jsonl", [{"ts": ts(10), "v": 2}, {"ts": ts(60), "v": 3}])
        stream.processAllAvailable()
    finally:
        stream.stop()
    assert [r["v"] for r in read_sink(spark, sink)] == [3]  # same query, no re-registration


def test_aggregate_over_join_runs_continuously_like_replay(spark, drill_catalog, tmp_path) -> None:
    position, health = tmp_path / "Position", tmp_path / "Health"
    write_jsonl(position / "part-0.jsonl", POSITION)
    write_jsonl(health / "part-0.jsonl", HEALTH)
    query = ("SELECT AVG(BPressure) AS bp, COUNT(*) AS pairs FROM Position [RANGE 1 min], Health [RANGE 1 min] "
             "WHERE Position.SID = Health.SID")
    inputs = {"Position": position, "Health": health}
    replayed = api.replay(drill_catalog, "paul", query, inputs, spark=spark)
    assert {r["_graph"] for r in replayed} == {"ag1", "ag2"}  # read views and p4's join view
    # Later tuples no policy covers move both inputs' watermarks (the global one is their minimum).
    later = {"ts": ts(4 * 3600), "SID": 9, "Platoon": "X"}
    write_jsonl(position / "part-1.jsonl", [{**later, "Pos": 1.0, "Platoon": "Z"}])
    write_jsonl(health / "part-1.jsonl", [{**later, "Heart": 60, "BPressure": 100, "Platoon": "Z"}])
    sink = tmp_path / "sink"
    stream = api.run(drill_catalog, "paul", query, inputs, str(sink), checkpoint=tmp_path / "c",
                     store_url=sqlite_url(tmp_path / "s.db"), spark=spark, max_files_per_trigger=1,
                     available_now=True)
    stream.awaitTermination()
    assert strip(read_sink(spark, sink)) == strip(replayed)


def test_broken_record_stops_the_run_and_loses_nothing(spark, drill_catalog, tmp_path) -> None:
    from streamwarden.engine.execute import input_errors
    from streamwarden.errors import InputError

    incoming, sink = tmp_path / "Position", tmp_path / "sink"
    write_jsonl(incoming / "part-0.jsonl", POSITION[:3])
    options = dict(checkpoint=tmp_path / "c", store_url=sqlite_url(tmp_path / "s.db"), spark=spark,
                   max_files_per_trigger=1, available_now=True)
    query = "SELECT ts, SID, Pos FROM Position"
    (incoming / "part-1.jsonl").write_text('{"ts": "2026-03-01T10:00:30Z", "SID": "two", "Pos": 1.0}\n')
    stream = api.run(drill_catalog, "paul", query, {"Position": incoming}, str(sink), **options)
    with pytest.raises(InputError, match=r"broken record in stream Position .*part-1.jsonl$"):
        with input_errors():
            stream.awaitTermination()
    assert len(read_sink(spark, sink)) == 1  # the first file's row was committed before the failure
    write_jsonl(incoming / "part-1.jsonl", POSITION[3:])  # the provider fixes the file
    stream = api.run(drill_catalog, "paul", query, {"Position": incoming}, str(sink), **options)
    stream.awaitTermination()
    assert strip(read_sink(spark, sink)) == strip(
        api.replay(drill_catalog, "paul", query, {"Position": incoming}, spark=spark))


def _sink_listing(sink) -> list[tuple[str, list[str]]]:  # type: ignore[no-untyped-def]
    """Everything a reader of a sink folder can list (hidden files too) and every row in it, with
    the random job ids Spark puts in file names replaced (they say nothing)."""
    import re

    listing = []
    for path in sorted(sink.rglob("*")):
        name = re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "JOB", str(path.relative_to(sink)))
        rows = sorted(path.read_text().splitlines()) if path.is_file() and name.startswith("part-") else []
        listing.append((name, rows))
    return listing


def test_a_run_sink_shows_nothing_of_micro_batches_whose_rows_the_policies_removed(spark, drill_catalog,
                                                                                  tmp_path) -> None:
    """Issue 24: Spark's file sink wrote ``_spark_metadata/N`` for every micro-batch, also one
    whose tuples paul may not see, so his sink said when hidden tuples arrived. Now a batch
    without rows leaves no trace and the files are numbered by the sink's own sequence: his
    sink is the same, file for file, whether or not a file of another platoon came in between."""
    import os

    visible = [[POSITION[0]], [POSITION[3]]]  # platoon X: paul's
    hidden = [POSITION[1], POSITION[2]]  # platoon Y, far from any action's target: not his

    def run(root, files) -> list[tuple[str, list[str]]]:  # type: ignore[no-untyped-def]
        for n, records in enumerate(files):
            path = write_jsonl(root / "in" / f"part-{n}.jsonl", records)
            os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # read one a micro-batch, in this order
        stream = api.run(drill_catalog, "paul", "SELECT ts, SID, Pos FROM Position", {"Position": root / "in"},
                         str(root / "sink"), checkpoint=root / "c", store_url=sqlite_url(root / "s.db"), spark=spark,
                         max_files_per_trigger=1, available_now=True)
        stream.awaitTermination()
        assert stream.exception() is None and len(stream.recentProgress) >= len(files)
        return _sink_listing(root / "sink")

    alone = run(tmp_path / "alone", visible)
    between = run(tmp_path / "between", [visible[0], hidden, visible[1]])
    assert between == alone
    assert [rows for _, rows in alone if rows] and len(read_sink(spark, tmp_path / "between" / "sink")) == 2


def test_a_retried_batch_replaces_its_own_file_and_an_empty_one_takes_no_number(spark, tmp_path) -> None:
    """What Spark does after a crash between the sink's rename and its commit: the same batch
    id again, with the same rows. The file is replaced, never doubled; numbering goes on."""
    from streamwarden.engine.sinks import NUMBERS, BatchNumbers, RowFiles

    sink = tmp_path / "sink"
    sink.mkdir()
    write = RowFiles(sink, BatchNumbers(tmp_path / "c" / NUMBERS / "sink.json"))
    rows = spark.createDataFrame([(1,), (2,)], "v int")
    write(rows, 7)
    write(rows, 7)  # the retry
    write(rows.limit(0), 8)  # every row removed: no file, no number
    write(rows.filter("v = 2"), 9)
    assert sorted(p.name for p in sink.iterdir()) == ["part-0000000000.json", "part-0000000001.json"]
    assert sorted(r["v"] for r in read_sink(spark, sink)) == [1, 2, 2]
