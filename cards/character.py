"""Characters: one YAML file each, validated so that a broken file names its file and field."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from cards.lore_files import LoreFileError, LorePage, read_pages
from cards.problems import CharacterFileError, FileProblems, describe
from cards.text import expand_macros, has_macro

__all__ = ["Character", "CharacterBook", "CharacterFileError", "FileProblems", "load_character"]

RetrievalMode = Literal["auto", "tool", "off"]
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,40}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Identity(_Strict):
    # Optional because an imported card states none of them: a missing value is left out of
    # the prompt (lint warns), never replaced by a placeholder the model would read as a fact.
    age: int | str | None = None
    trade: str | None = Field(default=None, min_length=1)
    place: str | None = Field(default=None, min_length=1)
    description: str = ""


Language = Literal["es", "en"]


class OpeningMessage(_Strict):
    """One pinned message; `text` is one string, or one per language (`{es: ..., en: ...}`)
    so that each user is greeted in their own language when the character has it."""

    role: Literal["user", "assistant"] = "assistant"
    text: str | dict[Language, str]

    @field_validator("text")
    @classmethod
    def _no_blank_text(cls, text: str | dict[str, str]) -> str | dict[str, str]:
        texts = {"": text} if isinstance(text, str) else text
        if not texts:
            raise ValueError("give the text, or one text per language (es, en)")
        if any(not t.strip() for t in texts.values()):
            raise ValueError("the text must not be empty")
        return text if isinstance(text, str) else {k: v.strip() for k, v in text.items()}

    def languages(self, default: str) -> tuple[str, ...]:
        """The languages this message is written in (a plain string: the character's)."""
        return (default,) if isinstance(self.text, str) else tuple(self.text)

    def text_in(self, language: str, default: str) -> str:
        """The text in `language`, else in the character's language `default`, else the
        first one written."""
        if isinstance(self.text, str):
            return self.text
        return self.text.get(language) or self.text.get(default) or next(iter(self.text.values()))

    def languages_texts(self) -> tuple[str, ...]:
        return (self.text,) if isinstance(self.text, str) else tuple(self.text.values())

    def mapped(self, change: Callable[[str, str], str], default: str) -> OpeningMessage:
        """The message with `change(text, its language)` applied to each of its texts."""
        if isinstance(self.text, str):
            return self.model_copy(update={"text": change(self.text, default)})
        texts = {k: change(v, k) for k, v in self.text.items()}
        return self.model_copy(update={"text": texts})


class Reminder(_Strict):
    tone: str = Field(min_length=1, description="default tone, until the summary records another")
    main_rule: str = Field(min_length=1)


class Character(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")
    name: str = Field(min_length=1, max_length=80)
    language: Language = "en"
    # Who the character is for: "mature" speaks only where adults are (bot/community.py).
    rating: Literal["general", "mature"] = "general"
    identity: Identity
    traits: tuple[str, ...] = Field(default=(), max_length=8)  # lint warns outside 3-5
    speech_rules: tuple[str, ...] = Field(min_length=1, max_length=6)
    does_not_know: tuple[str, ...] = ()
    opening_messages: tuple[OpeningMessage, ...] = ()
    reminder: Reminder
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    retrieval: RetrievalMode = "auto"
    # "El Viaje" (memory/journey/): the chronicle of each private thread, written after each
    # conversation and shown in block 2. Off, say why in `journey_reason` (lint asks for it).
    journey: bool = True
    journey_reason: str = ""
    # Canon proposals (memory/canon/): after each conversation, what the character
    # established about itself or its world, proposed to the admin. `canon: false` opts out
    # (no call is made); say why in `canon_reason` (lint asks for it).
    canon: bool = True
    canon_reason: str = ""
    # Scenes (memory/scene/): other names people call the character by in a group, and how
    # likely it is to answer a message that names nobody (0 never ... 1 often).
    aliases: tuple[str, ...] = Field(default=(), max_length=8)
    talkativeness: float = Field(default=0.5, ge=0.0, le=1.0)
    # Lore pages: the prompt carries only their index; `read_lore` reads a page. Written here
    # under `lore:` or as Markdown files in a folder `<file stem>.lore/` beside the YAML.
    lore: tuple[LorePage, ...] = ()
    # What an imported character card carries that the prompt does not use (example dialogue,
    # alternate greetings, the card's system_prompt and post_history_instructions, lore book
    # settings, unknown extensions): never read into the prompt, kept only so that
    # `companion characters export` writes it back (see cards/sillytavern.py).
    card_passthrough: dict[str, Any] = Field(default_factory=dict)
    source_path: str = Field(default="", exclude=True)
    # The character as its file wrote it, when card macros ({{char}}, {{user}}) were expanded
    # for the prompt: export and the YAML writer give the macros back (see `as_written`).
    _as_written: Character | None = PrivateAttr(default=None)

    def names_in_memory(self) -> tuple[str, ...]:
        """What a memory could call the character when it speaks to it: its full and first
        name and the nouns of its trade ("the keeper", "el detective" for a "retired
        lighthouse keeper" and a "detective privado"). The memory gate refuses a memory that
        makes any of them its subject (memory/integrity/gate.py)."""
        first = self.name.split()[0] if self.name.split() else self.name
        role = re.split(r"[,;(/]", self.identity.trade or "", maxsplit=1)[0]
        nouns = [w for w in re.findall(r"[^\W\d_]{4,}", role) if not _QUALIFIER.search(w)]
        return tuple(dict.fromkeys((self.name, first, *nouns)))

    def names_in_scene(self) -> tuple[str, ...]:
        """What people in a group call the character: its name, first name and aliases."""
        first = self.name.split()[0] if self.name.split() else self.name
        return tuple(dict.fromkeys((self.name, first, *self.aliases)))

    def as_written(self) -> Character:
        """The character with its card macros unexpanded, as its file (or card) holds it."""
        return self._as_written or self

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy._as_written = None  # the written form no longer matches the changed fields
        return copy

    @field_validator("retrieval", mode="before")
    @classmethod
    def _off_is_not_false(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` as false: `retrieval: off` means the mode, not a bool.
        return "off" if value is False else value

    @field_validator("traits", "speech_rules", "does_not_know", "aliases")
    @classmethod
    def _no_blank_items(cls, items: tuple[str, ...]) -> tuple[str, ...]:
        if any(not item.strip() for item in items):
            raise ValueError("items must not be empty")
        return items


# Words of a trade that qualify its noun ("retired", "privado", "former"), not name it.
_QUALIFIER = re.compile(r"(?:ed|ad[oa]s?|id[oa]s?)$|^(?:former|antigu[oa]|senior|junior)$", re.I)


def _fields_at(parent: tuple[str, ...]) -> list[str]:
    """The keys a character file allows at `parent` (("identity",) -> age, trade...)."""
    nested: dict[tuple[str, ...], type[BaseModel]] = {
        (): Character,
        ("identity",): Identity,
        ("opening_messages",): OpeningMessage,
        ("reminder",): Reminder,
    }
    model = nested.get(parent)
    if model is None:
        return []
    return [name for name, field in model.model_fields.items() if not field.exclude]


def load_character(path: Path) -> Character:
    """Parse and validate one file; every error names the file and the field."""
    try:
        with path.open(encoding="utf-8") as stream:  # a syntax error's mark names the file
            raw = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise CharacterFileError.of(path, f"not valid YAML: {exc}") from exc
    except OSError as exc:
        raise CharacterFileError.of(path, f"cannot be read: {exc}") from exc
    if not isinstance(raw, dict):
        raise CharacterFileError.of(path, "expected a mapping of fields at the top level")
    raw.setdefault("id", path.stem)
    raw["source_path"] = str(path)
    try:
        character = Character.model_validate(raw)
    except ValidationError as exc:
        raise CharacterFileError.of(path, *describe(exc, _fields_at)) from exc
    return with_macros_expanded(_with_lore_files(character, path))


def with_macros_expanded(character: Character) -> Character:
    """{{char}} and {{user}} replaced for the prompt; `as_written()` keeps the original.

    Cards are written with these macros, and a card's file keeps them so that export gives
    back what was imported; only what reaches the model is expanded.
    """
    name = _macro_name(character)

    def expand(text: str, language: str | None = None) -> str:
        return expand_macros(text, name, language or character.language)

    texts = [
        character.identity.description, *character.traits, *character.speech_rules,
        *character.does_not_know,
        *(t for m in character.opening_messages for t in m.languages_texts()),
        character.reminder.tone, character.reminder.main_rule,
        *(t for page in character.lore for t in (page.title, page.description, page.content)),
    ]  # fmt: skip
    if not any(has_macro(text) for text in texts):
        return character
    expanded = character.model_copy(
        update={
            "identity": character.identity.model_copy(
                update={"description": expand(character.identity.description)}
            ),
            "traits": tuple(expand(t) for t in character.traits),
            "speech_rules": tuple(expand(r) for r in character.speech_rules),
            "does_not_know": tuple(expand(x) for x in character.does_not_know),
            "opening_messages": tuple(
                m.mapped(expand, character.language) for m in character.opening_messages
            ),
            "reminder": character.reminder.model_copy(
                update={
                    "tone": expand(character.reminder.tone),
                    "main_rule": expand(character.reminder.main_rule),
                }
            ),
            "lore": tuple(
                replace(
                    page,
                    title=expand(page.title),
                    description=expand(page.description),
                    content=expand(page.content),
                )
                for page in character.lore
            ),
        }
    )
    expanded._as_written = character
    return expanded


def opening_messages_for(
    character: Character, user_name: str | None, language: str | None = None
) -> tuple[OpeningMessage, ...]:
    """The pinned opening messages as one user sees them, each one plain text: in `language`
    when the character wrote it in that language (else in its own), and a card's {{user}} is
    that user's display name (the loaded character says "the user", for want of one)."""
    chosen, own = language or character.language, character.language
    written = character.as_written().opening_messages
    if not user_name or not any(has_macro(t) for m in written for t in m.languages_texts()):
        return tuple(m.model_copy(update={"text": m.text_in(chosen, own)}) for m in
                     character.opening_messages)  # fmt: skip
    name = _macro_name(character)
    return tuple(
        m.model_copy(update={"text": expand_macros(m.text_in(chosen, own), name, own, user_name)})
        for m in written
    )


def _macro_name(character: Character) -> str:
    return str(character.card_passthrough.get("nickname") or "").strip() or character.name


def _with_lore_files(character: Character, path: Path) -> Character:
    """Add the Markdown pages of `<stem>.lore/` beside the YAML; every slug must be unique and
    simple, because the slugs are the enum of read_lore's schema."""
    folder = path.parent / f"{path.stem}.lore"
    try:
        pages = [*character.lore, *read_pages(folder)]
    except LoreFileError as exc:
        raise CharacterFileError.of(path, str(exc)) from exc
    seen: set[str] = set()
    problems = []
    for page in pages:
        if not _SLUG.match(page.slug):
            problems.append(
                f"field 'lore': page slug '{page.slug}' must be "
                "lowercase letters, digits, '_' or '-' (at most 41)"
            )
        if page.slug in seen:
            problems.append(
                f"field 'lore': page '{page.slug}' is defined twice (in the YAML and in {folder})"
            )
        seen.add(page.slug)
    if problems:
        raise CharacterFileError.of(path, *problems)
    return character.model_copy(update={"lore": tuple(pages)}) if pages else character


@dataclass(frozen=True)
class FolderRead:
    """A characters folder as it reads now: the valid characters, and every broken file."""

    characters: dict[str, Character]
    broken: tuple[FileProblems, ...]


def read_folder(folder: Path) -> FolderRead:
    """Every file of the folder, each on its own: one broken file costs only itself."""
    if not folder.is_dir():
        raise CharacterFileError(f"{folder}: the characters folder does not exist")
    characters: dict[str, Character] = {}
    broken: list[FileProblems] = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        try:
            character = load_character(path)
        except CharacterFileError as exc:
            broken += exc.files or [FileProblems(str(path), (str(exc),))]
            continue
        if character.id in characters:
            first = characters[character.id].source_path
            used = f"field 'id': '{character.id}' is already used by {first}"
            broken.append(FileProblems(str(path), (used,)))
            continue
        characters[character.id] = character
    return FolderRead(characters, tuple(broken))


class CharacterBook:
    """Every character of the folder, all valid, or an error naming every broken file.

    One instance is shared by everything that needs characters, so a live reload
    (`replace_with`) reaches them all at once.
    """

    def __init__(self, characters: dict[str, Character]) -> None:
        self._characters = characters

    def replace_with(self, newer: CharacterBook) -> None:
        """Serve `newer`'s characters from now on (new turns see them; nothing is restarted)."""
        self._characters = dict(newer._characters)

    def name_of(self, character_id: str) -> str:
        character = self._characters.get(character_id)
        return character.name if character else "the character"

    def language_of(self, character_id: str) -> str:
        character = self._characters.get(character_id)
        return character.language if character else "en"

    @classmethod
    def load(cls, folder: Path) -> CharacterBook:
        """The folder's characters; CharacterFileError when any file is broken (`run`)."""
        read = read_folder(folder)
        if read.broken:
            raise CharacterFileError.of_files(read.broken)
        return cls.of(read, folder)

    @classmethod
    def of(cls, read: FolderRead, folder: Path) -> CharacterBook:
        """The valid characters of a read, the broken files left out (lint, list, chat)."""
        if not read.characters:
            raise CharacterFileError(f"{folder}: holds no valid character file (*.yaml)")
        return cls(dict(read.characters))

    def get(self, character_id: str) -> Character | None:
        return self._characters.get(character_id)

    def ids(self) -> list[str]:
        return sorted(self._characters)

    def all(self) -> list[Character]:
        return [self._characters[key] for key in self.ids()]

    @property
    def default_id(self) -> str:
        """Who new users get when DEFAULT_CHARACTER is unset: the first id, alphabetically,
        of the characters written by hand; an imported card (it carries its card's fields in
        `card_passthrough`) never takes over silently. Only imported ones: the first of them."""
        written = [c.id for c in self.all() if not c.card_passthrough]
        return (written or self.ids())[0]
