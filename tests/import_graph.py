"""The project's import graph read from the source (nothing imported): which module of a
package imports which, TYPE_CHECKING and function-level imports included when asked, and the
cycles in it."""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _statements(tree: ast.Module, top_level: bool) -> list[ast.stmt]:
    """Every statement of a module, or with `top_level` only those run when it is imported
    (inside `if` and `try` blocks, not inside functions or classes)."""
    if not top_level:
        return [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, ast.If | ast.Try):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            todo += [s for handler in getattr(node, "handlers", []) for s in handler.body]
    return found


def imports_of(tree: ast.Module, type_checking: bool, top_level: bool = False) -> set[str]:
    """The modules a file imports (`from a.b import c` counts as a.b, and a.b.c when that is
    a module the caller knows); with `top_level`, only the imports run at import time."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and not type_checking and _is_type_checking(node.test):
            node.body = []
    for node in _statements(tree, top_level):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from a.b import c`: a.b.c when c is a module (module_imports keeps only known
            # modules), else a.b; a package's own __init__ runs before any of its modules, so
            # reaching a module through its package is no import of the package's names
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
            found.add(f"{node.module}?")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def module_imports(
    root: Path, package: str, type_checking: bool = True, top_level: bool = False
) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (at import time only, with `top_level`)."""
    files = {module_name(root, p): p for p in (root / package).rglob("*.py")}
    # a sub-folder ("memory/engine") is read alone, but its modules keep their full names
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = imports_of(tree, type_checking, top_level)
        modules = {m for m in imported if m in files}
        # "a.b?" stands for `from a.b import ...`: an edge to a.b unless every name was a module
        for marked in [m for m in imported if m.endswith("?")]:
            package = marked[:-1]
            if package in files and not _only_modules(tree, package, files):
                modules.add(package)
        graph[name] = modules - {name}
    return graph


def _only_modules(tree: ast.Module, package: str, files: dict[str, Path]) -> bool:
    """Whether every `from package import ...` of the file names modules of the package."""
    names = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == package and node.level == 0
        for alias in node.names
    ]
    return all(f"{package}.{name}" in files for name in names)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
