"""`companion characters list` and `lint`, and the line that says who new users get.

Both read every file on its own: a broken file is reported (every problem, naming the file and
the field) and makes the exit status 1, but never hides the other characters."""

from __future__ import annotations

import sys
from pathlib import Path

from bot.config import Settings
from bot.texts import LANGUAGES
from cards.character import CharacterBook, FileProblems, FolderRead, read_folder
from cards.lint import LintWarning, lint_character, lint_lore


def default_line(settings: Settings, folder: Path | None = None) -> str:
    """Who a new user talks to, and how to pin it: one line for import and lint."""
    read = read_folder(folder or settings.characters_dir)
    if not read.characters:
        return "no valid character: new users have no one to talk to"
    book = CharacterBook.of(read, settings.characters_dir)
    setting = settings.default_character
    if setting and book.get(setting):
        return f"default character for new users: {setting} (DEFAULT_CHARACTER)"
    chosen = book.default_id
    why = (
        f"DEFAULT_CHARACTER={setting} names no character, so"
        if setting
        else "DEFAULT_CHARACTER is unset, so"
    )
    return (
        f"default character for new users: {chosen} ({why} the first hand-written id "
        f"alphabetically; imported cards never take over); pin it with "
        f"DEFAULT_CHARACTER={chosen} in .env"
    )


def book_of_valid_files(folder: Path) -> CharacterBook:
    """The folder's valid characters, for commands that need only some of them (`chat`,
    `memory`, `characters export`): each broken file is one warning on standard error."""
    read = read_folder(folder)
    for found in read.broken:
        print(f"companion: warning: skipping the broken file {found}", file=sys.stderr)
    return CharacterBook.of(read, folder)


def print_broken(broken: tuple[FileProblems, ...]) -> None:
    """Every broken file, each problem on its own line, on standard error."""
    for found in broken:
        print(f"error: {found.path}:", file=sys.stderr)
        for problem in found.problems:
            print(f"  - {problem}", file=sys.stderr)


def characters_command(settings: Settings, action: str) -> int:
    read = read_folder(settings.characters_dir)
    book = CharacterBook.of(read, settings.characters_dir) if read.characters else None
    if action == "list":
        for character in book.all() if book else []:
            print(
                f"{character.id}\t{character.name}\t{character.language}\t{character.source_path}"
            )
    else:
        _lint(settings, read, book)
    print_broken(read.broken)
    if read.broken:
        print(
            f"companion: {len(read.broken)} character file(s) are broken (above); `run` "
            "refuses to start until they are fixed",
            file=sys.stderr,
        )
    return 1 if read.broken or book is None else 0


def _lint(settings: Settings, read: FolderRead, book: CharacterBook | None) -> None:
    characters = book.all() if book else []
    warnings = [w for c in characters for w in lint_character(c, languages=LANGUAGES)]
    for character in characters:
        report, lore_warnings = lint_lore(character, settings.lore_page_cap_tokens)
        for line in report:
            print(line)
        warnings += lore_warnings
    warnings += _default_warnings(settings, book)
    for warning in warnings:
        print(f"warning: {warning}")
    broken = f", {len(read.broken)} broken file(s)" if read.broken else ""
    print(f"{len(characters)} character(s), {len(warnings)} warning(s){broken}")


def _default_warnings(settings: Settings, book: CharacterBook | None) -> list[LintWarning]:
    """DEFAULT_CHARACTER unset with a choice to make, or naming no character."""
    if book is None:
        return []
    setting = settings.default_character
    if setting and book.get(setting):
        return []
    if not setting and len(book.ids()) < 2:
        return []
    return [LintWarning("settings", "DEFAULT_CHARACTER", default_line(settings))]
