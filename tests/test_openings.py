"""What a user may query (GET /v1/streams, the console's list): every example it offers runs
for her, and no stream is offered that no policy, provider or clearance opens to her."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from streamwarden.catalog.loader import load_catalog, load_catalog_text
from streamwarden.security.openings import openings
from streamwarden.security.passes import secure

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = [("examples/" + p.name, load_catalog(p)) for p in sorted((ROOT / "examples").glob("*.yaml"))] + [
    (f"demo/{name}", load_catalog_text(resources.files("streamwarden.demo").joinpath(name).read_text(), name))
    for name in ("drill.yaml", "health.yaml", "cloud.yaml", "network.yaml")]


@pytest.mark.parametrize("name, catalog", CATALOGS, ids=[n for n, _ in CATALOGS])
def test_every_example_offered_is_authorized_for_its_user(name, catalog) -> None:
    offered = 0
    for user in catalog.users:
        for opening in openings(catalog, user):
            rewriting = secure(catalog, user, opening.example)
            assert rewriting.deployed, (name, user, opening.example, [g.reason for g in rewriting.graphs])
            offered += 1
    assert offered, f"{name}: no user is offered anything"


def test_a_stream_no_policy_opens_is_not_offered() -> None:
    catalog = load_catalog_text("""
streams: {Open: {schema: {ts: timestamp, a: int}}, Closed: {schema: {ts: timestamp, secret: string}}}
roles: {R: {}, Other: {}}
users: {ann: {roles: [R]}, bob: {roles: [Other]}}
policies:
  - {id: p, subject: R, streams: [Open], privilege: read}
  - {id: q, subject: Other, streams: [Closed], attributes: [secret], privilege: read}
""")
    assert [o.stream for o in openings(catalog, "ann")] == ["Open"]  # not Closed, nor policy q's name
    assert all("q" not in reason.split(":")[0] for o in openings(catalog, "ann") for reason in o.reasons)
    assert [o.stream for o in openings(catalog, "bob")] == ["Closed"]


def test_asking_again_rewrites_nothing_until_the_catalog_changes(monkeypatch) -> None:
    import streamwarden.security.openings as O

    text = ("streams: {A: {schema: {ts: timestamp, a: int}}, B: {schema: {ts: timestamp, b: int}}}\n"
            "roles: {R: {}}\nusers: {ann: {roles: [R]}}\n"
            "policies:\n  - {id: p, subject: R, streams: [A, B], privilege: read}\n")
    calls = []
    real = O.secure
    monkeypatch.setattr(O, "secure", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    first = openings(load_catalog_text(text), "ann")
    assert len(calls) == 2 and openings(load_catalog_text(text), "ann") == first and len(calls) == 2
    changed = text.replace("streams: [A, B]", "streams: [A]")
    assert [o.stream for o in openings(load_catalog_text(changed), "ann")] == ["A"] and len(calls) == 4
