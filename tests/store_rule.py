"""Which tests `make test-postgres` runs: those that can reach the store, and only those.

A test reaches the store when it has somewhere to keep one: a SQLite store is a file, so its
fixtures include `tmp_path` (or `tmp_path_factory`, or `database_target`; `settings` and `app`
build on `tmp_path`), or it asks for the PostgreSQL server itself (`pg_base`, under `pg_url` and
`any_store`). The other tests (the memory gate's sentences, render goldens, lint, card and CLI
parsing, the fakes) run the same code on either backend, so the PostgreSQL run leaves them out
(pytest reports them as deselected) and gives each kept test a database of its own.

The rule stays true by a check, not by a list: under `make test` (SQLite) an audit hook
watches every test outside the rule, and fails it when it opens a SQLite file (`:memory:` is
no store) or starts a Python process (a `companion` or bench process may open one the parent
cannot see). Such a test asks for `tmp_path` or `database_target`, and joins the PostgreSQL run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# pg_base: the tests of PostgreSQL itself (pg_url, any_store), which make test skips on a
# machine without its binaries (a fresh CI machine gets them for make test-postgres only).
STORE_FIXTURES = ("database_target", "tmp_path", "tmp_path_factory", "pg_base")
_PROGRAMS = ("python", "companion")


def reaches_store(item: pytest.Item) -> bool:
    """True when the test's fixtures give it a place for a store (the module's rule)."""
    names = getattr(item, "fixturenames", ())
    return any(name in names for name in STORE_FIXTURES)


def _runs_python(executable: Any, args: Any) -> bool:
    first = executable if executable else (args[0] if isinstance(args, list | tuple) else args)
    name = Path(str(first)).name
    return any(name.startswith(program) for program in _PROGRAMS)


class StoreWatch:
    """An audit hook (sys.addaudithook): what a test outside the rule did that may reach a
    store. Installed once per process; it notes events only while a test is watched."""

    def __init__(self) -> None:
        self.watched: str | None = None
        self.seen: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.watched is None:
            return
        if event == "sqlite3.connect" and str(args[0]) != ":memory:":
            self.seen.append(f"opened the SQLite database {args[0]}")
        elif event == "subprocess.Popen" and _runs_python(args[0], args[1]):
            self.seen.append(f"started {' '.join(map(str, args[1]))[:200]}")

    @contextmanager
    def watching(self, nodeid: str) -> Iterator[list[str]]:
        """Notes what the test does meanwhile; yields the list it fills."""
        self.watched, self.seen = nodeid, []
        try:
            yield self.seen
        finally:
            self.watched = None


def complaint(nodeid: str, seen: list[str]) -> str:
    return (
        f"{nodeid} reaches a store without asking for a place to keep it, so make "
        f"test-postgres would leave it out (tests/store_rule.py): it {'; '.join(seen[:3])}. "
        "Request `tmp_path` or `database_target` (pytest.mark.usefixtures)."
    )


WATCH = pytest.StashKey[StoreWatch]()


def install(config: pytest.Config) -> None:
    """The watch for this process (the SQLite run only: the PostgreSQL run selects by it)."""
    watch = StoreWatch()
    sys.addaudithook(watch)
    config.stash[WATCH] = watch


def keep_store_tests(config: pytest.Config, items: list[pytest.Item]) -> int:
    """The PostgreSQL run: drop the tests outside the rule (reported as deselected); returns
    how many stay."""
    kept = [item for item in items if reaches_store(item)]
    dropped = [item for item in items if not reaches_store(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    return len(kept)
