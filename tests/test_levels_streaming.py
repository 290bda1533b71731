"""Security levels in continuous runs: [ROWS n] windows in the state store, one processor per level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.datagen.cloud import message_log
from streamwarden.engine.levels.processors import LevelQuery, read_query_output
from streamwarden.engine.sinks import read_sink
from streamwarden.errors import InputError

pytestmark = pytest.mark.spark

CATALOG = load_catalog_text("""
lattice:
  classes: {COI1: ["1", "2"], COI2: [A, B, C]}
streams:
  MessageLog:
    schema: {ts: timestamp, serviceId: string, msgType: string, sender: string, receiver: string, outcome: string}
    level: {from: sender}
users:
  cm: {clearance: "[T, T]"}
  c1: {clearance: "[1, ⊥]"}
  c2: {clearance: "[2, ⊥]"}
""", "cloud.yaml")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return message_log(minutes=2, services=6, rate_per_s=1.5, seed=5).records


def feed(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def comparable(rows: list[dict]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in r.items() if k not in ("_graph", "_policies")}, sort_keys=True)
                  for r in rows)


@pytest.mark.parametrize("query", [
    'SELECT COUNT(*), MIN(ts) FROM MessageLog [ROWS 40] WHERE outcome = "success"',
    'SELECT serviceId, COUNT(*), MAX(ts) FROM MessageLog [ROWS 25] WHERE msgType = "send" GROUP BY serviceId',
])
def test_rows_windows_run_equals_replay_across_micro_batches_and_a_restart(spark, tmp_path, records, query) -> None:
    incoming, sink, checkpoint = tmp_path / "in", tmp_path / "sink", tmp_path / "cp"
    half = len(records) // 2

    def run_until_idle() -> None:
        stream = api.run(CATALOG, "cm", query, {"MessageLog": incoming}, str(sink), checkpoint=checkpoint,
                         store_url=sqlite_url(tmp_path / "s.db"), spark=spark, level="[1, B]")
        try:
            stream.processAllAvailable()
        finally:
            stream.stop()

    feed(incoming, "part-0.jsonl", records[:half])
    run_until_idle()
    feed(incoming, "part-1.jsonl", records[half:])  # the window's last tuples come back from the state store
    run_until_idle()
    replayed = api.replay(CATALOG, "cm", query, {"MessageLog": incoming}, spark=spark, level="[1, B]")
    assert replayed and comparable(read_sink(spark, sink)) == comparable(replayed)


def test_levels_run_in_their_own_processors_and_each_sees_what_it_would_alone(spark, tmp_path, records) -> None:
    incoming = tmp_path / "in"
    feed(incoming, "part-0.jsonl", records)
    count = 'SELECT COUNT(*) FROM MessageLog [ROWS 30] WHERE msgType = "send"'
    sends = 'SELECT ts, receiver FROM MessageLog WHERE msgType = "send"'
    queries = [LevelQuery("one", "c1", count), LevelQuery("two", "c2", count),  # incomparable levels
               LevelQuery("one_sends", "c1", sends), LevelQuery("audit", "cm", count, level="[T, ⊥]")]
    processors = api.run_levels(CATALOG, queries, {"MessageLog": incoming}, tmp_path / "out",
                                store_url=sqlite_url(tmp_path / "s.db"), spark=spark, available_now=True)
    for p in processors:
        p.stream.awaitTermination()
    assert {p.level: p.queries for p in processors} == {
        "_shepherd MessageLog": (), "[1, ⊥]": ("one", "one_sends"), "[2, ⊥]": ("two",), "[T, ⊥]": ("audit",)}
    (root,) = (tmp_path / "checkpoints").iterdir()  # next to the store, not in the output tree
    checkpoints = {p.name for p in root.iterdir()}
    assert checkpoints == {"_shepherd", "1_bot", "2_bot", "top_bot"}  # nothing shared between levels
    assert not (tmp_path / "out" / "_checkpoints").exists()
    for q in queries:
        alone = api.replay(CATALOG, q.user, q.query, {"MessageLog": incoming}, spark=spark, level=q.level)
        assert alone and comparable(read_query_output(spark, tmp_path / "out", q.id)) == comparable(alone)
    one = read_query_output(spark, tmp_path / "out", "one_sends")
    assert set(one[0]) == {"ts", "receiver", "level", "_policies", "_graph"}  # its own columns only


def test_a_query_above_its_clearance_stops_every_processor_before_they_start(spark, tmp_path) -> None:
    from streamwarden.errors import AuthorizationError

    queries = [LevelQuery("fine", "c1", "SELECT ts FROM MessageLog"),
               LevelQuery("bad", "c2", "SELECT ts FROM MessageLog", level="[T, ⊥]")]
    with pytest.raises(AuthorizationError, match="c2 is cleared for"):
        api.run_levels(CATALOG, queries, {"MessageLog": tmp_path / "in"}, tmp_path / "out",
                       store_url=sqlite_url(tmp_path / "s.db"), spark=spark)
    assert not (tmp_path / "out").exists()


def test_processors_of_several_levels_share_one_read_through_the_shepherd(spark, tmp_path, records) -> None:
    """Two levels read MessageLog as it is: the shepherd reads it once, levels its tuples and
    both processors read those; each query still sees exactly what it would alone, across a
    restart with new input, and nothing is read twice."""
    incoming, out, store = tmp_path / "in", tmp_path / "out", sqlite_url(tmp_path / "s.db")
    sends = 'SELECT ts, receiver FROM MessageLog WHERE msgType = "send"'
    counts = 'SELECT serviceId, COUNT(*) FROM MessageLog [RANGE 30 s] GROUP BY serviceId'
    queries = [LevelQuery("c1_sends", "c1", sends), LevelQuery("c2_counts", "c2", counts),
               LevelQuery("top_sends", "cm", sends)]
    half = len(records) // 2
    for part, chunk in enumerate((records[:half], records[half:])):
        feed(incoming, f"part-{part}.jsonl", chunk)
        processors = api.run_levels(CATALOG, queries, {"MessageLog": incoming}, out, store_url=store, spark=spark,
                                    available_now=True)
        for p in processors:
            p.stream.awaitTermination()
        assert [p.level for p in processors] == ["_shepherd MessageLog", "[1, ⊥]", "[2, ⊥]", "[T, T]"]
        assert processors[0].queries == ()
    (root,) = (tmp_path / "checkpoints").iterdir()
    assert {p.name for p in root.iterdir()} == {"_shepherd", "1_bot", "2_bot", "top_top"}
    tuples = spark.read.parquet(str(root / "_shepherd" / "MessageLog" / "tuples"))
    assert tuples.count() == len(records)  # each tuple levelled once, for every processor
    for q in queries:  # each alone, in one run over the whole input
        for p in api.run_levels(CATALOG, [q], {"MessageLog": incoming}, tmp_path / "alone", store_url=store,
                                spark=spark, available_now=True):
            p.stream.awaitTermination()
        alone = read_query_output(spark, tmp_path / "alone", q.id)
        assert alone and comparable(read_query_output(spark, out, q.id)) == comparable(alone)
    alone = api.replay(CATALOG, "c1", sends, {"MessageLog": incoming}, spark=spark)
    assert comparable(read_query_output(spark, out, "c1_sends")) == comparable(alone)
    # A level is bits in the lattice's order: a new company would shift them, so the tuples
    # levelled so far must not be read under the new lattice.
    moved = load_catalog_text(CATALOG.text.replace('COI1: ["1", "2"]', 'COI1: ["0", "1", "2"]'), "cloud2.yaml")
    with pytest.raises(InputError, match="levelled under another lattice"):
        api.run_levels(moved, queries, {"MessageLog": incoming}, out, store_url=store, spark=spark, available_now=True)


def test_a_broken_record_stops_the_shepherd_before_any_processor_starts(spark, tmp_path, records) -> None:
    from pyspark.errors import StreamingQueryException

    incoming = tmp_path / "in"
    feed(incoming, "part-0.jsonl", records[:5])
    (incoming / "part-1.jsonl").write_text('{"ts": "2026-03-01T10:00:00Z"\n')  # not JSON
    sends = 'SELECT ts, receiver FROM MessageLog WHERE msgType = "send"'
    queries = [LevelQuery("a", "c1", sends), LevelQuery("b", "c2", sends)]
    with pytest.raises(StreamingQueryException, match=r"broken record in stream MessageLog .*part-1\.jsonl"):
        api.run_levels(CATALOG, queries, {"MessageLog": incoming}, tmp_path / "out",
                       store_url=sqlite_url(tmp_path / "s.db"), spark=spark, available_now=True)
    assert not (tmp_path / "out").exists()


def test_which_streams_the_shepherd_reads_does_not_depend_on_the_levels_in_use() -> None:
    """A processor's checkpoint remembers the files of the folder it read: a stream must not
    move between the input and the shepherd's folder when other levels' queries come or go."""
    from streamwarden.engine.levels.routing import shared_streams

    def routed(*pairs: tuple[str, str]) -> set[str]:
        return shared_streams(CATALOG, [api.authorize(CATALOG, user, query) for user, query in pairs])

    plain, counted = "SELECT ts FROM MessageLog", "SELECT COUNT(*) FROM MessageLog [ROWS 5]"
    assert routed(("c1", plain)) == routed(("c1", plain), ("c2", plain)) == {"MessageLog"}
    assert routed(("c1", counted), ("c2", counted)) == set()  # a [ROWS n] window reads the input's order


def _listing(folder: Path) -> list[tuple[str, int, list[str]]]:
    """A query's output as its reader sees it: each folder's name, how many part files it
    holds, its rows and its files' names (but for the random job id Spark puts in them)."""
    import re

    listing = []
    for batch in sorted(folder.iterdir()):
        parts = sorted(batch.glob("part-*"))
        rows = sorted(line for part in parts for line in part.read_text().splitlines() if line.strip())
        names = sorted(re.sub(r"-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}-", "-JOB-", p.name) for p in batch.iterdir())
        listing.append((batch.name, len(parts), rows + names))
    return listing


def test_a_low_users_output_is_the_same_whether_or_not_high_tuples_arrive_in_between(spark, tmp_path,
                                                                                        records) -> None:
    """Issue 24: a micro-batch of tuples only a higher level sees made the low processor write an
    empty ``batch=N`` folder, numbered by Spark's batch id, so its folders (and their gaps)
    counted the hidden batches. Now a query with no rows in a batch writes nothing, and folders
    are numbered by the query's own sequence: the low output is identical, name for name."""
    low = [r for r in records if r["sender"] == "Company1"]  # c1 at [1, ⊥] sees these ...
    high = [r for r in records if r["sender"] == "CompanyA"]  # ... and none of these
    sends = 'SELECT ts, receiver FROM MessageLog WHERE msgType = "send"'
    queries = [LevelQuery("low", "c1", sends), LevelQuery("high", "cm", sends)]

    def run(root: Path, files: list[list[dict]]) -> list[tuple[str, int, list[str]]]:
        for n, chunk in enumerate(files):
            feed(root / "in", f"part-{n}.jsonl", chunk)
            for p in api.run_levels(CATALOG, queries, {"MessageLog": root / "in"}, root / "out",
                                    store_url=sqlite_url(root / "s.db"), spark=spark, available_now=True):
                p.stream.awaitTermination()
        return _listing(root / "out" / "low")

    half = len(low) // 2
    alone = run(tmp_path / "alone", [low[:half], low[half:]])
    between = run(tmp_path / "between", [low[:half], high[:10], high[10:], low[half:]])
    assert [name for name, _, _ in alone] == ["batch=0000000000", "batch=0000000001"]
    assert between == alone
    assert len(_listing(tmp_path / "between" / "out" / "high")) == 4  # the high query saw every batch
