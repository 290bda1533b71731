"""The network_compile experiment: its workload, its declaration, and its quick size run for real
(three small child processes, no Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import network_compile as C
from bench.suite.experiment import Command, Measured
from bench.suite.registry import EXPERIMENTS, declaration
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.language.binder import bound_query

REPO = Path(__file__).resolve().parent.parent


def test_the_declaration() -> None:
    assert EXPERIMENTS["network_compile"] == "bench.network_compile:experiment"
    assert declaration("network_compile") is C.experiment
    full, quick = C.experiment(), C.experiment(quick=True)
    assert [(p.params["queries"], p.params["users"]) for p in full.pipelines] == [
        (1_000, 100), (10_000, 1_000), (100_000, 10_000)]
    assert [p.name for p in quick.pipelines] == ["compile-200"] and quick.repeats == 1
    assert all(isinstance(p.run, Command) for p in full.pipelines) and not full.warmup
    assert [p.name for p in full.plots] == ["time", "memory"] and len(full.targets) == 2
    assert {t.check(Measured({})).measured for t in full.targets} == {"not measured"}


def test_the_hospital() -> None:
    listed = C.users(1_000)
    assert len({u["ward"] for u in listed}) == 40 and listed[10]["role"] == "Physician"
    assert sum(u["role"] == "Researcher" for u in listed) == 20
    texts = [C.queries(u) for u in listed]
    assert all(len(t) == C.PER_USER for t in texts) and texts[1][:3] == texts[2][:3] == list(C.STANDARD["Nurse"])
    assert texts[1] == C.queries(listed[1]), "seeded by the user's name"
    catalog = load_catalog_text(C.catalog_text(listed[:60]))
    for text in {t for user in texts[:60] for t in user}:  # every text binds
        bound_query(text, catalog)
    assert catalog.users["u00049"].roles == ("Researcher",) and dict(catalog.users["u00003"].profile) == {"ward": "w3"}


def test_the_quick_size_builds_loads_and_compiles(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.network_compile", "measure", str(tmp_path), "200", "20"],
                          cwd=REPO, capture_output=True, text=True, check=True)
    numbers = json.loads(done.stdout.strip().splitlines()[-1])
    assert numbers["registered"] == numbers["queries"] == numbers["changes"] == 200 and numbers["users"] == 20
    assert numbers["pipelines"] + numbers["denials"] == 200 and numbers["hosted"] + numbers["own_pipelines"] == 200
    assert numbers["member_rows"] == numbers["rows_out"] >= numbers["hosted"] > 150
    for prefix in ("", "paused_"):
        assert numbers[f"{prefix}pipelines"] == numbers["pipelines"]
        for phase in C.PHASES:
            assert numbers[f"{prefix}{phase}_wall_s"] >= 0 and numbers[f"{prefix}{phase}_peak_mib"] > 10
        assert numbers[f"{prefix}compile_s"] == round(sum(numbers[f"{prefix}{p}_wall_s"] for p in C.PHASES[1:]), 3)
    assert numbers["process_peak_mib"] >= numbers["tables_peak_mib"] and numbers["build_process_cpu_s"] > 0
    measured = Measured({"compile-200": [numbers]}, {"compile-200": {"queries": 200, "users": 20}},
                        {"distinct texts of 200 queries": 60})
    notes = C.explain(measured, measured.facts)
    assert notes[0].startswith("At N = 200: the compile takes") and "60 texts" in notes[0]


def test_the_modules_examples() -> None:
    """bench/ is not among pytest's doctest paths: the module's examples run here."""
    import doctest

    assert doctest.testmod(C).failed == 0
