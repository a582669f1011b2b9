"""The change feed: writes by other processes to memory a live session caches, over
LISTEN/NOTIFY.

Statement-level triggers (migrations/postgres/0001, 0002, 0004, 0005) call pg_notify on
CHANNEL with the writing connection's `companion.origin`, a token each store sets as a startup
parameter of every pooled connection. The feed listens on a dedicated connection of its own and
counts every notice whose origin is not its store's: what the SQLite store's `data_version`
check does, limited to the tables that matter (facts, summaries, deleted turns and
conversations, imports, deleted users, character choices, channel bindings, review mode).

The window: a notice is sent when the writer COMMITs and reaches the listener a network round
trip later, as the event loop reads the socket. A message read at the very moment another
process commits may be served from the cache once more; the next one sees the count moved.
SQLite's check has the same window (it looks before each job, not during it). When the listening
connection is lost, notices may have been missed: the count moves once (every cache is then
re-read) and the feed reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

log = logging.getLogger(__name__)
CHANNEL = "companion_changes"
RECONNECT_SECONDS = 1.0


class ChangeFeed:
    def __init__(self, url: str, origin: str) -> None:
        self._url = url
        self._origin = origin
        self.count = 0
        self._con: asyncpg.Connection | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        self._con = await asyncpg.connect(self._url, server_settings={"application_name": "feed"})
        self._con.add_termination_listener(self._lost)
        await self._con.add_listener(CHANNEL, self._heard)

    async def stop(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
            await asyncio.gather(self._reconnect, return_exceptions=True)
        if self._con is not None and not self._con.is_closed():
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await self._con.close(timeout=2)
        self._con = None

    def _heard(self, _con: object, _pid: int, _channel: str, origin: str) -> None:
        if origin != self._origin:
            self.count += 1

    def _lost(self, _con: object) -> None:
        if self._closed:
            return
        self.count += 1  # what was missed meanwhile cannot be known: assume a change
        log.warning("change feed connection lost; reconnecting")
        if self._reconnect is None or self._reconnect.done():
            self._reconnect = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        while not self._closed:
            try:
                await self.start()
            except (asyncpg.PostgresError, OSError):
                await asyncio.sleep(RECONNECT_SECONDS)
                continue
            self.count += 1  # notices sent while it was down were missed
            return
