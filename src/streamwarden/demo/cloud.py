"""The cloud-auditing scenario of information flow: three tiers, one processor per level.

Ray et al.'s MessageLog (every tuple at the level of the company that sent it) arrives
file by file; the company, service and cloud auditing tiers register Q1-Q7 at their
levels. ``run_levels`` starts one Spark streaming query per level (its own checkpoint,
state and watermark); the demo prints, per processor, the tuples it could see and those
it could not, the rows each query delivered, and the paper's Qi/Qj pair.
"""

from __future__ import annotations

import json
import shutil
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamwarden.api import run_levels
from streamwarden.catalog.lattice import Lattice
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import sqlite_url
from streamwarden.datagen.cloud import CloudAudit, message_log
from streamwarden.demo.quiet import step
from streamwarden.engine.levels.processors import LevelQuery, read_query_output
from streamwarden.engine.session import get_spark

SEND_B = 'msgType = "send" AND receiver = "CompanyB"'
QUERIES = [
    ("company", LevelQuery("Q1", "c1", f'SELECT ts FROM MessageLog WHERE {SEND_B} AND outcome = "success"')),
    ("company", LevelQuery("Q2", "c1", f'SELECT ts FROM MessageLog WHERE {SEND_B} AND outcome = "failure"')),
    ("service", LevelQuery("Q3", "sm", 'SELECT ts FROM MessageLog WHERE msgType = "receive" AND sender = "CompanyB" '
                                       'AND outcome = "failure"', level="[⊥, B]")),
    # The service tier sees COI2's own records: the sends to COI2 come from COI1 companies,
    # so (unlike the paper's Q3/Q4, which read sends) it audits the failed replies.
    ("service", LevelQuery("Q4", "sm", 'SELECT ts, sender FROM MessageLog WHERE msgType = "receive" AND '
                                       'outcome = "failure" AND (sender = "CompanyA" OR sender = "CompanyB" OR '
                                       'sender = "CompanyC")')),
    ("cloud", LevelQuery("Q5", "cm", 'SELECT MIN(ts), MAX(ts) FROM MessageLog [ROWS 100] WHERE outcome = "success" '
                                     'AND serviceId = "5"', level="[1, B]")),
    ("cloud", LevelQuery("Q6", "cm", "SELECT R.ts - S.ts AS delay FROM MessageLog AS R [RANGE 10 seconds], "
                                     "MessageLog AS S [RANGE 10 seconds] WHERE S.msgType = \"send\" AND "
                                     "R.msgType = \"receive\" AND R.receiver = \"Company1\" "
                                     "AND R.sender = \"CompanyB\" AND S.receiver = \"CompanyB\" "
                                     "AND S.sender = \"Company1\" AND "
                                     "S.serviceId = R.serviceId AND R.ts >= S.ts", level="[1, B]")),
    ("cloud", LevelQuery("Q7", "cm", 'SELECT serviceId, MIN(ts), MAX(ts) FROM MessageLog [ROWS 100] '
                                     'WHERE outcome = "success" GROUP BY serviceId')),
    ("company", LevelQuery("Qi", "c1", f'SELECT COUNT(*) FROM MessageLog [ROWS 100] WHERE {SEND_B} AND '
                                       'outcome = "success"')),
    ("cloud", LevelQuery("Qj", "cm", f'SELECT COUNT(*) FROM MessageLog [ROWS 100] WHERE {SEND_B} AND '
                                     'outcome = "success"', level="[T, ⊥]")),
]
FILES = 3


def audit_log(minutes: float = 6.0) -> CloudAudit:
    """The demo's MessageLog (README's ``data/MessageLog.jsonl`` too)."""
    return message_log(minutes=minutes, services=6, rate_per_s=2.0, unknown_fraction=0.01, seed=7)


def run_cloud_demo(workdir: Path, console: Console, *, minutes: float = 6.0) -> None:
    audit = audit_log(minutes)
    data, staging = workdir / "cloud" / "MessageLog", workdir / "cloud-staging"
    data.mkdir(parents=True, exist_ok=True)
    staging.mkdir(parents=True, exist_ok=True)
    size = -(-len(audit.records) // FILES)
    for part in range(FILES):
        chunk = audit.records[part * size:(part + 1) * size]
        (staging / f"part-{part:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chunk))
    episodes = "; ".join(f"{e.kind} on {e.target} (service {e.service_id})" for e in audit.episodes)
    console.print(f"generated {len(audit.records)} MessageLog records of {len(audit.services)} services; "
                  f"injected: {episodes}")
    catalog = load_catalog_text(resources.files("streamwarden.demo").joinpath("cloud.yaml").read_text(),
                                "streamwarden/demo/cloud.yaml")
    spark = get_spark()
    queries = [q for _, q in QUERIES]
    out = workdir / "cloud-out"
    for part in range(FILES):  # each file: the processors pick it up and stop (checkpoints carry on)
        shutil.copy(staging / f"part-{part:05d}.jsonl", data)
        step(console, f"  file {part + 1}/{FILES}: one processor per level reads it, then stops")
        started = time.monotonic()
        processors = run_levels(catalog, queries, {"MessageLog": data}, out,
                                store_url=sqlite_url(workdir / "cloud-catalog.db"), spark=spark, available_now=True)
        for p in processors:
            p.stream.awaitTermination()
            if p.stream.exception():
                raise RuntimeError(str(p.stream.exception()))
        shepherds = sum(1 for p in processors if not p.queries)
        console.print(f"  file {part + 1}/{FILES}: {len(processors) - shepherds} processors (one per level)"
                      + (f", fed by {shepherds} shepherd(s) reading the input once" if shepherds else "")
                      + f", in {time.monotonic() - started:.1f} s")
    lattice = catalog.lattice
    assert isinstance(lattice, Lattice)
    levels = [lattice.company(r["sender"]) or lattice.top for r in audit.records]
    table = Table(title="Each tier's processors: what they saw and what they could not")
    for column in ("tier", "processor level", "queries", "tuples seen", "tuples not visible", "rows delivered"):
        table.add_column(column, justify="left" if column in ("tier", "processor level", "queries") else "right")
    by_level: dict[str, list[tuple[str, LevelQuery]]] = {}
    for tier, q in QUERIES:
        level = str(lattice.parse(q.level) if q.level else catalog.clearance(q.user))
        by_level.setdefault(level, []).append((tier, q))
    step(console, "reading what each query delivered")
    delivered = {q.id: read_query_output(spark, out, q.id) for q in queries}
    for level, members in by_level.items():
        at = lattice.parse(level)
        seen = sum(1 for lv in levels if lv <= at)
        tiers = ", ".join(dict.fromkeys(t for t, _ in members))
        table.add_row(tiers, escape(level), " ".join(q.id for _, q in members), str(seen), str(len(levels) - seen),
                      " ".join(str(len(delivered[q.id])) for _, q in members))
    console.print(table)
    qi, qj = (sorted(delivered[name], key=lambda r: r["ts"]) for name in ("Qi", "Qj"))
    if qi and qj:
        console.print(f"Qi at [1, ⊥] and Qj at [T, ⊥] are the same COUNT over [ROWS 100]: Qi's last count is "
                      f"{qi[-1]['COUNT(*)']} (Company1's sends only), Qj's {qj[-1]['COUNT(*)']} — the window of "
                      "each holds only the tuples its level may see.", markup=False)
    unknown = sum(1 for lv in levels if lv == lattice.top)
    console.print(f"{unknown} records came from unregistered senders: they are at [T, T], visible to the trusted "
                  f"cloud processor only. Rows are under {out}/<query>/.", markup=False)
