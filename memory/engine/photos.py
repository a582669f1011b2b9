"""A user's photo, seen once: a vision model describes it with the caption, and the turn log keeps
that description, never the bytes.

Why a second small call rather than asking the reply for a description too: the engine stores
the user's turn before it calls the model for the reply (no message is lost when the reply
fails), so the turn's text must exist first; the description is neutral words for memory and
search (not the character's voice); the reply's prompt stays text only, so its cached prefix is
the one the next request repeats; and the image's tokens are paid once, by a small model. The
character then answers from the description and the caption.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from memory.engine.llm import (
    LLM,
    ChatMessage,
    ImageBlock,
    LLMError,
    LLMRequest,
    Payer,
    TextBlock,
)
from memory.integrity.gate import as_data
from memory.models import UsageRecord

PHOTO_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
DESCRIPTION_CHARS = 500

_PROMPTS = {
    "es": {
        "system": "Describes fotos para la memoria de un personaje de chat. En una o dos frases "
        "y en español, di qué se ve (personas, animales, objetos, lugar, texto legible) sin "
        "interpretar ni inventar. Solo la descripción.",
        "caption": "Pie de foto de {user}: {caption}",
        "no_caption": "{user} no ha escrito pie de foto.",
        "turn": "[Foto de {user}: {description}]",
    },
    "en": {
        "system": "You describe photos for a chat character's memory. In one or two sentences, "
        "in English, say what is in it (people, animals, objects, place, legible text) without "
        "interpreting or inventing. Only the description.",
        "caption": "{user}'s caption: {caption}",
        "no_caption": "{user} wrote no caption.",
        "turn": "[Photo from {user}: {description}]",
    },
}


def sniff_image(data: bytes) -> str | None:
    """The image type the bytes really are (the platform's word is not trusted), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def photo_turn(language: str, user: str, description: str, caption: str) -> str:
    """The user's turn as stored: the description, then the caption as they wrote it."""
    prompts = _PROMPTS.get(language, _PROMPTS["en"])
    line = prompts["turn"].format(user=user, description=description)
    return f"{line}\n{caption}" if caption.strip() else line


class UsageSink(Protocol):
    async def record_usage(self, record: UsageRecord, now: datetime) -> None: ...


class PhotoDescriber:
    def __init__(
        self,
        llm: LLM,
        usage: UsageSink,
        clock: Callable[[], datetime],
        model: str | None = None,
        max_tokens: int = 200,
    ) -> None:
        self._llm = llm
        self._usage = usage
        self._clock = clock
        self._model = model
        self._max_tokens = max_tokens

    async def describe(
        self,
        image: ImageBlock,
        caption: str,
        language: str,
        user: str,
        owner: tuple[int, str],
    ) -> str | None:
        """One or two sentences on what the photo shows; None when the model failed. Its usage
        row (kind "photo") holds counts only: no caption, no description."""
        prompts = _PROMPTS.get(language, _PROMPTS["en"])
        said = (
            prompts["caption"].format(user=user, caption=caption)
            if caption.strip()
            else prompts["no_caption"].format(user=user)
        )
        request = LLMRequest(
            kind="photo",
            system=(TextBlock(prompts["system"]),),
            messages=(ChatMessage("user", (image, TextBlock(said))),),
            max_tokens=self._max_tokens,
            model=self._model,
            payer=Payer(owner[0]),
        )
        record = UsageRecord("photo", self._model or "", False, owner[0], owner[1])
        try:
            response = await self._llm.complete(request)
        except LLMError:
            await self._usage.record_usage(record, self._clock())
            return None
        description = as_data(" ".join(response.text.split()))[:DESCRIPTION_CHARS]
        done = UsageRecord("photo", self._model or "", bool(description), owner[0], owner[1])
        await self._usage.record_usage(done.measured(response), self._clock())
        return description or None
