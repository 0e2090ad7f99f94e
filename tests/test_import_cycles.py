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
    return {
        name: _imported(ast.parse(path.read_text(encoding="utf-8")), known) - {name} for name, path in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (depth-first search, colours white/grey/black)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
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
    graph["core.c"] = _imported(
        ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from core import a\n"), known
    )
    assert find_cycle(graph) is None


def test_our_modules_import_no_cycle() -> None:
    graph = import_graph()
    assert {"core.loading.load", "core.loading.builtin", "core.loading.offload_policy"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# core's layers, top to bottom: a module imports only from its own package or from layers below it
# (docs/engine.md, "Where the code is"). The measurement code at the top is imported by nothing but the
# command line that runs it; the app reads the doctor's report and runs the doctor.
CORE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("core.cli", "core.bench"),
    ("core.server", "core.remote", "core.doctor", "core.tools"),  # core.tools: the MCP servers the chats call
    ("core.engine",),
    ("core.loading",),
    ("core.decoding",),
    ("core.models",),  # the catalog, fit and speed read the hardware description
    ("core.hardware",),  # `hw --measure` times the offload package's kernels
    ("core.offload",),
    ("core.modeling",),
    ("core.planning", "core.text"),
    ("core.system",),  # its readers of hand-written files raise core.errors' TextEncodingError
    ("core.errors",),  # imports nothing of core
)


def _package(module: str) -> str | None:
    """The layered package a module of core belongs to (core.decoding.methods.step -> core.decoding)."""
    for layer in CORE_LAYERS:
        for package in layer:
            if module == package or module.startswith(package + "."):
                return package
    return None


def _rank(package: str) -> int:
    return next(rank for rank, layer in enumerate(CORE_LAYERS) if package in layer)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports that climb: from a lower layer to a higher one, or sideways between two packages of one
    layer (two packages on one layer that need each other are one layer split wrongly)."""
    found = []
    for module, imported in sorted(graph.items()):
        here = _package(module)
        if here is None:
            continue
        for other in sorted(imported):
            there = _package(other)
            if there is None or there == here:
                continue
            if _rank(there) < _rank(here) or (_rank(there) == _rank(here) and here != "core.bench"):
                found.append(f"{module} -> {other}")
    return found


def test_every_core_module_sits_in_a_layer() -> None:
    graph = import_graph()
    assert [name for name in graph if name.startswith("core.") and _package(name) is None] == []


def test_upward_imports_are_found() -> None:
    graph = {
        "core.decoding.sampling": {"core.engine.protocol"},
        "core.engine.session": {"core.decoding.sampling"},
        "core.server.api": {"core.doctor.report"},
        "core.bench.trace": {"core.cli.options"},
    }
    assert upward_imports(graph) == [
        "core.decoding.sampling -> core.engine.protocol",
        "core.server.api -> core.doctor.report",
    ]


def test_no_core_module_imports_a_higher_layer() -> None:
    assert upward_imports(import_graph()) == []


def test_measurement_code_is_imported_only_by_its_command_line_and_the_app() -> None:
    graph = import_graph()
    importers = {
        module
        for module, imported in graph.items()
        if any(_package(name) in ("core.bench", "core.doctor") for name in imported)
        and _package(module) not in ("core.bench", "core.doctor", "core.cli")
        and not module.startswith("app.")
    }
    assert importers == set()
