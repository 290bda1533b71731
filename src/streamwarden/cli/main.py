"""``streamwarden`` command line: a thin layer over :mod:`streamwarden.api`.

Commands: ``check`` (validate a catalog and load it into the store), ``explain``
(authorized graphs, policies, Spark SQL, refusals), ``replay`` (run over recorded
files), ``run`` (continuous, checkpointed), ``action`` (start/stop/retarget an action
in the live store), ``grant``/``revoke`` and ``network`` (shared networks), ``sp``,
``token`` (the service's bearer tokens), ``audit`` (verify or print the audit trail),
``serve`` (the service), ``demo`` and ``bench``. Every command that starts Spark
(``explain``, ``replay``, ``run``, ``network replay``, ``network run``, ``demo``) takes
``--master URL`` and ``--conf KEY=VALUE`` (:func:`streamwarden.api.using_spark`).

The commands call :mod:`streamwarden.api` only (and the public leaf modules ``errors`` and
``names``); ``serve`` and ``demo`` hand over to the service and the demo, front ends of
their own (``tests/test_layers.py`` checks it). What stays here is presentation: the
arguments, the messages, the exit statuses and the signals.

Errors print one line on stderr naming what is wrong and where: exit status 2 for bad
input (a file, a record, an argument, a name that exists nowhere); 3 for anything
unexpected (one line, ``--debug`` prints the trace); 130 when interrupted (Ctrl-C stops
a running query cleanly, keeping what it committed); SIGTERM stops ``run``, ``network
run`` and ``serve`` the same way with exit 0 (a supervisor's ordinary stop). ``audit
verify`` exits 1 when it finds the trail tampered with: a finding, not a usage error.
Every file the CLI creates is private to its owner: the process umask is 077 (Spark
starts with it, see :mod:`streamwarden.engine.session`). Every change a command makes (a
catalog loaded, a grant, an action, a token, a registration) is an audit record under the
operator, ``cli:$STREAMWARDEN_OPERATOR`` or ``cli:<OS user>`` (:mod:`streamwarden.api.identity`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
import warnings
from pathlib import Path
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from typing import Any, ContextManager, Iterator, Sequence

from streamwarden import api
from streamwarden.errors import SourceError, StreamwardenError
from streamwarden.names import check_name

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130


def _inputs(pairs: Sequence[str]) -> dict[str, str]:
    inputs: dict[str, str] = {}
    for pair in pairs or ():
        stream, sep, path = pair.partition("=")
        if not sep or not stream or not path:
            raise StreamwardenError(f"--input expects STREAM=PATH, got {pair!r}")
        inputs[stream] = os.path.abspath(path)  # Spark's JVM resolves a relative path against its own folder
    return inputs


#: Options naming a file or folder Spark reads or writes: made absolute where the command was
#: typed, since the JVM resolves a relative path against the folder it started in (the same for
#: a command line; not for a caller that changed folder after Spark started).
_PATH_OPTIONS = ("sink", "output", "output_dir", "checkpoint", "sp_folder", "log_dir")


def _absolute_paths(args: argparse.Namespace) -> None:
    for name in _PATH_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value and not (name == "sink" and value == "console"):
            setattr(args, name, os.path.abspath(value))


DURATION = "a duration like '2 seconds' or '1 minute'"
TIMESTAMP = "ISO-8601, e.g. 2026-03-01T10:00:00Z (without a zone: UTC)"


def _parser() -> argparse.ArgumentParser:
    from streamwarden import __version__

    parser = argparse.ArgumentParser(prog="streamwarden", description="Access control for continuous queries on Spark.")
    parser.add_argument("--version", action="version", version=f"streamwarden {__version__}")
    parser.add_argument("--debug", action="store_true", help="on an unexpected failure, print the Python trace")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(where: "argparse._SubParsersAction[argparse.ArgumentParser]", name: str, text: str
                ) -> argparse.ArgumentParser:
        p = where.add_parser(name, help=text, description=text)
        # --debug also after the command (SUPPRESS: not given here leaves the global value)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        return p

    def store_arg(p: argparse.ArgumentParser, text: str = "") -> None:
        p.add_argument("--store", default=None, metavar="URL", help=(text + "; " if text else "") + api.STORE_HELP)

    def catalog_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--catalog", required=True, metavar="FILE.yaml", help="the catalog: streams, roles, users, "
                                                                             "actions, policies (YAML)")

    def input_arg(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--input", action="append", default=[], metavar="STREAM=PATH",
                       help=f"{what} (repeat per stream): a .jsonl or .parquet file, or a folder whose *.jsonl and "
                            "*.parquet files are read (punctuated and [ROWS n] streams: *.jsonl and *.json)")

    def continuous_args(p: argparse.ArgumentParser, lateness: str) -> None:
        p.add_argument("--lateness", default="0 seconds", metavar="DURATION",
                       help=f"{lateness}: {DURATION} (default 0 seconds)")
        p.add_argument("--trigger", default="2 seconds", metavar="DURATION",
                       help=f"micro-batch interval: {DURATION} (default 2 seconds; 0 seconds: each as soon as "
                            "the last ends)")
        p.add_argument("--available-now", action="store_true", help="process what is there, then stop")

    def spark_args(p: argparse.ArgumentParser, log_dir: str | None = "") -> None:
        """Where Spark runs, its settings and its log, on every command that starts Spark
        (:func:`streamwarden.engine.session.spark_settings` merges and checks them).
        ``log_dir``: more help for ``--log-dir`` (None: the command has no such option)."""
        if log_dir is not None:
            p.add_argument("--log-dir", default=None, metavar="DIR",
                           help="Spark's own log (its warnings, errors and Java traces) goes to DIR/spark.log, not "
                                "to the terminal (default: logs/ next to the store)" + log_dir)
        p.add_argument("--master", default=None, metavar="URL",
                       help="Spark master: local[N], local[*], local-cluster[n,c,m], spark://HOST:PORT, yarn or "
                            "k8s://https://HOST:PORT (default: $STREAMWARDEN_MASTER, else local[2])")
        p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting, repeatable, e.g. spark.executor.memory=2g or spark.ui.enabled=true "
                            "(over $STREAMWARDEN_SPARK_CONF, one KEY=VALUE a line; the time zone and umask "
                            "settings cannot be changed)")

    check = command(sub, "check", "validate a catalog file and load it into the store (live action values are kept)")
    check.add_argument("catalog", metavar="CATALOG.yaml", help="the catalog file to validate")
    store_arg(check, "where to load it")
    check.add_argument("--no-store", action="store_true", help="only validate; write nothing")
    check.add_argument("--reset-actions", action="store_true",
                       help="replace the live values of actions (start, end, target) by the file's")

    def query_args(p: argparse.ArgumentParser, required: bool = True) -> None:
        catalog_arg(p)
        p.add_argument("--user", required=required, metavar="NAME", help="the user the query runs for")
        p.add_argument("--query", required=required, metavar="CQL", help="the CQL query, e.g. \"SELECT SID, Pos FROM "
                                                                          "Position\"")
        p.add_argument("--join-strategy", choices=("adaptive", "probe-and-filter", "filter-and-probe"),
                       default="adaptive", help="SCJoin strategy for joins of punctuated streams (same rows; "
                                                "default: adaptive)")
        p.add_argument("--level", default=None, metavar='"[1, ⊥]"',
                       help="security level to run at (default: the user's clearance; never above it)")

    explain = command(sub, "explain", "show the authorized graphs of a query (or, with --network, the shared "
                                      "network of registered queries)")
    query_args(explain, required=False)
    explain.add_argument("--network", default=None, metavar="QUERIES.yaml",
                         help="explain the shared-operator network of these queries instead (--user/--query unused)")
    explain.add_argument("--render", default=None, metavar="FILE.png|FILE.svg", help="with --network: draw it")
    explain.add_argument("--format", choices=("text", "json", "dot"), default="text",
                         help="text (default), json, or with --network also dot (Graphviz)")
    spark_args(explain)  # its Spark SQL is compiled by a Spark session (no job runs)

    replay = command(sub, "replay", "run the authorized query over recorded files")
    query_args(replay)
    input_arg(replay, "recorded input of a stream")
    replay.add_argument("--output", required=True, metavar="FILE.jsonl|DIR",
                        help="where the rows go, private to their owner: NAME.jsonl (or .json) is one JSON-lines "
                             "file, rows in a stable order; any other name is a folder of part-*.json files that "
                             "Spark writes in parallel, rows in no order (spark.read.json(DIR) or cat DIR/part-* "
                             "reads them): complete or absent, it replaces only an earlier replay's folder")
    replay.add_argument("--store", default=None, metavar="URL",
                        help="read action values from this store (SQLAlchemy URL; default: the catalog file's values)")
    replay.add_argument("--into", default=None, metavar="STREAM",
                        help="the stream the results are written into (must be at the query's level)")
    spark_args(replay)

    run = command(sub, "run", "run the authorized query continuously over file streams")
    query_args(run)
    input_arg(run, "an existing folder new files of the stream land in")
    run.add_argument("--sink", required=True, metavar="DIR|console",
                     help="output folder (JSON files, private to their owner), or 'console'")
    run.add_argument("--checkpoint", default=None, metavar="DIR",
                     help="Spark's checkpoint (default: checkpoints/<key> next to the store; never inside --sink)")
    store_arg(run, "where action values are read from")
    continuous_args(run, "watermark delay for out-of-order input")
    run.add_argument("--into", default=None, metavar="STREAM",
                     help="the stream the results are written into (must be at the query's level)")
    spark_args(run)

    for verb in ("grant", "revoke"):
        change = command(sub, verb, f"{verb} a user's access to a registered query of a running network")
        change.add_argument("--query", required=True, metavar="ID", help="the query's id in QUERIES.yaml")
        change.add_argument("--user", required=True, metavar="NAME", help="a user of the catalog")
        change.add_argument("--ts", default=None, metavar="TIMESTAMP",
                            help=f"from when: {TIMESTAMP} (default: now, printed)")
        if verb == "grant":
            change.add_argument("--until", default=None, metavar="TIMESTAMP",
                                help=f"when the grant expires: {TIMESTAMP} (default: never)")
        store_arg(change, "the network's store (must exist, with the queries registered)")
        change.add_argument("--sp-folder", default=None, metavar="DIR",
                            help="where access changes are published for the network (default: next to a SQLite "
                                 "store; required for other stores, the same as the network's)")

    action = command(sub, "action", "update an action in the live store (start, end, target)")
    action.add_argument("name", metavar="ACTION", help="the action's name, as the stored catalog declares it")
    store_arg(action, "the store (must exist: load the catalog with check first)")
    action.add_argument("--start", default=None, metavar="TIMESTAMP", help=f"when it started: {TIMESTAMP}")
    action.add_argument("--end", default=None, metavar="TIMESTAMP", help=f"when it ended: {TIMESTAMP}")
    action.add_argument("--target", type=float, default=None, metavar="NUMBER", help="its target value, e.g. 500")
    action.add_argument("--clear", action="store_true", help="mark the action as not taking place")

    demo = command(sub, "demo", "the scenarios on local Spark: a drill, patients' own policies, cloud auditing "
                                "tiers, a shared network")
    demo.add_argument("--workdir", default=".streamwarden/demo", metavar="DIR",
                      help="where the demo writes (emptied first; default .streamwarden/demo)")
    demo.add_argument("--soldiers", type=int, default=40, metavar="N", help="soldiers in the drill (default 40)")
    demo.add_argument("--minutes", type=float, default=20.0, metavar="M",
                      help="minutes of drill data (default 20)")
    demo.add_argument("--serve", action="store_true",
                      help="instead: start the service (streamwarden serve) on the shared network's data, printing a "
                           "token for each user (make serve); Ctrl-C stops it")
    demo.add_argument("--port", default=8470, type=_port, metavar="PORT", help="with --serve: the port (default 8470)")
    spark_args(demo, log_dir=None)  # its log is in --workdir

    sp = command(sub, "sp", "print the SP records a data provider sends for INSERT SP statements")
    sp.add_argument("statements", nargs="+", metavar="STATEMENT",
                    help="INSERT SP ... (several form one policy: same ts, sn 1..k)")
    sp.add_argument("--ts", default=None, metavar="TIMESTAMP", help=f"the policy's timestamp: {TIMESTAMP} "
                                                                   "(default: now)")
    sp.add_argument("--provider", default=None, metavar="ATTR=VALUE",
                    help="for a stream punctuated_by ATTR: the provider these SPs belong to")

    network = command(sub, "network", "many users' queries on one shared network with privacy switches")
    network_sub = network.add_subparsers(dest="network_command", required=True, metavar="COMMAND")
    queries_help = "QUERIES.yaml: queries: [{id, users, query}]"
    net_replay = command(network_sub, "replay", "each user's rows of each query, by their access changes")
    catalog_arg(net_replay)
    net_replay.add_argument("--queries", required=True, metavar="QUERIES.yaml", help=queries_help)
    net_replay.add_argument("--access", required=True, metavar="ACCESS.jsonl",
                            help='access changes, JSON lines {"ts", "query", "user", "sign": "+" or "-"}')
    input_arg(net_replay, "recorded input of a stream")
    net_replay.add_argument("--output-dir", required=True, metavar="DIR",
                            help="rows go to DIR/<user>/<query id>.jsonl (each user's folder private)")
    net_replay.add_argument("--store", default=None, metavar="URL",
                            help="also register the queries in this store (SQLAlchemy URL; default: none)")
    spark_args(net_replay)
    net_run = command(network_sub, "run", "run the network of the queries registered in the store continuously, "
                                          "applying grants, registrations and catalog changes while it runs")
    net_run.add_argument("--catalog", default=None, metavar="FILE.yaml",
                         help="load this catalog into the store first (default: the store's)")
    net_run.add_argument("--queries", default=None, metavar="QUERIES.yaml",
                         help=queries_help + " — register these first (default: the store's registered queries)")
    input_arg(net_run, "an existing folder new files of the stream land in")
    net_run.add_argument("--output-dir", required=True, metavar="DIR",
                         help="rows go to DIR/<user>/<query id>/ (each user's folder private), with _access.json "
                              "saying whether they receive it now and why not")
    store_arg(net_run, "the registered queries, the catalog, and the grants and revocations")
    net_run.add_argument("--checkpoint", default=None, metavar="DIR",
                         help="the pipelines' checkpoints (default: checkpoints/network-<hash of DIR> next to the "
                              "store); never inside --output-dir")
    continuous_args(net_run, "how late a tuple may arrive and still count in an aggregate's windows")
    spark_args(net_run)
    net_explain = command(network_sub, "explain", "the shared-operator network, its common prefix and switches")
    catalog_arg(net_explain)
    net_explain.add_argument("--queries", required=True, metavar="QUERIES.yaml", help=queries_help)
    net_explain.add_argument("--format", choices=("text", "dot", "json"), default="text",
                             help="text (default), dot (Graphviz) or json")
    net_explain.add_argument("--render", default=None, metavar="FILE.png|FILE.svg", help="also draw the network")
    net_register = command(network_sub, "register", "register the queries of QUERIES.yaml in a store ahead of a "
                                                    "run, so grants and revocations naming them are accepted")
    net_register.add_argument("queries", metavar="QUERIES.yaml", help=queries_help)
    catalog_arg(net_register)
    store_arg(net_register, "the network's store (created if missing)")
    net_unregister = command(network_sub, "unregister", "remove a registered query (a running network stops it at "
                                                        "its next micro-batch; its grants stay in the log)")
    net_unregister.add_argument("--query", required=True, metavar="ID", help="the registered query's id")
    store_arg(net_unregister, "the network's store (must exist)")

    token = command(sub, "token", "bearer tokens for the service (streamwarden serve): the store keeps only "
                                  "their hashes")
    token_sub = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    for verb, text in (("create", "make a token for a user, or for a stream's provider; the token is the last "
                                  "line of the output, shown this once"),
                       ("revoke", "revoke every token of a user, or of a stream's provider (or of one of its "
                                  "providers with --key)")):
        tok = command(token_sub, verb, text)
        holder = tok.add_mutually_exclusive_group(required=True)
        holder.add_argument("--user", default=None, metavar="NAME", help="a user of the stored catalog")
        holder.add_argument("--provider", default=None, metavar="STREAM",
                            help="a stream of the stored catalog: the token may send its records")
        tok.add_argument("--key", default=None, metavar="VALUE",
                         help="with --provider, for a stream with punctuated_by: that provider's value of the "
                              "attribute (its sub-stream), e.g. 7")
        if verb == "create":
            tok.add_argument("--admin", action="store_true", help="with --user: an administrator's token")
            tok.add_argument("--expires", default=None, metavar="DURATION",
                             help=f"how long it is valid: {DURATION}, e.g. '30 days', at most 366 days "
                                  "(default: until revoked)")
        store_arg(tok, "the store (must exist and hold the catalog)")

    audit = command(sub, "audit", "the audit trail in the store: check it is intact, or print it")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    verify = command(audit_sub, "verify", "check the audit trail's hash chain: exit status 0 when intact, 1 "
                                          "naming the first bad record when a record was changed, deleted or "
                                          "moved (2 for a usage error such as a missing store)")
    verify.add_argument("--anchor", default=None, metavar="SEQ:HASH",
                        help="a head printed by an earlier verify and kept outside the store: the trail must "
                             "still hold that record with that hash (catches a rewritten chain)")
    store_arg(verify, "the store (must exist)")
    show = command(audit_sub, "show", "print the audit trail, one line per record")
    show.add_argument("--since", default=None, metavar="TIMESTAMP", help=f"only records at or after: {TIMESTAMP}")
    show.add_argument("--principal", default=None, metavar="NAME",
                      help="only this principal's records, e.g. user:ann or cli:root")
    show.add_argument("--format", choices=("text", "json"), default="text",
                      help="text (default) or json (one JSON object a line)")
    store_arg(show, "the store (must exist)")

    serve = command(sub, "serve", "run the shared network behind an authenticated HTTP service (REST, Server-Sent "
                                  "Events, a web console at /, an audit record for every request)")
    serve.add_argument("--catalog", default=None, metavar="FILE.yaml",
                       help="load this catalog into the store first (default: the store's)")
    input_arg(serve, "a folder the stream's records land in (providers' POSTs add files to it; created if missing)")
    serve.add_argument("--output-dir", required=True, metavar="DIR",
                       help="each user's rows, DIR/<user>/<query>/ (served to them only)")
    store_arg(serve, "the catalog, tokens, registered queries, grants and the audit trail")
    serve.add_argument("--host", default="127.0.0.1", metavar="HOST",
                       help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", default=8470, type=_port, metavar="PORT",
                       help="the port (default 8470; 0: any free port, printed)")
    serve.add_argument("--tls-cert", default=None, metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="and this private key (PEM)")
    serve.add_argument("--jwks", default=None, metavar="FILE_OR_URL",
                       help="also accept JWTs signed by a key of this JSON Web Key Set (sub: the user; a roles "
                            "claim with streamwarden-admin: an admin)")
    serve.add_argument("--issuer", default=None, metavar="ISS", help="with --jwks: the JWTs' required iss")
    serve.add_argument("--audience", default=None, metavar="AUD", help="with --jwks: the JWTs' required aud")
    serve.add_argument("--checkpoint", default=None, metavar="DIR",
                       help="the pipelines' checkpoints (default: checkpoints/network-<hash of DIR> next to the store)")
    serve.add_argument("--sp-folder", default=None, metavar="DIR",
                       help="where access changes are published for the network (default: next to a SQLite store; "
                            "required for other stores)")
    serve.add_argument("--lateness", default="0 seconds", metavar="DURATION",
                       help=f"how late a tuple may arrive and still count in an aggregate's windows: {DURATION}")
    serve.add_argument("--trigger", default="1 second", metavar="DURATION",
                       help=f"micro-batch interval: {DURATION} (default 1 second; 0 seconds: each as soon as the "
                            "last ends)")
    serve.add_argument("--max-clock-skew", default="5 minutes", metavar="DURATION",
                       help=f"refuse a provider's record whose event time is further ahead of this machine's clock: "
                            f"{DURATION} (default 5 minutes; one far-future reading would move the watermark past "
                            f"every other provider's readings)")
    serve.add_argument("--spark-nice", default=10, type=int, choices=range(0, 20), metavar="N",
                       help="run Spark's JVM and Python workers at this niceness (0-19, default 10), so requests are "
                            "answered before micro-batches run; 0: the same priority")
    spark_args(serve, "; the service logs JSON lines on stderr")

    command(sub, "bench", "run the benchmarks (same as make bench)")
    return parser


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a port number (0 to 65535)")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (never raises, except argparse's usage exit 2)."""
    args = _parser().parse_args(argv)
    _absolute_paths(args)
    debug = bool(getattr(args, "debug", False))
    previous_umask = os.umask(0o077)  # before Spark starts: its JVM inherits it
    try:
        with warnings.catch_warnings(), _spark_settings(args):
            warnings.showwarning = _show_warning
            return _dispatch(args)
    except SourceError as exc:
        _trace(debug, args)
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StreamwardenError as exc:
        _trace(debug, args)
        print(f"error: {(str(exc).splitlines() or [type(exc).__name__])[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _trace(debug, args)
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one top-level guard: anything unexpected is one line
        _trace(debug, args)
        print(f"error: {api.describe_failure(exc)}" + _where_to_look(debug, args), file=sys.stderr)
        return EXIT_UNEXPECTED
    finally:
        os.umask(previous_umask)


def _spark_settings(args: argparse.Namespace) -> ContextManager[object]:
    """For a command that starts Spark, its ``--master`` and ``--conf`` over the environment's,
    checked now (a malformed one is exit 2 before anything runs) and used by whatever
    starts Spark during the command (see :func:`streamwarden.api.using_spark`)."""
    if not hasattr(args, "conf"):
        return nullcontext()
    return api.using_spark(args.master, args.conf, log_dir=_log_dir(args) if hasattr(args, "log_dir") else None)


def _log_dir(args: argparse.Namespace) -> Path:
    """Where Spark's own log goes: ``--log-dir``, else ``logs/`` next to the command's store
    (``--store``, else the default one), where its checkpoints go too."""
    if args.log_dir is not None:
        return Path(args.log_dir)
    return api.store_log_dir(getattr(args, "store", None))


def _where_to_look(debug: bool, args: argparse.Namespace) -> str:
    """After an unexpected failure's line: where its trace and Spark's log are. Only then is
    Spark's log worth a look: bad input is named on its one line, and Spark logs routine
    warnings (a loopback host name, no native Hadoop) at every start."""
    where = [] if debug else ["run with --debug for the trace"]
    where += _spark_log_note(args)
    return f" ({'; '.join(where)})" if where else ""


def _spark_log_note(args: argparse.Namespace) -> list[str]:
    """``["Spark's log: PATH"]`` once this command's Spark logs to the file it asked for (not
    for a command that starts no Spark, nor in a process whose Spark someone else started)."""
    if not hasattr(args, "log_dir"):
        return []
    log = api.spark_log_path()
    return [f"Spark's log: {log}"] if log is not None and log == (_log_dir(args) / "spark.log").resolve() else []


def _trace(debug: bool, args: argparse.Namespace) -> None:
    """With ``--debug``: the Python trace, and where Spark's own log (its Java traces) is."""
    if debug:
        traceback.print_exc()
        for note in _spark_log_note(args):
            print(note, file=sys.stderr)


def _show_warning(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """streamwarden's own warnings as one ``warning: ...`` line; others as Python prints them."""
    if category.__module__.startswith("streamwarden"):
        print(f"warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "user", None) is not None:
        check_name("user", args.user)
    if getattr(args, "into", None) is not None:
        check_name("stream", args.into)
    if args.command == "check":
        return _check(args)
    if args.command == "explain":
        if args.network:
            args.queries = args.network
            return _network_explain(args)
        if args.format == "dot":
            raise StreamwardenError("--format dot draws a network: use it with --network QUERIES.yaml")
        if args.render:
            raise StreamwardenError("--render draws a network: use it with --network QUERIES.yaml")
        if not args.user or not args.query:
            raise StreamwardenError("explain needs --user and --query (or --network QUERIES.yaml)")
        catalog = api.load_catalog(args.catalog)
        rewriting = api.authorize(catalog, args.user, args.query, join_strategy=args.join_strategy, level=args.level)
        if args.format == "json":
            print(json.dumps(api.explain_json(rewriting, catalog), indent=2))
        else:
            print(api.explain_text(rewriting, catalog), end="")
        return 0
    if args.command == "replay":
        catalog = api.load_catalog(args.catalog)
        report = api.replay_to_file(catalog, args.user, args.query, _inputs(args.input), args.output,
                                    store_url=args.store, join_strategy=args.join_strategy, level=args.level,
                                    into=args.into)
        print(f"{report.rows} rows written to {args.output}", file=sys.stderr)
        # Only a query at the top level gets these counts (the tuples are at the top): below it,
        # how many there were would describe data its level does not dominate.
        for stream, count in sorted(report.unknown_sources.items()):
            if count:
                print(f"{stream}: {count} tuples from an unknown source were put at the top level", file=sys.stderr)
        return 0
    if args.command == "run":
        catalog = api.load_catalog(args.catalog)
        if args.sink != "console":
            api.check_store_outside(args.store, args.sink, "the sink")
        # a --checkpoint overlapping the sink is refused before anything is written or Spark starts
        query = api.run(catalog, args.user, args.query, _inputs(args.input), args.sink,
                        checkpoint=args.checkpoint, store_url=args.store, lateness=_lateness(args.lateness),
                        trigger=_trigger(args.trigger), available_now=args.available_now,
                        join_strategy=args.join_strategy,
                        level=args.level, into=args.into)
        until = "until its input is processed" if args.available_now else "Ctrl-C to stop"
        print(f"running {query.id} -> {args.sink} ({'; '.join([until, *_spark_log_note(args)])})", file=sys.stderr)
        return _until_done(query, f"the query {query.id}")
    if args.command == "action":
        return _action(args)
    if args.command == "network":
        return _network(args)
    if args.command == "serve":
        return _serve(args)
    if args.command in ("grant", "revoke"):
        return _access_change(args)
    if args.command == "sp":
        return _sp(args)
    if args.command == "token":
        return _token(args)
    if args.command == "audit":
        return _audit(args)
    if args.command == "demo" and args.serve:
        from streamwarden.demo.serve import serve_demo

        workdir = Path(args.workdir if args.workdir != ".streamwarden/demo" else ".streamwarden/serve")
        return serve_demo(workdir, port=args.port)
    if args.command == "demo":
        from streamwarden.demo import run_demo

        return run_demo(Path(args.workdir), soldiers=args.soldiers, minutes=args.minutes)
    if args.command == "bench":
        import runpy

        runpy.run_module("bench.run", run_name="__main__")
        return 0
    raise AssertionError(args.command)


def _check(args: argparse.Namespace) -> int:
    """``check``: the catalog validated, then loaded into the store, saying what that replaced."""
    catalog = api.load_catalog(args.catalog)
    notes = []
    stored = ""
    if not args.no_store:
        store = api.CatalogStore(args.store)
        replaced = api.replacing(store, catalog)  # said, never silent: what goes may be what others run on
        changes = store.save(catalog, reset_actions=args.reset_actions)
        stored = f"; loaded into {store.url}"
        if replaced is not None:
            notes.append("unchanged: the same catalog as stored" if replaced.unchanged else replaced.describe())
        if changes.kept:
            notes.append(f"live values kept for action {', '.join(changes.kept)} (`streamwarden action` changes "
                         "them; --reset-actions takes the file's)")
        if changes.dropped:
            notes.append(f"dropped the live values of action {', '.join(changes.dropped)} (no longer declared)")
    counts = ", ".join(_count(len(names), what) for names, what in (
        (catalog.streams, "stream"), (catalog.roles, "role"), (catalog.users, "user"), (catalog.actions, "action"),
        (catalog.policies, "policy")))
    print(f"{args.catalog}: ok — {counts}{stored}")
    for note in notes:
        print(f"  {note}")
    return 0


def _replacing_note(store_url: str | None, catalog: "api.Catalog") -> str:
    """`` (replaced the catalog drill.yaml: removed ...)`` when loading ``catalog`` into the store
    replaces a different one; empty when the store holds none or the same."""
    replaced = api.replacing(api.CatalogStore(store_url), catalog)
    return "" if replaced is None or replaced.unchanged else f" ({replaced.describe()})"


def _count(n: int, what: str) -> str:
    """``1 policy``, ``3 policies``, ``0 actions``, ``2 Spark queries``."""
    plural = what[:-1] + "ies" if what.endswith("y") else what + "s"
    return f"{n:,} {what if n == 1 else plural}"


def _trigger(text: str) -> str:
    """``--trigger`` checked here (a bad one is exit 2, not a Spark error) and handed to Spark in
    milliseconds. Zero is Spark's own default: the next micro-batch as soon as the last ends."""
    seconds = _seconds(text)
    return f"{0 if seconds == 0 else max(1, round(seconds * 1000))} milliseconds"


def _lateness(text: str) -> str:
    """``--lateness`` checked here and handed to Spark's watermark in milliseconds."""
    return f"{round(api.parse_duration(text, '--lateness', zero=True) * 1000)} milliseconds"


def _until_done(runner: Any, what: str, *, poll_seconds: float = 2.0, batch_grace: float = 120.0) -> int:
    """Keep a runner (a running network, or the query :func:`~streamwarden.api.run` started; see
    :func:`streamwarden.api.keep_running`) going until it ends (with ``available_now``), Ctrl-C
    or SIGTERM, applying the store's live changes every ``poll_seconds``.

    A stop signal stops it cleanly with one line: the micro-batch under way is let finish (at
    most ``batch_grace`` seconds; a second signal stops at once), so what it committed stays and
    nothing is interrupted half-way. Ctrl-C (SIGINT) is exit 130, an interruption; SIGTERM is
    exit 0, the ordinary stop a supervisor asks for (systemd, a container runtime: both send it
    to the whole process group, whose JVM ignores it, see
    :func:`streamwarden.engine.session.launch_driver_jvm`). A broken record or another failure
    stops every part and is raised as it is."""
    import signal
    import threading

    stopping, hurry = threading.Event(), threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        (hurry if stopping.is_set() else stopping).set()

    handlers: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # Not PySpark's SIGINT handler (cancel every job, raise inside a Py4J call): note it, stop in order.
        handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    progress = _ProgressLines(api.progress_watch(), runner)
    finished = False
    try:
        api.keep_running(runner, stopping, hurry=hurry, poll_seconds=poll_seconds, batch_grace=batch_grace,
                         tick=progress.tick)
        finished = not received
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        api.stop_quietly(runner)
        progress.close("done" if finished else "stopped")
    if not received:
        return 0
    if received[0] == signal.SIGTERM:
        print(f"stopped {what} (SIGTERM); what it committed is kept", file=sys.stderr)
        return 0
    print(f"interrupted: stopped {what}; what it committed is kept", file=sys.stderr)
    return EXIT_INTERRUPTED


class _ProgressLines:
    """A line on stderr per micro-batch that read rows (on a terminal, one line rewritten in
    place, as Spark's console progress bar and pip do), and the totals when the run ends."""

    def __init__(self, watch: "api.ProgressWatch", runner: Any):
        self.watch = watch
        watch.attach(runner)
        self.live = sys.stderr.isatty()
        self.shown = False

    def tick(self) -> None:
        if self.watch.changed():
            self._show(self.watch.totals().line())

    def _show(self, line: str) -> None:
        if self.live:
            print(f"\r{line}\x1b[K", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)
        self.shown = True

    def close(self, how: str) -> None:
        """The totals, as ``done: ...`` (it ended by itself) or ``stopped: ...`` (a signal, a failure)."""
        totals = self.watch.final()
        self.watch.close()
        if self.live and self.shown:
            print(file=sys.stderr)  # the live line stays; the summary goes below it
        print(f"{how}: {totals.line()}", file=sys.stderr)


def _access_change(args: argparse.Namespace) -> int:
    """``grant``/``revoke``: only on a store that exists, for a registered query and a known user."""
    server = api.AuthorizationServer.existing(args.store, args.sp_folder)
    when = api.access_time(args.ts)
    if args.command == "grant":  # an audit record, refused too (an unknown query or user)
        server.grant(args.query, args.user, when, until=args.until, strict=True)
    else:
        server.revoke(args.query, args.user, when, strict=True)
    for note in server.check(args.query, args.user, strict=True):
        print(f"note: {note}", file=sys.stderr)
    source = _naive_note(args.ts) if args.ts else " (now: no --ts given)"
    until_text = getattr(args, "until", None)
    until = f" until {api.format_timestamp(api.access_time(until_text))}{_naive_note(until_text)}" if until_text else ""
    stamp = api.format_timestamp(when)
    since = "from" if args.command == "grant" else "as of"
    print(f"{args.command}: {args.user} on {args.query} {since} {stamp}{source}{until}, recorded in {server.store.url} "
          "(a running network reads it as an access SP at its next micro-batch)", file=sys.stderr)
    return 0


def _naive_note(text: str) -> str:
    """`` (no zone given: taken as UTC)`` for a timestamp written without an offset, so that
    ``--ts "2026-03-01 10:00"`` never means another instant than its writer thought unnoticed."""
    return " (no zone given: taken as UTC)" if api.names_no_zone(text) else ""


def _network_run(args: argparse.Namespace) -> int:
    """``network run``: the store's registered queries (after registering --queries), kept running
    and polled for changes between micro-batches until Ctrl-C (or, --available-now, until done)."""
    if args.queries and not args.catalog:
        raise StreamwardenError("--queries needs --catalog: the queries are checked against it before they are "
                                "registered")
    catalog = api.load_catalog(args.catalog) if args.catalog else None
    queries = api.load_queries(args.queries, catalog) if args.queries and catalog is not None else None
    inputs, lateness, trigger = _inputs(args.input), _lateness(args.lateness), _trigger(args.trigger)
    if catalog is not None and (note := _replacing_note(args.store, catalog)):
        print(f"catalog {args.catalog} loaded into the store{note}", file=sys.stderr)
    # quarantined records and failed pipelines, one line each; access changes as they take effect
    with _warning_lines("streamwarden.network"), _info_lines("streamwarden.network.access"):
        runtime = api.run_network(inputs, args.output_dir, store_url=args.store, catalog=catalog, queries=queries,
                                  checkpoint_root=args.checkpoint or None, lateness=lateness, trigger=trigger,
                                  available_now=args.available_now)
        info = api.network_info(runtime)
        until = "until its input is processed" if args.available_now else "Ctrl-C to stop"
        waiting = " (none of their users has access yet: a grant starts them)" if info.pipelines and not \
            info.spark_queries else ""
        print(f"network: {_count(info.queries, 'registered query')} as {_count(info.pipelines, 'pipeline')}, "
              f"{_count(info.spark_queries, 'Spark query')} running{waiting}; checkpoint {info.checkpoint_root}; "
              f"grant/revoke/register/check with --store {info.store_url} "
              f"({'; '.join([until, *_spark_log_note(args)])})", file=sys.stderr)
        code = _until_done(runtime, "the network", poll_seconds=min(2.0, max(0.2, _seconds(args.trigger))))
    failed = runtime.failures()  # each stopped alone, the others ran on; said once as it happened
    if failed and code == 0:
        print(f"{len(failed)} of {api.network_info(runtime).pipelines} pipelines stopped on an error: "
              + "; ".join(f"{name}: {why}" for name, why in sorted(failed.items())), file=sys.stderr)
        return 2 if all(why.startswith("broken record") for why in failed.values()) else 3
    return code


@contextmanager
def _info_lines(logger: str) -> Iterator[None]:
    """While it runs, what ``logger`` logs at INFO or above as lines on stderr."""
    with _log_lines(logger, logging.INFO, logging.Formatter("%(message)s")):
        yield


@contextmanager
def _warning_lines(logger: str) -> Iterator[None]:
    """While it runs, what ``logger`` logs at WARNING or above as ``warning: ...`` or ``error: ...``
    lines on stderr."""
    class Lowercase(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"{record.levelname.lower()}: {record.getMessage()}"

    with _log_lines(logger, logging.WARNING, Lowercase()):
        yield


@contextmanager
def _log_lines(logger: str, level: int, formatter: logging.Formatter) -> Iterator[None]:
    """``logger``'s records of ``level`` or above on stderr while the block runs (the logger is
    opened to ``level`` for it, and put back)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.setLevel(level)
    target = logging.getLogger(logger)
    target.addHandler(handler)
    previous = target.level
    if target.getEffectiveLevel() > level:
        target.setLevel(level)
    try:
        yield
    finally:
        target.removeHandler(handler)
        target.setLevel(previous)


def _seconds(text: str) -> float:
    return api.parse_duration(text, "--trigger", zero=True)


def _network_explain(args: argparse.Namespace) -> int:
    catalog = api.load_catalog(args.catalog)
    explained = api.explain_network(catalog, api.load_queries(args.queries, catalog))
    if args.format == "json":
        print(json.dumps(explained.json(), indent=2))
    elif args.format == "dot":
        print(explained.dot(), end="")
    else:
        print(explained.text(), end="")
    if args.render:
        drawn = explained.draw(args.render, title=Path(args.queries).name)
        print(f"drawn to {drawn}", file=sys.stderr)
    return 0


def _network(args: argparse.Namespace) -> int:
    if args.network_command == "explain":
        return _network_explain(args)
    if args.network_command == "run":
        return _network_run(args)
    if args.network_command == "unregister":
        url = api.unregister(args.query, args.store)
        print(f"unregistered {args.query} from {url} (a running network stops it at its next poll)",
              file=sys.stderr)
        return 0
    catalog = api.load_catalog(args.catalog)
    queries = api.load_queries(args.queries, catalog)
    if args.network_command == "register":
        replaced = _replacing_note(args.store, catalog)
        url = api.register(queries, catalog, args.store)
        print(f"registered {', '.join(q.id for q in queries)} in {url}{replaced}", file=sys.stderr)
        return 0
    changes = api.load_access(args.access, queries)
    # every input checked before Spark starts; with --store, the queries registered there too
    written = api.replay_network(catalog, queries, changes, _inputs(args.input), args.output_dir,
                                 store_url=args.store)
    for (user, query), count in sorted(written.items()):
        print(f"{user}/{query}.jsonl: {count} rows", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from streamwarden.service.server import ServeOptions, serve  # the service: a front end of its own

    api.check_store_outside(args.store, args.output_dir, "the output folder")
    return serve(ServeOptions(
        store_url=args.store, inputs=_inputs(args.input), output_dir=args.output_dir, catalog=args.catalog,
        host=args.host, port=args.port, tls_cert=args.tls_cert, tls_key=args.tls_key, jwks=args.jwks,
        issuer=args.issuer, audience=args.audience, checkpoint=args.checkpoint, sp_folder=args.sp_folder,
        trigger=_trigger(args.trigger), lateness=_lateness(args.lateness), log_dir=args.log_dir,
        spark_nice=args.spark_nice, max_clock_skew=args.max_clock_skew))


def _sp(args: argparse.Namespace) -> int:
    statements = api.parse_sp_statements(args.statements)
    try:
        ts = api.parse_timestamp(args.ts) if args.ts else datetime.now(timezone.utc).replace(microsecond=0)
    except ValueError:
        raise StreamwardenError(f"--ts {args.ts!r} is not an ISO-8601 timestamp") from None
    provider: tuple[str, object] | None = None
    if args.provider:
        attribute, sep, raw = args.provider.partition("=")
        if not sep or not attribute:
            raise StreamwardenError(f"--provider expects ATTR=VALUE, got {args.provider!r}")
        provider = (attribute, json.loads(raw) if raw.lstrip("-").replace(".", "", 1).isdigit() else raw)
    print(api.sp_records(statements, ts, provider), end="")
    return 0


def _token(args: argparse.Namespace) -> int:
    """``token create`` / ``token revoke``: on a store with a catalog; audited (the token never is)."""
    if args.provider is not None:
        check_name("stream", args.provider)  # before anything is written or audited
    if args.key is not None:
        if args.provider is None:
            raise StreamwardenError("--key names one provider of a stream: use it with --provider STREAM")
        api.check_key_text(args.key)
    creating = args.token_command == "create"
    if creating and args.admin and args.provider is not None:
        raise StreamwardenError("--admin makes an administrator's token: use it with --user, not --provider")
    expires = api.parse_expiry(args.expires) if creating and args.expires is not None else None
    store = api.CatalogStore.existing(args.store)  # never creates one: a mistyped --store is an error
    kind, name = ("user", args.user) if args.user is not None else ("provider", args.provider)
    target = api.subject_label(kind, name, args.key)
    if not creating:  # each change is an audit record (refused too), under the operator
        count = (api.revoke_tokens(store, args.user) if args.user is not None
                 else api.revoke_provider_tokens(store, args.provider, args.key))
        print(f"revoked {count} token{'' if count == 1 else 's'} of {target} in {store.url}")
        return 0
    token = api.create_token(store, args.user, admin=args.admin, expires=expires, provider_stream=args.provider,
                             provider_key=args.key)
    token_id = api.token_id(token)
    what = [f"id {token_id}"] + (["admin"] if args.admin else []) + [f"expires in {args.expires}" if expires
                                                                     else "valid until revoked"]
    print(f"created a token for {target} ({', '.join(what)}) in {store.url}; the token is shown this "
          "once, as the last line of stdout", file=sys.stderr)
    print(token)
    return 0


def _audit(args: argparse.Namespace) -> int:
    """``audit verify`` (exit 1 on a finding, not 2: the trail was tampered with, the command
    was right) and ``audit show``."""
    if args.audit_command == "verify":
        anchor = api.parse_audit_anchor(args.anchor) if args.anchor is not None else None
        result = api.verify_audit(args.store or api.default_store(), anchor)
        if not result.ok:
            print(f"audit trail broken: {result.message}")
            return EXIT_FAILURE
        head = f"; head {result.head[0]}:{result.head[1]} (keep it elsewhere, check later with --anchor)" \
            if result.head else ""
        print(result.message + head)
        return 0
    for record in api.audit_records(args.store or api.default_store(), since=args.since, principal=args.principal):
        print(json.dumps(record.to_json(), ensure_ascii=False) if args.format == "json" else record.line())
    return 0


def _action(args: argparse.Namespace) -> int:
    values: dict[str, object] = {}
    try:
        if args.clear:
            values.update(start=None, end=None)
        if args.start:
            values["start"] = api.parse_timestamp(args.start)
        if args.end:
            values["end"] = api.parse_timestamp(args.end)
    except ValueError as exc:
        raise StreamwardenError(f"not an ISO-8601 timestamp: {exc}") from None
    if args.target is not None:
        values["target"] = args.target
    if not values:
        raise StreamwardenError("say what to change: --start, --end, --target or --clear")
    check_name("action", args.name)
    store = api.CatalogStore.existing(args.store)  # never creates a store: a typo in --store or the folder is an error
    store.set_action(args.name, **values)  # an action the stored catalog does not declare is refused
    print(f"action {args.name} updated in {store.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
