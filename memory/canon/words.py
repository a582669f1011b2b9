"""Words as the canon checks compare them: folded (case, accents, look-alikes) so that a
person's name or words are found however the model wrote them."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# A capitalised word that does not open a sentence: how a name shows in running text.
_NAME = re.compile(r"(?<![.!?…:\n]\s)(?<!^)(?<![.!?…:\n])\b([A-ZÁÉÍÓÚÑÜ][^\W\d_]{2,})", re.M)


def fold(word: str) -> str:
    """Lower case, no accents."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words(text: str) -> list[str]:
    return [fold(w) for w in _WORD.findall(text)]


def names_in(text: str) -> set[str]:
    """The capitalised words of `text` past a sentence's first word, folded."""
    return {fold(m.group(1)) for m in _NAME.finditer(text)}


def ngrams(tokens: list[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def vocabulary(texts: Iterable[str]) -> set[str]:
    return {w for text in texts for w in words(text)}
