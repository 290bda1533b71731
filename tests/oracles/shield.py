"""The Security Shield's state machine (Nehme et al., Fig. 10, with issue 3's precisions): the
reference model the engine's JVM shield (``ShieldState.java``) is tested against.

One shield per punctuated (sub-)stream sees records in arrival order:

* an SP older than the newest policy timestamp ever seen is discarded (even after a reset);
* an SP with the current policy's timestamp joins it; a newer one starts a new policy;
  with no current policy, an SP not older than the newest timestamp seen starts one;
* at the first tuple after an sp-batch, the policy's csn is fixed: the largest k such
  that SPs 1..k are all present;
* a tuple whose (sp_ts, sp_csn) differs from (policy ts, csn) is denied and the policy
  is dropped, so later tuples are denied until a newer policy arrives; a tuple without
  sp_ts/sp_csn, or with no current policy, is denied;
* an SP the engine quarantined (a broken record, dropped unread: :meth:`Shield.on_quarantined_sp`)
  taints its policy, which then grants no tuple until a newer policy replaces it: a lost
  SP (a negative one, say) never turns into access.

This is an operator object with explicit hooks (``on_sp``, ``on_tuple``) and a
``snapshot``/``restore`` pair, so it is unit-testable without Spark and its state can be
checkpointed between micro-batches.

    >>> from datetime import datetime, timezone
    >>> from streamwarden.catalog.punctuations import sp
    >>> t0 = datetime(2026, 3, 1, 10, tzinfo=timezone.utc)
    >>> shield = Shield()
    >>> shield.on_sp(sp("HeartRate", "*", "*", "C", ts=t0, sn=1))
    >>> shield.on_tuple(t0, 1) is not None, shield.on_tuple(t0, 2) is None, shield.on_tuple(t0, 1) is None
    (True, True, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Iterable, Protocol

import numpy as np

from streamwarden.catalog.punctuations import EPOCH, SecurityPunctuation, sp_from_record
from streamwarden.errors import StreamwardenError
from streamwarden.language.expressions import parse_timestamp
from streamwarden.plan.expr import format_timestamp


@dataclass(frozen=True)
class SpPolicy:
    """An sp-batch: the SPs sharing one policy timestamp."""

    ts: datetime
    sps: tuple[SecurityPunctuation, ...] = field(default=())

    @classmethod
    def of(cls, sps: Iterable[SecurityPunctuation]) -> "SpPolicy":
        sps = tuple(sps)
        return cls(sps[0].ts if sps else EPOCH, sps)

    def with_sp(self, new: SecurityPunctuation) -> "SpPolicy":
        """The policy with one more SP (a duplicate sequence number replaces the old one)."""
        kept = tuple(s for s in self.sps if s.sn != new.sn)
        return replace(self, sps=kept + (new,))

    @property
    def csn(self) -> int:
        """Largest k such that the SPs with sequence numbers 1..k are all present."""
        present = {s.sn for s in self.sps}
        k = 0
        while k + 1 in present:
            k += 1
        return k

    @property
    def immutable(self) -> bool:
        return any(s.immutable for s in self.sps)

    def accessible(self, stream: str, key: object, attribute: str, roles: Iterable[str]) -> bool:
        """Positive SP matches object and a role, and no negative SP does."""
        roles = tuple(roles)
        granted = denied = False
        for s in self.sps:
            if s.matches_object(stream, key, attribute) and s.matches_roles(roles):
                if s.positive:
                    granted = True
                else:
                    denied = True
        return granted and not denied


class PolicyPart(Protocol):
    """What the shield needs of an SP: its policy timestamp and sequence number."""

    ts: Any
    sn: int


@dataclass(frozen=True)
class GoverningPolicy:
    """The complete part of the policy a tuple is checked against (SPs 1..csn)."""

    ts: Any
    csn: int
    sps: tuple[Any, ...]

    def as_policy(self) -> SpPolicy:
        return SpPolicy(self.ts, self.sps)


@dataclass
class Shield:
    """State of one shield: the current policy, its csn once fixed, the newest ts seen.

    SPs are any objects with ``ts`` and ``sn`` (a :class:`SecurityPunctuation`, or the
    engine's compact SP records); timestamps are anything ordered (datetimes, micros).
    """

    current_ts: Any = None
    sps: dict[int, Any] | None = None  # the current policy's SPs by sequence number; None: no policy
    csn: int | None = None  # fixed at the first tuple after an sp-batch
    newest: Any = None
    discarded: int = 0  # SPs dropped for being older than the newest policy (for the report)
    pending: bool = field(default=False)  # SPs arrived since the last tuple
    tainted: bool = False  # the current policy lost an SP to quarantine: it grants nothing

    @property
    def current(self) -> SpPolicy | None:
        return None if self.sps is None else SpPolicy(self.current_ts, tuple(self.sps.values()))

    def on_sp(self, new: PolicyPart) -> None:
        if self.newest is not None and new.ts < self.newest:
            self.discarded += 1
            return
        if self.sps is not None and new.ts == self.current_ts:
            self.sps.pop(new.sn, None)  # a duplicate sequence number replaces the old SP
            self.sps[new.sn] = new
        else:
            # A newer policy, or the first one (or a re-sent one after the policy was dropped).
            self.current_ts, self.sps, self.csn, self.tainted = new.ts, {new.sn: new}, None, False
        self.newest = new.ts if self.newest is None else max(self.newest, new.ts)
        self.pending = True

    def on_quarantined_sp(self, ts: Any) -> None:
        """An SP of this sub-stream that the engine quarantined (a broken record, never read):
        its policy is incomplete and grants no tuple. ``ts`` is its policy timestamp, or None
        when unreadable (then the policy in force is tainted); with one, it acts on the state
        as the SP would have (discarded when older than the newest policy, joining the current
        one, or starting a new one).

            >>> from streamwarden.catalog.punctuations import sp
            >>> shield = Shield()
            >>> shield.on_sp(sp("S", "*", "*", "C", ts=1, sn=1)); shield.on_tuple(1, 1) is not None
            True
            >>> shield.on_quarantined_sp(1); shield.on_tuple(1, 1) is None
            True
        """
        if ts is None:
            self.tainted = self.sps is not None
            return
        if self.newest is not None and ts < self.newest:
            return  # the SP would have been discarded: it governed nothing
        if self.sps is None or ts != self.current_ts:
            self.current_ts, self.sps, self.csn = ts, {}, None
        self.tainted = True
        self.newest = ts if self.newest is None else max(self.newest, ts)
        self.pending = True

    def _fix_csn(self) -> int:
        if self.pending or self.csn is None:
            assert self.sps is not None
            k = 0
            while k + 1 in self.sps:
                k += 1
            self.csn, self.pending = k, False
        return self.csn

    def governing(self) -> GoverningPolicy | None:
        """The policy the next tuple with the right ts.csn would be checked against."""
        if self.sps is None:
            return None
        csn = self._fix_csn()
        return GoverningPolicy(self.current_ts, csn, tuple(s for s in self.sps.values() if s.sn <= csn))

    def on_tuple(self, sp_ts: Any, sp_csn: int | None) -> GoverningPolicy | None:
        """The policy governing this tuple, or None when it is denied."""
        if self.sps is None:
            return None
        csn = self._fix_csn()
        if sp_ts is None or sp_csn is None:
            return None
        if (sp_ts, sp_csn) != (self.current_ts, csn):
            self._drop()
            return None
        if csn == 0 or self.tainted:
            return None  # SP 1 never arrived, or an SP was quarantined: the policy is incomplete, deny
        return self.governing()

    def _drop(self) -> None:
        self.sps, self.csn, self.current_ts, self.tainted = None, None, None, False

    def on_tuples(self, sp_ts: np.ndarray, sp_csn: np.ndarray) -> tuple[GoverningPolicy | None, np.ndarray]:
        """:meth:`on_tuple` for a run of tuples with no SP between them, vectorised.

        ``sp_ts``/``sp_csn`` are float arrays (NaN: the tuple carries none). Returns the
        governing policy and which tuples it governs (the others are denied).
        """
        allowed = np.zeros(len(sp_ts), dtype=bool)
        if self.sps is None:
            return None, allowed
        csn = self._fix_csn()
        present = ~(np.isnan(sp_ts) | np.isnan(sp_csn))
        right = present & (sp_ts == self.current_ts) & (sp_csn == csn)
        wrong = present & ~right
        governing = self.governing()
        tainted = self.tainted
        if wrong.any():
            first = int(np.argmax(wrong))
            right[first:] = False
            self._drop()
        if csn == 0 or tainted:
            return None, allowed
        return governing, right

    # -- snapshots ------------------------------------------------------------------------
    def snapshot(self, encode: Callable[[Any], object] = lambda s: s.to_record()) -> str:
        """JSON text of the whole state (checkpointed between micro-batches)."""
        return json.dumps({
            "policy_ts": _dump_ts(self.current_ts),
            "sps": None if self.sps is None else [encode(s) for s in self.sps.values()],
            "csn": self.csn, "pending": self.pending, "discarded": self.discarded, "newest": _dump_ts(self.newest),
            "tainted": self.tainted,
        })

    @classmethod
    def restore(cls, text: str, decode: Callable[[Any], Any] | None = None) -> "Shield":
        """The state :meth:`snapshot` wrote; ``decode`` reads an SP back from its JSON value."""
        data = json.loads(text)
        decode = decode or (lambda r: sp_from_record(r, "shield snapshot"))
        sps = None if data["sps"] is None else {s.sn: s for s in map(decode, data["sps"])}
        return cls(_load_ts(data["policy_ts"]), sps, data["csn"], _load_ts(data["newest"]), data["discarded"],
                   data["pending"], data.get("tainted", False))

    def reset(self) -> "Shield":
        """Forget the current policy but keep the newest timestamp (older SPs stay discarded)."""
        return replace(self, current_ts=None, sps=None, csn=None, pending=False, tainted=False)


def _dump_ts(value: Any) -> object:
    return {"iso": format_timestamp(value)} if isinstance(value, datetime) else value


def _load_ts(value: object) -> Any:
    return parse_timestamp(value["iso"]) if isinstance(value, dict) else value


def combine(provider: bool, server: bool | None, mode: str, immutable: bool) -> bool:
    """Section 4.2: a provider's decision combined with the server's (``None``: no server policy)."""
    if server is None or immutable:
        return provider
    if mode == "union":
        return provider or server
    if mode == "intersect":
        return provider and server
    raise StreamwardenError(f"combine must be intersect or union, not {mode!r}")


def visible_attributes(governing: GoverningPolicy | None, stream: str, key: object, attributes: list[str],
                       roles: frozenset[str], server: SpPolicy | None = None,
                       mode: str = "intersect") -> list[str] | None:
    """The attributes of a tuple the user may see, or None when the tuple is not delivered.

    Each attribute is decided by the provider's policy combined with the stream's server
    policy (intersect or union; immutable provider policies ignore the server). The tuple
    is delivered when at least one attribute other than ``ts`` is visible.
    """
    if governing is None:
        return None
    provider = governing.as_policy()
    immutable = provider.immutable
    visible = []
    for attribute in attributes:
        mine = provider.accessible(stream, key, attribute, roles)
        theirs = server.accessible(stream, key, attribute, roles) if server is not None else None
        if combine(mine, theirs, mode, immutable):
            visible.append(attribute)
    return visible if any(a != "ts" for a in visible) else None
