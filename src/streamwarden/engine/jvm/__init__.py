"""streamwarden's own JVM operators, compiled against the Spark that PySpark ships.

Per-tuple work belongs in the JVM. Most of it is Spark SQL; what SQL cannot say — the
Security Shield, a state machine over each provider's records in arrival order, and the
encoding of SP records for a user, a continuous ``[ROWS n]`` window — is small Java in
``java/streamwarden/jvm/`` (``flatMapGroupsWithState`` functions, a UDF), so tuples never
cross into Python and their state lives in Spark's state store and checkpoint like every
other operator's.

``make jars`` builds them with Maven (the project's ``pom.xml``) into ``build/jvm``, beside
the runtime jars Spark needs beyond its own (its Kafka connector, in ``build/jvm/lib``:
:func:`connector_jars`). Where that jar is missing or older than a source (an installed
wheel, an edit since), :func:`operators_jar` compiles the sources with the JDK's ``javac``
against PySpark's jars and caches the jar by the hash of the sources and the Spark version
(in the same private cache as the shipped package,
:func:`streamwarden.engine.shipping.cache_dir`). :mod:`streamwarden.engine.session` puts the
jars on the driver's class path and ships them to executors (``spark.jars``).

    >>> operators_jar().name.startswith("streamwarden-jvm")
    True
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from typing import Any, Iterable, Sequence

from py4j.java_collections import JavaArray
from py4j.java_gateway import JavaClass, JavaObject
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.classic.column import Column as ClassicColumn
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

from streamwarden.errors import UsageError

SOURCES = Path(__file__).resolve().parent / "java"


def spark_jars() -> Path:
    """The folder of jars PySpark runs Spark from."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _digest(sources: list[Path]) -> str:
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in sources:
        digest.update(f"\0{path.relative_to(SOURCES).as_posix()}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def jdk_tool(name: str) -> str | None:
    """The JDK's tool ``name`` (``java``, ``javac``): JAVA_HOME's when it has one, else the
    PATH's; None when neither has it."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def _javac() -> str:
    found = jdk_tool("javac")
    if found is None:
        raise UsageError("streamwarden compiles its JVM operators with javac, and no 'javac' was found: install a "
                         "JDK 17 or newer (e.g. 'apt-get install openjdk-17-jdk-headless') or set JAVA_HOME")
    return found


#: Where ``make jars`` (Maven, the project's ``pom.xml``) puts the JVM side: the operators'
#: jar and, in ``lib/``, the jars Spark needs beyond its own (its Kafka connector). Another
#: folder laid out alike may be named by this variable (an installed wheel has no build folder).
JARS_ENV = "STREAMWARDEN_JVM_JARS"


def jars_dir() -> Path:
    """The folder of Maven's build (:data:`JARS_ENV`, else ``build/jvm`` beside the checkout's
    ``pom.xml``); it may not exist."""
    named = os.environ.get(JARS_ENV)
    if named:
        return Path(named)
    return Path(__file__).resolve().parents[4] / "build" / "jvm"


def connector_jars() -> list[Path]:
    """The jars Spark needs beyond its own (Spark's Kafka connector, its token provider,
    ``kafka-clients`` and ``commons-pool2``), as Maven copied them; empty before ``make jars``."""
    return sorted((jars_dir() / "lib").glob("*.jar"))


def kafka_available() -> bool:
    """Can Spark read and write Kafka here (Spark's connector is among :func:`connector_jars`)?"""
    return any(p.name.startswith("spark-sql-kafka-0-10_") for p in connector_jars())


def operators_jar(cache: Path | None = None) -> Path:
    """The jar of streamwarden's JVM operators: Maven's (``make jars``) when it is newer than
    every source, else compiled now with ``javac`` if its sources changed (a wheel, an edit)."""
    from streamwarden.engine.shipping import cache_dir, write_archive

    sources = _sources()
    built = jars_dir() / "streamwarden-jvm.jar"
    if cache is None and built.is_file() and built.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return built
    folder = cache if cache is not None else cache_dir()
    target = folder / f"streamwarden-jvm-{_digest(sources)}.jar"
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="streamwarden-javac-") as work:
        classes = Path(work) / "classes"
        command = [_javac(), "-nowarn", "-source", "17", "-target", "17", "-encoding", "UTF-8",
                   "-cp", str(spark_jars() / "*"), "-d", str(classes), *map(str, sources)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise UsageError(f"javac could not compile streamwarden's JVM operators: {done.stderr.strip()[:2000]}")
        write_archive(target, [(path.relative_to(classes).as_posix(), path.read_bytes())
                               for path in sorted(classes.rglob("*.class"))])
    return target


def jvm_view(spark: SparkSession) -> Any:
    """py4j's view of the driver's JVM (``jvm.java.lang.String``...): dynamic, so typed Any.
    PySpark types it optional, for a stopped context; a running session always has one."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the SparkContext has stopped"
    return jvm


def _jvm_operators(spark: SparkSession) -> JavaObject:
    return jvm_view(spark).streamwarden.jvm


def line_numbers(frame: DataFrame) -> DataFrame:
    """``frame`` (``_file``, ``_block``, ``_bytes``: Spark's line reader with the file's URI and
    the split's first byte) with each line's ``_index`` in its split (``LineNumbers.java``)."""
    spark = frame.sparkSession
    return ClassicDataFrame(_jvm_operators(spark).LineNumbers.apply(frame._jdf), spark)


def _java_array(spark: SparkSession, java_class: JavaClass, items: Sequence[Any]) -> JavaArray:
    gateway = spark.sparkContext._gateway
    assert gateway is not None, "the SparkContext has stopped"
    array = gateway.new_array(java_class, len(items))
    for i, item in enumerate(items):
        array[i] = item
    return array


def sp_encoder(spark: SparkSession, stream: str, attributes: Sequence[str], roles: Iterable[str],
               fields: Sequence[Column]) -> Column:
    """The code of each SP record for the user's ``roles`` from its ``fields`` (streams, tuples,
    attributes, roles, sign, immutable, grant), encoded in the JVM (``SpEncoder.java``); ``!``
    and the reason for a malformed record. Apply it to SP records only (under a ``when``)."""
    jvm = jvm_view(spark)
    strings = jvm.java.lang.String
    column = _jvm_operators(spark).SpEncoder.column(
        stream, _java_array(spark, strings, list(attributes)), _java_array(spark, strings, sorted(roles)),
        _java_array(spark, jvm.org.apache.spark.sql.Column, [field._jc for field in fields]))
    return ClassicColumn(column)


def rows_window(frame: DataFrame, n: int, funcs: Sequence[str], grouped: bool) -> DataFrame:
    """``frame`` (``_t``, ``_a``, ``_q``, ``_args``, ``_groups``, ``_lv``, ``_policies``, see
    ``RowsWindow.java``) through one continuous ``[ROWS n]`` window computing ``funcs``:
    ``ts``, ``_groups``, ``_aggs``, ``_level``, ``_policies``."""
    spark = frame.sparkSession
    jvm = jvm_view(spark)
    names = _java_array(spark, jvm.java.lang.String, list(funcs))
    return ClassicDataFrame(_jvm_operators(spark).RowsWindow.apply(frame._jdf, n, names, grouped), spark)


def security_shield(frame: DataFrame) -> DataFrame:
    """``frame`` (the columns of :data:`streamwarden.engine.shield.kernel.CONTROL`) through one
    Security Shield per provider (``SecurityShield.java``): ``_payload``, ``_gov``."""
    spark = frame.sparkSession
    return ClassicDataFrame(_jvm_operators(spark).SecurityShield.apply(frame._jdf), spark)


def rebase(template: DataFrame, placeholder: DataFrame, batch: DataFrame) -> DataFrame | None:
    """``template`` (a plan built over ``placeholder``) over ``batch``'s rows instead, its plan
    reused as analysed (``Rebase.java``); None when ``batch``'s columns (names, types,
    nullability) are not ``placeholder``'s, or ``template`` does not read it exactly once."""
    spark = batch.sparkSession
    jdf = _jvm_operators(spark).Rebase.onto(template._jdf, placeholder._jdf, batch._jdf)
    return None if jdf is None else ClassicDataFrame(jdf, spark)


def is_stateful(frame: DataFrame) -> bool:
    """Whether ``frame``'s plan keeps state across micro-batches (a Security Shield, an
    aggregate, a join, a deduplication: ``Plans.java``)."""
    return bool(_jvm_operators(frame.sparkSession).Plans.stateful(frame._jdf))


__all__ = ["JARS_ENV", "connector_jars", "is_stateful", "jars_dir", "jdk_tool", "kafka_available",
            "line_numbers", "rebase", "operators_jar", "rows_window", "security_shield", "sp_encoder", "spark_jars"]

