"""Who a request speaks for: the store's bearer tokens, or JWTs of one trusted issuer.

Store tokens (``streamwarden token create``) are checked by
:func:`streamwarden.catalog.identity.check_token`: only their SHA-256 is stored, compared
in constant time. What a token proves is kept in memory while the store's generation stays
(:class:`~streamwarden.catalog.generation.GenerationCache`: one read of a counter per request
instead of three queries), its expiry applied at every request: a revocation, a removed user
or a new catalog, from this process or another, moves the generation and is seen by the next
request. With ``--jwks``, a JWT is accepted as well when it is signed by a key of
that JWKS (a file, or an ``https://`` URL fetched and cached by PyJWT), with an
asymmetric algorithm only (never ``none`` or an HMAC, whose key would be the public JWKS),
and its ``iss``, ``aud`` and ``exp`` as configured. ``sub`` names the user, who must be
declared by the stored catalog; a ``roles`` claim holding ``streamwarden-admin`` makes an
admin. Anything else is anonymous (None): the caller answers 401 without saying which
check failed.

    >>> from streamwarden.api import CatalogStore
    >>> import tempfile, os
    >>> store = CatalogStore("sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db"))
    >>> Authenticator(store).principal("Bearer nonsense") is None
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import jwt

from streamwarden.api import Authenticated, CatalogStore, GenerationCache, Principal, check_token
from streamwarden.errors import StreamwardenError
from streamwarden.names import name_problem

ADMIN_ROLE = "streamwarden-admin"
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MAX_TOKEN = 8192  # characters of a bearer token: a JWT with a few claims is well under 2,000


@dataclass(frozen=True)
class JwtIssuer:
    """The one issuer whose JWTs are accepted: its JWKS (a file or URL), ``iss`` and ``aud``."""

    jwks: str
    issuer: str
    audience: str

    def keys(self) -> "_Keys":
        return _Keys(self.jwks)


class _Keys:
    """The issuer's signing keys by ``kid``: a file read once, a URL through PyJWT's cached client."""

    def __init__(self, source: str):
        self.client: jwt.PyJWKClient | None = None
        self.keys: dict[str | None, jwt.PyJWK] = {}
        if source.startswith(("https://", "http://")):
            self.client = jwt.PyJWKClient(source, cache_keys=True, lifespan=300, timeout=5)
            return
        try:
            text = Path(source).read_text(encoding="utf-8")
            key_set = jwt.PyJWKSet.from_json(text)
        except OSError as exc:
            raise StreamwardenError(f"--jwks {source}: cannot read it ({exc.strerror or exc})") from None
        except (jwt.PyJWKSetError, jwt.InvalidKeyError, ValueError) as exc:
            raise StreamwardenError(f"--jwks {source}: not a JSON Web Key Set ({exc})") from None
        for key in key_set.keys:
            self.keys[key.key_id] = key

    def signing_key(self, token: str) -> jwt.PyJWK | None:
        if self.client is not None:
            try:
                return self.client.get_signing_key_from_jwt(token)
            except jwt.PyJWKClientError:
                return None
        kid = jwt.get_unverified_header(token).get("kid")
        if kid in self.keys:
            return self.keys[kid]
        return next(iter(self.keys.values())) if len(self.keys) == 1 and kid is None else None


class Authenticator:
    """``principal(header)``: the :class:`Principal` an ``Authorization`` header proves, or None."""

    def __init__(self, store: CatalogStore, issuer: JwtIssuer | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)):
        self.store = store
        self.issuer = issuer
        self.clock = clock
        self._keys = issuer.keys() if issuer is not None else None
        # keyed by the token's SHA-256, not the token: no secret is kept longer than its request
        self._stored: GenerationCache[str, Authenticated] = GenerationCache(store.engine)

    def principal(self, header: str | None) -> Principal | None:
        token = bearer(header)
        if token is None:
            return None
        found = self._stored.get(_key(token), lambda: check_token(self.store, token))
        if found is not None:
            return found.principal if found.valid_at(self.clock()) else None
        if self._keys is None or token.count(".") != 2:
            return None
        return self._from_jwt(token)

    def kept(self, header: str | None) -> Principal | None:
        """The principal a store token proves, from what is kept only (one read of the store's
        generation, on a connection of its own), for a route on an event loop; None when only
        :meth:`principal` can say (not kept, expired, a JWT, no token), which it must then ask
        off the loop: it may wait for the store or fetch the issuer's keys."""
        token = bearer(header)
        found = self._stored.peek(_key(token)) if token is not None else None
        return found.principal if found is not None and found.valid_at(self.clock()) else None

    def _from_jwt(self, token: str) -> Principal | None:
        assert self.issuer is not None and self._keys is not None
        try:
            key = self._keys.signing_key(token)
            if key is None:
                return None
            claims = jwt.decode(token, key, algorithms=list(ALGORITHMS), issuer=self.issuer.issuer,
                                audience=self.issuer.audience, options={"require": ["exp", "iss", "aud", "sub"]})
        except (jwt.PyJWTError, ValueError, TypeError, json.JSONDecodeError):
            return None
        user = claims.get("sub")
        if not isinstance(user, str) or name_problem("user", user) is not None or user not in self.store.users():
            return None
        roles = claims.get("roles", [])
        admin = isinstance(roles, list) and ADMIN_ROLE in roles
        return Principal("user", user, admin, token_id="jwt")


def _key(token: str) -> str:
    """What a token's answer is kept under: its SHA-256, so that no secret outlives its request."""
    return hashlib.sha256(token.encode()).hexdigest()


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header (None for anything else).

    >>> bearer("Bearer abc"), bearer("bearer  abc "), bearer("Basic abc"), bearer(None)
    ('abc', 'abc', None, None)
    """
    if not header or len(header) > MAX_TOKEN + 16:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


__all__ = ["ADMIN_ROLE", "Authenticator", "JwtIssuer", "bearer"]
