"""Who runs a Telegram group: its creator and administrators, asked of Telegram
(getChatAdministrators) and trusted for COMMUNITY_ADMINS_CACHE_SECONDS, so that a busy group
costs one call every few minutes, not one per command."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from telegram import Bot, ChatMember
from telegram.error import TelegramError

from bot.answers import Caller

log = logging.getLogger(__name__)
RUNS_THE_GROUP = frozenset({ChatMember.OWNER, ChatMember.ADMINISTRATOR})
MAX_GROUPS_CACHED = 10_000  # past it, the expired entries are dropped


class GroupAdmins:
    def __init__(
        self, bot: Bot, ttl_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bot = bot
        self._ttl = ttl_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def with_role(self, caller: Caller) -> Caller:
        """The caller with their standing in this group; a private chat is nobody's group."""
        if caller.channel_kind != "group":
            return caller
        admins = await self._admins(caller.channel_id)
        return replace(caller, role="admin" if caller.user_id in admins else "member")

    async def _admins(self, chat_id: str) -> frozenset[str]:
        now = self._clock()
        cached = self._cache.get(chat_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            members = await self._bot.get_chat_administrators(int(chat_id))
        except TelegramError as exc:  # not cached: the next command asks again
            log.warning("telegram: could not read the admins of chat %s: %s", chat_id, exc)
            return frozenset()
        admins = frozenset(str(m.user.id) for m in members if m.status in RUNS_THE_GROUP)
        if len(self._cache) >= MAX_GROUPS_CACHED:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[chat_id] = (now + self._ttl, admins)
        return admins
