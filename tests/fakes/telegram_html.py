"""Telegram's ``parse_mode=HTML``, as strict as the Bot API: the message is parsed into plain
text and entities, and anything the real API refuses ("Bad Request: can't parse entities: ...")
is refused here too — an unknown tag, a tag left open or closed out of order, a bare ``<`` or
``&``, an unknown named entity. See https://core.telegram.org/bots/api#html-style.
"""

from __future__ import annotations

import html
import re
from typing import Any

from tests.fakes.telegram_objects import bad_request, utf16_len

JSON = dict[str, Any]

ENTITY_OF_TAG = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "a": "text_link",
}
NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)((?:\s+[a-z-]+=\"[^\"<>]*\")*)\s*>")
_ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")


def _refuse(reason: str, offset: int) -> Exception:
    return bad_request(f"can't parse entities: {reason} at byte offset {offset}")


def parse_html(source: str) -> tuple[str, list[JSON]]:
    """The visible text and its entities; raises the API's 400 on anything it would refuse."""
    plain: list[str] = []
    entities: list[JSON] = []
    stack: list[tuple[str, int, str]] = []  # tag name, utf-16 offset where it opened, attrs
    pos = 0
    while pos < len(source):
        char = source[pos]
        if char == "<":
            tag = _TAG.match(source, pos)
            if tag is None:
                raise _refuse("unsupported start tag or unescaped '<'", pos)
            closing, name, attrs = tag.group(1), tag.group(2).lower(), tag.group(3)
            if name not in ENTITY_OF_TAG:
                raise _refuse(f'unsupported start tag "{name}"', pos)
            offset = utf16_len("".join(plain))
            if not closing:
                stack.append((name, offset, attrs))
            else:
                if not stack or stack[-1][0] != name:
                    raise _refuse(f'unmatched end tag "{name}"', pos)
                _, start, _ = stack.pop()
                if offset > start:
                    entities.append(
                        {"type": ENTITY_OF_TAG[name], "offset": start, "length": offset - start}
                    )
            pos = tag.end()
        elif char == "&":
            entity = _ENTITY.match(source, pos)
            if entity is None:
                raise _refuse("unescaped '&'", pos)
            name = entity.group(1)
            if not name.startswith("#") and name not in NAMED_ENTITIES:
                raise _refuse(f'unsupported HTML entity "&{name};"', pos)
            plain.append(html.unescape(entity.group(0)))
            pos = entity.end()
        elif char == ">":
            raise _refuse("unescaped '>'", pos)
        else:
            plain.append(char)
            pos += 1
    if stack:
        raise _refuse(f'can\'t find end tag corresponding to start tag "{stack[-1][0]}"', pos)
    return "".join(plain), sorted(entities, key=lambda e: (e["offset"], -e["length"]))
