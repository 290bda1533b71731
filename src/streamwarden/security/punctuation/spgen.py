"""SPGen (Nehme et al., section 4.4): publish a query's results under the policy of its
``ON RESULT`` clause.

The incoming SPs never reach the result (the shields consume them); SPGen emits the new
policy, one SP per ``INSERT SP`` statement (sequence numbers 1..k, one timestamp: the
earliest result's), ahead of the results, and marks every result tuple with that
policy's ``sp_ts``/``sp_csn``, so the output is itself a valid punctuated stream that
another streamwarden can read.

    >>> from datetime import datetime, timezone
    >>> from streamwarden.language.insert_sp import parse_insert_sp
    >>> st = parse_insert_sp("INSERT SP INTO STREAM LET DDP = TUPLES:ALL, SRP = frbac:C")
    >>> list(spgen_lines([st], datetime(2026, 3, 1, 10, tzinfo=timezone.utc), ['{"x":1}']))[1]
    '{"x":1,"sp_ts":"2026-03-01T10:00:00Z","sp_csn":1}'
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Iterable, Iterator, Sequence

from streamwarden.language.insert_sp import InsertSp
from streamwarden.plan.expr import format_timestamp
from streamwarden.security.punctuation.generate import policy_from_statements


def spgen_lines(statements: Sequence[InsertSp], ts: datetime | None, rows: Iterable[str]) -> Iterator[str]:
    """The SP records of the new policy, then each result row (JSON) stamped with it."""
    if ts is None:
        return  # no results: nothing to cover
    sps = policy_from_statements(statements, ts)
    for sp in sps:
        yield json.dumps(sp.to_record(), separators=(",", ":"))
    stamp = f',"sp_ts":"{format_timestamp(ts)}","sp_csn":{len(sps)}}}'
    for row in rows:
        yield row[:-1] + stamp


__all__ = ["spgen_lines"]
