"""Split a reply into messages that fit a platform's length limit.

Discord accepts 2,000 characters per message and Telegram 4,096. Lengths here are Python ``str``
lengths (code points). Cuts prefer the most natural boundary available: paragraph, line, sentence,
space, and only then a hard cut that still keeps a grapheme (base + combining marks, emoji ZWJ
sequence, flag pair) together. A cut inside a fenced code block closes the fence at the end of
the chunk and reopens it, with the same info string, at the start of the next one, so every chunk
renders as code on its own.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

# Boundaries in order of preference. Each match is the whitespace removed at the cut. No-break
# spaces are excluded: they exist precisely to keep their neighbours together.
_PARAGRAPH = re.compile(r"[^\S\n]*\n[^\S\n]*\n\s*")
_LINE = re.compile(r"[^\S\n]*\n\s*")
# After . ! ? … (optionally followed by a closing quote or bracket), or before ¿ ¡ which open a
# Spanish sentence even when the previous one ended without punctuation.
_SENTENCE = re.compile(
    r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’»)\]]))[^\S\u00a0\u2007\u202f]+"
    r"|[^\S\u00a0\u2007\u202f]+(?=[¿¡])"
)
_SPACE = re.compile(r"[^\S\u00a0\u2007\u202f]+")
_BOUNDARIES = (_PARAGRAPH, _LINE, _SENTENCE, _SPACE)
_LINE_LEVEL = 1  # paragraph and line boundaries are the only ones allowed inside code

# CommonMark fence line: up to three spaces of indent, then ``` or ~~~ and an optional info string.
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
# Code points that continue the grapheme before them: ZWJ, variation selectors, skin-tone
# modifiers and tag characters (subdivision flags). Combining marks are checked via unicodedata.
_EXTENDER = re.compile("[\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")
_REGIONAL = re.compile("[\U0001f1e6-\U0001f1ff]")


@dataclass(frozen=True)
class _Fence:
    open_start: int  # first character of the opening fence line
    body_start: int  # first character after the opening line's newline
    close_start: int  # first character of the closing line (len(text) when unclosed)
    close_end: int  # end of the closing line, excluding its newline
    opening: str  # what to prepend when reopening, e.g. "```python\n"
    closing: str  # what to append when closing early, e.g. "\n```"


@dataclass(frozen=True)
class _Cut:
    end: int  # the chunk's content is text[pos:end]
    next: int  # the following chunk resumes here; text[end:next] is dropped whitespace
    fence: _Fence | None  # the fence left open at ``end``, if any


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, none empty or blank.

    Text within the limit is returned unchanged as a single chunk; blank text gives ``[]``.
    Whitespace at the cut points is dropped (inside code only the newline at the cut), so the
    chunks, minus any fences added to keep code blocks balanced, reproduce the text.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    if not text.strip():
        return []
    if len(text) <= limit:
        return [text]
    fences = _find_fences(text, limit)
    chunks: list[str] = []
    pos = _skip_space(text, 0)
    reopen: _Fence | None = None
    while pos < len(text):
        prefix = reopen.opening if reopen else ""
        rest = text[pos:].rstrip()
        if not rest:
            break
        if len(prefix) + len(rest) <= limit:
            chunks.append(prefix + rest)
            break
        cut = _choose_cut(text, pos, limit - len(prefix), fences)
        body = text[pos : cut.end]
        if cut.fence:
            chunks.append(prefix + body + cut.fence.closing)
            pos = cut.next
        else:
            chunks.append(prefix + body.rstrip())
            pos = _skip_space(text, cut.next)
        reopen = cut.fence
    return chunks


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _find_fences(text: str, limit: int) -> list[_Fence]:
    """Locate fenced code blocks, pairing each opening line with its closing line."""
    fences: list[_Fence] = []
    opener: re.Match[str] | None = None
    for line in _FENCE_LINE.finditer(text):
        marker, info = line.group(1), line.group(2)
        if opener is None:
            if not (marker[0] == "`" and "`" in info):  # backticks in the info: inline code
                opener = line
        elif (
            marker[0] == opener.group(1)[0]
            and len(marker) >= len(opener.group(1))
            and not info.strip()  # a closing fence carries no info string
        ):
            fences.append(_make_fence(text, opener, line.start(), line.end()))
            opener = None
    if opener is not None:
        fences.append(_make_fence(text, opener, len(text), len(text)))
    # A fence whose reopen/close overhead would eat most of a chunk is treated as plain text,
    # so that every chunk keeps room for real content.
    return [f for f in fences if len(f.opening) + len(f.closing) <= limit // 2]


def _make_fence(text: str, opener: re.Match[str], close_start: int, close_end: int) -> _Fence:
    marker, info = opener.group(1), opener.group(2).strip()
    return _Fence(
        open_start=opener.start(),
        body_start=min(opener.end() + 1, len(text)),
        close_start=close_start,
        close_end=close_end,
        opening=f"{marker}{info}\n",
        closing=f"\n{marker}",
    )


def _fence_at(fences: list[_Fence], end: int) -> tuple[bool, _Fence | None]:
    """Whether a chunk may end at ``end`` and, if so, which fence it would leave open.

    Ending on a fence line itself, or so that either side gets an empty code block, is refused.
    """
    for fence in fences:
        if fence.open_start < end <= fence.body_start:
            return False, fence
        if fence.close_start - 1 <= end < fence.close_end:
            return False, fence
        if fence.body_start < end < fence.close_start - 1:
            return True, fence
    return True, None


def _choose_cut(text: str, pos: int, budget: int, fences: list[_Fence]) -> _Cut:
    """Pick where the chunk starting at ``pos`` ends, given ``budget`` characters for it.

    Boundaries in the back half of the window are tried first so that a stray early blank line
    does not produce a tiny chunk; then anywhere in the window; then a hard cut.
    """
    for floor in (pos + budget // 2, pos + 1):
        for level, pattern in enumerate(_BOUNDARIES):
            cut = _last_boundary(text, pattern, level, pos, floor, budget, fences)
            if cut is not None:
                return cut
    return _hard_cut(text, pos, budget, fences)


def _last_boundary(
    text: str,
    pattern: re.Pattern[str],
    level: int,
    pos: int,
    floor: int,
    budget: int,
    fences: list[_Fence],
) -> _Cut | None:
    best: _Cut | None = None
    # Scan slightly past the window so a boundary's whitespace run is seen whole.
    for match in pattern.finditer(text, floor, min(len(text), pos + budget + 2)):
        end, nxt = match.start(), match.end()
        allowed, fence = _fence_at(fences, end)
        if fence is not None and allowed:
            if level > _LINE_LEVEL:
                continue  # a space or sentence cut would break a code line in two
            # Inside code, drop only the newline: the next line's indentation is content.
            end = text.index("\n", match.start())
            nxt = end + 1
            allowed, fence = _fence_at(fences, end)
        if not allowed or end <= pos:
            continue
        overhead = len(fence.closing) if fence else 0
        if end - pos + overhead <= budget:
            best = _Cut(end, nxt, fence)
    return best


def _hard_cut(text: str, pos: int, budget: int, fences: list[_Fence]) -> _Cut:
    """Cut as late as possible without splitting a grapheme or a fence line."""
    last = min(pos + budget, len(text) - 1)
    for keep_graphemes in (True, False):  # a single grapheme longer than the budget: give up
        for end in range(last, pos, -1):
            allowed, fence = _fence_at(fences, end)
            overhead = len(fence.closing) if fence else 0
            if not allowed or end - pos + overhead > budget:
                continue
            if keep_graphemes and _splits_grapheme(text, end):
                continue
            return _Cut(end, end, fence)
    return _Cut(pos + budget, pos + budget, None)


def _splits_grapheme(text: str, i: int) -> bool:
    """Whether a cut between ``text[i - 1]`` and ``text[i]`` would split a user-perceived char."""
    before, after = text[i - 1], text[i]
    if unicodedata.category(after) in ("Mn", "Mc", "Me") or _EXTENDER.match(after):
        return True
    if before == "\u200d" or (before == "\r" and after == "\n"):
        return True
    if _REGIONAL.match(before) and _REGIONAL.match(after):
        # Flags are pairs of regional indicators: only cut after an even-length run.
        run = 0
        while i - 1 - run >= 0 and _REGIONAL.match(text[i - 1 - run]):
            run += 1
        return run % 2 == 1
    return False


# ---- HTML (Telegram's parse_mode=HTML) ---------------------------------------------------------

_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)[^>]*>")
_ENTITY = re.compile(r"&#?\w+;")


@dataclass(frozen=True)
class _Markup:
    """Where the tags are, and which tags are open after each one."""

    spans: list[tuple[int, int]]  # tags and entities: a cut never falls inside one
    ends: list[int]  # the end of each tag, in order
    stacks: list[tuple[tuple[str, str], ...]]  # (name, opening tag) open after that tag

    @classmethod
    def of(cls, html: str) -> _Markup:
        spans = sorted(
            [(m.start(), m.end()) for m in _TAG.finditer(html)]
            + [(m.start(), m.end()) for m in _ENTITY.finditer(html)]
        )
        ends: list[int] = []
        stacks: list[tuple[tuple[str, str], ...]] = []
        stack: list[tuple[str, str]] = []
        for tag in _TAG.finditer(html):
            name = tag.group(2).lower()
            if tag.group(1):
                while stack and stack.pop()[0] != name:
                    pass
            else:
                stack.append((name, tag.group(0)))
            ends.append(tag.end())
            stacks.append(tuple(stack))
        return cls(spans, ends, stacks)

    def inside(self, pos: int) -> bool:
        index = bisect.bisect_right(self.spans, (pos, len(self.spans) + pos)) - 1
        return index >= 0 and self.spans[index][0] < pos < self.spans[index][1]

    def open_at(self, pos: int) -> tuple[tuple[str, str], ...]:
        index = bisect.bisect_right(self.ends, pos) - 1
        return self.stacks[index] if index >= 0 else ()


def _closing(stack: tuple[tuple[str, str], ...]) -> str:
    return "".join(f"</{name}>" for name, _ in reversed(stack))


def split_html(html: str, limit: int) -> list[str]:
    """Split Telegram HTML like ``split_message``, keeping every chunk's tags balanced: the tags
    open at a cut are closed at the end of the chunk and opened again at the start of the next,
    and no cut falls inside a tag or an entity (``&amp;``)."""
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    if not html.strip():
        return []
    if len(html) <= limit:
        return [html]
    markup = _Markup.of(html)
    chunks: list[str] = []
    pos = _skip_space(html, 0)
    while pos < len(html):
        prefix = "".join(opening for _, opening in markup.open_at(pos))
        rest = html[pos:].rstrip()
        if not rest:
            break
        if len(prefix) + len(rest) <= limit:
            chunks.append(prefix + rest)
            break
        end, nxt = _html_cut(html, pos, limit - len(prefix), markup)
        chunks.append(prefix + html[pos:end].rstrip() + _closing(markup.open_at(end)))
        pos = _skip_space(html, nxt)
    return chunks


def _html_cut(html: str, pos: int, budget: int, markup: _Markup) -> tuple[int, int]:
    """The latest good cut whose chunk, with the tags it must close, fits ``budget``."""

    def fits(end: int) -> bool:
        return (
            pos < end
            and not markup.inside(end)
            and end - pos + len(_closing(markup.open_at(end))) <= budget
        )

    for floor in (pos + budget // 2, pos + 1):
        for pattern in _BOUNDARIES:
            found = [
                (m.start(), m.end())
                for m in pattern.finditer(html, floor, min(len(html), pos + budget + 2))
                if fits(m.start())
            ]
            if found:
                return found[-1]
    for keep_graphemes in (True, False):
        for end in range(min(pos + budget, len(html) - 1), pos, -1):
            if fits(end) and not (keep_graphemes and _splits_grapheme(html, end)):
                return end, end
    return pos + budget, pos + budget
