"""No import cycles among our own modules: every `import` counts, also the ones inside functions.

A function-level import hides a cycle from the interpreter but not from the design: two modules that need
each other are one module split in the wrong place (this test was written when core.loading.builtin, core.loading.load
and core.loading.offload_policy imported each other; the format readers now live in core.modeling.model_files, below all
three). `if TYPE_CHECKING:` imports never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "app")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, known: set[str]) -> set[str]:
    """Our modules a module's code imports (`from core.x import y` names core.x.y when that is a module)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:
                    found.add(f"{node.module}.{alias.name}")
                elif node.module in known:
                    found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    known = set(files)
    return {name: _imported(ast.parse(path.read_text(encoding="utf-8")), known) - {name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (depth-first search, colours white/grey/black)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_find_cycle_finds_a_function_level_cycle() -> None:
    known = {"core.a", "core.b", "core.c"}
    a = ast.parse("def f():\n    from core.b import g\n")
    b = ast.parse("import core.c\n")
    c = ast.parse("from core import a\n")
    graph = {"core.a": _imported(a, known), "core.b": _imported(b, known), "core.c": _imported(c, known)}
    assert find_cycle(graph) == ["core.a", "core.b", "core.c", "core.a"]
    graph["core.c"] = _imported(ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from core import a\n"), known)
    assert find_cycle(graph) is None


def test_our_modules_import_no_cycle() -> None:
    graph = import_graph()
    assert {"core.loading.load", "core.loading.builtin", "core.loading.offload_policy"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
