"""An attacker's tests of ``streamwarden serve`` (the HTTP contract without Spark).

Each test is one attack and what the service must answer: forged and bent JWTs, odd
``Authorization`` headers, probing for other users' queries, cursor abuse, provider
records that speak for someone else or would break the engine, hostile catalogs, and
registrations with hostile ids. Behind all of them: never a 5xx, an error is one JSON
sentence, nothing is half-done (no new input file, no changed catalog), the audit trail
verifies and holds no token, and a revoked token stops working at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any, Iterator

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from fastapi.testclient import TestClient

from streamwarden.catalog.audit import records, verify
from streamwarden.catalog.identity import create_token, revoke_tokens
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore
from streamwarden.service import app as app_module
from streamwarden.service.app import Service, create_app
from streamwarden.service.queries import own_id
from streamwarden.service.server import ServeOptions, open_service

from .conftest import CATALOG, deliver

Q = "SELECT sensor, value FROM Readings"
ISSUER = "https://issuer.example"
AUDIENCE = "streamwarden"
KID = "k1"
GOOD_VITAL = ('{"ts": "2026-03-01T10:00:00Z", "patient": 7, "ward": "w1", "pulse": 80, '
              '"sp_ts": "2026-03-01T09:00:00Z", "sp_csn": 1}')  # sent under SP7's policy
GOOD_READING = '{"ts": "2026-03-01T10:00:00Z", "sensor": 1, "site": "s1", "value": 2.5}'
SP7 = ('{"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor", '
       '"ts": "2026-03-01T09:00:00Z", "sn": 1, "patient": 7}')


def assert_error(answer: Any, status: int | tuple[int, ...]) -> dict[str, Any]:
    """The answer has this status and is one JSON error sentence (no traceback); its body."""
    expected = (status,) if isinstance(status, int) else status
    assert answer.status_code in expected, (answer.status_code, answer.text[:500])
    body = answer.json()
    assert isinstance(body.get("error"), str) and body["error"] and "\n" not in body["error"], body
    assert "Traceback" not in answer.text and 'File "' not in answer.text
    return body


# -- JWTs of one issuer ---------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _segment(value: dict[str, Any]) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode("utf-8"))


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    """The issuer's RSA key, and an attacker's of the same size."""
    issuer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {"issuer": issuer, "other": other}


@pytest.fixture
def jwks_path(tmp_path: Path, keys: dict[str, Any]) -> Path:
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(keys["issuer"].public_key(), as_dict=True)
    jwk.update(kid=KID, use="sig", alg="RS256")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}), encoding="utf-8")
    return path


@pytest.fixture
def jwt_service(tmp_path: Path, store_url: str, jwks_path: Path) -> Iterator[Service]:
    options = ServeOptions(store_url=store_url, output_dir=str(tmp_path / "out"),
                           inputs={"Vitals": str(tmp_path / "in" / "Vitals")},
                           jwks=str(jwks_path), issuer=ISSUER, audience=AUDIENCE)
    opened = open_service(options)
    assert opened.auth.issuer is not None and opened.auth.issuer.issuer == ISSUER
    yield opened
    opened.trail.close()


@pytest.fixture
def jwt_client(jwt_service: Service) -> Iterator[TestClient]:
    with TestClient(create_app(jwt_service), raise_server_exceptions=False) as c:
        yield c


def claims(**changes: Any) -> dict[str, Any]:
    """Claims the issuer would sign for ann, with ``changes`` (a value None removes the claim)."""
    now = int(time.time())
    base: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ann", "iat": now, "exp": now + 600}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def signed(keys: dict[str, Any], payload: dict[str, Any], *, key: str = "issuer", kid: Any = KID,
           **header: Any) -> str:
    return jwt.encode(payload, keys[key], algorithm="RS256", headers={"kid": kid, **header})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_jwt_valid_rs256_token_of_a_declared_user_is_accepted(jwt_client, keys):
    token = signed(keys, claims())
    answer = jwt_client.get("/v1/queries", headers=bearer(token))
    assert answer.status_code == 200, answer.text
    made = jwt_client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=bearer(token))
    assert made.status_code == 201, made.text
    assert [q["id"] for q in jwt_client.get("/v1/queries", headers=bearer(token)).json()["queries"]] == ["q1"]
    assert_error(jwt_client.get("/v1/catalog", headers=bearer(token)), 403)  # a user, not an admin


@pytest.mark.parametrize("roles,admin", [
    (["streamwarden-admin"], True),
    (["viewer", "streamwarden-admin"], True),
    (None, False),
    ([], False),
    (["viewer"], False),
    ("streamwarden-admin", False),  # a string, not a list of roles
    (["Streamwarden-Admin"], False),
    ({"streamwarden-admin": True}, False),
])
def test_jwt_admin_only_with_the_admin_role(jwt_client, keys, roles, admin):
    token = signed(keys, claims(sub="root", roles=roles))
    answer = jwt_client.get("/v1/catalog", headers=bearer(token))
    if admin:
        assert answer.status_code == 200, answer.text
    else:
        assert_error(answer, 403)


def _forged(keys: dict[str, Any], jwks_path: Path, kind: str) -> str:
    if kind == "alg none":
        return f"{_segment({'alg': 'none', 'typ': 'JWT', 'kid': KID})}.{_segment(claims())}."
    if kind == "alg none, signature kept":
        valid = signed(keys, claims())
        return f"{_segment({'alg': 'none', 'kid': KID})}.{_segment(claims())}.{valid.split('.')[2]}"
    if kind == "HS256 with the public key as secret":
        pem = keys["issuer"].public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo)
        signing_input = f"{_segment({'alg': 'HS256', 'typ': 'JWT', 'kid': KID})}.{_segment(claims())}"
        mac = hmac.new(pem, signing_input.encode("ascii"), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(mac)}"
    if kind == "HS256 with the JWKS as secret":
        signing_input = f"{_segment({'alg': 'HS256', 'kid': KID})}.{_segment(claims())}"
        mac = hmac.new(jwks_path.read_bytes(), signing_input.encode("ascii"), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(mac)}"
    if kind == "wrong issuer":
        return signed(keys, claims(iss="https://evil.example"))
    if kind == "issuer with a trailing slash":
        return signed(keys, claims(iss=ISSUER + "/"))
    if kind == "wrong audience":
        return signed(keys, claims(aud="someone-else"))
    if kind == "no audience":
        return signed(keys, claims(aud=None))
    if kind == "no issuer":
        return signed(keys, claims(iss=None))
    if kind == "expired":
        return signed(keys, claims(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600))
    if kind == "missing exp":
        return signed(keys, claims(exp=None))
    if kind == "not yet valid":
        return signed(keys, claims(nbf=int(time.time()) + 3600))
    if kind == "missing sub":
        return signed(keys, claims(sub=None))
    if kind == "sub of an undeclared user":
        return signed(keys, claims(sub="mallory"))
    if kind == "sub differing in case":
        return signed(keys, claims(sub="Ann"))
    if kind == "sub with path characters":
        return signed(keys, claims(sub="../x"))
    if kind == "sub not a string":
        return signed(keys, claims(sub=["ann"]))
    if kind == "another key with the same kid":
        return signed(keys, claims(), key="other")
    if kind == "unknown kid":
        return signed(keys, claims(), kid="k2")
    if kind == "kid not a string":  # PyJWT will not write one: sign it by hand
        signing_input = f"{_segment({'alg': 'RS256', 'kid': [KID]})}.{_segment(claims())}"
        signature = keys["issuer"].sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"
    if kind == "signature cut":
        return signed(keys, claims())[:-10]
    if kind == "payload swapped":
        valid = signed(keys, claims()).split(".")
        return f"{valid[0]}.{_segment(claims(sub='root', roles=['streamwarden-admin']))}.{valid[2]}"
    if kind == "giant header":
        return signed(keys, claims(), pad="A" * 100_000)
    if kind == "not base64":
        return "!!!.???.###"
    raise AssertionError(kind)


FORGED = ["alg none", "alg none, signature kept", "HS256 with the public key as secret",
          "HS256 with the JWKS as secret", "wrong issuer", "issuer with a trailing slash", "wrong audience",
          "no audience", "no issuer", "expired", "missing exp", "not yet valid", "missing sub",
          "sub of an undeclared user", "sub differing in case", "sub with path characters", "sub not a string",
          "another key with the same kid", "unknown kid", "kid not a string", "signature cut", "payload swapped",
          "giant header", "not base64"]


@pytest.mark.parametrize("kind", FORGED)
def test_jwt_forged_or_bent_is_401(jwt_client, keys, jwks_path, kind):
    token = _forged(keys, jwks_path, kind)
    for path in ("/v1/queries", "/v1/catalog"):
        body = assert_error(jwt_client.get(path, headers=bearer(token)), 401)
        assert set(body) == {"error"}  # which check failed is not said


def test_jwt_never_lands_whole_in_the_audit_trail(jwt_client, jwt_service, keys):
    token = signed(keys, claims())
    jwt_client.get("/v1/queries", headers=bearer(token))
    jwt_client.get(f"/v1/queries/{token}", headers=bearer(token))  # a token as a query id
    jwt_client.get("/v1/queries", headers=bearer(token + "x"))
    jwt_service.trail.flush()
    text = json.dumps([r.to_json() for r in records(jwt_service.store)])
    assert token not in text and token.split(".")[2] not in text
    assert verify(jwt_service.store).ok


# -- Authorization header oddities -------------------------------------------------------------------
@pytest.mark.parametrize("header", [
    "Basic YW5uOmFubg==",
    "Bearer",
    "Bearer ",
    "Bearer    ",
    "Bearer swt_0000000000000000_" + "A" * 43,
    "Token {ann}",
    "Bearer {ann} {ann}",
    "Bearer{ann}",
    "Bearer {ann}x",
    "Bearer {ann}\x00",
    "Bearer " + "A" * 1024 * 1024,
    "Bearer {ann}" + " " * 1024 * 1024,
])
def test_odd_authorization_headers_are_401(client, tokens, header):
    answer = client.get("/v1/queries", headers={"Authorization": header.format(ann=tokens["ann"])})
    assert_error(answer, (400, 401, 431))


def test_no_authorization_header_and_two_of_them_are_401(client, tokens):
    assert_error(client.get("/v1/queries"), 401)
    two = client.get("/v1/queries", headers=[("Authorization", f"Bearer {tokens['ann']}"),
                                            ("Authorization", f"Bearer {tokens['root']}")])
    # either one header wins or the pair is refused; never both identities at once, never a 5xx
    assert two.status_code in (200, 400, 401), two.text


@pytest.mark.parametrize("header", ["bearer {ann}", "BEARER {ann}", "Bearer  {ann}", "Bearer {ann} ",
                                    "Bearer {ann}\n", "Bearer\t{ann}"])
def test_scheme_case_and_spacing_follow_rfc_9110(client, tokens, header):
    """The auth-scheme is case-insensitive and 1*SP may separate it from the token (RFC 9110
    §11.1, RFC 6750 §2.1), so these still prove ann; whatever the server makes of a tab or a
    trailing newline, it is ann or nobody, never someone else and never a 5xx."""
    answer = client.get("/v1/queries", headers={"Authorization": header.format(ann=tokens["ann"])})
    if "\t" in header or "\n" in header:
        assert answer.status_code in (200, 400, 401), answer.text
    else:
        assert answer.status_code == 200, answer.text
    if answer.status_code == 200:
        assert client.get("/v1/catalog", headers={"Authorization": header.format(ann=tokens["ann"])}).status_code \
            in (401, 403)


# -- existence is not revealed -------------------------------------------------------------------------
def _same_but_id(first: Any, second: Any, first_id: str, second_id: str) -> None:
    assert first.status_code == second.status_code == 404, (first.text, second.text)
    assert first.headers["content-type"] == second.headers["content-type"]
    assert first.text.replace(repr(first_id), "'ID'") == second.text.replace(repr(second_id), "'ID'"), \
        (first.text, second.text)


@pytest.mark.parametrize("how", ["GET", "DELETE", "rows", "stream"])
def test_bob_cannot_tell_anns_query_from_none(client, tokens, service, how):
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":2.5}'])

    def ask(query_id: str) -> Any:
        path = f"/v1/queries/{query_id}"
        if how == "GET":
            return client.get(path, headers=tokens.header("bob"))
        if how == "DELETE":
            return client.delete(path, headers=tokens.header("bob"))
        return client.get(f"{path}/{how}", headers=tokens.header("bob"))

    missing = ask("zz9")
    assert_error(missing, 404)
    for probe in (own_id("ann", "q1"), "q1"):
        _same_but_id(ask(probe), missing, probe, "zz9")
    # and nothing happened to ann's query
    mine = client.get("/v1/queries/q1/rows", headers=tokens.header("ann"))
    assert mine.status_code == 200 and mine.json()["rows"] == [{"sensor": 1, "value": 2.5}]


def test_bob_with_his_own_q1_still_never_reaches_anns(client, tokens, service):
    for user in ("ann", "bob"):
        assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header(user)).status_code == 201
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":99.0}'])
    missing = client.get("/v1/queries/zz9/rows", headers=tokens.header("bob"))
    _same_but_id(client.get(f"/v1/queries/{own_id('ann', 'q1')}/rows", headers=tokens.header("bob")), missing,
                 own_id("ann", "q1"), "zz9")
    assert client.get("/v1/queries/q1/rows", headers=tokens.header("bob")).json() == {
        "rows": [], "next": "0", "event_time": None}


# -- cursors -------------------------------------------------------------------------------------------
@pytest.fixture
def anns_rows(client, tokens, service) -> list[dict[str, Any]]:
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    rows = [{"sensor": i, "value": float(i)} for i in range(5)]
    deliver(service, "ann", own_id("ann", "q1"), 1, [json.dumps(r, separators=(",", ":")) for r in rows])
    return rows


@pytest.mark.parametrize("params", [
    {"after": "-1"}, {"after": str(10 ** 30)}, {"after": str(10 ** 40)}, {"after": "abc"}, {"after": "1.5"},
    {"after": "١٢"}, {"after": "²"}, {"after": "0x10"}, {"after": " 1"}, {"after": "1e3"},
    {"limit": "0"}, {"limit": "-1"}, {"limit": str(10 ** 9)}, {"limit": str(10 ** 30)}, {"limit": "9" * 5000},
    {"limit": "ten"}, {"limit": "1.5"},
])
def test_rows_cursor_abuse_is_422(client, tokens, anns_rows, params):
    assert_error(client.get("/v1/queries/q1/rows", params=params, headers=tokens.header("ann")), 422)


def test_rows_empty_cursor_is_the_start(client, tokens, anns_rows):
    """``after=`` (empty) is a form's absent field: the first page, as without it."""
    answer = client.get("/v1/queries/q1/rows", params={"after": ""}, headers=tokens.header("ann"))
    assert answer.status_code == 200 and answer.json()["rows"] == anns_rows


@pytest.mark.parametrize("last_event_id", ["-1", "abc", "١٢", str(10 ** 30)])
def test_stream_cursor_abuse_is_422(client, tokens, anns_rows, last_event_id):
    headers = {**tokens.header("ann"), "Last-Event-ID": last_event_id.encode("utf-8")}
    assert_error(client.get("/v1/queries/q1/stream", headers=headers), 422)


def test_stream_huge_last_event_id_is_422(client, tokens, anns_rows):
    headers = {**tokens.header("ann"), "Last-Event-ID": "9" * 5000}
    assert_error(client.get("/v1/queries/q1/stream", headers=headers), 422)


def test_anns_cursor_on_bobs_query_reveals_nothing_of_anns(client, tokens, service, anns_rows):
    first = client.get("/v1/queries/q1/rows?limit=4", headers=tokens.header("ann")).json()
    assert first["next"] == "4"
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    bobs = [{"sensor": 100 + i, "value": 1.0} for i in range(2)]
    deliver(service, "bob", own_id("bob", "q1"), 1, [json.dumps(r, separators=(",", ":")) for r in bobs])
    for after in (first["next"], "5", "1", "0"):
        answer = client.get("/v1/queries/q1/rows", params={"after": after}, headers=tokens.header("bob"))
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert all(row in bobs for row in page["rows"]), page
        assert page["next"] in (after, "2")  # his own position, or his cursor echoed: never ann's count
    assert_error(client.get(f"/v1/queries/{own_id('ann', 'q1')}/rows", params={"after": first["next"]},
                            headers=tokens.header("bob")), 404)


# -- provider records ---------------------------------------------------------------------------------
def _files(folder: Path) -> list[str]:
    """Every entry of an input folder, hidden ones too (a half-written file would show)."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _post(client: TestClient, tokens: Any, holder: str, body: bytes | str, stream: str = "Vitals") -> Any:
    return client.post(f"/v1/streams/{stream}/records", content=body, headers=tokens.header(holder))


def _then(good: str, old: str, new: str) -> str:
    """Two records: ``good``, then ``good`` with ``old`` replaced by ``new`` (the one at fault, line 2)."""
    assert old in good, old
    return good + "\n" + good.replace(old, new)


P7 = '"patient": 7'
PULSE = '"pulse": 80'
VALUE = '"value": 2.5'
TS = "2026-03-01T10:00:00Z"
REFUSED_RECORDS = {  # name: (holder, stream, body, status); the fault is always on line 2
    "tuple of patient 8": ("provider7", "Vitals", _then(GOOD_VITAL, P7, '"patient": 8'), 403),
    "SP of patient 8": ("provider7", "Vitals", GOOD_VITAL + "\n" + SP7.replace(P7, '"patient": 8'), 403),
    "patient as text": ("provider7", "Vitals", _then(GOOD_VITAL, P7, '"patient": "7"'), 422),
    "patient as 7.0": ("provider7", "Vitals", _then(GOOD_VITAL, P7, '"patient": 7.0'), 422),
    "patient as true": ("provider7", "Vitals", _then(GOOD_VITAL, P7, '"patient": true'), 422),
    "patient null": ("provider7", "Vitals", _then(GOOD_VITAL, P7, '"patient": null'), 422),
    "tuple without patient": ("provider7", "Vitals", _then(GOOD_VITAL, P7 + ", ", ""), 422),
    "SP without patient": ("provider7", "Vitals", GOOD_VITAL + "\n" + SP7.replace(", " + P7, ""), 422),
    "SP with patient as text": ("provider7", "Vitals", GOOD_VITAL + "\n" + SP7.replace(P7, '"patient": "7"'), 422),
    "duplicate key": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, PULSE + ', "pulse": 1'), 422),
    "duplicate patient": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, PULSE + ', "patient": 8'), 422),
    "NaN": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, '"pulse": NaN'), 422),
    "-Infinity": ("readings", "Readings", _then(GOOD_READING, VALUE, '"value": -Infinity'), 422),
    "1e400 double": ("readings", "Readings", _then(GOOD_READING, VALUE, '"value": 1e400'), 422),
    "1e400 int": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, '"pulse": 1e400'), 422),
    "int of 2**31": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, f'"pulse": {2 ** 31}'), 422),
    "int below -2**31": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, f'"pulse": {-2 ** 31 - 1}'), 422),
    "int of 5000 digits": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, '"pulse": ' + "9" * 5000), 422),
    "unknown attribute": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, PULSE + ', "x": 1'), 422),
    "year 10000": ("provider7", "Vitals", _then(GOOD_VITAL, TS, "10000-03-01T10:00:00Z"), 422),
    "year 0": ("provider7", "Vitals", _then(GOOD_VITAL, TS, "0000-03-01T10:00:00Z"), 422),
    "outside UTC years": ("provider7", "Vitals", _then(GOOD_VITAL, TS, "9999-12-31T23:59:59-01:00"), 422),
    "no ts": ("provider7", "Vitals", _then(GOOD_VITAL, f'"ts": "{TS}", ', ""), 422),
    "kind not sp": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, PULSE + ', "kind": "x"'), 422),
    "negative seq": ("provider7", "Vitals", _then(GOOD_VITAL, PULSE, PULSE + ', "seq": -1'), 422),
    "a list, not an object": ("provider7", "Vitals", GOOD_VITAL + "\n[1, 2]", 422),
    "not JSON": ("provider7", "Vitals", GOOD_VITAL + '\n{"ts": ', 422),
    "SP on an unpunctuated stream": ("readings", "Readings", GOOD_READING + "\n" + SP7.replace(", " + P7, "").replace(
        "Vitals", "Readings"), 422),
}


@pytest.mark.parametrize("name", sorted(REFUSED_RECORDS))
def test_provider_records_refused_whole(client, tokens, service, name):
    holder, stream, body, status = REFUSED_RECORDS[name]
    folder = service.inputs[stream]
    before = _files(folder)
    answer = _post(client, tokens, holder, body, stream)
    error = assert_error(answer, status)
    assert error.get("line") == 2, error
    assert _files(folder) == before  # all or nothing: not even the good first line


def test_nested_record_is_422_naming_its_line(client, tokens, service):
    before = _files(service.inputs["Vitals"])
    for body in ("[" * 50 + "]" * 50, '{"a":' * 50 + "1" + "}" * 50, '{"ts": ' + "[" * 50 + "]" * 50 + "}"):
        assert assert_error(_post(client, tokens, "provider7", GOOD_VITAL + "\n" + body), 422).get("line") == 2
    assert _files(service.inputs["Vitals"]) == before


@pytest.mark.parametrize("body", ["[" * 100_000, '{"a":' * 100_000])
def test_deeply_nested_record_is_422_not_500(client, tokens, service, body):
    before = _files(service.inputs["Vitals"])
    answer = _post(client, tokens, "provider7", GOOD_VITAL + "\n" + body)
    assert _files(service.inputs["Vitals"]) == before
    assert assert_error(answer, 422).get("line") == 2


def test_provider_of_one_stream_cannot_post_to_another(client, tokens, service):
    before = _files(service.inputs["Vitals"])
    assert_error(_post(client, tokens, "readings", GOOD_VITAL, "Vitals"), 403)
    assert_error(_post(client, tokens, "provider7", GOOD_READING, "Readings"), 403)
    for path_stream in ("..", "Vitals/..", "vitals", "Vitals%2F..%2FReadings", "Nope"):
        answer = client.post(f"/v1/streams/{path_stream}/records", content=GOOD_VITAL,
                             headers=tokens.header("provider7"))
        assert answer.status_code in (403, 404, 405), (path_stream, answer.text)
        assert_error(answer, answer.status_code)
    assert _files(service.inputs["Vitals"]) == before


@pytest.mark.parametrize("holder", ["ann", "root"])
def test_users_and_admins_cannot_post_records(client, tokens, service, holder):
    before = _files(service.inputs["Vitals"])
    assert_error(_post(client, tokens, holder, GOOD_VITAL), 403)
    assert _files(service.inputs["Vitals"]) == before


def test_records_not_utf8_name_line_and_column(client, tokens, service):
    before = _files(service.inputs["Vitals"])
    body = (GOOD_VITAL + "\n").encode() + b'{"ts": "2026-03-01T10:00:00Z", "ward": "w\xff"}\n'
    error = assert_error(_post(client, tokens, "provider7", body), 422)
    assert error["line"] == 2 and error["column"] == 42, error  # the 42nd character of line 2
    assert _files(service.inputs["Vitals"]) == before


@pytest.mark.parametrize("body", [b"", b"\n\n", b"   \r\n\t\n"])
def test_records_empty_body_is_422(client, tokens, service, body):
    before = _files(service.inputs["Vitals"])
    assert_error(_post(client, tokens, "provider7", body), 422)
    assert _files(service.inputs["Vitals"]) == before


def test_records_body_over_16_mb_is_413(client, tokens, service):
    before = _files(service.inputs["Vitals"])
    line = (GOOD_VITAL + "\n").encode()
    body = line * (17 * 1024 * 1024 // len(line) + 1)
    assert len(body) > 17 * 1024 * 1024
    assert_error(_post(client, tokens, "provider7", body), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the service counts as it reads
        for start in range(0, len(body), 1024 * 1024):
            yield body[start:start + 1024 * 1024]

    streamed = client.post("/v1/streams/Vitals/records", content=chunks(), headers=tokens.header("provider7"))
    assert_error(streamed, 413)
    assert _files(service.inputs["Vitals"]) == before


def test_records_too_many_is_413(client, tokens, service):
    before = _files(service.inputs["Vitals"])
    assert_error(_post(client, tokens, "provider7", (GOOD_VITAL + "\n") * 100_001), 413)
    assert _files(service.inputs["Vitals"]) == before


def test_accepted_records_are_canonical_and_only_ones_own(client, tokens, service):
    answer = _post(client, tokens, "provider7", SP7 + "\n" + GOOD_VITAL.replace('"pulse": 80', '"pulse": 80, "seq": 3'))
    assert answer.status_code == 201, answer.text
    files = [p for p in service.inputs["Vitals"].iterdir()]
    assert len(files) == 1 and not files[0].name.startswith(".")
    lines = files[0].read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["patient"] for line in lines] == [7, 7]


# -- catalog updates by an admin ----------------------------------------------------------------------
def _billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HOSTILE_CATALOGS = {
    "billion laughs": (_billion_laughs().encode(), 422),
    "billion laughs in a valid catalog": (b"x: &x [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"x{i}: &x{i} [" + ",".join([f"*x{i - 1 if i else ''}"] * 10) + "]\n" for i in range(8)).encode(), 422),
    "recursive alias": (b"streams: &s {S: *s}\n", 422),
    "deep nesting": (b"[" * 50_000, 422),
    "invalid UTF-8": (b"streams:\n  S: {schema: {ts: timestamp}}\nusers: {\xff: {}}\n", 422),
    "UTF-16": ("streams: {}\n".encode("utf-16"), 422),
    "binary junk": (bytes(range(256)) * 64, 422),
    "NUL and controls": (b"streams: {}\x00\x01\x02\n", 422),
    "2 MB": (b"# " + b"x" * (2 * 1024 * 1024) + b"\n", 413),
    "empty": (b"", 422),
    "a list": (b"- 1\n- 2\n", 422),
    "python tag": (b"streams: !!python/object/apply:os.system ['true']\n", 422),
    "huge int": (b"streams: {S: {schema: {ts: timestamp}}}\nusers: {ann: {clearance: " + b"9" * 5000 + b"}}\n",
                 422),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CATALOGS))
def test_hostile_catalog_is_refused_and_changes_nothing(client, tokens, service, name):
    body, status = HOSTILE_CATALOGS[name]
    before = service.store.load().text
    answer = client.put("/v1/catalog", content=body, headers=tokens.header("root"))
    error = assert_error(answer, status)
    assert len(error["error"]) < 500
    assert service.store.load().text == before
    assert client.get("/v1/queries", headers=tokens.header("ann")).status_code == 200  # ann still signs in


def test_catalog_not_utf8_names_its_line(client, tokens, service):
    body = HOSTILE_CATALOGS["invalid UTF-8"][0]
    error = assert_error(client.put("/v1/catalog", content=body, headers=tokens.header("root")), 422)
    assert error["line"] == 3, error


def test_catalog_2_mb_streamed_without_length_is_413(client, tokens, service):
    before = service.store.load().text

    def chunks() -> Iterator[bytes]:
        for _ in range(4):
            yield b"#" * (512 * 1024) + b"\n"

    assert_error(client.put("/v1/catalog", content=chunks(), headers=tokens.header("root")), 413)
    assert service.store.load().text == before


# -- registering queries ------------------------------------------------------------------------------
def test_cql_longer_than_20000_characters_is_422(client, tokens, service):
    padded = Q + " " * (20_001 - len(Q))
    assert len(padded) == 20_001
    assert_error(client.post("/v1/queries", json={"id": "q1", "query": padded}, headers=tokens.header("ann")), 422)
    assert service.server.registered() == {}
    exact = Q + " " * (20_000 - len(Q))
    made = client.post("/v1/queries", json={"id": "q1", "query": exact}, headers=tokens.header("ann"))
    assert made.status_code == 201, made.text


@pytest.mark.parametrize("query_id", ["../x", "a" * 65, "a/b", "..", "q 1", "q\n1", "_q", "1q", "q.1", "ｑ1", "",
                                      "q1\x00", "Q1%2F"])
def test_hostile_query_ids_are_422(client, tokens, service, query_id):
    for holder, extra in (("ann", {}), ("root", {"users": ["ann"]})):
        answer = client.post("/v1/queries", json={"id": query_id, "query": Q, **extra}, headers=tokens.header(holder))
        assert_error(answer, 422)
    assert service.server.registered() == {}
    assert not service.output.exists() or not any(service.output.rglob("*"))


def test_admin_cannot_take_a_users_own_query_id(client, tokens, service):
    answer = client.post("/v1/queries", json={"id": own_id("ann", "q1"), "query": Q, "users": ["ann", "bob"]},
                         headers=tokens.header("root"))
    assert_error(answer, 422)
    assert service.server.registered() == {}


def test_long_id_for_a_long_user_name_is_422_not_a_long_folder(client, tokens, service):
    answer = client.post("/v1/queries", json={"id": "a" * 64, "query": Q}, headers=tokens.header("ann"))
    assert_error(answer, 422)  # u03ann_ + 64 characters is longer than a name may be
    assert service.server.registered() == {}


def test_same_id_for_two_users_stays_separate(client, tokens, service):
    for user in ("ann", "bob"):
        assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header(user)).status_code == 201
    assert set(service.server.registered()) == {own_id("ann", "q1"), own_id("bob", "q1")}
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":99.0}'])
    deliver(service, "bob", own_id("bob", "q1"), 1, ['{"sensor":2,"value":1.0}'])
    def rows(user: str) -> list[dict[str, Any]]:
        return client.get("/v1/queries/q1/rows", headers=tokens.header(user)).json()["rows"]

    assert rows("ann") == [{"sensor": 1, "value": 99.0}]
    assert rows("bob") == [{"sensor": 2, "value": 1.0}]
    assert client.delete("/v1/queries/q1", headers=tokens.header("bob")).status_code == 200
    assert set(service.server.registered()) == {own_id("ann", "q1")}
    assert rows("ann") == [{"sensor": 1, "value": 99.0}]


def test_a_users_id_shaped_like_another_users_internal_id_stays_theirs(client, tokens, service):
    """bob naming his query u03ann_q1 gets u03bobu03ann_q1: ann's id space is untouched."""
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")).status_code == 201
    deliver(service, "ann", own_id("ann", "q1"), 1, ['{"sensor":1,"value":99.0}'])
    made = client.post("/v1/queries", json={"id": own_id("ann", "q1"), "query": Q}, headers=tokens.header("bob"))
    assert made.status_code == 201, made.text
    assert own_id("bob", own_id("ann", "q1")) in service.server.registered()
    rows = client.get(f"/v1/queries/{own_id('ann', 'q1')}/rows", headers=tokens.header("bob")).json()
    assert rows == {"rows": [], "next": "0", "event_time": None}
    assert [q["id"] for q in client.get("/v1/queries", headers=tokens.header("ann")).json()["queries"]] == ["q1"]


# -- admin endpoints: values the store cannot hold ------------------------------------------------------
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_action_target_must_be_finite(tmp_path, store_url, value):
    text = CATALOG.replace("policies:", 'actions:\n  a1: {start: "2026-03-01T10:00:00Z", end: null, target: 5.0}\n'
                                        "policies:")
    CatalogStore(store_url).save(load_catalog_text(text, "catalog.yaml"))
    root = create_token(store_url, "root", admin=True)
    opened = open_service(ServeOptions(store_url=store_url, output_dir=str(tmp_path / "out"), inputs={}))
    try:
        with TestClient(create_app(opened), raise_server_exceptions=False) as c:
            answer = c.put("/v1/actions/a1", content='{"target": %s}' % value,
                           headers={"Authorization": f"Bearer {root}", "Content-Type": "application/json"})
            assert opened.store.actions()["a1"].target == 5.0
            assert_error(answer, 422)
    finally:
        opened.trail.close()


def test_grant_for_an_unknown_query_is_refused_even_on_an_empty_store(client, tokens, service):
    answer = client.post("/v1/grants", json={"query": "nope", "user": "bob", "sign": "+"},
                         headers=tokens.header("root"))
    assert_error(answer, (404, 422))
    assert service.server.changes() == ()


# -- the audit trail ---------------------------------------------------------------------------------
def test_audit_trail_verifies_names_each_request_and_holds_no_token(client, tokens, service):
    answers = [
        client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")),
        client.get("/v1/queries/q1/rows", headers=tokens.header("ann")),
        client.get(f"/v1/queries/{own_id('ann', 'q1')}", headers=tokens.header("bob")),
        client.get("/v1/queries", headers={"Authorization": f"Bearer {tokens['eve']}x"}),
        client.get("/v1/queries", headers={"Authorization": f"Basic {tokens['eve']}"}),
        client.get(f"/v1/queries/{tokens['ann']}", headers=tokens.header("bob")),  # a token as a query id
        client.get(f"/v1/queries/{tokens['ann']}/rows", headers=tokens.header("ann")),
        client.get(f"/v1/nowhere/{tokens['root']}", headers=tokens.header("root")),  # and in an unknown path
        client.post("/v1/queries", json={"id": tokens["bob"], "query": Q}, headers=tokens.header("bob")),
        client.post("/v1/queries", json={"id": "q9", "query": tokens["bob"]}, headers=tokens.header("bob")),
        client.post("/v1/grants", json={"query": own_id("ann", "q1"), "user": tokens["eve"], "sign": "+"},
                    headers=tokens.header("root")),
        client.get("/v1/audit", params={"principal": tokens["ann"]}, headers=tokens.header("root")),
        client.put("/v1/catalog", content=f"streams: {{S: {{schema: {{ts: integer}}}}}}\n# {tokens['root']}\n",
                   headers=tokens.header("root")),
        client.post("/v1/streams/Vitals/records", content=GOOD_VITAL, headers=tokens.header("provider7")),
        client.post("/v1/streams/Vitals/records", content=GOOD_VITAL.replace("w1", tokens["provider7"]),
                    headers=tokens.header("provider7")),
        client.post("/v1/streams/Vitals/records", content=GOOD_VITAL, headers=tokens.header("ann")),
        client.delete("/v1/queries/q1", headers=tokens.header("ann")),
        client.get("/", headers=tokens.header("ann")),
    ]
    assert all(a.status_code < 500 for a in answers), [(a.status_code, a.text[:200]) for a in answers]
    service.trail.flush()
    result = verify(service.store)
    assert result.ok, result.message
    trail = [r.to_json() for r in records(service.store)]
    text = json.dumps(trail)
    for holder, token in tokens.items():
        assert token not in text, f"{holder}'s token is in the audit trail"
        # swt_<id>_<secret>: the secret is URL-safe base64 and may itself hold "_", so split twice only
        # (its last "_"-piece can be one letter, found in any text: a flake, not a leak)
        assert token.split("_", 2)[2] not in text, f"{holder}'s token secret is in the audit trail"
    served = client.get("/v1/audit", headers=tokens.header("root")).text
    assert not any(token in served for token in tokens.values())
    ids = {r["request_id"] for r in trail}
    for answer in answers:
        request_id = answer.headers.get("x-request-id")
        assert request_id, answer.text
        assert request_id in ids, (answer.status_code, answer.text[:200])
    assert len({a.headers["x-request-id"] for a in answers}) == len(answers)  # one id per request


def test_a_forged_request_id_is_not_taken(client, tokens, service):
    forged = "f" * 16
    answer = client.get("/v1/queries", headers={**tokens.header("ann"), "X-Request-Id": forged})
    assert answer.headers["x-request-id"] != forged
    service.trail.flush()
    assert forged not in {r.request_id for r in records(service.store)}


def test_a_crash_is_500_with_its_request_id(client, tokens, service, monkeypatch):
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire at /secret/path")

    monkeypatch.setattr(service.book, "visible", broken)
    answer = client.get("/v1/queries", headers=tokens.header("ann"))
    body = assert_error(answer, 500)
    assert "/secret/path" not in answer.text and "RuntimeError" not in answer.text
    service.trail.flush()
    assert body["request_id"] in {r.request_id for r in records(service.store) if r.outcome == "error"}
    assert answer.headers.get("x-request-id") == body["request_id"]


# -- revocation -----------------------------------------------------------------------------------------
def test_revocation_is_immediate(client, tokens, store_url):
    assert client.get("/v1/queries", headers=tokens.header("bob")).status_code == 200
    assert revoke_tokens(store_url, "bob") == 1
    assert_error(client.get("/v1/queries", headers=tokens.header("bob")), 401)
    assert_error(client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")), 401)
    assert client.get("/v1/queries", headers=tokens.header("ann")).status_code == 200  # only bob's


def test_revocation_ends_an_open_stream(client, tokens, service, store_url, monkeypatch):
    monkeypatch.setattr(app_module, "REAUTH_SECONDS", 0.05)
    assert client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("bob")).status_code == 201
    deliver(service, "bob", own_id("bob", "q1"), 1, ['{"sensor":1,"value":1.0}'])
    seen: list[str] = []
    with client.stream("GET", "/v1/queries/q1/stream", headers=tokens.header("bob")) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            seen.append(line)
            if line.startswith("data:") and not any(s.startswith("event: end") for s in seen):
                if len([s for s in seen if s.startswith("data:")]) == 1:
                    revoke_tokens(store_url, "bob")  # after the first row, while the stream is open
                else:
                    break
            if line.startswith("data:") and any(s.startswith("event: end") for s in seen):
                break
    ended = [i for i, line in enumerate(seen) if line.startswith("event: end")]
    assert ended, seen
    assert any("no longer valid" in line for line in seen[ended[0]:]), seen


# -- the audit trail cannot be killed, and names who did what (issue 24, findings 9 and 13) ----------
import asyncio  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

from sqlalchemy.exc import OperationalError  # noqa: E402

from streamwarden.service import trail as trail_module  # noqa: E402
from streamwarden.service.app import UNAUDITED  # noqa: E402

ODD_METHODS = ["X" * 70, "X|Y"]
#: A valid name of 64 characters shaped like a token, and a shorter one (41) a user's own id fits in.
TOKEN_IDS = ["swt_0123456789abcdef_" + "A" * 43, "swt_0123456789abcdef_" + "B" * 20]


def trail_of(client: TestClient, tokens: Any, **params: str) -> list[dict[str, Any]]:
    answer = client.get("/v1/audit", params=params, headers=tokens.header("root"))
    assert answer.status_code == 200, answer.text
    return answer.json()["records"]


def by_request(records_: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["request_id"]: r for r in records_}


def asgi_request(app: Any, method: str, path: str) -> int:
    """One request straight to the ASGI app, its method as given (HTTP clients upper-case it): the status."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": [],
             "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
    asyncio.run(app(scope, receive, send))
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


@pytest.mark.parametrize("method", ODD_METHODS)
def test_an_odd_method_does_not_stop_the_audit_trail(client, tokens, service, method):
    odd = client.request(method, "/v1/queries")
    assert_error(odd, (401, 404, 405))
    assert asgi_request(client.app, method.lower(), "/v1/me") < 500  # lower case: not upper-cased on the way
    later = client.get("/v1/queries", headers=tokens.header("ann"))
    assert later.status_code == 200
    read: list[list[dict[str, Any]]] = []
    reader = threading.Thread(target=lambda: read.append(trail_of(client, tokens)), daemon=True)
    reader.start()
    reader.join(30)  # a dead writer made GET /v1/audit wait for ever
    assert read, "GET /v1/audit did not answer: the audit writer is gone"
    assert service.trail.problem() is None
    trail = by_request(read[0])
    record = trail[odd.headers["x-request-id"]]
    assert (record["principal"], record["action"]) == ("anonymous", "http.other")
    assert record["detail"]["method"] == method[:32]
    assert trail[later.headers["x-request-id"]]["principal"] == "user:ann"
    assert verify(service.store).ok


def test_known_methods_in_any_case_are_recorded_by_name(client, tokens, service):
    assert asgi_request(client.app, "patch", "/v1/nowhere") == 404
    service.trail.flush()
    assert [r.action for r in records(service.store)][-1] == "http.patch"


def test_a_store_that_cannot_write_the_trail_gets_503_not_unaudited_service(client, tokens, service, monkeypatch):
    real = trail_module.append_all
    retried = threading.Event()
    calls: list[int] = []

    def failing(store: Any, entries: Any) -> int:
        calls.append(1)
        if len(calls) >= 2:
            retried.set()  # the first failure is known to the trail by now
        raise OperationalError("INSERT INTO audit_trail ...", {}, Exception("disk full"))

    monkeypatch.setattr(trail_module, "append_all", failing)
    served = client.get("/v1/queries", headers=tokens.header("ann"))  # served: its record fails after
    assert served.status_code == 200
    assert retried.wait(10)
    refused = [client.get("/v1/queries", headers=tokens.header("ann")),
               client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann")),
               client.get("/v1/me"), client.get("/")]
    for answer in refused:
        body = assert_error(answer, 503)
        assert body["error"] == UNAUDITED and "disk full" not in answer.text
        assert answer.headers["x-request-id"] == body["request_id"]
    assert service.server.registered() == {}  # no route ran
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "unavailable"
    monkeypatch.setattr(trail_module, "append_all", real)  # the store works again
    assert service.trail.flush(timeout=30)
    assert client.get("/health").json() == {"status": "ok"}
    after = client.get("/v1/queries", headers=tokens.header("ann"))
    assert after.status_code == 200
    trail = trail_of(client, tokens)
    ids = [r["request_id"] for r in trail]
    assert served.headers["x-request-id"] in ids and after.headers["x-request-id"] in ids  # nothing lost
    assert not any(a.headers["x-request-id"] in ids for a in refused)
    summary = [r for r in trail if r["action"] == "audit.unavailable"]
    assert [(r["principal"], r["outcome"], r["detail"]["requests"]) for r in summary] == [("service", "refused", 4)]
    assert verify(service.store).ok


@pytest.mark.parametrize("query_id", TOKEN_IDS)
def test_a_token_shaped_query_id_is_refused_and_every_request_keeps_its_user(client, tokens, service, query_id):
    answers = [client.post("/v1/queries", json={"id": query_id, "query": Q}, headers=tokens.header("ann")),
               client.post("/v1/queries", json={"id": query_id, "query": Q, "users": ["ann"]},
                           headers=tokens.header("root"))]
    for answer in answers:
        body = assert_error(answer, 422)
        assert "access token" in body["error"] and query_id not in answer.text
    assert service.server.registered() == {}
    answers += [client.get(f"/v1/queries/{query_id}/rows", headers=tokens.header("ann")),
                client.get(f"/v1/queries/{query_id}", headers=tokens.header("ann")),
                client.delete(f"/v1/queries/{query_id}", headers=tokens.header("ann"))]
    assert [a.status_code for a in answers[2:]] == [404, 404, 404]
    anns = by_request(trail_of(client, tokens, principal="user:ann"))
    for answer in answers[:1] + answers[2:]:
        record = anns[answer.headers["x-request-id"]]  # under ann, not "service"
        assert record["object"] == "query:swt_…redacted", record
    assert trail_of(client, tokens, principal="user:root")[-2]["object"] == "query:swt_…redacted"
    assert not [r for r in trail_of(client, tokens) if r["principal"] == "service"]
    assert query_id not in json.dumps(trail_of(client, tokens)) and verify(service.store).ok


@pytest.mark.parametrize("holder, path, body", [
    ("root", "/v1/grants", {"query": 5, "user": "bob", "sign": "+"}),
    ("root", "/v1/grants", "not json"),
    ("ann", "/v1/queries", {"id": "q1"}),
    ("bob", "/v1/queries", {"id": "q1", "query": Q, "extra": 1}),
])
def test_a_body_that_fails_validation_is_audited_under_its_caller(client, tokens, service, holder, path, body):
    kwargs = {"json": body} if isinstance(body, dict) else {"content": body}
    answer = client.post(path, headers={**tokens.header(holder), "Content-Type": "application/json"}, **kwargs)
    assert_error(answer, 422)
    record = by_request(trail_of(client, tokens))[answer.headers["x-request-id"]]
    assert (record["principal"], record["outcome"]) == (f"user:{holder}", "refused")
    anonymous = client.post(path, **kwargs)  # no token: no schema, and anonymous it is
    assert_error(anonymous, 401)
    assert by_request(trail_of(client, tokens))[anonymous.headers["x-request-id"]]["principal"] == "anonymous"


def _detail(client: TestClient, tokens: Any, answer: Any, principal: str) -> dict[str, Any]:
    """The audit record's detail of ``answer``, found under ``principal``."""
    record = by_request(trail_of(client, tokens, principal=principal))[answer.headers["x-request-id"]]
    detail = dict(record["detail"])
    assert (detail.pop("status"), detail.pop("method")) == (answer.status_code, answer.request.method.lower())
    return detail


def test_every_change_is_audited_with_its_full_object(client, tokens, service):
    own = client.post("/v1/queries", json={"id": "q1", "query": Q}, headers=tokens.header("ann"))
    assert own.status_code == 201, own.text
    assert _detail(client, tokens, own, "user:ann") == {"id": "q1", "level": None, "users": ["ann"]}
    shared = client.post("/v1/queries", json={"id": "shared1", "query": Q, "users": ["bob", "ann"]},
                         headers=tokens.header("root"))
    assert shared.status_code == 201, shared.text
    assert _detail(client, tokens, shared, "user:root") == {"id": "shared1", "level": None, "users": ["ann", "bob"]}

    period = client.post("/v1/grants", json={"query": "shared1", "user": "bob", "sign": "+",
                                             "ts": "2026-03-01T10:00:00+01:00", "until": "2026-03-02T10:00:00Z"},
                         headers=tokens.header("root"))
    now = client.post("/v1/grants", json={"query": "shared1", "user": "ann", "sign": "+"},
                      headers=tokens.header("root"))
    revoked = client.post("/v1/grants", json={"query": "shared1", "user": "ann", "sign": "-",
                                              "ts": "2026-04-01T00:00:00Z"}, headers=tokens.header("root"))
    assert [a.status_code for a in (period, now, revoked)] == [201, 201, 201], period.text
    changes = client.get("/v1/grants", headers=tokens.header("root")).json()["changes"]
    applied = next(c["ts"] for c in changes if (c["query"], c["user"], c["sign"]) == ("shared1", "ann", "+"))
    assert _detail(client, tokens, period, "user:root") == {"user": "bob", "sign": "+", "query": "shared1",
                                                             "ts": "2026-03-01T09:00:00Z",
                                                             "until": "2026-03-02T10:00:00Z"}
    assert _detail(client, tokens, now, "user:root") == {"user": "ann", "sign": "+", "query": "shared1",
                                                          "ts": applied, "until": None}
    assert _detail(client, tokens, revoked, "user:root") == {"user": "ann", "sign": "-", "query": "shared1",
                                                              "ts": "2026-04-01T00:00:00Z", "until": None}

    catalog = (CATALOG.replace("  eve: {roles: [Analyst]}\n", "  eve: {roles: [Nurse]}\n  zed: {roles: [Doctor]}\n")
               .replace('where: "value < 50"', 'where: "value < 40"')
               .replace("policies:", 'actions:\n  a1: {start: "2026-03-01T10:00:00Z", end: null, target: 5.0}\n'
                                     "policies:")
               + "  - {id: analysts_read, subject: Analyst, streams: [Vitals], privilege: read}\n")
    put = client.put("/v1/catalog", content=catalog, headers=tokens.header("root"))
    assert put.status_code == 200, put.text
    assert _detail(client, tokens, put, "user:root") == {
        "catalog": "catalog", "users_added": ["zed"], "users_changed": ["eve"], "policies_added": ["analysts_read"],
        "policies_changed": ["nurses_low"], "actions_added": ["a1"]}
    action = client.put("/v1/actions/a1", json={"target": 7.5, "end": "2026-03-01T12:00:00+02:00"},
                        headers=tokens.header("root"))
    assert action.status_code == 200, action.text
    assert _detail(client, tokens, action, "user:root") == {"target": 7.5, "end": "2026-03-01T10:00:00Z"}

    deleted = client.delete("/v1/queries/q1", headers=tokens.header("ann"))
    assert deleted.status_code == 200
    assert _detail(client, tokens, deleted, "user:ann") == {"id": "q1", "level": None, "users": ["ann"]}
    assert verify(service.store).ok


def raw_request(url: str, method: str, path: str) -> bytes:
    """One HTTP/1.1 request over a plain socket, the method byte for byte (clients upper-case it): the answer."""
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=30) as conn:
        conn.sendall(f"{method} {path} HTTP/1.1\r\nHost: {where.netloc}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.spark
def test_a_served_service_survives_odd_methods_audits_on_and_stops_on_sigterm(tmp_path):
    from .served import Served

    with Served.start(tmp_path) as served:
        for method in ["X" * 70, "X|Y", "x|y", "get"]:
            answer = raw_request(served.url, method, "/v1/me")
            assert answer.startswith(b"HTTP/1.1 ") and b'"error"' in answer and b"Traceback" not in answer, answer
        later = served.get("/v1/me", "ann")
        assert later.status_code == 200
        audit = served.get("/v1/audit", "root")  # answers: the writer lives
        assert audit.status_code == 200, audit.text
        found = by_request(audit.json()["records"])
        assert found[later.headers["x-request-id"]]["principal"] == "user:ann"
        odd = [r for r in found.values() if r["action"] == "http.other"]
        assert sorted(r["detail"]["method"] for r in odd) == sorted(["X" * 32, "X|Y", "x|y"])
        assert served.get("/health").json() == {"status": "ok"}
        assert served.terminate(timeout=120) == 0
    result = verify(CatalogStore(served.store_url))
    assert result.ok, result.message


# -- issue 24, finding 7 (gateway half): the gateway accepts only what the engine reads the same -----
def _sp7(**changes: Any) -> str:
    """SP7 with fields changed (a value ``...`` removes the field), as one JSON line."""
    record = json.loads(SP7)
    for name, value in changes.items():
        if value is ...:
            record.pop(name, None)
        else:
            record[name] = value
    return json.dumps(record)


#: SP records the gateway used to accept (201) while the engine calls them broken or reads them
#: otherwise: a null pattern is "*" to the engine and "None" to Python's str, true is "true" to
#: Spark and "True" to str, a null sign or flag is a default to the engine, a number is a text.
SP_OF_ANOTHER_TYPE = {
    "roles null": ("roles", None),
    "roles true": ("roles", True),
    "roles a number": ("roles", 1),
    "tuples null": ("tuples", None),
    "tuples a number": ("tuples", 7),
    "streams null": ("streams", None),
    "attributes false": ("attributes", False),
    "sign null": ("sign", None),
    "sign true": ("sign", True),
    "immutable null": ("immutable", None),
    "grant null": ("grant", None),
    "ts a number": ("ts", 20260301),
}


@pytest.mark.parametrize("name", sorted(SP_OF_ANOTHER_TYPE))
def test_sp_fields_of_another_json_type_are_422_naming_the_field(client, tokens, service, name):
    field, value = SP_OF_ANOTHER_TYPE[name]
    before = _files(service.inputs["Vitals"])
    error = assert_error(_post(client, tokens, "provider7", GOOD_VITAL + "\n" + _sp7(**{field: value})), 422)
    assert error.get("line") == 2 and field in error["error"], error
    assert _files(service.inputs["Vitals"]) == before


def test_an_accepted_sp_is_written_canonical_not_echoed(client, tokens, service):
    sent = _sp7(sign="NEGATIVE", ts="2026-03-01T10:00:00+01:00", seq=4, immutable=..., grant=...)
    assert _post(client, tokens, "provider7", sent).status_code == 201
    [written] = [json.loads(p.read_text(encoding="utf-8")) for p in service.inputs["Vitals"].iterdir()]
    assert written == {"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor",
                       "sign": "-", "immutable": False, "grant": False, "ts": "2026-03-01T09:00:00Z", "sn": 1,
                       "patient": 7, "seq": 4}


def test_a_quoted_pattern_value_is_kept_as_sent(client, tokens, service):
    """Printing a parsed pattern does not give it back: the value '*' would print as *, everything."""
    assert _post(client, tokens, "provider7", _sp7(roles="{'*', 'Doc tor'}")).status_code == 201
    [written] = [json.loads(p.read_text(encoding="utf-8")) for p in service.inputs["Vitals"].iterdir()]
    assert written["roles"] == "{'*', 'Doc tor'}"


def test_years_before_1000_are_written_with_four_digits(client, tokens, service):
    """Python's strftime writes year 1 as "1", which Spark's reader calls a broken record."""
    old = GOOD_READING.replace("2026-03-01T10:00:00Z", "0001-01-01T00:00:00Z")
    assert _post(client, tokens, "readings", old, "Readings").status_code == 201
    [written] = [json.loads(p.read_text(encoding="utf-8")) for p in service.inputs["Readings"].iterdir()]
    assert written["ts"] == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize("attribute", ["roles", "sn", "kind", "sp_csn", "seq"])
def test_a_punctuated_stream_cannot_have_an_attribute_named_like_an_sp_field(client, tokens, service, attribute):
    """The engine parses a record's SP fields and attributes as one record: an attribute "roles: int" made
    every SP's "roles" text a broken record, which the gateway, checking the SP, accepted."""
    text = CATALOG.replace("pulse: int}", f"pulse: int, {attribute}: int}}", 1)
    assert text != CATALOG
    before = service.store.load().text
    error = assert_error(client.put("/v1/catalog", content=text, headers=tokens.header("root")), 422)
    assert error.get("line") == 3 and repr(attribute) in error["error"], error
    assert service.store.load().text == before


# -- issue 24, finding 8: no event time from the future -----------------------------------------------
def _iso(when: Any) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _future(minutes: float) -> str:
    from datetime import datetime, timedelta, timezone

    return _iso(datetime.now(timezone.utc) + timedelta(minutes=minutes))


@pytest.mark.parametrize("where", ["tuple ts", "SP ts", "sp_ts"])
def test_a_record_from_the_far_future_is_422_naming_line_and_field(client, tokens, service, where):
    far = "9999-01-01T00:00:00Z"
    body = {"tuple ts": GOOD_VITAL.replace("2026-03-01T10:00:00Z", far),
            "SP ts": SP7.replace("2026-03-01T09:00:00Z", far),
            "sp_ts": GOOD_VITAL.replace("2026-03-01T09:00:00Z", far)}[where]
    before = _files(service.inputs["Vitals"])
    error = assert_error(_post(client, tokens, "provider7", SP7 + "\n" + body), 422)
    field = "sp_ts" if where == "sp_ts" else "ts"
    assert error.get("line") == 2 and error["error"].startswith(f"line 2: {field} 9999-01-01T00:00:00Z is ahead"), error
    assert _files(service.inputs["Vitals"]) == before


def test_the_allowed_skew_is_5_minutes_by_default(client, tokens, service):
    soon = GOOD_READING.replace("2026-03-01T10:00:00Z", _future(4))
    later = GOOD_READING.replace("2026-03-01T10:00:00Z", _future(6))
    assert _post(client, tokens, "readings", soon, "Readings").status_code == 201
    assert assert_error(_post(client, tokens, "readings", later, "Readings"), 422)["line"] == 1


def test_the_allowed_skew_is_an_option_of_open_service(tmp_path, store_url, tokens):
    from streamwarden.errors import StreamwardenError

    opened = open_service(ServeOptions(store_url=store_url, output_dir=str(tmp_path / "out"), max_clock_skew="1 hour",
                                       inputs={"Readings": str(tmp_path / "in" / "Readings")}))
    try:
        with TestClient(create_app(opened), raise_server_exceptions=False) as c:
            half = GOOD_READING.replace("2026-03-01T10:00:00Z", _future(30))
            assert _post(c, tokens, "readings", half, "Readings").status_code == 201
            two = GOOD_READING.replace("2026-03-01T10:00:00Z", _future(120))
            assert_error(_post(c, tokens, "readings", two, "Readings"), 422)
    finally:
        opened.trail.close()
    for bad in ("soon", "-5 minutes", "5"):
        with pytest.raises(StreamwardenError, match="max-clock-skew"):
            open_service(ServeOptions(store_url=store_url, output_dir=str(tmp_path / "out"), inputs={},
                                      max_clock_skew=bad))


def test_serve_refuses_a_bad_max_clock_skew_before_spark_starts(tmp_path, store_url, capsys):
    from streamwarden.cli.main import main

    status = main(["serve", "--store", store_url, "--output-dir", str(tmp_path / "out"), "--max-clock-skew", "soon"])
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --max-clock-skew:1:1: expected a duration such as '10 seconds' or '5 min', found 'soon'"]


# -- issue 24, finding 11: a tuple no policy can govern is refused, not accepted and lost --------------
@pytest.mark.parametrize("missing", ["sp_ts", "sp_csn", "both"])
def test_an_unstamped_tuple_of_a_punctuated_stream_is_422_naming_the_field(client, tokens, service, missing):
    record = json.loads(GOOD_VITAL)
    for name in (("sp_ts", "sp_csn") if missing == "both" else (missing,)):
        del record[name]
    before = _files(service.inputs["Vitals"])
    error = assert_error(_post(client, tokens, "provider7", SP7 + "\n" + json.dumps(record)), 422)
    assert error.get("line") == 2 and error["error"].startswith(f"line 2: {'sp_ts' if missing == 'both' else missing} "
                                                                "is missing"), error
    assert _files(service.inputs["Vitals"]) == before


@pytest.mark.parametrize("value", ["null", "0", "-1", "4097", '"1"', "1.0"])
def test_a_tuple_naming_no_possible_policy_is_422(client, tokens, service, value):
    body = SP7 + "\n" + GOOD_VITAL.replace('"sp_csn": 1', f'"sp_csn": {value}')
    assert "sp_csn" in assert_error(_post(client, tokens, "provider7", body), 422)["error"]


def test_a_tuple_of_a_plain_stream_needs_no_policy(client, tokens, service):
    assert _post(client, tokens, "readings", GOOD_READING, "Readings").status_code == 201


# -- issue 24, finding 12: crafted numbers and text are 422 naming the field, never 500 -----------------
LONE_SURROGATE = "\\ud800"  # a valid JSON escape, not a character: nothing UTF-8 can hold it
CRAFTED_RECORDS = {  # name: (holder, stream, body on line 2, what the error names)
    "SP tuples 1e400": ("provider7", "Vitals", SP7.replace('"tuples": "*"', '"tuples": 1e400'), "tuples"),
    "SP sn 1e400": ("provider7", "Vitals", SP7.replace('"sn": 1', '"sn": 1e400'), "sn"),
    "double of 400 digits": ("readings", "Readings", GOOD_READING.replace("2.5", "9" * 400), "value"),
    "seq -1e400": ("readings", "Readings", GOOD_READING.replace("}", ', "seq": -1e400}'), "seq"),
    "surrogate in a string": ("provider7", "Vitals", GOOD_VITAL.replace("w1", LONE_SURROGATE), "ward"),
    "surrogate in a quoted pattern": ("provider7", "Vitals", SP7.replace('"Doctor"', f'"\'{LONE_SURROGATE}\'"'),
                                      "roles"),
    "surrogate in a pattern": ("provider7", "Vitals", SP7.replace('"Doctor"', f'"{LONE_SURROGATE}"'), "roles"),
    "surrogate in a key": ("provider7", "Vitals", GOOD_VITAL.replace('"ward"', f'"{LONE_SURROGATE}"'), "attribute"),
    "surrogate in kind": ("provider7", "Vitals", GOOD_VITAL.replace("}", f', "kind": "{LONE_SURROGATE}"}}'), "kind"),
    "surrogate in ts": ("provider7", "Vitals", GOOD_VITAL.replace("T10:00:00Z", LONE_SURROGATE), "ts"),
    "low surrogate in a string": ("readings", "Readings", GOOD_READING.replace("s1", "\\udc00"), "site"),
}


@pytest.mark.parametrize("name", sorted(CRAFTED_RECORDS))
def test_crafted_records_are_422_naming_line_and_field(client, tokens, service, name):
    holder, stream, bad, named = CRAFTED_RECORDS[name]
    good = GOOD_VITAL if stream == "Vitals" else GOOD_READING
    before = _files(service.inputs[stream])
    error = assert_error(_post(client, tokens, holder, good + "\n" + bad, stream), 422)
    assert error.get("line") == 2 and named in error["error"], error
    assert _files(service.inputs[stream]) == before


def test_a_paired_surrogate_escape_is_a_character(client, tokens, service):
    body = GOOD_READING.replace("s1", "\\ud83d\\ude00")  # 😀 as JSON escapes it
    assert _post(client, tokens, "readings", body, "Readings").status_code == 201
    [written] = [json.loads(p.read_text(encoding="utf-8")) for p in service.inputs["Readings"].iterdir()]
    assert written["site"] == "\U0001F600"


def _json_post(client: TestClient, path: str, text: str, headers: dict[str, str], method: str = "POST") -> Any:
    return client.request(method, path, content=text, headers={**headers, "Content-Type": "application/json"})


CRAFTED_JSON = {  # name: (holder, method, path, raw JSON body, the field the error names)
    "query id surrogate": ("ann", "POST", "/v1/queries", '{"id": "q\\ud800", "query": "%s"}' % Q, "id"),
    "query text surrogate": ("ann", "POST", "/v1/queries", '{"id": "q1", "query": "%s \\ud800"}' % Q, "query"),
    "query level surrogate": ("ann", "POST", "/v1/queries", '{"id": "q1", "query": "%s", "level": "\\udfff"}' % Q,
                              "level"),
    "query id 1e400": ("ann", "POST", "/v1/queries", '{"id": 1e400, "query": "%s"}' % Q, "id"),
    "shared users surrogate": ("root", "POST", "/v1/queries",
                               '{"id": "s1", "query": "%s", "users": ["\\ud800"]}' % Q, "users"),
    "key surrogate": ("ann", "POST", "/v1/queries", '{"id": "q1", "query": "%s", "\\ud800": 1}' % Q, "unicode"),
    "grant query surrogate": ("root", "POST", "/v1/grants", '{"query": "\\ud800", "user": "ann", "sign": "+"}',
                              "query"),
    "grant user surrogate": ("root", "POST", "/v1/grants", '{"query": "q1", "user": "\\ud800", "sign": "+"}', "user"),
    "grant ts surrogate": ("root", "POST", "/v1/grants",
                           '{"query": "q1", "user": "ann", "sign": "+", "ts": "\\ud800"}', "ts"),
    "grant sign 1e400": ("root", "POST", "/v1/grants", '{"query": "q1", "user": "ann", "sign": 1e400}', "sign"),
    "action start surrogate": ("root", "PUT", "/v1/actions/a1", '{"start": "\\ud800"}', "start"),
    "action target 1e400": ("root", "PUT", "/v1/actions/a1", '{"target": 1e400}', "target"),
    "action target -1e400": ("root", "PUT", "/v1/actions/a1", '{"target": -1e400}', "target"),
}


@pytest.mark.parametrize("name", sorted(CRAFTED_JSON))
def test_crafted_json_bodies_are_422_naming_the_field(client, tokens, service, name):
    holder, method, path, text, named = CRAFTED_JSON[name]
    error = assert_error(_json_post(client, path, text, tokens.header(holder), method), 422)
    assert named in error["error"] or error.get("field") == named, error


@pytest.mark.parametrize("path", ["/v1/queries/q%ED%A0%80", "/v1/queries/%ED%A0%80/rows", "/v1/actions/%ED%A0%80"])
def test_a_surrogate_in_a_path_is_not_500(client, tokens, service, path):
    method = "PUT" if "actions" in path else "GET"
    answer = _json_post(client, path, '{"target": 1.0}', tokens.header("root" if method == "PUT" else "ann"), method)
    assert_error(answer, (404, 422))


@pytest.mark.parametrize("where", ["a where clause", "a server policy pattern", "a stream's key"])
def test_a_catalog_holding_a_lone_surrogate_is_422_at_its_line(client, tokens, service, where):
    text = {
        "a where clause": CATALOG.replace('where: "value < 50"', 'where: "site = \'\\ud800\'"'),
        "a server policy pattern": CATALOG.replace(
            "punctuated_by: patient", 'punctuated_by: patient\n    server_policies: [{roles: "\'\\ud800\'"}]'),
        "a stream's key": CATALOG.replace("key: patient", 'key: "\\ud800"'),
    }[where]
    before = service.store.load().text
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if "\\ud800" in row)
    error = assert_error(client.put("/v1/catalog", content=text, headers=tokens.header("root")), 422)
    assert error.get("line") == line and "lone surrogate" in error["error"], error
    assert service.store.load().text == before


def test_what_a_user_may_query_is_hers_alone(client, tokens):
    """GET /v1/streams: nobody anonymous, no provider's token, and a user sees only the streams
    her own roles open, naming only her own roles' policies."""
    assert_error(client.get("/v1/streams"), 401)
    assert_error(client.get("/v1/streams", headers=tokens.header("readings")), 403)
    ann = client.get("/v1/streams", headers=tokens.header("ann")).json()["streams"]
    bob = client.get("/v1/streams", headers=tokens.header("bob")).json()["streams"]
    reasons = lambda listed: " ".join(r for s in listed for r in s["reasons"])  # noqa: E731
    assert "doctors_read" in reasons(ann) and "nurses_low" not in reasons(ann)
    assert "nurses_low" in reasons(bob) and "doctors_read" not in reasons(bob)
    assert next(s for s in bob if s["stream"] == "Readings")["attributes"] == ["ts", "sensor", "value"]  # not site
