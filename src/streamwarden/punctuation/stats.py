"""Policy statistics of a punctuated input, for the SCJoin's adaptive heuristic.

The heuristic (Nehme et al., section 5.4) compares how many tuples share a policy with
how many a window holds. Reading the head of the input is enough to estimate both: it
costs a few milliseconds on the driver and no Spark job.

    >>> # policy_stats("data/HeartRate")  -> PolicyStats(tuples_per_policy=10.0, tuples_per_second=50.0)
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

from streamwarden.language.expressions import parse_timestamp
from streamwarden.punctuation.files import punctuated_files
from streamwarden.punctuation.placement import PolicyStats

SAMPLE_LINES = 20_000


def policy_stats(path: str | Path, sample: int = SAMPLE_LINES) -> PolicyStats | None:
    """Tuples per policy and per second over the first ``sample`` records (None: no tuples)."""
    policies = tuples = 0
    first = last = None
    for file in punctuated_files(path):
        # errors="replace": a broken record is the job's to report (with file:line:col), not a
        # UnicodeDecodeError of this estimate, which only reads the head of the input.
        with file.open(encoding="utf-8", errors="replace", newline="\n") as handle:
            for line in islice(handle, sample - policies - tuples):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    when = parse_timestamp(str(record["ts"]))
                except (ValueError, KeyError, TypeError):
                    continue  # broken records are reported by the job itself
                if record.get("kind") == "sp":
                    policies += record.get("sn") == 1
                    continue
                tuples += 1
                first = when if first is None else min(first, when)
                last = when if last is None else max(last, when)
        if policies + tuples >= sample:
            break
    if not tuples or first is None or last is None:
        return None
    seconds = max((last - first).total_seconds(), 1e-3)
    return PolicyStats(tuples / max(policies, 1), tuples / seconds)


__all__ = ["policy_stats"]
