"""``streamwarden`` command line: a thin layer over :mod:`streamwarden.api`.

Commands: ``check`` (validate a catalog and load it into the store), ``explain``
(authorized graphs, policies, Spark SQL, refusals), ``replay`` (run over recorded
files), ``run`` (continuous, checkpointed), ``action`` (start/stop/retarget an action
in the live store), ``demo`` and ``bench``. Errors print one line on stderr naming what
is wrong and where, and exit with status 2 (bad input) or 1 (failure while running).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from streamwarden.catalog.store import DEFAULT_STORE
from streamwarden.errors import SourceError, StreamwardenError

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


def _inputs(pairs: Sequence[str]) -> dict[str, str]:
    inputs: dict[str, str] = {}
    for pair in pairs or ():
        stream, sep, path = pair.partition("=")
        if not sep or not stream or not path:
            raise StreamwardenError(f"--input expects STREAM=PATH, got {pair!r}")
        inputs[stream] = path
    return inputs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamwarden", description="Access control for continuous queries on Spark.")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="validate a catalog file and load it into the store")
    check.add_argument("catalog")
    check.add_argument("--store", default=DEFAULT_STORE, help=f"SQLAlchemy URL of the catalog store (default {DEFAULT_STORE})")
    check.add_argument("--no-store", action="store_true", help="only validate; write nothing")

    def query_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--catalog", required=True)
        p.add_argument("--user", required=p.prog.split()[-1] != "explain")
        p.add_argument("--query", required=p.prog.split()[-1] != "explain", help="the CQL query")
        p.add_argument("--join-strategy", choices=("adaptive", "probe-and-filter", "filter-and-probe"),
                       default="adaptive", help="SCJoin strategy for joins of punctuated streams (same rows)")
        p.add_argument("--level", default=None, metavar='"[1, ⊥]"',
                       help="security level to run at (default: the user's clearance; never above it)")

    explain = sub.add_parser("explain", help="show the authorized graphs of a query (or, with --network, the "
                                             "shared network of registered queries)")
    query_args(explain)
    explain.add_argument("--network", default=None, metavar="QUERIES.yaml",
                         help="explain the shared-operator network of these queries instead (--user/--query unused)")
    explain.add_argument("--render", default=None, metavar="FILE.png|FILE.svg", help="with --network: draw it")
    explain.add_argument("--format", choices=("text", "json"), default="text")
    explain.add_argument("--input", action="append", default=[], metavar="STREAM=PATH",
                         help="inputs whose policy statistics the adaptive SCJoin decides by")

    replay = sub.add_parser("replay", help="run the authorized query over recorded files")
    query_args(replay)
    replay.add_argument("--input", action="append", default=[], metavar="STREAM=PATH")
    replay.add_argument("--output", required=True)
    replay.add_argument("--store", default=None, help="read action values from this store")
    replay.add_argument("--into", default=None, metavar="STREAM",
                        help="the stream the results are written into (must be at the query's level)")

    run = sub.add_parser("run", help="run the authorized query continuously over file streams")
    query_args(run)
    run.add_argument("--input", action="append", default=[], metavar="STREAM=DIR")
    run.add_argument("--sink", required=True, help="output directory, or 'console'")
    run.add_argument("--checkpoint", default=None)
    run.add_argument("--store", default=DEFAULT_STORE)
    run.add_argument("--lateness", default="0 seconds", help="watermark delay for out-of-order input")
    run.add_argument("--trigger", default="2 seconds")
    run.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    run.add_argument("--into", default=None, metavar="STREAM",
                     help="the stream the results are written into (must be at the query's level)")

    for verb in ("grant", "revoke"):
        change = sub.add_parser(verb, help=f"{verb} a user's access to a registered query of a running network")
        change.add_argument("--query", required=True)
        change.add_argument("--user", required=True)
        change.add_argument("--ts", default=None, help="from when (ISO-8601; default: now)")
        if verb == "grant":
            change.add_argument("--until", default=None, help="when the grant expires (ISO-8601; default: never)")
        change.add_argument("--store", default=DEFAULT_STORE)

    action = sub.add_parser("action", help="update an action in the live store (start, end, target)")
    action.add_argument("name")
    action.add_argument("--store", default=DEFAULT_STORE)
    action.add_argument("--start", default=None)
    action.add_argument("--end", default=None)
    action.add_argument("--target", type=float, default=None)
    action.add_argument("--clear", action="store_true", help="mark the action as not taking place")

    demo = sub.add_parser("demo", help="the drill scenario: three users, one shared stream engine")
    demo.add_argument("--workdir", default=".streamwarden/demo")
    demo.add_argument("--soldiers", type=int, default=40)
    demo.add_argument("--minutes", type=float, default=20.0)

    sp = sub.add_parser("sp", help="print the SP records a data provider sends for INSERT SP statements")
    sp.add_argument("statements", nargs="+", help="INSERT SP ... (several form one policy: same ts, sn 1..k)")
    sp.add_argument("--ts", default=None, help="the policy's timestamp (default: now)")
    sp.add_argument("--provider", default=None, metavar="ATTR=VALUE",
                    help="for a stream punctuated_by ATTR: the provider these SPs belong to")

    network = sub.add_parser("network", help="many users' queries on one shared network with privacy switches")
    network_sub = network.add_subparsers(dest="network_command", required=True)
    net_replay = network_sub.add_parser("replay", help="each user's rows of each query, by their access changes")
    net_replay.add_argument("--catalog", required=True)
    net_replay.add_argument("--queries", required=True, help="QUERIES.yaml: queries: [{id, users, query}]")
    net_replay.add_argument("--access", required=True, help="access changes, JSON lines {ts, query, user, sign}")
    net_replay.add_argument("--input", action="append", default=[], metavar="STREAM=PATH")
    net_replay.add_argument("--output-dir", required=True, help="rows go to DIR/<user>/<query id>.jsonl")
    net_run = network_sub.add_parser("run", help="run the whole network continuously as one Spark streaming query")
    net_run.add_argument("--catalog", required=True)
    net_run.add_argument("--queries", required=True)
    net_run.add_argument("--input", action="append", default=[], metavar="STREAM=DIR")
    net_run.add_argument("--output-dir", required=True, help="rows go to DIR/<user>/<query id>/")
    net_run.add_argument("--store", default=DEFAULT_STORE, help="where grants and revocations are kept")
    net_run.add_argument("--checkpoint", default=None, help="default: DIR/_checkpoint")
    net_run.add_argument("--trigger", default="2 seconds")
    net_run.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    net_run.add_argument("--lateness", default="0 seconds",
                         help="how late a tuple may arrive and still count in an aggregate's windows")
    net_run.add_argument("--guard-prefix", action="store_true",
                         help="beyond Algorithm 2: also stop the shared operators when every query they serve is off")
    net_explain = network_sub.add_parser("explain", help="the shared-operator network, its common prefix and switches")
    net_explain.add_argument("--catalog", required=True)
    net_explain.add_argument("--queries", required=True)
    net_explain.add_argument("--format", choices=("text", "dot"), default="text")
    net_explain.add_argument("--render", default=None, metavar="FILE.png|FILE.svg", help="also draw the network")

    sub.add_parser("bench", help="run the benchmarks (same as make bench)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except SourceError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StreamwardenError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from streamwarden import api

    if args.command == "check":
        catalog = api.load_catalog(args.catalog)
        stored = ""
        if not args.no_store:
            store = api.CatalogStore(args.store)
            store.save(catalog)
            stored = f"; loaded into {store.url}"
        print(f"{args.catalog}: ok — {len(catalog.streams)} streams, {len(catalog.roles)} roles, "
              f"{len(catalog.users)} users, {len(catalog.actions)} actions, {len(catalog.policies)} policies{stored}")
        return 0
    if args.command == "explain":
        from streamwarden.explain import explain_json, explain_text

        if args.network:
            args.queries, args.format = args.network, ("dot" if args.format == "json" else "text")
            return _network_explain(args)
        if not args.user or not args.query:
            raise StreamwardenError("explain needs --user and --query (or --network QUERIES.yaml)")
        catalog = api.load_catalog(args.catalog)
        rewriting = api.authorize(catalog, args.user, args.query, join_strategy=args.join_strategy,
                                  inputs=_inputs(args.input), level=args.level)
        if args.format == "json":
            print(json.dumps(explain_json(rewriting), indent=2))
        else:
            print(explain_text(rewriting, catalog), end="")
        return 0
    if args.command == "replay":
        catalog = api.load_catalog(args.catalog)
        report = api.replay_to_file(catalog, args.user, args.query, _inputs(args.input), args.output,
                                    store_url=args.store, join_strategy=args.join_strategy, level=args.level,
                                    into=args.into)
        print(f"{report.rows} rows written to {args.output}", file=sys.stderr)
        for stream, count in sorted(report.unknown_sources.items()):
            if count:
                print(f"{stream}: {count} tuples from an unknown source were put at the top level "
                      "(only trusted queries see them)", file=sys.stderr)
        return 0
    if args.command == "run":
        catalog = api.load_catalog(args.catalog)
        query = api.run(catalog, args.user, args.query, _inputs(args.input), args.sink,
                        checkpoint=args.checkpoint, store_url=args.store, lateness=args.lateness,
                        trigger=args.trigger, available_now=args.available_now, join_strategy=args.join_strategy,
                        level=args.level, into=args.into)
        print(f"running {query.id} -> {args.sink} (Ctrl-C to stop)", file=sys.stderr)
        from streamwarden.engine.execute import input_errors

        try:
            with input_errors():  # a broken record stops the run; committed output stays
                query.awaitTermination()
        finally:
            if query.isActive:
                query.stop()
        return 0
    if args.command == "action":
        return _action(args)
    if args.command == "network":
        return _network(args)
    if args.command in ("grant", "revoke"):
        from streamwarden.network.authorization import AuthorizationServer

        server = AuthorizationServer(args.store)
        if args.command == "grant":
            server.grant(args.query, args.user, args.ts, until=args.until)
        else:
            server.revoke(args.query, args.user, args.ts)
        print(f"{args.command}: {args.user} on {args.query} recorded in {server.store.url} (a running network "
              "reads it as an access SP at its next micro-batch)", file=sys.stderr)
        return 0
    if args.command == "sp":
        return _sp(args)
    if args.command == "demo":
        from streamwarden.demo import run_demo

        return run_demo(Path(args.workdir), soldiers=args.soldiers, minutes=args.minutes)
    if args.command == "bench":
        import runpy

        runpy.run_module("bench.run", run_name="__main__")
        return 0
    raise AssertionError(args.command)


def _network_run(args: argparse.Namespace) -> int:
    from streamwarden import api
    from streamwarden.engine.execute import input_errors
    from streamwarden.engine.session import get_spark
    from streamwarden.language.parser import parse_duration
    from streamwarden.network.registry import load_queries
    from streamwarden.network.spark_runner import SharedNetworkRun

    catalog = api.load_catalog(args.catalog)
    queries = load_queries(args.queries, catalog)
    checkpoint = args.checkpoint or str(Path(args.output_dir) / "_checkpoint")
    run = SharedNetworkRun(get_spark(), catalog, queries, _inputs(args.input), args.output_dir, args.store,
                           checkpoint, guard_prefix=args.guard_prefix,
                           lateness_seconds=parse_duration(args.lateness, "--lateness", zero=True))
    stream = run.start(trigger=args.trigger, available_now=args.available_now)
    print(f"network of {len(queries)} queries running as {stream.id}; grant/revoke with --store {args.store} "
          "(Ctrl-C to stop)", file=sys.stderr)
    try:
        with input_errors():
            stream.awaitTermination()
    finally:
        if stream.isActive:
            stream.stop()
    return 0


def _network_explain(args: argparse.Namespace) -> int:
    from streamwarden import api
    from streamwarden.network.draw import draw
    from streamwarden.network.optimizer import network_text, shared_network
    from streamwarden.network.registry import load_queries
    from streamwarden.network.switches import place_switches

    catalog = api.load_catalog(args.catalog)
    shared = shared_network(catalog, load_queries(args.queries, catalog))
    placed = place_switches(shared.network)
    print(placed.to_dot() if args.format == "dot" else network_text(placed, shared), end="")
    if args.render:
        print(f"drawn to {draw(placed, args.render, title=Path(args.queries).name)}", file=sys.stderr)
    return 0


def _network(args: argparse.Namespace) -> int:
    if args.network_command == "explain":
        return _network_explain(args)
    if args.network_command == "run":
        return _network_run(args)
    from streamwarden import api
    from streamwarden.engine.session import get_spark
    from streamwarden.network.registry import load_access, load_queries
    from streamwarden.network.replay import replay_network

    catalog = api.load_catalog(args.catalog)
    queries = load_queries(args.queries, catalog)
    changes = load_access(args.access, queries)
    written = replay_network(get_spark(), catalog, queries, changes, _inputs(args.input), args.output_dir)
    for (user, query), count in sorted(written.items()):
        print(f"{user}/{query}.jsonl: {count} rows", file=sys.stderr)
    return 0


def _sp(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from streamwarden.language.expressions import parse_timestamp
    from streamwarden.language.insert_sp import parse_insert_sp
    from streamwarden.punctuation.generate import policy_from_statements
    from streamwarden.punctuation.model import sp_records_text

    statements = [parse_insert_sp(text, f"<statement {i}>") for i, text in enumerate(args.statements, start=1)]
    try:
        ts = parse_timestamp(args.ts) if args.ts else datetime.now(timezone.utc).replace(microsecond=0)
    except ValueError:
        raise StreamwardenError(f"--ts {args.ts!r} is not an ISO-8601 timestamp") from None
    attribute, value = None, None
    if args.provider:
        attribute, sep, raw = args.provider.partition("=")
        if not sep or not attribute:
            raise StreamwardenError(f"--provider expects ATTR=VALUE, got {args.provider!r}")
        value = json.loads(raw) if raw.lstrip("-").replace(".", "", 1).isdigit() else raw
    print(sp_records_text(policy_from_statements(statements, ts, value), attribute), end="")
    return 0


def _action(args: argparse.Namespace) -> int:
    from streamwarden.catalog.store import CatalogStore
    from streamwarden.language.expressions import parse_timestamp

    values: dict[str, object] = {}
    try:
        if args.clear:
            values.update(start=None, end=None)
        if args.start:
            values["start"] = parse_timestamp(args.start)
        if args.end:
            values["end"] = parse_timestamp(args.end)
    except ValueError as exc:
        raise StreamwardenError(f"not an ISO-8601 timestamp: {exc}") from None
    if args.target is not None:
        values["target"] = args.target
    if not values:
        raise StreamwardenError("say what to change: --start, --end, --target or --clear")
    CatalogStore(args.store).set_action(args.name, **values)
    print(f"action {args.name} updated in {args.store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
