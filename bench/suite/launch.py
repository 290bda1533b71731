"""Run a command and every process it leaves behind, so that all their CPU time is counted.

    python -m bench.suite.launch -- streamwarden replay ...

The runner counts a whole process's CPU through ``RUSAGE_CHILDREN``, which holds only the
processes waited for. A process may leave one running: PySpark's JVM exits after the
Python that started it (when its stdin closes), and a program that does not wait for it
(``streamwarden replay``) would let it be reparented to init, its CPU time lost. The
launcher becomes a child subreaper (Linux's ``PR_SET_CHILD_SUBREAPER``), so such orphans
are reparented to it; it reaps them all before it exits, and their time reaches the
runner with its own. Standard output and error are the command's; the exit status too.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (Linux); False where it cannot."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def run_reaped(command: Sequence[str], **options: Any) -> tuple[subprocess.CompletedProcess[Any], bool]:
    """``subprocess.run(command, **options)``, then wait for every orphan it left to this
    process; and whether this process could adopt them (else their CPU time is lost)."""
    adopted = become_subreaper()
    done = subprocess.run(list(command), **options)
    while True:  # the orphans adopted meanwhile, e.g. a JVM outliving its Python
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return done, adopted


def main(argv: Sequence[str]) -> int:
    command = list(argv[1:] if argv[:1] == ["--"] else argv)
    if not command:
        print("usage: python -m bench.suite.launch -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    done, adopted = run_reaped(command)
    if not adopted:
        print("bench.suite.launch: could not become a child subreaper; the CPU time of processes the command "
              "left running is not counted", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
