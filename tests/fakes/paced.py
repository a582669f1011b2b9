"""A download the fakes serve a part at a time, to count what the client really read.

Counting the bytes a server wrote says little (the kernel's socket buffers on 127.0.0.1 take
megabytes before a write blocks), so the body goes out in two parts: the first `held_after`
bytes, then nothing more: the rest is held back until the client hangs up. A client that needs
no more than the first part reads it and closes; one that wants the whole body waits on the held
part and never finishes. So, deterministically, a download whose `hung_up` is set
was abandoned by the client after at most `sent` bytes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class PacedDownload:
    """One file served in parts, and what became of its download."""

    content: bytes
    held_after: int  # bytes sent before the rest is held back
    sent: int = 0
    requests: int = 0
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)

    async def serve(self, request: web.Request, content_type: str) -> web.StreamResponse:
        """Chunked, with no Content-Length: the client learns the size only by reading."""
        self.requests += 1
        response = web.StreamResponse(headers={"Content-Type": content_type})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            await response.write(self.content[: self.held_after])
            self.sent = min(self.held_after, len(self.content))
            # Held until the client hangs up: the server's handler is then cancelled.
            await asyncio.Event().wait()
        except (asyncio.CancelledError, ConnectionResetError):
            self.hung_up.set()
            raise
        return response  # pragma: no cover - the wait above only ends by cancellation
