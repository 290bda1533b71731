"""Multi-query optimization from CQL: the shared network, its common prefix and switches."""

from __future__ import annotations

from pathlib import Path

from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.registry import RegisteredQuery, load_queries_text
from streamwarden.cli.main import main
from streamwarden.papers.network.optimizer import shared_network
from streamwarden.papers.network.switches import place_switches

CATALOG = load_catalog_text("""
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
  Stream3: {schema: {ts: timestamp, streamid: int, pressure: int}}
users: {ann: {}, bob: {}}
""")
WINDOWS = "[RANGE 5 min SLIDE 1 min]"
QUERIES = f"""
queries:
  - {{id: CQ1, users: [ann, bob],
     query: "SELECT s1.streamid, s1.heartRate FROM Stream1 AS s1 {WINDOWS}, Stream2 AS s2 {WINDOWS}
             WHERE s1.location = s2.location AND s2.speed < 30"}}
  - {{id: CQ2, users: [ann],
     query: "SELECT a.streamid, c.pressure FROM Stream1 AS a {WINDOWS}, Stream2 AS b {WINDOWS}, Stream3 AS c {WINDOWS}
             WHERE a.location = b.location AND b.speed < 30 AND c.streamid = a.streamid AND c.pressure > 120"}}
"""


def test_the_two_queries_share_the_selection_and_the_join_whatever_their_aliases() -> None:
    shared = shared_network(CATALOG, load_queries_text(QUERIES, CATALOG))
    net = shared.network
    labels = {net.vertex(v).label for v in net.common_prefix}
    assert labels == {"σ Stream2.speed < 30", f"⋈ Stream1.location = Stream2.location {WINDOWS} {WINDOWS}"}
    assert len(net.operators) == 6  # 2 shared + CQ1's projection + CQ2's selection, join and projection
    placed = place_switches(net)
    kinds = sorted(s.id.split(":")[0] for s in placed.switches)
    assert kinds == ["in-network", "in-network", "initial", "terminal", "terminal"]
    assert len(placed.shut_off({"CQ2"})) == 3 and len(placed.shut_off({"CQ1"})) == 1
    # Algorithm 2 guards no common-prefix operator: with every query off, the shared zone still runs.
    assert placed.shut_off({"CQ1", "CQ2"}) == frozenset(v.id for v in net.operators) - net.common_prefix


def test_common_conditions_share_a_prefix_of_the_selection_chain() -> None:
    queries = [RegisteredQuery("a", ("ann",), "SELECT speed FROM Stream2 WHERE speed < 30 AND location = 'x'"),
               RegisteredQuery("b", ("ann",), "SELECT location FROM Stream2 AS s WHERE s.location = 'x'"),
               RegisteredQuery("c", ("ann",), "SELECT location FROM Stream2 WHERE location = 'y'")]
    net = shared_network(CATALOG, queries).network
    assert [net.vertex(v).label for v in sorted(net.common_prefix)] == ["σ Stream2.location = 'x'"]


def test_explain_network_prints_and_draws(tmp_path, capsys) -> None:
    (tmp_path / "catalog.yaml").write_text(CATALOG.text or "")
    catalog_file = tmp_path / "c.yaml"
    catalog_file.write_text("""
streams:
  Stream1: {schema: {ts: timestamp, streamid: int, heartRate: int, location: string}}
  Stream2: {schema: {ts: timestamp, location: string, speed: double}}
  Stream3: {schema: {ts: timestamp, streamid: int, pressure: int}}
users: {ann: {}, bob: {}}
""")
    (tmp_path / "q.yaml").write_text(QUERIES)
    picture = tmp_path / "network.png"
    assert main(["explain", "--catalog", str(catalog_file), "--network", str(tmp_path / "q.yaml"),
                 "--render", str(picture)]) == 0
    out = capsys.readouterr().out
    assert "[common prefix]" in out and "initial:CQ2" in out and "3 of 6 operators stop" in out
    assert picture.stat().st_size > 10_000 and Path(picture).read_bytes()[:4] == b"\x89PNG"
    assert main(["network", "explain", "--catalog", str(catalog_file), "--queries", str(tmp_path / "q.yaml"),
                 "--format", "dot"]) == 0
    assert capsys.readouterr().out.startswith("digraph")


def test_a_pipelines_fingerprint_is_the_same_in_every_process() -> None:
    """It names the pipeline's checkpoint: a restart (a new process, another string hash seed)
    must find the same one, or every restart would reprocess its input and drop the rows tied
    with the handover's event time. Plans hold frozensets, whose repr follows the seed."""
    import os
    import subprocess
    import sys

    program = (
        "from streamwarden.catalog.loader import load_catalog_text\n"
        "from streamwarden.catalog.registry import RegisteredQuery\n"
        "from streamwarden.runtime.plan import plan_network\n"
        "cat = load_catalog_text('streams: {R: {schema: {ts: timestamp, a: int, b: double, c: string}}}\\n"
        "roles: {N: {}}\\nusers: {bob: {roles: [N]}}\\npolicies: [{id: p, subject: N, streams: [R], "
        "attributes: [ts, a, b], privilege: read, where: \"b < 50\"}]')\n"
        "q = RegisteredQuery('q1', ('bob',), 'SELECT a, b FROM R', owner='bob', opens=())\n"
        "print(plan_network(cat, [q]).pipelines[0].fingerprint)\n")
    seen = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(1, 5)}
    assert len(seen) == 1, seen
