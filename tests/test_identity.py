"""Bearer tokens in the store (issue 13, identity): creation, authentication, expiry,
revocation, and what an attacker can send or read. No Spark."""

from __future__ import annotations

import hmac
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from streamwarden.catalog import identity
from streamwarden.catalog.identity import (MAX_LIFETIME, Principal, TokenError, authenticate, create_token,
                                           list_tokens, parse_expiry, revoke_provider_tokens, revoke_token,
                                           revoke_tokens, token_id)
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore, NoStore, UnknownName, sqlite_url

CATALOG = """
streams:
  S: {schema: {ts: timestamp, v: int}}
  HeartRate: {schema: {ts: timestamp, Patient_id: int, bpm: int}, key: Patient_id, punctuated_by: Patient_id}
  Ward: {schema: {ts: timestamp, ward: string}, key: ward, punctuated_by: ward}
roles: {R: {}}
users: {ann: {roles: [R]}, bob: {roles: [R]}}
"""
NOW = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path: Path) -> CatalogStore:
    store = CatalogStore(sqlite_url(tmp_path / "s.db"))
    store.save(load_catalog_text(CATALOG))
    return store


# -- round trips ----------------------------------------------------------------------------
def test_a_user_token_authenticates_as_that_user(store) -> None:
    token = create_token(store, "ann")
    principal = authenticate(store, token)
    assert principal == Principal("user", "ann", False, None, None, token_id(token))
    assert token.startswith("swt_") and principal.label == "user:ann"
    assert authenticate(store.url, token) == principal  # by URL as well


def test_an_admin_token_says_so(store) -> None:
    assert authenticate(store, create_token(store, "bob", admin=True)).admin is True
    assert authenticate(store, create_token(store, "bob")).admin is False


def test_provider_tokens_name_their_stream_and_typed_key(store) -> None:
    whole = authenticate(store, create_token(store, provider_stream="HeartRate"))
    assert (whole.kind, whole.name, whole.stream, whole.key, whole.admin) == ("provider", "HeartRate", "HeartRate",
                                                                             None, False)
    keyed = authenticate(store, create_token(store, provider_stream="HeartRate", provider_key="7"))
    assert keyed.key == 7 and isinstance(keyed.key, int) and keyed.label == "provider:HeartRate/7"
    assert authenticate(store, create_token(store, provider_stream="Ward", provider_key="west_3")).key == "west_3"
    assert authenticate(store, create_token(store, provider_stream="S")).stream == "S"


def test_every_token_is_new(store) -> None:
    tokens = {create_token(store, "ann") for _ in range(20)}
    assert len(tokens) == 20 and len({token_id(t) for t in tokens}) == 20


# -- refusals -------------------------------------------------------------------------------
def test_a_wrong_tampered_or_unknown_token_is_none(store) -> None:
    token = create_token(store, "ann")
    other_store = CatalogStore(sqlite_url(Path(store.path).with_name("other.db")))
    other_store.save(load_catalog_text(CATALOG))
    foreign = create_token(other_store, "ann")  # well formed, made elsewhere
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    unknown_id = "swt_" + "0" * 16 + token[20:]
    assert authenticate(store, foreign) is None
    assert authenticate(store, flipped) is None
    assert authenticate(store, unknown_id) is None
    assert authenticate(store, token) is not None


def test_expiry_is_checked_at_authentication(store) -> None:
    token = create_token(store, "ann", expires=timedelta(hours=1), now=NOW)
    assert authenticate(store, token, now=NOW + timedelta(minutes=59)) is not None
    assert authenticate(store, token, now=NOW + timedelta(hours=1)) is None  # at its expiry: no longer
    assert authenticate(store, token, now=NOW + timedelta(days=3)) is None


def test_revoking_a_user_revokes_their_tokens_only(store) -> None:
    ann = [create_token(store, "ann") for _ in range(3)]
    bob = create_token(store, "bob")
    assert revoke_tokens(store, "ann") == 3
    assert all(authenticate(store, t) is None for t in ann) and authenticate(store, bob) is not None
    assert revoke_tokens(store, "ann") == 0  # nothing live is left
    with pytest.raises(UnknownName, match="unknown user 'zed'"):
        revoke_tokens(store, "zed")


def test_revoking_providers_by_stream_or_by_key(store) -> None:
    seven = create_token(store, provider_stream="HeartRate", provider_key=7)
    eight = create_token(store, provider_stream="HeartRate", provider_key="8")
    whole = create_token(store, provider_stream="HeartRate")
    ward = create_token(store, provider_stream="Ward", provider_key="7")  # another stream: untouched
    assert revoke_provider_tokens(store, "HeartRate", "7") == 1
    assert authenticate(store, seven) is None and authenticate(store, eight) is not None
    assert revoke_provider_tokens(store, "HeartRate") == 2  # every other one of the stream
    assert authenticate(store, eight) is None and authenticate(store, whole) is None
    assert authenticate(store, ward) is not None
    with pytest.raises(UnknownName, match="unknown stream 'Nope'"):
        revoke_provider_tokens(store, "Nope")


def test_one_token_is_revoked_by_its_id(store) -> None:
    first, second = create_token(store, "ann"), create_token(store, "ann")
    assert revoke_token(store, token_id(first)) is True and revoke_token(store, token_id(first)) is False
    assert authenticate(store, first) is None and authenticate(store, second) is not None
    listed = {t.id: t for t in list_tokens(store)}
    assert listed[token_id(first)].revoked_at is not None and listed[token_id(second)].revoked_at is None


def test_a_token_stops_working_when_the_catalog_drops_its_holder(store) -> None:
    ann = create_token(store, "ann")
    keyed = create_token(store, provider_stream="HeartRate", provider_key=7)
    store.save(load_catalog_text(CATALOG.replace("ann: {roles: [R]}, ", "").replace("punctuated_by: Patient_id", "")))
    assert authenticate(store, ann) is None  # no longer a user
    assert authenticate(store, keyed) is None  # the stream has no providers any more
    assert revoke_tokens(store, "ann") == 1  # a former user's tokens can still be revoked


def test_unknown_users_and_streams_are_refused_without_listing_the_known_ones(store) -> None:
    with pytest.raises(UnknownName) as info:
        create_token(store, "zed")
    assert str(info.value) == "unknown user 'zed'"
    with pytest.raises(UnknownName, match="^unknown stream 'Nope'$"):
        create_token(store, provider_stream="Nope")
    assert list_tokens(store) == []


@pytest.mark.parametrize("kwargs, message", [
    (dict(provider_stream="S", provider_key="1"), "no punctuated_by attribute"),
    (dict(provider_stream="HeartRate", provider_key="seven"), "is not an int"),
    (dict(provider_stream="HeartRate", provider_key=str(2 ** 40)), "is not an int"),
    (dict(provider_stream="HeartRate", provider_key="a\nb"), "printable characters on one line"),
    (dict(provider_stream="HeartRate", provider_key="x" * 200), "printable characters"),
    (dict(provider_stream="HeartRate", admin=True), "only a user's token"),
    (dict(user="ann", provider_key="7"), "not a user's"),
    (dict(), "name exactly one"),
    (dict(user="ann", provider_stream="S"), "name exactly one"),
    (dict(user="ann", expires=timedelta(0)), "at least 1 second"),
    (dict(user="ann", expires=timedelta(seconds=-5)), "at least 1 second"),
    (dict(user="ann", expires=MAX_LIFETIME + timedelta(seconds=1)), "at most 366 days"),
])
def test_malformed_requests_are_refused(store, kwargs, message) -> None:
    user = kwargs.pop("user", None)
    with pytest.raises(TokenError, match=message):
        create_token(store, user, **kwargs)
    assert list_tokens(store) == []


def test_expiry_text_parses_like_the_projects_durations() -> None:
    assert parse_expiry("12 hours") == timedelta(hours=12)
    assert parse_expiry("366 days") == MAX_LIFETIME
    for bad, message in (("367 days", "at most 366 days"), ("0 seconds", "at least 1 second"),
                         ("500 ms", "at least 1 second"), ("soon", "not a duration"), ("", "not a duration"),
                         ("1e400 days", "not a duration"), ("5 days later", "not a duration")):
        with pytest.raises(TokenError, match=message):
            parse_expiry(bad)


def test_no_store_or_no_catalog_creates_nothing(tmp_path: Path) -> None:
    missing = sqlite_url(tmp_path / "none.db")
    with pytest.raises(NoStore):
        create_token(missing, "ann")
    with pytest.raises(NoStore):
        authenticate(missing, "swt_" + "0" * 16 + "_" + "A" * 43)
    assert not (tmp_path / "none.db").exists()
    empty = CatalogStore(sqlite_url(tmp_path / "empty.db"))
    _ = empty.engine  # a store with tables but no catalog
    with pytest.raises(NoStore):
        create_token(empty, "ann")


# -- what an attacker can read or send ----------------------------------------------------------
def test_the_store_holds_only_the_hash(store) -> None:
    tokens = [create_token(store, "ann"), create_token(store, provider_stream="HeartRate", provider_key=7)]
    store.engine.dispose()  # everything written through to the file
    files = [p for p in Path(store.path).parent.iterdir() if p.name.startswith("s.db")]
    raw = b"".join(p.read_bytes() for p in files)
    for token in tokens:
        secret = token.split("_", 2)[2]
        assert token.encode() not in raw and secret.encode() not in raw
        assert identity._digest(token).encode() in raw  # what is kept instead
        assert token_id(token).encode() in raw  # the public id, for revocation and display
    assert all(not hasattr(t, "token") for t in list_tokens(store))


def test_the_hashes_are_compared_in_constant_time(store, monkeypatch) -> None:
    token = create_token(store, "ann")
    calls: list[tuple[str, str]] = []
    compare = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        calls.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(identity.hmac, "compare_digest", spy)
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert authenticate(store, token) is not None and authenticate(store, flipped) is None
    assert len(calls) == 2


ATTACKS = [
    "", " ", "swt_", "swt__", "swt___", "Bearer swt_x", "x" * 10_000_000, "swt_" + "0" * 16 + "_" + "A" * 10_000,
    "swt_" + "é" * 16 + "_" + "A" * 43, "swt_" + "0" * 16 + "_" + "é" * 43, "swt_" + "0" * 16 + "_" + "A" * 42 + "\n",
    "swt_00000000000000000_" + "A" * 42, "swt_0000000000000000_" + "A" * 42 + "_", "_".join(["swt"] * 20),
    "swt_' OR '1'='1' --_" + "A" * 43, "'; DROP TABLE tokens; --", "swt_0000000000000000_' OR 1=1 --" + "A" * 27,
    "swt_%_%", "swt_*_*", "\x00" * 64, "swt_0000000000000000\x00_" + "A" * 43, "ＳＷＴ_" + "0" * 16 + "_" + "A" * 43,
    "swt_ABCDEF0123456789_" + "A" * 43,  # upper-case id: ids are lower-case hex
    None, 42, b"swt_0000000000000000_" + b"A" * 43, ["swt_"],
]


@pytest.mark.parametrize("attack", ATTACKS, ids=range(len(ATTACKS)))
def test_malformed_tokens_are_none_never_an_exception(store, attack) -> None:
    create_token(store, "ann")
    assert authenticate(store, attack) is None


def test_a_valid_token_with_noise_around_it_is_none(store) -> None:
    token = create_token(store, "ann")
    for variant in (" " + token, token + " ", token + "\n", token.upper(), token.replace("swt_", "SWT_"),
                    token + token, token[:-1], "Bearer " + token):
        assert authenticate(store, variant) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200),
                 st.builds(lambda a, b: f"swt_{a}_{b}", st.text(max_size=20), st.text(max_size=60)),
                 st.builds(lambda a, b: f"swt_{a}_{b}", st.text("0123456789abcdef", min_size=16, max_size=16),
                           st.text("ABCxyz019_-", min_size=43, max_size=43))))
def test_any_text_is_a_principal_only_if_it_is_the_token(store, text) -> None:
    if not hasattr(store, "_hyp_token"):
        store._hyp_token = create_token(store, "ann")  # type: ignore[attr-defined]
    principal = authenticate(store, text)
    assert (principal is not None) == (text == store._hyp_token)  # type: ignore[attr-defined]


def test_a_provider_key_is_matched_as_a_value_of_its_type(store) -> None:
    seven = create_token(store, provider_stream="HeartRate", provider_key=7)
    assert revoke_provider_tokens(store, "HeartRate", "seven") == 0  # not an int: no token can have it
    assert revoke_provider_tokens(store, "HeartRate", "07") == 1  # the int 7, however written
    assert authenticate(store, seven) is None
