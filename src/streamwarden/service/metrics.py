"""``GET /metrics``: the service's counters in Prometheus' text format (version 0.0.4).

Rows delivered per query and user come from the delivery logs (so they survive restarts);
rows read and micro-batch durations per pipeline from Spark's progress; active grants
from the store; requests per route and outcome from the service itself. Labels hold names
only (queries, users, pipelines): never a token or a row value.

    >>> counts = {("query.list", "ok"): 2}
    >>> text = Metrics().counter("streamwarden_requests_total", "Requests.", counts, ("action", "outcome"))
    >>> print(text, end="")
    # HELP streamwarden_requests_total Requests.
    # TYPE streamwarden_requests_total counter
    streamwarden_requests_total{action="query.list",outcome="ok"} 2
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Mapping, Sequence, TypeVar

Key = TypeVar("Key", bound=tuple[str, ...])  # a series' label values


class Metrics:
    """The service's own counters, and the text format."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()
        self.records_in: Counter[tuple[str]] = Counter()
        self._lock = threading.Lock()

    def request(self, action: str, outcome: str) -> None:
        with self._lock:
            self.requests[(action, outcome)] += 1

    def records(self, stream: str, count: int) -> None:
        with self._lock:
            self.records_in[(stream,)] += count

    def counter(self, name: str, help_text: str, values: Mapping[Key, float],
                labels: Sequence[str], kind: str = "counter") -> str:
        lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for key, value in sorted(values.items()):
            pairs = ",".join(f'{label}="{_escape(v)}"' for label, v in zip(labels, key))
            lines.append(f"{name}{{{pairs}}} {_number(value)}" if pairs else f"{name} {_number(value)}")
        return "\n".join(lines) + "\n"

    def snapshot(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str], int]]:
        with self._lock:
            return dict(self.requests), dict(self.records_in)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


__all__ = ["Metrics"]
