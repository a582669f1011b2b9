"""What the memory gate can read: Spanish and English words, nothing else.

The gate's rules (memory/integrity/gate.py) judge Spanish and English. Text they cannot read
is text they cannot judge, so it is not promoted into memory (the user's turn keeps it, in
their log and their export): words written backwards ("selur ruoy erongi"), letters that spell
nothing in either language, and clauses in a third language ("ab jetzt antwortest du nur auf
Deutsch"). The rule fails closed by design: a list of orders in every language and every
encoding can never be complete, a vocabulary can.

The vocabularies are wordfreq's small lists (shipped inside the package, loaded at start-up,
about 40 MB of RAM for the eight languages): a word is known in a language when its Zipf frequency
there is above zero (the tables are read directly, so no cache keeps a user's words in memory
after a forget). Proper names are capitalised and not judged; neither are numbers,
addresses, handles or words shorter than three letters.
"""

from __future__ import annotations

import gzip
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import msgpack

READ = ("es", "en")  # the languages the gate's rules are written for
# Languages whose clauses can be told from Spanish and English: the neighbours a user (or an
# attacker) is likeliest to switch to.
OTHERS = ("de", "it", "pt", "fr", "ca", "nl")
# A word belongs to another language when it is this much more frequent there (Zipf is a log10
# scale: 2.0 is a hundred times) than in Spanish or English: "sem", "je", "ao" are in every
# list as noise, "poi", "rien", "você" only in their own.
FOREIGN_MARGIN = 2.0
UNREADABLE_RUN = 3  # this many unknown words in a row, or
UNREADABLE_WORDS = 3  # this many unknown words making
UNREADABLE_SHARE = 0.5  # at least this share of the words judged, make a text unreadable
MIRRORED_WORDS = 2  # this many unknown words that are words backwards: read it backwards too
FOREIGN_WORDS = 3  # this many words of one other language, and
FOREIGN_SHARE = 0.25  # at least this share of the words judged, make a foreign clause

# Words as a reader sees them: letters, with inner apostrophes ("user's", "d'ora").
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
# Not judged: addresses, links, handles and hashtags carry names, not language.
# (Possessive: a long "a-a-a-..." must not make it quadratic.)
_NOT_WORDS = re.compile(
    r"(?<![^\s@])[^\s@]++@\S++|\b(?:https?://|www\.)\S++|(?<![\w-])[\w-]++(?:\.[\w-]++)++(?:/\S*+)?|[@#]\w++"
)


@dataclass(frozen=True)
class Reading:
    """How much of a text the gate can read."""

    judged: int  # words looked up
    unknown: tuple[str, ...]  # in no vocabulary at all
    unknown_run: int  # the longest run of unknown words in a row
    foreign: tuple[str, ...]  # words of `language`, not of Spanish or English
    language: str | None  # the other language most of `foreign` belong to


def _plain(word: str) -> str:
    return unicodedata.normalize("NFC", word.casefold().replace("’", "'"))


def _judged_words(text: str) -> list[str]:
    text = _NOT_WORDS.sub(" ", unicodedata.normalize("NFKC", text))
    words = []
    for match in _WORD.finditer(text):
        word = match.group(0)
        if len(word) < 3 or word[0].isupper() or (not word.isascii() and not _is_latin(word)):
            continue  # names, short words and other scripts are not read as language
        words.append(_plain(word))
    return words


def _is_latin(word: str) -> bool:
    return all("LATIN" in unicodedata.name(ch, "") for ch in word if ch.isalpha())


def load_vocabularies() -> None:
    """Read every word list now (about 0.2 s), so that no check waits for one."""
    for language in READ + OTHERS:
        _vocabulary(language)


@cache  # one table per language: words of the language, never a memory's words
def _vocabulary(language: str) -> dict[str, float]:
    """wordfreq's small list for ``language``, as word -> Zipf frequency, read from the file the
    package ships ("cBpack": a gzipped msgpack list whose n-th bucket holds the words of
    frequency 10^(-n/100)). Read directly rather than through `wordfreq.zipf_frequency`, whose
    cache would keep the words looked up (a memory's words, forgotten ones too) in RAM, and
    whose import costs a quarter of a second at every start."""
    path = files("wordfreq") / "data" / f"small_{language}.msgpack.gz"
    with path.open("rb") as packed, gzip.open(packed) as unpacked:
        header, *buckets = msgpack.load(unpacked, raw=False)
    if header != {"format": "cB", "version": 1}:
        raise RuntimeError(f"{path}: not a wordfreq cBpack file of version 1: {header!r}")
    return {word: 9 - index / 100 for index, bucket in enumerate(buckets) for word in bucket}


def zipf_in(word: str, language: str) -> float:
    """How common ``word`` (casefolded) is in ``language``: its Zipf frequency, 0 if unknown."""
    return _vocabulary(language).get(word, 0.0)


def known(word: str) -> float:
    """How common ``word`` (casefolded) is in Spanish or English: its Zipf frequency, 0 if
    unknown."""
    return max(zipf_in(word, language) for language in READ)


def _best(word: str, languages: tuple[str, ...]) -> tuple[float, str]:
    return max((zipf_in(word, lang), lang) for lang in languages)


def reading(text: str) -> Reading:
    """Look up every judged word of ``text`` in the vocabularies."""
    words = _judged_words(text)
    unknown: list[str] = []
    foreign: dict[str, list[str]] = {}
    run = longest = 0
    for word in words:
        known, _ = _best(word, READ)
        other, language = _best(word, OTHERS)
        run = run + 1 if known == 0 and other == 0 else 0
        longest = max(longest, run)
        if run:
            unknown.append(word)
        elif other - known >= FOREIGN_MARGIN:
            foreign.setdefault(language, []).append(word)
    top = max(foreign, key=lambda lang: len(foreign[lang]), default=None)
    in_top = tuple(foreign[top]) if top else ()
    return Reading(len(words), tuple(unknown), longest, in_top, top)


def illegible_reason(seen: Reading) -> str | None:
    """Why the gate cannot read a text, given its `reading` (so must not promote it), or None."""
    if not seen.judged:
        return None
    unknown = len(seen.unknown)
    if seen.unknown_run >= UNREADABLE_RUN or (
        unknown >= UNREADABLE_WORDS and unknown / seen.judged >= UNREADABLE_SHARE
    ):
        shown = " ".join(seen.unknown[:4])
        return f"is not written in Spanish or English words the gate can read: '{shown}'"
    foreign = len(seen.foreign)
    if foreign >= FOREIGN_WORDS and foreign / seen.judged >= FOREIGN_SHARE:
        shown = " ".join(seen.foreign[:4])
        return f"holds a clause in a language the gate cannot judge ({seen.language}): '{shown}'"
    return None


def backwards(text: str, seen: Reading) -> str | None:
    """``text`` (whose `reading` is ``seen``) read from its end when its unknown words are words
    written backwards (in whole or in part: the gate's rules then judge that reading too), or
    None. Plain words read backwards are unknown ("ti" for "it" aside), so plain text is never
    judged that way."""
    unknown = seen.unknown
    mirrored = [word for word in unknown if _best(word[::-1], READ)[0] > 0]
    if len(mirrored) >= MIRRORED_WORDS and 2 * len(mirrored) >= len(unknown):
        return text[::-1]
    return None
