"""``python -m streamwarden.engine.jvm``: build the operators jar once, up front (``make`` does)."""

import sys

from streamwarden.engine.jvm import operators_jar
from streamwarden.errors import StreamwardenError

try:
    print(operators_jar())
except StreamwardenError as exc:  # no JDK, or a compile error: one line, as every command says it
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
