"""What actually failed, in one line: the deepest cause of a Spark failure that says something.

A failure inside a streaming query reaches Python wrapped several times over: a
``StreamingQueryException`` around a ``SparkException`` ("Exception thrown in
awaitResult:", with nothing after the colon), around a Py4J error ("An exception was
raised by the Python Proxy. Return Message: Traceback (most recent call last): ..."),
around the exception a ``foreachBatch`` function or a task raised. An operator, and a user
whose status repeats it, needs that last one: :func:`root_cause` walks the chain (the
Python exception, then the JVM's causes) and returns the first line of the deepest message
that is not a wrapper's, a Python traceback reduced to its exception line.

    >>> root_cause(RuntimeError("Exception thrown in awaitResult: "))
    'RuntimeError'
    >>> text = "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\\n"
    >>> root_cause(RuntimeError(text + '  File "x.py", line 3, in f\\nOSError: [Errno 28] No space left on device'))
    'OSError: [Errno 28] No space left on device'
"""

from __future__ import annotations

import re
from typing import Any

#: Messages that only say another exception follows (Spark's and Py4J's wrappers).
_WRAPPERS = re.compile(
    r"^\s*(?:Exception thrown in awaitResult|Job aborted due to stage failure|Writing job aborted|"
    r"An error occurred while calling|Error while invoking|Query \S+ \[id = [^\]]*\] terminated with exception|"
    r"\[STREAM_FAILED\][^:]*terminated with exception)\s*:?\s*$")
_TRACEBACK = "Traceback (most recent call last):"
_PROXY = re.compile(r"An exception was raised by the Python Proxy\. Return Message:\s*")
MAX_DEPTH = 12  # causes followed at most (a cycle of causes ends there too)
MAX_LENGTH = 300


def root_cause(exc: BaseException) -> str:
    """The first line of the deepest message in ``exc``'s chain of causes that is not a
    wrapper's (see the module docstring); the exception's type name when none says anything."""
    for message in reversed(_messages(exc)):
        line = _meaningful(message)
        if line:
            return line[:MAX_LENGTH]
    return type(exc).__name__


def _messages(exc: BaseException) -> list[str]:
    """The messages of ``exc`` and its causes, outermost first: Python's own chain, then the JVM's
    (a captured Spark exception's origin, or a Py4J error's Java exception)."""
    found: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    java: Any = None
    while current is not None and id(current) not in seen and len(found) < MAX_DEPTH:
        seen.add(id(current))
        found.append(_own_text(current))
        java = java or getattr(current, "_origin", None) or getattr(current, "java_exception", None)
        current = current.__cause__
    for _ in range(MAX_DEPTH):
        if java is None:
            break
        try:
            message = java.getMessage()
            found.append(f"{java.getClass().getName()}: {message}" if message is None else str(message))
            java = java.getCause()
        except Exception:  # the JVM is gone, or the object is not a Throwable
            break
    return found


def _own_text(exc: BaseException) -> str:
    """A Python exception's message without what Spark appends (the plan, the JVM stack)."""
    text = getattr(exc, "desc", None) or str(exc)
    for marker in ("\n=== Streaming Query ===", "\nJVM stacktrace:"):
        text = str(text).split(marker, 1)[0]
    return text if str(text).strip() else type(exc).__name__


def _meaningful(message: str) -> str | None:
    """The line that says what failed, or None for a wrapper's message."""
    text = _PROXY.sub("", message)
    if _TRACEBACK in text:  # a Python traceback: its last unindented line is the exception
        tail = [line for line in text.split(_TRACEBACK, 1)[1].splitlines() if line.strip() and not line[0].isspace()]
        return _meaningful(tail[-1]) if tail else None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or _WRAPPERS.match(lines[0]):
        return None
    line = re.sub(r"\s*SQLSTATE: \w+\s*$", "", lines[0])
    if line.endswith(": None"):  # a Java exception without a message: its class says it
        line = line[: -len(": None")]
    return line or None


__all__ = ["root_cause"]
