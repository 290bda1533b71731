"""record_delivery logs a batch once, reading only the log's tail: the cost of a delivery does
not grow with the length of the run, and a replayed batch (Spark replays its latest) is not
logged twice."""

from __future__ import annotations

from pathlib import Path

from streamwarden.runtime.deliveries import LOG, TAIL_BYTES, deliveries, record_delivery


def test_a_replayed_batch_is_logged_once_however_long_the_log(tmp_path: Path) -> None:
    entries = TAIL_BYTES // 20 + 100  # more than the tail holds
    (tmp_path / LOG).write_text("".join(f'{{"batch": "b{i:08d}", "rows": 1}}\n'
                                                       for i in range(entries)))
    assert len(deliveries(tmp_path)) == entries  # the log's name and format, as record_delivery writes it
    record_delivery(tmp_path, f"b{entries - 1:08d}", 1)  # the latest, again (a replay)
    record_delivery(tmp_path, "b99999999", 3)
    record_delivery(tmp_path, "b99999999", 3)
    logged = deliveries(tmp_path)
    assert len(logged) == entries + 1 and logged[-1].batch == "b99999999" and logged[-1].rows == 3
