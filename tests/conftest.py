"""Shared fixtures: one SparkSession for the whole run, the paper's catalog, data writers."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
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


BASE_TIME = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def ts(seconds: float) -> str:
    """``seconds`` after 2026-03-01T10:00:00Z, written as the JSON inputs carry it."""
    value = BASE_TIME + timedelta(seconds=seconds)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{value.microsecond:06d}" if value.microsecond else "") + "Z"


def write_jsonl(path: Path, records: Iterable[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path


def until_idle(stream) -> None:  # type: ignore[no-untyped-def]
    """Let a continuous query process everything its inputs hold, then stop it (no sleeps)."""
    try:
        stream.processAllAvailable()
    finally:
        stream.stop()


@pytest.fixture(scope="session")
def postgres_url():  # type: ignore[no-untyped-def]
    """A throwaway PostgreSQL server for the whole run (started on first use; skips its tests
    when none can be started here): the URL of one database on it. See tests/postgres.py."""
    from postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_store_url(postgres_url: str):  # type: ignore[no-untyped-def]
    """A fresh, empty PostgreSQL database for one test (dropped after): no test sees another's tables."""
    from postgres import fresh_database

    with fresh_database(postgres_url) as url:
        yield url


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A real single-node Kafka broker for the whole run (streamwarden.demo.broker), started on
    first use from the jars `make jars` fetched, stopped by its PID at the end. A broker that
    cannot start fails the tests that need it: no Kafka test is ever skipped."""
    from streamwarden.demo.broker import BrokerError, start_broker

    try:
        broker = start_broker(tmp_path_factory.mktemp("kafka"))
    except BrokerError as exc:
        pytest.fail(f"the test Kafka broker did not start: {exc}", pytrace=False)
    yield broker
    broker.stop()


@pytest.fixture
def kafka_topic(kafka_broker, request):  # type: ignore[no-untyped-def]
    """A new topic of two partitions for one test (its name from the test's), on the session's broker."""
    from kafka_tools import create_topic

    return create_topic(kafka_broker.bootstrap, request.node.name, partitions=2)
