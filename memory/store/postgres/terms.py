"""The project's words as PostgreSQL text-search values: a turn's tsvector, a term's tsquery.

Both are written as literals of the types, never parsed by a text-search configuration: the
lexemes are exactly memory/search/terms.py's folded words, the ones the Python BM25 of
memory/search/retrieval.py scores with, whatever the server's locale (migrations/postgres/0003).
A word holds letters and digits only ([^\\W_]+), so it needs no escaping inside the quotes;
quotes and backslashes are escaped all the same, should that ever change.
"""

from __future__ import annotations

from memory.search.terms import Term, words

# tsvector limits: a lexeme under 2 KiB, at most 256 positions each, positions up to 16383.
_MAX_LEXEME_BYTES = 2046
_MAX_POSITIONS = 256
_MAX_POSITION = 16383


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def search_vector(text: str) -> str:
    """The tsvector literal of a turn: each folded word with the positions it has."""
    positions: dict[str, list[int]] = {}
    for index, word in enumerate(words(text), start=1):
        if len(word.encode("utf-8")) > _MAX_LEXEME_BYTES:
            continue
        seen = positions.setdefault(word, [])
        place = min(index, _MAX_POSITION)
        if len(seen) < _MAX_POSITIONS and (not seen or seen[-1] != place):
            seen.append(place)
    return " ".join(
        f"{_quoted(word)}:{','.join(map(str, places))}" for word, places in positions.items()
    )


def term_query(term: Term) -> str:
    """The tsquery literal of one term: its stem as a prefix, or the word itself. A stem over
    the lexeme limit is cut to it: the index holds no such word, so it still finds nothing."""
    stem = term.stem.encode("utf-8")[:_MAX_LEXEME_BYTES].decode("utf-8", errors="ignore")
    return _quoted(stem) + (":*" if term.prefix else "")


def any_query(terms: list[Term]) -> str:
    """Any of `terms`."""
    return " | ".join(term_query(term) for term in terms)
