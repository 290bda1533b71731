"""Who is calling, and what they did: bearer tokens and the hash-chained audit trail.

Tokens (users' and data providers') and the audit trail live in the store; only a token's
hash is kept. The functions here are those of :mod:`streamwarden.catalog.identity` and
:mod:`streamwarden.catalog.audit` that the command line and the service use.

Every change made through the API is an audit record (:mod:`streamwarden.catalog.changes`),
under the actor the store was opened for: :data:`OPERATOR` by default
(:func:`operator_principal`: ``cli:`` and ``$STREAMWARDEN_OPERATOR``, else the OS user), the
name a caller gives with ``actor=``, or nobody with ``actor=None`` (a front end whose own
trail records the change).

    >>> import os, tempfile
    >>> from streamwarden.api import CatalogStore, load_catalog_text
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "c.db")
    >>> store = CatalogStore(url, actor="app:docs")
    >>> _ = store.save(load_catalog_text("streams: {S: {schema: {ts: timestamp}}}\\nusers: {ann: {}}"))
    >>> authenticate(url, create_token(store, "ann")).label
    'user:ann'
    >>> [(r.principal, r.action, r.object) for r in audit_records(url)], verify_audit(url).ok
    ([('app:docs', 'catalog.update', 'catalog'), ('app:docs', 'token.create', 'user:ann')], True)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Mapping

from streamwarden.catalog import audit
from streamwarden.catalog.audit import AuditError, AuditRecord, VerifyResult, append_all, clean_text, writable
from streamwarden.catalog.changes import OPERATOR, OPERATOR_ENV, Actor, operator_principal
from streamwarden.catalog.identity import (Authenticated, Principal, ProviderKey, authenticate, check_key_text,
                                           check_token, create_token, parse_expiry, revoke_provider_tokens,
                                           revoke_token, revoke_tokens, subject_label, token_id)
from streamwarden.catalog.store import CatalogStore


def append_audit(store: str | CatalogStore, principal: str, action: str, object: str, outcome: str, *,
                 policies: Iterable[str] = (), request_id: str | None = None,
                 detail: Mapping[str, Any] | None = None) -> AuditRecord:
    """Append one record to the store's audit trail and return it; raises :class:`AuditError`
    for a field the trail refuses, writing nothing (see :func:`streamwarden.catalog.audit.append`)."""
    return audit.append(store, principal, action, object, outcome, policies=policies, request_id=request_id,
                        detail=detail)


def audit_records(store: str | CatalogStore, since: datetime | str | None = None,
                  principal: str | None = None) -> list[AuditRecord]:
    """The trail's records in order, at or after ``since`` and of ``principal`` when given (not verified)."""
    return audit.records(store, since, principal)


def verify_audit(store: str | CatalogStore, anchor: tuple[int, str] | None = None) -> VerifyResult:
    """Check the trail's hash chain and head (and, with ``anchor``, that it still holds that record)."""
    return audit.verify(store, anchor)


def parse_audit_anchor(text: str) -> tuple[int, str]:
    """``SEQ:HASH`` as ``audit verify`` prints the head, as a (seq, hash) pair; raises :class:`AuditError`."""
    return audit.parse_anchor(text)


__all__ = [
    "OPERATOR", "OPERATOR_ENV", "Actor", "operator_principal",
    "AuditError", "AuditRecord", "Authenticated", "Principal", "ProviderKey", "VerifyResult", "append_all",
    "append_audit", "audit_records", "authenticate", "check_key_text", "check_token", "clean_text", "create_token",
    "parse_audit_anchor", "parse_expiry", "revoke_provider_tokens", "revoke_token", "revoke_tokens", "subject_label",
    "token_id",
    "verify_audit", "writable",
]
