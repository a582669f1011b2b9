"""The tasks that run after a reply: tracked, so that shutdown and tests can wait for them, and
owned by a user and character, so that a forget can cancel them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

Owner = tuple[int, str]  # (user id, character id)
T = TypeVar("T")


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._owned: dict[Owner, set[asyncio.Task[Any]]] = {}

    def spawn(
        self, coroutine: Coroutine[Any, Any, T], owner: Owner | None = None
    ) -> asyncio.Task[T]:
        """Run after the reply; tracked so that shutdown and tests can wait for it, and by
        `owner` (user id, character id) so that a forget can cancel it."""
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        if owner is not None:
            self._owned.setdefault(owner, set()).add(task)
            task.add_done_callback(lambda done: self._disown(owner, done))
        task.add_done_callback(self._task_done)
        return task

    async def cancel_owned(self, owner: Owner) -> None:
        """Cancel the owner's work in flight and wait until it has stopped."""
        owned = list(self._owned.get(owner, ()))
        for task in owned:
            task.cancel()
        await asyncio.gather(*owned, return_exceptions=True)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _disown(self, owner: Owner, task: asyncio.Task[Any]) -> None:
        tasks = self._owned.get(owner, set())
        tasks.discard(task)
        if not tasks:
            self._owned.pop(owner, None)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background job failed", exc_info=task.exception())
