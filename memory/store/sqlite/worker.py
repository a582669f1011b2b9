"""The database thread: the one thread that touches the connection, with group commit.

Jobs (whole Store methods) run one at a time in arrival order. When several are waiting, they run
as one transaction, each inside a savepoint of its own, and their callers are answered together
once it has committed: one COMMIT (one WAL append, one FTS5 segment) and one wake-up of the
event loop for the lot, where each job used to pay both. A caller is never answered before its
writes are committed, so a reply that was sent is on disk whatever happens next.

A job's failure rolls back its savepoint only. If SQLite ends the whole transaction itself (a
full disk, an I/O error) or the COMMIT fails, nothing of the group is kept and every job of it
runs again alone, exactly as without grouping: each then succeeds or fails on its own.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Enough to spread one COMMIT over a burst; small enough that a group's first caller does not
# wait long behind the others before the one COMMIT that answers them all.
MAX_GROUP = 32


@dataclass(slots=True)
class Job:
    call: Callable[[], Any]
    future: asyncio.Future[Any]
    alone: bool  # manages its own transactions (migrations, checkpoints): never grouped
    result: Any = None
    error: BaseException | None = None


class _GroupLost(Exception):
    """The group's transaction ended without committing: its jobs must run again alone."""


class DatabaseThread:
    """Owns `con` and runs every job on its own thread; see the module docstring."""

    def __init__(self, con_factory: Callable[[], sqlite3.Connection], name: str) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._factory = con_factory
        self.con: sqlite3.Connection | None = None
        self.grouping = False  # read by Store._transaction: inside a group, savepoints do
        # Times another connection (the admin CLI, another process) was seen to have committed
        # since the last job: written here only, read by the engine to rebuild what it holds.
        self.external_changes = 0
        self._data_version: int | None = None
        # A daemon: a store that was never closed must not keep the interpreter from exiting.
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._started = False

    async def start(self) -> None:
        self._thread.start()
        self._started = True
        self.con = await self.submit(self._factory, alone=True)

    async def submit(self, call: Callable[[], Any], *, alone: bool = False) -> Any:
        if not self._started:  # a job queued now would never be answered
            raise RuntimeError("the store is closed")
        future = asyncio.get_running_loop().create_future()
        self._jobs.put(Job(call, future, alone))
        return await future

    async def stop(self) -> None:
        """Close the connection after the jobs already queued, then end the thread."""
        if self._started:
            if self.con is not None:
                await self.submit(self.con.close, alone=True)
            self._jobs.put(None)
            self._started = False

    def _serve(self) -> None:
        held: Job | None = None  # a job that cannot join the group before it: runs next
        while True:
            first = held if held is not None else self._jobs.get()
            held = None
            if first is None:
                return
            group = [first]
            while not first.alone and len(group) < MAX_GROUP:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._jobs.put(None)  # stop once this group is answered
                    break
                if job.alone:
                    held = job
                    break
                group.append(job)
            self._run(group)

    def _run(self, group: list[Job]) -> None:
        live = [job for job in group if not job.future.cancelled()]
        self._notice_other_writers()
        if len(live) > 1:
            try:
                self._run_grouped(live)
            except _GroupLost:
                for job in live:
                    self._run_alone(job)
        elif live:
            self._run_alone(live[0])
        self._answer(live)

    def _notice_other_writers(self) -> None:
        """Before the jobs run (so their callers see it): has another connection committed?
        SQLite's data_version moves only for other connections' commits, never for ours."""
        if self.con is None:
            return
        try:
            version = int(self.con.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:  # closed, or the file is gone: the jobs will say what is wrong
            return
        if self._data_version is not None and version != self._data_version:
            self.external_changes += 1
        self._data_version = version

    def _run_alone(self, job: Job) -> None:
        job.result, job.error = None, None
        try:
            job.result = job.call()
        except BaseException as error:  # handed to the caller, whatever it is
            job.error = error

    def _run_grouped(self, group: list[Job]) -> None:
        con = self.con
        assert con is not None
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise _GroupLost from error
        self.grouping = True
        try:
            for job in group:
                con.execute("SAVEPOINT job")
                self._run_alone(job)
                if not con.in_transaction:
                    raise _GroupLost from job.error
                if job.error is not None:
                    con.execute("ROLLBACK TO job")
                con.execute("RELEASE job")
            con.execute("COMMIT")
        except BaseException as error:
            if con.in_transaction:
                try:
                    con.execute("ROLLBACK")
                except sqlite3.Error:  # the jobs, run again alone, will report what is wrong
                    log.exception("could not roll back a lost group")
            if isinstance(error, _GroupLost):
                raise
            raise _GroupLost from error
        finally:
            self.grouping = False

    @staticmethod
    def _answer(jobs: list[Job]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Job]] = {}
        for job in jobs:
            by_loop.setdefault(job.future.get_loop(), []).append(job)
        for loop, answered in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, answered)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                log.debug("dropped %d answers for a closed event loop", len(answered))


def _settle(jobs: list[Job]) -> None:
    for job in jobs:
        if job.future.done():  # the caller was cancelled meanwhile
            continue
        if job.error is not None:
            job.future.set_exception(job.error)
        else:
            job.future.set_result(job.result)
