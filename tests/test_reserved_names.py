"""The engine's column names and the names the language and catalog refuse are one definition.

:mod:`streamwarden.names` lists the columns the engine adds to rows (``RESERVED_COLUMNS``,
``RESERVED_PREFIXES``) without importing the engine; these tests import the engine's own
constants and check each is listed, so the two cannot drift apart: a column added to the
engine and not to names.py fails here, and the binder would let a user's alias collide
with it. No Spark is started (the engine's modules only import pyspark).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from streamwarden.names import RESERVED_COLUMNS, RESERVED_PREFIXES, SYSTEM_PREFIX, name_problem, reserved_problem

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "streamwarden"


def engine_columns() -> dict[str, str]:
    """Every column name the engine and the runtime put beside a query's own, by where it is defined."""
    from streamwarden.engine import compiler, execute, fanout, quarantine, rows, shared, sources
    from streamwarden.engine.columns import CARRIED, GRAPH_OF_MEMBER, MEMBER, action_column, param_column
    from streamwarden.engine.levels.columns import ROW_LEVEL
    from streamwarden.engine.shield.kernel import GOV
    from streamwarden.runtime.network import EARLIEST

    return {
        "compiler.POLICIES": compiler.POLICIES, "compiler.PROVENANCE": compiler.PROVENANCE,
        "compiler.BUCKET": compiler.BUCKET, "compiler.EVENT": compiler.EVENT, "compiler.ARRIVAL": compiler.ARRIVAL,
        "compiler.RANK": compiler.RANK, "compiler.GROUP_SIZE": compiler.GROUP_SIZE, "execute.GRAPH": execute.GRAPH,
        "shared.ROW": shared.ROW, "shared.key_column(0)": shared.key_column(0), "columns.CARRIED": CARRIED,
        "columns.MEMBER": MEMBER, "columns.GRAPH_OF_MEMBER": GRAPH_OF_MEMBER,
        "columns.param_column(0)": param_column(0),
        "columns.action_column": action_column("a", "start"), "levels.ROW_LEVEL": ROW_LEVEL,
        "rows.POLICIES": rows.POLICIES, "quarantine.BROKEN": quarantine.BROKEN, "quarantine.PLACE": quarantine.PLACE,
        "sources.CORRUPT": sources.CORRUPT, "sources.ARRIVAL": sources.ARRIVAL, "fanout.TO": fanout.TO,
        "shield.GOV": GOV, "network.EARLIEST": EARLIEST,
    }


@pytest.mark.parametrize(("where", "column"), sorted(engine_columns().items()))
def test_each_engine_column_is_named_in_the_one_definition(where: str, column: str) -> None:
    assert column in RESERVED_COLUMNS or column.startswith(tuple(RESERVED_PREFIXES)), \
        f"{where} = {column!r}: add it to streamwarden.names.RESERVED_COLUMNS (or a prefix of it)"
    assert reserved_problem(column) is not None and name_problem("attribute", column) is not None


def underscored_constants() -> list[tuple[str, str]]:
    """Every module-level string constant starting with '_' in the engine and the runtime: columns,
    and the hidden files and folders they write (``_SUCCESS``, ``_delivered.jsonl``)."""
    found = []
    for folder in ("engine", "runtime"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str) and node.value.value.startswith("_"):
                    found.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", node.value.value))
    return found


def test_every_underscored_name_of_the_engine_is_the_systems() -> None:
    found = underscored_constants()
    assert len(found) >= 20  # the scan sees the constants above
    assert all(value.startswith(SYSTEM_PREFIX) and reserved_problem(value) for _, value in found)


def test_names_a_user_chooses_freely_are_not_reserved() -> None:
    assert [reserved_problem(n) for n in ("value", "avg_value", "window_size", "policies", "graph")] == [None] * 5
