"""Who is calling: bearer tokens for users and data providers, kept in the catalog store.

A token is ``swt_<id>_<secret>``: ``id`` is 16 hex digits, public (it names the token
in listings, revocations and the audit trail), ``secret`` is 256 random bits
(:func:`secrets.token_urlsafe`). The store keeps the id and the SHA-256 of the whole
token, never the token: a copy of the store lets nobody sign in. Because the secret is
random and long, a plain hash is enough (a slow password hash protects guessable
secrets; nobody guesses 2^256). :func:`authenticate` finds the row by the id, a value
that is not secret, and compares the hashes with :func:`hmac.compare_digest`, so no
secret is ever compared in SQL or with ``==``.

A token is either a **user's** (a user of the stored catalog; ``admin`` makes it an
administrator's) or a **provider's** for one stream of the catalog: it may append
records to that stream, and for a stream with ``punctuated_by`` a ``key`` narrows it to
one provider's sub-stream (the value of that attribute, typed as the schema says). A
token may expire (at most :data:`MAX_LIFETIME` after it is created) and is revoked by
user, or by stream and key. A token whose user or stream the stored catalog no longer
declares stops authenticating too, and a user's token is bound to the user's identity
(:meth:`~streamwarden.catalog.store.CatalogStore.incarnations`): a user removed from the
catalog and declared again is a new identity, whom no earlier token speaks for; a
provider's token is bound to its stream's identity in the same way.

Nothing here logs or returns a token except :func:`create_token`, once.

    >>> import tempfile, os
    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> from streamwarden.catalog.store import CatalogStore
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> text = "streams: {S: {schema: {ts: timestamp}}}\\nusers: {ann: {roles: []}}"
    >>> CatalogStore(url).save(load_catalog_text(text)).added
    ()
    >>> token = create_token(url, "ann")
    >>> authenticate(url, token).name
    'ann'
    >>> authenticate(url, token + "x") is None
    True
    >>> revoke_tokens(url, "ann"), authenticate(url, token)
    (1, None)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Callable, Iterator, Literal, Union

from sqlalchemy import Boolean, Column, MetaData, String, Table, Text, insert, select, update
from sqlalchemy.engine import Connection, Engine

from streamwarden.catalog.changes import OPERATOR, Actor, audited, check_actor
from streamwarden.catalog.model import Catalog, StreamDef
from streamwarden.catalog.store import (CatalogStore, UTCDateTime, UnknownName, _sources, _utc, add_missing_columns,
                                       create_tables, incarnation_of, stream_incarnation_of)
from streamwarden.errors import SourceError, StreamwardenError
from streamwarden.names import check_name, looks_like_token

#: What every token starts with: recognisable in a leaked log or a secret scanner's rules.
PREFIX = "swt_"
#: The longest a token may live; ``--expires`` beyond it is refused (rotate instead).
MAX_LIFETIME = timedelta(days=366)
MIN_LIFETIME = timedelta(seconds=1)

_ID_HEX = 16  # 64 random bits: unique enough to name a token, not a secret
# token_urlsafe(32) is 43 URL-safe characters (which include "_": the id is split off first)
_TOKEN = re.compile(r"swt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_TOKEN_LENGTH = len(PREFIX) + _ID_HEX + 1 + 43
_MAX_KEY_TEXT = 128

#: A provider's sub-stream value, typed as its stream's ``punctuated_by`` attribute.
ProviderKey = Union[int, float, str, bool]
Kind = Literal["user", "provider"]

_metadata = MetaData()
_tokens = Table(
    "tokens", _metadata,
    Column("id", String(_ID_HEX), primary_key=True),  # public: in the token, listings and the audit trail
    Column("digest", String(64), nullable=False),  # SHA-256 of the whole token, hex; never the token
    Column("kind", String(16), nullable=False),  # "user" or "provider"
    Column("name", String, nullable=False),  # the user, or the provider's stream
    Column("admin", Boolean, nullable=False),
    Column("provider_key", Text, nullable=True),  # JSON of the sub-stream value (providers of punctuated streams)
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=True),
    Column("revoked_at", UTCDateTime(), nullable=True),
    Column("incarnation", Text, nullable=True),  # a user's token: the identity it was made for
    info={"generation": True},  # a service caches who a token speaks for: a revocation moves the generation
)
_ready: "weakref.WeakSet[Engine]" = weakref.WeakSet()  # engines whose token table exists


class TokenError(StreamwardenError):
    """A token cannot be made as asked (a bad expiry, a key for a stream without providers, ...)."""


@dataclass(frozen=True)
class Principal:
    """Who a valid token speaks for.

    ``name`` is the user, or for a provider the stream; ``stream`` and ``key`` are set for
    providers only (``key`` None: any provider of the stream). :attr:`label` is how the
    audit trail names it.

    >>> Principal("provider", "HeartRate", stream="HeartRate", key=7, token_id="0" * 16).label
    'provider:HeartRate/7'
    """

    kind: Kind
    name: str
    admin: bool = False
    stream: str | None = None
    key: ProviderKey | None = None
    token_id: str = ""

    @property
    def label(self) -> str:
        """``user:NAME`` or ``provider:STREAM[/KEY]``: no secret, only names."""
        return subject_label(self.kind, self.name, self.key)


@dataclass(frozen=True)
class TokenInfo:
    """A stored token as listings show it (its id, never the token)."""

    id: str
    kind: Kind
    name: str
    admin: bool
    key: ProviderKey | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    @property
    def label(self) -> str:
        return subject_label(self.kind, self.name, self.key)


def subject_label(kind: str, name: str, key: ProviderKey | None = None) -> str:
    """How a token's holder is named in messages and the audit trail.

    >>> subject_label("user", "ann"), subject_label("provider", "S"), subject_label("provider", "S", True)
    ('user:ann', 'provider:S', 'provider:S/true')
    """
    return f"{kind}:{name}" + ("" if key is None else f"/{key_text(key)}")


def key_text(key: ProviderKey) -> str:
    """A provider key as the command line writes it (``true``, ``7``, ``2.5``, ``ward_3``)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def token_id(token: str) -> str | None:
    """The public id of a well-formed token (None for anything else); safe to log.

    >>> token_id("swt_00112233445566aa_" + "A" * 43), token_id("nonsense")
    ('00112233445566aa', None)
    """
    match = _TOKEN.fullmatch(token) if isinstance(token, str) and len(token) == _TOKEN_LENGTH else None
    return match.group(1) if match else None


def parse_expiry(text: str) -> timedelta:
    """``--expires``: a duration as the project writes them (``"30 days"``, ``"12 hours"``),
    at least :data:`MIN_LIFETIME` and at most :data:`MAX_LIFETIME`; raises :class:`TokenError`.

    >>> parse_expiry("90 days")
    datetime.timedelta(days=90)
    >>> parse_expiry("10000 days")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    streamwarden.catalog.identity.TokenError: --expires '10000 days' is too long: a token lives at most 366 days ...
    """
    from streamwarden.language.parser import parse_duration

    try:
        seconds = parse_duration(text, "--expires", zero=True)
    except SourceError as exc:
        raise TokenError(f"--expires {text!r} is not a duration like '30 days' or '12 hours' "
                         f"({exc.message})") from None
    return check_lifetime(timedelta(seconds=seconds), f"--expires {text!r}")


def check_lifetime(expires: timedelta, what: str = "expires") -> timedelta:
    """``expires`` if it is a lifetime a token may have; raises :class:`TokenError` otherwise."""
    if expires < MIN_LIFETIME:
        raise TokenError(f"{what} must be at least 1 second: a token that never worked is no token")
    if expires > MAX_LIFETIME:
        raise TokenError(f"{what} is too long: a token lives at most {MAX_LIFETIME.days} days "
                         "(create a new one when it ends)")
    return expires


def parse_key(text: str, attribute_type: str) -> ProviderKey:
    """A ``--key`` value typed as the ``punctuated_by`` attribute (int, long, double, string or
    boolean); raises :class:`TokenError` for a value of another type.

    >>> parse_key("7", "int"), parse_key("ward_3", "string"), parse_key("TRUE", "boolean")
    (7, 'ward_3', True)
    >>> parse_key("seven", "int")
    Traceback (most recent call last):
    streamwarden.catalog.identity.TokenError: --key 'seven' is not an int, the type of the stream's provider attribute
    """
    shown = check_key_text(text)[:40]
    bad = TokenError(f"--key {shown!r} is not {'an' if attribute_type == 'int' else 'a'} {attribute_type}, "
                     "the type of the stream's provider attribute")
    if attribute_type in ("int", "long"):
        if not re.fullmatch(r"-?[0-9]{1,19}", text):
            raise bad
        value = int(text)
        bits = 31 if attribute_type == "int" else 63
        if not -(2 ** bits) <= value < 2 ** bits:
            raise bad
        return value
    if attribute_type == "double":
        try:
            number = float(text)
        except ValueError:
            raise bad from None
        if not math.isfinite(number):
            raise bad
        return number
    if attribute_type == "boolean":
        if text.lower() not in ("true", "false"):
            raise bad
        return text.lower() == "true"
    if attribute_type == "string":
        return text
    raise TokenError(f"a provider key cannot be a {attribute_type}")


def check_key_text(text: str) -> str:
    """``text`` if it can be a provider key as written (1 to 128 printable characters, so
    that it names the provider on one line); raises :class:`TokenError` otherwise."""
    if not isinstance(text, str) or not text or len(text) > _MAX_KEY_TEXT or not text.isprintable():
        shown = text if not isinstance(text, str) or len(text) <= 40 else text[:37] + "..."
        raise TokenError(f"--key {shown!r} must be 1 to {_MAX_KEY_TEXT} printable characters on one line")
    return text


# -- creating and revoking -----------------------------------------------------------------
def create_token(store: str | CatalogStore, user: str | None = None, *, admin: bool = False,
                 expires: timedelta | None = None, provider_stream: str | None = None,
                 provider_key: ProviderKey | str | None = None, now: datetime | None = None,
                 actor: Actor = OPERATOR) -> str:
    """A new bearer token for ``user`` (a user of the stored catalog), or for the provider of
    ``provider_stream`` (one of its streams; ``provider_key``, only for a stream with
    ``punctuated_by``, narrows it to that provider's sub-stream: a typed value, or text
    parsed by the attribute's type). The token is returned once and stored as a hash only.
    Recorded in the audit trail (``token.create user:ann``, the token's id in the detail,
    never the token) under ``actor`` (:mod:`streamwarden.catalog.changes`; a store given as
    a :class:`~streamwarden.catalog.store.CatalogStore` brings its own).

    Raises :class:`~streamwarden.catalog.store.NoStore` (no store, or no catalog in it),
    :class:`~streamwarden.catalog.store.UnknownName` (a user or stream the catalog does
    not declare) and :class:`TokenError` (any other refusal).

    >>> import tempfile, os
    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> text = "streams: {S: {schema: {ts: timestamp, p: int}, key: p, punctuated_by: p}}\\nusers: {ann: {roles: []}}"
    >>> _ = CatalogStore(url).save(load_catalog_text(text))
    >>> authenticate(url, create_token(url, provider_stream="S", provider_key="7")).label
    'provider:S/7'
    >>> create_token(url, "bob")
    Traceback (most recent call last):
    streamwarden.catalog.store.UnknownName: unknown user 'bob'
    """
    if (user is None) == (provider_stream is None):
        raise TokenError("a token is for a user or for a stream's provider: name exactly one")
    if expires is not None:
        check_lifetime(expires)
    when = _now(now)
    asked = subject_label("user", user) if user is not None else subject_label(
        "provider", str(provider_stream), None if provider_key is None else provider_key)
    with _opened(store, require_catalog=True, actor=actor) as (the_store, engine), \
            audited(engine, the_store.actor, "token.create", asked, {"admin": admin}) as change:
        kind, name, key = _holder(the_store.load(), user, admin, provider_stream, provider_key)
        incarnation = (the_store.incarnations() if kind == "user" else the_store.stream_incarnations()).get(name)
        token_id_ = secrets.token_hex(_ID_HEX // 2)
        token = f"{PREFIX}{token_id_}_{secrets.token_urlsafe(32)}"
        expires_at = None if expires is None else when + expires
        change.object = subject_label(kind, name, key)
        change.detail.update(token_id=token_id_, expires_at=None if expires_at is None else _iso(expires_at))
        change.commit(lambda conn: conn.execute(insert(_tokens).values(
            id=token_id_, digest=_digest(token), kind=kind, name=name, admin=admin,
            provider_key=None if key is None else json.dumps(key), created_at=when,
            expires_at=expires_at, revoked_at=None, incarnation=incarnation)))
    return token


def _holder(catalog: Catalog, user: str | None, admin: bool, provider_stream: str | None,
            provider_key: ProviderKey | str | None) -> tuple[Kind, str, ProviderKey | None]:
    """Who a new token is for, checked against the stored catalog: (kind, name, typed key)."""
    if user is not None:
        check_name("user", user)
        if provider_key is not None:
            raise TokenError("a provider key belongs to a provider's token, not a user's")
        if user not in catalog.users:
            raise UnknownName(f"unknown user {user!r}")  # the known users are not listed: names are private
        return "user", user, None
    assert provider_stream is not None
    check_name("stream", provider_stream)
    if admin:
        raise TokenError("only a user's token can be an administrator's")
    stream = catalog.streams.get(provider_stream)
    if stream is None:
        raise UnknownName(f"unknown stream {provider_stream!r}")
    return "provider", provider_stream, _typed_key(stream, provider_key)


def revoke_tokens(store: str | CatalogStore, user: str, *, now: datetime | None = None,
                  actor: Actor = OPERATOR) -> int:
    """Revoke every live token of ``user``; returns how many (the audit trail's
    ``token.revoke user:<user>`` says it too). A user the catalog no longer declares can
    still have their tokens revoked; a name that is neither a user nor has tokens raises
    :class:`~streamwarden.catalog.store.UnknownName`."""
    check_name("user", user)
    with _opened(store, require_catalog=True, actor=actor) as (the_store, engine), \
            audited(engine, the_store.actor, "token.revoke", subject_label("user", user)) as change:
        declared = user in the_store.load().users

        def work(conn: Connection) -> int:
            revoked = _revoke(conn, "user", user, lambda stored: True, _now(now))
            if not revoked and not declared and not _has_tokens(conn, "user", user):
                raise UnknownName(f"unknown user {user!r}")
            change.detail["revoked"] = revoked
            return revoked

        return change.commit(work)


def revoke_provider_tokens(store: str | CatalogStore, stream: str, key: ProviderKey | str | None = None, *,
                           now: datetime | None = None, actor: Actor = OPERATOR) -> int:
    """Revoke the live provider tokens of ``stream``: all of them (``key`` None, whatever
    sub-stream they name), or only those of the sub-stream ``key`` (matched as the command
    line writes it: ``7`` matches the int 7). Returns how many (recorded as
    ``token.revoke provider:<stream>[/<key>]``)."""
    check_name("stream", stream)
    with _opened(store, require_catalog=True, actor=actor) as (the_store, engine), \
            audited(engine, the_store.actor, "token.revoke", subject_label("provider", stream, key)) as change:
        declared = the_store.load().streams.get(stream)
        matches = _key_matcher(declared, key)

        def work(conn: Connection) -> int:
            revoked = _revoke(conn, "provider", stream, matches, _now(now))
            if not revoked and declared is None and not _has_tokens(conn, "provider", stream):
                raise UnknownName(f"unknown stream {stream!r}")
            change.detail["revoked"] = revoked
            return revoked

        return change.commit(work)


def _key_matcher(stream: StreamDef | None, key: ProviderKey | str | None) -> Callable[[ProviderKey | None], bool]:
    """Which stored keys ``key`` names: any (None); else the same typed value when the stream
    still declares its provider attribute (so ``"7.0"`` and ``"7"`` name the same double),
    else the same text."""
    if key is None:
        return lambda stored: True
    if stream is not None and stream.punctuated_by is not None:
        try:
            wanted = json.dumps(_typed_key(stream, key))  # JSON: True and 1 stay different keys
        except TokenError:
            return lambda stored: False  # not a value of the attribute: no token can have it
        return lambda stored: stored is not None and json.dumps(stored) == wanted
    text = key if isinstance(key, str) else key_text(key)
    return lambda stored: stored is not None and key_text(stored) == text


def revoke_token(store: str | CatalogStore, token_id: str, *, now: datetime | None = None,
                 actor: Actor = OPERATOR) -> bool:
    """Revoke one token by its public id (as :func:`token_id` and :func:`list_tokens` give
    it); False when no live token has that id. Recorded as ``token.revoke`` of its holder,
    the id in the detail."""
    with _opened(store, require_catalog=False, actor=actor) as (the_store, engine), \
            audited(engine, the_store.actor, "token.revoke", f"token:{token_id}", {"token_id": token_id}) as change:
        def work(conn: Connection) -> bool:
            row = conn.execute(select(_tokens.c.kind, _tokens.c.name, _tokens.c.provider_key)
                               .where(_tokens.c.id == token_id)).first()
            if row is not None:
                change.object = subject_label(row.kind, row.name, _stored_key(row.provider_key))
            revoked = conn.execute(update(_tokens).where(_tokens.c.id == token_id, _tokens.c.revoked_at.is_(None))
                                   .values(revoked_at=_now(now))).rowcount == 1
            change.detail["revoked"] = int(revoked)
            return revoked

        return change.commit(work)


def list_tokens(store: str | CatalogStore) -> list[TokenInfo]:
    """Every stored token (live, expired or revoked), oldest first: ids and holders, no secrets."""
    with _opened(store, require_catalog=False) as (_, engine):
        with engine.connect() as conn:
            rows = conn.execute(select(_tokens).order_by(_tokens.c.created_at, _tokens.c.id)).all()
    return [TokenInfo(r.id, r.kind, r.name, bool(r.admin), _stored_key(r.provider_key),
                      _utc(r.created_at), _utc(r.expires_at), _utc(r.revoked_at))
            for r in rows]


# -- authenticating ------------------------------------------------------------------------
def authenticate(store: str | CatalogStore, token: object, *, now: datetime | None = None) -> Principal | None:
    """The principal ``token`` speaks for, or None: not a token at all (any text, of any
    length or alphabet, or not text), unknown, tampered with, expired, revoked, or for a
    user or stream the stored catalog no longer declares, or for an earlier identity of the
    user (removed from the catalog and declared again since). Never raises for a bad token.

    Pass a :class:`~streamwarden.catalog.store.CatalogStore` (as a service does) rather
    than a URL to reuse its connections.

    >>> import tempfile, os
    >>> from streamwarden.catalog.loader import load_catalog_text
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> text = "streams: {S: {schema: {ts: timestamp}}}\\nusers: {ann: {roles: []}}"
    >>> _ = CatalogStore(url).save(load_catalog_text(text))
    >>> token = create_token(url, "ann", admin=True, expires=timedelta(hours=1))
    >>> authenticate(url, token).admin, authenticate(url, token, now=datetime.now(timezone.utc) + timedelta(hours=2))
    (True, None)
    >>> authenticate(url, "swt_' OR 1=1 --") is None
    True
    """
    found = check_token(store, token)
    return found.principal if found is not None and found.valid_at(_now(now)) else None


@dataclass(frozen=True)
class Authenticated:
    """What a stored token proves, and until when: what :func:`check_token` finds."""

    principal: Principal
    expires_at: datetime | None

    def valid_at(self, when: datetime) -> bool:
        return self.expires_at is None or when < self.expires_at


def check_token(store: str | CatalogStore, token: object) -> Authenticated | None:
    """:func:`authenticate` but for the clock: the principal and the token's expiry, or None
    for everything else :func:`authenticate` refuses. What a service keeps while the store's
    generation stays (:mod:`streamwarden.catalog.generation`), applying the expiry itself at
    every request; the identity and catalog checks are redone whenever the store changes."""
    if not isinstance(token, str):
        return None
    match = _TOKEN.fullmatch(token) if len(token) == _TOKEN_LENGTH else None
    if match is None:
        return None
    with _opened(store, require_catalog=False) as (_, engine):
        with engine.connect() as conn:
            row = conn.execute(select(_tokens).where(_tokens.c.id == match.group(1))).first()
            if row is None or not hmac.compare_digest(row.digest, _digest(token)) or row.revoked_at is not None:
                return None
            users, streams = _declared(conn)
            current = (incarnation_of if row.kind == "user" else stream_incarnation_of)(conn, row.name)
            if row.incarnation is None or row.incarnation != current:
                return None  # a token of an earlier identity of this user or stream name
    key = _stored_key(row.provider_key)
    expires = _utc(row.expires_at) if row.expires_at is not None else None
    if row.kind == "user":
        return Authenticated(Principal("user", row.name, bool(row.admin), token_id=row.id), expires) \
            if row.name in users else None
    if row.kind == "provider" and row.name in streams and (key is None or streams[row.name] is not None):
        return Authenticated(Principal("provider", row.name, False, stream=row.name, key=key, token_id=row.id),
                             expires)
    return None


# -- helpers -------------------------------------------------------------------------------
@contextmanager
def _opened(store: str | CatalogStore, *, require_catalog: bool, actor: Actor = OPERATOR
            ) -> Iterator[tuple[CatalogStore, Engine]]:
    """The store and its engine with the token table in it. A URL is opened for this call
    only (its connections closed after), for ``actor``; it must name a store that exists
    (with a catalog when ``require_catalog``): a mistyped URL never creates an empty store.
    A store handle given brings its own actor (naming another is refused)."""
    owned = isinstance(store, str)
    if isinstance(store, str):
        the_store = CatalogStore.existing(store, actor=actor)
    else:
        check_actor(store.actor, actor)
        the_store = store
    if require_catalog and not owned and not the_store.has_catalog():
        the_store = CatalogStore.existing(the_store.url)  # raises NoStore with its message
    engine = the_store.engine
    try:
        if engine not in _ready:
            create_tables(engine, _metadata)
            if add_missing_columns(engine, _tokens, ("incarnation",)):
                _bind_existing_tokens(the_store, engine)
            _ready.add(engine)
        yield the_store, engine
    finally:
        if owned:
            engine.dispose()


def _bind_existing_tokens(store: CatalogStore, engine: Engine) -> None:
    """Tokens of a store written before identities: each token is bound to the identity of its
    user or stream now (one not declared now keeps none, so its tokens never authenticate)."""
    for kind, current in (("user", store.incarnations()), ("provider", store.stream_incarnations())):
        with engine.begin() as conn:
            for name, incarnation in current.items():
                conn.execute(update(_tokens).where(_tokens.c.kind == kind, _tokens.c.name == name)
                             .values(incarnation=incarnation))


def _declared(conn: Connection) -> tuple[frozenset[str], dict[str, str | None]]:
    """The stored catalog's users and streams (stream -> its provider attribute), read in the
    same connection as the token; parsed once per catalog text."""
    row = conn.execute(select(_sources.c.text)).first()
    return _names_of(row.text) if row is not None else (frozenset(), {})


@lru_cache(maxsize=8)
def _names_of(text: str) -> tuple[frozenset[str], dict[str, str | None]]:
    from streamwarden.catalog.loader import load_catalog_text

    catalog = load_catalog_text(text)
    return frozenset(catalog.users), {name: s.punctuated_by for name, s in catalog.streams.items()}


def _typed_key(stream: StreamDef, raw: ProviderKey | str | None) -> ProviderKey | None:
    """The provider key for ``stream``, typed as its ``punctuated_by`` attribute."""
    if raw is None:
        return None
    attribute = stream.punctuated_by
    if attribute is None:
        raise TokenError(f"the stream {stream.name} has no punctuated_by attribute: its provider token cannot "
                         "name a provider key")
    attribute_type = stream.type_of(attribute) or "string"
    return parse_key(raw if isinstance(raw, str) else key_text(raw), attribute_type)


def _stored_key(text: str | None) -> ProviderKey | None:
    return None if text is None else json.loads(text)


def _revoke(conn: Connection, kind: str, name: str, matches: Callable[[ProviderKey | None], bool],
            when: datetime) -> int:
    live = conn.execute(select(_tokens.c.id, _tokens.c.provider_key).where(
        _tokens.c.kind == kind, _tokens.c.name == name, _tokens.c.revoked_at.is_(None))).all()
    ids = [r.id for r in live if matches(_stored_key(r.provider_key))]
    if ids:
        conn.execute(update(_tokens).where(_tokens.c.id.in_(ids)).values(revoked_at=when))
    return len(ids)


def _has_tokens(conn: Connection, kind: str, name: str) -> bool:
    return conn.execute(select(_tokens.c.id).where(_tokens.c.kind == kind, _tokens.c.name == name)
                        ).first() is not None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _iso(when: datetime) -> str:
    return _utc(when).isoformat().replace("+00:00", "Z")


def _now(now: datetime | None) -> datetime:
    return datetime.now(timezone.utc) if now is None else _utc(now)


__all__ = ["MAX_LIFETIME", "PREFIX", "Authenticated", "Principal", "ProviderKey", "TokenError", "TokenInfo",
           "authenticate", "check_key_text", "check_lifetime", "check_token", "create_token", "key_text", "list_tokens",
           "looks_like_token", "parse_expiry", "parse_key", "revoke_provider_tokens", "revoke_token", "revoke_tokens",
           "subject_label", "token_id"]
