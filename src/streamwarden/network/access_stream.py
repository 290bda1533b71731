"""Access SPs: the authorization server's changes as a stream the network reads with its data.

Every grant, revocation or expiry the server records becomes one security punctuation
``(seq, ts, query, user, sign)``: the query id and the user it concerns, whether it
grants (``+``) or revokes (``-``), and the time from which it holds. This small Python
data source streams them out of the store in the order issued (``seq``); the running
network reads it in the same streaming query as its input streams, so every
micro-batch carries the data and the SPs that arrived with it, Spark checkpoints how
far it has read both, and a restart replays neither twice.

Offsets are the last ``seq`` read. Spark asks for the latest one on the driver before
each micro-batch; a batch with no new change reads nothing from the store.

    >>> # frame = access_sps(spark, "sqlite:///auth.db")   # streaming: seq, ts, query, user, sign
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

SOURCE_NAME = "streamwarden_access"
SCHEMA = "seq long, ts timestamp, query string, user string, sign string"


class AccessSps(DataSource):
    """``format("streamwarden_access").option("store", URL)``: batch and streaming reads."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> DataSourceReader:  # type: ignore[no-untyped-def]
        return _BatchReader(self.options["store"])

    def streamReader(self, schema) -> DataSourceStreamReader:  # type: ignore[no-untyped-def]
        return _StreamReader(self.options["store"])


def _engine(store: str):  # type: ignore[no-untyped-def]
    from sqlalchemy import create_engine

    from streamwarden.network.access_log import metadata

    engine = create_engine(store)
    metadata.create_all(engine)  # a network may start before anything was granted
    return engine


def _records(store: str, after: int, upto: int | None) -> Iterator[tuple]:
    from streamwarden.network.access_log import read_changes

    for seq, ts, query, user, grant in read_changes(_engine(store), after, upto):
        yield seq, ts, query, user, "+" if grant else "-"


class _BatchReader(DataSourceReader):
    def __init__(self, store: str):
        self.store = store

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        yield from _records(self.store, 0, None)


class _StreamReader(DataSourceStreamReader):
    """Offsets are ``{"seq": n}``: every change with a larger ``seq`` is still to come."""

    def __init__(self, store: str):
        self.store = store
        self._engine: object | None = None  # one connection pool on the driver, not one per batch

    def __getstate__(self) -> dict:
        return {"store": self.store, "_engine": None}

    def initialOffset(self) -> dict:
        return {"seq": 0}

    def latestOffset(self) -> dict:
        from streamwarden.network.access_log import last_seq

        if self._engine is None:
            self._engine = _engine(self.store)
        return {"seq": last_seq(self._engine)}  # type: ignore[arg-type]

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if end["seq"] <= start["seq"]:
            return []  # nothing new: no task at all
        return [InputPartition((start["seq"], end["seq"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        after, upto = partition.value
        yield from _records(self.store, after, upto)

    def commit(self, end: dict) -> None:
        pass  # the store keeps the log (it is the policy store); nothing to release


_registered: set[int] = set()


def access_sps(spark: SparkSession, store_url: str, *, streaming: bool = True) -> DataFrame:
    """The access SPs of the authorization server at ``store_url``, in the order issued."""
    if id(spark) not in _registered:
        spark.dataSource.register(AccessSps)
        _registered.add(id(spark))
    reader = spark.readStream if streaming else spark.read
    return reader.format(SOURCE_NAME).option("store", store_url).load()


__all__ = ["AccessSps", "SCHEMA", "access_sps"]
