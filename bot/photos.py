"""Photos sent to the character: checked (size, real type), described by a vision model, and
handed to the engine as the user's turn (the description and the caption; the bytes are never
kept). Adapters give the declared size and a way to fetch the bytes, so a photo declared too
big is refused before it is downloaded, and one whose size was not declared (or lied about) is
read no further than one byte past the limit (bot/downloads.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

from bot.answers import Answer, Caller, clean_input
from bot.texts import pick_language, text
from cards.character import Character
from memory.engine.llm import ImageBlock, TextSink
from memory.engine.photos import PhotoDescriber, photo_turn, sniff_image
from memory.store.protocols import Users

Notify = Callable[[Answer], Awaitable[None]]
Submit = Callable[
    [Caller, str, str | None, Notify | None, TextSink | None], Awaitable[Awaitable[Answer]]
]
Refusal = Callable[[Caller, str], Awaitable[Answer | None]]


class Fetch(Protocol):
    def __call__(self, limit: int) -> Awaitable[bytes]:
        """The photo's bytes, read no further than `limit` + 1 of them."""
        ...


async def _ready(answer: Answer) -> Answer:
    return answer


class Photos:
    def __init__(
        self,
        describer: PhotoDescriber | None,  # None: the provider or model cannot see images
        max_bytes: int,
        store: Users,
        character_for: Callable[[Caller], Awaitable[Character]],
        submit: Submit,
        clock: Callable[[], datetime],
        refusal: Refusal,  # who may talk (bot/access.py): checked before the vision call
    ) -> None:
        self._describer = describer
        self._max_bytes = max_bytes
        self._store = store
        self._character_for = character_for
        self._submit = submit
        self._clock = clock
        self._refusal = refusal

    async def submit(
        self,
        caller: Caller,
        size: int,
        fetch: Fetch,
        caption: str,
        message_id: str | None = None,
        notify: Notify | None = None,
        on_text: TextSink | None = None,
    ) -> Awaitable[Answer]:
        """The wait for the character's answer to a photo, or a clear refusal at once."""
        turn = await self.describe(caller, size, fetch, caption)
        if isinstance(turn, Answer):
            return _ready(turn)
        return await self._submit(caller, turn, message_id, notify, on_text)

    async def describe(self, caller: Caller, size: int, fetch: Fetch, caption: str) -> str | Answer:
        """The photo as the user's turn (its description and caption), or a refusal: what a
        private chat hands to the engine, and a group to its scene (bot/scenes.py)."""
        caption = clean_input(caption)  # it goes to the vision call before any store
        character = await self._character_for(caller)
        language = pick_language(caller.locale, character.language)
        if (refused := await self._refusal(caller, language)) is not None:
            return refused
        limit_mb = f"{self._max_bytes / 1_000_000:g}"
        if self._describer is None:
            return Answer(text(language, "photo_no_vision"), ok=False)
        if size > self._max_bytes:
            return Answer(text(language, "photo_too_big", limit=limit_mb), ok=False)
        data = await fetch(self._max_bytes)
        media_type = sniff_image(data)
        if len(data) > self._max_bytes:
            return Answer(text(language, "photo_too_big", limit=limit_mb), ok=False)
        if media_type is None:
            return Answer(text(language, "photo_bad_type"), ok=False)
        user = await self._store.upsert_user(
            caller.platform, caller.user_id, caller.display_name, self._clock()
        )
        description = await self._describer.describe(
            ImageBlock(media_type, data),
            caption,
            character.language,
            caller.display_name,
            (user.id, character.id),
        )
        del data  # the bytes go no further than the vision call
        if description is None:
            return Answer(text(language, "photo_failed"), ok=False)
        return photo_turn(character.language, caller.display_name, description, caption)
