"""Replay on Spark: Table II over hand-made tuples, the CLI contract, and bad input."""

from __future__ import annotations

import json
import re

import pytest

from conftest import DRILL_CATALOG, ts, write_jsonl
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore
from streamwarden.cli.main import main
from streamwarden.errors import InputError

pytestmark = pytest.mark.spark

# Times are seconds after 10:00. Soldiers 1, 2 in paul's platoon X; 3, 4 in Y. Soldier 3 is near
# the target of action a (500 ± 10).
POSITION = [
    {"ts": ts(0), "SID": 1, "Pos": 100.0, "Platoon": "X"},
    {"ts": ts(0), "SID": 3, "Pos": 505.0, "Platoon": "Y"},
    {"ts": ts(0), "SID": 4, "Pos": 900.0, "Platoon": "Y"},
    {"ts": ts(30), "SID": 2, "Pos": 200.0, "Platoon": "X"},
    {"ts": ts(30), "SID": 3, "Pos": 495.0, "Platoon": "Y"},
    {"ts": ts(90), "SID": 1, "Pos": 300.0, "Platoon": "X"},
]
HEALTH = [
    {"ts": ts(5), "SID": 1, "Platoon": "X", "Heart": 70, "BPressure": 120},
    {"ts": ts(5), "SID": 3, "Platoon": "Y", "Heart": 90, "BPressure": 140},
    {"ts": ts(5), "SID": 4, "Platoon": "Y", "Heart": 99, "BPressure": 150},
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("table2")
    return {
        "Position": str(write_jsonl(root / "Position.jsonl", POSITION)),
        "Health": str(write_jsonl(root / "Health.jsonl", HEALTH)),
    }


def rows_by_graph(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["_graph"], []).append(row)
    return out


def test_selection_projection_masks_and_merges(spark, drill_catalog, inputs) -> None:
    rows = api.replay(drill_catalog, "paul", "SELECT ts, SID, Pos, Platoon FROM Position", inputs, spark=spark)
    assert rows == [
        {"ts": ts(0), "SID": 1, "Pos": 100.0, "Platoon": None, "_policies": ["p1"], "_graph": "ag1"},
        {"ts": ts(30), "SID": 2, "Pos": 200.0, "Platoon": None, "_policies": ["p1"], "_graph": "ag1"},
        {"ts": ts(90), "SID": 1, "Pos": 300.0, "Platoon": None, "_policies": ["p1"], "_graph": "ag1"},
    ]


def test_example_5_6_aggregate_rows_per_graph(spark, drill_catalog, inputs) -> None:
    rows = api.replay(drill_catalog, "paul", "SELECT AVG(Pos) FROM Position [RANGE 1 min]", inputs, spark=spark)
    graphs = rows_by_graph(rows)
    # ag1: read path over paul's own platoon, 1-minute windows as requested.
    assert graphs["ag1"] == [
        {"window_start": ts(0), "window_end": ts(60), "AVG(Pos)": 150.0, "_policies": ["p1"], "_graph": "ag1"},
        {"window_start": ts(60), "window_end": ts(120), "AVG(Pos)": 300.0, "_policies": ["p1"], "_graph": "ag1"},
    ]
    # ag2: p2 (avg of the other platoons during action a) raises the window to 1 hour.
    assert graphs["ag2"] == [
        {"window_start": ts(0), "window_end": ts(3600), "AVG(Pos)": (505.0 + 900.0 + 495.0) / 3,
         "_policies": ["p2"], "_graph": "ag2"},
    ]


def test_join_graphs_example_5_5(spark, drill_catalog, inputs) -> None:
    query = ("SELECT Position.SID AS sid, BPressure, Pos FROM Position [RANGE 1 min], Health [RANGE 1 min] "
             "WHERE Position.SID = Health.SID")
    graphs = rows_by_graph(api.replay(drill_catalog, "paul", query, inputs, spark=spark))
    # ag1 (read views): only paul's platoon; soldier 1 at 10:00 pairs with its 10:00:05 reading.
    assert graphs["ag1"] == [{"sid": 1, "BPressure": 120, "Pos": 100.0, "_policies": ["p1", "p3"], "_graph": "ag1"}]
    # ag2 (p4): the other platoon's soldier near the target, both positions inside the windows.
    assert sorted((r["sid"], r["Pos"]) for r in graphs["ag2"]) == [(3, 495.0), (3, 505.0)]
    assert all(r["_policies"] == ["p4"] for r in graphs["ag2"])


def test_action_not_started_empties_action_views(spark, inputs, tmp_path) -> None:
    text = DRILL_CATALOG.read_text().replace('a: {start: "2026-03-01T10:00:00Z", end: null, target: 500.0}',
                                            "a: {target: 500.0}")
    catalog = load_catalog_text(text)
    query = "SELECT BPressure, Pos FROM Position [RANGE 1 min], Health [RANGE 1 min] WHERE Position.SID = Health.SID"
    graphs = rows_by_graph(api.replay(catalog, "paul", query, inputs, spark=spark))
    assert "ag2" not in graphs  # Example 5.3: target(a) is NULL, p4 selects nothing
    assert len(graphs["ag1"]) == 1


def test_user_without_policies_gets_nothing(spark, drill_catalog, inputs) -> None:
    assert api.replay(drill_catalog, "rick", "SELECT * FROM Position", inputs, spark=spark) == []


def test_cli_replay_contract(spark, inputs, tmp_path, capsys) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["replay", "--catalog", str(DRILL_CATALOG), "--user", "paul", "--query",
                 "SELECT SID, Pos FROM Position WHERE Pos > 150",
                 "--input", f"Position={inputs['Position']}", "--output", str(out)])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["SID"], r["Pos"]) for r in lines) == [(1, 300.0), (2, 200.0)]
    assert all(set(r) == {"SID", "Pos", "_policies", "_graph"} for r in lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--query", "SELECT SID FROM Position WHERE"], "<query>:1:31: expected an expression"),
        (["--query", "SELECT SID FROM Pozition"], "unknown stream 'Pozition'"),
        (["--query", "SELECT SID FROM Position", "--user", "nobody"], "unknown user 'nobody'"),
        (["--query", "SELECT SID FROM Position", "--input", "Position=/does/not/exist"], "not found: /does/not/exist"),
    ],
)
def test_cli_bad_input_one_line(spark, inputs, tmp_path, capsys, args, message) -> None:
    base = {"--catalog": str(DRILL_CATALOG), "--user": "paul", "--input": f"Position={inputs['Position']}",
            "--output": str(tmp_path / "o.jsonl")}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    argv = ["replay"] + [x for pair in base.items() for x in pair]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "o.jsonl").exists()


def test_broken_record_names_file_and_record(spark, drill_catalog, tmp_path, capsys) -> None:
    path = tmp_path / "Position.jsonl"
    path.write_text(json.dumps(POSITION[0]) + "\n" + '{"ts": "2026-03-01T10:00:01Z", "SID": "one", "Pos": 1.0}\n')
    out = tmp_path / "o.jsonl"
    code = main(["replay", "--catalog", str(DRILL_CATALOG), "--user", "paul", "--query", "SELECT SID FROM Position",
                 "--input", f"Position={path}", "--output", str(out)])
    assert code == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "broken record in stream Position" in err and "Position.jsonl" in err
    assert '"one"' not in err  # never quoted: whoever reads the error may not be allowed to see the record
    assert not out.exists()


@pytest.mark.parametrize("debug", [False, True])
def test_a_broken_record_from_a_fresh_process_is_one_line_and_spark_logs_to_a_file(tmp_path, debug: bool) -> None:
    """A process of its own starts its own JVM, whose stderr and log4j are the terminal's unless
    streamwarden moves them (the in-process test above cannot see them): Spark's 25-line Java
    trace goes to logs/spark.log next to the store, the user reads one line (issue 24, finding
    12); ``--debug`` adds the Python trace and where Spark's log is, never the Java trace."""
    import os
    import subprocess
    import sys

    path = tmp_path / "Position.jsonl"
    path.write_text(json.dumps(POSITION[0]) + "\n" + '{"ts": "2026-03-01T10:00:01Z", "SID": "one", "Pos": 1.0}\n')
    env = {**os.environ, "STREAMWARDEN_STORE": f"sqlite:///{tmp_path / 'home' / 'store.db'}"}
    done = subprocess.run([sys.executable, "-m", "streamwarden.cli.main", *(["--debug"] * debug), "replay",
                           "--catalog", str(DRILL_CATALOG), "--user", "paul", "--query", "SELECT SID FROM Position",
                           "--input", f"Position={path}", "--output", str(tmp_path / "o.jsonl")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1].startswith("error: broken record in stream Position") and '"one"' not in done.stderr
    log = tmp_path / "home" / "logs" / "spark.log"
    if debug:
        assert lines[0] == "Traceback (most recent call last):" and f"Spark's log: {log}" in lines
    else:
        assert lines == [lines[-1]], done.stderr
    assert "\tat org.apache" not in done.stderr and "WARN" not in done.stderr and "log4j" not in done.stderr
    assert "ERROR Executor" in log.read_text() and oct(log.stat().st_mode & 0o777) == "0o600"


def test_empty_result_is_not_an_error(spark, drill_catalog, inputs, tmp_path) -> None:
    out = tmp_path / "o.jsonl"
    assert main(["replay", "--catalog", str(DRILL_CATALOG), "--user", "rick", "--query", "SELECT SID FROM Position",
                 "--input", f"Position={inputs['Position']}", "--output", str(out)]) == 0
    assert out.read_text() == ""


def test_explain_lists_graphs_sql_and_refusals(capsys) -> None:
    assert main(["explain", "--catalog", str(DRILL_CATALOG), "--user", "paul", "--query",
                 "SELECT AVG(Heart) FROM Position [RANGE 1 hour], Health [RANGE 1 hour] "
                 "WHERE Position.SID = Health.SID AND Pos >= 100"]) == 0
    text = capsys.readouterr().out
    assert "Authorized graph ag1 [deployed]" in text and "Authorized graph ag2 [NOT DEPLOYED]" in text
    assert "projects away" in text and "GROUP BY window(" in text
    assert "p2 at Sec_Read(Position): grants avg, not read" in text
    assert main(["explain", "--catalog", str(DRILL_CATALOG), "--user", "paul", "--format", "json",
                 "--query", "SELECT SID, Platoon FROM Position"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["graphs"][0]["policies"] == ["p1"] and "Platoon" in doc["notes"][0]


def test_parquet_directory_gives_the_same_rows(spark, drill_catalog, inputs, tmp_path) -> None:
    import pandas as pd

    frame = pd.DataFrame(POSITION)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    frame["SID"] = frame["SID"].astype("int32")
    folder = tmp_path / "Position"
    folder.mkdir()
    frame.to_parquet(folder / "part-0.parquet", index=False)
    query = "SELECT ts, SID, Pos FROM Position WHERE Pos >= 150"
    from_parquet = api.replay(drill_catalog, "paul", query, {"Position": str(folder)}, spark=spark)
    from_json = api.replay(drill_catalog, "paul", query, inputs, spark=spark)
    assert from_parquet == from_json and len(from_json) == 2


def test_parquet_reads_only_the_columns_used_and_pushes_filters(spark, drill_catalog, tmp_path) -> None:
    """Columns whose file type is the catalog's need no broken-record check, so Spark prunes
    the unused ones and pushes the query's filter into the reader; the check still runs on
    ``ts`` and on the column whose type differs."""
    import pandas as pd

    from streamwarden.engine.sources import read_input

    frame = pd.DataFrame(POSITION)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)  # SID stays int64: the catalog says int
    folder = tmp_path / "Position"
    folder.mkdir()
    frame.to_parquet(folder / "part-0.parquet", index=False)
    read = read_input(spark, drill_catalog.streams["Position"], folder, streaming=False)
    plan = read.filter("Pos >= 150").select("SID")._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<ts:timestamp,SID:bigint,Pos:double>" in plan  # Platoon pruned; SID checked
    assert "GreaterThanOrEqual(Pos,150.0)" in plan
    frame.loc[2, "ts"] = None
    frame.to_parquet(folder / "part-0.parquet", index=False)
    with pytest.raises(InputError, match=r"broken record in stream Position \(record has no ts\) in .*part-0"):
        api.replay(drill_catalog, "paul", "SELECT SID FROM Position WHERE Pos >= 150",
                   {"Position": str(folder)}, spark=spark)


def test_a_broken_parquet_record_is_refused_before_any_user_expression_sees_it(spark, drill_catalog,
                                                                               tmp_path) -> None:
    """The broken-record check is deterministic, so Spark merges it with the query's filters into
    one ``Filter``; it must stay first there. A user expression on the broken column (a division
    by it, a comparison) must neither run on the broken row nor stop the job with its own error:
    the one error names the file and the column, never the value."""
    import pandas as pd

    frame = pd.DataFrame(POSITION)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    frame["SID"] = frame["SID"].astype(str)  # the file's type differs from the catalog's: SID is checked
    frame.loc[3, "SID"] = "9223372036854775808000"  # does not fit an int
    frame.loc[4, "SID"] = "0"  # a zero divisor on a good row: try_divide gives NULL, no error
    folder = tmp_path / "Position"
    folder.mkdir()
    frame.to_parquet(folder / "part-0.parquet", index=False)
    for query in ("SELECT SID FROM Position WHERE 10 / SID > 0", "SELECT SID FROM Position WHERE SID * SID > 1",
                  "SELECT SID FROM Position WHERE SID = 3 AND Pos > 0"):
        with pytest.raises(InputError) as refused:
            api.replay(drill_catalog, "paul", query, {"Position": str(folder)}, spark=spark)
        message = str(refused.value)
        assert re.search(r"broken record in stream Position \(SID does not fit a int\) in .*part-0", message), message
        assert "9223372036854775808000" not in message and "DIVIDE_BY_ZERO" not in message
    frame.loc[3, "SID"] = "2"
    frame.to_parquet(folder / "part-0.parquet", index=False)
    rows = api.replay(drill_catalog, "paul", "SELECT SID FROM Position WHERE 10 / SID > 0",
                      {"Position": str(folder)}, spark=spark)
    assert 0 not in {r["SID"] for r in rows}, "the zero divisor's row is filtered out, not an error"


def test_cli_check_reports_the_bad_line(tmp_path, capsys) -> None:
    bad = tmp_path / "cat.yaml"
    bad.write_text(DRILL_CATALOG.read_text().replace("subject: Doctor\n    streams: [Health]\n",
                                                     "subject: Nurse\n    streams: [Health]\n", 1))
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["check", str(bad), "--store", store]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"error: {bad}:") and "unknown role 'Nurse'" in err
    assert not (tmp_path / "store.db").exists()  # nothing is stored from a bad catalog
    assert main(["check", str(DRILL_CATALOG), "--store", store]) == 0
    assert "4 policies; loaded into sqlite:///" in capsys.readouterr().out
    assert [p.id for p in CatalogStore(store).load().policies] == ["p1", "p2", "p3", "p4"]


def test_explain_says_when_a_role_has_no_policy_on_a_stream(capsys) -> None:
    assert main(["explain", "--catalog", str(DRILL_CATALOG), "--user", "rick", "--query", "SELECT * FROM Health"]) == 0
    assert "Health: none of rick's roles (Captain) has a policy on this stream" in capsys.readouterr().out


def test_iso_timestamp_variants_and_rejects(spark, tmp_path) -> None:
    catalog = load_catalog_text("streams: {S: {schema: {ts: timestamp, v: int}}}\nroles: {R: {}}\n"
                                "users: {u: {roles: [R]}}\n"
                                "policies:\n  - {id: p, subject: R, streams: [S], privilege: read}\n")
    good = write_jsonl(tmp_path / "good.jsonl", [
        {"ts": "2026-03-01T10:00:00.5Z", "v": 1}, {"ts": "2026-03-01T12:00:00+02:00", "v": 2},
        {"ts": "2026-03-01T10:00:00", "v": 3}, {"ts": "2026-03-01T10:00:00.123456Z", "v": 4}])
    rows = {r["v"]: r["ts"] for r in api.replay(catalog, "u", "SELECT ts, v FROM S", {"S": str(good)}, spark=spark)}
    assert rows == {1: "2026-03-01T10:00:00.500000Z", 2: "2026-03-01T10:00:00Z", 3: "2026-03-01T10:00:00Z",
                    4: "2026-03-01T10:00:00.123456Z"}
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"ts": "March 1st", "v": 5}])
    from streamwarden.errors import InputError

    with pytest.raises(InputError) as info:
        api.replay(catalog, "u", "SELECT v FROM S", {"S": str(bad)}, spark=spark)
    assert str(info.value).endswith("bad.jsonl") and "March" not in str(info.value)


def test_output_timestamps_are_iso_with_micros_only_when_present(spark) -> None:
    """One SQL expression (as output rows are built) and the composed one agree; a fraction of
    a second before 1970 is written as it is (pmod, not a negative remainder)."""
    from pyspark.sql import functions as F

    from streamwarden.engine.execute import iso_timestamp, iso_timestamp_of

    frame = spark.sql("SELECT * FROM VALUES (timestamp'2026-03-01 10:00:00'), (timestamp'2026-03-01 10:00:00.000120'), "
                      "(timestamp'1969-12-31 23:59:59.5'), (NULL) AS t(`it's`)")
    composed = [r[0] for r in frame.select(iso_timestamp(F.col("`it's`"))).collect()]
    assert composed == [r[0] for r in frame.select(iso_timestamp_of("it's")).collect()]
    assert composed == ["2026-03-01T10:00:00Z", "2026-03-01T10:00:00.000120Z", "1969-12-31T23:59:59.500000Z", None]
