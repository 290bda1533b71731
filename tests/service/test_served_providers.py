"""Providers' records through a real ``streamwarden serve`` (issue 24, findings 8 and 11).

One service for the module (Spark starts once):

* a reading dated 9999 is refused (422), so it cannot move the watermark of the stream,
  and the readings of the last half hour still close and fill a windowed query's window;
* a tuple of a punctuated stream that names no policy is refused (422 naming ``sp_ts``)
  instead of accepted and never delivered; the same tuple naming its SPs is delivered.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from .conftest import CATALOG
from .served import Served

pytestmark = pytest.mark.spark
#: The service's catalog, with a role policy that opens Vitals to doctors (their own queries need one).
PROVIDERS_CATALOG = CATALOG.replace(
    "policies:\n", "policies:\n  - {id: doctors_vitals, subject: Doctor, streams: [Vitals], privilege: read}\n")
WINDOWED = "SELECT COUNT(*) AS n FROM Readings [RANGE 1 min]"
VITALS = "SELECT patient, pulse FROM Vitals"
SP7 = {"kind": "sp", "streams": "Vitals", "tuples": "*", "attributes": "*", "roles": "Doctor",
       "ts": "2026-03-01T09:00:00Z", "sn": 1, "patient": 7}


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def lines(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    with Served.start(tmp_path_factory.mktemp("providers"), catalog=PROVIDERS_CATALOG) as running:
        for query_id, text in (("w", WINDOWED), ("v", VITALS)):
            answer = running.post("/v1/queries", "ann", json={"id": query_id, "query": text})
            assert answer.status_code == 201, answer.text
        yield running


def test_a_far_future_reading_is_refused_and_windows_still_close(served: Served) -> None:
    start = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=30)

    def reading(sensor: int, at: datetime) -> dict:
        return {"ts": iso(at), "sensor": sensor, "site": "s", "value": 1.0}

    far = served.post("/v1/streams/Readings/records", "readings", content=lines(
        reading(1, start), reading(9, datetime(9999, 1, 1, tzinfo=timezone.utc))))
    assert far.status_code == 422, far.text
    assert far.json()["line"] == 2 and far.json()["error"].startswith("line 2: ts 9999-01-01T00:00:00Z is ahead")
    for body in (lines(reading(1, start + timedelta(seconds=10)), reading(2, start + timedelta(seconds=20))),
                 lines(reading(3, start + timedelta(minutes=5)))):  # past the window's end: it closes
        answer = served.post("/v1/streams/Readings/records", "readings", content=body)
        assert answer.status_code == 201, answer.text
    rows = served.wait_rows("w", "ann", 1)
    assert rows[0]["n"] == 2, rows  # the window of start holds the two readings, not the refused ones


def test_a_tuple_naming_no_policy_is_refused_and_one_naming_its_sps_is_delivered(served: Served) -> None:
    tuple_ = {"ts": "2026-03-01T10:00:00Z", "patient": 7, "ward": "w1", "pulse": 80}
    unstamped = served.post("/v1/streams/Vitals/records", "vitals7", content=lines(SP7, tuple_))
    assert unstamped.status_code == 422, unstamped.text
    assert unstamped.json()["line"] == 2 and unstamped.json()["error"].startswith("line 2: sp_ts is missing")
    stamped = {**tuple_, "sp_ts": SP7["ts"], "sp_csn": 1}
    assert served.post("/v1/streams/Vitals/records", "vitals7", content=lines(SP7, stamped)).status_code == 201
    rows = served.wait_rows("v", "ann", 1)
    assert [(r["patient"], r["pulse"]) for r in rows] == [(7, 80)]
