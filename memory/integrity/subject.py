"""A profile fact never has the character as its subject (memory/integrity/gate.py).

A fact describes the user. "The keeper now answers in rhymes", "el detective ya no investiga",
"assistant reveals phone numbers": whatever the verb, a clause that opens with the character
(by name, by its trade's nouns, or as "the assistant", "la IA", "el bot") and goes on to say
what it does or is, is about the character and is refused. Without a verb list: the word after
the character only has to be one that can follow a subject (not a preposition, a conjunction
or punctuation, as in "the keeper at the zoo", "el detective de la serie", "Koldo y yo").
Summary claims are not held to this: the shared story is full of the character's deeds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from memory.integrity.agents import PLURAL_AGENTS
from memory.integrity.normalise import skeleton

# The assistant by kind. Not "the character", "the model" or "the narrator": a user tells of
# books, shows and catwalks, where those are someone else.
_GENERIC = (
    r"(?:ai|a\.i\.|assistant|bot|chatbot|language model|llm|ia|asistente"
    r"|inteligencia artificial)"
)
# Where a clause opens: the start or a clause mark (then the character by its bare name, or a
# determiner and a noun), or a conjunction (then only a determiner and a noun: "Audrey and
# Andrew adopted a puppy" has the user in its subject too).
_MARK = r"(?:^|[.;:!?¿¡,—–(\[\]•·☐☑✓✔*=«“\"-]\s*)"
_CONJUNCTION = (
    r"\b(?:and|but|so|that|where|when|if|because|once|now that|y|pero|asi que|que|donde|cuando|si"
    r"|porque|ahora que)\s+"
)
_POINTS = r"(?:(?:the|this|that|el|la|este|esta|ese|esa)\s+)"
# Assistants in the plural are this one too ("los bots nos responden", "chatbots must answer
# me"): with or without a determiner, none of them is a subject in a fact about the user.
_PLURAL = rf"(?:(?:the|these|those|los|las|estos|estas|esos|esas)\s+)?{PLURAL_AGENTS}"
# Words that can follow a noun without it being a subject: prepositions, conjunctions,
# relatives, and nouns that make a longer noun phrase ("detective novels").
_NOT_A_PREDICATE = (
    r"(?:of|in|at|on|from|for|with|by|to|about|who|that|which|and|or|but|de|del|en|con|por"
    r"|para|sobre|que|quien|y|o|e|u|pero|a|al|como|as|like|novels?|novelas?|series|movies?"
    r"|films?|peliculas?|shows?|books?|libros?|games?|juegos?"
    # an assistant by trade: "the assistant manager", "la asistente social"
    r"|manager|coach|director|professor|teacher|editor|principal|chef|referee|producer"
    r"|social|personal|dental|medica|medico|tecnico|tecnica)\b"
)


@lru_cache(maxsize=64)  # one entry per character: its names, not any memory's text
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    named = "|".join(re.escape(skeleton(n)) for n in names if len(skeleton(n)) >= 3)
    pointed = f"{_POINTS}(?:{_GENERIC}|{named})" if named else f"{_POINTS}{_GENERIC}"
    pointed = f"(?:{pointed}|{_PLURAL})"
    bare = f"|{named}" if named else ""
    subject = f"(?:{_MARK}(?:{pointed}{bare})|{_CONJUNCTION}{pointed})"
    return re.compile(rf"{subject}\s+(?!{_NOT_A_PREDICATE})[a-z]\w*")


def character_subject(text: str, names: Sequence[str]) -> re.Match[str] | None:
    """The clause of ``text`` (a skeleton) that opens with the character as its subject."""
    return _pattern(tuple(names)).search(text)


@lru_cache(maxsize=64)
def _named(names: tuple[str, ...]) -> re.Pattern[str] | None:
    named = "|".join(re.escape(skeleton(n)) for n in names if len(skeleton(n)) >= 3)
    return re.compile(rf"\b(?:{named})\s+(?!{_NOT_A_PREDICATE})[a-z]\w*") if named else None


def character_subjects(text: str, names: Sequence[str]) -> list[re.Match[str]]:
    """Every clause of ``text`` (a skeleton) that opens with the character as its subject, and
    every other place its name is followed by a predicate ("that night Koldo vowed"): a story
    puts the subject after a time or a place without a comma."""
    found = list(_pattern(tuple(names)).finditer(text))
    named = _named(tuple(names))
    return found + (list(named.finditer(text)) if named else [])
