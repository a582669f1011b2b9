"""Text as the platforms deliver it, made storable on both backends: the one function every
user-typed string passes at the edge (messages, captions, display names, command words, and
whole updates before the inbox stores them).

Two things arrive from Telegram and Discord that the stores cannot hold: U+0000, which
PostgreSQL refuses in text and in jsonb (SQLite would keep it, and C code reading it back
would cut the text there), and half of a UTF-16 surrogate pair alone ("\\ud800" in JSON),
which cannot be encoded as UTF-8 at all (SQLite, PostgreSQL and the LLM's HTTP body all fail
on it). U+0000 is dropped (it carries nothing a reader could see); a lone surrogate becomes
U+FFFD, the replacement character, so the reader sees that something was there.
"""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _replace(match: re.Match[str]) -> str:
    return "" if match.group() == "\x00" else "\ufffd"


def storable(value: str) -> str:
    """`value` without U+0000 and with each lone surrogate replaced by U+FFFD."""
    if _UNSTORABLE.search(value) is None:
        return value  # the usual case: no copy
    return _UNSTORABLE.sub(_replace, value)


def storable_json(value: Any) -> Any:
    """A decoded JSON value with every string in it (keys too) made `storable`."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {
            storable(k) if isinstance(k, str) else k: storable_json(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [storable_json(v) for v in value]
    return value
