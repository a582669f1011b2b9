"""Text rules of the card mapping: macros, language, traits, the derived speech rule.

Kept apart from cards/sillytavern.py so that each heuristic can be read (and tested) on its own.
"""

from __future__ import annotations

import re

# Our own fields ride in a card under `data.extensions.companion` (cards reserve `extensions`
# for application data), so that a card we export imports back without loss.
COMPANION_EXTENSION = "companion"

_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(BOT|USER)>", re.IGNORECASE)
THE_USER = {"en": "the user", "es": "el usuario"}
_SCENARIO = {"en": "Scenario", "es": "Escenario"}

# Frequent words that only one of the two languages has; articles shared by both are left out.
_ES_WORDS = frozenset((
    "el", "la", "los", "las", "que", "de", "y", "en", "un", "una", "es", "por", "con", "para",
    "se", "lo", "su", "del", "al", "muy", "pero", "como", "más", "está", "tiene", "sus", "le",
    "yo", "tú", "eres", "soy",
))  # fmt: skip
_EN_WORDS = frozenset((
    "the", "and", "of", "to", "in", "is", "you", "that", "it", "with", "for", "was", "his",
    "her", "he", "she", "are", "on", "as", "at", "have", "be", "this", "your", "i", "am",
))  # fmt: skip
_AGE = re.compile(
    r"\b(?:age|edad)\s*[:=]?\s*(\d{1,4})\b|\b(\d{1,4})[- ]?(?:years?[- ]old|años de edad)\b",
    re.IGNORECASE,
)
_PERSONALITY_PREFIX = re.compile(r"^[^:\n]{0,40}\b(?:personality|personalidad)\s*:\s*", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+")
_ASTERISKS = re.compile(r"\*[^*\n]{2,}\*")
_QUOTES = re.compile(r"\"[^\"\n]{2,}\"|“[^”\n]{2,}”|«[^»\n]{2,}»")
MAX_TRAITS = 5

_RULES = {
    "en": {
        "both": "Write actions between asterisks and spoken words in double quotes, "
        "as in the greeting.",
        "asterisks": "Write actions and gestures between asterisks and speech as plain text.",
        "quotes": "Put spoken words in double quotes and narrate actions in plain prose.",
        "none": "Speak as {name} would, in the first person.",
    },
    "es": {
        "both": "Escribe las acciones entre asteriscos y lo que dices entre comillas, "
        "como en el saludo.",
        "asterisks": "Escribe las acciones y los gestos entre asteriscos y el habla como "
        "texto normal.",
        "quotes": "Pon lo que dices entre comillas y narra las acciones en prosa sencilla.",
        "none": "Habla como lo haría {name}, en primera persona.",
    },
}


def words(text: str) -> list[str]:
    return text.split()


def expand_macros(text: str, name: str, language: str, user_name: str | None = None) -> str:
    """{{char}} -> the name; {{user}} -> the user's name when known (a greeting pinned for
    one user), else "the user", capitalised where a sentence starts. Other macros
    ({{random}}, {{time}}…) have no meaning outside SillyTavern and stay as they are, where a
    human reviewing the file will see them."""
    user = THE_USER[language]

    def replace(match: re.Match[str]) -> str:
        if (match.group(1) or match.group(2)).lower() in ("char", "bot"):
            return name
        if user_name:
            return user_name
        before = text[: match.start()].rstrip(' \t*"_“«¡¿(')
        starts_sentence = not before or before[-1] in ".!?:\n"
        return user[0].upper() + user[1:] if starts_sentence else user

    return _MACRO.sub(replace, text)


def has_macro(text: str) -> bool:
    return _MACRO.search(text) is not None


def mentions_user(text: str) -> bool:
    return any((m.group(1) or m.group(2)).lower() == "user" for m in _MACRO.finditer(text))


def detect_language(text: str) -> str:
    """'es' or 'en' (the two languages of the prompt labels), by frequent-word counts."""
    tokens = re.findall(r"[a-záéíóúñü]+", text.lower())
    spanish = sum(token in _ES_WORDS for token in tokens)
    english = sum(token in _EN_WORDS for token in tokens)
    return "es" if spanish > english else "en"


def find_age(text: str) -> int | None:
    match = _AGE.search(text)
    return int(match.group(1) or match.group(2)) if match else None


def with_scenario(description: str, scenario: str, language: str) -> str:
    if not scenario:
        return description
    line = f"{_SCENARIO[language]}: {scenario}"
    return f"{description}\n\n{line}" if description else line


def split_scenario(description: str, language: str) -> tuple[str, str]:
    """The inverse of `with_scenario`: (description, scenario)."""
    label = f"{_SCENARIO[language]}: "
    if description.startswith(label):
        return "", description[len(label) :].strip()
    head, found, tail = description.rpartition(f"\n\n{label}")
    return (head.strip(), tail.strip()) if found else (description, "")


def split_traits(personality: str, language: str) -> tuple[list[str], str | None]:
    """Trait candidates and, when they are not usable as traits, a note for a human.

    A list on separate lines is taken line by line (a sheet's traits are short sentences);
    otherwise the text is split on commas and semicolons, which only works for lists of short
    adjectives — prose split on commas would become fragments, so it is kept whole instead.
    """
    text = _PERSONALITY_PREFIX.sub("", personality.strip(), count=1).strip()
    if not text:
        return [], "the card has no personality: write 3 to 5 traits"
    lines = [_BULLET.sub("", line).strip() for line in text.splitlines() if line.strip()]
    if len(lines) >= 2:
        items, limit, most = lines, 25, 8
    else:
        items, limit, most = [part.strip().rstrip(".") for part in re.split(r"[,;]", text)], 6, 99
    items = [item[0].upper() + item[1:] for item in items if item]
    if len(items) == 1 and len(words(items[0])) <= limit:
        return items, None
    if len(items) < 2 or len(items) > most or any(len(words(i)) > limit for i in items):
        return [" ".join(text.split())], (
            "the personality is prose, kept as one trait: rewrite it as 3 to 5 traits"
        )
    if len(items) <= MAX_TRAITS:
        return items, None
    if most == 99:  # a long list of adjectives: grouped so that the sheet keeps 3 to 5 lines
        size, extra = divmod(len(items), MAX_TRAITS)
        groups, start = [], 0
        for index in range(MAX_TRAITS):
            end = start + size + (1 if index < extra else 0)
            groups.append(", ".join([items[start], *(i.lower() for i in items[start + 1 : end])]))
            start = end
        note = f"{len(items)} personality words grouped into {MAX_TRAITS} traits: sharpen them"
        return groups, note
    return items, None


def speech_rule(name: str, style_text: str, language: str) -> tuple[str, bool]:
    """One positive rule from how the greeting and examples are written, and whether anything
    was derived; the voice itself is for a human to write, so nothing more is guessed."""
    rules = _RULES[language]
    asterisks, quotes = _ASTERISKS.search(style_text), _QUOTES.search(style_text)
    if asterisks and quotes:
        return rules["both"], True
    if asterisks:
        return rules["asterisks"], True
    if quotes:
        return rules["quotes"], True
    return rules["none"].format(name=name), False
