"""The layers of docs/architecture.md: a module of memory/ imports only from its own layer or
the layers below it, memory/ never from bot/, and no package of ours has an import circle
(what runs at import time; a lazy import inside a function may go sideways, never up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import cycles, module_imports

REPO = Path(__file__).resolve().parent.parent

# Bottom to top. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("memory.models", "memory.errors", "memory.platform_text",
                    "memory.engine.llm", "memory.profile.fact_keys", "memory.journey.model",
                    "memory.search.terms")),
    ("gate", ("memory.integrity",)),
    ("store", ("memory.store",)),
    ("calls", ("memory.engine.tokens", "memory.engine.forced_tool", "memory.engine.retries",
               "memory.engine.labels", "memory.engine.prefix", "memory.usage_stats",
               "memory.budget")),
    ("tiers", ("memory.summary", "memory.profile", "memory.journey", "memory.search",
               "memory.scene.facts", "memory.scene.voices")),
    ("conversation", ("memory.engine", "memory.scene")),
    ("services", ("memory",)),
)  # fmt: skip


def layer_of(module: str) -> int:
    """The index in LAYERS of the module's layer."""
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            named = module == prefix or module.startswith(prefix + ".")
            if named and len(prefix) > length:
                best, length = index, len(prefix)
    assert best >= 0, f"{module} is in no layer of tests/test_layers.py"
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            if layer_of(target) > layer_of(module):
                below, above = LAYERS[layer_of(module)][0], LAYERS[layer_of(target)][0]
                found.append(f"{module} ({below}) imports {target} ({above})")
    return found


def test_memory_imports_follow_the_layers() -> None:
    assert upward_imports(module_imports(REPO, "memory")) == []


def test_the_check_sees_an_import_that_runs_upward() -> None:
    graph = {"memory.summary.rolling": {"memory.engine.prompt"}, "memory.engine.prompt": set()}
    assert upward_imports(graph) == [
        "memory.summary.rolling (tiers) imports memory.engine.prompt (conversation)"
    ]


def test_memory_never_imports_bot() -> None:
    files = {p.stem for p in (REPO / "bot").rglob("*.py")}
    assert files  # the check below would pass on an empty bot/
    for module, imported in module_imports(REPO, "memory").items():
        assert not [m for m in imported if m == "bot" or m.startswith("bot.")], module
    # module_imports keeps only modules of the package it reads: read memory/ for bot.* too
    for path in (REPO / "memory").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "from bot" not in text and "import bot" not in text, path


# bot/, cards/ and the engine allow no circle even through a lazy import inside a function;
# in memory/ as a whole open_store (memory/store/__init__.py) picks a backend lazily, by design.
@pytest.mark.parametrize(
    ("package", "top_level"),
    [("memory", True), ("memory/engine", False), ("bot", False), ("cards", False), ("bench", True)],
)
def test_no_import_circle(package: str, top_level: bool) -> None:
    assert cycles(module_imports(REPO, package, top_level=top_level)) == []


def test_the_circle_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
