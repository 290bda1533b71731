"""Fixtures of the service's tests: a store with a hospital catalog, tokens, and the app.

``service`` is the HTTP contract without Spark (no host): registrations, grants and
catalogs go to the store, rows are read from delivery logs the tests write in the
network's format. ``served`` (tests/service/served.py) is the real thing in a subprocess.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from streamwarden.catalog.identity import create_token
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore
from streamwarden.runtime.deliveries import deliver_once
from streamwarden.service.app import Service, create_app
from streamwarden.service.server import ServeOptions, open_service

CATALOG = """\
streams:
  Vitals:
    schema: {ts: timestamp, patient: int, ward: string, pulse: int}
    key: patient
    punctuated_by: patient
  Readings:
    schema: {ts: timestamp, sensor: int, site: string, value: double}
roles: {Doctor: {}, Nurse: {}, Analyst: {}}
users:
  ann: {roles: [Doctor]}
  bob: {roles: [Nurse]}
  eve: {roles: [Analyst]}
  root: {roles: []}
policies:
  - {id: doctors_read, subject: Doctor, streams: [Readings], privilege: read}
  - {id: nurses_low, subject: Nurse, streams: [Readings], attributes: [ts, sensor, value], privilege: read,
     where: "value < 50"}
"""


class Tokens(dict):
    """Bearer headers by holder."""

    def header(self, holder: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self[holder]}"}


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store holding CATALOG: SQLite, or with ``indirect`` parametrization ``"postgres"`` a
    fresh database of the test PostgreSQL server (tests/postgres.py)."""
    if getattr(request, "param", "sqlite") == "postgres":
        url = request.getfixturevalue("pg_store_url")
    else:
        (tmp_path / "home").mkdir()
        url = f"sqlite:///{tmp_path / 'home' / 'store.db'}"
    CatalogStore(url).save(load_catalog_text(CATALOG, "catalog.yaml"))
    return url


@pytest.fixture
def tokens(store_url: str) -> Tokens:
    found = Tokens()
    for user in ("ann", "bob", "eve"):
        found[user] = create_token(store_url, user, expires=timedelta(hours=1))
    found["root"] = create_token(store_url, "root", admin=True, expires=timedelta(hours=1))
    found["provider7"] = create_token(store_url, provider_stream="Vitals", provider_key="7", expires=timedelta(hours=1))
    found["readings"] = create_token(store_url, provider_stream="Readings", expires=timedelta(hours=1))
    return found


@pytest.fixture
def service(tmp_path: Path, store_url: str, tokens: Tokens) -> Iterator[Service]:
    options = ServeOptions(store_url=store_url, output_dir=str(tmp_path / "out"), sp_folder=str(tmp_path / "sps"),
                           inputs={"Vitals": str(tmp_path / "in" / "Vitals"),
                                   "Readings": str(tmp_path / "in" / "Readings")})
    opened = open_service(options)
    yield opened
    opened.trail.close()


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


def deliver(service: Service, user: str, internal: str, batch: int, rows: list[str]) -> None:
    """Rows delivered to ``user`` as the network's terminal switch delivers them (micro-batch
    ``batch``: delivered once, however often this is called with it)."""
    folder = service.output / user / internal
    folder.mkdir(parents=True, exist_ok=True)

    def place(name: str) -> None:
        (folder / name).mkdir()
        (folder / name / "part-00000-x.txt").write_text("".join(r + "\n" for r in rows), encoding="utf-8")

    deliver_once(folder, f"live-{batch}", len(rows), "batch=abc-", place)
