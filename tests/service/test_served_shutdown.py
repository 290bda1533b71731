"""``streamwarden serve`` stopped as systemd and container runtimes stop it: SIGTERM to its
whole process group (the service and Spark's JVM) while a provider streams and pipelines run.

The stop is exit 0 with the service's usual last line and no traceback, and it loses nothing:
started again on the same store, checkpoint and output, the service has delivered every
accepted row exactly once (issue 24, finding 12).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from streamwarden.runtime.deliveries import delivered

from .served import Served
from .test_served import Q, readings

pytestmark = pytest.mark.spark


def test_sigterm_to_the_process_group_mid_stream_exits_0_and_loses_nothing(tmp_path: Path) -> None:
    with Served.start(tmp_path) as served:
        assert served.post("/v1/queries", "ann", json={"id": "q1", "query": Q}).status_code == 201
        assert served.post("/v1/streams/Readings/records", "readings", content=readings(1, 20)).status_code == 201
        served.wait_rows("q1", "ann", 20)
        accepted = set(range(1, 21))
        stop = threading.Event()

        def provider() -> None:  # one small file after another, until the service is gone
            start = 1000
            while not stop.is_set():
                try:
                    answer = served.post("/v1/streams/Readings/records", "readings", content=readings(start, 5))
                except httpx.HTTPError:
                    return
                if answer.status_code == 201:
                    accepted.update(range(start, start + 5))
                start += 5
                stop.wait(0.1)  # a provider's pace (polling a subprocess service from outside)

        sending = threading.Thread(target=provider)
        sending.start()
        try:
            served.wait_rows("q1", "ann", 60)  # the network is in the middle of the stream
            assert served.process is not None
            os.killpg(served.process.pid, signal.SIGTERM)  # systemd's KillMode=control-group, a container's stop
            code = served.process.wait(120)
        finally:
            stop.set()
            sending.join(60)
        log = Path(served.log).read_text(errors="replace")  # type: ignore[arg-type]
        assert code == 0, log[-3000:]
        assert "Traceback" not in log and "Exception" not in log, log[-3000:]
        entries = [json.loads(line) for line in log.splitlines() if line.strip()]  # JSON lines only: no JVM log
        assert entries[-1]["message"].startswith("stopped:"), entries[-1]
        assert not [e for e in entries if e["level"] in ("error", "critical")], entries
        before = delivered(served.root / "out" / "ann" / "u03ann_q1")  # rows delivered before the restart

        served.restart()
        rows = served.wait_rows("q1", "ann", len(accepted), timeout=180)
        counts = Counter(r["sensor"] for r in rows)
        assert len(rows) == len(accepted) and max(counts.values()) == 1, counts.most_common(3)
        assert set(counts) == accepted
        assert 60 <= before <= len(accepted)
