"""Spark as the command line and the service start it, keep it running and stop it.

Where Spark runs and its settings (``--master``, ``--conf``, the environment's), where its
own log goes, what one line says about a failure, and the loop that keeps a
:class:`Runner` going until it ends or is told to stop.

    >>> with using_spark("local[2]", ["spark.executor.memory=2g"]) as settings:
    ...     settings.master, settings.conf["spark.executor.memory"]
    ('local[2]', '2g')
    >>> using_spark("local[two]")
    Traceback (most recent call last):
    streamwarden.errors.UsageError: --master 'local[two]' is not a Spark master URL: use local[N], local[*], \
local-cluster[n,c,m], spark://HOST:PORT, yarn or k8s://https://HOST:PORT
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Sequence

from streamwarden.engine.execute import describe_failure, input_errors
from streamwarden.engine.session import (SparkSettings, get_spark, lower_priority, requested, spark_settings,
                                         start_logged_spark)
from streamwarden.engine.spark_log import silence_spark_log, spark_log_path
from streamwarden.runtime.progress import Progress, ProgressWatch
from streamwarden.runtime.runner import QueryRunner, Runner

if TYPE_CHECKING:  # pyspark lives in the engine and the runtime; the API only passes queries on
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def using_spark(master: str | None = None, conf: Sequence[str] = (), *,
                log_dir: Path | None = None) -> ContextManager[SparkSettings]:
    """Inside the block, whatever starts Spark starts it on ``master`` with ``conf`` (``KEY=VALUE``
    entries) over the environment's settings, its own log in ``log_dir/spark.log`` when given.
    Checked now: a malformed or refused entry raises :class:`~streamwarden.errors.UsageError`
    before the block and before any Spark starts."""
    settings = spark_settings(master, conf)
    if log_dir is not None:
        settings = replace(settings, log_dir=log_dir)
    return requested(settings)


def keep_running(runner: Runner | StreamingQuery, stop: threading.Event, *, hurry: threading.Event | None = None,
                 poll_seconds: float = 2.0, batch_grace: float = 120.0,
                 tick: Callable[[], None] | None = None) -> None:
    """Keep ``runner`` going until it ends (with ``available_now``) or ``stop`` is set, applying
    the store's live changes (:meth:`Runner.poll`) every ``poll_seconds`` and calling ``tick``
    (a progress line) about twice a second. Once ``stop`` is set,
    it returns when the micro-batch under way has finished (at most ``batch_grace`` seconds, or
    until ``hurry`` is set), so that :func:`stop_quietly` then cuts nothing half-way: the caller
    stops the runner (a command line first puts its signal handlers back). A broken input record
    (:class:`~streamwarden.errors.InputError`) or another failure is raised.

    A Spark query that :func:`~streamwarden.api.queries.run` started is kept running as it is:
    live action values reach it through its own source, there is nothing to poll.

        >>> # query = run(catalog, "ann", "SELECT a FROM S", {"S": "in/S"}, "out")
        >>> # stop = threading.Event()  # set by a signal handler, or another thread
        >>> # try: keep_running(query, stop)
        >>> # finally: stop_quietly(query)
    """
    runner = _runner(runner)
    hurry = hurry or threading.Event()
    with input_errors():  # a broken record stops the run; committed output stays
        next_poll = time.monotonic() + poll_seconds
        while not stop.is_set():
            if runner.wait(0.5):
                break
            runner.check()
            if tick is not None:
                tick()
            if not runner.available_now and time.monotonic() >= next_poll:
                runner.poll()
                next_poll = time.monotonic() + poll_seconds
        deadline = time.monotonic() + batch_grace
        while stop.is_set() and not hurry.is_set() and time.monotonic() < deadline and runner.in_batch():
            time.sleep(0.1)


def progress_watch(spark: SparkSession | None = None) -> ProgressWatch:
    """A :class:`~streamwarden.runtime.progress.ProgressWatch` of every streaming query started
    from now on (create it before starting them; :meth:`~ProgressWatch.attach` the runner for its
    deliveries, :meth:`~ProgressWatch.close` at the end)."""
    return ProgressWatch(spark or get_spark())


def stop_quietly(runner: Runner | StreamingQuery) -> None:
    """Stop a runner (or a query :func:`~streamwarden.api.queries.run` started) without Spark's and
    Py4J's complaints about the batch it cancels; what it committed stays."""
    runner = _runner(runner)
    if not any(stream.isActive for stream in runner.streams):
        return
    try:
        silence_spark_log()  # the tasks the stop interrupts log errors: not for the user
    except Exception:
        pass
    try:
        runner.stop()
    except Exception:
        pass
    # Spark's log stays off: the tasks the stop killed report it after stop() returns, and the
    # caller ends here anyway (an in-process caller can set it back with setLogLevel).


def _runner(runner: Runner | StreamingQuery) -> Runner:
    return runner if isinstance(runner, Runner) else QueryRunner(runner)


__all__ = [
    "Progress", "ProgressWatch", "Runner", "SparkSettings", "describe_failure", "keep_running", "lower_priority",
    "progress_watch", "silence_spark_log", "spark_log_path", "start_logged_spark", "stop_quietly", "using_spark",
]
