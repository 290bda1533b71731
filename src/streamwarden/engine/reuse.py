"""A plan over a micro-batch, built once and run over every micro-batch.

A group's plan (its members' templates, their member tables, each row's JSON) changes only
when its members do, yet building it from Python over each micro-batch's DataFrame takes
hundreds of calls into the JVM: 0.1-0.3 s a micro-batch on two cores, as much as Spark's
own work on a small batch. :class:`BuiltOnce` builds it over a placeholder with the
batch's schema when its key changes, and swaps each micro-batch's rows in for the
placeholder's in the JVM (:func:`streamwarden.engine.jvm.rebase`: one call). When Spark
cannot (another schema), the plan is built over the batch itself, as before.

    >>> plans = BuiltOnce()
    >>> # rows = plans.over(batch, members_key, lambda frame: group_rows(frame, ...))
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pyspark.sql import DataFrame

from streamwarden.engine.jvm import rebase

#: Builds a plan over a frame with the batch's columns (None: nothing to compute).
Build = Callable[[DataFrame], "DataFrame | None"]


class BuiltOnce:
    """The plan last built, by the key it was built for and the batch's schema."""

    def __init__(self) -> None:
        self._key: tuple[Hashable, str] | None = None
        self._placeholder: DataFrame | None = None
        self._plan: DataFrame | None = None

    def over(self, batch: DataFrame, key: Hashable, build: Build) -> DataFrame | None:
        """``build``'s plan over ``batch``: built over a placeholder when ``key`` (or the batch's
        schema) is new, else the one built before, with ``batch``'s rows. ``build``'s side
        effects (a template reported failed) happen when it is built, not at every batch."""
        schema = batch.schema
        wanted = (key, schema.json())
        if wanted != self._key:
            spark = batch.sparkSession
            placeholder = spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
            self._key, self._placeholder, self._plan = None, placeholder, build(placeholder)
            self._key = wanted
        if self._plan is None:
            return None
        assert self._placeholder is not None
        rows = rebase(self._plan, self._placeholder, batch)
        return rows if rows is not None else build(batch)

    def forget(self) -> None:
        """Build anew at the next batch (the members changed in a way the key does not say)."""
        self._key = self._placeholder = self._plan = None


__all__ = ["Build", "BuiltOnce"]
