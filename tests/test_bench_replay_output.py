"""The replay_output experiment's declaration: its processes, target, tables and observations
(no Spark: the launcher is tried on a small Python child)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import replay_output as R
from bench.suite.experiment import Command, Measured

REPO = Path(__file__).resolve().parent.parent


def test_the_processes_are_launched_commands_over_the_rows() -> None:
    e = R.experiment(quick=True)
    assert [(p.name, p.group) for p in e.pipelines] == [
        ("streamwarden", "replay"), ("plain", "replay"), ("plain+provenance", "replay"),
        ("streamwarden, step by step", "phases")]
    assert all(isinstance(p.run, Command) and p.reads == ("rows",) for p in e.pipelines)
    work, out = Path("/w"), Path("/w/out/x")
    cli = [str(a) for a in e.pipeline("streamwarden").run.argv(work, out)]
    assert cli[1:6] == ["-m", "bench.replay_output", "launch", str(out), "--"]
    assert cli[6].endswith("streamwarden") and cli[7] == "replay" and cli[-2:] == ["--output", str(out)]
    assert f"Position={work / 'data' / 'Position'}" in cli and R.QUERY in cli
    plain = [str(a) for a in e.pipeline("plain+provenance").run.argv(work, out)]
    assert plain[7:10] == ["-m", "bench.replay_output", "job"] and plain[10] == "plain+provenance"
    assert json.loads(plain[-1])["spark.sql.session.timeZone"] == "UTC", "streamwarden's settings, for plain too"
    assert not e.warmup and R.experiment().workload.description.startswith("the drill's Position stream, about 3,000")


def test_the_target_is_plain_wall_over_streamwarden_with_cpu_beside() -> None:
    (target,) = R.experiment(quick=True).targets
    assert "0.9×" in target.text

    def measured(streamwarden_s: float) -> Measured:
        return Measured({"streamwarden": [{"rows_per_s": 100 / streamwarden_s, "rows_per_cpu_s": 10.0}],
                         "plain": [{"rows_per_s": 100 / 30.0, "rows_per_cpu_s": 12.5}]})

    assert target.check(measured(32.0)).met is True
    assert target.check(measured(34.0)).met is False
    assert target.check(measured(32.0)).measured == "0.94× (per CPU s: 0.80×)"
    assert target.check(Measured({"plain": []})).met is None


def test_tables_plots_and_observations() -> None:
    e = R.experiment(quick=True)
    assert [t.title for t in e.tables][:2] == ["Whole processes", "Speed against plain PySpark"]
    assert [c.title for c in e.tables[2].columns][3] == "Spark start" and e.tables[2].where == {"phases": "timed"}
    assert [p.name for p in e.plots] == ["seconds", "phases"]
    run = {"rows_out": 250, "cpu_s": 10.0, "load": 2.0, "subreaper": 1}
    measured = Measured({"streamwarden": [{**run, "wall_s": 20.0}], "plain": [{**run, "wall_s": 22.0,
                                                                                "spark_start_s": 9.0}],
                         "plain+provenance": [{**run, "wall_s": 21.0}],
                         "streamwarden, step by step": [{**run, "wall_s": 21.0, "spark_start_s": 8.0}]})
    said = e.explain(measured, {"rows": 1000, "platoon X rows": 250})
    assert said[0] == "Every process wrote the 250 rows of platoon X, of 1,000."
    assert "Spark's start 8.0 vs 9.0 of 21.0 vs 22.0 in all" in said[1] and said[2].startswith("Machine load")
    assert len(said) == 3
    measured.runs_by_pipeline["plain"][0]["rows_out"] = 249
    assert e.explain(measured, {"rows": 1000, "platoon X rows": 250})[0].startswith("**Rows written differ**")


def test_the_launcher_counts_part_lines_and_keeps_the_childs_numbers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    child = (f"import json, pathlib; d = pathlib.Path({str(out)!r}); d.mkdir(); "
             "(d / 'part-0.json').write_text('{}\\n{}\\n'); (d / '_SUCCESS').write_text(''); "
             "print(json.dumps({'write_s': 1.5}))")
    done = subprocess.run([sys.executable, "-m", "bench.replay_output", "launch", str(out), "--", sys.executable,
                           "-c", child], cwd=REPO, capture_output=True, text=True, check=True)
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["rows_out"] == 2 and line["write_s"] == 1.5 and line["subreaper"] == 1
