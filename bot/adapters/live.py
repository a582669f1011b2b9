"""A reply shown while the model writes it: one platform message, sent once there is enough
text and then edited, no more often than the platform allows.

The adapter supplies how to send and edit (and how to render text for its platform); this
class only decides when. Edits are throttled by time (Telegram and Discord both limit edits per
chat), and a failed send or edit ends the live display instead of the reply: the final answer
is always delivered by the adapter through its ordinary path (`finish`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Handle = TypeVar("Handle")
# Enough words that the first message is worth a notification.
MIN_FIRST_CHARS = 24
# Shown after the text while the model is still writing.
WRITING = " …"


class LiveReply(Generic[Handle]):
    def __init__(
        self,
        send: Callable[[str], Awaitable[Handle]],
        edit: Callable[[Handle, str], Awaitable[None]],
        render: Callable[[str], str],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._edit = edit
        self._render = render
        self._interval = interval
        self._clock = clock
        self.handle: Handle | None = None
        self.shown = ""  # the text last sent or edited in (rendered)
        self._at = 0.0
        self._broken = False
        self.edits = 0

    async def update(self, snapshot: str) -> None:
        """The model's text so far (a `TextSink`): shown when due, never raising."""
        if self._broken or not snapshot.strip():
            return
        if self.handle is None and len(snapshot) < MIN_FIRST_CHARS:
            return
        now = self._clock()
        if self.handle is not None and now - self._at < self._interval:
            return
        rendered = self._render(snapshot.rstrip() + WRITING)
        if rendered == self.shown:
            return
        try:
            if self.handle is None:
                self.handle = await self._send(rendered)
            else:
                await self._edit(self.handle, rendered)
                self.edits += 1
        except Exception:  # the display is a courtesy: the answer still comes at the end
            log.warning("live reply: showing the text so far failed", exc_info=True)
            self._broken = True
            return
        self.shown, self._at = rendered, now

    async def finish(self, first_part: str) -> bool:
        """Put the final text's first part in the live message; False when there is none (or
        it cannot be edited), so the adapter sends the answer as usual."""
        self._broken = True  # no late snapshot may overwrite the final text
        if self.handle is None:
            return False
        if first_part == self.shown:
            return True
        try:
            await self._edit(self.handle, first_part)
        except Exception:
            log.warning("live reply: the final edit failed; sending the answer anew", exc_info=True)
            return False
        self.shown = first_part
        return True
