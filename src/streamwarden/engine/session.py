"""The SparkSession streamwarden runs on: local, UTC, quiet, sized for small machines.

``get_spark()`` returns the active session or creates one (``local[2]`` unless
``STREAMWARDEN_MASTER`` says otherwise) with the session time zone set to UTC, so every
timestamp streamwarden reads or writes means the same instant. Everything Spark writes
(sinks, checkpoints) is created readable by its owner only (``fs.permissions.umask-mode``
077; the CLI also sets the process umask to 077 before Spark starts).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from pyspark.sql import SparkSession

_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",  # streaming ignores it; keep batch replay plans alike
    "spark.sql.jsonGenerator.ignoreNullFields": "false",  # NULL attributes stay visible keys
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "spark.driver.extraJavaOptions": "-Dderby.system.home=/tmp/streamwarden-derby",
    # Outputs are private to their owner: Hadoop's file systems set the permissions of what
    # they create from this umask (folders 0700, files 0600), whatever the process's own.
    "spark.hadoop.fs.permissions.umask-mode": "077",
}


def get_spark(master: str | None = None, app_name: str = "streamwarden") -> SparkSession:
    """Return the active SparkSession, creating a local one configured for streamwarden."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", _python()))
    builder = SparkSession.builder.master(master or os.environ.get("STREAMWARDEN_MASTER", "local[2]")).appName(app_name)
    for key, value in _SETTINGS.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STREAMWARDEN_SPARK_LOG", "ERROR"))
    return spark


def _python() -> str:
    import sys

    return sys.executable


@contextmanager
def sql_conf(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """Set a runtime SQL option inside the block (``None``: leave it alone), then restore it."""
    if value is None:
        yield
        return
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
