"""What an older version left readable by others is made private when this one next uses it
(issue 35, "faults"): the database's -wal and -shm files (0600), the log file (0600), and the
exports folder (0700, as the terminal's /memoria exportar and `memory export` write into it).
A folder the admin named (`--out`, the data folder) is warned about elsewhere, never changed."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import stat
from pathlib import Path

import pytest

from bot.logging_setup import configure_logging
from bot.private_files import write_private_file
from memory.models import Thread
from memory.store import open_store
from memory.store.sqlite import SqliteStore
from tests.conftest import FakeClock
from tests.test_cli import cli_database, companion, env_for
from tests.test_log_payloads import restore_logging  # noqa: F401 (a fixture)

NOW = FakeClock().now


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_by_an_older_version(path: Path) -> sqlite3.Connection:
    """A connection that keeps the -wal and -shm files in place, all three made 0644."""
    raw = sqlite3.connect(path, check_same_thread=False)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("CREATE TABLE IF NOT EXISTS older (x)")
    raw.execute("INSERT INTO older VALUES (1)")
    raw.commit()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").chmod(0o644)
    return raw


async def test_an_older_databases_wal_and_shm_are_made_private(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    await (await SqliteStore.open(path)).close()
    raw = await asyncio.to_thread(open_by_an_older_version, path)
    try:
        assert {mode(Path(f"{path}{s}")) for s in ("", "-wal", "-shm")} == {0o644}
        store = await SqliteStore.open(path)
        try:
            for suffix in ("", "-wal", "-shm"):
                assert mode(Path(f"{path}{suffix}")) == 0o600, suffix
        finally:
            await store.close()
    finally:
        raw.close()


@pytest.mark.usefixtures("restore_logging")
def test_an_older_log_file_is_made_private_and_kept(tmp_path: Path) -> None:
    log = tmp_path / "companion.log"
    log.write_text("2025-01-01 INFO an older version's line\n")
    log.chmod(0o644)
    assert configure_logging("INFO", [], log, to_stderr=False) == log
    logging.getLogger("companion").info("this version's line")
    assert mode(log) == 0o600
    assert log.read_text().splitlines()[0] == "2025-01-01 INFO an older version's line"


async def test_memory_exports_default_folder_is_made_private(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir(mode=0o755)
    exports.chmod(0o755)
    store = await open_store(cli_database(tmp_path))
    try:
        user = await store.upsert_user("terminal", "ana", "Ana", NOW)
        thread = Thread(user.id, "detective_bilbao", "dm")
        await store.add_turn(await store.start_conversation(thread, NOW), "user", "Hola", NOW)
    finally:
        await store.close()
    export = ["memory", "export", "--platform", "terminal", "--user", "ana"]
    code, _, err = await companion(
        *export, "--character", "detective_bilbao", env=env_for(tmp_path, None)
    )
    assert code == 0, err
    assert mode(exports) == 0o700
    assert [mode(f) for f in exports.iterdir()] == [0o600]


def test_the_terminals_exports_folder_is_made_private(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir(mode=0o755)
    exports.chmod(0o755)
    written = write_private_file(exports, "memoria.json", b"{}")
    assert (mode(exports), mode(written)) == (0o700, 0o600)
