"""Small builders shared by the tests."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from memory.models import Incoming


def dm(
    text: str,
    user: str = "u1",
    character: str = "detective_bilbao",
    platform: str = "telegram",
    name: str = "Ana",
) -> Incoming:
    return Incoming(platform, user, name, "dm", f"dm-{user}", character, text)


def group(
    text: str,
    user: str,
    channel: str = "g1",
    character: str = "detective_bilbao",
    name: str = "Bea",
) -> Incoming:
    return Incoming("telegram", user, name, "group", channel, character, text)


def strip_cache(value: Any) -> Any:
    """The request without cache_control markers: what the provider hashes for its cache."""
    value = copy.deepcopy(value)
    if isinstance(value, dict):
        value.pop("cache_control", None)
        return {k: strip_cache(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_cache(v) for v in value]
    return value


def flat_blocks(body: dict[str, Any]) -> list[tuple[int, str, Any]]:
    """Every message content block as (message index, role, block without cache_control)."""
    return [
        (i, m["role"], strip_cache(block))
        for i, m in enumerate(body["messages"])
        for block in m["content"]
    ]


def cached_prefix(body: dict[str, Any]) -> tuple[list[Any], list[tuple[int, str, Any]]]:
    """System blocks, and the message blocks up to the last message-level cache breakpoint."""
    flags = ["cache_control" in block for m in body["messages"] for block in m["content"]]
    last = max(i for i, flagged in enumerate(flags) if flagged)
    return strip_cache(body["system"]), flat_blocks(body)[: last + 1]


def summary_input(**fields: list[str]) -> dict[str, list[str]]:
    names = ["established_facts", "relationship", "commitments", "tone", "open_threads", "canon"]
    return {name: fields.get(name, []) for name in names}


def as_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True).encode()


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def load_corpus(name: str) -> list[str]:
    """A corpus of tests/data: one entry per line, "# " comments, \\uXXXX escapes decoded.

    Only \\uXXXX is decoded (not full unicode_escape) so accented UTF-8 text stays intact.
    """
    path = Path(__file__).parent / "data" / name
    lines = path.read_text(encoding="utf-8").splitlines()
    entries = [line for line in lines if line.strip() and not line.startswith("# ")]
    return [_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), line) for line in entries]
