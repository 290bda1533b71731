"""``make serve`` (``streamwarden demo --serve``): the service on the smart-healthcare network's data.

A fresh store with the network demo's catalog (plus an administrator, ``it_admin``), its
queries CQ1-CQ3 registered for their users and granted from the data's start, the first
ten minutes of every stream in the input folders, and a token printed for every user, the
administrator and two providers; then ``streamwarden serve`` runs until Ctrl-C. The tokens
are new on every start (the store is made afresh).
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from importlib import resources
from pathlib import Path

from rich.console import Console

from streamwarden.catalog.authorization import AuthorizationServer
from streamwarden.catalog.identity import create_token
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import load_queries_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.demo.network import MINUTES_PER_FILE, START, patients_policies, readings
from streamwarden.service.server import ServeOptions, serve

ADMIN = "it_admin"
LIFETIME = timedelta(days=1)


def serve_demo(workdir: Path, *, host: str = "127.0.0.1", port: int = 8470) -> int:
    console = Console()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    text = resources.files("streamwarden.demo").joinpath("network.yaml").read_text()
    text = text.replace("users:\n", f"users:\n  {ADMIN}: {{roles: []}}\n", 1)
    catalog = load_catalog_text(text, "streamwarden/demo/network.yaml (with an administrator)")
    queries = load_queries_text(resources.files("streamwarden.demo").joinpath("network_queries.yaml").read_text(),
                                catalog, "streamwarden/demo/network_queries.yaml")
    store = sqlite_url(workdir / "store.db")
    server = AuthorizationServer(store)
    server.register(queries, catalog)
    for q in queries:
        for user in q.users:
            server.grant(q.id, user, START)
    data = readings(MINUTES_PER_FILE)
    inputs = {stream: workdir / "in" / stream for stream in data}
    for stream, rows in data.items():
        inputs[stream].mkdir(parents=True)
        first = patients_policies() + rows if stream == "Vitals" else rows
        (inputs[stream] / "part-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    console.rule("[bold]streamwarden serve: the smart-healthcare network behind an authenticated service")
    console.print(f"store {store}; queries {', '.join(q.id for q in queries)} registered and granted to their users")
    console.print("tokens (valid for a day; new ones on every start):")
    tokens = {user: create_token(store, user, admin=user == ADMIN, expires=LIFETIME) for user in sorted(catalog.users)}
    tokens["provider Stream1"] = create_token(store, provider_stream="Stream1", expires=LIFETIME)
    tokens["provider Vitals patient 1"] = create_token(store, provider_stream="Vitals", provider_key="1",
                                                       expires=LIFETIME)
    for holder, token in tokens.items():
        console.print(f"  {holder + (' (admin)' if holder == ADMIN else ''):28} {token}", soft_wrap=True)
    url = f"http://{host}:{port}" if port else "http://HOST:PORT"
    console.print(f"then, for example (the console is at {url}/ once it listens):\n"
                  f"  curl -s {url}/v1/queries -H 'Authorization: Bearer {tokens['dr_lee']}'\n"
                  f"  curl -s '{url}/v1/queries/CQ3/rows?limit=5' -H 'Authorization: Bearer {tokens['dr_lee']}'",
                  soft_wrap=True)
    return serve(ServeOptions(store_url=store, inputs={s: str(p) for s, p in inputs.items()},
                              output_dir=str(workdir / "out"), host=host, port=port,
                              checkpoint=str(workdir / "checkpoint")))


__all__ = ["serve_demo"]
