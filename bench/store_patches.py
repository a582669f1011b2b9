"""What-if fixes for the Store, applied by the benches at run time to one Store instance (never
to the engine's files), so that a proposed fix can be measured before anyone writes it.

The cost they address: every Store method holds the store's asyncio lock (`@serialized`) while
it awaits its statements one by one on aiosqlite's thread, and each await is a round trip
between two threads (queue put, worker wake-up, GIL hand-over, `call_soon_threadsafe`, the loop
waking on its self-pipe). `async with db.execute(...) as cursor: await cursor.fetchone()` is three
round trips (execute, fetchone, close); `add_turn` is six. So the lock is held for a chain of
thread hand-overs, and every other message waits behind it.

- "one-hop": each Store method runs whole, as plain synchronous sqlite3 calls, on the
  connection's own thread: one round trip per method. No asyncio lock is needed, because that
  thread runs one job at a time, so a method is as atomic as under the lock. The very same
  Store code runs (a shadow Store whose connection is a synchronous stand-in for aiosqlite's),
  so the SQL, the transactions and the results are unchanged; only the hand-overs go.
"""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import Any

from memory.store import Store

PATCHES = ("none", "one-hop")


class _SyncCursor:
    """aiosqlite's Cursor API over a sqlite3 cursor; its coroutines never suspend."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def _rows(self) -> AsyncIterator[Any]:
        for row in self._cursor:
            yield row

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._rows()

    async def close(self) -> None:
        self._cursor.close()

    async def __aenter__(self) -> _SyncCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()


class _Result:
    """What aiosqlite's `execute` returns: both awaitable and an async context manager."""

    def __init__(self, cursor: _SyncCursor) -> None:
        self._cursor = cursor

    def __await__(self) -> Any:
        return self._get().__await__()

    async def _get(self) -> _SyncCursor:
        return self._cursor

    async def __aenter__(self) -> _SyncCursor:
        return self._cursor

    async def __aexit__(self, *exc: object) -> None:
        await self._cursor.close()


class _SyncConnection:
    """The part of aiosqlite.Connection that the memory/store package and memory/fts.py use."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self._raw = raw

    @property
    def in_transaction(self) -> bool:
        return self._raw.in_transaction

    def execute(self, sql: str, parameters: Iterable[Any] = ()) -> _Result:
        return _Result(_SyncCursor(self._raw.execute(sql, tuple(parameters))))

    def executescript(self, script: str) -> _Result:
        return _Result(_SyncCursor(self._raw.executescript(script)))


def _drive(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends to its end, here and now (on the DB thread)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a store method suspended on the synchronous connection")


@asynccontextmanager
async def _no_guard() -> AsyncIterator[None]:
    yield


def _one_hop(store: Store) -> None:
    db = store._db
    shadow = Store.__new__(Store)
    shadow.__dict__.update(store.__dict__)
    shadow._db = _SyncConnection(db._conn)  # type: ignore[assignment]
    shadow._guard = _no_guard  # type: ignore[method-assign]
    for name in dir(Store):
        method = getattr(shadow, name)
        if name.startswith("_") or name == "close" or not inspect.iscoroutinefunction(method):
            continue
        setattr(store, name, _hop(db, method))


def _hop(db: Any, method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    async def one_hop(*args: Any, **kwargs: Any) -> Any:
        return await db._execute(_drive, method(*args, **kwargs))

    return one_hop


def apply_patch(store: Store, patch: str) -> None:
    """Apply one of PATCHES to this Store instance (before any timing wrapper)."""
    if patch not in PATCHES:
        raise ValueError(f"unknown patch '{patch}'; choose one of {PATCHES}")
    if patch == "one-hop":
        _one_hop(store)
