"""Scenes on SQLite (migration 0022): who is in each group's scene, and a participant's lines
taken out of every copy the characters keep of it."""

from __future__ import annotations

from datetime import datetime

from memory.models import SceneErasure, Thread
from memory.store.records import ts as _ts
from memory.store.remap import without_citing
from memory.store.sqlite.base import on_db_thread
from memory.store.sqlite.canon import CanonMixin


class ScenesMixin(CanonMixin):
    @on_db_thread
    def scene_members(self, platform: str, channel_id: str) -> list[str]:
        """The characters added to the scene, in the order they joined."""
        return [
            row[0]
            for row in self._all(
                "SELECT character_id FROM scene_members WHERE platform = ? AND channel_id = ?"
                " ORDER BY added_at, rowid",
                (platform, channel_id),
            )
        ]

    @on_db_thread
    def add_scene_member(
        self, platform: str, channel_id: str, character_id: str, by: str, now: datetime
    ) -> bool:
        """False when the character was in the scene already."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO scene_members (platform, channel_id, character_id,"
                " added_by, added_at) VALUES (?, ?, ?, ?, ?)",
                (platform, channel_id, character_id, by, _ts(now)),
            )
        return cursor.rowcount == 1

    @on_db_thread
    def remove_scene_member(self, platform: str, channel_id: str, character_id: str) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM scene_members WHERE platform = ? AND channel_id = ?"
                " AND character_id = ?",
                (platform, channel_id, character_id),
            )
        return cursor.rowcount == 1

    async def forget_scene_lines(
        self, person_id: int, scene_scope: str | None, character_id: str | None = None
    ) -> SceneErasure:
        """See memory/store/protocols.py Scenes.forget_scene_lines."""
        erased, owed = await self._forget_scene_rows(person_id, scene_scope, character_id)
        if owed:
            self._start_purge()
        return erased

    @on_db_thread
    def _forget_scene_rows(
        self, person_id: int, scene_scope: str | None, character_id: str | None
    ) -> tuple[SceneErasure, bool]:
        """What was erased, and whether a purge of the bytes is owed."""
        old = 0
        with self._transaction():
            group = None if scene_scope is None else "group:" + scene_scope.removeprefix("scene:")
            # The canon proposals resting on what they were in, before their lines go.
            canon = self._drop_canon_citing(person_id, character_id, scene_scope, own_scope=group)
            erased = self._delete_scene_lines(person_id, scene_scope, character_id)
            if scene_scope is not None:
                # Their own threads in the group from before it was a scene go too (their
                # bytes as well: a person with no line in the scene is purged all the same).
                for table in ("turns", "summaries", "conversations"):
                    old += self._con.execute(
                        f"DELETE FROM {table} WHERE user_id = ? AND scope = ?", (person_id, group)
                    ).rowcount
                facts = self._con.execute(
                    "DELETE FROM facts WHERE user_id = ? AND scope = ?", (person_id, group)
                ).rowcount
                erased = SceneErasure(erased.lines, erased.claims, facts, erased.threads)
            owed = bool(erased.lines or erased.facts or old or canon)
            if owed:
                self._record_pending_purge()
        return erased, owed

    def _delete_scene_lines(
        self, person_id: int, scene_scope: str | None, character_id: str | None
    ) -> SceneErasure:
        """Inside the caller's transaction: the person's lines, and in every version of the
        summaries of the threads that held them, every claim that cites one of them or nothing
        (memory/store/remap.py without_citing)."""
        where, params = "speaker_id = ? AND scope LIKE 'scene:%'", [person_id]
        if scene_scope is not None:
            where, params = where + " AND scope = ?", [*params, scene_scope]
        if character_id is not None:
            where, params = where + " AND character_id = ?", [*params, character_id]
        select = f"SELECT id, user_id, character_id, scope FROM turns WHERE {where}"
        rows = self._all(select, params)
        by_thread: dict[Thread, set[int]] = {}
        for row in rows:
            by_thread.setdefault(Thread(row[1], row[2], row[3]), set()).add(row[0])
        self._con.execute(f"DELETE FROM turns WHERE {where}", params)
        claims = 0
        for thread, gone in by_thread.items():
            for summary in self._all(
                "SELECT id, fields_json FROM summaries WHERE user_id = ? AND character_id = ?"
                " AND scope = ?",
                (thread.user_id, thread.character_id, thread.scope),
            ):
                rewritten = without_citing(summary[1], gone)
                if rewritten is not None:
                    claims += 1
                    self._con.execute(
                        "UPDATE summaries SET fields_json = ?, cited_ids_json = ? WHERE id = ?",
                        (*rewritten, summary[0]),
                    )
        return SceneErasure(len(rows), claims, 0, tuple(by_thread))
