"""Access rules on PostgreSQL (migration 0023); memory/store/access.py says what each method
promises. The version row is raised in the change's own transaction, so a worker that reads
the new version reads the new rules."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from memory.store.access import FLAGS, AccessRule, AccessState, tightened
from memory.store.postgres.base import PostgresStoreBase
from memory.store.postgres.rows import ts

_BUMP = (
    "INSERT INTO access_settings (name, value) VALUES ('version', 1)"
    " ON CONFLICT (name) DO UPDATE SET value = access_settings.value + 1"
)
_ADD = (
    "INSERT INTO access_rules (platform, kind, target_id, effect, set_by, set_at)"
    " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING"
)


def _count(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


async def _add(con: asyncpg.Connection, rule: AccessRule, by: str, now: datetime) -> int:
    return _count(
        await con.execute(_ADD, rule.platform, rule.kind, rule.target_id, rule.effect, by, ts(now))
    )


class PgAccessMixin(PostgresStoreBase):
    async def access_version(self) -> int:
        value = await self._pool.fetchval(
            "SELECT value FROM access_settings WHERE name = 'version'"
        )
        return int(value or 0)

    async def access_state(self) -> AccessState:
        async with self._pool.acquire() as con, con.transaction(isolation="repeatable_read"):
            settings = {
                r[0]: r[1] for r in await con.fetch("SELECT name, value FROM access_settings")
            }
            found = await con.fetch("SELECT platform, kind, target_id, effect FROM access_rules")
        return AccessState(
            frozenset(AccessRule(r[0], r[1], r[2], r[3]) for r in found),
            dms=bool(settings.get("dms", 1)),
            invite_only=bool(settings.get("invite_only", 0)),
            version=int(settings.get("version", 0)),
        )

    async def set_access_rule(
        self, rule: AccessRule, present: bool, by: str, now: datetime
    ) -> bool:
        async with self._transaction() as con:
            if present:
                changed = await _add(con, rule, by, now)
            else:
                changed = _count(
                    await con.execute(
                        "DELETE FROM access_rules WHERE platform = $1 AND kind = $2"
                        " AND target_id = $3 AND effect = $4",
                        rule.platform,
                        rule.kind,
                        rule.target_id,
                        rule.effect,
                    )
                )
            if changed:
                await con.execute(_BUMP)
        return changed == 1

    async def set_access_flag(self, name: str, value: bool) -> None:
        if name not in FLAGS:
            raise ValueError(f"not an access switch: {name!r}")
        async with self._transaction() as con:
            await con.execute(
                "INSERT INTO access_settings (name, value) VALUES ($1, $2)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                name,
                int(value),
            )
            await con.execute(_BUMP)

    async def merge_access(self, state: AccessState, by: str, now: datetime) -> int:
        changes = 0
        async with self._transaction() as con:
            for rule in state.rules:
                changes += await _add(con, rule, by, now)
            for name, value in tightened(state):
                changes += _count(
                    await con.execute(
                        "INSERT INTO access_settings (name, value) VALUES ($1, $2)"
                        " ON CONFLICT (name) DO UPDATE SET value = excluded.value"
                        " WHERE access_settings.value <> excluded.value",
                        name,
                        value,
                    )
                )
            if changes:
                await con.execute(_BUMP)
        return changes

    async def claim_access_notice(
        self, platform: str, user_id: str, now: datetime, since: datetime
    ) -> bool:
        status = await self._pool.execute(
            "INSERT INTO access_notices (platform, user_id, told_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (platform, user_id) DO UPDATE SET told_at = excluded.told_at"
            " WHERE access_notices.told_at <= $4",
            platform,
            user_id,
            ts(now),
            ts(since),
        )
        return _count(status) == 1
