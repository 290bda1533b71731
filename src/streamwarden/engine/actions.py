"""Live action values as a one-row Spark table, re-read at every micro-batch.

Policies may depend on ``start(a)``, ``end(a)`` and ``target(a)``. These must not be
baked into the plan: an action that starts after a query was registered has to take
effect at once. The values come from a Python data source over the catalog store; its
one row is cross-joined (broadcast) onto each input that needs it. A streaming query
re-plans the static side of a stream-static join at every micro-batch, so every batch
sees the store as it is then.

Semantics (Example 5.3): an action with no ``start`` has not started, and all three
functions are NULL; a started action whose ``end`` is NULL has ``end`` = +infinity.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from streamwarden.engine.columns import action_column

FAR_FUTURE = datetime(9999, 12, 31, tzinfo=timezone.utc)
SOURCE_NAME = "streamwarden_actions"


def action_schema(names: list[str]) -> str:
    return ", ".join(
        f"{action_column(n, 'start')} timestamp, {action_column(n, 'end')} timestamp, "
        f"{action_column(n, 'target')} double"
        for n in names
    )


def action_row(actions: dict, names: list[str]) -> tuple:
    """The row of effective values for ``names`` (unknown or unstarted actions: NULLs)."""
    row: list[object] = []
    for name in names:
        action = actions.get(name)
        if action is None or action.start is None:
            row.extend([None, None, None])
            continue
        row.extend([action.start, action.end or FAR_FUTURE, action.target])
    return tuple(row)


class ActionsDataSource(DataSource):
    """``spark.read.format("streamwarden_actions").option("store", URL).option("names", "a,b")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return action_schema(self._names())

    def _names(self) -> list[str]:
        return [n for n in self.options.get("names", "").split(",") if n]

    def reader(self, schema: StructType) -> DataSourceReader:
        return _ActionsReader(self.options.get("store", ""), self._names())


class _ActionsReader(DataSourceReader):
    def __init__(self, store: str, names: list[str]):
        self.store = store
        self.names = names

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from streamwarden.catalog.store import CatalogStore

        yield action_row(CatalogStore(self.store).actions(), self.names)


_registered: set[int] = set()


def actions_frame(spark: SparkSession, store_url: str | None, names: list[str], fixed: dict | None = None) -> DataFrame:
    """A one-row DataFrame of action values: live from ``store_url``, or ``fixed`` values."""
    if store_url is None:
        row = action_row(fixed or {}, names)
        return spark.createDataFrame([row], action_schema(names))
    if id(spark) not in _registered:
        spark.dataSource.register(ActionsDataSource)
        _registered.add(id(spark))
    frame = spark.read.format(SOURCE_NAME).option("store", store_url).option("names", ",".join(names)).load()
    return F.broadcast(frame)
