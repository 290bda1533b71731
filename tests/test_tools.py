"""The linter and the type checker run clean, so the code stays the way the tools keep it.

``ruff check`` reads src/, tests/ and bench/, ``mypy`` reads src/streamwarden (and the reference
models in tests/oracles and bench/network_simulator.py), both with
pyproject.toml's settings (rules, strictness, the modules without annotations), run from
this interpreter as ``make test`` installs them (the ``test`` extra). Their caches
(``.ruff_cache``, ``.mypy_cache``) keep a run without changes at a few seconds.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_tool(module: str, *args: str) -> None:
    """Run ``python -m module args`` from the repository's root; fail with its output unless it exits 0."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here (pip install -e '.[test]' installs it)")
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        pytest.fail(f"{' '.join([module, *args])} exited {done.returncode}:\n{done.stdout}{done.stderr}", pytrace=False)


def test_ruff_finds_nothing() -> None:
    run_tool("ruff", "check", "--no-fix")


def test_mypy_finds_nothing() -> None:
    run_tool("mypy")
