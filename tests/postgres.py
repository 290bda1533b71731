"""A throwaway PostgreSQL server for the store tests (a helper module, not a conftest).

:func:`postgres_server` runs ``initdb`` into a fresh temporary folder, starts the server
on a unix socket only (no TCP: nothing outside this machine, or on it, can reach it by
port), creates one database and yields its SQLAlchemy URL; afterwards it stops the
server (``-m immediate``: its data is thrown away, so nothing needs flushing) and
deletes the folder. :func:`fresh_database` gives each test a database of its own on it.

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` OS
user (``runuser``), which owns the folder. When the binaries or that user are missing,
or a non-root user cannot start a server, the tests that need it are skipped with the
reason: the SQLite half of the contract still runs everywhere.

The server runs with a time zone other than UTC on purpose: a timestamp that only
round-trips because the server happens to be in UTC would pass unnoticed otherwise.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Sequence

import pytest

OS_USER = "postgres"
SUPERUSER = "postgres"
SERVER_TIME_ZONE = "Asia/Kolkata"  # UTC+05:30: not UTC, and not a whole hour off either
START_TIMEOUT = 20.0  # seconds; a server starts in well under one
POLL_INTERVAL = 0.05


def find_bindir() -> Path | None:
    """The folder with ``initdb``, ``pg_ctl`` and ``pg_isready``: ``pg_config --bindir``, else
    the newest ``/usr/lib/postgresql/*/bin`` (Debian installs the server there, off the PATH)."""
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        try:
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    candidates += [Path(p) for p in versions]
    for folder in candidates:
        if all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "pg_isready")):
            return folder
    return None


def _version_key(path: str) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin`` -> (15,), so that 15 sorts after 9.6."""
    version = Path(path).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def free_port() -> int:
    """A port number no one listens on now. The server opens no TCP port, but the number
    names its socket file; a free one keeps it clear of any other server's."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Runner:
    """Runs the server's tools as the ``postgres`` OS user when we are root (PostgreSQL
    refuses root), else as ourselves."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.as_root = os.geteuid() == 0
        self.owner: pwd.struct_passwd | None = None
        if self.as_root:
            if shutil.which("runuser") is None:
                pytest.skip("PostgreSQL tests: running as root, but runuser (to start the server as "
                            f"{OS_USER}) is missing")
            try:
                self.owner = pwd.getpwnam(OS_USER)
            except KeyError:
                pytest.skip(f"PostgreSQL tests: running as root and there is no {OS_USER!r} OS user to run "
                            "the server as (PostgreSQL refuses to run as root)")

    def own(self, folder: Path) -> None:
        """Make ``folder`` the server user's, private to it."""
        if self.owner is not None:
            os.chown(folder, self.owner.pw_uid, self.owner.pw_gid)
        folder.chmod(0o700)

    def run(self, tool: str, args: Sequence[str], *, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
        command = [str(self.bindir / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", OS_USER, "--", *command]
        # cwd: a folder the server user can enter (it may not enter root's working directory)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"LC_ALL": "C"}
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@contextmanager
def postgres_server(database: str = "streamwarden") -> Iterator[str]:
    """Start a throwaway server with one database ``database``; yields its SQLAlchemy URL
    (``postgresql+psycopg://postgres@/DB?host=SOCKDIR&port=PORT``). Skips (pytest.skip)
    when no server can be run here; the server is stopped and its files deleted after."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL tests: no PostgreSQL server binaries (initdb, pg_ctl; looked at pg_config "
                    "--bindir and /usr/lib/postgresql/*/bin)")
    runner = _Runner(bindir)
    root = Path(tempfile.mkdtemp(prefix="sw-pg-"))  # short: a socket path has at most 107 characters
    started = False
    try:
        runner.own(root)
        sockets = root / "sock"
        sockets.mkdir()
        runner.own(sockets)
        data, port = root / "data", free_port()
        _initdb(runner, data, root)
        _start(runner, data, sockets, port, root)
        started = True
        _wait_ready(runner, sockets, port, root)
        url = f"postgresql+psycopg://{SUPERUSER}@/{database}?host={sockets}&port={port}"
        _admin(url, f'CREATE DATABASE "{database}"', database="postgres")
        yield url
    finally:
        if started:
            runner.run("pg_ctl", ["stop", "-D", str(root / "data"), "-m", "immediate", "-s"], cwd=root)
        shutil.rmtree(root, ignore_errors=True)


def _initdb(runner: _Runner, data: Path, root: Path) -> None:
    """A new cluster: superuser ``postgres``, trust authentication (only the socket, in a
    folder private to the server user, reaches it), no fsync (thrown away after)."""
    done = runner.run("initdb", ["-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C",
                                 "--no-sync"], cwd=root)
    if done.returncode != 0:
        _cannot(runner, "initdb", done.stdout + done.stderr)


def _start(runner: _Runner, data: Path, sockets: Path, port: int, root: Path) -> None:
    """Start without waiting (-W): readiness is polled with pg_isready, on a short interval."""
    options = (f"-k {sockets} -p {port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
               f"-c full_page_writes=off -c max_connections=200 -c timezone={SERVER_TIME_ZONE}")
    done = runner.run("pg_ctl", ["start", "-W", "-s", "-D", str(data), "-l", str(root / "server.log"),
                                 "-o", options], cwd=root)
    if done.returncode != 0:
        _cannot(runner, "pg_ctl start", done.stdout + done.stderr + _log(root))


def _wait_ready(runner: _Runner, sockets: Path, port: int, root: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        ready = runner.run("pg_isready", ["-q", "-h", str(sockets), "-p", str(port), "-t", "1"], cwd=root)
        if ready.returncode == 0:
            return
        time.sleep(POLL_INTERVAL)
    _cannot(runner, f"the server (not ready after {START_TIMEOUT:.0f} s)", _log(root))


def _cannot(runner: _Runner, what: str, output: str) -> None:
    """As root we can run a server, so a failure is a failure; otherwise skip: the machine
    may not let this user run one."""
    message = f"PostgreSQL tests: {what} failed:\n{output.strip()[-2000:]}"
    if runner.as_root:
        raise RuntimeError(message)
    pytest.skip(message)


def _log(root: Path) -> str:
    try:
        return "\n" + (root / "server.log").read_text(errors="replace")
    except OSError:
        return ""


def _admin(url: str, statement: str, *, database: str = "postgres") -> object:
    """Run ``statement`` outside a transaction (CREATE/DROP DATABASE refuse one) in ``database``;
    returns the first value of its first row, if it returns rows."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(make_url(url).set(database=database), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            result = conn.execute(text(statement))
            return result.scalar() if result.returns_rows else None
    finally:
        engine.dispose()


@lru_cache(maxsize=None)
def _server_version(server_url: str) -> int:
    """``server_version_num`` (150004 for 15.4), once per server."""
    return int(str(_admin(server_url, "SHOW server_version_num")))


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server of ``server_url`` (its URL), dropped after, so that
    tests never see each other's tables. FORCE ends connections a test's engines still hold;
    FILE_COPY (PostgreSQL 15 on) copies the template in about half the time of WAL_LOG."""
    from sqlalchemy.engine import make_url

    version = _server_version(server_url)
    name = f"t_{uuid.uuid4().hex}"
    _admin(server_url, f'CREATE DATABASE "{name}"' + (" STRATEGY FILE_COPY" if version >= 150000 else ""))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        _admin(server_url, f'DROP DATABASE IF EXISTS "{name}"' + (" WITH (FORCE)" if version >= 130000 else ""))
