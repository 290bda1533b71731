"""Spark's own output in a log file, not on the user's terminal.

PySpark starts Spark's driver as a JVM, once per process, and that JVM keeps the stderr
it was started with. Everything Spark writes on it goes there: log4j's warnings, "Using
Spark's default log4j profile", and what Spark's Python workers print (the
transformWithState driver worker prints every call; a worker's stderr is copied to the
JVM's). So :func:`~streamwarden.engine.session.start_logged_spark` starts the JVM with its stderr on ``spark.log`` and a
log4j2 configuration (warnings and errors, one line each, no banner) passed through
``SPARK_SUBMIT_OPTS``; py4j's Python logger writes to the same file.

    >>> from pathlib import Path
    >>> from streamwarden.engine.session import start_logged_spark
    >>> spark = start_logged_spark(Path("logs"))                         # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamwarden.names import private_dir

#: Spark's log4j2 configuration while streamwarden runs: warnings and errors on stderr (the log
#: file). PySpark's gateway is Spark's "interpreter": its logger at the root's level, or
#: Spark prints "Setting default log level" (a custom configuration has no banner otherwise).
LOG4J2 = """\
# Written by streamwarden: Spark's log while streamwarden runs (its stderr is spark.log, next to this file).
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.repl.name = org.apache.spark.api.python.PythonGatewayServer
logger.repl.level = warn
"""



def active_session() -> SparkSession | None:
    """The SparkSession this process already runs, if any."""
    return SparkSession.getActiveSession()


#: The log file this process's Spark writes to, once started by :func:`logging_to`.
_log: Path | None = None


def spark_log_path() -> Path | None:
    """Where this process's Spark logs (None: no Spark yet, or one logging on stderr)."""
    return _log if _log is not None and active_session() is not None else None


@contextmanager
def logging_to(log_dir: Path) -> Iterator[Path]:
    """Inside the block, a Spark driver JVM that starts writes its output to
    ``log_dir/spark.log`` (created private) with :data:`LOG4J2`; py4j's Python logger writes
    there too from then on. Yields the log file's path."""
    global _log
    private_dir(log_dir)  # Spark's log may quote the plans' policies and a failed task's values
    config, log = log_dir / "log4j2.properties", log_dir / "spark.log"
    config.write_text(LOG4J2)
    saved = os.environ.get("SPARK_SUBMIT_OPTS")
    # The driver JVM's options: spark-submit adds SPARK_SUBMIT_OPTS to the java command it runs.
    os.environ["SPARK_SUBMIT_OPTS"] = f"{saved or ''} -Dlog4j2.configurationFile={config.resolve().as_uri()}".strip()
    try:
        with stderr_to(log):  # the JVM inherits this stderr, and keeps it
            yield log
    finally:
        if saved is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = saved
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s (Python): %(message)s"))
    py4j = logging.getLogger("py4j")
    py4j.addHandler(handler)
    py4j.propagate = False  # py4j's errors while streams stop are Spark's business, not the reader's
    _log = log.resolve()


def silence_spark_log() -> None:
    """Switch Spark's log off: the tasks a stopped query interrupts log errors that are not
    the user's business (an in-process caller can set it back with ``setLogLevel``)."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    context = SparkContext._active_spark_context
    if context is not None:
        context.setLogLevel("OFF")


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point this process's stderr (file descriptor 2, which child processes inherit) at
    ``path`` (appended) inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
