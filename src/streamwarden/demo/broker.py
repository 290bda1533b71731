"""A real Kafka broker on this machine, for the demo and the tests: one KRaft node.

Apache Kafka's own server, from Maven Central (``scripts/broker/pom.xml``, copied into
``build/kafka/libs`` by ``make jars``), run as a child process: controller and broker in one
JVM, listening on loopback only, its data and its log (never the terminal) in a folder of its
own. ``kafka.tools.StorageTool format`` first, then ``kafka.Kafka server.properties``. It is
stopped by its PID (kept in ``broker.pid``), by :meth:`Broker.stop` or :func:`stop_broker`.

    >>> import tempfile
    >>> from streamwarden.demo.broker import broker_libs, start_broker
    >>> broker = start_broker(Path(tempfile.mkdtemp()))  # doctest: +SKIP
    >>> broker.bootstrap  # doctest: +SKIP
    '127.0.0.1:40719'
    >>> broker.stop()  # doctest: +SKIP

A broker that does not come up raises :class:`BrokerError` with one line saying why (no
jars, no Java, the last line of its log) — the tests fail on it, they never skip.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from streamwarden.engine.jvm import jdk_tool
from streamwarden.errors import UsageError

#: The broker's jars, as ``make jars`` copies them (another folder laid out alike by this variable).
LIBS_ENV = "STREAMWARDEN_KAFKA_LIBS"
#: The line Kafka logs once the node serves clients.
STARTED = "Kafka Server started"
START_TIMEOUT = 90.0  # seconds: a cold JVM on two busy cores


class BrokerError(UsageError):
    """The broker could not be started (or stopped): one line, what to do."""


def broker_libs() -> Path:
    """The folder of the broker's jars (:data:`LIBS_ENV`, else ``build/kafka/libs`` of the checkout)."""
    named = os.environ.get(LIBS_ENV)
    if named:
        return Path(named)
    return Path(__file__).resolve().parents[3] / "build" / "kafka" / "libs"


def _java() -> str:
    found = jdk_tool("java")
    if found is None:
        raise BrokerError("the Kafka broker runs on Java 17 or newer, and no 'java' was found: install a JDK or set "
                          "JAVA_HOME")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cluster_id() -> str:
    """A cluster id as Kafka writes one: a UUID in URL-safe base64, unpadded, never starting
    with '-' (a command line would read it as an option; Kafka's own Uuid.randomUuid avoids it too)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass
class Broker:
    """A running broker: where clients reach it (:attr:`bootstrap`), its folder, its log."""

    folder: Path
    port: int
    controller_port: int
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "broker.log"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop it (SIGTERM, a controlled shutdown; SIGKILL after ``timeout`` seconds)."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        (self.folder / "broker.pid").unlink(missing_ok=True)

    def kill(self) -> None:
        """Kill it at once (SIGKILL: a crash, as a test of recovery wants)."""
        if self.alive():
            self.process.kill()
            self.process.wait()
        (self.folder / "broker.pid").unlink(missing_ok=True)

    def restart(self, timeout: float = START_TIMEOUT) -> "Broker":
        """Start it again on the same ports and data (after :meth:`stop` or :meth:`kill`)."""
        self.stop()
        self.process = _launch(self.folder, self.port, timeout)
        return self


def _properties(folder: Path, port: int, controller_port: int) -> str:
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={folder / 'data'}",
        "num.partitions=1",
        "auto.create.topics.enable=false",  # a mistyped topic is an error, never a new empty topic
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "log.retention.hours=-1",  # what the tests and the demo produce stays, to be replayed
        "",
    ])


_LOG4J = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


def _command(folder: Path, main: str, *args: str) -> list[str]:
    libs = broker_libs()
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"the Kafka broker's jars are not in {libs}: run 'make jars' (Maven fetches them)")
    return [_java(), "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={folder}", "-cp", str(libs / "*"), main, *args]


def start_broker(folder: Path, *, timeout: float = START_TIMEOUT) -> Broker:
    """Format a new single-node cluster in ``folder`` (which must be empty or new) and start it
    on two free loopback ports; return once it serves clients. Raises :class:`BrokerError`."""
    folder.mkdir(parents=True, exist_ok=True)
    port, controller_port = _free_port(), _free_port()
    (folder / "server.properties").write_text(_properties(folder, port, controller_port))
    (folder / "log4j2.properties").write_text(_LOG4J.format(log=folder / "broker.log"))
    with open(folder / "format.log", "wb") as out:
        done = subprocess.run(_command(folder, "kafka.tools.StorageTool", "format", f"--cluster-id={_cluster_id()}",
                                       "--config", str(folder / "server.properties")),
                              stdout=out, stderr=subprocess.STDOUT, check=False, timeout=timeout)
    if done.returncode != 0:
        raise BrokerError(f"the Kafka broker's storage could not be formatted: {_last_line(folder / 'format.log')}")
    process = _launch(folder, port, timeout)
    return Broker(folder, port, controller_port, process)


def _launch(folder: Path, port: int, timeout: float) -> subprocess.Popen[bytes]:
    log = folder / "broker.log"
    offset = log.stat().st_size if log.exists() else 0
    process = subprocess.Popen(_command(folder, "kafka.Kafka", str(folder / "server.properties")),
                               stdin=subprocess.DEVNULL, stdout=open(folder / "broker.out", "ab"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    (folder / "broker.pid").write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(f"the Kafka broker exited at start (code {process.returncode}): "
                              f"{_last_line(log, offset) or _last_line(folder / 'broker.out')}")
        if _started(log, offset) and _listening(port):
            return process
        time.sleep(0.1)  # polling a child's log: no event to wait for
    process.kill()
    process.wait()
    raise BrokerError(f"the Kafka broker did not come up within {timeout:.0f} s (its log: {log})")


def _started(log: Path, offset: int) -> bool:
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            return STARTED.encode() in f.read()
    except FileNotFoundError:
        return False


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _last_line(path: Path, offset: int = 0) -> str:
    """The log's last ERROR line (else its last line), for a one-line message."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        return ""
    errors = [line for line in lines if " ERROR " in line or "Exception" in line]
    return ((errors or lines or [""])[-1])[:300]


def stop_broker(folder: Path) -> bool:
    """Stop the broker whose ``broker.pid`` is in ``folder`` (another process's); whether one ran."""
    pid_file = folder / "broker.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


__all__ = ["Broker", "BrokerError", "LIBS_ENV", "broker_libs", "start_broker", "stop_broker"]
