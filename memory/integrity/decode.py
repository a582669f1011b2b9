"""Readings of text written in a simple code, for the memory gate (memory/integrity/gate.py).

A reader who knows the trick reads through it, so the gate does too: the rules then judge what
the text says once decoded. Each reading is tried only when the text looks written that way,
and only with the vocabularies of memory/integrity/legible.py as the judge of what decodes:

- a letter shift (ROT13 and every other Caesar shift) when its unknown words become words;
- Morse code (dots and dashes, "/" or a wide gap between words);
- misspellings on purpose ("siemrpe", "promt", "responderr"): an unknown word one edit away
  from a common word with the same first and last letters is read as that word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from string import ascii_lowercase

from memory.integrity.legible import Reading, known

# A shift is read when this many of the unknown words become words under it, and at least half.
SHIFTED_WORDS = 2
MIN_SHIFTED_LENGTH = 4  # shorter random strings are words somewhere by chance
# A misspelt word is corrected only to a common word (Zipf >= 3: once in a million words or
# more), and only when it is this long: a short unknown word is a name or a code.
COMMON = 3.0
MIN_MISSPELT_LENGTH = 4

_LOWER_WORD = re.compile(r"\b[a-z]+\b")
MISSPELT = "read with its misspellings corrected"  # a correction, not a code: no word decoded


def decodings(text: str, seen: Reading) -> Iterator[tuple[str, str]]:
    """Each decoded reading of ``text`` (whose `reading` is ``seen``), with how it was read."""
    if shifted := caesar(text, seen):
        yield "read with its letters shifted back", shifted
    if morse := from_morse(text):
        yield "read as Morse code", morse
    if corrected := spelled_right(text, seen):
        yield MISSPELT, corrected


def _shift(word: str, by: int) -> str:
    return "".join(ascii_lowercase[(ascii_lowercase.index(c) + by) % 26] for c in word)


def caesar(text: str, seen: Reading) -> str | None:
    """``text`` with its unknown words shifted back by the one shift that makes them words."""
    words = [w for w in seen.unknown if w.isascii() and w.isalpha()]
    if len(words) < SHIFTED_WORDS:
        return None
    for by in range(1, 26):
        readable = [w for w in words if len(w) >= MIN_SHIFTED_LENGTH and known(_shift(w, by))]
        if len(readable) >= SHIFTED_WORDS and 2 * len(readable) >= len(words):
            return _LOWER_WORD.sub(lambda m, by=by: _shifted_if_better(m.group(0), by), text)
    return None


def _shifted_if_better(word: str, by: int) -> str:
    shifted = _shift(word, by)
    return shifted if known(shifted) > known(word) else word


_MORSE = {
    ".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g",
    "....": "h", "..": "i", ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n",
    "---": "o", ".--.": "p", "--.-": "q", ".-.": "r", "...": "s", "-": "t", "..-": "u",
    "...-": "v", ".--": "w", "-..-": "x", "-.--": "y", "--..": "z", "--.--": "n",
    "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4", ".....": "5",
    "-....": "6", "--...": "7", "---..": "8", "----.": "9",
}  # fmt: skip
# Dots and dashes in any of their look-alikes, at least four letters' worth in a row.
_MORSE_RUN = re.compile(r"(?:[.·•∙\-–—_−]{1,6}(?:\s*/\s*|\s+|$)){4,}")
_DOT_DASH = str.maketrans({"·": ".", "•": ".", "∙": ".", "–": "-", "—": "-", "_": "-", "−": "-"})


def from_morse(text: str) -> str | None:
    """``text`` with its runs of Morse code written out, or None when it holds none."""
    found = False

    def decode(match: re.Match[str]) -> str:
        nonlocal found
        words = re.split(r"\s*/\s*|\s{2,}", match.group(0).translate(_DOT_DASH).strip())
        letters = [[_MORSE.get(code, "") for code in word.split()] for word in words]
        decoded = " ".join("".join(word) for word in letters if any(word))
        found = found or len(decoded.replace(" ", "")) >= 3
        return f" {decoded} "

    decoded = _MORSE_RUN.sub(decode, text)
    return decoded if found else None


# Texting shorthand for "que" and "porque" ("el bot tiene q responder"), read out with the
# misspellings.
_SHORTHAND = {"q": "que", "k": "que", "xq": "porque", "pq": "porque", "porq": "porque"}
_ANY_WORD = re.compile(r"[^\W\d_]+")


def spelled_right(text: str, seen: Reading) -> str | None:
    """``text`` with each unknown word one edit away from a common word read as that word, and
    texting shorthand written out."""
    fixes = {w: fix for w in seen.unknown if (fix := _nearest(w))}
    words = {m.group(0).casefold() for m in _ANY_WORD.finditer(text)}
    fixes |= {w: _SHORTHAND[w] for w in words & _SHORTHAND.keys()}
    if not fixes:
        return None
    return _ANY_WORD.sub(lambda m: fixes.get(m.group(0).casefold(), m.group(0)), text)


def _nearest(word: str) -> str | None:
    if len(word) < MIN_MISSPELT_LENGTH or not word.isalpha():
        return None
    best, score = None, COMMON
    for candidate in _one_edit_inside(word):
        if (zipf := known(candidate)) >= score:
            best, score = candidate, zipf
    return best


_LETTERS = ascii_lowercase + "áéíóúñü"


def _one_edit_inside(word: str) -> set[str]:
    """The words one edit away that keep ``word``'s first and last letters: a typo keeps a
    word's ends, while an ending changed is another form of a word the small lists lack
    ("traduzco", "jailbreaks"), not a misspelling."""
    first, inside, last = word[0], word[1:-1], word[-1]
    splits = [(inside[:i], inside[i:]) for i in range(len(inside) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return {first + middle + last for middle in deletes | swaps | replaces | inserts} - {word}
