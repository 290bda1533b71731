"""Where a stream's records come from, as the catalog declares it: files given on the command
line (the default, no declaration), or a Kafka topic.

    streams:
      Vitals:
        schema: {ts: timestamp, patient: string, pulse: int}
        source:
          kafka:
            bootstrap: 127.0.0.1:9092
            topic: vitals              # or pattern: "vitals-.*"
            format: json               # the record's value: one JSON object of the schema
            time: field                # ts from the value (or: record, Kafka's timestamp)
            starting_offsets: earliest # or latest
            options: {security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512}

``options`` are Kafka consumer settings passed through to Spark's connector (as
``kafka.<name>``); those the connector sets itself, and would refuse, are refused here.

    >>> KafkaSource("127.0.0.1:9092", topic="vitals").spark_options()["subscribe"]
    'vitals'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

#: Kafka's own rule for a topic name.
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: host:port, comma-separated.
BOOTSTRAP = re.compile(r"[A-Za-z0-9.\-\[\]:]+:\d{1,5}(,[A-Za-z0-9.\-\[\]:]+:\d{1,5})*")
FORMATS = ("json",)
TIMES = ("field", "record")
STARTING = ("earliest", "latest")
#: Consumer settings Spark's connector sets itself (it fails a query that sets them).
RESERVED_OPTIONS = frozenset({"group.id", "auto.offset.reset", "key.deserializer", "value.deserializer",
                              "enable.auto.commit", "interceptor.classes", "bootstrap.servers"})
#: Consumer settings whose values are secrets: never shown, never in the audit trail.
SECRET_OPTIONS = frozenset({"sasl.jaas.config", "ssl.key.password", "ssl.keystore.password",
                            "ssl.truststore.password", "ssl.keystore.key", "sasl.oauthbearer.client.credentials"})


@dataclass(frozen=True)
class KafkaSource:
    """A stream read from Kafka: the brokers, a topic or a pattern of topics, and how a record
    becomes a tuple (see the module docstring)."""

    bootstrap: str
    topic: str | None = None
    pattern: str | None = None
    format: str = "json"
    time: str = "field"
    starting_offsets: str = "earliest"
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    @property
    def where(self) -> str:
        """The topic (or pattern) as an error names it."""
        return f"topic {self.topic}" if self.topic is not None else f"topics matching {self.pattern}"

    def spark_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source for this declaration."""
        options = {"kafka.bootstrap.servers": self.bootstrap, "startingOffsets": self.starting_offsets,
                   # a record aged out of the topic before it was read is data loss: said, never skipped
                   "failOnDataLoss": "true"}
        if self.topic is not None:
            options["subscribe"] = self.topic
        else:
            assert self.pattern is not None
            options["subscribePattern"] = self.pattern
        options.update({f"kafka.{k}": v for k, v in self.options.items()})
        return options

    def shown(self) -> dict[str, str]:
        """The declaration as it may be shown (secrets masked)."""
        where = {"topic": self.topic} if self.topic else {"pattern": self.pattern or ""}
        return {"bootstrap": self.bootstrap, **where,
                "format": self.format, "time": self.time, "starting_offsets": self.starting_offsets,
                **{k: ("***" if k in SECRET_OPTIONS else v) for k, v in self.options.items()}}


__all__ = ["BOOTSTRAP", "FORMATS", "KafkaSource", "RESERVED_OPTIONS", "SECRET_OPTIONS", "STARTING", "TIMES", "TOPIC"]
