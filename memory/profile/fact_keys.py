"""The fact-key registry: which facts the profile may hold, and the format of each value.

Keys are never free text. A key the registry does not know is stored as `other` (a short,
stricter value), so a key such as `ignore_all_previous_instructions` can never reach a prompt.
Keys that hold several facts (events, pets, likes...) take a numeric suffix: `event`, `event_2`.
An unknown key falls back by kind: `event` (episodic), `feeling` (emotional), `other`.

Compatibility: facts stored before the registry keep their key in the database (so /memoria,
export and updates still find them), but they are shown to the character under the label of
their registry key (`canonical_key`), which for an unknown key is its kind's fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class ValueFormat(Enum):
    NAME = "a short name"  # 1-4 words of letters: "Ana", "Mikel Etxeberria"
    PRONOUNS = "pronouns"  # "she/her", "él", "elle"
    NUMBER = "a number"  # an age: "34"
    DATE = "a date"  # "1990-05-14", "14 de mayo", "May 14"
    PLACE = "a place name"  # "Bilbao", "Getxo (Bizkaia)"
    ADDRESS = "a form of address"  # "tú", "usted", "informal", or "prefiero que me hables de tú"
    PHRASE = "a short phrase"  # checked in full by memory.integrity.gate


@dataclass(frozen=True)
class FactKey:
    key: str
    format: ValueFormat
    max_len: int
    multi: bool = False  # may hold several facts: key, key_2, key_3...


_KEYS = (
    FactKey("name", ValueFormat.NAME, 40),
    FactKey("preferred_name", ValueFormat.NAME, 40),
    FactKey("pronouns", ValueFormat.PRONOUNS, 20),
    FactKey("age", ValueFormat.NUMBER, 3),
    FactKey("birthday", ValueFormat.DATE, 30),
    FactKey("language", ValueFormat.PHRASE, 60),
    FactKey("form_of_address", ValueFormat.ADDRESS, 60),
    FactKey("city", ValueFormat.PLACE, 60),
    FactKey("country", ValueFormat.PLACE, 60),
    FactKey("hometown", ValueFormat.PLACE, 60),
    FactKey("home", ValueFormat.PHRASE, 100),
    FactKey("job", ValueFormat.PHRASE, 100),
    FactKey("workplace", ValueFormat.PHRASE, 80),
    FactKey("studies", ValueFormat.PHRASE, 100),
    FactKey("partner", ValueFormat.PHRASE, 100),
    FactKey("children", ValueFormat.PHRASE, 120),
    FactKey("family", ValueFormat.PHRASE, 140, multi=True),
    FactKey("friends", ValueFormat.PHRASE, 140, multi=True),
    FactKey("pets", ValueFormat.PHRASE, 100, multi=True),
    FactKey("likes", ValueFormat.PHRASE, 120, multi=True),
    FactKey("dislikes", ValueFormat.PHRASE, 120, multi=True),
    FactKey("hobbies", ValueFormat.PHRASE, 120, multi=True),
    FactKey("interests", ValueFormat.PHRASE, 120, multi=True),
    FactKey("diet", ValueFormat.PHRASE, 100),
    FactKey("health", ValueFormat.PHRASE, 140, multi=True),
    FactKey("routine", ValueFormat.PHRASE, 120, multi=True),
    FactKey("values", ValueFormat.PHRASE, 120, multi=True),
    FactKey("feeling", ValueFormat.PHRASE, 140, multi=True),
    FactKey("fear", ValueFormat.PHRASE, 120, multi=True),
    FactKey("need", ValueFormat.PHRASE, 120, multi=True),
    FactKey("communication_style", ValueFormat.PHRASE, 120),
    FactKey("goal", ValueFormat.PHRASE, 140, multi=True),
    FactKey("event", ValueFormat.PHRASE, 160, multi=True),
    FactKey("other", ValueFormat.PHRASE, 120, multi=True),
)
REGISTRY: dict[str, FactKey] = {k.key: k for k in _KEYS}
OTHER = REGISTRY["other"]

# Common spellings models reach for; anything else unknown becomes `other`.
ALIASES: dict[str, str] = {
    "first_name": "name",
    "full_name": "name",
    "nickname": "preferred_name",
    "languages": "language",
    "birthdate": "birthday",
    "birth_date": "birthday",
    "location": "city",
    "lives_in": "city",
    "occupation": "job",
    "profession": "job",
    "work": "job",
    "employer": "workplace",
    "education": "studies",
    "spouse": "partner",
    "husband": "partner",
    "wife": "partner",
    "boyfriend": "partner",
    "girlfriend": "partner",
    "kids": "children",
    "pet": "pets",
    "dog": "pets",
    "cat": "pets",
    "food": "diet",
    "like": "likes",
    "dislike": "dislikes",
    "hobby": "hobbies",
    "interest": "interests",
    "recent_interest": "interests",
    "mood": "feeling",
    "emotion": "feeling",
    "feelings": "feeling",
    "fears": "fear",
    "needs": "need",
    "goals": "goal",
    "plan": "goal",
}

_SUFFIXED = re.compile(r"^([a-z][a-z_]*?)_([0-9]{1,6})$")
KEY_SYNTAX = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def registry_key(raw: str) -> FactKey | None:
    """The registry entry a key names exactly (with its suffix for multi keys), or None."""
    if raw in REGISTRY:
        return REGISTRY[raw]
    if raw in ALIASES:
        return REGISTRY[ALIASES[raw]]
    match = _SUFFIXED.match(raw)
    if match:
        base = ALIASES.get(match.group(1), match.group(1))
        entry = REGISTRY.get(base)
        if entry is not None and entry.multi:
            return entry
    return None


# An unknown key falls back by the fact's kind: a dated or past happening is an event, an
# emotional fact a feeling, anything else `other`.
_FALLBACK = {"episodic": "event", "emotional": "feeling"}


def spec_of(raw: str, kind: str | None = None) -> FactKey:
    """The registry entry (and so the format rules) a key stands for."""
    return registry_key(raw) or REGISTRY[_FALLBACK.get(kind or "", OTHER.key)]


def canonical_key(raw: str, kind: str | None = None) -> str:
    """The registry key a stored or proposed key is shown under."""
    return spec_of(raw, kind).key


def storage_key(raw: str, taken: set[str], kind: str | None = None) -> str:
    """The key a *new* fact is written under: the registry spelling, with the next free
    suffix for multi keys (so two new pets never overwrite each other)."""
    entry = spec_of(raw, kind)
    exact = raw if registry_key(raw) is not None and raw not in ALIASES else entry.key
    if not entry.multi or exact not in taken:
        return exact
    n = 2
    while f"{entry.key}_{n}" in taken:
        n += 1
    return f"{entry.key}_{n}"


def key_json_schema() -> dict[str, object]:
    """The schema the extraction tool shows the model: the registry's keys, or a multi key
    with a numeric suffix to address one of several stored facts."""
    multi = "|".join(k.key for k in _KEYS if k.multi)
    return {
        "type": "string",
        "anyOf": [
            {"enum": list(REGISTRY)},
            {"pattern": f"^(?:{multi})_[0-9]{{1,6}}$"},
        ],
        "description": "One of the registry's keys; `other` for anything else. Keys marked "
        "multi hold several facts (" + ", ".join(k.key for k in _KEYS if k.multi) + "): "
        "address an existing one by its suffix, e.g. pets_2.",
    }
