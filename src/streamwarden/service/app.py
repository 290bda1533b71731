"""The REST contract of ``streamwarden serve`` (FastAPI): thin routes over the store and the network.

Every route but ``GET /health`` and the console's page needs ``Authorization: Bearer TOKEN``:
missing, invalid, expired or revoked → 401; authenticated but not allowed → 403; another
user's query → 404, exactly as for a query that does not exist. Every answer that is not a
success is JSON ``{"error": "one sentence", ...}`` (``line``/``column`` where a text sent was
at fault), never a traceback; each carries the request id (``X-Request-Id``) that its audit
record names.

    >>> # app = create_app(Service.open("sqlite:///home/store.db", "out", {"S": "in/S"}))
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Literal

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streamwarden.api import (MAX_CURSOR, STREAM, AccessChange, AuthorizationServer, Catalog, CatalogStore, Principal,
                              RegisteredQuery, UnknownName, access_periods, audit_records, capped_names, clean_text,
                              delivered_rows, delivery_summary, diff_catalogs, format_timestamp, load_catalog_text,
                              Page, openings, parse_own_id, parse_timestamp, read_rows, read_rows_quickly,
                              read_status)
from streamwarden.errors import SourceError, StreamwardenError
from streamwarden.names import name_problem
from streamwarden.service.auth import Authenticator
from streamwarden.service.errors import ApiError, forbidden, position_of, retry_later, unauthenticated
from streamwarden.service.host import NetworkHost
from streamwarden.service.limits import (CHURN_PER_MINUTE, DRY_RUNS_PER_MINUTE, CheckerBusy, CheckTimedOut,
                                         RateLimit)
from streamwarden.service.metrics import Metrics
from streamwarden.service.providers import MAX_BODY, MAX_CLOCK_SKEW, append_records, check_records
from streamwarden.service.queries import Entry, QueryBook, explain_for, explanation, periods_json
from streamwarden.service.trail import AuditTrail
from streamwarden.service.wakeups import Wakeups

log = logging.getLogger("streamwarden.service")
CONSOLE = Path(__file__).with_name("console") / "index.html"
#: The console's page may talk to this service only, and nothing may frame it.
CONSOLE_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                  "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; "
                  "frame-ancestors 'none'")
MAX_CATALOG = 1024 * 1024  # bytes of catalog YAML
MAX_ROWS = 10_000  # rows in one page
STREAM_POLL = 0.1  # seconds an SSE stream waits for a delivery announced (service/wakeups.py) before it looks anyway
REAUTH_SECONDS = 5.0  # an idle SSE stream re-checks its token this often (and before every page it sends)
#: Admins name another user's own query by its owner and the id she gave it.
OWNER = Query(None, max_length=64, description="admins: the user whose own query this is")


@dataclass
class Service:
    """What the routes work with: the store, the network's output and inputs, and the helpers."""

    store: CatalogStore
    server: AuthorizationServer
    output: Path
    inputs: dict[str, Path]
    auth: Authenticator
    trail: AuditTrail
    host: NetworkHost | None = None
    metrics: Metrics = field(default_factory=Metrics)
    #: how far ahead of this service's clock a provider's event time may be
    max_clock_skew: timedelta = MAX_CLOCK_SKEW
    #: registrations plus removals per caller and minute (service/limits.py: in this process's memory)
    churn: RateLimit = field(default_factory=lambda: RateLimit(CHURN_PER_MINUTE))
    #: dry runs per caller and minute, counted apart from the churn
    dry_runs: RateLimit = field(default_factory=lambda: RateLimit(DRY_RUNS_PER_MINUTE))

    book: QueryBook = field(init=False)
    wakeups: Wakeups = field(init=False)

    def __post_init__(self) -> None:
        self.book = QueryBook(self.server, self.output)
        self.wakeups = Wakeups(self.output)

    def refresh(self) -> None:
        if self.host is not None:
            self.host.refresh()

    @property
    def checkpoint_root(self) -> Path | None:
        return self.host.checkpoint_root if self.host is not None else None

    def check_runnable(self, registered: RegisteredQuery, catalog: Catalog) -> None:
        """Compile ``registered`` for its users exactly as the running network would, and refuse
        it (422) if Spark cannot run it: a registration answers 201 only for a query that runs.
        Without a network (the contract's tests) only the security passes have checked it."""
        if self.host is None:
            return
        try:
            problem = self.host.runnable_problem(registered, catalog)
        except CheckTimedOut as exc:
            raise ApiError(422, f"the network could not check this query within {exc.seconds:g} s: Spark's analysis "
                                "of its plan takes longer than a registration may (fewer streams, joins or windows "
                                "make it quicker)", field="query") from None
        except CheckerBusy as exc:
            raise retry_later(503, f"the network is busy checking other registrations: try again in "
                                   f"{exc.retry_after} s", exc.retry_after) from None
        if problem is not None:
            raise ApiError(422, f"the network cannot run this query: {problem}", field="query")

    def limit_churn(self, principal: Principal, *, dry_run: bool = False) -> None:
        """429 when ``principal`` has registered and removed queries (or, with ``dry_run``, tried
        them) faster than its bucket allows: before anything is loaded or compiled."""
        limit = self.dry_runs if dry_run else self.churn
        wait = limit.wait(principal.label)
        if wait is not None:
            what = "dry runs" if dry_run else "registrations and removals of queries"
            raise retry_later(429, f"you may make at most {limit.per_minute} {what} a minute: try again in "
                                   f"{wait} s", wait)

    def policies(self, query: str, user: str) -> tuple[str, ...]:
        """The policies of the graphs that serve ``user``'s rows of ``query`` (for the audit trail)."""
        return self.host.policies(query, user) if self.host is not None else ()


# -- request bodies (they are also the OpenAPI schema) -----------------------------------------
class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64, description="the query's id (per user)")
    query: str = Field(min_length=1, max_length=20_000, description="CQL")
    level: str | None = Field(None, max_length=256, description="the security level, e.g. [1, ⊥]")
    users: list[str] | None = Field(None, max_length=10_000, description="admins: register for these users")


class RowsOut(BaseModel):
    rows: list[dict[str, Any]] = Field(description="your rows in delivery order, as in the replay contract")
    next: str = Field(description="the cursor after the last row (pass it as after=)")
    network: Literal["catching_up", "live"] | None = Field(
        None, description="catching_up: the network is still reading input it already holds (more rows may come "
                          "at once); live: it has read everything available; absent without a running network")
    event_time: str | None = Field(None, description="the latest event time of a row of this query the network "
                                                     "has emitted (delivered to you or not); null: none yet")


class GrantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=64)
    user: str = Field(min_length=1, max_length=64)
    sign: Literal["+", "-"]
    ts: str | None = Field(None, max_length=64, description="event time it applies from (default: now)")
    until: str | None = Field(None, max_length=64, description="a grant's end (event time)")


class ActionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start: str | None = Field(None, max_length=64)
    end: str | None = Field(None, max_length=64)
    target: float | None = Field(None, allow_inf_nan=False)


def create_app(service: Service) -> FastAPI:
    """The service's ASGI application."""
    app = FastAPI(title="streamwarden", version="1", docs_url="/docs", redoc_url=None,
                  description="Access control for continuous queries: each user's rows, and nothing else.")
    app.state.service = service
    _errors(app, service)
    app.add_middleware(_Audited, service=service)

    # -- helpers -------------------------------------------------------------------------------
    def caller(request: Request, action: str, target: str = "-") -> Principal:
        request.state.action = action
        request.state.object = target
        principal = service.auth.principal(request.headers.get("authorization"))
        if principal is None:
            raise unauthenticated()
        request.state.principal = principal.label
        return principal

    async def user_caller_now(request: Request, action: str, target: str = "-") -> Principal:
        """:func:`user_caller` for a route on the event loop: a store token's kept answer at once;
        anything else (not kept, expired, a JWT, no token) is asked in a worker thread, where the
        store or the issuer's keys may keep it waiting without stopping the loop."""
        kept = service.auth.kept(request.headers.get("authorization"))
        if kept is None or kept.kind != "user":
            return await asyncio.to_thread(user_caller, request, action, target)
        request.state.action = action
        request.state.object = target
        request.state.principal = kept.label
        return kept

    async def find_now(principal: Principal, query_id: str) -> Entry:
        """:meth:`QueryBook.find` for a route on the event loop: what is kept at once, else the store
        asked in a worker thread (which answers 404 for a query the caller does not have)."""
        kept = service.book.find_kept(principal, query_id)
        return kept if kept is not None else await asyncio.to_thread(service.book.find, principal, query_id)

    def user_caller(request: Request, action: str, target: str = "-") -> Principal:
        principal = caller(request, action, target)
        if principal.kind != "user":
            raise forbidden("a provider token can only append records to its stream")
        return principal

    def admin(request: Request, action: str, target: str = "-") -> Principal:
        principal = user_caller(request, action, target)
        if not principal.admin:
            raise forbidden("this needs an admin token")
        return principal

    # -- public --------------------------------------------------------------------------------
    @app.get("/health", include_in_schema=False)
    def health() -> JSONResponse:
        problem = service.trail.problem()  # the service refuses every other request while it cannot audit
        if problem is not None:
            return JSONResponse({"status": "unavailable", "error": f"{problem}: the service answers no requests "
                                 "until its audit trail can be written"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/", include_in_schema=False, response_class=HTMLResponse)
    def console() -> HTMLResponse:
        try:
            page = CONSOLE.read_text(encoding="utf-8")
        except OSError:
            page = "<!doctype html><title>streamwarden</title><p>The console is not installed.</p>"
        return HTMLResponse(page, headers={"Content-Security-Policy": CONSOLE_POLICY, "X-Frame-Options": "DENY",
                                           "Referrer-Policy": "no-referrer"})

    @app.get("/v1/me")
    def me(request: Request) -> dict[str, Any]:
        """Who your token speaks for."""
        principal = caller(request, "identity.read", "me")
        return {"name": principal.name, "kind": principal.kind, "admin": principal.admin,
                **({"stream": principal.stream} if principal.kind == "provider" else {})}

    @app.get("/v1/streams")
    def streams(request: Request) -> dict[str, Any]:
        """The streams your policies open to you: which attributes, why, and a query that works."""
        principal = user_caller(request, "streams.list", "streams")
        return {"streams": [o.as_json() for o in openings(service.store.load(), principal.name)]}

    # -- users: their queries ------------------------------------------------------------------------
    @app.post("/v1/queries", status_code=201)
    def register(body: QueryIn, request: Request, dry_run: bool = False) -> JSONResponse:
        """Register a query for yourself (admins: with ``users``, for those users). ``dry_run``: only explain."""
        principal = user_caller(request, "query.create", f"query:{_short(body.id)}")
        service.limit_churn(principal, dry_run=dry_run)  # before anything is loaded or compiled
        catalog = service.store.load()
        book = service.book
        if body.users is not None:
            if not principal.admin:
                raise forbidden("only admins register queries for other users")
            if dry_run:
                outcomes = {u: _outcome(catalog, body, u) for u in body.users[:100]}
                return JSONResponse({"id": body.id, "dry_run": True, "users": outcomes})
            entry, explained = book.register_shared(body.id, body.query, body.level, body.users, catalog,
                                                    check=service.check_runnable)
            request.state.detail = _query_detail(entry)
            service.refresh()
            users = {u: explanation(r) if not isinstance(r, str) else {"denied": r} for u, r in explained.items()}
            request.state.policies = _policies(*[r for r in explained.values() if not isinstance(r, str)])
            return JSONResponse({"id": entry.id, "users": users}, status_code=201)
        entry, rewriting = book.prepare_own(principal, body.id, body.query, body.level, catalog)
        request.state.object = f"query:{entry.ref}"
        request.state.detail = _query_detail(entry)
        request.state.policies = _policies(rewriting)
        if dry_run:
            return JSONResponse({"id": body.id, "dry_run": True, "explanation": explanation(rewriting)})
        service.check_runnable(entry.registered, catalog)
        book.register_own(entry, service.refresh, service.checkpoint_root)
        service.refresh()
        return JSONResponse({"id": entry.id, "explanation": explanation(rewriting)}, status_code=201)

    @app.get("/v1/queries")
    def list_queries(request: Request) -> dict[str, Any]:
        principal = user_caller(request, "query.list", "queries")
        return {"queries": [_summary(service, e, principal) for e in service.book.visible(principal)]}

    @app.get("/v1/queries/{query_id}")
    def show_query(query_id: str, request: Request, owner: str | None = OWNER) -> dict[str, Any]:
        principal = user_caller(request, "query.show", f"query:{_short(query_id)}")
        entry = service.book.find(principal, query_id, owner)
        request.state.object = f"query:{entry.ref}"
        summary = _summary(service, entry, principal)
        user = principal.name if principal.name in entry.registered.users else None
        try:
            rewriting = explain_for(service.store.load(), entry.registered, user or entry.registered.users[0])
            summary["explanation"] = explanation(rewriting)
        except ApiError as exc:
            summary["explanation"] = {"denied": exc.message}
        if user is not None:
            summary["status"] = _status(service, entry, user)
        return summary

    @app.delete("/v1/queries/{query_id}")
    def delete_query(query_id: str, request: Request, owner: str | None = OWNER) -> dict[str, Any]:
        principal = user_caller(request, "query.delete", f"query:{_short(query_id)}")
        service.limit_churn(principal)
        entry = service.book.find(principal, query_id, owner)
        request.state.object = f"query:{entry.ref}"
        if entry.owner != principal.name and not principal.admin:
            raise forbidden("a shared query is removed by an admin")
        request.state.detail = _query_detail(entry)
        service.book.unregister(entry, service.refresh, service.checkpoint_root)
        return {"id": entry.id, "deleted": True, **({"owner": entry.owner} if entry.owner else {})}

    @app.get("/v1/queries/{query_id}/rows", response_model=RowsOut)
    async def rows(query_id: str, request: Request, after: str | None = Query(None, max_length=32),
                   limit: int = Query(1000, ge=1, le=MAX_ROWS)) -> Response:
        """Your rows after ``after`` (a cursor from ``next``), in delivery order."""
        # On the event loop, not the thread pool: the token and the query are answered from what
        # is kept (one read of the store's generation), the rows from the log as parsed already
        # and a batch file or two. Forty pollers' requests each in a worker thread, contending
        # for the GIL, made every request as slow as the burst it came in
        # (bench/results/service_load.md); anything that may wait (the store on a miss, a JWT's
        # keys, a log to parse afresh, a page deep in the history) still waits off the loop.
        principal = await user_caller_now(request, "query.rows", f"query:{_short(query_id)}")
        entry = await find_now(principal, query_id)
        request.state.object = f"query:{entry.ref}"
        page = await _rows_page(service, principal.name, entry.internal, after=_cursor(after), limit=limit)
        if page.lines:  # the audit names the policies that authorized what was read
            request.state.policies = service.policies(entry.internal, principal.name)
        # the rows as the network wrote them (Spark's to_json): passed on, not parsed and encoded again
        body = '{"rows":[' + ",".join(page.lines) + '],"next":"' + str(page.next) + '"' + _progress_fields(
            service, principal.name, entry.internal) + "}"
        return Response(body, media_type="application/json")

    @app.get("/v1/queries/{query_id}/stream")
    async def stream(query_id: str, request: Request, after: str | None = Query(None, max_length=32)) -> Response:
        """Your rows as Server-Sent Events (``id``: the row's cursor), resumable with ``Last-Event-ID``."""
        principal = await user_caller_now(request, "query.stream", f"query:{_short(query_id)}")  # as GET rows
        entry = await find_now(principal, query_id)
        request.state.object = f"query:{entry.ref}"
        start = _cursor(request.headers.get("last-event-id") or after)
        header = request.headers.get("authorization")
        return EventSourceResponse(_events(service, entry.internal, start, request, header, principal, entry.id),
                                   ping=15)

    # -- admins ------------------------------------------------------------------------------
    @app.put("/v1/catalog", openapi_extra=_raw_body("the catalog's YAML", "application/yaml"))
    async def put_catalog(request: Request) -> dict[str, Any]:
        await asyncio.to_thread(admin, request, "catalog.update", "catalog")
        body = await _body(request, MAX_CATALOG)
        return await asyncio.to_thread(_apply_catalog, service, body, request)  # parsing, replanning: off the loop

    @app.get("/v1/catalog")
    def get_catalog(request: Request) -> dict[str, Any]:
        admin(request, "catalog.read", "catalog")
        catalog = service.store.load()
        return {
            "text": catalog.text,
            "users": {u: {"roles": list(d.roles), "clearance": None if d.clearance is None else str(d.clearance)}
                      for u, d in sorted(catalog.users.items())},
            "policies": [{"id": p.id, "subject": p.subject, "streams": list(p.streams), "privilege": p.privilege,
                          "where": p.where_text} for p in catalog.policies],
            "streams": {s.name: dict(s.schema) for s in catalog.streams.values()},
        }

    @app.post("/v1/grants", status_code=201)
    def grant(body: GrantIn, request: Request) -> JSONResponse:
        """Grant or revoke a user's access to a query: her own query of that id, else one shared
        with her. Revoking her own query also closes its streams to her other own queries, until
        a grant of one of them lifts it."""
        admin(request, "grant.create" if body.sign == "+" else "grant.revoke", f"query:{_short(body.query)}")
        ts = _time(body.ts, "ts")
        until = _time(body.until, "until")
        if until is not None and body.sign == "-":
            raise ApiError(422, "until ends a grant: a revocation has none", field="until")
        entry = _grantee_query(service, body.query, body.user)
        request.state.object = f"query:{entry.ref}"
        try:
            if body.sign == "+":
                applied = service.server.grant(entry.internal, body.user, ts, until=until)
            else:
                applied = service.server.revoke(entry.internal, body.user, ts)
        except StreamwardenError as exc:  # the query is registered (checked above): an unknown user, a bad period
            raise ApiError(422, str(exc).splitlines()[0]) from None
        # no refresh: terminal switches read grants at every micro-batch, and the host's next poll
        # (within a second) starts or stops the pipelines the change concerns
        request.state.detail = _grant_detail(entry, body, applied)
        periods = access_periods(service.server.changes(), entry.registered, body.user)
        unlisted = {} if body.user in entry.registered.users else {
            "note": f"{body.user} is not listed for {entry.id}: the change is recorded, but she receives nothing "
                    "unless the query is registered for her"}
        return JSONResponse({"query": entry.id, "user": body.user, "sign": body.sign,
                             **({"owner": entry.owner} if entry.owner else {}),
                             "periods": periods_json(periods) if not unlisted else [], **unlisted},
                            status_code=201)

    @app.get("/v1/grants")
    def list_grants(request: Request) -> dict[str, Any]:
        admin(request, "grant.list", "grants")
        live = {c.line for c in service.server.changes()}
        return {"changes": [_change_json(service, c, c.line in live) for c in service.server.history()]}

    @app.put("/v1/actions/{name}")
    def put_action(name: str, body: ActionIn, request: Request) -> dict[str, Any]:
        admin(request, "action.update", f"action:{_short(name)}")
        problem = name_problem("action", name)
        if problem is not None:
            raise ApiError(422, problem)
        values: dict[str, Any] = {}
        for key in ("start", "end"):
            if key in body.model_fields_set:
                values[key] = _time(getattr(body, key), key)
        if "target" in body.model_fields_set:
            values["target"] = body.target
        if not values:
            raise ApiError(422, "say what to change: start, end or target")
        current = service.store.actions().get(name)
        start = values.get("start", current.start if current else None)
        end = values.get("end", current.end if current else None)
        if start is not None and end is not None and end < start:
            raise ApiError(422, "an action cannot end before it starts", field="end")
        try:
            service.store.set_action(name, **values)
        except StreamwardenError as exc:
            raise ApiError(404 if isinstance(exc, UnknownName) else 422, str(exc).splitlines()[0]) from None
        request.state.detail = {k: format_timestamp(v) if isinstance(v, datetime) else v for k, v in values.items()}
        action = service.store.actions()[name]
        return {"name": name, "start": action.start and format_timestamp(action.start),
                "end": action.end and format_timestamp(action.end), "target": action.target}

    @app.get("/v1/audit")
    def audit(request: Request, since: str | None = Query(None, max_length=64),
              principal: str | None = Query(None, max_length=256),
              limit: int = Query(1000, ge=1, le=10_000)) -> dict[str, Any]:
        admin(request, "audit.read", "audit")
        when = _time(since, "since")
        service.trail.flush()
        found = audit_records(service.store, when, principal)
        return {"records": [r.to_json() for r in found[-limit:]]}

    @app.get("/v1/network")
    def network(request: Request) -> dict[str, Any]:
        admin(request, "network.read", "network")
        pipelines = service.host.pipelines() if service.host is not None else []
        return {"pipelines": [
            {"name": _public_pipeline(p.name, p.query), "query": _public_name(p.query), "users": list(p.users),
             "streams": list(p.streams), "active": p.active,
             "batches": p.batches, "last_batch_ms": p.last_batch_ms, "input_rows": p.input_rows,
             "rows_delivered": {u: delivered_rows(service.output, u, p.query) for u in p.users},
             "failure": p.failure, "quarantined": p.quarantined, "last_quarantined": p.last_quarantined}
            for p in pipelines]}

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics(request: Request) -> PlainTextResponse:
        admin(request, "metrics.read", "metrics")
        return PlainTextResponse(_metrics_text(service), media_type="text/plain; version=0.0.4")

    # -- providers -------------------------------------------------------------------------------
    @app.post("/v1/streams/{stream}/records", status_code=201,
              openapi_extra=_raw_body("JSON lines, one record per line", "application/x-ndjson"))
    async def append(stream: str, request: Request) -> JSONResponse:
        """Append JSON-lines records to a stream, all or nothing (provider tokens)."""
        principal = await asyncio.to_thread(caller, request, "records.append", f"stream:{_short(stream)}")
        if principal.kind != "provider":
            raise forbidden("only a provider token of the stream may append records to it")
        if principal.stream != stream:
            raise forbidden(f"your token speaks for stream {principal.stream} only")
        catalog = await asyncio.to_thread(service.store.load)
        if stream not in catalog.streams or stream not in service.inputs:
            raise ApiError(404, f"stream {stream} takes no records here")
        body = await _body(request, MAX_BODY)
        latest = datetime.now(timezone.utc) + service.max_clock_skew  # no event time from the future
        # checking and the file's fsync run in a worker thread: the event loop keeps serving reads
        lines = await asyncio.to_thread(check_records, body, catalog.streams[stream], principal.key,
                                        keyed=principal.key is not None, latest=latest)
        await asyncio.to_thread(append_records, service.inputs[stream], lines)
        service.metrics.records(stream, len(lines))
        return JSONResponse({"stream": stream, "accepted": len(lines)}, status_code=201)

    return app


# -- pieces of the routes ------------------------------------------------------------------------
def _apply_catalog(service: Service, body: bytes, request: Request) -> dict[str, Any]:
    """A catalog an admin sent: validated (422 with the first error's position), stored, applied."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[:exc.start].count(b"\n") + 1
        raise ApiError(422, f"the catalog is not UTF-8 (byte 0x{body[exc.start]:02x})", line=line,
                       column=exc.start - body.rfind(b"\n", 0, exc.start)) from None
    try:
        catalog = load_catalog_text(text, "catalog")
    except SourceError as exc:
        raise ApiError(422, exc.message, line=exc.line, column=exc.column) from None
    except StreamwardenError as exc:
        message = str(exc).splitlines()[0]
        raise ApiError(422, message, **position_of(message)) from None
    request.state.detail = _catalog_changes(service.store, catalog)
    changes = service.store.save(catalog)
    service.refresh()
    return {"catalog": catalog.name, "streams": sorted(catalog.streams), "users": sorted(catalog.users),
            "policies": [p.id for p in catalog.policies], "actions_kept": list(changes.kept)}



def _grantee_query(service: Service, query: str, user: str) -> Entry:
    """The query an admin's grant names: ``user``'s own query ``query``, else the shared one
    (listed for her or not: a grant to an unlisted user is recorded and gives nothing). If
    she has an own query of the id of a shared one, 409: a user who names her own query like
    a shared one must not catch its grant (which on an own query lifts a revocation)."""
    try:
        entry = service.book.for_user(query, user)
    except ApiError:
        shared = service.server.registration(query) if name_problem("query id", query) is None else None
        if shared is None or shared.owner is not None:
            raise ApiError(404, f"{user[:64]} has no query {query[:64]!r}") from None
        return Entry(shared.id, shared.id, None, shared)
    shared = service.server.registration(query) if entry.owner is not None else None
    if shared is not None and shared.owner is None:
        raise ApiError(409, f"{user} has an own query {query!r} and a shared query {query!r} is registered: the "
                            f"change would be ambiguous (remove {user}'s own query first: DELETE "
                            f"/v1/queries/{query}?owner={user})")
    return entry


def _change_json(service: Service, change: AccessChange, live: bool) -> dict[str, Any]:
    """One change of the log as admins read it: public names, never internal ids."""
    shown: dict[str, Any] = {"seq": change.line, "ts": format_timestamp(change.ts), "user": change.user,
                             "sign": "+" if change.grant else "-", "live": live}
    if change.scope == STREAM:
        return {**shown, "stream": change.query, "scope": "own queries over the stream"}
    own = parse_own_id(change.query)
    if own is not None:
        return {**shown, "query": own[1], "owner": own[0]}
    return {**shown, "query": change.query}


# -- what the audit trail records of a change (request.state.detail) ----------------------------------
MAX_NAMES = 50  # names of one kind in a record's detail; more are counted


def _names(values: Any) -> list[str]:
    """At most MAX_NAMES names, then how many more (a detail stays far below the trail's 4096 characters)."""
    return capped_names(values, MAX_NAMES)


def _query_detail(entry: Entry) -> dict[str, Any]:
    """A registration or deletion: the query's id (as its caller names it), level and users."""
    return {"id": entry.id, "level": entry.registered.level, "users": _names(entry.registered.users)}


def _grant_detail(entry: Entry, body: GrantIn, applied: list[AccessChange]) -> dict[str, Any]:
    """A grant or revocation as applied: the grantee, the query (``owner/id`` for an own one),
    the sign, its start and a grant's end as recorded (``ts`` defaults to the time it was
    applied), and the streams an own query's change also opened or closed to her."""
    queried = [c for c in applied if c.scope != STREAM]
    start = queried[0] if queried else None
    end = queried[1] if body.until is not None and len(queried) > 1 else None
    streams = sorted({c.query for c in applied if c.scope == STREAM})
    return {"user": body.user, "sign": body.sign, "query": entry.ref,
            "ts": format_timestamp(start.ts) if start else body.ts,
            "until": format_timestamp(end.ts) if end else None, **({"streams": streams} if streams else {})}


def _catalog_changes(store: CatalogStore, after: Catalog) -> dict[str, Any]:
    """What replacing the stored catalog by ``after`` changes: the streams, roles, users,
    policies and actions it adds, removes or redefines (by name)."""
    try:
        before = store.load()
    except StreamwardenError:  # a stored catalog that no longer loads is replaced whole
        return {"catalog": after.name, "replaced": "the stored catalog could not be read"}
    return diff_catalogs(before, after).detail(limit=MAX_NAMES)


def _progress_fields(service: Service, user: str, query: str) -> str:
    """``,"network":"live","event_time":"..."`` for ``GET rows``: is the network still catching up,
    and how far has this query got (the user's status file, as the network last wrote it)."""
    fields: dict[str, str | None] = {}
    if service.host is not None:
        fields["network"] = service.host.state
    try:
        fields["event_time"] = read_status(service.output, user, query).get("event_time")
    except (OSError, ValueError):  # not reported yet
        fields["event_time"] = None
    return "".join(f",{json.dumps(k)}:{json.dumps(v)}" for k, v in fields.items())


def _summary(service: Service, entry: Entry, principal: Principal) -> dict[str, Any]:
    """A query as listed: a listed user sees their own row count, an admin everyone's."""
    return entry.summary(service.output, principal.name if principal.name in entry.registered.users else None)


def _status(service: Service, entry: Entry, user: str) -> dict[str, Any]:
    delivered = delivery_summary(service.output, user, entry.internal)
    status: dict[str, Any] = {"rows_delivered": delivered.rows, "last_batch": None}
    if delivered.last_batch is not None:
        status["last_batch"] = {"batch": delivered.last_batch, "rows": delivered.last_rows,
                                **({"at": format_timestamp(delivered.last_at)} if delivered.last_at else {})}
    try:
        access = read_status(service.output, user, entry.internal)
        status.update(receiving=access.get("receiving"), reason=access.get("reason") or None)
    except (OSError, ValueError):
        status.update(receiving=None, reason="the network has not reported on this query yet")
    status["grants"] = service.book.grants(entry, user)
    return status


async def _events(service: Service, query: str, cursor: int, request: Request, header: str | None,
                  principal: Principal, public: str) -> AsyncIterator[dict[str, str] | bytes]:
    """A user's rows of ``query`` (its internal id) as events. Her token and her query are checked
    again before every page of rows is sent, and every few seconds while none come: a revoked
    token, an expired one or a removed query ends the stream at once, backlog or not. Between
    pages it waits for a delivery to her query (:mod:`streamwarden.service.wakeups`), or
    ``STREAM_POLL`` seconds at most."""
    delivered = service.wakeups.watch(principal.name, query)
    try:
        async for event in _pages(service, query, cursor, request, header, principal, public, delivered):
            yield event
    finally:
        service.wakeups.unwatch(principal.name, query, delivered)


async def _pages(service: Service, query: str, cursor: int, request: Request, header: str | None,
                 principal: Principal, public: str, delivered: asyncio.Event) -> AsyncIterator[dict[str, str] | bytes]:
    """:func:`_events`' loop: a page, the checks, then a wait for the next delivery."""
    checked = time.monotonic()
    while True:
        delivered.clear()  # before reading: a delivery during the read wakes the next wait at once
        page = await _rows_page(service, principal.name, query, after=cursor, limit=500)
        if page.lines or time.monotonic() - checked > REAUTH_SECONDS:
            checked = time.monotonic()
            ended = await _still_allowed(service, header, principal, public)
            if ended is not None:
                yield {"event": "end", "data": json.dumps({"error": ended})}
                return
        if page.lines:  # one write for the page: a send per row cost more than the row
            yield b"".join(ServerSentEvent(row, id=str(cursor + i), event="row").encode()
                           for i, row in enumerate(page.lines, start=1))
        cursor = page.next
        if page.lines:
            continue
        if await request.is_disconnected():
            return
        try:
            await asyncio.wait_for(delivered.wait(), STREAM_POLL)
        except asyncio.TimeoutError:  # no delivery announced (a network in another process): look again
            pass


async def _still_allowed(service: Service, header: str | None, principal: Principal, public: str) -> str | None:
    """Why an SSE stream must end now (None: it may go on): what is kept answers at once, the
    store is asked off the loop."""
    again = service.auth.kept(header) or await asyncio.to_thread(service.auth.principal, header)
    if again is None or again.kind != "user" or again.name != principal.name:
        return "your token is no longer valid"
    if service.book.find_kept(again, public) is None:
        try:
            await asyncio.to_thread(service.book.find, again, public)
        except ApiError:
            return f"you have no query {public!r} any more"
    return None


async def _rows_page(service: Service, user: str, query: str, *, after: int, limit: int) -> Page:
    """A page of ``user``'s rows: on the loop when it is quick (a poller following the query's end),
    else in a worker thread (the log parsed afresh, a page over many batches)."""
    page = read_rows_quickly(service.output, user, query, after=after, limit=limit)
    if page is None:
        page = await asyncio.to_thread(read_rows, service.output, user, query, after=after, limit=limit)
    return page


def _outcome(catalog: Any, body: QueryIn, user: str) -> dict[str, Any]:
    try:
        return explanation(explain_for(catalog, RegisteredQuery(body.id, (user,), body.query, body.level), user))
    except ApiError as exc:
        return {"denied": exc.message}


def _policies(*rewritings: Any) -> tuple[str, ...]:
    return tuple(sorted({p for r in rewritings for g in r.deployed for p in g.policies}))[:1000]


def _metrics_text(service: Service) -> str:
    m = service.metrics
    requests, records_in = m.snapshot()
    delivered: dict[tuple[str, ...], float] = {}
    active: dict[tuple[str, ...], float] = {}
    changes = service.server.changes()
    for q in service.server.registrations():
        name = _public_name(q.id)
        for user in q.users:
            delivered[(name, user)] = delivered_rows(service.output, user, q.id)
            periods = access_periods(changes, q, user)
            active[(name, user)] = 1.0 if periods and periods[-1][1] is None else 0.0
    text = [m.counter("streamwarden_requests_total", "HTTP requests by action and outcome.", requests,
                      ("action", "outcome")),
            m.counter("streamwarden_records_in_total", "Records providers appended, by stream.", records_in,
                      ("stream",)),
            m.counter("streamwarden_rows_out_total", "Rows delivered, by query and user.", delivered,
                      ("query", "user")),
            m.counter("streamwarden_grant_active", "1 when the user's grant for the query is open now.", active,
                      ("query", "user"), kind="gauge")]
    if service.host is not None:
        pipelines = service.host.pipelines()
        names = {p.name: _public_pipeline(p.name, p.query) for p in pipelines}
        text.append(m.counter("streamwarden_pipeline_batches_total", "Micro-batches run, by pipeline.",
                              {(names[p.name],): p.batches for p in pipelines}, ("pipeline",)))
        text.append(m.counter("streamwarden_pipeline_batch_seconds", "The last micro-batch's duration.",
                              {(names[p.name],): (p.last_batch_ms or 0) / 1000 for p in pipelines}, ("pipeline",),
                              kind="gauge"))
        text.append(m.counter("streamwarden_pipeline_input_rows", "Rows the last micro-batch read.",
                              {(names[p.name],): p.input_rows or 0 for p in pipelines}, ("pipeline",), kind="gauge"))
        withheld: dict[tuple[str, ...], float] = {}
        for p in pipelines:
            for user, count in p.withheld.items():
                key = (_public_name(p.query), user)
                withheld[key] = withheld.get(key, 0) + count
        text.append(m.counter("streamwarden_records_quarantined_total",
                              "Broken input records a pipeline dropped (quarantined), since the service started.",
                              {(names[p.name],): p.quarantined for p in pipelines}, ("pipeline",)))
        text.append(m.counter("streamwarden_rows_withheld_total",
                              "Rows a query's pipeline emitted that the terminal switch withheld from a user (outside "
                              "their grants), since the service started.", withheld, ("query", "user")))
    return "".join(text)


def _public_name(internal: str) -> str:
    """A query as operators name it: ``owner/id`` for a user's own query, else its id."""
    own = parse_own_id(internal)
    return internal if own is None else f"{own[0]}/{own[1]}"


def _public_pipeline(name: str, internal: str) -> str:
    """A pipeline as operators name it: its query's public name and its fingerprint's start."""
    return _public_name(internal) + name.removeprefix(internal)


def _raw_body(what: str, media: str) -> dict[str, Any]:
    """The OpenAPI description of a body a route reads itself (text, not a JSON model)."""
    return {"requestBody": {"description": what, "required": True, "content": {
        media: {"schema": {"type": "string"}}, "text/plain": {"schema": {"type": "string"}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}


def _cursor(text: str | None) -> int:
    if text is None or text == "":
        return 0
    if len(text) > len(str(MAX_CURSOR)) or not text.isascii() or not text.isdigit() or int(text) > MAX_CURSOR:
        raise ApiError(422, "after must be a cursor the service returned (next, or an event's id)", field="after")
    return int(text)


def _time(text: str | None, what: str) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_timestamp(text)
    except (ValueError, OverflowError):
        raise ApiError(422, f"{what} must be an ISO-8601 timestamp such as 2026-03-01T10:00:00Z", field=what) from None


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the body is larger than {limit} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _short(text: str) -> str:
    """A name for the audit trail: printable, one line, at most 100 characters."""
    cleaned = "".join(c if c.isprintable() else "?" for c in text[:100])
    return cleaned or "?"


# -- errors and the audit trail ---------------------------------------------------------------
def _errors(app: FastAPI, service: Service) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers or None)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI checks a body before the route runs: an anonymous caller learns nothing of the schema
        principal = await asyncio.to_thread(service.auth.principal, request.headers.get("authorization"))
        if principal is None:
            return JSONResponse(unauthenticated().body(), status_code=401)
        request.state.principal = principal.label  # the route never ran: its audit record names the caller here
        first = exc.errors()[0] if exc.errors() else {}
        where = [str(p) for p in first.get("loc", ()) if p != "body"]
        message = str(first.get("msg", "invalid request")).rstrip(".")
        field_name = ".".join(where) or None
        text = f"{field_name}: {message}" if field_name else message
        if first.get("type") == "json_invalid":
            text = "the body is not JSON"
        return JSONResponse(ApiError(422, text[:300], field=field_name).body(), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = {404: "no such endpoint", 405: "this endpoint does not take that method"}.get(
            exc.status_code, str(exc.detail))
        return JSONResponse({"error": message}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        rid = getattr(request.state, "request_id", "-")
        log.error("request %s failed: %s", rid, type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
        # Starlette answers a crash outside the middlewares: name the request here as well
        return JSONResponse({"error": f"the service failed on this request (request {rid}); it is in the log",
                             "request_id": rid}, status_code=500, headers={"X-Request-Id": rid})


_OUTCOMES = {401: "unauthenticated", 403: "denied", 404: "not-found", 405: "refused", 409: "conflict",
             413: "refused", 422: "refused", 429: "throttled", 503: "busy"}


#: Methods recorded by name (``http.get``); any other is ``http.other``, the method itself in the detail.
_METHODS = frozenset({"get", "head", "post", "put", "patch", "delete", "options", "trace", "connect"})
#: What a request gets while its audit record cannot be written (it is served by no route).
UNAUDITED = "the service cannot write its audit trail now, so it answers no requests until it can: try again later"


class _Audited:
    """ASGI middleware: a request id for every request, and its audit record (outcome by status).

    A route names what it did in ``request.state``: ``action``, ``object``, ``principal``,
    ``policies``, and ``detail`` (a small JSON object merged into the record's detail, e.g.
    a grant's user and period). While the trail cannot write (:meth:`AuditTrail.problem`),
    every request but ``/health`` is answered 503 and served by no route.
    """

    def __init__(self, app: ASGIApp, service: Service):
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") == "/health":
            await self.app(scope, receive, send)
            return
        request_id = secrets.token_hex(8)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        if self.service.trail.problem() is not None:  # fail closed: nothing is served unaudited
            await self._refuse(send, request_id)
            return
        done = False

        async def sent(message: Message) -> None:
            nonlocal done
            if message["type"] == "http.response.start" and not done:
                done = True
                _secure_headers(message, request_id)
                if "action" not in state and "principal" not in state:  # no route checked the token: name its holder
                    state["principal"] = await self._holder(scope)
                self._record(scope, state, message["status"], request_id)
            await send(message)

        try:
            await self.app(scope, receive, sent)
        except Exception:
            if not done:
                self._record(scope, state, 500, request_id)
            raise

    async def _refuse(self, send: Send, request_id: str) -> None:
        self.service.trail.refused()  # counted, and recorded once the trail writes again
        self.service.metrics.request("audit.unavailable", "refused")
        body = json.dumps({"error": UNAUDITED, "request_id": request_id}).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"retry-after", b"5")]
        start: Message = {"type": "http.response.start", "status": 503, "headers": headers}
        _secure_headers(start, request_id)
        await send(start)
        await send({"type": "http.response.body", "body": body})

    async def _holder(self, scope: Scope) -> str | None:
        """Who a request's token speaks for, when no route asked (an unknown path or method, the
        console): every record of an authenticated request names its principal."""
        header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"authorization"), None)
        if header is None:
            return None
        try:
            principal = await asyncio.to_thread(self.service.auth.principal, header)
        except Exception:  # the store failed: the record says anonymous, the answer is already decided
            return None
        return None if principal is None else principal.label

    def _record(self, scope: Scope, state: dict[str, Any], status: int, request_id: str) -> None:
        given = str(scope.get("method", "GET"))
        method = given.lower() if given.lower() in _METHODS else "other"
        action = state.get("action") or ("console.read" if scope.get("path") == "/" else f"http.{method}")
        target = state.get("object") or _short(str(scope.get("path", "-")))
        outcome = "ok" if status < 400 else _OUTCOMES.get(status, "error")
        principal = state.get("principal") or "anonymous"
        extra = state.get("detail")
        detail = {**(extra if isinstance(extra, dict) else {}), "status": status,
                  "method": method if method != "other" else clean_text(given, 32)}
        self.service.metrics.request(action, outcome)
        poll = any(k == b"x-streamwarden-poll" and v == b"1" for k, v in scope.get("headers", ()))
        self.service.trail.record(principal, action, target, outcome, policies=state.get("policies", ()),
                                  request_id=request_id, detail=detail, poll=poll)


def _secure_headers(message: Message, request_id: str) -> None:
    headers = MutableHeaders(scope=message)
    headers.append("X-Request-Id", request_id)
    headers.append("X-Content-Type-Options", "nosniff")
    headers.append("Cache-Control", "no-store")  # rows and explanations are one user's: no cache keeps them


__all__ = ["Service", "create_app"]
