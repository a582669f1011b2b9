"""What only the PostgreSQL store has: its migrations and their refusal of a newer schema, the
change feed over LISTEN/NOTIFY, the table copy, its URLs; and the throwaway server's CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import asyncpg
import pytest

from memory.models import Thread
from memory.search.terms import query_terms
from memory.store import SchemaTooNewError
from memory.store.copy import copy_key
from memory.store.postgres import PostgresStore, available_pg_migrations, redact_url
from memory.store.postgres.base import normalise_url
from memory.store.sqlite import available_migrations
from tests import pg_fixtures
from tests.conftest import REPO
from tests.patience import PATIENCE
from tests.test_postgres_store import DETECTIVE, fact, talk

pytestmark = pg_fixtures.needs_postgres
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def test_migrations_are_applied_in_order_and_recorded(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        rows = await store._execute("SELECT version, name FROM schema_migrations ORDER BY 1")
        assert [r["name"] for r in rows] == [name for _, name, _ in available_pg_migrations()]
        versions = [version for version, _, _ in available_pg_migrations()]
        assert [r["version"] for r in rows] == versions
        # SQLite's numbering: each number in both folders (a PostgreSQL-only table's SQLite
        # file is a no-op), so that one schema version means one thing on both backends.
        assert versions == [version for version, _, _ in available_migrations()]
        assert await store.migrate() == []
        assert await store.schema_version() == versions[-1]
        assert await store.integrity_check() == "ok"
    finally:
        await store.close()


async def test_refuses_a_database_from_a_newer_schema(pg_url: str) -> None:
    raw = await asyncpg.connect(pg_url)
    await raw.execute("INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 'x')")
    await raw.close()
    with pytest.raises(SchemaTooNewError, match="999"):
        await PostgresStore.open(pg_url)


async def test_other_processes_writes_move_the_counter_and_own_do_not(pg_url: str) -> None:
    bot = await PostgresStore.open(pg_url)
    cli = await PostgresStore.open(pg_url)
    try:
        ana = await talk(bot, "ana", ["hola"])
        await bot.apply_fact_changes([fact(ana, "city", "Getxo")], [], [], [], None, NOW)
        await asyncio.sleep(0.2)
        assert bot.external_changes == 0  # its own writes, turns and conversations included
        seen = cli.external_changes
        assert seen >= 1  # the bot's fact, seen by the other
        for write in (
            cli.set_review_mode(ana.user_id, True),
            cli.bind_channel("telegram", "-1", DETECTIVE, "admin", NOW),
            cli.choose_character(ana.user_id, "dm", DETECTIVE, NOW),
            cli.forget(ana.user_id, DETECTIVE),
        ):
            before = bot.external_changes
            await write
            await _until(lambda before=before: bot.external_changes > before)
        assert cli.external_changes == seen  # nothing of its own counted
        # A new turn or conversation of another process's user is not a change to a cache.
        before = bot.external_changes
        await talk(cli, "bea", ["hola"])
        await asyncio.sleep(0.2)
        assert bot.external_changes == before
    finally:
        await bot.close()
        await cli.close()


async def _until(condition: Callable[[], bool], seconds: float = PATIENCE) -> None:
    """Poll: the notice arrives on the feed's own connection, with no event to wait on."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "no notice arrived"
        await asyncio.sleep(0.01)


async def test_copy_moves_every_table_with_its_ids(pg_base: str, pg_url: str) -> None:
    source = await PostgresStore.open(pg_url)
    target = await PostgresStore.open(await pg_fixtures.fresh_database(pg_base))
    try:
        ana = await talk(source, "ana", [f"frase {i} sobre el barco" for i in range(7)])
        await source.apply_fact_changes([fact(ana, "city", "Getxo")], [], [], [], None, NOW)
        await source.choose_character(ana.user_id, "dm", DETECTIVE, NOW)
        await source.bind_channel("telegram", "-1", DETECTIVE, "admin", NOW)
        tables = await source.copy_tables()
        assert tables[0] == "users" and "schema_migrations" not in tables
        for table in tables:
            after, key = 0, _key(table)
            while rows := await source.read_rows(table, after, 3):
                await target.write_rows(table, rows)
                if key is None:
                    break
                after = rows[-1][key]
        await target.finish_copy()
        for table in tables:
            assert await source.read_rows(table, 0, 1000) == await target.read_rows(
                table, 0, 1000
            ), table
        turns = await source.read_rows("turns", 0, 1000)
        assert isinstance(turns[0]["created_at"], str) and "search" not in turns[0]
        assert await target.export_rows(ana.user_id, DETECTIVE) == await source.export_rows(
            ana.user_id, DETECTIVE
        )
        terms = query_terms("barco")
        assert await target.search_term_counts(ana.user_id, DETECTIVE, "dm", terms) == [14]
        conversation = await target.open_conversation(Thread(ana.user_id, DETECTIVE, "dm"))
        new = await target.add_turn(conversation, "user", "nueva", NOW)
        assert new.id > max(t["id"] for t in turns)
        with pytest.raises(ValueError, match="not a table"):
            await target.read_rows("schema_migrations; DROP TABLE users", 0, 1)
    finally:
        await source.close()
        await target.close()


def _key(table: str) -> str | None:
    return copy_key(table)


def test_urls_are_checked_and_never_show_the_password() -> None:
    assert normalise_url("postgres://u@h:5/db") == "postgresql://u@h:5/db"
    assert redact_url("postgresql://u:s3cret@h:5/db") == "postgresql://u:***@h:5/db"
    with pytest.raises(ValueError) as error:
        normalise_url("mysql://u:s3cret@h/db")
    assert "s3cret" not in str(error.value)


# It starts Python processes (tests/store_rule.py).
@pytest.mark.usefixtures("database_target")
def test_the_cli_runs_the_command_with_the_url_and_returns_its_code() -> None:
    code = "import os, sys; print(os.environ['COMPANION_TEST_DATABASE_URL']); sys.exit(3)"
    done = subprocess.run(
        [sys.executable, "-m", "tests.pg_server", "--", sys.executable, "-c", code],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("postgresql://postgres@127.0.0.1:")
    assert done.stdout.strip().endswith("/postgres")
