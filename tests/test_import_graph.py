"""No package of the bot imports itself in a circle: each module's inputs can be read from its
imports, and a reader never has to hold two modules in mind to understand either. The graph is
read from the source (TYPE_CHECKING imports included: a circle hidden from the interpreter is
still a circle for the reader)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The folders whose modules must form no circle among themselves.
ACYCLIC = ("bot", "memory/engine")


def _modules(folder: str) -> dict[str, Path]:
    found = {}
    for path in (ROOT / folder).rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            targets.update([s for s in subs if s in known] or [node.module])
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in known}


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph as a path that comes back to its start, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _a_cycle(graph) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None


def test_no_package_imports_itself_in_a_circle() -> None:
    for folder in ACYCLIC:
        modules = _modules(folder)
        graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
        assert _a_cycle(graph) is None, f"{folder}: " + " -> ".join(_a_cycle(graph) or [])
