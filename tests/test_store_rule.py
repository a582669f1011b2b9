"""The rule that picks the tests of `make test-postgres` (tests/store_rule.py): a test with a
place for a store runs there, one without runs on SQLite only, and `make test` fails one that
reaches a store without that place."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import store_rule
from tests.conftest import REPO
from tests.patience import PATIENCE
from tests.pg_server import URL_VARIABLE

OUTSIDE = """
import os, sqlite3, tempfile

def test_opens_a_file_of_its_own():
    folder = tempfile.mkdtemp()
    sqlite3.connect(os.path.join(folder, "x.db")).close()

def test_pure():
    assert sum([1, 2]) == 3

def test_with_a_place(tmp_path):
    sqlite3.connect(tmp_path / "x.db").close()
"""
CONFTEST = """
from tests.conftest import *  # noqa: F403
from tests.conftest import _on_the_chosen_backend, pytest_collection_modifyitems  # noqa: F401
from tests.conftest import pytest_configure  # noqa: F401
"""


def test_a_test_without_a_place_is_watched(request: pytest.FixtureRequest) -> None:
    assert not store_rule.reaches_store(request.node)
    watch = request.config.stash.get(store_rule.WATCH, None)
    if watch is None:
        pytest.skip("the watch runs under make test (SQLite) only")
    seen = watch.seen
    sqlite3.connect(":memory:").close()
    subprocess.run(["git", "--version"], check=True, capture_output=True)
    assert seen == []
    with tempfile.TemporaryDirectory() as folder:
        sqlite3.connect(Path(folder) / "x.db").close()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert len(seen) == 2, seen
    assert seen[0].startswith("opened the SQLite database") and folder in seen[0]
    assert seen[1].startswith(f"started {sys.executable} -c pass")
    seen.clear()  # this test broke the rule on purpose


def test_a_test_with_a_place_reaches_the_store(tmp_path: Path, request: pytest.FixtureRequest):
    assert store_rule.reaches_store(request.node)


def _pytest(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    base.pop(URL_VARIABLE, None)
    base.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(folder)],
        cwd=folder,
        env={**base, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )


def test_make_test_fails_a_test_that_breaks_the_rule_and_postgres_keeps_the_others(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_outside.py").write_text(OUTSIDE, encoding="utf-8")
    sqlite_run = _pytest(tmp_path)
    out = sqlite_run.stdout
    assert sqlite_run.returncode == 1, out + sqlite_run.stderr
    assert "3 passed, 1 error" in out, out
    assert "test_opens_a_file_of_its_own reaches a store without asking" in out, out
    assert "test_with_a_place reaches" not in out and "test_pure reaches" not in out, out
    # The PostgreSQL run selects without connecting: the collection shows what it would run.
    listed = _pytest(tmp_path, "--collect-only", **{URL_VARIABLE: "postgresql://x@127.0.0.1:9/p"})
    ids = [line for line in listed.stdout.splitlines() if line.startswith("test_outside.py::")]
    assert ids == ["test_outside.py::test_with_a_place"], listed.stdout
    assert "1/3 tests collected (2 deselected)" in listed.stdout, listed.stdout
