"""The words of a text and the terms of a query, the same for every backend.

Search backends index and match these words (the SQLite store in memory/store/sqlite/fts.py),
and the BM25 of memory/search/retrieval.py scores exchanges from them, so every backend ranks
by the same code. No SQL here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import Stemmer

# Words that carry no topic, in the two languages the characters speak. Kept small: BM25's IDF
# already discounts common words; this only keeps them out of the OR that selects candidates.
_STOP_WORDS = """
    a about after again all also am an and any are as at be been before being both but by can
    could did do does doing done during each else ever for from get got had has have having he
    her here hers herself him himself his how i if in into is it its itself just let like likely
    me might more most much my myself no nor not now of off on once one only or other our ours
    out over own really recently same she should so some such than that the their theirs them
    then there these they this those through to too under until up upon us very was we were what
    when where which while who whom whose why will with would yet you your yours yourself
    anything something thing things tell told remember know think
    de la que el en y a los las del se por un una unos unas con no su sus al lo le les mas pero
    como o fue ha han he has hay era eres es son soy sea ser estar esta estas este estos esto
    esa esas ese esos eso mi mis tu tus te me nos os yo ella ellas ellos nosotros vosotros usted
    ustedes muy ya cuando donde quien quienes cual cuales porque para sin sobre entre tambien
    todo todos toda todas algo nada hacer hizo dijo dije cosa cosas recuerdas acuerdas sabes
    cuanto cuanta cuantos cuantas si
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())

# The languages the characters speak, by their Snowball names; a query in neither is stemmed by
# what both agree on (see `stem`).
_SNOWBALL = {"en": "english", "es": "spanish"}
# Words that tell the language of a short text: frequent, and (nearly) never words of the other.
_MARKS = """
    the and you did what when where who how was were have has is are my your with about
    |
    el la los las que de y es mi tu cuando donde quien como fue con sobre
"""
_ENGLISH_MARKS, _SPANISH_MARKS = (frozenset(part.split()) for part in _MARKS.split("|"))
_VOWELS = "aeiouy"
MIN_STEM = 3
MAX_TERMS = 16
# fold(), words() and index_word() (memory/store/sqlite/fts.py) are part of the SQLite index's
# on-disk format (migrations 0007, 0009): the triggers index thread_tokens() of a turn and
# delete exactly what it returns for the same turn. Change one and the deletes of older turns no
# longer name the tokens they inserted (their words would stay in the index): any change to them
# needs a migration that rebuilds turn_search.
_WORD = re.compile(r"[^\W_]+")


class _WithoutCombining(dict[int, int | None]):
    """A str.translate table that drops combining marks, filled in as characters are met (a
    loop over the characters in Python cost more than the rest of a search together)."""

    def __missing__(self, code: int) -> int | None:
        kept = None if unicodedata.combining(chr(code)) else code
        self[code] = kept
        return kept


_DROP_COMBINING = _WithoutCombining()


def fold(text: str) -> str:
    """Lower case without diacritics, as unicode61 with remove_diacritics 2 folds it."""
    if text.isascii():  # the common case, and NFKD is slow
        return text.lower()
    # Lower-cased again: a compatibility form can be a capital ("ᴬ" is "A").
    return unicodedata.normalize("NFKD", text.lower()).translate(_DROP_COMBINING).lower()


def words(text: str) -> list[str]:
    """The words of `text` (letters and digits, folded); the index stores each spelled by
    `index_word`."""
    return _WORD.findall(fold(text))


class Stemmers:
    """Snowball stemmers (PyStemmer), one per language, made on first use: a stemmer object is
    not thread-safe, and each Retriever holds its own."""

    def __init__(self) -> None:
        self._by_language: dict[str, Stemmer.Stemmer] = {}

    def stem(self, word: str, language: str) -> str:
        name = _SNOWBALL.get(language)
        if name is None:
            return word
        stemmer = self._by_language.get(language)
        if stemmer is None:
            stemmer = self._by_language[language] = Stemmer.Stemmer(name)
        return str(stemmer.stemWord(word))


def language_of(text: str, default: str | None = None) -> str | None:
    """ "en" or "es" by the marker words of `text`; `default` (the character's language) when
    they do not tell, None when neither does."""
    tokens = words(text)
    english = sum(1 for token in tokens if token in _ENGLISH_MARKS)
    spanish = sum(1 for token in tokens if token in _SPANISH_MARKS)
    if english != spanish:
        return "en" if english > spanish else "es"
    return default


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]


def stem(word: str, language: str | None = None, stemmers: Stemmers | None = None) -> str:
    """The prefix a word is searched by: its Snowball stem in `language` (in both languages
    when None), cut to what it shares with the word ("happi" of "happy" is not in the text),
    final vowels off ("studi" must find "study"), at least MIN_STEM letters."""
    stemmers = stemmers or Stemmers()
    prefix = word
    for code in [language] if language in _SNOWBALL else list(_SNOWBALL):
        prefix = _common_prefix(prefix, stemmers.stem(word, code or ""))
    while len(prefix) > MIN_STEM and prefix[-1] in _VOWELS:
        prefix = prefix[:-1]
    return prefix if len(prefix) >= MIN_STEM else word[:MIN_STEM]


@dataclass(frozen=True, slots=True)
class Term:
    """A query term: the word as typed (folded), and what is searched: its stem as a prefix,
    or the word itself for numbers and words too short to stem."""

    word: str
    stem: str
    prefix: bool

    @classmethod
    def of(cls, word: str, language: str | None = None, stemmers: Stemmers | None = None) -> Term:
        if word.isalpha() and len(word) >= MIN_STEM:
            return cls(word, stem(word, language, stemmers), True)
        return cls(word, word, False)

    def pattern(self) -> re.Pattern[str]:
        """Finds the term in folded text the way the MATCH expression finds it in the index."""
        end = "" if self.prefix else r"(?![^\W_])"
        return re.compile(r"(?<![^\W_])" + re.escape(self.stem) + end)


def query_terms(
    text: str,
    ignore: frozenset[str] = frozenset(),
    language: str | None = None,
    stemmers: Stemmers | None = None,
) -> list[Term]:
    """The meaningful words of a query, at most MAX_TERMS, in order of first appearance,
    stemmed in the query's language (its marker words, else `language`, the character's).

    `ignore` holds folded words that say nothing about the topic, such as the names of the two
    people talking: every turn is between them, whether or not it names them.
    """
    seen: dict[str, Term] = {}
    language = language_of(text, language)
    stemmers = stemmers or Stemmers()
    for word in words(text):
        if word in STOP_WORDS or word in ignore or len(word) < 2 or word in seen:
            continue
        seen[word] = Term.of(word, language, stemmers)
        if len(seen) == MAX_TERMS:
            break
    return list(seen.values())
