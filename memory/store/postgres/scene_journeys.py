"""Each character's chronicle of a group scene (issue 37 A, migration 0026), on PostgreSQL: a
journeys row owned by the scene's row in `users` (memory/store/scene_journeys.py)."""

from __future__ import annotations

from datetime import datetime

from memory.journey.model import Journey
from memory.models import Conversation
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts
from memory.store.records import journey as journey_of
from memory.store.scene_journeys import SceneSpeech

SCENE_OWNERS = "SELECT id FROM users WHERE platform_user_id LIKE 'scene:%'"


class PgSceneJourneysMixin(PostgresStoreBase):
    async def conversations_pending_scene_journey(self) -> list[Conversation]:
        found = await self._pool.fetch(
            "SELECT c.* FROM conversations c WHERE c.ended_at IS NOT NULL"
            " AND c.scope LIKE 'scene:%' AND NOT EXISTS"
            " (SELECT 1 FROM journey_runs r WHERE r.conversation_id = c.id) ORDER BY c.id"
        )
        return [rows.conversation(row) for row in found]

    async def scene_speech(self, person_id: int, scene_scope: str) -> SceneSpeech:
        found = await self._pool.fetch(
            "SELECT id, speaker_name FROM turns WHERE speaker_id = $1 AND scope = $2",
            person_id,
            scene_scope,
        )
        return SceneSpeech(
            frozenset(row[0] for row in found), frozenset(row[1] for row in found if row[1])
        )

    async def reset_scene_journeys(self, owner_id: int, now: datetime) -> int:
        async with self._transaction() as con:
            await con.execute(
                "INSERT INTO journey_runs (conversation_id, user_id, character_id, status,"
                " created_at) SELECT c.id, c.user_id, c.character_id, 'reset', $1"
                " FROM conversations c WHERE c.user_id = $2 AND c.ended_at IS NOT NULL"
                " AND c.scope LIKE 'scene:%' AND c.user_id IN (" + SCENE_OWNERS + ")"
                " ON CONFLICT (conversation_id) DO NOTHING",
                ts(now),
                owner_id,
            )
            status = await con.execute(
                "DELETE FROM journeys WHERE user_id = $1 AND user_id IN (" + SCENE_OWNERS + ")",
                owner_id,
            )
            deleted = int(status.split()[-1])
            if deleted:
                await self._record_pending_purge(con)
        if deleted:
            self._start_purge()
        return deleted

    async def scene_journeys(self, character_id: str) -> list[tuple[str, Journey]]:
        found = await self._pool.fetch(
            "SELECT j.*, u.platform AS owner_platform, u.platform_user_id AS owner"
            " FROM journeys j JOIN users u ON u.id = j.user_id"
            " WHERE j.character_id = $1 AND u.platform_user_id LIKE 'scene:%' ORDER BY j.id",
            character_id,
        )
        return [(_scope(row["owner_platform"], row["owner"]), journey_of(row)) for row in found]


def _scope(platform: str, owner: str) -> str:
    """The scene's scope from its row in `users` (memory/scene/engine.py scene_scope)."""
    return f"scene:{platform}:{owner.removeprefix('scene:')}"
