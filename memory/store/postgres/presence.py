"""What the companion needs between messages (issue 17): the user's time zone (PostgreSQL)."""

from __future__ import annotations

from datetime import date, datetime

from memory.models import FollowUpCandidate, FollowUpState, Thread
from memory.store import records
from memory.store.followup_rules import OFFERS_DUE, OWED
from memory.store.postgres import rows
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts


class PgPresenceMixin(PostgresStoreBase):
    async def user_timezone(self, user_id: int) -> str | None:
        found = await self._pool.fetchval(
            "SELECT timezone FROM user_preferences WHERE user_id = $1", user_id
        )
        return str(found) if found else None

    async def set_user_timezone(self, user_id: int, zone: str | None) -> None:
        await self._pool.execute(
            "INSERT INTO user_preferences (user_id, timezone) VALUES ($1, $2)"
            " ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone",
            user_id,
            zone,
        )

    # ---- off the record: the flag, never the words ------------------------------------------

    async def set_off_record(self, thread: Thread, expires_at: datetime) -> None:
        await self._pool.execute(
            "INSERT INTO off_record_threads (user_id, character_id, scope, expires_at)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (user_id, character_id, scope)"
            " DO UPDATE SET expires_at = excluded.expires_at",
            thread.user_id,
            thread.character_id,
            thread.scope,
            ts(expires_at),
        )

    async def off_record_until(self, thread: Thread) -> datetime | None:
        found = await self._pool.fetchval(
            "SELECT expires_at FROM off_record_threads WHERE user_id = $1 AND character_id = $2"
            " AND scope = $3",
            thread.user_id,
            thread.character_id,
            thread.scope,
        )
        return datetime.fromisoformat(found) if found else None

    async def clear_off_record(self, thread: Thread) -> bool:
        status = await self._pool.execute(
            "DELETE FROM off_record_threads WHERE user_id = $1 AND character_id = $2"
            " AND scope = $3",
            thread.user_id,
            thread.character_id,
            thread.scope,
        )
        return not status.endswith(" 0")

    # ---- follow-ups -------------------------------------------------------------------------

    async def followups_enabled(self, user_id: int, character_id: str) -> bool:
        found = await self._pool.fetchval(
            "SELECT enabled FROM followup_settings WHERE user_id = $1 AND character_id = $2",
            user_id,
            character_id,
        )
        return bool(found)

    async def set_followups(self, user_id: int, character_id: str, on: bool) -> None:
        await self._pool.execute(
            "INSERT INTO followup_settings (user_id, character_id, enabled) VALUES ($1, $2, $3)"
            " ON CONFLICT (user_id, character_id) DO UPDATE SET enabled = excluded.enabled",
            user_id,
            character_id,
            int(on),
        )

    async def offer_followups_once(self, user_id: int, character_id: str, now: datetime) -> bool:
        """True the one time this user is offered follow-ups with this character."""
        async with self._transaction() as con:
            await con.execute(
                "INSERT INTO followup_settings (user_id, character_id) VALUES ($1, $2)"
                " ON CONFLICT (user_id, character_id) DO NOTHING",
                user_id,
                character_id,
            )
            status = await con.execute(
                "UPDATE followup_settings SET offered_at = $1 WHERE user_id = $2"
                " AND character_id = $3 AND offered_at IS NULL",
                ts(now),
                user_id,
                character_id,
            )
        return status.endswith(" 1")

    async def followup_candidates(self, earliest: date, latest: date) -> list[FollowUpCandidate]:
        found = await self._pool.fetch(
            "SELECT f.*, u.platform, u.platform_user_id, u.display_name, p.timezone"
            " FROM facts f JOIN users u ON u.id = f.user_id"
            " LEFT JOIN user_preferences p ON p.user_id = f.user_id"
            f" WHERE {OWED} AND f.event_date >= $1 AND f.event_date <= $2"
            " ORDER BY f.event_date, f.id",
            earliest.isoformat(),
            latest.isoformat(),
        )
        return [
            FollowUpCandidate(
                rows.fact(r), r["platform"], r["platform_user_id"], r["display_name"], r["timezone"]
            )
            for r in found
        ]

    async def followup_owed(self, user_id: int, character_id: str, fact_id: int) -> bool:
        found = await self._pool.fetchval(
            f"SELECT 1 FROM facts f WHERE f.id = $1 AND f.user_id = $2 AND f.character_id = $3"
            f" AND {OWED}",
            fact_id,
            user_id,
            character_id,
        )
        return found is not None

    async def followup_offers_due(self) -> list[FollowUpCandidate]:
        """One dated fact (learned in a private chat) of each user and character never offered
        follow-ups yet: the offer goes out once, after the first dated event."""
        return records.followup_offers(await self._pool.fetch(OFFERS_DUE))

    async def followup_state(self, user_id: int, character_id: str) -> FollowUpState:
        sent = await self._pool.fetch(
            "SELECT sent_at, turn_id FROM followups WHERE user_id = $1 AND character_id = $2"
            " ORDER BY id",
            user_id,
            character_id,
        )
        if not sent:
            return FollowUpState((), False)
        answered = await self._pool.fetchval(
            "SELECT 1 FROM turns WHERE user_id = $1 AND character_id = $2 AND scope = 'dm'"
            " AND role = 'user' AND id > $3 LIMIT 1",
            user_id,
            character_id,
            sent[-1]["turn_id"] or 0,
        )
        moments = tuple(datetime.fromisoformat(r["sent_at"]) for r in sent)
        return FollowUpState(moments, answered is None)

    async def record_followup(
        self, user_id: int, character_id: str, fact_id: int, turn_id: int | None, now: datetime
    ) -> bool:
        """Only while the fact is still there: a forget from another process just before
        leaves no row behind (False)."""
        status = await self._pool.execute(
            "INSERT INTO followups (user_id, character_id, fact_id, turn_id, sent_at)"
            " SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM facts WHERE id = $3"
            " AND user_id = $1 AND character_id = $2) ON CONFLICT (fact_id) DO NOTHING",
            user_id,
            character_id,
            fact_id,
            turn_id,
            ts(now),
        )
        return status.endswith(" 1")

    async def followup_recorded(
        self, user_id: int, character_id: str, fact_id: int, turn_id: int
    ) -> bool:
        found = await self._pool.fetchval(
            "SELECT 1 FROM followups WHERE fact_id = $1 AND user_id = $2 AND character_id = $3"
            " AND turn_id = $4",
            fact_id,
            user_id,
            character_id,
            turn_id,
        )
        return found is not None
