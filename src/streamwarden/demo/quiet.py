"""The demo's terminal: what a user should read, with Spark's own output kept in a log file
(:mod:`streamwarden.engine.spark_log`). The demo's own lines stay on the terminal, and
:func:`step` announces every step that takes a while.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from streamwarden.engine.session import start_logged_spark
from streamwarden.engine.spark_log import active_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def step(console: Console, text: str) -> None:
    """Announce a step that takes more than a moment (Spark work, on a small shared machine)."""
    console.print(f"{text}…", style="dim", highlight=False)


def start_spark(log_dir: Path, console: Console) -> "SparkSession":
    """The SparkSession, started (unless one is already active) with Spark's output in
    ``log_dir/spark.log`` rather than on the terminal
    (:func:`streamwarden.engine.session.start_logged_spark`)."""
    if active_session() is not None:
        return start_logged_spark(log_dir)  # started by the caller (tests): its logging is theirs
    step(console, f"starting Spark (its log: {log_dir / 'spark.log'})")
    started = time.monotonic()
    spark = start_logged_spark(log_dir)
    console.print(f"Spark {spark.version} on {spark.sparkContext.master} ready in {time.monotonic() - started:.1f} s")
    return spark
