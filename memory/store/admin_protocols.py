"""The store's interfaces for the deployment rather than for a user's memory: dead letters,
`companion db copy`, and administration (migrations, checks, the search index, the purge).
memory/store/protocols.py composes them into `MemoryStore`; the services that use them name
them from here or from there."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from memory.models import DeadLetter


class DeadLetters(Protocol):
    """Updates the platform process could not store (bot/inbox/dead_letters.py); a forget
    deletes the sender's (Erasure.forget). One whose sender is off the record when it is
    written keeps no text: no payload, the error's type alone."""

    async def record_dead_letter(self, letter: DeadLetter) -> bool:
        """Keep it; False when this update (platform, update_key) is kept already."""
        ...

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        """The newest `limit`, newest first."""
        ...

    async def count_dead_letters(self) -> int: ...

    async def purge_dead_letters(self) -> int:
        """Delete them all; how many were deleted."""
        ...

    async def expire_dead_letters(self, before: datetime) -> int:
        """Delete those that name no sender (no forget reaches them) written before `before`;
        how many were deleted."""
        ...


class DeploymentCopy(Protocol):
    """Whole tables, rows as the SQLite columns hold them, for `companion db copy`."""

    async def copy_tables(self) -> list[str]: ...

    async def count_rows(self, table: str) -> int: ...

    async def read_rows(self, table: str, after_id: int, limit: int) -> list[dict[str, Any]]: ...

    async def write_rows(self, table: str, rows: list[dict[str, Any]]) -> None: ...

    async def finish_copy(self) -> None: ...


class Administration(Protocol):
    async def migrate(self) -> list[str]: ...

    async def schema_version(self) -> int: ...

    async def integrity_check(self) -> str: ...

    async def rebuild_search_index(self) -> int | None:
        """Rebuild the search index from the turns; how many are indexed, None where the
        backend has no separate index to rebuild."""
        ...

    async def resume_purge(self) -> None: ...

    async def close(self) -> None: ...
