"""The character's sheet and lore as named fields: what a proposal may contradict, and how code
tells that it does.

Each field has a name the model is shown and must answer with (`identity.age`, `traits.2`,
`lore.harbour`); code checks the name exists and that the proposal's values differ from the
field's. Beside what the model says, code looks for a contradiction itself: a proposal and a
field that speak of the same subject (a content word in common that is not a name; for the
age, an age the proposal states) and hold different values (numbers, or names), neither set
within the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cards.character import Character
from memory.canon.words import fold, names_in, words

_NUMBER = re.compile(r"\d+")
# How a proposal states an age, in the two languages characters are written in: the one
# identity field whose subject is a number with no other word in common with the sheet.
_AGE = re.compile(
    r"\b(\d{1,3})\s+(?:años|years?\s+old)\b|\b(?:age|aged|edad)\D{0,12}(\d{1,3})\b", re.I
)
# Shorter words say too little of a subject to call two texts about the same thing.
SUBJECT_MIN = 4


@dataclass(frozen=True)
class SheetField:
    name: str
    value: str

    @property
    def line(self) -> str:
        """What `contradicts` holds: the field and what the sheet says in it."""
        return f"{self.name}: {self.value}"


def sheet_fields(character: Character) -> dict[str, SheetField]:
    """Every field of the sheet and lore a proposal could contradict, by name, in sheet order."""
    found: list[SheetField] = []
    identity = character.identity
    for key in ("age", "trade", "place", "description"):
        value = getattr(identity, key)
        if value not in (None, ""):
            found.append(SheetField(f"identity.{key}", " ".join(str(value).split())))
    for group in ("traits", "does_not_know"):
        for index, item in enumerate(getattr(character, group), start=1):
            found.append(SheetField(f"{group}.{index}", " ".join(item.split())))
    for page in character.lore:
        text = " ".join(f"{page.title}. {page.description} {page.content}".split())
        found.append(SheetField(f"lore.{page.slug}", text))
    return {field.name: field for field in found}


def sheet_vocabulary(character: Character) -> set[str]:
    """Every word of the sheet and lore, folded: the character's own world."""
    texts = [f.value for f in sheet_fields(character).values()]
    texts += [character.name, *character.names_in_memory(), *character.aliases]
    return {w for text in texts for w in words(text)}


def _values(text: str, own: set[str]) -> tuple[set[str], set[str]]:
    """The numbers and the names in `text` (the character's own names left out)."""
    return set(_NUMBER.findall(text)), names_in(text) - own


def _subject_words(text: str) -> set[str]:
    """The words that say what a text is about: not names, not short."""
    names = names_in(text)
    return {w for w in words(text) if len(w) >= SUBJECT_MIN and w not in names and not w.isdigit()}


def values_differ(proposal: str, field: SheetField, own: set[str]) -> bool:
    """The proposal holds a value (a number, a name) the field does not, while the field holds
    one of the same kind the proposal does not: it says otherwise, not more. An age is the
    number the proposal states as one."""
    if field.name == "identity.age":
        ages = {a or b for a, b in _AGE.findall(proposal)}
        return bool(ages) and ages != set(_NUMBER.findall(field.value))
    numbers, names = _values(proposal, own)
    field_numbers, field_names = _values(field.value, own)
    for mine, theirs in ((numbers, field_numbers), (names, field_names)):
        if mine and theirs and (mine - theirs) and (theirs - mine):
            return True
    return False


def restates(proposal: str, field: SheetField) -> bool:
    """Every word of the field is in the proposal: it says what the sheet says."""
    said = set(words(proposal))
    return set(words(field.value)) <= said


def speaks_of(proposal: str, field: SheetField) -> bool:
    """The proposal is about the field's subject: a subject word in common (an age, for the
    age, stated as one)."""
    if field.name == "identity.age":
        return bool(_AGE.search(proposal))
    return bool(_subject_words(proposal) & _subject_words(field.value))


def own_names(character: Character) -> set[str]:
    return {fold(n) for name in character.names_in_scene() for n in name.split()}


def confirms(proposal: str, field: SheetField, character: Character) -> bool:
    """The model's word that the proposal contradicts `field`, checked: it speaks of the
    field's subject and says it otherwise (other values; or, where neither holds a number or
    a name, words the field does not have)."""
    if not speaks_of(proposal, field):
        return False
    own = own_names(character)
    if values_differ(proposal, field, own):
        return True
    numbers, names = _values(proposal, own)
    field_numbers, field_names = _values(field.value, own)
    if numbers | names | field_numbers | field_names:
        return False  # values to compare, and none differ: the same thing said again
    return not set(words(proposal)) - own <= set(words(field.value))


def contradicted_field(
    proposal: str, fields: dict[str, SheetField], character: Character
) -> SheetField | None:
    """The first field the proposal speaks of with other values, found by code alone."""
    own = own_names(character)
    for field in fields.values():
        if speaks_of(proposal, field) and values_differ(proposal, field, own):
            return field
    return None
