"""``python -m streamwarden.engine.jvm``: build the operators jar once, up front (``make`` does)."""

from streamwarden.engine.jvm import operators_jar

print(operators_jar())
