"""The record of what each mutant's run saw last time (tests/mutants/killers.json).

tests/mutants/run.py runs a mutant's recorded killer first, one node id instead of whole test
files, and its named tests only when the record is missing, unusable or no longer kills. The
record is a shortcut, never evidence: a mutant counts as killed only by a test that failed on
it in this run, and every killing test must still pass on the unmutated code (the baseline).
So a stale record costs time, never correctness. It also lists the slow mutants (their kill
took minutes: a test waiting out its patience for what the mutant prevents), which the run
starts first.

The file holds {"killers": {mutant name: node id}, "slow": [mutant names]}, sorted, one entry
a line, so that a refreshed record makes a small diff. Plain Python, standard library only,
like run.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

RECORD = Path(__file__).resolve().parent / "killers.json"


@dataclass(frozen=True)
class Record:
    killers: Mapping[str, str] = field(default_factory=dict)
    slow: frozenset[str] = frozenset()


def load_record(path: Path = RECORD) -> Record:
    """The record as it is on disk; an absent or unreadable file is an empty record (the run
    then takes every mutant's named tests, as without a record)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Record()
    if not isinstance(data, dict):
        return Record()
    found = data.get("killers")
    slow = data.get("slow")
    return Record(
        killers={
            str(name): node
            for name, node in (found.items() if isinstance(found, dict) else ())
            if isinstance(node, str)
        },
        slow=frozenset(str(name) for name in (slow if isinstance(slow, list) else ())),
    )


def inside(node: str, named: str) -> bool:
    """Whether `node` is the named test file or node id, or a test inside it."""
    return node == named or node.startswith((named + "::", named + "["))


def usable_killer(node: str | None, tests: Iterable[str]) -> str | None:
    """The recorded killer when it is one test inside the mutant's named tests. A record that
    names any other test is ignored, or a mutant could be "killed" by a test it does not name;
    a whole file is no shortcut (the named tests are run when the killer does not kill)."""
    if not node or "::" not in node:
        return None
    return node if any(inside(node, named) for named in tests) else None


def refreshed(
    old: Record, seen: Mapping[str, str | None], slow: Iterable[str], names: Iterable[str]
) -> Record:
    """The record after a run: what this run saw for the mutants it ran (`seen`: the node id
    that killed each, or None when none did or pytest named none; `slow`: those it ran that
    were slow), the old record for the mutants it did not run (`--only`), and nothing for
    names that no list holds any more."""
    known = set(names)
    kept = {name: node for name, node in old.killers.items() if name in known - set(seen)}
    kept |= {name: node for name, node in seen.items() if node and name in known}
    still_slow = {name for name in old.slow if name in known - set(seen)}
    return Record(
        killers=dict(sorted(kept.items())),
        slow=frozenset(still_slow | (set(slow) & known)),
    )


def save_record(record: Record, path: Path = RECORD) -> None:
    data = {"killers": dict(sorted(record.killers.items())), "slow": sorted(record.slow)}
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
