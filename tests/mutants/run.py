"""Mutation check of the rules: each curated break must make a test fail (issue 13, item 10).

Every `tests/mutants/*.toml` holds entries like

    [[mutant]]
    name = "latest_summary without its user filter"   # the rule that is broken
    file = "memory/store/sqlite/conversations.py"            # from the repo root
    find = "text that occurs exactly ONCE in the file"
    replace = "the broken version"
    tests = ["tests/test_store.py"]                   # test files (or node ids) that must catch it

The repository's files (git ls-files: committed, or new and not ignored) are copied once, with
our byte code and pytest's rewritten test modules written there, and that copy is copied for
each host (tests/mutants/copies.py). The hosts are forked from one process (tests/mutants/
host.py, under the project's venv) that imported the third-party libraries once; a host forks
a child per mutant, which imports our code from its copy with the mutant applied; that the
copy's code is what gets imported is checked first. Then, for each entry, the one edit is
applied, the tests run with `-x`, and the file is restored. The tests are first the one test
that killed the mutant last time, when tests/mutants/killers.json records one inside the
mutant's named tests (tests/mutants/killers.py), and the named tests when there is none or it
no longer kills: a stale record costs time, never a kill. The run rewrites the record with
what it saw (commit the refreshed file).

Mutants run `--jobs` at a time (three by default: on two cores, 3 finished the mutants that do
not wait in 216 s where 2 took 296 s, as their tests wait on sockets and subprocesses; measured
one run each, on a machine other jobs loaded too). A run still going after PARK_SECONDS is a test
waiting out its patience for what the mutant prevents: it gives its turn to the next mutant,
which starts beside it in a copy of its own; the record's slow mutants start first. Every test
that killed a mutant must pass on an unmutated copy (a test failing anyway would count its
mutants as killed and hide a survivor): only the killing tests, by node id, not every named
file. The recorded killers are run so once the mutants are under way, while the slow ones wait;
at the end, the killing tests not among those that passed there are run.

A mutant that the tests let pass is a survivor: a rule nothing proves. A `find` that no longer
occurs exactly once is a stale entry, and fails the run too: a mutant that edits nothing would
pass silently forever. A mutant whose tests cannot even run (pytest's exit code other than 0
or 1) is "broken" and fails the run; one that runs past TIMEOUT_SECONDS counts as killed.

Usage: python tests/mutants/run.py [--only SUBSTRING] [--list] [--jobs N] [--no-record]
Exit code 1 when any mutant survived or any entry is stale or broken; 0 otherwise.
This file is plain Python with the standard library only (tomllib).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Protocol

if __package__:  # imported, by tests/test_mutants_runner.py
    from . import copies, killers
    from .lists import Mutant, Outcome, load_mutants, report
else:  # run as a script: python tests/mutants/run.py
    import copies
    import killers
    from lists import Mutant, Outcome, load_mutants, report

TIMEOUT_SECONDS = 300
# Past this a run is taken to be waiting (a test's patience is minutes; the slowest kills that
# do not wait take about 15 s on a loaded machine). A slow mutant of the record takes no turn:
# each starts at once on a host of its own, started beforehand.
PARK_SECONDS = 20.0
SLOW_PARK_SECONDS = 0.0
# A run this long was a wait (the tests' patience in a mutant's run: copies.MUTANT_PATIENCE),
# recorded as slow.
SLOW_SECONDS = 60.0
# pytest's exit codes: 1 = some test failed (the mutant is killed); 0 = all passed (survived);
# anything else (2 interrupted / collection error, 4 usage, 5 no tests) means the mutant or
# its entry is broken, which is reported apart: a syntax error proves no rule.
KILLED, SURVIVED, TIMED_OUT = 1, 0, 124


class Runner(Protocol):
    """What run_one needs of a host (tests/mutants/copies.py), and a test's fake provides."""

    copy: Path

    def run(self, tests: tuple[str, ...]) -> int: ...

    def output(self) -> str: ...


def run_one(mutant: Mutant, host: Runner, killer: str | None) -> Outcome:
    """Apply the edit in the host's copy; run the recorded killer, then the named tests when
    there is no killer or it did not kill; put the file back."""
    target = host.copy / mutant.file
    original = target.read_text(encoding="utf-8")
    target.write_text(original.replace(mutant.find, mutant.replace, 1), encoding="utf-8")
    started = time.monotonic()
    try:
        outcome = None
        if killer is not None:
            outcome = judge(mutant, host.run((killer,)), host.output(), "record")
            if outcome.status not in ("killed", "timeout"):
                outcome = None  # a stale record: the named tests decide, as without it
        if outcome is None:
            how = "named" if killer is None else "fallback"
            outcome = judge(mutant, host.run(mutant.tests), host.output(), how)
    finally:
        target.write_text(original, encoding="utf-8")
    return dataclasses.replace(outcome, seconds=time.monotonic() - started)


def judge(mutant: Mutant, code: int, output: str, how: str) -> Outcome:
    if code == TIMED_OUT:
        return Outcome(mutant, "timeout", 0.0, _first_failure(output), how)
    if code == KILLED:
        return Outcome(mutant, "killed", 0.0, _first_failure(output), how)
    if code == SURVIVED:
        return Outcome(mutant, "survived", 0.0, how=how)
    tail = output.strip().splitlines()[-15:]
    return Outcome(mutant, "broken", 0.0, f"pytest exit code {code}:\n" + "\n".join(tail), how)


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        # pytest's summary, not a log line; or the host's word on the test that hung
        if re.match(r"(FAILED|ERROR|TIMEOUT) \S+::", line):
            return line
    return ""


def killer_node(outcome: Outcome) -> str | None:
    """The node id of the test that failed on a killed mutant (or hung: a timeout), when pytest
    named one."""
    if outcome.status in ("killed", "timeout") and outcome.detail:
        node = outcome.detail.split(" ", 1)[1].split(" - ", 1)[0]
        if "::" in node:
            return node
    return None


def killing_tests(outcome: Outcome) -> tuple[str, ...]:
    """What proved a mutant killed: the node id of its first failing (or hung) test, or, when
    no test was named, every test it names."""
    node = killer_node(outcome)
    return (node,) if node else outcome.mutant.tests


def check_baseline(hosts: list[copies.Host], outcomes: list[Outcome], checked: set[str]) -> None:
    """Every test that killed a mutant passes on the unmutated copy: a test that fails anyway
    would count each of its mutants as killed and hide a survivor. Those `checked` already
    (recorded killers that passed on an unmutated copy while the slow mutants waited) are not
    run again; the others are split between the hosts and run side by side."""
    killed = [o for o in outcomes if o.status in ("killed", "timeout")]
    selections = sorted({test for outcome in killed for test in killing_tests(outcome)})
    rest = [test for test in selections if test not in checked]
    shares = [rest[number :: len(hosts)] for number in range(len(hosts))]
    started = time.monotonic()
    codes: dict[int, int] = {}

    def run(number: int) -> None:
        if shares[number]:
            codes[number] = -1  # a host that fails to answer proves nothing either
            codes[number] = hosts[number].run(tuple(shares[number]))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(hosts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [n for n, code in codes.items() if code != SURVIVED]
    for number in failed:
        print(hosts[number].output()[-3000:])
    if failed:
        raise SystemExit(
            "tests that killed a mutant fail on the unmutated code too, so their kills prove "
            "nothing: fix them first "
            f"(exit codes {[codes[n] for n in failed]}; output above)"
        )
    print(
        f"baseline: the {len(selections)} tests that killed a mutant pass on the unmutated code "
        f"({len(selections) - len(rest)} of them checked while the slow mutants waited, the "
        f"{len(rest)} others in {time.monotonic() - started:.0f} s)"
    )


class Turn:
    """One of the `--jobs` turns at the CPU, given back once, when the run ends or parks."""

    def __init__(self, turns: threading.Semaphore) -> None:
        self._turns = turns
        self._held = True
        self._lock = threading.Lock()

    def give_back(self) -> None:
        with self._lock:
            if self._held:
                self._held = False
                self._turns.release()


def schedule(mutants: list[Mutant], record: killers.Record) -> list[Mutant]:
    """The record's slow mutants first (each waits beside the others), then those without a
    usable killer (they run whole files), then the rest; each group in the lists' order."""

    def rank(mutant: Mutant) -> int:
        if mutant.name in record.slow:
            return 0
        return 1 if usable(mutant, record) is None else 2

    return sorted(mutants, key=rank)


def usable(mutant: Mutant, record: killers.Record) -> str | None:
    return killers.usable_killer(record.killers.get(mutant.name), mutant.tests)


class Dispatch:
    """Runs the mutants on the pool's hosts, `jobs` at a time (a run past its parking time
    gives its turn to the next one, see the docstring), then runs the recorded killers on
    unmutated copies: part of the baseline, done while the slow mutants wait."""

    def __init__(self, jobs: int, pool: copies.Pool, record: killers.Record) -> None:
        self.pool = pool
        self.record = record
        self.turns = threading.Semaphore(jobs)
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.checked: set[str] = set()  # recorded killers that passed on an unmutated copy
        self.total = 0
        self.started = 0.0

    def run(self, mutants: list[Mutant], shares: int) -> None:
        self.total = len(mutants)
        self.started = time.monotonic()
        threads = []
        for mutant in schedule(mutants, self.record):
            park = SLOW_PARK_SECONDS if mutant.name in self.record.slow else PARK_SECONDS
            threads.append(self.start(partial(self.mutant, mutant), park))
        recorded = sorted({node for m in mutants if (node := usable(m, self.record))})
        for number in range(shares):
            share = tuple(recorded[number::shares])
            if share:
                threads.append(self.start(partial(self.check, share), PARK_SECONDS))
        for thread in threads:
            thread.join()

    def start(self, work: Callable[[copies.Host], None], park: float) -> threading.Thread:
        self.turns.acquire()
        host = self.pool.take()
        turn = Turn(self.turns)
        thread = threading.Thread(target=self.hold, args=(work, host, turn, park))
        thread.start()
        return thread

    def hold(
        self, work: Callable[[copies.Host], None], host: copies.Host, turn: Turn, park: float
    ) -> None:
        parking = threading.Timer(park, turn.give_back)
        parking.start()
        try:
            work(host)
        finally:
            parking.cancel()
            turn.give_back()
            self.pool.give_back(host)

    def mutant(self, mutant: Mutant, host: copies.Host) -> None:
        try:
            outcome = run_one(mutant, host, usable(mutant, self.record))
        except Exception as error:  # a dead host: reported, never silently missing
            outcome = Outcome(mutant, "broken", 0.0, f"the runner failed: {error!r}")
        with self.lock:
            self.outcomes.append(outcome)
            done = len(self.outcomes)
        caught = f"  <- {outcome.detail}" if outcome.detail and outcome.status != "broken" else ""
        print(
            f"{time.monotonic() - self.started:4.0f}s [{done}/{self.total}] {outcome.status:8} "
            f"{outcome.seconds:5.1f}s {outcome.how:8}  {mutant.name}{caught}",
            flush=True,
        )

    def check(self, share: tuple[str, ...], host: copies.Host) -> None:
        # A share that fails (or a dead host) marks nothing: its tests that killed a mutant
        # are run again by check_baseline, which then fails the run as it always did.
        begun, code = time.monotonic(), -1
        with contextlib.suppress(Exception):
            code = host.run(share)
        if code == SURVIVED:
            with self.lock:
                self.checked.update(share)
        print(
            f"{time.monotonic() - self.started:4.0f}s baseline ahead: {len(share)} recorded "
            f"killers {'pass' if code == SURVIVED else 'left for the end'} on an unmutated copy "
            f"({time.monotonic() - begun:.0f} s)",
            flush=True,
        )


def run_all(mutants: list[Mutant], jobs: int, record: killers.Record) -> list[Outcome]:
    named = sorted({test.split("::")[0] for mutant in mutants for test in mutant.tests})
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="mutants-"))
    pool = copies.Pool(root, TIMEOUT_SECONDS)
    try:
        pool.prepare(copies.tracked_files(), named)
        slow = sum(mutant.name in record.slow for mutant in mutants)
        pool.start(min(jobs, len(mutants)) + slow)
        print(f"{len(pool.hosts)} copies and hosts ready in {time.monotonic() - started:.0f} s")
        dispatch = Dispatch(jobs, pool, record)
        dispatch.run(mutants, shares=2 * jobs)
        outcomes = dispatch.outcomes
        alive = [host for host in pool.hosts if host.alive]
        check_baseline(alive[:jobs], outcomes, dispatch.checked)
    finally:
        pool.close()
        copies.remove_later(root)
    order = {m.name: i for i, m in enumerate(mutants)}
    return sorted(outcomes, key=lambda o: order[o.mutant.name])


def refresh_record(record: killers.Record, outcomes: list[Outcome], names: Iterable[str]) -> None:
    """Write what this run saw (the mutants it did not run keep their entries)."""
    seen = {o.mutant.name: killer_node(o) for o in outcomes}
    # Once slow, a mutant stays so while it still parks: no flip-flop of the record's list for
    # a run that took 55 s once and 65 s the next time.
    was = record.slow
    slow = [
        o.mutant.name
        for o in outcomes
        if o.seconds >= (PARK_SECONDS if o.mutant.name in was else SLOW_SECONDS)
    ]
    killers.save_record(killers.refreshed(record, seen, slow, names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", metavar="SUBSTRING", help="only mutants whose name holds it")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--jobs", type=int, default=3, help="mutants run side by side (3)")
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="run every mutant's named tests, as if killers.json were empty (it is rewritten)",
    )
    args = parser.parse_args(argv)
    mutants, problems = load_mutants()
    names = [m.name for m in mutants]
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
    record = killers.load_record()
    started = time.monotonic()
    outcomes = run_all(mutants, max(1, args.jobs), killers.Record() if args.no_record else record)
    refresh_record(record, outcomes, names)
    return 0 if report(outcomes, time.monotonic() - started) else 1


if __name__ == "__main__":
    sys.exit(main())
