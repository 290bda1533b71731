"""Shared fixtures: one SparkSession for the whole run, the paper's catalog, data writers."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import pytest

ROOT = Path(__file__).resolve().parent.parent
DRILL_CATALOG = ROOT / "examples" / "drill.yaml"


@pytest.fixture(scope="session")
def spark():
    from streamwarden.engine.session import get_spark

    session = get_spark()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def drill_catalog():
    from streamwarden.catalog.loader import load_catalog

    return load_catalog(DRILL_CATALOG)


def ts(minute: int, second: int = 0, hour: int = 10) -> str:
    """A timestamp on the test day, as the JSON inputs carry it."""
    return datetime(2026, 3, 1, hour, minute, second, tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_jsonl(path: Path, records: Iterable[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path
