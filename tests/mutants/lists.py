"""The lists of mutants, tests/mutants/*.toml (their format: tests/mutants/run.py), and the
problems that make an entry unusable. Plain Python, standard library only, like run.py."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LISTS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    source: str  # the list it comes from, e.g. "rules.toml"


def load_mutants() -> tuple[list[Mutant], list[str]]:
    """Every entry of every list, and the problems that make an entry unusable (stale)."""
    mutants: list[Mutant] = []
    problems: list[str] = []
    for path in sorted(LISTS.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            problems.append(f"{path.name}: not valid TOML: {error}")
            continue
        for index, entry in enumerate(data.get("mutant", []), start=1):
            where = f"{path.name} entry {index} ({entry.get('name', 'no name')!r})"
            try:
                mutant = Mutant(
                    name=str(entry["name"]),
                    file=str(entry["file"]),
                    find=str(entry["find"]),
                    replace=str(entry["replace"]),
                    tests=tuple(str(t) for t in entry["tests"]),
                    source=path.name,
                )
            except KeyError as missing:
                problems.append(f"{where}: missing key {missing}")
                continue
            problems += [f"{where}: {p}" for p in entry_problems(mutant)]
            mutants.append(mutant)
    names = [m.name for m in mutants]
    problems += [
        f"two entries are named {n!r}" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    return mutants, problems


def entry_problems(mutant: Mutant) -> list[str]:
    target = REPO / mutant.file
    if not target.is_file():
        return [f"file {mutant.file} does not exist"]
    found = target.read_text(encoding="utf-8").count(mutant.find)
    problems = []
    if found != 1:
        problems.append(f"`find` occurs {found} times in {mutant.file} (must be exactly once)")
    if mutant.find == mutant.replace:
        problems.append("`replace` equals `find`: the mutant changes nothing")
    if not mutant.tests:
        problems.append("no test files named")
    problems += [
        f"test file {t} does not exist"
        for t in mutant.tests
        if not (REPO / t.split("::")[0]).is_file()
    ]
    return problems
