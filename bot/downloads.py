"""A photo's bytes fetched no further than the limit: a file whose size was not declared (or
was declared wrongly) is streamed, and the reading stops once one byte past the limit is in,
which is enough to refuse it; the rest is never downloaded."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

import httpx

DOWNLOAD_TIMEOUT_SECONDS = 30.0


class DownloadFailed(RuntimeError):
    """The file could not be fetched; the message never holds the URL (a Telegram file URL
    carries the bot's token)."""


async def read_capped(url: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the body at `url`: more than `limit` means "too big"."""
    parts = urlsplit(url)
    encoded = urlunsplit(parts._replace(path=quote(parts.path)))  # as PTB sends file paths
    data = bytearray()
    try:
        async with (
            httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT_SECONDS) as client,
            client.stream("GET", encoded) as response,
        ):
            if response.status_code != httpx.codes.OK:
                raise DownloadFailed(f"the file server answered {response.status_code}")
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    break  # leaving the block closes the connection: nothing more is read
    except httpx.HTTPError as exc:
        raise DownloadFailed(f"the download failed: {type(exc).__name__}") from None
    return bytes(data[: limit + 1])
