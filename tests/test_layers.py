"""The folders are the layers: each imports only from the layers below it.

language, catalog and plan < security passes < engine < runtime < api, cli, service. The
paper's network model (``papers``) sits beside the security passes, and only pyspark's
two layers, the engine and the runtime, import pyspark (``TYPE_CHECKING`` imports aside:
the API passes sessions through without touching them).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "streamwarden"

#: Each top-level part of the package and the parts it may import from (besides itself
#: and the shared helpers ``errors`` and ``names``).
ALLOWED: dict[str, set[str]] = {
    "language": {"catalog", "plan"},
    "catalog": {"language", "plan"},
    "plan": {"language", "catalog"},
    "security": {"language", "catalog", "plan"},
    "papers": {"language", "catalog", "plan", "security"},
    "engine": {"language", "catalog", "plan", "security"},
    "runtime": {"language", "catalog", "plan", "security", "engine"},
    "explain": {"language", "catalog", "plan", "security", "papers", "engine"},
    "api": {"language", "catalog", "plan", "security", "papers", "engine", "runtime", "explain"},
    "service": {"language", "catalog", "plan", "security", "engine", "runtime", "explain"},
    "cli": {"language", "catalog", "plan", "security", "papers", "engine", "runtime", "explain", "api", "demo",
            "datagen", "service", "__init__"},
    "demo": {"language", "catalog", "plan", "security", "papers", "engine", "runtime", "explain", "api", "datagen",
             "service"},
    "datagen": set(),
    "__init__": {"api", "catalog", "language", "security", "explain"},
}
SHARED = {"errors", "names", "records"}
PYSPARK_LAYERS = {"engine", "runtime"}


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def imports(tree: ast.Module) -> list[tuple[str, int, bool]]:
    """Every imported module with its line, and whether only type checkers see it."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for inner in child.body:
                    visit_statement(inner, True)
                for inner in child.orelse:
                    visit_statement(inner, typing_only)
            else:
                visit_statement(child, typing_only)

    def visit_statement(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno, typing_only))
        else:
            visit(node, typing_only)

    visit(tree, False)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_from_its_own_layer_and_those_below(path: Path) -> None:
    part = part_of(path)
    tree = ast.parse(path.read_text(), str(path))
    for module, line, typing_only in imports(tree):
        where = f"{path.relative_to(PACKAGE.parent)}:{line}"
        if module.split(".")[0] == "pyspark" and not typing_only:
            assert part in PYSPARK_LAYERS, f"{where} imports pyspark outside the engine and the runtime"
        if module.startswith("streamwarden."):
            target = module.split(".")[1]
            assert target == part or target in SHARED or target in ALLOWED[part], \
                f"{where}: {part} may not import {module}"
