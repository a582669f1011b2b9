"""bench/ as one package with one entry: `python -m bench` lists every suite, runs one by name,
refuses an unknown name with the valid ones, and no bench module imports one that imports it
back."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import SUITES
from tests.import_graph import cycles, module_imports

# The benches open stores of their own or start processes that may (tests/store_rule.py).
pytestmark = pytest.mark.usefixtures("database_target")

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=240,
    )  # fmt: skip


def has_main(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)


def test_the_listing_names_every_suite_with_a_line_each() -> None:
    done = run_bench()
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert listed == [s.name for s in SUITES]
    assert all(s.what for s in SUITES)


def test_every_bench_with_a_main_is_a_suite_and_every_suite_has_one() -> None:
    with_main = {
        f"bench.{p.stem}" for p in BENCH.glob("*.py") if p.stem != "__main__" and has_main(p)
    }
    assert with_main == {s.module for s in SUITES}


def test_a_suite_runs_by_name_with_its_own_options() -> None:
    done = run_bench("locomo_gate", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: python -m bench locomo_gate" in done.stdout


def test_an_unknown_suite_is_refused_with_the_valid_names() -> None:
    done = run_bench("no_such_bench")
    assert done.returncode == 2
    assert "no_such_bench" in done.stderr and "context_growth" in done.stderr


def test_no_bench_module_imports_one_that_imports_it_back() -> None:
    graph = module_imports(REPO, "bench", type_checking=True, top_level=True)
    assert cycles(graph) == []
