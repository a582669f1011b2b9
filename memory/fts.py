"""SQLite FTS5 specifics: turning free text into a safe MATCH expression, and the searches over
`turn_search` (migrations/0003_search.sql, rebuilt with per-thread tokens by 0007).

The only module besides the memory/store package that holds SQL; `Store` calls these
functions with its own connection. Every search is scoped to one user's thread with one
character by the owner tokens of the index, so nothing here can return another user's turns.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from dataclasses import dataclass

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

# Inflectional endings, English and Spanish, longest first; stripping them and then any final
# vowels leaves a stem that is searched as a prefix, so "painting", "painted" and "paints" meet,
# as do "canción" and "canciones". Crude next to a real stemmer, but language-neutral and
# reproducible on the Python side, which scores exchanges from the same tokens.
_SUFFIX_LIST = """
ingly edly ings ing ed ies es s ly ers er ment ments ness ity ities ation ations
amente mente aciones acion ando iendo ados adas idos idas ado ada ido ida
aron ieron aba abas aban ias ar er ir os as
"""
_SUFFIXES = tuple(sorted(set(_SUFFIX_LIST.split()), key=len, reverse=True))
_VOWELS = "aeiouy"
MIN_STEM = 3
MAX_TERMS = 16
# fold(), words() and index_word() are part of the on-disk format (migrations 0007, 0008): the
# triggers index thread_tokens() of a turn and delete exactly what it returns for the same turn.
# Change one and the deletes of older turns no longer name the tokens they inserted (their words
# would stay in the index): any change to them needs a migration that rebuilds turn_search.
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


def index_word(word: str) -> str:
    """`word` as the index stores it, after the owner token: "w" and the word when it is all
    ASCII, else "x" and the hex of its UTF-8. Only ASCII letters and digits reach SQLite.

    Python's tokeniser (`words`) and SQLite's unicode61 disagree on thousands of characters
    (unicode61 splits at some that Python keeps in a word, and folds others differently), and a
    word split by SQLite could plant a token carrying another user's owner prefix. Both agree
    on [a-z0-9], so SQLite then splits at the spaces alone. A stem keeps every non-ASCII
    character of its word (the endings cut are ASCII), so it is spelled the same way, and the
    hex of a prefix is a prefix of the hex: prefix queries still work.
    """
    if word.isascii():
        return f"w{word}"
    return f"x{word.encode('utf-8').hex()}"


def stem(word: str) -> str:
    """The prefix a word is searched by: inflection and final vowels off, at least MIN_STEM."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
            word = word[: -len(suffix)]
            break
    while len(word) > MIN_STEM and word[-1] in _VOWELS:
        word = word[:-1]
    return word


@dataclass(frozen=True, slots=True)
class Term:
    """A query term: the word as typed (folded), and what is searched: its stem as a prefix,
    or the word itself for numbers and words too short to stem."""

    word: str
    stem: str
    prefix: bool

    @classmethod
    def of(cls, word: str) -> Term:
        if word.isalpha() and len(word) >= MIN_STEM:
            return cls(word, stem(word), True)
        return cls(word, word, False)

    def pattern(self) -> re.Pattern[str]:
        """Finds the term in folded text the way the MATCH expression finds it in the index."""
        end = "" if self.prefix else r"(?![^\W_])"
        return re.compile(r"(?<![^\W_])" + re.escape(self.stem) + end)


def query_terms(text: str, ignore: frozenset[str] = frozenset()) -> list[Term]:
    """The meaningful words of a query, at most MAX_TERMS, in order of first appearance.

    `ignore` holds folded words that say nothing about the topic, such as the names of the two
    people talking: every turn is between them, whether or not it names them.
    """
    seen: dict[str, Term] = {}
    for word in words(text):
        if word in STOP_WORDS or word in ignore or len(word) < 2 or word in seen:
            continue
        seen[word] = Term.of(word)
        if len(seen) == MAX_TERMS:
            break
    return list(seen.values())


def owner_token(user_id: int, character_id: str) -> str:
    """The start of every token of one user's turns with one character (migration 0007)."""
    return f"o{user_id}c{character_id.encode('utf-8').hex()}"


def thread_tokens(user_id: int, character_id: str, scope: str, text: str) -> str:
    """What the index stores for a turn: its scope once, then each word, all owner-prefixed.

    Registered as the SQL function the triggers call, so a query for one thread's words reads
    that thread's doclists only. 'w', 'x' and 's' cannot appear in the owner's hex, so a
    word's prefix query never matches the scope token.
    """
    owner = owner_token(user_id, character_id)
    return " ".join(
        [
            f"{owner}s{scope.encode('utf-8').hex()}",
            *(f"{owner}{index_word(word)}" for word in words(text)),
        ]
    )


def _expression(owner: str, term: Term) -> str:
    # Tokens hold ASCII letters and digits only, so quoting cannot break out of the string;
    # the quotes keep FTS5 from reading AND, OR, NOT or NEAR as operators.
    return f'"{owner}{index_word(term.stem)}"' + ("*" if term.prefix else "")


def match_expression(user_id: int, character_id: str, scope: str | None, terms: list[Term]) -> str:
    """Any of `terms` in one thread's turns (every scope of the pair when `scope` is None)."""
    owner = owner_token(user_id, character_id)
    alternatives = " OR ".join(_expression(owner, term) for term in terms)
    if scope is None:
        return f"({alternatives})"
    return f'"{owner}s{scope.encode("utf-8").hex()}" AND ({alternatives})'


def matching_turns(
    db: sqlite3.Connection,
    user_id: int,
    character_id: str,
    scope: str | None,
    terms: list[Term],
    limit: int,
) -> list[int]:
    """Ids of the thread's turns holding any of `terms`, best BM25 first."""
    if not terms:
        return []
    cursor = db.execute(
        "SELECT rowid FROM turn_search WHERE turn_search MATCH ?"
        " ORDER BY bm25(turn_search) LIMIT ?",
        (match_expression(user_id, character_id, scope, terms), limit),
    )
    return [int(row[0]) for row in cursor.fetchall()]


def term_counts(
    db: sqlite3.Connection,
    user_id: int,
    character_id: str,
    scope: str | None,
    terms: list[Term],
) -> list[int]:
    """In how many of the thread's turns each term occurs (the document frequency of BM25)."""
    if not terms:
        return []
    # One statement however many terms: one pass over the index's doclists per term.
    one = "SELECT ?, count(*) FROM turn_search WHERE turn_search MATCH ?"
    params: list[object] = []
    for index, term in enumerate(terms):
        params += [index, match_expression(user_id, character_id, scope, [term])]
    cursor = db.execute(" UNION ALL ".join([one] * len(terms)), params)
    counts = dict(cursor.fetchall())
    return [int(counts.get(index, 0)) for index in range(len(terms))]


def optimize(db: sqlite3.Connection) -> None:
    """Merge the index into one segment, dropping what deleted turns left in older segments."""
    db.execute("INSERT INTO turn_search (turn_search) VALUES ('optimize')")


def merge_step(db: sqlite3.Connection, pages: int) -> bool:
    """At most `pages` pages of merging towards one segment; False once there is nothing left
    to merge. A deletion leaves its words in older segments (SQLite 3.40 has no FTS5
    secure-delete) until they are merged with its delete markers, which only a merge into one
    segment guarantees; done in small steps, other users' work runs between them, where one
    'optimize' held the store's thread for seconds at 10^6 turns."""
    before = db.total_changes
    # Negative: every segment joins the merge, down to one, whatever the automerge settings.
    db.execute("INSERT INTO turn_search (turn_search, rank) VALUES ('merge', ?)", (-pages,))
    # FTS5's own test for "did any merging": the command alone counts as one change.
    return db.total_changes - before >= 2
