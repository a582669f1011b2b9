"""The SQLite file on disk: private to its owner (0600, with its -wal and -shm, in a 0700 folder
made here), and a 0-byte file refused rather than silently turned into a new, empty memory."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.store import StoreUnavailable
from memory.store.sqlite import SqliteStore
from tests.test_cli import companion, env_for

NOW = datetime(2025, 3, 1, tzinfo=UTC)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def empty_file(path: Path) -> None:
    path.write_bytes(b"")


def size(path: Path) -> int | None:
    """Its size in bytes, or None when there is no such file."""
    return path.stat().st_size if path.exists() else None


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most systems run with (files 0644, folders 0755 unless told otherwise)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.usefixtures("usual_umask")
async def test_a_new_database_and_its_side_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "memory.db"
    store = await SqliteStore.open(path)
    try:
        await store.upsert_user("telegram", "1", "Ana", NOW)
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert size(wal) is not None and size(shm) is not None  # in WAL mode, all three exist
        assert [mode(p) for p in (path, wal, shm)] == [0o600, 0o600, 0o600]
        assert mode(path.parent) == 0o700
    finally:
        await store.close()


@pytest.mark.usefixtures("usual_umask")
async def test_an_older_world_readable_database_is_made_private(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "shared" / "memory.db"
    store = await SqliteStore.open(path)
    await store.close()
    path.chmod(0o644)
    path.parent.chmod(0o755)  # a folder someone made: warned about, not changed
    caplog.set_level(logging.WARNING)
    store = await SqliteStore.open(path)
    try:
        assert mode(path) == 0o600 and mode(Path(f"{path}-wal")) == 0o600
        assert mode(path.parent) == 0o755
        assert f"chmod 700 {path.parent}" in caplog.text
    finally:
        await store.close()


async def test_an_empty_database_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    empty_file(path)
    with pytest.raises(StoreUnavailable) as refused:
        await SqliteStore.open(path)
    assert str(refused.value) == (
        f"the database {path} is an empty file (0 bytes), not a database: restore it from a "
        "backup, or delete it to start with a new, empty memory"
    )
    assert size(path) == 0 and size(Path(f"{path}-wal")) is None


async def test_the_cli_refuses_an_empty_database_file_at_start_up(tmp_path: Path) -> None:
    env = env_for(tmp_path, None)
    env.pop("DATABASE_URL", None)  # a SQLite file, whichever backend the suite runs on
    database = Path(env["DATABASE_PATH"])
    empty_file(database)
    code, _, err = await companion(
        "memory", "show", "--platform", "telegram", "--user", "x", env=env
    )
    assert code == 2
    assert f"companion: the database {database} is an empty file (0 bytes)" in err
    assert "restore it from a backup, or delete it" in err
    assert size(database) == 0
