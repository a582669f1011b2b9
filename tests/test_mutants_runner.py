"""tests/mutants/run.py: the recorded killer (tests/mutants/killers.json) is a shortcut, never
evidence. A killer that no longer kills falls back to the mutant's named tests, a record naming
a test outside them is ignored, and a survivor still fails the run. One test is a real run of
the runner, on a tiny repository of its own with three mutants (about five seconds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.mutants import killers, run
from tests.mutants.lists import Mutant

REPO = Path(__file__).resolve().parent.parent
RULES = "tests/test_rules.py"


def mutant(tests: tuple[str, ...] = (RULES,), name: str = "a rule broken") -> Mutant:
    return Mutant(name, "rules.py", "return 1", "return 2", tests, "fake.toml")


class FakeHost:
    """Answers each pytest selection with the exit code it is given for it (0 = passed)."""

    def __init__(self, copy: Path, codes: dict[tuple[str, ...], int]) -> None:
        self.copy = copy
        self.codes = codes
        self.ran: list[tuple[str, ...]] = []
        (copy / "rules.py").write_text("def rule():\n    return 1\n", encoding="utf-8")

    def run(self, tests: tuple[str, ...]) -> int:
        self.ran.append(tests)
        assert "return 2" in (self.copy / "rules.py").read_text(encoding="utf-8")
        return self.codes[tests]

    def output(self) -> str:
        return f"FAILED {self.ran[-1][0]} - assert 2 == 1\n" if self.codes[self.ran[-1]] else ""


def test_a_recorded_killer_inside_the_named_tests_is_used() -> None:
    assert killers.usable_killer(f"{RULES}::test_a", [RULES]) == f"{RULES}::test_a"
    assert killers.usable_killer(f"{RULES}::test_a[x]", [f"{RULES}::test_a"])
    assert killers.usable_killer(f"{RULES}::Rules::test_a", [f"{RULES}::Rules"])


def test_a_record_naming_a_test_outside_the_named_tests_is_ignored() -> None:
    assert killers.usable_killer("tests/test_other.py::test_a", [RULES]) is None
    assert killers.usable_killer("tests/test_rules.py_x::test_a", [RULES]) is None
    assert killers.usable_killer(f"{RULES}::test_ab", [f"{RULES}::test_a"]) is None
    assert killers.usable_killer(RULES, [RULES]) is None  # a whole file is no shortcut
    assert killers.usable_killer(None, [RULES]) is None
    record = killers.Record(killers={"a rule broken": "tests/test_other.py::test_a"})
    assert run.usable(mutant(), record) is None


def test_a_killer_that_kills_decides_alone(tmp_path: Path) -> None:
    killer = f"{RULES}::test_a"
    host = FakeHost(tmp_path, {(killer,): 1})
    outcome = run.run_one(mutant(), host, killer)
    assert (outcome.status, outcome.how, host.ran) == ("killed", "record", [(killer,)])
    assert run.killer_node(outcome) == killer
    assert (tmp_path / "rules.py").read_text(encoding="utf-8").endswith("return 1\n")


def test_a_killer_that_no_longer_kills_falls_back_to_the_named_tests(tmp_path: Path) -> None:
    killer = f"{RULES}::test_a"
    host = FakeHost(tmp_path, {(killer,): 0, (RULES,): 1})
    outcome = run.run_one(mutant(), host, killer)
    assert (outcome.status, outcome.how, host.ran) == ("killed", "fallback", [(killer,), (RULES,)])

    broken = FakeHost(tmp_path, {(killer,): 4, (RULES,): 0})  # 4: pytest found no such test
    outcome = run.run_one(mutant(), broken, killer)
    assert (outcome.status, outcome.how) == ("survived", "fallback")


def test_the_refreshed_record_keeps_what_this_run_did_not_see() -> None:
    old = killers.Record(
        killers={"ran": "tests/a.py::t", "not run": "tests/b.py::t", "gone": "tests/c.py::t"},
        slow=frozenset({"ran", "not run", "gone"}),
    )
    seen = {"ran": None, "new": "tests/d.py::t"}
    new = killers.refreshed(old, seen, ["new"], ["ran", "not run", "new"])
    assert new.killers == {"new": "tests/d.py::t", "not run": "tests/b.py::t"}
    assert new.slow == {"new", "not run"}


def fake_repository(root: Path) -> None:
    """Three packages the host checks, one rule, two test files, three mutants."""
    mutants = root / "tests" / "mutants"
    mutants.mkdir(parents=True)
    for name in ("run.py", "copies.py", "killers.py", "lists.py", "host.py"):
        shutil.copy2(REPO / "tests" / "mutants" / name, mutants / name)
    for package in ("bot", "memory", "migrations", "tests"):
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").write_text("", encoding="utf-8")
    (root / "memory" / "rules.py").write_text(
        "def allowed(user, owner):\n    return user == owner\n\n\nLIMIT = 3\n", encoding="utf-8"
    )
    (root / RULES).write_text(
        "from memory.rules import allowed\n\n\n"
        "def test_a_stranger_is_refused():\n    assert not allowed('ana', 'bob')\n\n\n"
        "def test_the_owner_is_allowed():\n    assert allowed('ana', 'ana')\n",
        encoding="utf-8",
    )
    (root / "tests" / "test_other.py").write_text(
        "from memory.rules import allowed\n\n\n"
        "def test_elsewhere():\n    assert allowed('bob', 'bob')\n",
        encoding="utf-8",
    )
    entry = 'name = "{}"\nfile = "memory/rules.py"\nfind = "{}"\nreplace = "{}"\ntests = ["{}"]\n'
    (mutants / "fake.toml").write_text(
        "[[mutant]]\n"
        + entry.format("a stranger is allowed", "user == owner", "True", RULES)
        + "\n[[mutant]]\n"
        + entry.format("the owner is refused", "user == owner", "False", RULES)
        + "\n[[mutant]]\n"
        + entry.format("the limit is raised", "LIMIT = 3", "LIMIT = 4", RULES),
        encoding="utf-8",
    )
    stale = {
        "a stranger is allowed": f"{RULES}::test_the_owner_is_allowed",  # passes on it
        "the owner is refused": "tests/test_other.py::test_elsewhere",  # not a named file
        "the limit is raised": f"{RULES}::test_the_owner_is_allowed",
    }
    (mutants / "killers.json").write_text(json.dumps({"killers": stale}), encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def test_a_real_run_falls_back_ignores_outside_records_and_fails_on_a_survivor(
    tmp_path: Path,
) -> None:
    fake_repository(tmp_path)
    done = subprocess.run(
        [sys.executable, "tests/mutants/run.py", "--jobs", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 of 3 mutants killed" in out, out
    # The table's lines: status, seconds, how, list, name; keyed by the name's last word.
    rows = [line.split() for line in out.splitlines() if "  fake.toml" in line]
    table = {row[-1]: row[:3] for row in rows}
    assert table["allowed"][::2] == ["killed", "fallback"], out
    assert table["refused"][::2] == ["killed", "named"], out
    assert table["raised"][::2] == ["survived", "fallback"], out
    assert "SURVIVED: the limit is raised" in out
    assert "baseline: the 2 tests that killed a mutant pass on the unmutated code" in out, out
    record = json.loads((tmp_path / "tests" / "mutants" / "killers.json").read_text())
    assert record["killers"] == {
        "a stranger is allowed": f"{RULES}::test_a_stranger_is_refused",
        "the owner is refused": f"{RULES}::test_the_owner_is_allowed",
    }


def test_a_timeout_is_a_kill_by_the_test_that_hung() -> None:
    hung = f"{RULES}::test_a"
    output = f"....\nTIMEOUT {hung} - still running after 300 s\n"
    outcome = run.judge(mutant(), run.TIMED_OUT, output, "named")
    assert outcome.status == "timeout"
    assert run.killer_node(outcome) == hung
    assert run.killing_tests(outcome) == (hung,)
