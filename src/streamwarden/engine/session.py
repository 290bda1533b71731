"""The SparkSession streamwarden runs on: UTC, private outputs, sized from its master.

:func:`get_spark` returns the active session, or creates one from three layers of
settings, each overriding the one before (:func:`spark_settings`):

1. streamwarden's defaults: master ``local[2]``, and the settings below;
2. the environment: ``STREAMWARDEN_MASTER`` (a master URL) and ``STREAMWARDEN_SPARK_CONF``
   (``KEY=VALUE`` entries, one per line: values such as ``spark.jars`` or
   ``spark.driver.extraJavaOptions`` hold commas and spaces, never a newline);
3. the command line: ``--master URL`` and ``--conf KEY=VALUE`` (repeatable).

Two settings carry security, so no layer may change them: ``spark.sql.session.timeZone``
is UTC (every timestamp streamwarden reads, compares and writes means one instant), and
``spark.hadoop.fs.permissions.umask-mode`` is 077 (everything Spark writes, sinks and
checkpoints, is readable by its owner only; the CLI also sets the process umask to 077
before Spark starts). ``spark.master`` is given with ``--master``, not ``--conf``.

Shuffle partitions and default parallelism follow the master's cores (``local[N]``: N,
``local[*]``: this machine's, ``local-cluster[n,c,m]``: n × c); on a real cluster Spark's
own defaults stand unless ``--conf`` sets them. A streaming query keeps the shuffle
partitions it started with in its checkpoint. So does the number of partitions a limited
collect reads in its first job (``spark.sql.limit.initialNumPartitions``, Spark's default
1): a micro-batch's few rows, collected with a bound (:mod:`streamwarden.engine.fanout`),
come in one job rather than one job for the first partition and another for the rest.

Off a ``local[...]`` master, the package ships to the executors
(:mod:`streamwarden.engine.shipping`), so a node without streamwarden installed runs its
Python data sources, SP encoders and ``[ROWS n]`` windows. Every session has
streamwarden's JVM operators (:mod:`streamwarden.engine.jvm`) on the driver's class path
and in ``spark.jars``.

The Spark UI is off unless ``--conf spark.ui.enabled=true``. Kept off on purpose, not
only for speed: it is a web server on the driver, listening on every interface without
authentication unless configured (``spark.ui.filters``, ``spark.acls.enable``), that
shows every running query's plan, with its policies' predicates and constants. The
operator who wants it opts in knowingly; tests and the demo also need no ports 4040+.

    >>> settings = spark_settings("local-cluster[2,1,1024]", ["spark.executor.memory=2g"], environ={})
    >>> settings.conf["spark.sql.shuffle.partitions"], settings.conf["spark.executor.memory"], settings.ships_package
    ('2', '2g', True)
    >>> spark_settings(None, ["spark.ui.enabled"], environ={})
    Traceback (most recent call last):
    streamwarden.errors.UsageError: --conf expects KEY=VALUE, got 'spark.ui.enabled'
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from pyspark.sql import SparkSession

from streamwarden.errors import UsageError

MASTER_ENV = "STREAMWARDEN_MASTER"
CONF_ENV = "STREAMWARDEN_SPARK_CONF"
DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PARALLELISM = "spark.default.parallelism"
LIMIT_PARTITIONS = "spark.sql.limit.initialNumPartitions"

#: Settings streamwarden's security relies on: refused if any layer changes them.
PROTECTED = {
    "spark.sql.session.timeZone": ("UTC", "every timestamp streamwarden reads and writes means one instant"),
    # Hadoop's file systems set the permissions of what they create from this umask
    # (folders 0700, files 0600), whatever the process's own.
    "spark.hadoop.fs.permissions.umask-mode": ("077", "outputs and checkpoints stay private to their owner"),
}

_DEFAULTS = {
    **{key: value for key, (value, _) in PROTECTED.items()},
    "spark.ui.enabled": "false",  # opt in with --conf spark.ui.enabled=true (see the module's docstring)
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",  # streaming ignores it; keep batch replay plans alike
    "spark.sql.jsonGenerator.ignoreNullFields": "false",  # NULL attributes stay visible keys
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "spark.driver.extraJavaOptions": "-Dderby.system.home=/tmp/streamwarden-derby",
    # a shared group's backfill runs beside the micro-batches in a pool of its own, taking a fair
    # share of the cores instead of queueing every group's next batch behind it (runtime/groups.py)
    "spark.scheduler.mode": "FAIR",
}

_LOCAL = re.compile(r"local(?:\[\s*(\d+|\*)\s*(?:,\s*\d+\s*)?\])?")  # local, local[N], local[*], local[N,F]
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")
_REMOTE = re.compile(r"(spark://\S+|yarn|k8s://\S+)")
_KEY = re.compile(r"spark\.[^\s=]+")
MASTERS = "local[N], local[*], local-cluster[n,c,m], spark://HOST:PORT, yarn or k8s://https://HOST:PORT"


@dataclass(frozen=True)
class SparkSettings:
    """Where Spark runs and every setting it starts with (made by :func:`spark_settings`)."""

    master: str
    conf: Mapping[str, str]
    log_dir: Path | None = None  # Spark's own log goes to log_dir/spark.log (None: this process's stderr)

    @property
    def ships_package(self) -> bool:
        """Do executors run apart from this process's Python (any master but ``local[...]``)?"""
        return _LOCAL.fullmatch(self.master) is None


def master_cores(master: str) -> int | None:
    """The cores a local master gives Spark, or None for a cluster's master.

        >>> [master_cores(m) for m in ("local", "local[4]", "local[3, 2]", "local-cluster[2,1,1024]", "yarn")]
        [1, 4, 3, 2, None]
    """
    local = _LOCAL.fullmatch(master)
    if local is not None:
        threads = local.group(1) or "1"
        return (os.cpu_count() or 1) if threads == "*" else int(threads)
    cluster = _LOCAL_CLUSTER.fullmatch(master)
    if cluster is not None:
        return int(cluster.group(1)) * int(cluster.group(2))
    return None


def check_master(master: str, where: str) -> str:
    """``master`` if Spark can run streamwarden on it; else one line saying which forms are.

        >>> check_master("spark://head:7077", "--master")
        'spark://head:7077'
        >>> check_master("local[two]", "--master")  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        streamwarden.errors.UsageError: --master 'local[two]' is not a Spark master URL: use local[N], local[*],
            local-cluster[n,c,m], spark://HOST:PORT, yarn or k8s://https://HOST:PORT
    """
    if not any(form.fullmatch(master) for form in (_LOCAL, _LOCAL_CLUSTER, _REMOTE)):
        raise UsageError(f"{where} {master!r} is not a Spark master URL: use {MASTERS}")
    return master


def parse_conf(entries: Iterable[str], where: str) -> dict[str, str]:
    """``KEY=VALUE`` entries as a dict (a later entry for a key wins), each checked: a key
    is ``spark.`` and more, without spaces; the protected settings keep their values.

        >>> parse_conf(["spark.executor.memory=2g", "spark.executor.memory=4g"], "--conf")
        {'spark.executor.memory': '4g'}
        >>> parse_conf(["spark.sql.session.timeZone=Europe/Paris"], "--conf")  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        streamwarden.errors.UsageError: --conf spark.sql.session.timeZone=Europe/Paris is refused: streamwarden keeps
            it UTC (every timestamp streamwarden reads and writes means one instant)
    """
    conf: dict[str, str] = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"{where} expects KEY=VALUE, got {entry!r}")
        if not _KEY.fullmatch(key):
            raise UsageError(f"{where} {key!r}: a Spark setting's key starts with 'spark.' and has no spaces "
                             "(a Hadoop setting: spark.hadoop.KEY)")
        if key == "spark.master":
            raise UsageError(f"{where} spark.master: give the master with --master or ${MASTER_ENV}")
        if key in PROTECTED and value.strip() != PROTECTED[key][0]:
            required, why = PROTECTED[key]
            raise UsageError(f"{where} {key}={value} is refused: streamwarden keeps it {required} ({why})")
        conf[key] = value.strip()
    return conf


def spark_settings(master: str | None = None, conf: Sequence[str] = (),
                   environ: Mapping[str, str] | None = None) -> SparkSettings:
    """The settings a new session starts with: command line (``master``, ``conf``) over
    environment (``environ``, default ``os.environ``) over defaults. Raises
    :class:`~streamwarden.errors.UsageError` on a malformed or refused entry, before any
    Spark starts."""
    environ = os.environ if environ is None else environ
    if master is not None:
        chosen = check_master(master.strip(), "--master")
    elif environ.get(MASTER_ENV, "").strip():
        chosen = check_master(environ[MASTER_ENV].strip(), MASTER_ENV)
    else:
        chosen = DEFAULT_MASTER
    lines = [line for line in environ.get(CONF_ENV, "").splitlines() if line.strip()]
    from_environment = parse_conf(lines, CONF_ENV)
    from_command_line = parse_conf(conf, "--conf")
    settings = dict(_DEFAULTS)
    cores = master_cores(chosen)
    if cores is not None:  # a local master's cores; on a cluster's, Spark's defaults stand
        settings[SHUFFLE_PARTITIONS] = settings[PARALLELISM] = settings[LIMIT_PARTITIONS] = str(cores)
    settings.update(from_environment)
    settings.update(from_command_line)
    return SparkSettings(chosen, MappingProxyType(settings))


_requested: SparkSettings | None = None


@contextmanager
def requested(settings: SparkSettings) -> Iterator[SparkSettings]:
    """Inside the block, a :func:`get_spark` that creates a session uses ``settings``: how
    one CLI command's ``--master`` and ``--conf`` reach every code path that starts Spark."""
    global _requested
    previous, _requested = _requested, settings
    try:
        yield settings
    finally:
        _requested = previous


def current_settings() -> SparkSettings:
    """The settings a session started now would get: the CLI command's (:func:`requested`),
    else the environment's and the defaults."""
    return _requested if _requested is not None else spark_settings()


def get_spark(master: str | None = None, app_name: str = "streamwarden", conf: Sequence[str] = ()) -> SparkSession:
    """The active SparkSession, or a new one from ``master`` and ``conf`` (``KEY=VALUE``
    strings; neither given: the CLI command's, see :func:`requested`, else the
    environment's and the defaults). An active session is returned as it is: Spark fixes
    a session's master and most settings when it starts."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    settings = spark_settings(master, conf) if master is not None or conf else current_settings()
    return start_spark(settings, app_name)


def start_logged_spark(log_dir: Path) -> SparkSession:
    """The SparkSession, started (unless one is already active) with Spark's output in
    ``log_dir/spark.log`` rather than on the terminal (:mod:`streamwarden.engine.spark_log`)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active  # started by the caller (tests): its logging is theirs
    return start_spark(replace(current_settings(), log_dir=log_dir))


def start_spark(settings: SparkSettings, app_name: str = "streamwarden") -> SparkSession:
    """Create the session ``settings`` describe; off a local master, ship the package; with a
    ``log_dir``, Spark's own output goes to its ``spark.log`` (:mod:`streamwarden.engine.spark_log`)."""
    from streamwarden.engine.shipping import package_zip
    from streamwarden.engine.spark_log import logging_to

    shipped = package_zip() if settings.ships_package else None  # before Spark: a failure costs no start-up
    _worker_python(settings)
    conf = with_operators(settings.conf, settings.master)
    with logging_to(settings.log_dir) if settings.log_dir is not None else nullcontext():
        launch_driver_jvm(settings.master, app_name, conf)
        builder = SparkSession.builder.master(settings.master).appName(app_name)
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STREAMWARDEN_SPARK_LOG", "ERROR"))
    if shipped is not None:
        _ship(spark, shipped)
    return spark


def launch_driver_jvm(master: str, app_name: str, conf: Mapping[str, str]) -> None:
    """Start Spark's driver JVM (unless this process has one) deaf to SIGTERM and SIGINT, as
    PySpark starts it deaf to SIGINT alone.

    Why: a supervisor stops a service by signalling its whole process group (a terminal's
    Ctrl-C, ``kill -TERM -PGID``, systemd, a container runtime). The JVM would die at once,
    under the micro-batch in flight and the Python calls into it (exit 3). Deaf, it is
    stopped in order by its Python process, which lets the micro-batch finish, stops each
    query, and exits; the JVM then ends on its own, when its stdin (a pipe from that process)
    closes. A signal ignored at exec stays ignored (HotSpot then installs no handler for it),
    and the processes the JVM starts inherit that too.

    PySpark sets ``preexec_fn`` in the keyword arguments it is given: :class:`_DeafJvmPopen`
    adds SIGTERM to what it ignores, with the same settings the session's builder passes."""
    import signal

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ or not hasattr(signal, "SIGTERM"):
        return  # a JVM is there already (or started by a parent process, or no POSIX signals)
    spark_conf = SparkConf().setMaster(master).setAppName(app_name)
    for key, value in conf.items():
        spark_conf.set(key, value)
    SparkContext._ensure_initialized(gateway=launch_gateway(spark_conf, popen_kwargs=_DeafJvmPopen()))


class _DeafJvmPopen(dict[str, object]):
    """``Popen`` keyword arguments whose ``preexec_fn``, whatever PySpark sets, also ignores SIGTERM."""

    def __setitem__(self, key: str, value: object) -> None:
        if key == "preexec_fn" and callable(value):
            value = _ignoring_sigterm(value)
        super().__setitem__(key, value)


def _ignoring_sigterm(first: Callable[[], object]) -> Callable[[], None]:
    def preexec() -> None:
        import signal

        first()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    return preexec


#: Hadoop's local file system without a process per permission change or link lookup
#: (``LocalFiles.java``): the same files, the same permissions, a third less wall time for
#: a streaming query's micro-batches on this machine's file system.
LOCAL_FILES = {"spark.hadoop.fs.file.impl": "streamwarden.jvm.LocalFiles$FileSystem",
               "spark.hadoop.fs.AbstractFileSystem.file.impl": "streamwarden.jvm.LocalFiles$Fs"}


def with_operators(conf: Mapping[str, str], master: str = DEFAULT_MASTER) -> dict[str, str]:
    """``conf`` with streamwarden's JVM operators and Spark's Kafka connector
    (:mod:`streamwarden.engine.jvm`, as ``make jars`` built them) on the driver's class
    path, where py4j finds them, and in ``spark.jars``, which ships them to
    executors; a user's own jars in either setting stay.

    On a master of this machine (``local[...]``, ``local-cluster[...]``, whose executors
    also find the jar at the driver's path) the ``file`` scheme is :data:`LOCAL_FILES`,
    unless ``conf`` names a file system for it.

        >>> sorted(k for k in with_operators({}, "local[2]") if k.startswith("spark.hadoop.fs."))
        ['spark.hadoop.fs.AbstractFileSystem.file.impl', 'spark.hadoop.fs.file.impl']
        >>> [k for k in with_operators({}, "yarn") if k.startswith("spark.hadoop.fs.")]
        []
    """
    from streamwarden.engine.jvm import connector_jars, operators_jar

    jars = [str(operators_jar()), *map(str, connector_jars())]  # Maven's copies: nothing downloads now
    jar = os.pathsep.join(jars)
    merged = dict(conf)
    merged["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars", ""), *jars]))
    merged["spark.driver.extraClassPath"] = os.pathsep.join(filter(None, [conf.get("spark.driver.extraClassPath", ""),
                                                                          jar]))
    if _LOCAL.fullmatch(master) or _LOCAL_CLUSTER.fullmatch(master):
        if not any(key in conf for key in LOCAL_FILES):
            merged.update(LOCAL_FILES)
        if _LOCAL_CLUSTER.fullmatch(master):  # a file system's class is loaded before spark.jars reach the executor
            merged["spark.executor.extraClassPath"] = os.pathsep.join(
                filter(None, [conf.get("spark.executor.extraClassPath", ""), jar]))
    return merged


def lower_priority(spark: SparkSession, niceness: int) -> int:
    """Give Spark's driver JVM (every thread it has, and what it forks later: the Python
    workers) the scheduling ``niceness`` (0 to 19), so that a service in the same machine's
    process answers requests before micro-batches run. Linux only (nice is per thread
    there); returns how many threads were changed (0 elsewhere, or without permission)."""
    from streamwarden.engine.jvm import jvm_view

    pid = int(jvm_view(spark).java.lang.ProcessHandle.current().pid())
    changed = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in threads:
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), niceness)
            changed += 1
        except OSError:  # a thread that ended meanwhile, or no permission
            continue
    return changed


def _ship(spark: SparkSession, shipped: Path) -> None:
    """Put the package's zip on the path of every Python worker the session starts. Done
    right after the start, before any query: PySpark gives each Python function the zips
    added so far. ``addPyFile`` serves it to the executors' workers; the driver's own
    runner of a streaming Python data source ignores that list and sees only the
    functions' environment, so the zip (a path on this machine) goes on its
    ``PYTHONPATH`` too. Executors get that variable as well, where the path is absent or
    the same zip, and where the shipped copy comes first on ``sys.path`` anyway."""
    context = spark.sparkContext
    context.addPyFile(str(shipped))
    inherited = context.environment.get("PYTHONPATH")
    context.environment["PYTHONPATH"] = os.pathsep.join([str(shipped), *([inherited] if inherited else [])])


def _worker_python(settings: SparkSettings) -> None:
    """Choose the Python that Spark's workers run. PySpark started from a running Python
    reads only ``PYSPARK_PYTHON`` (when the context starts; it sends that path with every
    Python function) and ignores ``spark.pyspark.python``, so that setting is honoured by
    setting the variable. Otherwise: on this machine (a local or local-cluster master)
    this interpreter; on a cluster, Spark's default (``python3`` on the executors' PATH),
    since this interpreter's path need not exist there."""
    chosen = settings.conf.get("spark.pyspark.python")
    if chosen:
        os.environ["PYSPARK_PYTHON"] = chosen
    elif master_cores(settings.master) is not None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
