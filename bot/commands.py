"""The platform-agnostic commands behind every adapter: adapters parse, call these and reply."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.access import Access
from bot.access_commands import AccessCommands
from bot.answers import Answer, Button, Caller, clean_input, is_blank
from bot.canon_commands import CanonCommands
from bot.canon_review import CanonReview
from bot.channel_communities import ChannelRecorder
from bot.command_line import help_lines
from bot.community import ChatRatings, Community, Usable
from bot.greeting import greeting
from bot.memoria import Memoria, is_forget, is_heavy
from bot.pacing import ArrivalOrder, RateLimiter
from bot.photos import Photos
from bot.presence import Presence
from bot.reload import CharacterReloader
from bot.scenes import SceneRoom
from bot.texts import fact_key_label, pick_language, text
from cards.character import Character, CharacterFileError
from memory.engine.bursts import CallGate
from memory.engine.companion import Companion
from memory.engine.llm import TextSink
from memory.errors import UserFacingError
from memory.models import Reply
from memory.store.access import AccessRules
from memory.store.budgets import ChannelCommunities
from memory.store.canon import CanonStore
from memory.store.protocols import Channels, FollowUps, Preferences, Scenes, Users


@dataclass(frozen=True)
class Limits:
    max_message_chars: int = 4000
    rate_limit_messages: int = 8
    rate_limit_window_seconds: float = 60.0
    # /memoria's heavy requests (a forget confirmed, an export) per user and window: each one
    # deletes or reads a user's whole memory, so a script cannot keep the store busy with them.
    memoria_limit: int = 3
    memoria_window_seconds: float = 600.0
    followups_per_week: int = 2
    # How often a process looks whether another one changed the access rules (bot/access.py).
    access_refresh_seconds: float = 2.0
    lore_page_cap_tokens: int = 1500  # lint's measure of a lore page, after /admin canon


class CommandStore(
    Users,
    Channels,
    Preferences,
    FollowUps,
    Scenes,
    AccessRules,
    ChatRatings,
    CanonStore,
    ChannelCommunities,
    Protocol,
):
    """Who the user is, which character answers them where, their time zone, scenes, who may
    talk, the chats marked mature, the canon proposals an operator reviews, and the server
    each channel is in."""


Notify = Callable[[Answer], Awaitable[None]]

# The admin's own terminal chat is not limited: it costs only what the admin chooses.
UNLIMITED_PLATFORMS = frozenset({"terminal"})


async def _ready(answer: Answer) -> Answer:
    return answer


async def _answer_of(pending: Awaitable[Reply]) -> Answer:
    reply = await pending
    return Answer(reply.text, ok=reply.ok)


class Commands:
    def __init__(
        self,
        companion: Companion,
        store: CommandStore,
        memoria: Memoria,
        reloader: CharacterReloader,
        limits: Limits,
        admin_ids: list[str],
        clock: Callable[[], datetime],
        default_character: str | None = None,
        community_characters: Mapping[str, list[str]] | None = None,
        mature_dms: bool = False,
    ) -> None:
        self._companion = companion
        self._store = store
        self._memoria = memoria
        self._reloader = reloader
        self._limits = limits
        self.community = Community(
            frozenset(admin_ids), dict(community_characters or {}), mature_dms, store
        )
        self._clock = clock
        self._rate: CallGate = RateLimiter(
            limits.rate_limit_messages, limits.rate_limit_window_seconds
        )
        self._memoria_rate = RateLimiter(limits.memoria_limit, limits.memoria_window_seconds)
        self._order = ArrivalOrder()
        self.photos: Photos | None = None  # set by the composition root (bot/app.py)
        self.presence = Presence(
            companion, store, clock, self.language, self.character_for, limits.followups_per_week
        )
        self._default_setting = default_character
        self.access = Access(store, admin_ids, clock, limits.access_refresh_seconds)
        self._channels = ChannelRecorder(store)
        self.access_commands = AccessCommands(self.access, self.language)
        review = CanonReview(store, companion.characters, clock, limits.lore_page_cap_tokens)
        self.canon = CanonCommands(review, self.access, self.language, reloader)
        self.scenes = SceneRoom(companion, store, self, clock)

    def is_admin(self, caller: Caller) -> bool:
        """The operator (ADMIN_IDS): budgets, access rules, reloading the characters."""
        return self.community.is_operator(caller)

    async def character_for(self, caller: Caller) -> Character:
        """In a group, the scene's first character (bot/scenes.py); else the caller's choice
        here if it may speak here (a mature one only when MATURE_DMS), else the default."""
        if caller.channel_kind == "group":
            return await self.scenes.character_for(caller)
        chosen = await self._store.chosen_character_of(
            caller.platform, caller.user_id, caller.channel_key
        )
        usable = await self.community.usable(caller)
        found = self._companion.characters.get(chosen) if chosen else None
        return found if found is not None and usable(found) else self.default_for(usable)

    def default_for(self, usable: Usable) -> Character:
        """The default character, or when it may not speak here the first that may (the
        default still, when none may: the operator's choice)."""
        book = self._companion.characters
        default = self._companion.character(self.default_id)
        if usable(default):
            return default
        return next((c for c in book.all() if usable(c)), default)

    @property
    def max_message_chars(self) -> int:
        return self._limits.max_message_chars

    def gate_for(self, caller: Caller) -> CallGate | None:
        """The rate limit a caller's messages pass (none for the admin's terminal)."""
        return None if caller.platform in UNLIMITED_PLATFORMS else self._rate

    @property
    def default_id(self) -> str:
        """DEFAULT_CHARACTER if it names a character, else the book's stable choice (read now:
        a reload that removes the default leaves nothing dangling)."""
        setting, book = self._default_setting, self._companion.characters
        return setting if setting and book.get(setting) else book.default_id

    async def is_bound(self, caller: Caller) -> bool:
        return bool(await self._store.bound_character(caller.platform, caller.channel_id))

    async def chat(
        self,
        caller: Caller,
        message: str,
        message_id: str | None = None,
        notify: Notify | None = None,
        on_text: TextSink | None = None,
    ) -> Answer:
        """One message to the current character; see `submit`."""
        return await (await self.submit(caller, message, message_id, notify, on_text))

    async def submit(
        self,
        caller: Caller,
        message: str,
        message_id: str | None = None,
        notify: Notify | None = None,
        on_text: TextSink | None = None,
    ) -> Awaitable[Answer]:
        """Check one message and hand it to the engine in arrival order; returns the wait for
        its answer. An adapter awaits that outside its own per-user gate, so that messages
        arriving meanwhile join the burst. A burst is answered once, on its newest message
        (the others get an empty answer: send nothing). When the rate limit holds the call
        back, `notify` sends the notice saying when the character will answer; `on_text` shows
        the answer while the model writes it (streaming)."""
        async with self._order.hold(f"{caller.platform}:{caller.user_id}:{caller.channel_key}"):
            return await self._submit(caller, clean_input(message), message_id, notify, on_text)

    async def _submit(
        self,
        caller: Caller,
        message: str,
        message_id: str | None,
        notify: Notify | None,
        on_text: TextSink | None = None,
    ) -> Awaitable[Answer]:
        character = await self.character_for(caller)
        language = pick_language(caller.locale, character.language)
        if (refused := await self.admit(caller, language)) is not None:
            return _ready(refused)  # before anything is stored or asked of the model
        if is_blank(message):  # zero-width characters alone are no text either
            return _ready(Answer(text(language, "empty"), ok=False))
        if len(message) > self._limits.max_message_chars:
            limit = self._limits.max_message_chars
            return _ready(
                Answer(
                    text(
                        language,
                        "too_long",
                        length=len(message),
                        limit=limit,
                        over=len(message) - limit,
                    ),
                    ok=False,
                )
            )

        async def held(seconds: float) -> None:
            if notify is not None:
                await notify(Answer(text(language, "rate_limited", seconds=math.ceil(seconds))))

        gate = self.gate_for(caller)
        pending = self._companion.submit(
            caller.incoming(character.id, message, message_id), gate, held, on_text
        )
        return _answer_of(pending)

    async def admit(self, caller: Caller, language: str) -> Answer | None:
        """The access check every message passes (None: admitted); an admitted group
        message records its channel's community, whose budget its calls are paid from."""
        if (refused := await self.access.refusal(caller, language)) is not None:
            return refused
        await self._channels.note(caller)
        return None

    def use_rate_limiter(self, limiter: CallGate) -> None:
        """Replace the rate limiter: tests give one with a clock and a sleep of their own, and
        workers one counted in the database (bot/inbox/shared_limits.py)."""
        self._rate = limiter

    def character_choices(self) -> list[tuple[str, str]]:
        """(id, name) of every character, for a platform's autocompletion."""
        return [(c.id, c.name) for c in self._companion.characters.all()]

    async def characters(self, caller: Caller) -> Answer:
        """The characters that may speak here (a mature one only where adults are)."""
        current = await self.character_for(caller)
        usable = await self.community.usable(caller)
        offered = [c for c in self._companion.characters.all() if usable(c)]
        lines = [text(await self.language(caller), "characters", current=current.name)]
        lines += [
            f"- {c.id}: {c.name}" + (f" ({c.identity.trade})" if c.identity.trade else "")
            for c in offered
        ]
        buttons = tuple(Button(c.name, f"char:{c.id}") for c in offered)
        return Answer("\n".join(lines), buttons=buttons)

    async def switch(self, caller: Caller, character_id: str) -> Answer:
        """Choose the caller's character in this DM/channel (its memory stays separate)."""
        if caller.channel_kind == "group":  # a group's characters are its scene's
            return Answer(text(await self.language(caller), "scene_switch"), ok=False)
        if refused := await self.unusable(caller, character_id):
            return refused
        now = self._clock()
        user = await self._store.upsert_user(
            caller.platform, caller.user_id, caller.display_name, now
        )
        await self._store.choose_character(user.id, caller.channel_key, character_id, now)
        chosen = self._companion.character(character_id)
        language = pick_language(caller.locale, chosen.language)
        return Answer(text(language, "switched", name=chosen.name))

    async def bind(self, caller: Caller, character_id: str | None) -> Answer:
        """Admin: make a group channel answer every message as one character (None unbinds)."""
        language = await self.language(caller)
        if refused := self.community.not_managing(caller, language):
            return refused
        if character_id is not None and (refused := await self.unusable(caller, character_id)):
            return refused
        await self._store.bind_channel(
            caller.platform,
            caller.channel_id,
            character_id,
            f"{caller.platform}:{caller.user_id}",
            self._clock(),
        )
        if character_id is None:
            return Answer(text(language, "unbound"))
        bound = self._companion.character(character_id)
        return Answer(text(language, "bound", name=bound.name))

    async def unusable(self, caller: Caller, character_id: str) -> Answer | None:
        """Why this character cannot be chosen here (bot/community.py), or None."""
        book, language = self._companion.characters, await self.language(caller)
        return await self.community.unusable(caller, book.get(character_id), character_id,
                                             book, language)  # fmt: skip

    async def reload(self, caller: Caller) -> Answer:
        """Admin: reload the character files now; a broken file is refused, with its error."""
        language = await self.language(caller)
        if not self.is_admin(caller):
            return Answer(text(language, "admins_only"), ok=False, private=True)
        try:
            self._reloader.reload()
        except CharacterFileError as exc:
            # The file's error is for the admin who maintains the YAML, worded by the loader.
            refused = text(language, "reload_refused")
            return Answer(f"{refused}\n{exc}", ok=False, private=True)
        ids = self._companion.characters.ids()
        reloaded = text(language, "reloaded", count=len(ids), ids=", ".join(ids))
        return Answer(reloaded, private=True)

    async def reset(self, caller: Caller) -> Answer:
        if caller.channel_kind == "group":
            return await self.scenes.reset(caller)
        character = await self.character_for(caller)
        ended = await self._companion.reset(caller.incoming(character.id, ""))
        language = pick_language(caller.locale, character.language)
        return Answer(text(language, "reset" if ended else "reset_none"))

    async def help(self, caller: Caller) -> Answer:
        character = await self.character_for(caller)
        language = pick_language(caller.locale, character.language)
        return Answer(text(language, "help", name=character.name, commands=help_lines(language)))

    async def start(self, caller: Caller) -> Answer:
        """Telegram's /start: the character's greeting (bot/greeting.py), else the help."""
        return greeting(await self.character_for(caller), caller) or await self.help(caller)

    async def memoria(self, caller: Caller, action: str, args: str) -> Answer:
        """/memoria: the caller's own memory with their current character, answered privately;
        in a group, `olvidar` takes the caller out of the group's scene (bot/scenes.py)."""
        character = await self.character_for(caller)
        language = pick_language(caller.locale, character.language)
        if is_heavy(action, args) and (refused := self._memoria_refusal(caller, language)):
            return refused
        if caller.channel_kind == "group" and is_forget(action):
            return await self._scene_forget(caller, language, confirmed=is_heavy(action, args))
        user = await self._store.upsert_user(
            caller.platform, caller.user_id, caller.display_name, self._clock()
        )
        return await self._memoria.run(
            user,
            character.id,
            character.name,
            caller.channel_key,
            language,
            action,
            args.split(),
        )

    async def _scene_forget(self, caller: Caller, language: str, confirmed: bool) -> Answer:
        """A participant's forget of a group's scene: asked first, then done (bot/scenes.py)."""
        if not confirmed:
            ask = Button(text(language, "mem_yes"), f"mem:forget:@{caller.channel_id}")
            cancel = Button(text(language, "mem_no"), "mem:cancel")
            words = text(language, "scene_ask_forget")
            return Answer(words, private=True, buttons=(ask, cancel))
        erased = await self.scenes.forget(caller)
        words = text(language, "scene_forgotten", lines=erased.lines, facts=erased.facts)
        return Answer(words, private=True)

    def _memoria_refusal(self, caller: Caller, language: str) -> Answer | None:
        """None while the caller is within /memoria's limit; else a refusal saying when."""
        wait = self._memoria_rate.reserve(f"{caller.platform}:{caller.user_id}")
        if wait <= 0:
            return None
        seconds = max(1, round(wait))
        return Answer(text(language, "mem_limited", seconds=seconds), ok=False, private=True)

    async def button(self, caller: Caller, data: str) -> Answer:
        """A pressed button: switching character, confirming a forget, reviewing a fact."""
        kind, _, value = data.partition(":")
        if kind == "char":
            refused = await self.access_commands.refused(caller, "personaje.cambiar")
            return refused or await self.switch(caller, value)
        character = await self.character_for(caller)
        language = pick_language(caller.locale, character.language)
        user = await self._store.upsert_user(
            caller.platform, caller.user_id, caller.display_name, self._clock()
        )
        action, _, target = value.partition(":")
        if action == "forget" and target.startswith("@"):  # a group's scene (its channel id)
            if refused := self._memoria_refusal(caller, language):
                return refused
            group = Caller(caller.platform, caller.user_id, caller.display_name, "group",
                           target[1:], caller.locale)  # fmt: skip
            return await self._scene_forget(group, language, confirmed=True)
        if action == "forget" and target == character.id:
            if refused := self._memoria_refusal(caller, language):
                return refused
            return await self._memoria.forget(user, character.id, character.name, language)
        if action in ("accept", "reject") and target.isdecimal() and len(target) <= 18:
            return await self._memoria.review(
                user, character.id, language, int(target), accept=action == "accept"
            )
        return self._memoria.cancelled(language)

    async def language(self, caller: Caller) -> str:
        """The language the bot speaks to this caller: theirs if we speak it, else the
        character's."""
        return pick_language(caller.locale, (await self.character_for(caller)).language)

    async def user_error(self, caller: Caller, error: UserFacingError) -> Answer:
        """The one rendering of a refusal: a catalogue code in the caller's language, else the
        message as written (bot/ refusals are already worded in it)."""
        language = await self.language(caller)
        values = dict(error.values)
        if "fact_key" in values:  # a fact key in the memory layer's refusal, in words
            values["key"] = fact_key_label(language, str(values.pop("fact_key")))
        worded = text(language, error.code, **values) if error.code else error.message
        return Answer(worded, ok=False, private=True)

    async def refusal(self, caller: Caller, key: str) -> Answer:
        """A polite fixed answer (attachments, stickers, errors) in the character's language."""
        return Answer(text(await self.language(caller), key), ok=False)


__all__ = [
    "Answer",
    "ArrivalOrder",
    "Button",
    "Caller",
    "Commands",
    "Limits",
    "RateLimiter",
    "UserFacingError",
]
