"""``streamwarden serve``: start the shared network and the HTTP service in one process.

Order matters for operators: the store and the inputs are checked first (a bad flag is
exit 2 before Spark starts), then Spark and the network start, then the HTTP server binds,
and only then ``listening on http://HOST:PORT`` is printed (``https`` with TLS; the real
port when ``--port 0``). SIGTERM or Ctrl-C stops the HTTP server, then every pipeline
(Spark commits whole micro-batches, so the checkpoints stay consistent), then drains the
audit trail, and exits 0. The signal may reach the whole process group (systemd, a container
runtime): Spark's JVM ignores it and ends after this process
(:func:`streamwarden.engine.session.launch_driver_jvm`), so nothing is cut half-way.
"""

from __future__ import annotations

import gc
import json
import logging
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Mapping

import uvicorn

from streamwarden.api import (AuthorizationServer, CatalogStore, load_catalog, lower_priority, network_info,
                              parse_duration, start_logged_spark, start_network, store_log_dir)
from streamwarden.errors import StreamwardenError
from streamwarden.names import check_name, private_dir
from streamwarden.service.app import Service, create_app
from streamwarden.service.auth import Authenticator, JwtIssuer
from streamwarden.service.host import NetworkHost
from streamwarden.service.trail import AuditTrail

log = logging.getLogger("streamwarden.service")


@dataclass(frozen=True)
class ServeOptions:
    """Everything ``serve`` takes (see ``streamwarden serve --help``)."""

    store_url: str | None
    inputs: Mapping[str, str]
    output_dir: str
    catalog: str | None = None
    host: str = "127.0.0.1"
    port: int = 8470
    tls_cert: str | None = None
    tls_key: str | None = None
    jwks: str | None = None
    issuer: str | None = None
    audience: str | None = None
    checkpoint: str | None = None
    sp_folder: str | None = None
    trigger: str = "1 second"
    lateness: str = "0 seconds"
    poll_seconds: float = 1.0
    log_dir: str | None = None  # Spark's own log goes here (default: logs/ next to the store)
    spark_nice: int = 10  # Spark's scheduling priority below the HTTP service's (0: the same)
    max_clock_skew: str = "5 minutes"  # how far ahead of the clock a provider's event time may be


def open_service(options: ServeOptions, host: Any = None) -> Service:
    """The service's parts over the store (its catalog loaded from ``options.catalog`` first)."""
    if (options.tls_cert is None) != (options.tls_key is None):
        raise StreamwardenError("--tls-cert and --tls-key go together")
    if options.jwks is not None and not (options.issuer and options.audience):
        raise StreamwardenError("--jwks needs --issuer and --audience: a token of any issuer or audience is refused")
    # actor=None: what requests change is recorded by the service's own trail (service/trail.py),
    # once per request; the store's own records of the same change would be a second one
    server = AuthorizationServer(options.store_url, options.sp_folder, actor=None)
    store = server.store
    if options.catalog is not None:  # the operator's change, before any request: recorded under them
        CatalogStore(store.url).save(load_catalog(options.catalog))
    elif not store.has_catalog():
        raise StreamwardenError(f"the store {store.url} holds no catalog: give --catalog FILE.yaml")
    catalog = store.load()
    inputs: dict[str, Path] = {}
    for stream, folder in options.inputs.items():
        check_name("stream", stream)
        if stream not in catalog.streams:
            raise StreamwardenError(f"--input {stream}=...: the catalog declares no stream {stream} "
                                    f"(it declares {', '.join(sorted(catalog.streams))})")
        path = Path(folder)
        if path.exists() and not path.is_dir():
            raise StreamwardenError(f"--input {stream}={folder}: the service appends files to a folder, not a file")
        inputs[stream] = private_dir(path)
    issuer = (JwtIssuer(options.jwks, options.issuer, options.audience)  # --jwks comes with both (checked above)
              if options.jwks and options.issuer and options.audience else None)
    skew = timedelta(seconds=parse_duration(options.max_clock_skew, "--max-clock-skew", zero=True))
    return Service(store, server, Path(options.output_dir), inputs, Authenticator(store, issuer), AuditTrail(store),
                   host, max_clock_skew=skew)


class _Server(uvicorn.Server):
    """uvicorn, saying where it listens once it does."""

    def __init__(self, config: uvicorn.Config, scheme: str):
        super().__init__(config)
        self.scheme = scheme

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        bound = [s.getsockname() for server in self.servers for s in server.sockets]
        host, port = bound[0][0], bound[0][1]
        shown = f"[{host}]" if ":" in host else host
        print(f"listening on {self.scheme}://{shown}:{port}", flush=True)


def serve(options: ServeOptions) -> int:
    """Run the service until SIGTERM or Ctrl-C; returns the exit status."""
    service = open_service(options)
    structured_logs()
    log_dir = Path(options.log_dir) if options.log_dir else store_log_dir(service.store.url)
    spark = start_logged_spark(log_dir)  # Spark's output in a file: stderr carries the service's JSON lines
    log.info("Spark's log is %s", log_dir / "spark.log")
    if options.spark_nice:  # on 2 cores, micro-batches would otherwise starve the requests (bench/: experiment 8)
        log.info("Spark runs at nice %d (%d threads)", options.spark_nice, lower_priority(spark, options.spark_nice))
    inputs = {stream: str(folder) for stream, folder in service.inputs.items()}
    runtime = start_network(inputs, options.output_dir, store_url=service.store.url,
                            checkpoint_root=options.checkpoint or None, spark=spark, lateness=options.lateness,
                            trigger=options.trigger, sp_folder=options.sp_folder)
    service.host = NetworkHost(runtime, poll_seconds=options.poll_seconds).start()
    info = network_info(runtime)
    log.info("network started: %d pipelines for %d registered queries", info.pipelines, info.queries)
    scheme = "https" if options.tls_cert else "http"
    config = uvicorn.Config(create_app(service), host=options.host, port=options.port, log_level="warning",
                            access_log=False, ssl_certfile=options.tls_cert, ssl_keyfile=options.tls_key,
                            timeout_graceful_shutdown=5, lifespan="off")
    server = _Server(config, scheme)
    # What start-up made (Spark's and the network's Python objects, the app) lives as long as the
    # service: out of the cyclic collector's sight, a full collection no longer walks it while
    # requests wait (65 ms per collection in a Spark-less service; more beside Spark).
    gc.collect()
    gc.freeze()
    # uvicorn handles SIGTERM/SIGINT while it runs, then raises the signal again under the
    # handlers it found: make those no-ops, so a stop is a clean exit 0, not a death by signal.
    previous = {sig: signal.signal(sig, _stopping) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    finally:
        service.host.stop()
        service.trail.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        raise StreamwardenError(f"cannot listen on {options.host}:{options.port} (in use, or not an address here)")
    log.info("stopped: every pipeline stopped after its last committed micro-batch")
    return 0


class _JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message (names and counts only: the service
    never logs a token, a header or a row)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["trace"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def structured_logs(level: int = logging.INFO) -> None:
    """The service's log on stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines())
    logger = logging.getLogger("streamwarden")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


def _stopping(signum: int, frame: Any) -> None:
    """A stop signal after uvicorn's own handling: the shutdown is already under way."""


__all__ = ["ServeOptions", "open_service", "serve"]
