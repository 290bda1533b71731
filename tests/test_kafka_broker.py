"""The project's JVM side the Maven way, and the real broker it starts: Spark reads and writes
Kafka through the connector `make jars` copied (nothing downloads when Spark starts)."""

from __future__ import annotations

import json

import pytest

from kafka_tools import create_topic, produce, read_all
from streamwarden.engine.jvm import connector_jars, kafka_available

pytestmark = pytest.mark.spark


def test_maven_copied_the_connector_built_for_the_pinned_spark() -> None:
    import pyspark

    names = {p.name for p in connector_jars()}
    assert kafka_available(), "run 'make jars': Spark's Kafka connector is not in build/jvm/lib"
    assert f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar" in names
    assert f"spark-token-provider-kafka-0-10_2.13-{pyspark.__version__}.jar" in names
    assert any(n.startswith("kafka-clients-") for n in names) and any(n.startswith("commons-pool2-") for n in names)


def test_spark_reads_and_writes_the_broker(spark, kafka_broker, kafka_topic) -> None:
    produce(kafka_broker.bootstrap, kafka_topic, [{"v": i} for i in range(10)])
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
             .option("subscribe", kafka_topic).option("startingOffsets", "earliest").load())
    assert sorted(json.loads(r.value)["v"] for r in frame.select("value").collect()) == list(range(10))
    out = create_topic(kafka_broker.bootstrap, "out")
    frame.selectExpr("value").write.format("kafka").option("kafka.bootstrap.servers", kafka_broker.bootstrap) \
        .option("topic", out).save()
    assert sorted(json.loads(v)["v"] for _, _, v in read_all(kafka_broker.bootstrap, out)) == list(range(10))


def test_a_broker_stopped_and_started_again_keeps_its_records(kafka_broker) -> None:
    topic = create_topic(kafka_broker.bootstrap, "restart")
    produce(kafka_broker.bootstrap, topic, [{"n": 1}, {"n": 2}])
    kafka_broker.restart()
    assert [json.loads(v)["n"] for _, _, v in read_all(kafka_broker.bootstrap, topic)] == [1, 2]


def test_a_cluster_id_never_reads_as_an_option() -> None:
    """A random id starting with '-' once made the storage tool refuse it (CI's run would fail on 1 in 64)."""
    from streamwarden.demo.broker import _cluster_id

    assert not any(_cluster_id().startswith("-") for _ in range(5000))
