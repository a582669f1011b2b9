"""The lists of mutants, tests/mutants/*.toml (their format: tests/mutants/run.py), the
problems that make an entry unusable, and the report of a run's outcomes. Plain Python,
standard library only, like run.py."""

from __future__ import annotations

import itertools
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


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | broken | timeout
    seconds: float
    detail: str = ""
    # record: the recorded killer killed it; named: no usable record, the named tests ran;
    # fallback: the recorded killer did not kill, the named tests ran after it
    how: str = "named"


def spread(outcomes: list[Outcome]) -> list[str]:
    """Where the time went: the per-mutant seconds, and how each mutant was decided."""
    seconds = sorted(o.seconds for o in outcomes) or [0.0]
    edges = (0, 1, 2, 5, 10, 30, 120, float("inf"))
    buckets = [
        f"{low:g}-{high:g} s: {sum(low <= s < high for s in seconds)}"
        for low, high in itertools.pairwise(edges)
    ]
    how = {name: sum(o.how == name for o in outcomes) for name in ("record", "named", "fallback")}
    return [
        f"per mutant: median {seconds[len(seconds) // 2]:.1f} s, 90th percentile "
        f"{seconds[int(0.9 * len(seconds))]:.1f} s, max {seconds[-1]:.1f} s, "
        f"sum {sum(seconds):.0f} s;  " + "  ".join(buckets),
        f"decided by the recorded killer: {how['record']}; by the named tests: {how['named']} "
        f"(no usable record) + {how['fallback']} (the recorded killer did not kill)",
    ]


def report(outcomes: list[Outcome], wall: float) -> bool:
    """Print the table and every survivor; True when every mutant was killed."""
    print()
    print(f"{'status':8}  {'secs':>5}  {'how':8}  {'list':12}  mutant")
    for o in outcomes:
        print(f"{o.status:8}  {o.seconds:5.1f}  {o.how:8}  {o.mutant.source:12}  {o.mutant.name}")
    bad = [o for o in outcomes if o.status in ("survived", "broken")]
    killed = sum(o.status in ("killed", "timeout") for o in outcomes)
    print()
    for line in spread(outcomes):
        print(line)
    print(f"\n{killed} of {len(outcomes)} mutants killed in {wall:.0f} s")
    for o in bad:
        print(f"\n{o.status.upper()}: {o.mutant.name} ({o.mutant.source})")
        print(f"  {o.mutant.file}: {o.mutant.find!r} -> {o.mutant.replace!r}")
        print(f"  tests: {' '.join(o.mutant.tests)}")
        if o.detail:
            print("  " + o.detail.replace("\n", "\n  "))
    return not bad
