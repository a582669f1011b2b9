"""What the companion needs between messages (issue 17): the user's time zone, follow-ups."""

from __future__ import annotations

from datetime import date, datetime

from memory.models import FollowUpCandidate, FollowUpState, Thread
from memory.store import records
from memory.store.followup_rules import OFFERS_DUE, OWED
from memory.store.records import fact as _fact
from memory.store.records import ts as _ts
from memory.store.sqlite.base import StoreBase, on_db_thread


class PresenceMixin(StoreBase):
    @on_db_thread
    def user_timezone(self, user_id: int) -> str | None:
        row = self._one("SELECT timezone FROM user_preferences WHERE user_id = ?", (user_id,))
        return str(row[0]) if row and row[0] else None

    @on_db_thread
    def set_user_timezone(self, user_id: int, zone: str | None) -> None:
        self._con.execute(
            "INSERT INTO user_preferences (user_id, timezone) VALUES (?, ?)"
            " ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone",
            (user_id, zone),
        )

    # ---- off the record: the flag, never the words ------------------------------------------

    @on_db_thread
    def set_off_record(self, thread: Thread, expires_at: datetime) -> None:
        self._con.execute(
            "INSERT INTO off_record_threads (user_id, character_id, scope, expires_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (user_id, character_id, scope)"
            " DO UPDATE SET expires_at = excluded.expires_at",
            (thread.user_id, thread.character_id, thread.scope, _ts(expires_at)),
        )

    @on_db_thread
    def off_record_until(self, thread: Thread) -> datetime | None:
        row = self._one(
            "SELECT expires_at FROM off_record_threads WHERE user_id = ? AND character_id = ?"
            " AND scope = ?",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return _dt_of(row[0]) if row else None

    @on_db_thread
    def clear_off_record(self, thread: Thread) -> bool:
        cursor = self._con.execute(
            "DELETE FROM off_record_threads WHERE user_id = ? AND character_id = ? AND scope = ?",
            (thread.user_id, thread.character_id, thread.scope),
        )
        return cursor.rowcount > 0

    # ---- follow-ups -------------------------------------------------------------------------

    @on_db_thread
    def followups_enabled(self, user_id: int, character_id: str) -> bool:
        row = self._one(
            "SELECT enabled FROM followup_settings WHERE user_id = ? AND character_id = ?",
            (user_id, character_id),
        )
        return bool(row and row[0])

    @on_db_thread
    def set_followups(self, user_id: int, character_id: str, on: bool) -> None:
        self._con.execute(
            "INSERT INTO followup_settings (user_id, character_id, enabled) VALUES (?, ?, ?)"
            " ON CONFLICT (user_id, character_id) DO UPDATE SET enabled = excluded.enabled",
            (user_id, character_id, int(on)),
        )

    @on_db_thread
    def offer_followups_once(self, user_id: int, character_id: str, now: datetime) -> bool:
        """True the one time this user is offered follow-ups with this character."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO followup_settings (user_id, character_id) VALUES (?, ?)"
                " ON CONFLICT (user_id, character_id) DO NOTHING",
                (user_id, character_id),
            )
            cursor = db.execute(
                "UPDATE followup_settings SET offered_at = ? WHERE user_id = ?"
                " AND character_id = ? AND offered_at IS NULL",
                (_ts(now), user_id, character_id),
            )
        return cursor.rowcount == 1

    @on_db_thread
    def followup_candidates(self, earliest: date, latest: date) -> list[FollowUpCandidate]:
        rows = self._all(
            "SELECT f.*, u.platform, u.platform_user_id, u.display_name, p.timezone"
            " FROM facts f JOIN users u ON u.id = f.user_id"
            " LEFT JOIN user_preferences p ON p.user_id = f.user_id"
            f" WHERE {OWED} AND f.event_date >= ? AND f.event_date <= ?"
            " ORDER BY f.event_date, f.id",
            (earliest.isoformat(), latest.isoformat()),
        )
        return [
            FollowUpCandidate(
                _fact(r), r["platform"], r["platform_user_id"], r["display_name"], r["timezone"]
            )
            for r in rows
        ]

    @on_db_thread
    def followup_owed(self, user_id: int, character_id: str, fact_id: int) -> bool:
        row = self._one(
            f"SELECT 1 FROM facts f WHERE f.id = ? AND f.user_id = ? AND f.character_id = ?"
            f" AND {OWED}",
            (fact_id, user_id, character_id),
        )
        return row is not None

    @on_db_thread
    def followup_offers_due(self) -> list[FollowUpCandidate]:
        """One dated fact (learned in a private chat) of each user and character never offered
        follow-ups yet: the offer goes out once, after the first dated event."""
        return records.followup_offers(self._all(OFFERS_DUE))

    @on_db_thread
    def followup_state(self, user_id: int, character_id: str) -> FollowUpState:
        sent = self._all(
            "SELECT sent_at, turn_id FROM followups WHERE user_id = ? AND character_id = ?"
            " ORDER BY id",
            (user_id, character_id),
        )
        if not sent:
            return FollowUpState((), False)
        last_turn = sent[-1]["turn_id"] or 0
        answered = self._one(
            "SELECT 1 FROM turns WHERE user_id = ? AND character_id = ? AND scope = 'dm'"
            " AND role = 'user' AND id > ? LIMIT 1",
            (user_id, character_id, last_turn),
        )
        return FollowUpState(tuple(_dt_of(r["sent_at"]) for r in sent), answered is None)

    @on_db_thread
    def record_followup(
        self, user_id: int, character_id: str, fact_id: int, turn_id: int | None, now: datetime
    ) -> bool:
        """Only while the fact is still there: a forget from another process just before
        leaves no row behind (False)."""
        cursor = self._con.execute(
            "INSERT INTO followups (user_id, character_id, fact_id, turn_id, sent_at)"
            " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM facts WHERE id = ?3"
            " AND user_id = ?1 AND character_id = ?2) ON CONFLICT (fact_id) DO NOTHING",
            (user_id, character_id, fact_id, turn_id, _ts(now)),
        )
        return cursor.rowcount == 1

    @on_db_thread
    def followup_recorded(
        self, user_id: int, character_id: str, fact_id: int, turn_id: int
    ) -> bool:
        row = self._one(
            "SELECT 1 FROM followups WHERE fact_id = ? AND user_id = ? AND character_id = ?"
            " AND turn_id = ?",
            (fact_id, user_id, character_id, turn_id),
        )
        return row is not None


def _dt_of(text: str) -> datetime:
    return datetime.fromisoformat(text)
