"""The Markdown the characters write, as the HTML Telegram's ``parse_mode=HTML`` accepts.

Characters (and the catalogue) write Discord-style Markdown: ``*actions*`` in italics,
``**bold**``, `` `code` ``, fenced blocks, and now and then a ``## heading``. Discord shows that
as it is; Telegram without a parse mode would show the asterisks, and with one it refuses any
unescaped ``<`` or ``&``. So: everything is escaped first, then the few constructs become the
tags Telegram allows (``b``, ``i``, ``code``, ``pre``). A ``*`` that opens nothing stays a ``*``.
"""

from __future__ import annotations

import html
import re

_FENCE = re.compile(r"^ {0,3}```[^\n`]*\n(.*?)(?:\n {0,3}```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*")
# An action: *...* on one line, not touching a word on the outside (2*3*4 stays as it is).
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")


def to_telegram_html(markdown: str) -> str:
    """Escape the text and turn the Markdown constructs into Telegram's HTML tags."""
    out: list[str] = []
    pos = 0
    for fence in _FENCE.finditer(markdown):
        out.append(_inline(markdown[pos : fence.start()]))
        out.append(f"<pre>{html.escape(fence.group(1), quote=False)}</pre>")
        pos = fence.end()
    out.append(_inline(markdown[pos:]))
    return "".join(out)


def _inline(part: str) -> str:
    pieces: list[str] = []
    pos = 0
    for code in _INLINE_CODE.finditer(part):
        pieces.append(_prose(part[pos : code.start()]))
        pieces.append(f"<code>{html.escape(code.group(1), quote=False)}</code>")
        pos = code.end()
    pieces.append(_prose(part[pos:]))
    return "".join(pieces)


def _prose(part: str) -> str:
    escaped = html.escape(part, quote=False)
    escaped = _HEADING.sub(r"<b>\1</b>", escaped)
    escaped = _BOLD.sub(r"<b>\1</b>", escaped)
    return _ITALIC.sub(r"<i>\1</i>", escaped)
