"""A property of the service: no sequence of requests by a non-admin changes what any other
user receives (issue 24).

What another user receives is decided by the network's plan over the store (her pipelines,
their authorized graphs, her denials), by her access periods for each of her queries, and by
what is already in her output folders. Hypothesis drives a user, eve, through random
requests — registering and deleting her own queries under ids that collide with other
users' and shared ids, internal ids and token-shaped ids, previews, grants, catalogs,
actions, rows and records she may not send — and checks that ann's and bob's share of the
network is exactly what it was.
"""

from __future__ import annotations

import hashlib
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwarden.catalog.identity import authenticate, create_token
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import access_periods, own_id
from streamwarden.catalog.store import CatalogStore
from streamwarden.runtime.plan import plan_network, pipeline_fingerprint
from streamwarden.service.app import create_app
from streamwarden.service.server import ServeOptions, open_service

from .conftest import CATALOG, deliver

ANALYSTS = CATALOG + "  - {id: analysts_sites, subject: Analyst, streams: [Readings], attributes: [ts, site], " \
                     "privilege: read}\n"
OTHERS = ("ann", "bob")
TOKEN_SHAPED = "swt_0123456789abcdef_" + "A" * 43
IDS = st.sampled_from(["q1", "q2", "s1", own_id("ann", "q1"), own_id("eve", "q1"), TOKEN_SHAPED, "a" * 64, "../x"])
TEXTS = st.sampled_from(["SELECT site FROM Readings", "SELECT sensor, value FROM Readings",
                         "SELECT COUNT(*) FROM Readings", "SELECT patient FROM Vitals", "SELECT x FROM", ""])
OWNERS = st.sampled_from([None, "ann", "bob", "eve", "root"])
SIGNS = st.sampled_from(["+", "-"])

requests = st.one_of(
    st.tuples(st.just("register"), IDS, TEXTS, st.booleans()),
    st.tuples(st.just("shared"), IDS, TEXTS),
    st.tuples(st.just("delete"), IDS, OWNERS),
    st.tuples(st.just("show"), IDS, OWNERS),
    st.tuples(st.just("rows"), IDS, OWNERS),
    st.tuples(st.just("grant"), IDS, st.sampled_from(list(OTHERS) + ["eve"]), SIGNS),
    st.tuples(st.just("catalog"), st.sampled_from([CATALOG, "users: {}"])),
    st.tuples(st.just("action"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("records"), st.sampled_from(["Readings", "Vitals"])),
)


def _send(client: TestClient, header: dict[str, str], request: tuple[Any, ...]) -> int:
    kind = request[0]
    if kind == "register":
        _, qid, text, dry = request
        path = "/v1/queries?dry_run=true" if dry else "/v1/queries"
        return client.post(path, json={"id": qid, "query": text}, headers=header).status_code
    if kind == "shared":
        _, qid, text = request
        return client.post("/v1/queries", json={"id": qid, "query": text, "users": list(OTHERS)},
                           headers=header).status_code
    if kind in ("delete", "show", "rows"):
        _, qid, owner = request
        params = {"owner": owner} if owner else {}
        path = f"/v1/queries/{qid}" + ("/rows" if kind == "rows" else "")
        method = client.delete if kind == "delete" else client.get
        return method(path, params=params, headers=header).status_code
    if kind == "grant":
        _, qid, user, sign = request
        return client.post("/v1/grants", json={"query": qid, "user": user, "sign": sign}, headers=header).status_code
    if kind == "catalog":
        return client.put("/v1/catalog", content=request[1].encode(), headers=header).status_code
    if kind == "action":
        return client.put(f"/v1/actions/{request[1]}", json={"target": 1.0}, headers=header).status_code
    return client.post(f"/v1/streams/{request[1]}/records", content=b'{"ts": "2026-03-01T10:00:00Z"}\n',
                       headers=header).status_code


def _others_share(service: Any, folder: Path, tokens: dict[str, str]) -> dict[str, Any]:
    """Everything that decides what ann and bob receive, and what they have received."""
    catalog = service.store.load()
    queries = service.server.registrations()
    plan = plan_network(catalog, queries)
    changes = service.server.changes()
    share: dict[str, Any] = {"catalog": catalog.text, "actions": sorted(map(repr, service.store.actions().values()))}
    for user in OTHERS:
        mine = [q for q in queries if user in q.users]
        share[user] = {
            "pipelines": sorted((p.query.id, pipeline_fingerprint(p.query, p.rewriting, "0 seconds"))
                                for p in plan.pipelines if user in p.users),
            "denials": sorted((d.query, d.reason) for d in plan.denials if d.user == user),
            "periods": sorted((q.id, repr(access_periods(changes, q, user))) for q in mine),
            "files": sorted((str(p.relative_to(folder)), hashlib.sha256(p.read_bytes()).hexdigest())
                            for p in (folder / user).rglob("*") if p.is_file()),
            "token": authenticate(service.store, tokens[user]) is not None,
        }
    return share


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests, min_size=1, max_size=12))
def test_no_sequence_of_a_users_requests_changes_what_another_user_receives(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = f"sqlite:///{root / 'store.db'}"
        CatalogStore(url).save(load_catalog_text(ANALYSTS, "catalog.yaml"))
        tokens = {u: create_token(url, u, admin=u == "root", expires=timedelta(hours=1))
                  for u in ("ann", "bob", "eve", "root")}
        service = open_service(ServeOptions(store_url=url, output_dir=str(root / "out"), sp_folder=str(root / "sps"),
                                            inputs={"Readings": str(root / "in" / "Readings")}))
        try:
            with TestClient(create_app(service), raise_server_exceptions=False) as client:
                admin = {"Authorization": f"Bearer {tokens['root']}"}
                for user in OTHERS:  # each has an own q1, with rows, and both share s1 with grants
                    mine = {"Authorization": f"Bearer {tokens[user]}"}
                    assert client.post("/v1/queries", json={"id": "q1", "query": "SELECT sensor, value FROM Readings"},
                                       headers=mine).status_code == 201
                    deliver(service, user, own_id(user, "q1"), 1, ['{"sensor":1,"value":2.5}'])
                assert client.post("/v1/queries", json={"id": "s1", "query": "SELECT sensor FROM Readings",
                                                        "users": list(OTHERS)}, headers=admin).status_code == 201
                for user in OTHERS:
                    assert client.post("/v1/grants", json={"query": "s1", "user": user, "sign": "+",
                                                           "ts": "2026-03-01T10:00:00Z"},
                                       headers=admin).status_code == 201
                    deliver(service, user, "s1", 1, ['{"sensor":1}'])
                before = _others_share(service, root / "out", tokens)
                eve = {"Authorization": f"Bearer {tokens['eve']}"}
                for step in steps:
                    assert _send(client, eve, step) < 500, step
                assert _others_share(service, root / "out", tokens) == before
        finally:
            service.trail.close()
