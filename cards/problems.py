"""How a broken character file is reported: per file, every field, and for a misspelt key the
field it was probably meant to be (as the `.env` check in bot/config.py does)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class FileProblems:
    """Everything wrong with one file, each problem naming its field."""

    path: str
    problems: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.path}: {'; '.join(self.problems)}"


class CharacterFileError(Exception):
    """One or more character files are invalid; the message says which file and field, and
    `files` holds the problems file by file."""

    def __init__(self, message: str, files: Sequence[FileProblems] = ()) -> None:
        super().__init__(message)
        self.files = tuple(files)

    @classmethod
    def of(cls, path: object, *problems: str) -> CharacterFileError:
        found = FileProblems(str(path), problems)
        return cls(str(found), (found,))

    @classmethod
    def of_files(cls, files: Sequence[FileProblems]) -> CharacterFileError:
        return cls("\n".join(str(f) for f in files), files)


def describe(
    error: ValidationError, fields_at: Callable[[tuple[str, ...]], Sequence[str]]
) -> list[str]:
    """One line per problem: "field 'identity.trad': Extra inputs are not permitted (did you
    mean 'trade'?)". `fields_at` gives the keys allowed where a misspelt one was found."""
    lines = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        line = f"field '{where}': {problem['msg']}"
        if problem["type"] == "extra_forbidden" and problem["loc"]:
            parent = tuple(str(p) for p in problem["loc"][:-1] if not isinstance(p, int))
            close = difflib.get_close_matches(str(problem["loc"][-1]), fields_at(parent), n=1)
            line += f" (did you mean '{close[0]}'?)" if close else ""
        lines.append(line)
    return lines
