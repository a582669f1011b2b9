"""Scenes on PostgreSQL (migration 0022): who is in each group's scene, and a participant's
lines taken out of every copy the characters keep of it (the SQLite twin says why)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from memory.models import SceneErasure, Thread
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.canon import drop_canon_citing
from memory.store.postgres.rows import ts
from memory.store.remap import without_citing


def _count(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


async def delete_scene_lines(
    con: asyncpg.Connection, person_id: int, scene_scope: str | None, character_id: str | None
) -> SceneErasure:
    """Inside the caller's transaction: the person's lines, and in every version of the
    summaries of the threads that held them, every claim that cites one of them or nothing
    (memory/store/remap.py without_citing)."""
    where, params = "speaker_id = $1 AND scope LIKE 'scene:%'", [person_id]
    if scene_scope is not None:
        params.append(scene_scope)
        where += f" AND scope = ${len(params)}"
    if character_id is not None:
        params.append(character_id)
        where += f" AND character_id = ${len(params)}"
    rows = await con.fetch(
        f"DELETE FROM turns WHERE {where} RETURNING id, user_id, character_id, scope", *params
    )
    by_thread: dict[Thread, set[int]] = {}
    for row in rows:
        by_thread.setdefault(Thread(row[1], row[2], row[3]), set()).add(row[0])
    claims = 0
    for thread, gone in by_thread.items():
        for summary in await con.fetch(
            "SELECT id, fields_json FROM summaries WHERE user_id = $1 AND character_id = $2"
            " AND scope = $3 FOR UPDATE",
            thread.user_id,
            thread.character_id,
            thread.scope,
        ):
            rewritten = without_citing(summary[1], gone)
            if rewritten is not None:
                claims += 1
                await con.execute(
                    "UPDATE summaries SET fields_json = $1, cited_ids_json = $2 WHERE id = $3",
                    *rewritten,
                    summary[0],
                )
    return SceneErasure(len(rows), claims, 0, tuple(by_thread))


class PgScenesMixin(PostgresStoreBase):
    async def scene_members(self, platform: str, channel_id: str) -> list[str]:
        """The characters added to the scene, in the order they joined."""
        found = await self._pool.fetch(
            "SELECT character_id FROM scene_members WHERE platform = $1 AND channel_id = $2"
            " ORDER BY added_at, character_id",
            platform,
            channel_id,
        )
        return [row[0] for row in found]

    async def add_scene_member(
        self, platform: str, channel_id: str, character_id: str, by: str, now: datetime
    ) -> bool:
        status = await self._pool.execute(
            "INSERT INTO scene_members (platform, channel_id, character_id, added_by, added_at)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            platform,
            channel_id,
            character_id,
            by,
            ts(now),
        )
        return _count(status) == 1

    async def remove_scene_member(self, platform: str, channel_id: str, character_id: str) -> bool:
        status = await self._pool.execute(
            "DELETE FROM scene_members WHERE platform = $1 AND channel_id = $2"
            " AND character_id = $3",
            platform,
            channel_id,
            character_id,
        )
        return _count(status) == 1

    async def forget_scene_lines(
        self, person_id: int, scene_scope: str | None, character_id: str | None = None
    ) -> SceneErasure:
        """See memory/store/protocols.py Scenes.forget_scene_lines."""
        group = None if scene_scope is None else "group:" + scene_scope.removeprefix("scene:")
        async with self._transaction() as con:
            # The canon proposals resting on what they were in, before their lines go.
            canon = await drop_canon_citing(
                con, person_id, character_id, scene_scope, own_scope=group
            )
            erased = await delete_scene_lines(con, person_id, scene_scope, character_id)
            facts = old = 0
            if scene_scope is not None:
                # Their own threads in the group from before it was a scene go too (their
                # bytes as well: a person with no line in the scene is purged all the same).
                for table in ("turns", "summaries", "conversations"):
                    old += _count(
                        await con.execute(
                            f"DELETE FROM {table} WHERE user_id = $1 AND scope = $2",
                            person_id,
                            group,
                        )
                    )
                facts = _count(
                    await con.execute(
                        "DELETE FROM facts WHERE user_id = $1 AND scope = $2", person_id, group
                    )
                )
            owed = bool(erased.lines or facts or old or canon)
            if owed:
                await self._record_pending_purge(con)
        if owed:
            self._start_purge()
        return SceneErasure(erased.lines, erased.claims, facts, erased.threads)
