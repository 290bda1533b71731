"""A stream read from a Kafka topic its catalog declares: the declaration's checks (with
file:line:col), and replay over the topic's retained records through the user's policies,
against the real broker (kafka_broker, conftest.py)."""

from __future__ import annotations

import re

import pytest

from conftest import ts
from kafka_tools import create_topic, produce
from streamwarden.api.queries import replay
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.errors import CatalogError, StreamwardenError

pytestmark = pytest.mark.spark

CATALOG = """\
streams:
  Vitals:
    schema: {{ts: timestamp, ward: string, patient: string, pulse: int}}
    source:
      kafka: {{bootstrap: "{bootstrap}", topic: {topic}{extra}}}
roles: {{Nurse: {{}}}}
users: {{kim: {{roles: [Nurse]}}, eve: {{roles: []}}}}
policies:
  - {{id: p1, subject: Nurse, streams: [Vitals], attributes: [ts, ward, pulse], where: "ward = 'w1'", privilege: read}}
"""


def catalog(bootstrap: str, topic: str, extra: str = "") -> object:
    return load_catalog_text(CATALOG.format(bootstrap=bootstrap, topic=topic, extra=extra), "c.yaml")


READINGS = [{"ts": ts(i), "ward": "w1" if i % 2 else "w2", "patient": f"p{i}", "pulse": 60 + i} for i in range(20)]


@pytest.mark.parametrize("source, words", [
    ("{kafka: {bootstrap: 'h:1', topic: a, pattern: b}}", "exactly one of topic or pattern"),
    ("{kafka: {bootstrap: 'h:1', topic: 'a/../b'}}", "not a Kafka topic name"),
    ("{kafka: {bootstrap: 'h:1', topic: a, format: avro}}", "format of the Kafka source of S must be json"),
    ("{kafka: {bootstrap: 'h:1', topic: a, options: {enable.auto.commit: true}}}", "set by streamwarden"),
    ("{kafka: {bootstrap: 'h:1', topic: a, topics: b}}", "unknown key 'topics'"),
    ("{kafka: {topic: a}}", "needs bootstrap"),
    ("{files: x}", "must be 'files' or {kafka"),
])
def test_a_bad_declaration_is_one_line_naming_its_place(source: str, words: str) -> None:
    text = f"streams:\n  S:\n    schema: {{ts: timestamp, v: int}}\n    source: {source}\n"
    with pytest.raises(CatalogError) as caught:
        load_catalog_text(text + "roles: {}\nusers: {}\npolicies: []\n", "c.yaml")
    first = str(caught.value).splitlines()[0]
    assert re.match(r"c\.yaml:4:\d+: ", first) and words in first, first


def test_a_punctuated_stream_over_kafka_is_refused_not_read_unshielded() -> None:
    text = ("streams:\n  S:\n    schema: {ts: timestamp, v: int}\n    key: v\n"
            "    source: {kafka: {bootstrap: 'h:1', topic: a}}\nroles: {}\nusers: {}\npolicies: []\n")
    with pytest.raises(CatalogError, match="security punctuations over Kafka are not supported yet"):
        load_catalog_text(text, "c.yaml")


def test_replay_over_a_topic_returns_what_the_policy_allows(spark, kafka_broker, kafka_topic) -> None:
    produce(kafka_broker.bootstrap, kafka_topic, READINGS[:10], partition=0)
    produce(kafka_broker.bootstrap, kafka_topic, READINGS[10:], partition=1)
    c = catalog(kafka_broker.bootstrap, kafka_topic)
    rows = replay(c, "kim", "SELECT * FROM Vitals WHERE pulse > 65", {}, spark=spark)
    expected = [r for r in READINGS if r["ward"] == "w1" and r["pulse"] > 65]
    assert sorted(r["pulse"] for r in rows) == [r["pulse"] for r in expected]
    assert all(r.get("patient") is None for r in rows)  # the policy hides it: masked, as over files
    assert replay(c, "eve", "SELECT * FROM Vitals", {}, spark=spark) == []  # no policy: nothing


def test_the_record_time_can_stand_for_ts(spark, kafka_broker, kafka_topic) -> None:
    produce(kafka_broker.bootstrap, kafka_topic, [{"ward": "w1", "patient": "p", "pulse": 70}])
    rows = replay(catalog(kafka_broker.bootstrap, kafka_topic, ", time: record"), "kim", "SELECT ts, pulse FROM Vitals",
                  {}, spark=spark)
    assert [r["pulse"] for r in rows] == [70] and rows[0]["ts"].startswith("20")


@pytest.mark.parametrize("bad, why", [(b"{not json", "not valid JSON"), (b'{"ts": "2026-03-01T10:00:00Z", '
                                      b'"ward": "w1", "pulse": "high"}', "not valid JSON of the catalog's types"),
                                      (b'{"ward": "w1", "pulse": 1}', "record has no ts")])
def test_a_broken_record_is_named_by_topic_partition_and_offset(spark, kafka_broker, bad: bytes, why: str) -> None:
    topic = create_topic(kafka_broker.bootstrap, "broken")
    produce(kafka_broker.bootstrap, topic, READINGS[:3])
    produce(kafka_broker.bootstrap, topic, [bad])
    with pytest.raises(StreamwardenError) as caught:
        replay(catalog(kafka_broker.bootstrap, topic), "kim", "SELECT * FROM Vitals", {}, spark=spark)
    message = str(caught.value)
    assert why in message and f"topic {topic} partition 0 offset 3" in message, message
    assert "high" not in message and "not json" not in message  # the record's text is never quoted


@pytest.mark.parametrize("query", ["SELECT * FROM Vitals WHERE pulse > 65",
                                   "SELECT ward, pulse FROM Vitals WHERE pulse < 70",
                                   "SELECT ts, pulse FROM Vitals WHERE ward = 'w1' AND pulse > 70"])
def test_replay_over_a_topic_equals_replay_over_the_same_records_in_a_file(spark, kafka_broker, tmp_path,
                                                                            query: str) -> None:
    from conftest import write_jsonl

    topic = create_topic(kafka_broker.bootstrap, "same", partitions=2)
    produce(kafka_broker.bootstrap, topic, READINGS[::2], partition=0)
    produce(kafka_broker.bootstrap, topic, READINGS[1::2], partition=1)
    over_kafka = replay(catalog(kafka_broker.bootstrap, topic), "kim", query, {}, spark=spark)
    files = load_catalog_text("\n".join(line for line in CATALOG.format(bootstrap="", topic="", extra="").splitlines()
                                        if "source:" not in line and "kafka:" not in line), "c.yaml")
    over_files = replay(files, "kim", query, {"Vitals": write_jsonl(tmp_path / "v.jsonl", READINGS)}, spark=spark)
    key = lambda r: sorted((k, str(v)) for k, v in r.items())  # noqa: E731
    assert sorted(over_kafka, key=key) == sorted(over_files, key=key) and over_files


def test_an_input_given_for_a_kafka_stream_is_refused(spark, kafka_broker, kafka_topic, tmp_path) -> None:
    with pytest.raises(StreamwardenError, match="is read from Kafka .* give no --input for it"):
        replay(catalog(kafka_broker.bootstrap, kafka_topic), "kim", "SELECT * FROM Vitals",
               {"Vitals": tmp_path}, spark=spark)


def test_what_does_not_read_kafka_yet_refuses_it_in_one_line(spark, kafka_broker, kafka_topic, tmp_path) -> None:
    """Fail closed: a continuous run, a [ROWS n] window and the network over a Kafka stream are
    refused before Spark starts, never a KeyError deep in the runtime."""
    from streamwarden.api.queries import run
    from streamwarden.errors import UnsupportedError

    c = catalog(kafka_broker.bootstrap, kafka_topic)
    with pytest.raises(UnsupportedError, match="only replay reads Kafka yet"):
        run(c, "kim", "SELECT * FROM Vitals", {}, str(tmp_path / "out"), checkpoint=tmp_path / "cp", spark=spark)
    with pytest.raises(UnsupportedError, match=r"\[ROWS n\] window over it is not supported yet"):
        replay(c, "kim", "SELECT COUNT(*) AS n FROM Vitals [ROWS 3]", {}, spark=spark)
