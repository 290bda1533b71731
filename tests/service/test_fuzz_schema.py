"""Fuzz every operation of the service's OpenAPI schema (schemathesis over the ASGI app, no Spark).

Each operation gets its own fresh service (the ``service`` fixture) holding a little state
worth reaching: ann's own query ``q1`` with delivered rows, and a query shared with ann and
bob. Cases are schemathesis's positive and negative ones, sent with the token of an
alternating caller (users, the admin, providers, and broken or missing tokens); path
parameters are now and then swapped for names that exist, and the two routes that read a
raw body (``PUT /v1/catalog``, ``POST /v1/streams/{stream}/records``) get bodies through a
request body added to the schema here (FastAPI cannot describe a body the route reads
itself). Whatever the case, the service must answer:

* never a 5xx;
* an error as JSON ``{"error": "a string", ...}``;
* no traceback (``Traceback``, ``File "``) and no bearer token in any body;
* an ``X-Request-Id`` on every answer;

and its audit trail must still verify afterwards, each record of a request made with a
valid token naming that token's holder.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from streamwarden.catalog.audit import verify
from streamwarden.service.queries import own_id

from .conftest import deliver

Q = "SELECT sensor, value FROM Readings"

#: Every operation the schema documents: test_the_schema_documents_these_operations keeps this
#: list honest, so a new route is fuzzed (or fails that test) rather than silently skipped.
OPERATIONS = [
    "GET /v1/me",
    "GET /v1/streams",
    "POST /v1/queries",
    "GET /v1/queries",
    "GET /v1/queries/{query_id}",
    "DELETE /v1/queries/{query_id}",
    "GET /v1/queries/{query_id}/rows",
    "GET /v1/queries/{query_id}/stream",
    "GET /v1/catalog",
    "PUT /v1/catalog",
    "GET /v1/grants",
    "POST /v1/grants",
    "PUT /v1/actions/{name}",
    "GET /v1/audit",
    "GET /v1/network",
    "GET /metrics",
    "POST /v1/streams/{stream}/records",
]
STREAM = "GET /v1/queries/{query_id}/stream"
CALLERS = ["ann", "bob", "eve", "root", "provider7", "readings"]
FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])

# -- the schema ------------------------------------------------------------------------------------
def _schema(app: Any) -> Any:
    """The app's own OpenAPI document (the routes that read their bodies raw describe them too)."""
    loaded = schemathesis.openapi.from_dict(copy.deepcopy(app.openapi()))
    loaded.app = app  # cases are sent to the app in-process, as from_asgi does
    return loaded


# -- who calls ------------------------------------------------------------------------------------
_ASCII = st.characters(min_codepoint=0x21, max_codepoint=0x7E)


def _favoured(label: str) -> list[str]:
    """The callers an operation is meant for: they get past its checks of who may call it."""
    if label.startswith("POST /v1/streams"):
        return ["provider7", "readings"]
    if label == "GET /v1/me":
        return CALLERS
    if "/v1/queries" in label:
        return ["ann", "bob", "root"]
    return ["root"]


def _authorization(tokens: dict[str, str], label: str) -> st.SearchStrategy[str | None]:
    """An Authorization header (None: none): a holder's token, or something that is not one."""
    anyone = st.sampled_from(CALLERS).map(lambda who: f"Bearer {tokens[who]}")
    meant = st.sampled_from(_favoured(label)).map(lambda who: f"Bearer {tokens[who]}")
    tampered = st.sampled_from(CALLERS).map(
        lambda who: f"Bearer {tokens[who][:-2]}{'ZZ' if tokens[who][-2:] != 'ZZ' else 'YY'}")
    bad = st.one_of(
        tampered,
        st.just(None),
        st.just("Bearer"),
        st.just("Basic YW5uOmFubg=="),
        st.text(_ASCII, min_size=1, max_size=80).map(lambda t: f"Bearer {t}"),
        st.text(_ASCII, min_size=1, max_size=40),
        st.sampled_from(CALLERS).map(lambda who: f"Token {tokens[who]}"),
    )
    # one_of does not weigh its branches evenly: choose the kind of caller by number
    return st.integers(0, 9).flatmap(lambda n: meant if n < 5 else anyone if n < 8 else bad)


#: Names that exist, for path parameters: fuzzed text alone would hardly ever reach a real query.
KNOWN_PATH = {
    "query_id": ["q1", own_id("ann", "q1"), "shared1", "nope"],
    "stream": ["Vitals", "Readings", "Nope"],
}
#: Values that get a JSON body past its schema to the route's own checks.
KNOWN_FIELDS = {
    "query": [Q, "SELECT FROM", "SELECT patient, pulse FROM Vitals", "SELECT * FROM Nope"],
    "id": ["q1", "q2", "shared1", own_id("bob", "x")],
    "users": [["ann", "bob"], ["eve"], ["nobody"], []],
    "user": ["ann", "bob", "nobody"],
    "level": ["[1, ⊥]", "nonsense"],
    "ts": ["2026-03-01T10:00:00Z", "10000-01-01T00:00:00Z", "yesterday"],
    "until": ["2026-03-02T10:00:00Z", "0001-01-01T00:00:00Z"],
}

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False),
                    st.text(max_size=20), st.sampled_from(["2026-03-01T10:00:00Z", "10000-01-01T00:00:00Z", "*",
                                                           "Vitals", "Doctor", "sp"]))
_VITAL = {"ts": "2026-03-01T10:00:00Z", "patient": 7, "ward": "w1", "pulse": 80}
_READING = {"ts": "2026-03-01T10:00:00Z", "sensor": 1, "site": "s", "value": 1.5}
_SP = {"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor",
       "ts": "2026-03-01T09:00:00Z", "sn": 1, "patient": 7}
_ATTRIBUTES = sorted(set(_VITAL) | set(_READING) | set(_SP) | {"seq", "other"})


@st.composite
def _near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record of either stream (or SP), with a few fields changed, added or removed."""
    record = dict(draw(st.sampled_from([_VITAL, _READING, _SP])))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(_ATTRIBUTES))
        if draw(st.booleans()):
            record[key] = draw(_VALUES)
        else:
            record.pop(key, None)
    return record


_RECORDS = st.lists(st.one_of(_near_valid(), st.dictionaries(st.sampled_from(_ATTRIBUTES), _VALUES, max_size=6)),
                    min_size=0, max_size=5).map(lambda records: "".join(json.dumps(r) + "\n" for r in records))


# -- the checks ------------------------------------------------------------------------------------
def check_answer(response: Any, secrets: list[str], where: str) -> None:
    status = response.status_code
    text = response.content.decode("utf-8", errors="replace")
    assert status < 500, f"{where}: {status} {text[:500]}"
    assert "Traceback" not in text and 'File "' not in text, f"{where}: a traceback in {text[:500]}"
    for secret in secrets:
        assert secret not in text, f"{where}: the body holds a bearer token"
    assert response.headers.get("x-request-id"), f"{where}: no X-Request-Id"
    if status >= 400:
        try:
            body = json.loads(text)
        except ValueError:
            raise AssertionError(f"{where}: the {status} body is not JSON: {text[:300]}") from None
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], \
            f"{where}: the {status} body has no error string: {text[:300]}"


@pytest.fixture
def seeded(client, tokens, service):
    """ann's own q1 with rows, and shared1 for ann and bob (granted to bob)."""
    made = client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    assert made.status_code == 201, made.text
    shared = client.post("/v1/queries", json={"id": "shared1", "query": Q, "users": ["ann", "bob"]},
                         headers=tokens.header("root"))
    assert shared.status_code == 201, shared.text
    granted = client.post("/v1/grants", json={"query": "shared1", "user": "bob", "sign": "+"},
                          headers=tokens.header("root"))
    assert granted.status_code == 201, granted.text
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":2.5}', '{"sensor":2,"value":3.5}'])
    return service


def test_the_schema_documents_these_operations(client):
    schema = _schema(client.app)
    labels = [result.ok().label for result in schema.get_all_operations()]
    assert sorted(labels) == sorted(OPERATIONS)


@pytest.mark.parametrize("label", OPERATIONS)
def test_fuzz_operation(label, client, tokens, seeded):
    service = seeded
    schema = _schema(client.app)
    operation = schema.find_operation_by_label(label)
    assert operation is not None, label
    secrets = list(tokens.values())
    sent: list[tuple[str, str | None]] = []
    cases = st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))

    @FUZZ
    @given(case=cases, authorization=_authorization(tokens, label), data=st.data())
    def run(case: Any, authorization: str | None, data: st.DataObject) -> None:
        parameters = case.path_parameters or {}
        for name in parameters:
            if name in KNOWN_PATH and data.draw(st.booleans(), label=f"known {name}"):
                parameters[name] = data.draw(st.sampled_from(KNOWN_PATH[name]), label=name)
        if isinstance(case.body, dict):
            for name in case.body:
                if name in KNOWN_FIELDS and data.draw(st.booleans(), label=f"known {name}"):
                    case.body[name] = data.draw(st.sampled_from(KNOWN_FIELDS[name]), label=name)
        if label.startswith("POST /v1/streams") and data.draw(st.booleans(), label="records"):
            case.body = data.draw(_RECORDS, label="records")
            case.media_type = "text/plain"
        if label == STREAM:
            # the stream of a query the caller has never ends: that one case is test_contract's
            principal = service.auth.principal(authorization)
            if principal is not None and principal.kind == "user" and \
                    parameters.get("query_id") in {e.id for e in service.book.visible(principal)}:
                reject()
        headers = {} if authorization is None else {"Authorization": authorization}
        response = case.call(headers=headers)
        where = f"{case.method} {case.formatted_path} {case.query!r}"
        check_answer(response, secrets, where)
        case.validate_response(response, checks=[not_a_server_error], headers=headers)
        request_id = response.headers["x-request-id"]
        sent.append((request_id[0] if isinstance(request_id, list) else request_id, authorization))

    run()
    service.trail.flush()
    assert verify(service.store).ok
    _check_trail(service, _expected_principals(service, sent))  # every authenticated request names its caller


# -- odd methods, token-shaped ids, provider SP fields; the audit trail names every caller (issue 24) --
import asyncio  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from streamwarden.catalog.audit import records  # noqa: E402

#: Valid names shaped like a token (64 and 41 characters): refused as ids, redacted in the trail.
TOKEN_IDS = ["swt_0123456789abcdef_" + "A" * 43, "swt_0123456789abcdef_" + "B" * 20]
# Token-shaped path and body ids join the names every fuzzed operation may draw.
KNOWN_PATH["query_id"] = [*KNOWN_PATH["query_id"], *TOKEN_IDS]
KNOWN_PATH["name"] = [*KNOWN_PATH.get("name", []), "a1", TOKEN_IDS[1]]
for _field in ("id", "query", "user"):
    KNOWN_FIELDS[_field] = [*KNOWN_FIELDS[_field], *TOKEN_IDS]

#: SP fields a provider may send wrong: null, the wrong type, huge, out of range, a lone surrogate.
_SP_ODD = st.sampled_from([None, [], {}, ["Doctor", None], "", "*", "Doctor,Nurse", 1e308, -1, 2 ** 64, "\ud800",
                           "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "not a time", True])


@st.composite
def _odd_sp(draw: st.DrawFn) -> dict[str, Any]:
    """A provider SP of Vitals with one to three fields (or punctuation fields) set to something odd."""
    record = dict(_SP)
    fields = sorted(set(_SP) | {"sp_ts", "sp_csn", "kind"})
    for key in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True)):
        record[key] = draw(_SP_ODD)
    return record


_RECORDS = st.one_of(_RECORDS, st.lists(st.one_of(_odd_sp(), st.just(_VITAL)), min_size=1, max_size=4).map(
    lambda records_: "".join(json.dumps(r) + "\n" for r in records_)))

#: Methods no route takes: long, with '|', lower-case, unknown (the ASGI scope keeps their case).
_TCHAR = st.characters(codec="ascii", categories=["L", "Nd"], include_characters="!#$%&'*+-.^_`|~")
ODD_METHODS = st.one_of(
    st.sampled_from(["X" * 70, "X|Y", "x|y", "get", "post", "delete", "Get", "FOO", "PROPFIND", "M-SEARCH", "A" * 300]),
    st.text(_TCHAR, min_size=1, max_size=80),
).filter(lambda m: m not in {"GET", "HEAD", "POST", "PUT", "DELETE"})  # those are the schema's cases


@dataclass
class _Answer:
    status_code: int
    headers: dict[str, str]
    content: bytes


def _send(app: Any, method: str, path: str, authorization: str | None, body: bytes = b"") -> _Answer:
    """One request straight to the ASGI app, the method exactly as given (HTTP clients upper-case it)."""
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    headers = [] if authorization is None else [(b"authorization", authorization.encode("latin-1"))]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return _Answer(start["status"], {k.decode().lower(): v.decode("latin-1") for k, v in start["headers"]}, content)


#: Every path of the schema, with its parameters filled from the names above.
PATHS = sorted({label.split(" ", 1)[1] for label in OPERATIONS} | {"/", "/health", "/nowhere", "/v1/queries/x/y"})


def _expected_principals(service: Any, sent: list[tuple[str, str | None]]) -> dict[str, str]:
    """The principal each request's record must name (by request id): its token's holder, if any."""
    expected = {}
    for request_id, authorization in sent:
        principal = service.auth.principal(authorization)
        if principal is not None:
            expected[request_id] = principal.label
    return expected


def _check_trail(service: Any, expected: dict[str, str]) -> None:
    """The trail verifies, holds no token, and each authenticated request's record names its principal."""
    assert service.trail.flush(timeout=60) and service.trail.problem() is None
    result = verify(service.store)
    assert result.ok, result.message
    found = {r.request_id: r for r in records(service.store)}
    for request_id, label in expected.items():
        assert request_id in found, f"request {request_id} has no audit record"
        assert found[request_id].principal == label, (found[request_id].to_json(), label)
    text = json.dumps([r.to_json() for r in found.values()])
    assert not any(token_id in text for token_id in TOKEN_IDS)


def test_fuzz_odd_methods_on_every_path(client, tokens, seeded):
    service = seeded
    secrets = list(tokens.values())
    sent: list[tuple[str, str | None]] = []

    @FUZZ
    @given(method=ODD_METHODS, path=st.sampled_from(PATHS), authorization=_authorization(tokens, "GET /v1/me"),
           data=st.data())
    def run(method: str, path: str, authorization: str | None, data: st.DataObject) -> None:
        for name, values in KNOWN_PATH.items():
            if "{" + name + "}" in path:
                path = path.replace("{" + name + "}", data.draw(st.sampled_from(values), label=name))
        answer = _send(client.app, method, path, authorization, b'{"id": "q9"}')
        if path == "/health":  # a probe's path: neither audited nor given a request id
            assert answer.status_code in (200, 405) and b"Traceback" not in answer.content, answer
            return
        check_answer(answer, secrets, f"{method[:40]} {path}")
        sent.append((answer.headers["x-request-id"], authorization))

    run()
    _check_trail(service, _expected_principals(service, sent))


# -- issue 24: provider records with SP fields, numbers beyond a double, lone surrogates ----------------
_STAMPED_VITAL = {**_VITAL, "sp_ts": "2026-03-01T09:00:00Z", "sp_csn": 1}  # a tuple under _SP's policy
_STAMPED_VITAL_LINE = json.dumps(_STAMPED_VITAL)
#: JSON tokens json.dumps would not write (1e400 is infinity to Python), and text that is not a character.
_RAW = ["1e400", "-1e400", "NaN", "Infinity", "1.0", "1E2", "9" * 400, "-0", '"\\ud800"', '"x\\udfff"',
        '"\\ud83d\\ude00"', '"Doctor\\u0000"', '["Doctor"]', '{"a": 1}', "null", "true", '""', '"{Doctor,"',
        '"\'*\'"', '"2026-03-01T09:00:00+01:00"', '"9999-12-31T23:59:59Z"', "4097", "0", str(2 ** 31)]


@st.composite
def _provider_line(draw: st.DrawFn, stream: str) -> str:
    """One record of ``stream`` (or an SP of Vitals), with one field (sometimes two) set to a raw hostile token."""
    base = draw(st.sampled_from([_STAMPED_VITAL, _SP] if stream == "Vitals" else [_READING]))
    record = {k: json.dumps(v) for k, v in base.items()}
    for _ in range(draw(st.sampled_from([1, 1, 1, 2]))):
        record[draw(st.sampled_from(sorted(base) + ["seq", "other"]))] = draw(st.sampled_from(_RAW))
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in record.items()) + "}"


def test_fuzz_provider_records_with_crafted_tokens(client, tokens, service):
    """Whatever a provider sends: 201, 403 or 422 (never a 5xx), an error as one JSON sentence, and
    what is accepted is written as UTF-8 the gateway itself accepts again unchanged (canonical)."""
    from streamwarden.service.providers import check_records

    secrets = list(tokens.values())
    holders = {"Vitals": "provider7", "Readings": "readings"}

    @FUZZ
    @given(data=st.data(), stream=st.sampled_from(sorted(holders)))
    def run(data: st.DataObject, stream: str) -> None:
        lines = [_STAMPED_VITAL_LINE if stream == "Vitals" else json.dumps(_READING),
                 data.draw(_provider_line(stream), label="line 2")]
        folder = service.inputs[stream]
        before = set(folder.iterdir()) if folder.exists() else set()
        answer = client.post(f"/v1/streams/{stream}/records", content="\n".join(lines),
                             headers=tokens.header(holders[stream]))
        check_answer(answer, secrets, f"POST {stream} {lines}")
        assert answer.status_code in (201, 403, 422), answer.text
        if answer.status_code != 201:
            assert answer.json().get("line") == 2, answer.text  # the good first line is never the fault
        added = set(folder.iterdir()) - before if folder.exists() else set()
        assert len(added) == (answer.status_code == 201), added
        for path in added:
            written = path.read_bytes().decode("utf-8").splitlines()
            catalog = service.store.load()
            assert check_records("\n".join(written).encode("utf-8"), catalog.streams[stream], None) == written

    run()
    service.trail.flush()
    assert verify(service.store).ok
