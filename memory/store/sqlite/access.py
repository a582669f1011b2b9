"""Access rules on SQLite (migration 0023); memory/store/access.py says what each method
promises."""

from __future__ import annotations

from datetime import datetime

from memory.store.access import FLAGS, AccessRule, AccessState, tightened
from memory.store.records import ts as _ts
from memory.store.sqlite.base import StoreBase, on_db_thread

_BUMP = (
    "INSERT INTO access_settings (name, value) VALUES ('version', 1)"
    " ON CONFLICT (name) DO UPDATE SET value = value + 1"
)


class AccessMixin(StoreBase):
    @on_db_thread
    def access_version(self) -> int:
        row = self._one("SELECT value FROM access_settings WHERE name = 'version'")
        return int(row[0]) if row else 0

    @on_db_thread
    def access_state(self) -> AccessState:
        settings = dict(self._all("SELECT name, value FROM access_settings"))
        rules = frozenset(
            AccessRule(row[0], row[1], row[2], row[3])
            for row in self._all("SELECT platform, kind, target_id, effect FROM access_rules")
        )
        return AccessState(
            rules,
            dms=bool(settings.get("dms", 1)),
            invite_only=bool(settings.get("invite_only", 0)),
            version=int(settings.get("version", 0)),
        )

    @on_db_thread
    def set_access_rule(self, rule: AccessRule, present: bool, by: str, now: datetime) -> bool:
        key = (rule.platform, rule.kind, rule.target_id, rule.effect)
        with self._transaction() as db:
            if present:
                changed = db.execute(
                    "INSERT OR IGNORE INTO access_rules (platform, kind, target_id, effect,"
                    " set_by, set_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (*key, by, _ts(now)),
                ).rowcount
            else:
                changed = db.execute(
                    "DELETE FROM access_rules WHERE platform = ? AND kind = ? AND target_id = ?"
                    " AND effect = ?",
                    key,
                ).rowcount
            if changed:
                db.execute(_BUMP)
        return changed == 1

    @on_db_thread
    def set_access_flag(self, name: str, value: bool) -> None:
        if name not in FLAGS:
            raise ValueError(f"not an access switch: {name!r}")
        with self._transaction() as db:
            db.execute(
                "INSERT INTO access_settings (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (name, int(value)),
            )
            db.execute(_BUMP)

    @on_db_thread
    def merge_access(self, state: AccessState, by: str, now: datetime) -> int:
        changes = 0
        with self._transaction() as db:
            for rule in state.rules:
                changes += db.execute(
                    "INSERT OR IGNORE INTO access_rules (platform, kind, target_id, effect,"
                    " set_by, set_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (rule.platform, rule.kind, rule.target_id, rule.effect, by, _ts(now)),
                ).rowcount
            for name, value in tightened(state):
                changes += db.execute(
                    "INSERT INTO access_settings (name, value) VALUES (?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET value = excluded.value"
                    " WHERE access_settings.value <> excluded.value",
                    (name, value),
                ).rowcount
            if changes:
                db.execute(_BUMP)
        return changes

    @on_db_thread
    def claim_access_notice(
        self, platform: str, user_id: str, now: datetime, since: datetime
    ) -> bool:
        with self._transaction() as db:
            claimed = db.execute(
                "INSERT INTO access_notices (platform, user_id, told_at) VALUES (?, ?, ?)"
                " ON CONFLICT (platform, user_id) DO UPDATE SET told_at = excluded.told_at"
                " WHERE access_notices.told_at <= ?",
                (platform, user_id, _ts(now), _ts(since)),
            ).rowcount
        return claimed == 1
