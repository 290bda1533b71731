"""The Security Shield's state machine (Nehme et al., Fig. 10, with issue 3's precisions).

One shield per punctuated (sub-)stream sees records in arrival order:

* an SP older than the newest policy timestamp ever seen is discarded (even after a reset);
* an SP with the current policy's timestamp joins it; a newer one starts a new policy;
  with no current policy, an SP not older than the newest timestamp seen starts one;
* at the first tuple after an sp-batch, the policy's csn is fixed: the largest k such
  that SPs 1..k are all present;
* a tuple whose (sp_ts, sp_csn) differs from (policy ts, csn) is denied and the policy
  is dropped, so later tuples are denied until a newer policy arrives; a tuple without
  sp_ts/sp_csn, or with no current policy, is denied.

This is an operator object with explicit hooks (``on_sp``, ``on_tuple``) and a
``snapshot``/``restore`` pair, so it is unit-testable without Spark and its state can be
checkpointed between micro-batches.

    >>> from datetime import datetime, timezone
    >>> from streamwarden.punctuation.model import sp
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

from streamwarden.language.expressions import parse_timestamp
from streamwarden.plan.expr import format_timestamp
from streamwarden.punctuation.model import SecurityPunctuation, SpPolicy, combine, sp_from_record


@dataclass(frozen=True)
class GoverningPolicy:
    """The complete part of the policy a tuple is checked against (SPs 1..csn)."""

    ts: datetime
    csn: int
    sps: tuple[SecurityPunctuation, ...]

    def as_policy(self) -> SpPolicy:
        return SpPolicy(self.ts, self.sps)


@dataclass
class Shield:
    """State of one shield: the current policy, its csn once fixed, the newest ts seen."""

    current: SpPolicy | None = None
    csn: int | None = None  # fixed at the first tuple after an sp-batch
    newest: datetime | None = None
    discarded: int = 0  # SPs dropped for being older than the newest policy (for the report)
    pending: bool = field(default=False)  # SPs arrived since the last tuple

    def on_sp(self, new: SecurityPunctuation) -> None:
        if self.newest is not None and new.ts < self.newest:
            self.discarded += 1
            return
        if self.current is not None and new.ts == self.current.ts:
            self.current = self.current.with_sp(new)
        else:
            # A newer policy, or the first one (or a re-sent one after the policy was dropped).
            self.current = SpPolicy(new.ts, (new,))
            self.csn = None
        self.newest = new.ts if self.newest is None else max(self.newest, new.ts)
        self.pending = True

    def on_tuple(self, sp_ts: datetime | None, sp_csn: int | None) -> GoverningPolicy | None:
        """The policy governing this tuple, or None when it is denied."""
        if self.current is None:
            return None
        if self.pending or self.csn is None:
            self.csn = self.current.csn
            self.pending = False
        if sp_ts is None or sp_csn is None:
            return None
        if (sp_ts, sp_csn) != (self.current.ts, self.csn):
            self.current, self.csn = None, None
            return None
        if self.csn == 0:
            return None  # SP 1 never arrived: the policy is incomplete, deny by default
        return GoverningPolicy(self.current.ts, self.csn, self.current.complete_part())

    # -- snapshots ------------------------------------------------------------------------
    def snapshot(self) -> str:
        """JSON text of the whole state (checkpointed between micro-batches)."""
        sps = [s.to_record() for s in self.current.sps] if self.current else None
        return json.dumps({
            "policy": sps, "csn": self.csn, "pending": self.pending, "discarded": self.discarded,
            "newest": format_timestamp(self.newest) if self.newest else None,
        })

    @classmethod
    def restore(cls, text: str, where: str = "shield snapshot") -> "Shield":
        data = json.loads(text)
        current = None
        if data["policy"] is not None:
            sps = tuple(sp_from_record(r, where) for r in data["policy"])
            current = SpPolicy(sps[0].ts, sps) if sps else None
        newest = parse_timestamp(data["newest"]) if data["newest"] else None
        return cls(current, data["csn"], newest, data["discarded"], data["pending"])

    def reset(self) -> "Shield":
        """Forget the current policy but keep the newest timestamp (older SPs stay discarded)."""
        return replace(self, current=None, csn=None, pending=False)


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
