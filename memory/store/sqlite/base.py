"""The store's foundation: the connection, its pragmas, migrations, one method at a time."""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from memory.store import records
from memory.store.errors import available_migrations as available_dialect_migrations
from memory.store.errors import refuse_unknown_versions
from memory.store.purge import BackgroundPurge
from memory.store.sqlite import files, fts, fts_index
from memory.store.sqlite.worker import DatabaseThread

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="StoreBase")

BUSY_TIMEOUT_MS = 5000
# Pages of index merging per step of a purge: a few milliseconds on the store's thread, so the
# users' work queued meanwhile waits for one step, never for the whole merge. The most a step
# takes; a step that ran longer than PURGE_STEP_SECONDS halves the next one's pages (down to
# PURGE_STEP_PAGES_MIN, so the merge still moves on a slow machine), one well under it doubles
# them: a loaded machine purges in smaller slices, and a writer waits for one slice.
PURGE_STEP_PAGES = 64
PURGE_STEP_PAGES_MIN = 32
PURGE_STEP_SECONDS = 0.05


@dataclass
class PurgeRound:
    """A purge under way: the pending records it covers (ids up to `last`), and the level
    its merge of the index runs on (None once the merge is complete)."""

    last: int
    level: int | None


def on_db_thread(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Make a synchronous Store method a coroutine that runs it whole on the store's thread.

    One trip between threads per method, not one per statement: aiosqlite's statement-by-
    statement hand-overs, held under a lock, capped the bot at about 170 messages/s
    (bench/throughput.py). The thread runs one job at a time, so a method is atomic with
    respect to the others and no lock is needed; methods queued together share one COMMIT
    (memory/store/sqlite/worker.py).
    """

    @functools.wraps(method)
    async def run_whole(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(method, self, *args, **kwargs)

    return run_whole


def alone_on_db_thread(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """As `on_db_thread`, for a method that runs its own transactions or needs none open
    (migrations, checkpoints): it is never grouped with others."""

    @functools.wraps(method)
    async def run_whole(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run_alone(method, self, *args, **kwargs)

    return run_whole


def available_migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every SQLite migration (migrations/sqlite/), in order."""
    return available_dialect_migrations("sqlite")


def _connect(path: Path) -> sqlite3.Connection:
    """Open the file with the pragmas every connection needs (run on the store's thread)."""
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    con.row_factory = sqlite3.Row
    try:
        files.make_private(path)  # before the WAL pragma: -wal and -shm take the file's mode
        configure(con)
    except BaseException:
        con.close()
        raise
    return con


def configure(con: sqlite3.Connection) -> None:
    """Set every pragma explicitly, whatever SQLite was built with: secure_delete is on by
    default in some builds only, and forget relies on it."""
    for pragma in (
        "journal_mode = WAL",
        "synchronous = NORMAL",
        "foreign_keys = ON",
        f"busy_timeout = {BUSY_TIMEOUT_MS}",
        # Deleted memory must not linger in free pages.
        "secure_delete = ON",
    ):
        con.execute(f"PRAGMA {pragma}")
    # The search index's triggers call it (migration 0007): on every connection, first.
    con.create_function("thread_tokens", 4, fts.thread_tokens, deterministic=True)


class StoreBase(BackgroundPurge):
    """The connection, its pragmas, the migrations, and the thread every statement runs on."""

    PURGE_ERRORS = (sqlite3.Error,)  # a locked or full file: the record stays, try again later

    def __init__(self, worker: DatabaseThread, path: Path) -> None:
        super().__init__()
        self._worker = worker  # the only thread that touches `_con`
        self.path = path
        self._purge_round: PurgeRound | None = None
        # Levels of the index past which a purge rebuilds it rather than merge it
        # (fts_index.LEVEL_BUDGET); lowered by tests to reach it quickly.
        self.fts_level_budget = fts_index.LEVEL_BUDGET
        # Pages a purge step merges at most; lowered by tests so a merge spans many steps.
        self.purge_step_pages = PURGE_STEP_PAGES
        self._step_pages = PURGE_STEP_PAGES  # the next step's, as the last one's time says
        self.purge_step_seconds = PURGE_STEP_SECONDS  # set by tests to make every step slow

    @property
    def _con(self) -> sqlite3.Connection:
        con = self._worker.con
        assert con is not None, "the store's thread opens the connection before any job"
        return con

    @property
    def external_changes(self) -> int:
        """How many times another connection was seen to have written the file: what the
        engine keeps in RAM from it may be stale once this moves."""
        return self._worker.external_changes

    async def _run(self, function: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Run `function` on the store's thread; the caller's loop stays free meanwhile."""
        result: R = await self._worker.submit(functools.partial(function, *args, **kwargs))
        return result

    async def _run_alone(self, function: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """As `_run`, outside any group: for what manages transactions itself."""
        call = functools.partial(function, *args, **kwargs)
        result: R = await self._worker.submit(call, alone=True)
        return result

    async def _execute(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """One raw statement on the store's thread: for tests and benches that break things
        on purpose; the engine goes through the named methods."""
        return await self._run_alone(self._all, sql, params)

    @classmethod
    async def open(cls, path: Path, *, migrate: bool = True) -> Self:
        files.prepare(path)
        worker = DatabaseThread(functools.partial(_connect, path), name="store")
        try:
            await worker.start()
        except BaseException:
            await worker.stop()
            raise
        store = cls(worker, path)
        try:
            await store._run_alone(store._check_schema_not_newer)
            if migrate:
                await store.migrate()
                # A purge the last run recorded but did not finish (a crash, a reader that
                # held the WAL): resumed now, in the background.
                await store.resume_purge()
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        await self._stop_purge()
        await self._worker.stop()

    def _all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        return self._con.execute(sql, tuple(params)).fetchall()

    def _one(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        # fetchall, so the statement is finished (an INSERT ... RETURNING too) before any COMMIT.
        rows = self._all(sql, params)
        return rows[0] if rows else None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self._worker.grouping:
            # Inside a group the worker holds the transaction and a savepoint for this method:
            # an error here rolls back to it, and the group's COMMIT makes it durable.
            yield self._con
            return
        # BEGIN IMMEDIATE takes the write lock up front, so a transaction never fails halfway
        # on a lock upgrade (another process may hold the file: the CLI, a second bot).
        self._con.execute("BEGIN IMMEDIATE")
        try:
            yield self._con
        except BaseException:
            # SQLite may already have rolled back (SQLITE_FULL, SQLITE_IOERR, ...): a ROLLBACK
            # then fails with "no transaction is active" and hides the real error.
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")
            raise
        self._con.execute("COMMIT")

    # ---- migrations -------------------------------------------------------------------------

    def _applied_versions(self) -> set[int]:
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        return {row[0] for row in self._all("SELECT version FROM schema_migrations")}

    def _check_schema_not_newer(self) -> None:
        refuse_unknown_versions(str(self.path), self._applied_versions(), "sqlite")

    @alone_on_db_thread
    def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded, each in its own transaction."""
        applied = self._applied_versions()
        done = []
        for version, name, sql in available_migrations():
            if version in applied:
                continue
            # executescript, because triggers hold semicolons; the file name is safe to inline
            # (it matched the migration pattern), and the record commits with the migration or
            # not at all.
            script = (
                f"BEGIN IMMEDIATE;\n{sql}\n;INSERT INTO schema_migrations (version, name, "
                f"applied_at) VALUES ({version}, '{name}', datetime('now'));\nCOMMIT;"
            )
            try:
                self._con.executescript(script)
            except BaseException:
                if self._con.in_transaction:
                    self._con.execute("ROLLBACK")
                raise
            log.info("applied migration %s", name)
            done.append(name)
        return done

    @on_db_thread
    def schema_version(self) -> int:
        row = self._one("SELECT MAX(version) FROM schema_migrations")
        return int(row[0] or 0) if row else 0

    @alone_on_db_thread
    def integrity_check(self) -> str:
        """ "ok", or what is wrong: SQLite's check of the file, then FTS5's of the search index
        (which SQLite's own check does not read)."""
        problems = [str(row[0]) for row in self._all("PRAGMA integrity_check")]
        problems = [problem for problem in problems if problem != "ok"]
        search = fts_index.integrity_problem(self._con)
        if search is not None:
            problems.append(f"search index: {search}")
        return "; ".join(problems) or "ok"

    @alone_on_db_thread
    def rebuild_search_index(self) -> int | None:
        """Index every turn anew, in one transaction; how many are indexed."""
        with self._transaction() as db:
            fts_index.rebuild(db)
        row = self._one("SELECT count(*) FROM turns WHERE role IN ('user', 'assistant')")
        return int(row[0]) if row else 0

    # ---- purging what a deletion left (forget) ----------------------------------------------

    def _record_pending_purge(self) -> None:
        """Called inside the deleting transaction: the purge is owed from the moment the rows
        are gone, so a crash before it ends leaves the record, and the next start resumes it."""
        self._con.execute("INSERT INTO pending_purges (requested_at) VALUES (datetime('now'))")

    @on_db_thread
    def pending_purges(self) -> int:
        row = self._one("SELECT count(*) FROM pending_purges")
        return int(row[0]) if row else 0

    @alone_on_db_thread
    def _purge_step(self) -> str:
        """One short step of a purge round. The first starts merging every segment of the
        index into one (fts_index.py says why only the first), the next ones continue that
        merge; once it is complete the WAL is checkpointed and the records the round covers
        are cleared. Records added meanwhile are covered by the next round."""
        current = self._purge_round
        if current is None:
            row = self._one("SELECT max(id) FROM pending_purges")
            if row is None or row[0] is None:
                return "done"
            self._purge_round = PurgeRound(int(row[0]), self._start_index_merge())
            return "merging"
        if current.level is not None:
            if self._merge_slice(current.level):
                return "merging"
            current.level = None
        fts_index.resume_automerge(self._con)  # before the checkpoint: its bytes leave too
        if not self._checkpoint_completely():
            return "blocked"
        self._con.execute("DELETE FROM pending_purges WHERE id <= ?", (current.last,))
        self._purge_round = None
        return "cleared"

    def _merge_slice(self, level: int) -> bool:
        """One slice of the round's merge, sized by how long the last one took; False once
        the merge is complete."""
        pages = max(1, min(self._step_pages, self.purge_step_pages))
        started = time.perf_counter()
        more = fts_index.continue_merge(self._con, level, pages)
        took = time.perf_counter() - started
        if took > self.purge_step_seconds:
            self._step_pages = max(PURGE_STEP_PAGES_MIN, pages // 2)
        elif took < self.purge_step_seconds / 4:
            self._step_pages = min(PURGE_STEP_PAGES, pages * 2)
        return more

    def _start_index_merge(self) -> int | None:
        """Start the round's merge; the level it runs on, None when already complete."""
        if fts_index.over_budget(self._con, self.fts_level_budget):
            # SQLite 3.40 never drops an empty level and fails past 2000: start afresh.
            with self._transaction() as db:
                fts_index.rebuild(db)
            log.info("search index rebuilt: it had more than %d levels", self.fts_level_budget)
            return None
        return fts_index.start_merge(self._con, min(self._step_pages, self.purge_step_pages))

    def _checkpoint_completely(self) -> bool:
        """Copy every WAL frame into the file and empty the WAL. A reader holding an older
        snapshot (an export, `stats`, a backup) makes it stop short and say so (busy, or fewer
        frames copied than logged): the old pages, deleted words included, are still in the
        WAL then. It must not wait here, holding the store's thread: busy_timeout 0, and the
        purge's loop tries again later."""
        self._con.execute("PRAGMA busy_timeout = 0")
        try:
            row = self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            self._con.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        busy, logged, copied = row
        return bool(busy == 0 and logged == copied)

    # ---- rows into typed records ----------------------------------------------------------

    # One mapping of rows to records for every backend (memory/store/records.py).
    _conversation = staticmethod(records.conversation)
    _turn = staticmethod(records.turn)
    _summary = staticmethod(records.summary)
