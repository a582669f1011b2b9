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
from collections.abc import Callable

_FENCE = re.compile(r"^ {0,3}```[^\n`]*\n(.*?)(?:\n {0,3}```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*")
# An action: *...* on one line, not touching a word on the outside (2*3*4 stays as it is).
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")


def to_telegram_html(markdown: str) -> str:
    """Escape the text and turn the Markdown constructs into Telegram's HTML tags."""
    return _code_apart(markdown, _FENCE, "pre", _inline)


def _inline(part: str) -> str:
    return _code_apart(part, _INLINE_CODE, "code", _prose)


def _code_apart(text: str, code: re.Pattern[str], tag: str, rest: Callable[[str], str]) -> str:
    """Code (group 1 of `code`) escaped inside `tag`, and everything between rendered by `rest`:
    Markdown inside code is shown as it is."""
    out: list[str] = []
    pos = 0
    for match in code.finditer(text):
        out.append(rest(text[pos : match.start()]))
        out.append(f"<{tag}>{html.escape(match.group(1), quote=False)}</{tag}>")
        pos = match.end()
    out.append(rest(text[pos:]))
    return "".join(out)


def _prose(part: str) -> str:
    escaped = html.escape(part, quote=False)
    escaped = _HEADING.sub(r"<b>\1</b>", escaped)
    escaped = _BOLD.sub(r"<b>\1</b>", escaped)
    return _ITALIC.sub(r"<i>\1</i>", escaped)
