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

and its audit trail must still verify afterwards.
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

    run()
    service.trail.flush()
    assert verify(service.store).ok


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
