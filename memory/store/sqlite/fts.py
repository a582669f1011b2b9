"""SQLite FTS5 specifics: the index's token format and the searches over `turn_search`
(migrations/sqlite/0003_search.sql, rebuilt with per-thread tokens by 0007 and 0009).

Only the SQLite store calls these functions, with its own connection. Every search is scoped
to one user's thread with one character by the owner tokens of the index, so nothing here can
return another user's turns.
"""

from __future__ import annotations

import sqlite3

from memory.search.terms import Term, words


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
