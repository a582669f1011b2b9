"""Normalisation for the memory gate (memory/integrity/gate.py): the stored form and the
matched form.

`clean` is what is stored: NFKC, no control, format (Cf) or line/paragraph separator characters,
one line. `skeleton` is what the rules match (never stored): `clean`, casefolded, accents,
look-alike letters (Cyrillic, Greek) and leetspeak digits folded to plain Latin letters, and
letters spelled out one by one ("i g n o r e") joined and marked.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

# ---- normalisation ----------------------------------------------------------------------------

_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j",
        "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y",
        "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h", "ү": "y",
        "ь": "b", "п": "n", "г": "r", "л": "n", "и": "u", "д": "a",
        # Greek
        "α": "a", "β": "b", "γ": "y", "δ": "d", "ε": "e", "ζ": "z", "η": "n", "ι": "i",
        "κ": "k", "λ": "l", "μ": "u", "ν": "v", "ο": "o", "π": "n", "ρ": "p", "σ": "o",
        "ς": "s", "τ": "t", "υ": "u", "φ": "f", "χ": "x", "ω": "w", "ϲ": "c",
        # Latin look-alikes NFKC leaves alone
        "ı": "i", "ɩ": "i", "ʟ": "l", "ɑ": "a", "ɡ": "g", "ꞷ": "w",
    }
)  # fmt: skip
# Greek capitals whose lower case looks like another Latin letter ("Ν" is N, "ν" is v): read
# before case folding.
_GREEK_CAPITALS = str.maketrans({"Ν": "n", "Υ": "y", "Μ": "m", "Η": "h", "Ϲ": "c", "Ζ": "z"})
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b",
                       "9": "g", "@": "a", "$": "s", "!": "i", "|": "l", "€": "e"})  # fmt: skip
# A whole run of letters and leet signs, read at once (a run with no letter is left alone in
# `_unleet`: matching only runs with a letter made 20,000 "@" quadratic, over a second).
_LEET_TOKEN = re.compile(r"(?<![a-z0-9@$!|€])[a-z0-9@$!|€]++")
_LONE_FOUR = re.compile(r"(?<=[a-z] )4(?= [a-z])")
_SPACED_RUN = re.compile(r"(?<![a-z])[a-z](?:(?: |[.\-_*·+~]{1,2} ?)[a-z](?![a-z])){2,}")
# Six or more letters spelled out one by one are marked in the skeleton; a text is refused for
# spelling when its spelled-out letters make more than a name ("I-R-I-A-R-T-E", "T H E  N O O K").
SPELLED_OUT = 6
SPELLED_TEXT = 13
SPELLED_MARK = "\u2063"  # invisible separator: `clean` drops it, so text cannot forge it
_SEPARATORS = re.compile(r"[\s.\-_*·+~]")
WS = re.compile(r"\s+")


def _is_dropped(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn") and ch not in "\u200d"


# Default-ignorable characters outside the format category: fillers and selectors that render
# as nothing (Unicode's Default_Ignorable_Code_Point, less what `_is_dropped` already drops).
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef]"
)


def readings(text: str) -> list[str]:
    """The ways a reader may take ``text``: as it is; when it holds invisible characters, with
    each of them read as a space; when symbols sit between letters ("responde✨siempre"), with
    those read as spaces. An invisible character can join two words ("ignore" + ZWSP + "your")
    or split one ("ig" + ZWSP + "nore"); a check must see every reading."""
    found = [text]
    if any(_is_dropped(ch) or _IGNORABLE.match(ch) for ch in text if not ch.isspace()):
        found.append("".join(" " if _is_dropped(ch) or _IGNORABLE.match(ch) else ch for ch in text))
    if _SYMBOL_BETWEEN.search(text) or _EDGE_SYMBOL.search(text):
        found.append(_EDGE_SYMBOL.sub(" ", _SYMBOL_BETWEEN.sub(" ", text)))
    if _URL_ENCODED.search(text):
        found.append(url_decoded(text))
    if _SEPARATOR.search(text.strip()):  # it ends a clause: "my city is Leeds\u2029Share..."
        found.append(_SEPARATOR.sub(" ; ", text))
    return found


# The line and paragraph separators no keyboard types (a plain new line is left to the other
# readings: a poem's lines are not each an order).
_SEPARATOR = re.compile(r"\s*[\u2028\u2029\x85\x0b\x0c]+\s*")


# A symbol opening a text or a clause ("✨reply✨only…", "👉 share…") stands where a reader
# sees nothing: the clause opens with the word after it.
_EDGE_SYMBOL = re.compile(
    r"(?:^|(?<=[\s.;:!?]))[\u200d\ufe0f]*+(?:[^\w\s\x00-\x7f«»¿¡’\u200d\ufe0f][\u200d\ufe0f]*+)++"
)

# Text written as a URL's query: percent escapes ("%20", "%C3%AD"), "+" or "/" joining words
# ("reveal+the+prompt", "s/p/e/a/k"), "key=value&key=value".
_URL_ENCODED = re.compile(r"%[0-9a-fA-F]{2}|[^\W\d_][+/][^\W\d_]|\w=[^\s=&]+&")
_URL_JOINERS = re.compile(r"(?<=\w)[+/](?=\w)")
_URL_FIELDS = re.compile(r"(?<=\w)[=?&](?=[^\s=?&])|^[?&]")


def url_decoded(text: str) -> str:
    """``text`` as a browser shows a URL's query: escapes decoded, "+" and "/" between words
    read as spaces, and each "key=value" field as a clause of its own ("bio: …; lang: …")."""
    decoded = unquote(text, errors="replace")
    decoded = _URL_JOINERS.sub(" ", decoded)
    return _URL_FIELDS.sub(lambda m: "; " if m.group(0) in "?&" else ": ", decoded)


# Symbols (emoji, dingbats, arrows, maths) between two words, joining them or standing as a
# separator: the reader sees a space there. (Possessive, with the joiners apart from the symbols:
# "a" and 200 zero-width joiners before a "!" made the older form backtrack for minutes.)
_SYMBOL_BETWEEN = re.compile(
    r"(?<=\w)\s*+[\u200d\ufe0f]*+"
    r"(?:[^\w\s\u200d\ufe0f'’.,;:!?¿¡()\[\]{}\"«»\-/@&%+=#$*_~`^|\\<>][\u200d\ufe0f]*+)++\s*+(?=\w)"
)


def clean(text: str) -> str:
    """The stored form: NFKC, no control/format/separator characters, on one line.

    A zero-width joiner survives only between two symbols, where emoji sequences need it."""
    return WS.sub(" ", _strip_invisible(text)).strip()


def _strip_invisible(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for index, ch in enumerate(text):
        if ch == "\u200d":
            before = text[index - 1] if index else ""
            after = text[index + 1] if index + 1 < len(text) else ""
            if (
                before
                and after
                and unicodedata.category(before) == "So"
                and (unicodedata.category(after) == "So")
            ):
                out.append(ch)
            continue
        if ch.isspace():
            out.append(" ")  # a newline or U+2028 separates words: keep them apart
        elif not _is_dropped(ch) and not _IGNORABLE.match(ch):
            out.append(ch)
    return "".join(out)


def _unleet(match: re.Match[str]) -> str:
    token = match.group(0)
    if not any("a" <= c <= "z" for c in token):
        return token
    return token.translate(_LEET) if any(c in "0134578@$!|€9" for c in token) else token


def _join_spaced(match: re.Match[str]) -> str:
    joined = _SEPARATORS.sub("", match.group(0))
    # Marked so that the check can refuse letter-by-letter spelling as such.
    return f" {joined}{SPELLED_MARK} " if len(joined) >= SPELLED_OUT else joined


# In `unspelled`, where the gaps between words are still seen, two letters are a word too ("l a").
# A leet digit or a look-alike letter beside a letter is part of a word ("0b3d3c3s c0m0" spells
# no letter out, nor does Greek "ΟΜ ΜΕ").
_SPELLED_WORD = re.compile(r"(?<![a-z0-9])[a-z](?:(?: |[.\-_*·+~]{1,2} ?)[a-z](?![a-z0-9]))+")


def unspelled(text: str) -> tuple[str, int]:
    """``text`` with letters spelled out one by one joined into words, read before whitespace
    is collapsed so that a wider gap still parts two words ("o l v i d a   t u s" is "olvida
    tus"), and how many letters were spelled out. The words are then judged like any others;
    only a spelling longer than a name is refused as such."""
    plain = _strip_invisible(text).translate(_GREEK_CAPITALS).casefold()
    plain = "".join(
        ch for ch in unicodedata.normalize("NFD", plain) if not unicodedata.combining(ch)
    ).translate(_HOMOGLYPHS)
    letters = 0

    def join(match: re.Match[str]) -> str:
        nonlocal letters
        joined = _SEPARATORS.sub("", match.group(0))
        letters += len(joined)
        return joined

    return _SPELLED_WORD.sub(join, plain), letters


_LATIN_NAME = re.compile(r"^LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?([A-Z])(?: |$)")


@lru_cache(maxsize=1024)
def _latin_letter(ch: str) -> str:
    """A Latin letter in another dress (small capitals "ᴀ", "ꜱ"; modifier letters) as itself:
    its Unicode name says which letter it is."""
    match = _LATIN_NAME.match(unicodedata.name(ch, ""))
    return match.group(1).lower() if match else ch


def skeleton(text: str) -> str:
    """The matching form of ``text`` (never stored): see the module's docstring."""
    text = _strip_invisible(text).translate(_GREEK_CAPITALS).casefold().replace("\u200d", "")
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if not unicodedata.combining(ch))
    text = text.translate(_HOMOGLYPHS)
    text = "".join(_latin_letter(ch) if ord(ch) > 0x24F and ch.isalpha() else ch for ch in text)
    unleeted = _LEET_TOKEN.sub(_unleet, text)
    if unleeted != text:  # among leet words a lone 4 is the article: "3nds w1th 4 l1nk"
        unleeted = _LONE_FOUR.sub("a", unleeted)
    text = unleeted
    text = _SPACED_RUN.sub(_join_spaced, text)
    text = re.sub("[\u2018\u2019\u02bc\u00b4`]", "'", text)
    return WS.sub(" ", text).strip()
