"""Turn INSERT SP statements into the SP records a data provider sends.

Several statements given together form one policy: they share one timestamp and get
sequence numbers 1..k in order (section 4: an sp-batch).

    >>> from datetime import datetime, timezone
    >>> from streamwarden.language.insert_sp import parse_insert_sp
    >>> st = parse_insert_sp("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES:[120, 133], SRP = {GP, C}")
    >>> [str(s) for s in policy_from_statements([st], datetime(2026, 3, 1, 10, tzinfo=timezone.utc))]
    ['<HeartRate, [120, 133], * | {GP, C} | + | F | 2026-03-01T10:00:00Z | 1>']
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from streamwarden.catalog.punctuations import SecurityPunctuation
from streamwarden.language.insert_sp import InsertSp
from streamwarden.language.patterns import Constant, Wildcard


def policy_from_statements(statements: Sequence[InsertSp], ts: datetime,
                           provider: object = None) -> list[SecurityPunctuation]:
    """One policy: the statements' SPs with timestamp ``ts`` and sequence numbers 1..k."""
    sps = []
    for sn, st in enumerate(statements, start=1):
        streams = st.streams or (Constant(st.stream) if st.stream else Wildcard())
        sps.append(SecurityPunctuation(streams, st.tuples, st.attributes, st.roles, st.positive, st.immutable,
                                       st.grant, ts, sn, provider))
    return sps
