"""The few bytes of PNG that character cards need: find and write tEXt chunks.

Only the standard library is used (no Pillow): a card stores its JSON as base64 in a tEXt
chunk, so reading the chunk list is enough; the pixels are never decoded.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PngError(ValueError):
    """The bytes are not a PNG, or the PNG is cut short; the message says which."""


def is_png(raw: bytes) -> bool:
    return raw.startswith(PNG_SIGNATURE)


def text_chunks(raw: bytes) -> dict[str, str]:
    """keyword -> text of every tEXt chunk, the first one winning when a keyword repeats."""
    if not is_png(raw):
        raise PngError("not a PNG file (bad signature)")
    found: dict[str, str] = {}
    offset = len(PNG_SIGNATURE)
    while offset < len(raw):
        if offset + 8 > len(raw):
            raise PngError(f"truncated PNG: chunk header cut at byte {offset}")
        length, kind = struct.unpack(">I4s", raw[offset : offset + 8])
        end = offset + 8 + length + 4  # header, data, CRC
        if end > len(raw):
            raise PngError(f"truncated PNG: chunk {kind!r} at byte {offset} runs past the end")
        if kind == b"IEND":
            break
        if kind == b"tEXt":
            keyword, _, text = raw[offset + 8 : offset + 8 + length].partition(b"\0")
            # tEXt is Latin-1 by definition; base64 payloads are plain ASCII anyway.
            found.setdefault(keyword.decode("latin-1"), text.decode("latin-1"))
        offset = end
    return found


def with_text_chunks(raw: bytes, texts: Mapping[str, str], drop: tuple[str, ...] = ()) -> bytes:
    """The same PNG with the tEXt chunks named in `drop` or `texts` removed and `texts` added
    before IEND: how a card is embedded into (or taken out of) an avatar image."""
    if not is_png(raw):
        raise PngError("not a PNG file (bad signature)")
    removed = {*drop, *texts}
    kept: list[bytes] = []
    offset = len(PNG_SIGNATURE)
    while offset + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[offset : offset + 8])
        end = offset + 8 + length + 4
        if end > len(raw):
            raise PngError(f"truncated PNG: chunk {kind!r} at byte {offset} runs past the end")
        if kind == b"IEND":
            break
        keyword = raw[offset + 8 : offset + 8 + length].partition(b"\0")[0]
        if kind != b"tEXt" or keyword.decode("latin-1") not in removed:
            kept.append(raw[offset:end])
        offset = end
    added = [
        _chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1"))
        for key, value in texts.items()
    ]
    return PNG_SIGNATURE + b"".join([*kept, *added, _chunk(b"IEND", b"")])


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_with_text(texts: Mapping[str, str], width: int = 1, height: int = 1) -> bytes:
    """A valid, blank RGBA image carrying `texts` as tEXt chunks (for exports and tests)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA, no interlace
    rows = b"".join(b"\0" + b"\0\0\0\0" * width for _ in range(height))  # filter byte + pixels
    chunks = [_chunk(b"IHDR", header)]
    chunks += [
        _chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1"))
        for key, value in texts.items()
    ]
    chunks += [_chunk(b"IDAT", zlib.compress(rows)), _chunk(b"IEND", b"")]
    return PNG_SIGNATURE + b"".join(chunks)
