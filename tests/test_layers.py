"""The folders are the layers: each imports only from the layers below it.

language, catalog and plan < security passes < engine < runtime < api < cli, service. The
paper's network model (``papers``) sits beside the security passes, and only pyspark's
two layers, the engine and the runtime, import pyspark (``TYPE_CHECKING`` imports aside:
the API passes sessions through without touching them). The front ends, the command line
and the service, call the API only (:data:`FRONT_ENDS`).
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
    "words": {"language", "catalog", "plan", "security"},
    "explain": {"language", "catalog", "plan", "security", "papers", "engine", "words"},
    "api": {"language", "catalog", "plan", "security", "papers", "engine", "runtime", "explain", "words"},
    "service": {"api"},
    "cli": {"api", "demo", "service", "__init__"},
    "demo": {"language", "catalog", "plan", "security", "papers", "engine", "runtime", "explain", "words", "api",
             "datagen", "service"},
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


#: The public surface: the API, and the leaf modules its docstring names public (errors, the
#: rules for names and private paths, JSON-lines records).
PUBLIC = {"streamwarden.api", "streamwarden.errors", "streamwarden.names", "streamwarden.records"}
#: What each front end may import of streamwarden, by module: the public surface and its own
#: modules; the command line also its version and the entry points of the two front ends it
#: hands over to (``serve``: the service; ``demo``: the demo, itself a program over the API).
FRONT_ENDS: dict[str, set[str]] = {
    "cli": PUBLIC | {"streamwarden.__version__", "streamwarden.service.server", "streamwarden.demo",
                     "streamwarden.demo.serve"},
    "service": PUBLIC | {f"streamwarden.service.{p.stem}" for p in (PACKAGE / "service").glob("*.py")},
}


def streamwarden_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """Every name of streamwarden a module imports, with its line, ``TYPE_CHECKING`` and
    function-level imports included: ``from streamwarden.api import run`` is ``streamwarden.api``,
    ``from streamwarden import api`` and ``import streamwarden.api`` are ``streamwarden.api``."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "streamwarden"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "streamwarden":
                found += [(f"streamwarden.{alias.name}", node.lineno) for alias in node.names]
            elif node.module.startswith("streamwarden."):
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # relative: refused outright, named as written
            found.append(("." * node.level + (node.module or ""), node.lineno))
    return found


FRONT_END_MODULES = sorted(p for part in FRONT_ENDS for p in (PACKAGE / part).glob("*.py"))


@pytest.mark.parametrize("path", FRONT_END_MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_command_line_and_the_service_call_the_api_only(path: Path) -> None:
    allowed = FRONT_ENDS[part_of(path)]
    tree = ast.parse(path.read_text(), str(path))
    forbidden = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
                 for module, line in streamwarden_imports(tree) if module not in allowed]
    assert not forbidden, ("the front ends call streamwarden.api (and errors, names, records) only; add what they "
                           "need to the API:\n" + "\n".join(forbidden))


def test_the_layer_check_finds_a_forbidden_import() -> None:
    tree = ast.parse("from streamwarden import api\nif True:\n    from streamwarden.runtime.network import X\n"
                     "import streamwarden.engine.session\nfrom streamwarden import names, plan\n")
    assert sorted(streamwarden_imports(tree), key=lambda found: found[1]) == [
        ("streamwarden.api", 1), ("streamwarden.runtime.network", 3), ("streamwarden.engine.session", 4),
        ("streamwarden.names", 5), ("streamwarden.plan", 5)]
