"""The pieces the command registry (bot/registry.py) is written with: a command's names in
Spanish and English, its arguments and its handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from bot.answers import Answer, Caller
from bot.command_surface import CommandSurface

Handler = Callable[[CommandSurface, Caller, list[str]], Awaitable[Answer]]
ArgKind = Literal["text", "int", "choice", "character"]


@dataclass(frozen=True)
class Words:
    """One wording per language."""

    es: str
    en: str

    def get(self, language: str) -> str:
        return self.en if language == "en" else self.es


@dataclass(frozen=True)
class Arg:
    key: str  # the option's name on Discord (Spanish; Words.en is its English localisation)
    names: Words
    help: Words
    kind: ArgKind = "text"
    choices: tuple[str, ...] = ()
    rest: bool = False  # on text platforms, takes the rest of the line
    # The choices a usage line shows in each language, when they are words of a language
    # (`choices` then holds both languages' words, all accepted).
    shown: Words | None = None
    optional: bool = False  # may be left out (the handler has a default)


@dataclass(frozen=True)
class Command:
    key: str  # "memoria.ver": stable, language-free
    names: Words
    help: Words
    handler: Handler | None = None
    args: tuple[Arg, ...] = ()
    aliases: tuple[str, ...] = ()
    admin: bool = False
    public: bool = False  # on Discord, answered visibly in the channel (not ephemeral)
    subcommands: tuple[Command, ...] = ()
    default: str | None = None  # the subcommand run when none is named
    implicit: str | None = None  # the subcommand run when the first word names none

    @property
    def all_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.names.es, self.names.en, *self.aliases)))

    def named(self, word: str) -> Command | None:
        folded = word.casefold()
        return next((c for c in self.subcommands if folded in c.all_names), None)

    def child(self, key: str) -> Command:
        return next(c for c in self.subcommands if c.key == key)

    def leaves(self) -> Iterator[Command]:
        if not self.subcommands:
            yield self
        for sub in self.subcommands:
            yield from sub.leaves()


def sub(
    key: str,
    es: str,
    en: str,
    help_es: str,
    help_en: str,
    handler: Handler,
    *args: Arg,
    admin: bool = False,
    public: bool = False,
) -> Command:
    return Command(
        key, Words(es, en), Words(help_es, help_en), handler, args, admin=admin, public=public
    )
