"""Real Kafka clients for the tests (confluent-kafka, librdkafka): topics made, records produced
and read back, against the broker the ``kafka_broker`` fixture starts. No mock anywhere."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Iterable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

_serial = itertools.count()


def quiet(config: dict[str, Any]) -> dict[str, Any]:
    """A client's config whose librdkafka logs stay out of the test's output (a broker stopping
    on purpose would print connection errors)."""
    return {**config, "log_level": 0, "logger": _Silent()}


class _Silent:
    def log(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return self.log


def create_topic(bootstrap: str, name: str, *, partitions: int = 1) -> str:
    """A new topic named after ``name`` (made safe, and unique in the run); returns its name."""
    topic = f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)[:180]}-{next(_serial)}"
    admin = AdminClient(quiet({"bootstrap.servers": bootstrap}))
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    return topic


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any] | bytes | str], *,
            partition: int | None = None, key: bytes | None = None) -> int:
    """Produce ``records`` (JSON objects, or raw values as given) and wait for every ack."""
    producer = Producer(quiet({"bootstrap.servers": bootstrap, "enable.idempotence": True}))
    count = 0
    for record in records:
        value = record if isinstance(record, bytes) else (
            record.encode() if isinstance(record, str) else json.dumps(record).encode())
        extra = {} if partition is None else {"partition": partition}
        producer.produce(topic, value=value, key=key, **extra)
        count += 1
    if producer.flush(30) != 0:
        raise AssertionError(f"{topic}: records were not acknowledged within 30 s")
    return count


def read_all(bootstrap: str, topic: str, *, group: str | None = None, timeout: float = 30.0,
             config: dict[str, Any] | None = None) -> list[tuple[int, int, bytes]]:
    """Every record the topic holds now, as (partition, offset, value), read as a consumer does
    (``read_committed``: what a transaction aborted is never seen)."""
    consumer = Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": group or f"reader-{next(_serial)}",
                               "auto.offset.reset": "earliest", "enable.auto.commit": False,
                               "isolation.level": "read_committed", **(config or {})}))
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if metadata.error is not None:
            raise AssertionError(f"{topic}: {metadata.error}")
        ends = {}
        for p in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        found: list[tuple[int, int, bytes]] = []
        done: set[int] = set()
        while len(done) < len(ends):
            message = consumer.poll(timeout)
            if message is None:
                raise AssertionError(f"{topic}: no record within {timeout} s (read {len(found)})")
            if message.error() is not None:
                continue  # end of a partition, said as an event
            found.append((message.partition(), message.offset(), message.value()))
            if message.offset() + 1 >= ends[message.partition()]:
                done.add(message.partition())
        return sorted(found)
    finally:
        consumer.close()
