"""Errors as the service answers them: JSON ``{"error": "one sentence", ...}``, never a traceback.

    >>> ApiError(404, "no query q9").body()
    {'error': 'no query q9'}
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request that cannot be served as asked: its HTTP status, one clear sentence, and
    fields that locate the fault (``line``/``column`` in a text the caller sent)."""

    def __init__(self, status: int, message: str, **extra: Any):
        message = _encodable(message)
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers: dict[str, str] = {}  # e.g. Retry-After on a 429 or a 503 (retry_later)
        self.extra = {k: _encodable(v) if isinstance(v, str) else v for k, v in extra.items() if v is not None}

    def body(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}


def _encodable(text: str) -> str:
    r"""``text`` as the answer can encode it: a lone surrogate a caller sent (JSON's ``\ud800``) escaped.

    >>> _encodable("id \ud800")
    'id \\ud800'
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unauthenticated(reason: str = "a valid bearer token is required") -> ApiError:
    return ApiError(401, reason)


def forbidden(reason: str) -> ApiError:
    return ApiError(403, reason)


def not_found(what: str) -> ApiError:
    return ApiError(404, what)


def retry_later(status: int, message: str, seconds: int) -> ApiError:
    """A refusal the caller may try again in ``seconds`` (429: too many requests; 503: busy).

    >>> refused = retry_later(429, "too many registrations: try again in 3 s", 3)
    >>> refused.status, refused.headers, refused.body()
    (429, {'Retry-After': '3'}, {'error': 'too many registrations: try again in 3 s'})
    """
    error = ApiError(status, message)
    error.headers["Retry-After"] = str(max(1, seconds))
    return error


def position_of(message: str) -> dict[str, int]:
    """``line``/``column`` from a message that starts ``NAME:LINE:COLUMN:`` (the loaders' form).

    >>> position_of("<catalog>:3:7: unknown type 'integer'")
    {'line': 3, 'column': 7}
    >>> position_of("no position")
    {}
    """
    parts = message.split(":", 3)
    if len(parts) == 4 and parts[1].strip().isdigit() and parts[2].strip().isdigit():
        return {"line": int(parts[1]), "column": int(parts[2])}
    return {}


__all__ = ["ApiError", "forbidden", "not_found", "position_of", "retry_later", "unauthenticated"]
