"""What the benchmarks ran on: hardware and software versions.

Everything is read locally (``/proc``, ``java -version``, package metadata); nothing is
sent anywhere. Missing information is reported as "unknown" rather than failing a run.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class Machine:
    cpus: int
    memory_gib: float
    cpu_model: str
    os: str
    python: str
    pyspark: str
    java: str
    z3: str
    matplotlib: str
    streamwarden_commit: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def collect(repo: Path) -> Machine:
    """Describe this machine; ``repo`` is the streamwarden checkout (for its git commit)."""
    return Machine(
        cpus=_nproc(),
        memory_gib=_memory_gib(),
        cpu_model=_cpu_model(),
        os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        pyspark=_version("pyspark"),
        java=_java_version(),
        z3=_z3_version(),
        matplotlib=_version("matplotlib"),
        streamwarden_commit=_git_commit(repo),
    )


def _nproc() -> int:
    # nproc honours the CPU affinity mask (containers), os.cpu_count() does not.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 0


def _memory_gib() -> float:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return float("nan")
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return round(int(match.group(1)) / 1024**2, 1) if match else float("nan")


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return match.group(1).strip() if match else (platform.processor() or "unknown")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (out.stderr or out.stdout).strip().splitlines()
    return " / ".join(line.strip() for line in lines[:2]) if lines else "unknown"


def _z3_version() -> str:
    try:
        import z3

        return z3.get_version_string()
    except ImportError:
        return "not installed"


def _git_commit(repo: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True,
                              text=True, timeout=30).stdout.strip()
        # The results a run is writing are not a change to what it measures.
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)bench/results"], cwd=repo, capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if not head:
        return "unknown"
    return f"{head} (with uncommitted changes)" if dirty else head
