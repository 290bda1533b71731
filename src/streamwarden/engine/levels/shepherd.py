"""The trusted stream shepherd on Spark: levels on every tuple, filtered before time moves.

:func:`guarded` takes the records of one input stream as read and gives each its
system-generated ``level`` (the company its source attribute names, a fixed level, or
the top when the source is unknown), counts the unknown ones, and keeps only the tuples
the query's level dominates. It runs before the event-time watermark is set, so in a
continuous run a level's windows close on the time of the tuples it may see only: an
invisible tuple can change neither what nor when a query at that level emits.

    >>> # frame, unknown = guarded(frame, stream, lattice, level, streaming=False)
    >>> # unknown.collect()[0]["unknown_source"]  -> tuples put at the top for an unknown source
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField

from streamwarden.catalog.lattice import Lattice, Level, LevelSource
from streamwarden.catalog.model import StreamDef
from streamwarden.engine.levels.columns import shepherd_level, unknown_source, visible_at
from streamwarden.engine.sources import catalog_schema

LEVEL = "level"


def observation_name(stream: str, tag: str = "") -> str:
    return f"levels_{stream}{tag}"


def level_source(stream: StreamDef) -> LevelSource | None:
    """Where the levels of ``stream``'s tuples come from (None: every tuple is at the top)."""
    return stream.level_source if isinstance(stream.level_source, LevelSource) else None


def with_level(frame: DataFrame, stream: StreamDef, lattice: Lattice) -> DataFrame:
    """``frame`` with ``level``: each tuple's level as the shepherd gives it."""
    return frame.withColumn(LEVEL, shepherd_level(level_source(stream), lattice))


def guarded(frame: DataFrame, stream: StreamDef, lattice: Lattice, level: Level, *,
            streaming: bool, tag: str = "") -> tuple[DataFrame, DataFrame | None]:
    """``frame`` with ``level`` and only the tuples ``level`` dominates, and the counts.
    A ``frame`` that has a ``level`` column already comes from the shepherd's query
    (:func:`~streamwarden.engine.levels.routing.routed_input`); the catalog allows no
    attribute of that name in a levelled catalog.

    The tuples put at the top for an unknown source are counted: in a replay by the
    returned one-row frame (``tuples``, ``unknown_source``; a separate job, run only
    when the report asks), in a continuous run as the observed metric
    ``levels_<stream><tag>`` of each micro-batch's progress. Both count only the tuples
    the level dominates: whoever reads them runs at that level, and a count of invisible
    tuples (how many came from unknown sources, at the top) would describe data above it.
    """
    source = level_source(stream)
    # Tuples the shepherd's own query has levelled (engine.levels.routing) come with theirs.
    levelled = frame if LEVEL in frame.columns else with_level(frame, stream, lattice)
    visible = levelled.filter(visible_at(F.col(LEVEL), level))
    metrics = [F.count(F.lit(1)).alias("tuples"),
               F.coalesce(F.sum(unknown_source(source, lattice, F.col(LEVEL)).cast("long")), F.lit(0))
               .alias("unknown_source")]
    if streaming:
        return visible.observe(observation_name(stream.name, tag), *metrics), None
    return visible, visible.agg(*metrics)


def routed_input(spark: SparkSession, stream: StreamDef, tuples: str | Path) -> DataFrame:
    """The tuples the shepherd's query (:mod:`streamwarden.engine.levels.routing`) wrote for
    ``stream`` under ``tuples``, as a stream: the catalog's columns and ``level``."""
    schema = catalog_schema(stream).add(StructField(LEVEL, LongType(), True))
    frame = spark.readStream.schema(schema).parquet(str(tuples))
    return frame.select(*[n for n, _ in stream.schema], LEVEL)


__all__ = ["LEVEL", "guarded", "level_source", "observation_name", "routed_input", "with_level"]
