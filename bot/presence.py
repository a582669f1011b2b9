"""The user's controls over a companion alive between messages: their time zone (/zona) and
conversations off the record (/incognito). Thin: each checks its words and calls the engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

from bot.answers import Answer, Caller
from bot.texts import text
from cards.character import Character
from memory.engine.clock_context import local_moment, zone_named
from memory.engine.companion import Companion
from memory.store.protocols import FollowUps, Preferences, Users


class PresenceStore(Users, Preferences, FollowUps, Protocol):
    """Who the user is, their time zone, and whether follow-ups are on."""


class Presence:
    def __init__(
        self,
        companion: Companion,
        store: PresenceStore,
        clock: Callable[[], datetime],
        language: Callable[[Caller], Awaitable[str]],
        character_for: Callable[[Caller], Awaitable[Character]],
        followups_per_week: int,
    ) -> None:
        self._per_week = followups_per_week
        self._companion = companion
        self._store = store
        self._clock = clock
        self._language = language
        self._character_for = character_for

    async def zone(self, caller: Caller, name: str) -> Answer:
        """Set the caller's time zone (an IANA name: "Europe/Madrid"), for every character."""
        language = await self._language(caller)
        if zone_named(name) is None:
            return Answer(text(language, "zone_bad", given=name), ok=False)
        now = self._clock()
        user = await self._store.upsert_user(
            caller.platform, caller.user_id, caller.display_name, now
        )
        await self._store.set_user_timezone(user.id, name)
        self._companion.timezone_changed(user.id, name)
        local = local_moment(now, name)
        return Answer(text(language, "zone_set", zone=name, time=f"{local:%H:%M}"))

    async def incognito(self, caller: Caller, on: bool) -> Answer:
        """Start or end a conversation off the record with the caller's current character."""
        language = await self._language(caller)
        if caller.channel_kind == "group":  # a scene is heard by everyone in it
            return Answer(text(language, "incognito_group"), ok=False)
        incoming = caller.incoming((await self._character_for(caller)).id, "")
        if not on:
            stopped = await self._companion.stop_off_record(incoming)
            return Answer(text(language, "incognito_off" if stopped else "incognito_none"))
        await self._companion.start_off_record(incoming)
        minutes = round(self._companion.inactivity_timeout.total_seconds() / 60)
        return Answer(text(language, "incognito_on", minutes=minutes))

    async def followups(self, caller: Caller, on: bool) -> Answer:
        """Turn the current character's follow-ups on or off for the caller (private chat)."""
        language = await self._language(caller)
        character = await self._character_for(caller)
        user = await self._store.upsert_user(
            caller.platform, caller.user_id, caller.display_name, self._clock()
        )
        await self._store.set_followups(user.id, character.id, on)
        key = "followups_on" if on else "followups_off"
        return Answer(text(language, key, name=character.name, per_week=self._per_week))
