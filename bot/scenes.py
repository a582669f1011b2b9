"""Groups as scenes (issue 31): who is present, which messages the scene hears, /escena, and
a participant's forget. The engine's half is memory/scene/; adapters call `hear` for every
group message they see and send the lines it writes through their own outlet.

Who is present: the characters an admin added with /escena añadir, in the order they joined;
a group nobody added any to has one, the channel's bound character (/personaje vincular),
else the default character. What is heard: a message that mentions the bot, replies to one
of its (or a character's) messages, names a present character, or any message of a bound
channel. Nothing else is stored.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.access import Access
from bot.answers import Answer, Caller, clean_input, is_blank
from bot.community import ChatRatings, Community, Usable
from bot.pacing import ArrivalOrder
from bot.scene_story import story
from bot.texts import pick_language, text
from cards.character import Character, CharacterBook
from memory.engine.bursts import CallGate
from memory.engine.companion import Companion
from memory.models import SceneErasure
from memory.scene.chronicle import ChronicleStore, forget_in_chronicles
from memory.scene.engine import LineSink, SceneLine, SceneMessage, scene_owner_id, scene_scope
from memory.scene.routing import Castmember, Heard, addressed
from memory.store.protocols import Channels, Scenes, TurnLog, Users

Notify = Callable[[Answer], Awaitable[None]]


class SceneStore(Channels, Scenes, Users, ChatRatings, ChronicleStore, TurnLog, Protocol):
    """Bindings, scene members and the chats marked mature, the rows of the people and of
    each scene, and each character's story of it."""


class SceneHost(Protocol):
    """What the scenes ask of the commands (bot/commands.py): who may talk, who manages what,
    the default character, the limits and the rate gate in use."""

    @property
    def access(self) -> Access: ...

    async def admit(self, caller: Caller, language: str) -> Answer | None: ...

    @property
    def community(self) -> Community: ...

    def default_for(self, usable: Usable) -> Character: ...

    @property
    def max_message_chars(self) -> int: ...

    def gate_for(self, caller: Caller) -> CallGate | None: ...


@dataclass(frozen=True)
class SceneResult:
    """What a heard message got: the lines of its turn (none for all but a turn's newest
    message), or a refusal to send instead."""

    lines: tuple[SceneLine, ...] = ()
    refusal: Answer | None = None


async def _ready(result: SceneResult) -> SceneResult:
    return result


async def _lines_of(pending: Awaitable[tuple[SceneLine, ...]]) -> SceneResult:
    return SceneResult(await pending)


class SceneRoom:
    def __init__(
        self,
        companion: Companion,
        store: SceneStore,
        host: SceneHost,
        clock: Callable[[], datetime],
    ) -> None:
        self._companion = companion
        self._store = store
        self._host = host
        self._clock = clock
        self._order = ArrivalOrder()

    def arrival(self, caller: Caller) -> AbstractAsyncContextManager[None]:
        """The scene's FIFO gate: an adapter takes it before its first await, and holds it
        until `hear` returns, so the scene's messages join it in the order they arrived
        (the look-ups before the engine would otherwise let a later one overtake)."""
        return self._order.hold(f"{caller.platform}:scene:{caller.channel_id}")

    async def cast(self, caller: Caller) -> tuple[Character, ...]:
        """The characters present, in the order they joined (see the module's docstring),
        among those that may speak in this chat (bot/community.py)."""
        members = await self._store.scene_members(caller.platform, caller.channel_id)
        bound = await self._store.bound_character(caller.platform, caller.channel_id)
        usable = await self._host.community.usable(caller)
        book, fallback = self._companion.characters, self._host.default_for(usable)
        return tuple(cast_of(members, bound, book, fallback.id, usable))

    async def character_for(self, caller: Caller) -> Character:
        """The scene's character a command speaks of: the first present."""
        return (await self.cast(caller))[0]

    async def hear(
        self,
        caller: Caller,
        message: str,
        outlet: LineSink,
        *,
        message_id: str | None = None,
        mentioned: bool = False,
        replied_name: str | None = None,
        notify: Notify | None = None,
    ) -> Awaitable[SceneResult] | None:
        """Hand a group message to its scene; None when the scene does not hear it (nothing
        is stored). The wait is for the turn's lines, which `outlet` has sent by then."""
        cast = await self.cast(caller)
        replied = _character_named(replied_name, cast)
        bound = await self._store.bound_character(caller.platform, caller.channel_id)
        heard = bool(mentioned or bound or replied or names_a_character(message, cast))
        gone = None if replied else await self._gone(caller, message, replied_name, heard, cast)
        if gone is None and not heard:
            return None
        language = pick_language(caller.locale, cast[0].language)
        if await self._host.admit(caller, language) is not None:
            return None  # refused in a group: nothing said, nothing stored (bot/access.py)
        if gone is not None:
            return gone
        message = clean_input(message)
        if bound and notify is not None and (notice := await self._bound_notice(caller, bound)):
            await notify(notice)
        if refusal := self._refusal(message, language):
            return _ready(SceneResult(refusal=refusal))

        async def held(seconds: float) -> None:
            if notify is not None:
                await notify(Answer(text(language, "rate_limited", seconds=math.ceil(seconds))))

        scene_message = SceneMessage(
            caller.platform,
            caller.channel_id,
            caller.user_id,
            caller.display_name,
            message,
            tuple(c.id for c in cast),
            message_id,
            replied,
        )
        pending = self._companion.scene(scene_message, outlet, self._host.gate_for(caller), held)
        return _lines_of(pending)

    async def _bound_notice(self, caller: Caller, bound: str) -> Answer | None:
        """Once per channel and character: why the bound character does not speak here."""
        character = self._companion.characters.get(bound)
        rules = self._host.community
        if character is None:
            return None
        key = rules.refusal(caller, character, await rules.mature_here(caller))
        if key is None or not await self._store.claim_rating_notice(
            caller.platform, caller.channel_id, bound, self._clock()
        ):
            return None
        language = pick_language(caller.locale, character.language)
        fallback = (await self.cast(caller))[0].name
        reason = text(language, key, name=character.name)
        words = text(language, "mature_fallback", name=character.name, reason=reason,
                     fallback=fallback)  # fmt: skip
        return Answer(words)

    async def _gone(
        self,
        caller: Caller,
        message: str,
        replied_name: str | None,
        heard: bool,
        cast: tuple[Character, ...],
    ) -> Awaitable[SceneResult] | None:
        """A message to a character that left is told it is not here, rather than answered by
        another or met with silence: a reply to its line naming nobody present, or (in a scene
        an admin manages) a message nobody present hears that names it. None otherwise."""
        if names_a_character(message, cast):
            return None
        present = {c.id for c in cast}
        absent = [c for c in self._companion.characters.all() if c.id not in present]
        gone = next((c.id for c in absent if _character_named(replied_name, (c,))), None)
        managed = not heard and await self._store.scene_members(caller.platform, caller.channel_id)
        if gone is None and managed:
            gone = next((c.id for c in absent if names_a_character(message, (c,))), None)
        if gone is None:
            return None
        language = pick_language(caller.locale, cast[0].language)
        words = text(language, "scene_gone", name=self._companion.character(gone).name)
        return _ready(SceneResult(refusal=Answer(words, ok=False)))

    def _refusal(self, message: str, language: str) -> Answer | None:
        if is_blank(message):
            return Answer(text(language, "empty"), ok=False)
        limit = self._host.max_message_chars
        if len(message) > limit:
            over = len(message) - limit
            words = text(language, "too_long", length=len(message), limit=limit, over=over)
            return Answer(words, ok=False)
        return None

    # ---- /escena ----------------------------------------------------------------------------

    async def show(self, caller: Caller) -> Answer:
        """/escena: who is present."""
        cast = await self.cast(caller)
        language = pick_language(caller.locale, cast[0].language)
        if caller.channel_kind != "group":
            return Answer(text(language, "scene_groups_only"), ok=False)
        names = ", ".join(f"{c.name} ({c.id})" for c in cast)
        return Answer(text(language, "scene_cast", names=names))

    async def story(self, caller: Caller, name: str) -> Answer:
        """/escena historia [personaje]: a character's story of this scene, for anyone here."""
        cast = await self.cast(caller)
        language = pick_language(caller.locale, cast[0].language)
        if caller.channel_kind != "group":
            return Answer(text(language, "scene_groups_only"), ok=False)
        book = self._companion.characters
        return await story(self._store, book, caller, cast, name, language)

    async def add(self, caller: Caller, character_id: str) -> Answer:
        """Admin: a character joins the scene; it knows nothing said before it came."""
        refused = await self._admin_refusal(caller, character_id)
        if refused is not None:
            return refused
        cast = await self.cast(caller)
        language, rules = pick_language(caller.locale, cast[0].language), self._host.community
        book = self._companion.characters
        if refused := await rules.unusable(
            caller, book.get(character_id), character_id, book, language
        ):
            return refused
        added = await self._store.scene_members(caller.platform, caller.channel_id)
        by, now = f"{caller.platform}:{caller.user_id}", self._clock()
        if not added:  # the implicit character stays, with everything it witnessed
            for present in cast:
                await self._store.add_scene_member(
                    caller.platform, caller.channel_id, present.id, by, now
                )
        joined = await self._store.add_scene_member(
            caller.platform, caller.channel_id, character_id, by, now
        )
        name = self._companion.character(character_id).name
        return Answer(text(language, "scene_joined" if joined else "scene_already", name=name))

    async def remove(self, caller: Caller, character_id: str) -> Answer:
        """Admin: a character leaves the scene (what it witnessed stays its own memory)."""
        refused = await self._admin_refusal(caller, character_id)
        if refused is not None:
            return refused
        cast = await self.cast(caller)
        language = pick_language(caller.locale, cast[0].language)
        name = self._companion.character(character_id).name
        added = await self._store.scene_members(caller.platform, caller.channel_id)
        # A member silent here (not allowed in this chat) may leave: the others stay.
        silent = character_id in added and character_id not in {c.id for c in cast}
        if character_id not in {c.id for c in cast} and not silent:
            return Answer(text(language, "scene_absent", name=name), ok=False)
        if len(cast) == 1 and not silent:
            return Answer(text(language, "scene_last", name=name), ok=False)
        if not added:
            return Answer(text(language, "scene_last", name=name), ok=False)
        await self._store.remove_scene_member(caller.platform, caller.channel_id, character_id)
        return Answer(text(language, "scene_left", name=name))

    async def _admin_refusal(self, caller: Caller, character_id: str) -> Answer | None:
        cast = await self.cast(caller)
        language = pick_language(caller.locale, cast[0].language)
        rules = self._host.community
        if refused := rules.not_managing(caller, language):
            return refused
        if caller.channel_kind != "group":
            return Answer(text(language, "scene_groups_only"), ok=False)
        book = self._companion.characters
        if book.get(character_id) is None:
            valid = ", ".join(book.ids())
            words = text(language, "unknown_character", given=character_id, valid=valid)
            return Answer(words, ok=False)
        return None

    async def mature(self, caller: Caller, on: bool) -> Answer:
        """Admin: mark this Telegram group for adults (its mature characters may speak)."""
        cast = await self.cast(caller)
        language, rules = pick_language(caller.locale, cast[0].language), self._host.community
        if refused := rules.not_managing(caller, language):
            return refused
        if caller.channel_kind != "group":
            return Answer(text(language, "scene_groups_only"), ok=False)
        if caller.platform == "discord":  # Discord's own age gate decides (channel.nsfw)
            return Answer(text(language, "scene_mature_discord"), ok=False)
        by, now = f"{caller.platform}:{caller.user_id}", self._clock()
        await self._store.mark_chat_mature(caller.platform, caller.channel_id, on, by, now)
        return Answer(text(language, "scene_mature_on" if on else "scene_mature_off"))

    async def reset(self, caller: Caller) -> Answer:
        """Admin: end the scene's conversation now, for every character present (each folds
        its window into its summary, and the people's facts are extracted)."""
        cast = await self.cast(caller)
        language = pick_language(caller.locale, cast[0].language)
        rules = self._host.community
        if refused := rules.not_managing(caller, language):
            return refused
        owner = await self._store.find_user(caller.platform, scene_owner_id(caller.channel_id))
        ended = False
        if owner is not None:
            scope = scene_scope(caller.platform, caller.channel_id)
            for character in cast:
                ended = await self._companion.end_thread(owner, character.id, scope) or ended
            # Every character's story of the scene goes with it, and none is written from
            # before the reset (memory/store/scene_journeys.py).
            await self._store.reset_scene_journeys(owner.id, self._clock())
            for character_id in self._companion.characters.ids():
                self._companion.profile_changed(owner.id, character_id)
        return Answer(text(language, "reset" if ended else "reset_none"))

    # ---- a participant's forget -------------------------------------------------------------

    async def forget(self, caller: Caller) -> SceneErasure:
        """Everything of the caller in this group's scene: their lines in every character's
        copy, the summary claims citing them, their facts learned here (with every character).
        The other participants' memory is untouched."""
        person = await self._store.find_user(caller.platform, caller.user_id)
        if person is None:
            return SceneErasure(0, 0, 0)
        owner = await self._store.find_user(caller.platform, scene_owner_id(caller.channel_id))
        scope = scene_scope(caller.platform, caller.channel_id)
        present = [c.id for c in await self.cast(caller)]
        witnesses = sorted(set(present) | set(self._companion.characters.ids()))
        async with self._companion.holding_scene(owner, witnesses, scope):
            if owner is not None:  # their sentences first: their lines tell which they are
                names = (person.display_name, caller.display_name)
                await forget_in_chronicles(self._store, owner.id, witnesses, person.id, names,
                                           scope)  # fmt: skip
            return await self._store.forget_scene_lines(person.id, scope)


def names_a_character(text: str, cast: Sequence[Character]) -> bool:
    """Whether the text names one of these characters (its name, first name or an alias)."""
    return bool(addressed([Heard(text)], [Castmember(c.id, c.names_in_scene()) for c in cast]))


def cast_of(
    members: Sequence[str],
    bound: str | None,
    book: CharacterBook,
    default: str,
    usable: Usable = lambda character: True,
) -> list[Character]:
    """The characters present (see the module's docstring): the members still in the book
    that may speak here, else the bound character if it may, else the default."""
    present = [c for c in (book.get(i) for i in members) if c is not None and usable(c)]
    if present:
        return present
    chosen = book.get(bound) if bound else None
    if chosen is not None and not usable(chosen):
        chosen = None
    return [chosen or book.get(default) or book.get(book.default_id)]  # type: ignore[list-item]


def _character_named(name: str | None, cast: tuple[Character, ...]) -> str | None:
    """The character whose message was replied to, by the name it was shown under."""
    if not name:
        return None
    folded = name.strip().casefold()
    return next((c.id for c in cast if c.name.casefold() == folded), None)
