"""What the fake Discord saw the bot do, and event-driven waiting on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.fakes.discord_world import EPHEMERAL, JSON

T = TypeVar("T")


@dataclass(frozen=True)
class UploadedFile:
    field: str
    filename: str | None
    content_type: str | None
    data: bytes


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None
    status: int | None = None


@dataclass
class SentMessage:
    """A POST /channels/{id}/messages: ``payload`` is the JSON the bot sent (payload_json for
    multipart uploads), ``message`` the object the fake answered with."""

    id: int
    channel_id: int
    payload: JSON
    message: JSON
    files: list[UploadedFile] = field(default_factory=list)

    @property
    def content(self) -> str | None:
        return self.payload.get("content")

    @property
    def allowed_mentions(self) -> JSON | None:
        return self.payload.get("allowed_mentions")

    @property
    def message_reference(self) -> JSON | None:
        return self.payload.get("message_reference")

    @property
    def components(self) -> list[JSON]:
        return self.payload.get("components") or []

    @property
    def embeds(self) -> list[JSON]:
        return self.payload.get("embeds") or []


@dataclass
class InteractionCallback:
    """A POST /interactions/{id}/{token}/callback. Types: 4 message, 5 deferred message,
    6 deferred update, 7 update, 8 autocomplete, 9 modal."""

    interaction_id: int
    type: int
    data: JSON
    files: list[UploadedFile] = field(default_factory=list)

    @property
    def flags(self) -> int:
        return int(self.data.get("flags") or 0)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def content(self) -> str | None:
        return self.data.get("content")


@dataclass
class Followup:
    """A webhook call made with an interaction token. ``target`` is "followup" for a new
    message (POST /webhooks/{app}/{token}) or the edited message id, "@original" included."""

    interaction_id: int
    method: str
    target: str
    payload: JSON
    message: JSON | None
    files: list[UploadedFile] = field(default_factory=list)

    @property
    def content(self) -> str | None:
        return self.payload.get("content")

    @property
    def flags(self) -> int:
        return int(self.payload.get("flags") or 0)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)


class Changes:
    """Wakes every waiter whenever anything is recorded.

    An Event swapped on each change rather than a Condition: notifying is then synchronous and
    callable from any handler without taking a lock.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait_for(
        self, check: Callable[[], T | None], seconds: float, what: Callable[[], str]
    ) -> T:
        """Return ``check()`` once it is not None, else fail the test with ``what()``."""
        try:
            async with asyncio.timeout(seconds):
                while True:
                    # Take the event before checking so a change in between is not missed.
                    event = self._event
                    result = check()
                    if result is not None:
                        return result
                    await event.wait()
        except TimeoutError:
            raise AssertionError(f"fake Discord, after {seconds}s: {what()}") from None
