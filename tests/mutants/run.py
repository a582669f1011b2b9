"""Mutation check of the rules: each curated break must make a test fail (issue 13, item 10).

Every `tests/mutants/*.toml` holds entries like

    [[mutant]]
    name = "latest_summary without its user filter"   # the rule that is broken
    file = "memory/store/sqlite/conversations.py"            # from the repo root
    find = "text that occurs exactly ONCE in the file"
    replace = "the broken version"
    tests = ["tests/test_store.py"]                   # test files (or node ids) that must catch it

The repository's files (git ls-files: committed, or new and not ignored) are copied once per
worker, two by default. In each copy a host process (tests/mutants/host.py, under the project's
venv) imports the third-party libraries once and forks a child per mutant, which imports our
code from the copy with the mutant applied; that the copy's code is what gets imported is
checked first. Then, for each entry, the one edit is applied, the named tests run with `-x`, and
the file is restored. Last, every test that killed a mutant is run on the unmutated copy and
must pass there (a test failing anyway would count its mutants as killed and hide a
survivor): only the killing tests, by node id, not every named file, which was most of the
run's time when each mutant's files were checked beforehand.

A mutant that the tests let pass is a survivor: a rule nothing proves. A `find` that no longer
occurs exactly once is a stale entry, and fails the run too: a mutant that edits nothing would
pass silently forever. A mutant whose tests cannot even run (pytest's exit code other than 0
or 1) is "broken" and fails the run; one that runs past TIMEOUT_SECONDS counts as killed.

Usage: python tests/mutants/run.py [--only SUBSTRING] [--list] [--jobs N]
Exit code 1 when any mutant survived or any entry is stale or broken; 0 otherwise.
This file is plain Python with the standard library only (tomllib).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LISTS = Path(__file__).resolve().parent
TIMEOUT_SECONDS = 300
# pytest's exit codes: 1 = some test failed (the mutant is killed); 0 = all passed (survived);
# anything else (2 interrupted / collection error, 4 usage, 5 no tests) means the mutant or
# its entry is broken, which is reported apart: a syntax error proves no rule.
KILLED, SURVIVED, TIMED_OUT = 1, 0, 124


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    source: str  # the list it comes from, e.g. "rules.toml"


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | broken | timeout
    seconds: float
    detail: str = ""


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


def tracked_files() -> list[str]:
    """The repository's files as git sees them (committed or not yet, never ignored ones)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted({name for name in listing.split("\0") if name and (REPO / name).is_file()})


def make_copy(destination: Path, files: list[str]) -> None:
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)


def interpreter() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def copy_env(copy: Path) -> dict[str, str]:
    # PYTHONPATH puts the copy ahead of the editable install of .venv (which points at the
    # repository itself), for pytest and for every `python -m bot` subprocess a test starts.
    return {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}


class Host:
    """tests/mutants/host.py on one copy: third-party libraries imported once, a fresh fork
    per mutant (see its docstring)."""

    def __init__(self, copy: Path) -> None:
        self.copy = copy
        self.log = copy.parent / f"{copy.name}.log"
        self.process = subprocess.Popen(
            [interpreter(), str(copy / "tests" / "mutants" / "host.py"), str(copy)],
            cwd=copy,
            env=copy_env(copy),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def answer(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the test host of {self.copy} stopped")
        return dict(json.loads(line))

    def check_ready(self) -> None:
        """Every mutant would "survive" if the repository's own code were what gets imported."""
        ready = self.answer()
        if not ready.get("ready"):
            raise SystemExit(f"the copy's code is not what the tests import: {ready}")

    def run(self, tests: tuple[str, ...]) -> int:
        assert self.process.stdin is not None
        job = {"tests": list(tests), "log": str(self.log), "timeout": TIMEOUT_SECONDS}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return int(self.answer()["code"])  # type: ignore[call-overload]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def run_one(mutant: Mutant, host: Host) -> Outcome:
    """Apply the edit in the host's copy, run its tests there, put the file back."""
    target = host.copy / mutant.file
    original = target.read_text(encoding="utf-8")
    target.write_text(original.replace(mutant.find, mutant.replace, 1), encoding="utf-8")
    started = time.monotonic()
    try:
        code = host.run(mutant.tests)
    finally:
        target.write_text(original, encoding="utf-8")
    seconds = time.monotonic() - started
    output = host.log.read_text(encoding="utf-8", errors="replace")
    if code == TIMED_OUT:
        return Outcome(mutant, "timeout", seconds)
    if code == KILLED:
        return Outcome(mutant, "killed", seconds, _first_failure(output))
    if code == SURVIVED:
        return Outcome(mutant, "survived", seconds)
    tail = output.strip().splitlines()[-15:]
    return Outcome(mutant, "broken", seconds, f"pytest exit code {code}:\n" + "\n".join(tail))


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if re.match(r"(FAILED|ERROR) \S+::", line):  # pytest's summary, not a log line
            return line
    return ""


def killing_tests(outcome: Outcome) -> tuple[str, ...]:
    """What proved a mutant killed: the node id of its first failing test, or (a timeout, a
    failure pytest named no test for) every test it names."""
    if outcome.status == "killed" and outcome.detail:
        node = outcome.detail.split(" ", 1)[1].split(" - ", 1)[0]
        if "::" in node:
            return (node,)
    return outcome.mutant.tests


def check_baseline(hosts: list[Host], outcomes: list[Outcome]) -> None:
    """Every test that killed a mutant passes on the unmutated copy: a test that fails anyway
    would count each of its mutants as killed and hide a survivor. The selections are split
    between the hosts and run side by side."""
    killed = [o for o in outcomes if o.status in ("killed", "timeout")]
    selections = sorted({test for outcome in killed for test in killing_tests(outcome)})
    shares = [selections[number :: len(hosts)] for number in range(len(hosts))]
    codes: dict[int, int] = {}

    def run(number: int) -> None:
        if shares[number]:
            codes[number] = hosts[number].run(tuple(shares[number]))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(hosts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [n for n, code in codes.items() if code != SURVIVED]
    for number in failed:
        print(hosts[number].log.read_text(encoding="utf-8", errors="replace")[-3000:])
    if failed:
        raise SystemExit(
            "tests that killed a mutant fail on the unmutated code too, so their kills prove "
            "nothing: fix them first "
            f"(exit codes {[codes[n] for n in failed]}; output above)"
        )
    print(f"baseline: the {len(selections)} tests that killed a mutant pass on the unmutated code")


def run_all(mutants: list[Mutant], jobs: int) -> list[Outcome]:
    files = tracked_files()
    todo: queue.Queue[Mutant] = queue.Queue()
    for mutant in mutants:
        todo.put(mutant)
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="mutants-") as root:
        hosts = []
        for number in range(min(jobs, len(mutants))):
            copy = Path(root) / f"copy{number}"
            make_copy(copy, files)
            hosts.append(Host(copy))
        for host in hosts:
            host.check_ready()

        def worker(host: Host) -> None:
            while True:
                try:
                    mutant = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    outcome = run_one(mutant, host)
                except Exception as error:  # a dead host: reported, never silently missing
                    outcome = Outcome(mutant, "broken", 0.0, f"the runner failed: {error!r}")
                with lock:
                    outcomes.append(outcome)
                    done = len(outcomes)
                caught = f"  <- {outcome.detail}" if outcome.status == "killed" else ""
                print(
                    f"[{done}/{len(mutants)}] {outcome.status:8} {outcome.seconds:5.1f}s  "
                    f"{mutant.name}{caught}",
                    flush=True,
                )

        threads = [threading.Thread(target=worker, args=(host,)) for host in hosts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        check_baseline(hosts, outcomes)
        for host in hosts:
            host.close()
    order = {m.name: i for i, m in enumerate(mutants)}
    return sorted(outcomes, key=lambda o: order[o.mutant.name])


def report(outcomes: list[Outcome], wall: float) -> bool:
    """Print the table and every survivor; True when every mutant was killed."""
    print()
    print(f"{'status':8}  {'secs':>5}  {'list':12}  mutant")
    for o in outcomes:
        print(f"{o.status:8}  {o.seconds:5.1f}  {o.mutant.source:12}  {o.mutant.name}")
    bad = [o for o in outcomes if o.status in ("survived", "broken")]
    killed = sum(o.status in ("killed", "timeout") for o in outcomes)
    print(f"\n{killed} of {len(outcomes)} mutants killed in {wall:.0f} s")
    for o in bad:
        print(f"\n{o.status.upper()}: {o.mutant.name} ({o.mutant.source})")
        print(f"  {o.mutant.file}: {o.mutant.find!r} -> {o.mutant.replace!r}")
        print(f"  tests: {' '.join(o.mutant.tests)}")
        if o.detail:
            print("  " + o.detail.replace("\n", "\n  "))
    return not bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", metavar="SUBSTRING", help="only mutants whose name holds it")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run side by side (2)")
    args = parser.parse_args(argv)
    mutants, problems = load_mutants()
    if args.only:
        wanted = args.only.lower()
        mutants = [m for m in mutants if wanted in m.name.lower()]
    if args.list:
        for m in mutants:
            print(f"{m.source:12}  {m.file:40}  {m.name}")
    if problems:
        print(
            "STALE OR INVALID ENTRIES (fix the list: a mutant that edits nothing proves nothing):"
        )
        for problem in problems:
            print(f"  {problem}")
        return 1
    if args.list:
        return 0
    if not mutants:
        print("no mutants match")
        return 1
    started = time.monotonic()
    outcomes = run_all(mutants, max(1, args.jobs))
    return 0 if report(outcomes, time.monotonic() - started) else 1


if __name__ == "__main__":
    sys.exit(main())
