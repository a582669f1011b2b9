"""The test processes of the copies of the repository, driven by tests/mutants/run.py (through
tests/mutants/copies.py).

Importing discord.py, python-telegram-bot, anthropic and pytest costs seconds per process,
more than most mutants' tests take; so the zygote (this file's main, started on the template
copy) imports them once and forks a host for each copy (two seconds of imports saved for each
of the dozen hosts a run makes). A host forks a fresh child for each mutant, which imports OUR
code (bot, memory, migrations, tests) from its copy as it is on disk at that moment, with the
mutant applied. None of our modules is ever imported by the zygote or a host, so no child can
see an earlier mutant's code. What a host keeps from its children is re's cache of compiled
patterns (keyed by their text and flags, see compile_patterns), and what it holds when it forks
is frozen out of the garbage collector's sight (gc.freeze).

Protocol (one JSON object per line). The zygote prints {"ready": bool, "leaked": [...]} once,
then reads orders on stdin: {"warm": [test files], "log": path, "timeout": s} collects them on
the template (answered {"code": ...}); {"copy": path, "orders": fifo, "answers": fifo} forks a
host for that copy, unanswered. A host reads jobs from its orders pipe and writes to its
answers pipe: {"ready": bool} once it checked where our packages are imported from, then for
each job {"tests": [...], "log": path, "timeout": s} it answers {"code": pytest's exit code, or
124 on timeout}; on a timeout the log ends with "TIMEOUT <node id of the test that was
running> - ...".
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

PRELOAD = (
    "pytest",
    "pytest_asyncio",
    "aiohttp",
    "aiohttp.web",
    "anthropic",
    "discord",
    "discord.ext.commands",
    "telegram",
    "telegram.ext",
    "httpx",
    "pydantic",
    "pydantic_settings",
    "apscheduler.schedulers.asyncio",
    "yaml",
    # What our modules import besides: each costs every child its import again otherwise.
    "asyncpg",
    "sqlite3",
    "Stemmer",
    "msgpack",
    "difflib",
    "prompt_toolkit",
    "wordfreq",  # memory/integrity/legible.py reads its files; its import takes 0.3 s
)
OURS = ("bot", "memory", "migrations", "cards", "tests", "bench")
TIMED_OUT = 124
TEARDOWN_SECONDS = 15.0


def in_child(body: Callable[[], int], log: str, timeout: float) -> int:
    """Run `body` in a forked child (its own process group, output to `log`); its exit code."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.setpgid(0, 0)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            code = body()
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
        elif time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = TIMED_OUT
        else:
            time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):  # whatever a test started and left behind
        os.killpg(pid, signal.SIGKILL)
    return status


def imports_from_copy(copy: Path) -> int:
    """0 when bot, memory and migrations come from the copy, from any working directory."""
    os.chdir("/")
    import bot
    import memory
    import migrations

    found = [Path(m.__file__ or "") for m in (bot, memory, migrations)]
    outside = [str(path) for path in found if not path.is_relative_to(copy)]
    print("imported from outside the copy:", outside)
    return 1 if outside else 0


class Running:
    """A pytest plugin. It writes down each test as it starts: on a timeout, the one that hung
    (run.py records it as the mutant's killer, and the baseline checks it). And a test that
    failed is not waited for past TEARDOWN_SECONDS of its teardown: -x would stop after it, and a
    mutant can hang it (a task the failed test left waiting for a reply: a minute more, until
    the client's own timeout, measured). The failure is printed as pytest's summary line would
    be, and the child ends with pytest's code for it; what the test started dies with the
    child's process group, as on a timeout."""

    def __init__(self, path: Path, log: str) -> None:
        self.path = path
        self.log = log  # by name: while a test runs, pytest captures file descriptors 1 and 2
        self.watchdog: threading.Timer | None = None

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.path.write_text(nodeid, encoding="utf-8")

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" and report.failed:
            self.watchdog = threading.Timer(TEARDOWN_SECONDS, self.give_up, args=(report,))
            self.watchdog.daemon = True
            self.watchdog.start()
        elif report.when == "teardown" and self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None

    def give_up(self, report: Any) -> None:
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"\n{report.longreprtext}\nFAILED {report.nodeid} - its teardown still ")
            log.write(f"running after {TEARDOWN_SECONDS} s\n")
        os._exit(1)  # pytest's exit code for a failed test


def run_tests(copy: Path, job: dict[str, Any], patterns: Path, running: Path) -> int:
    os.chdir(copy)
    import pytest

    args = ["-x", "-q", "-p", "no:cacheprovider", *job["tests"]]
    code = int(pytest.main(args, plugins=[Running(running, job["log"])]))
    with contextlib.suppress(Exception):  # a cache laid out otherwise: the next child compiles
        seen = [[key[1], key[2]] for key in re._cache if key[0] is str]  # type: ignore[attr-defined]
        patterns.write_text(json.dumps(seen), encoding="utf-8")
    return code


def compile_patterns(patterns: Path) -> None:
    """Compile here the regular expressions the last child compiled, so that the next children
    find them in re's cache instead of compiling them again (a tenth of a second each, mostly
    memory/integrity's). A compiled pattern depends on its text and flags alone, which are the
    cache's key: a mutant that edits a pattern makes another key and gets compiled afresh."""
    with contextlib.suppress(OSError, ValueError):
        for text, flags in json.loads(patterns.read_text(encoding="utf-8")):
            with contextlib.suppress(Exception):
                re.compile(text, flags)
        patterns.unlink()


def warm(template: Path, tests: list[str]) -> int:
    """Collect the tests on the unmutated template, writing pytest's rewritten test modules
    (checked by a source hash since pytest 9) for every copy made from it afterwards."""
    os.chdir(template)
    sys.dont_write_bytecode = False  # our own modules are compiled already: nothing else written
    import pytest

    return int(pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", *tests]))


def serve(copy: Path, template: Path, orders: TextIO, answers: TextIO) -> None:
    """A host forked from the zygote: it serves one copy, as the zygote's start served the
    template, then runs each job on the copy as it is on disk at that moment."""
    os.environ["PYTHONPATH"] = str(copy)  # for every `python -m bot` a test starts
    sys.path[:] = [
        str(copy) + p[len(str(template)) :] if p.startswith(str(template)) else p for p in sys.path
    ]
    ready = in_child(partial(imports_from_copy, copy), os.devnull, 60) == 0
    answer(answers, {"ready": ready})
    patterns = copy.parent / f"{copy.name}.patterns.json"
    running = copy.parent / f"{copy.name}.running"
    for line in orders:
        job = json.loads(line)
        running.unlink(missing_ok=True)
        body = partial(run_tests, copy, job, patterns, running)
        code = in_child(body, job["log"], job["timeout"])
        if code == TIMED_OUT and running.exists():
            with open(job["log"], "a", encoding="utf-8") as log:
                hung = running.read_text(encoding="utf-8")
                log.write(f"\nTIMEOUT {hung} - still running after {job['timeout']} s\n")
        compile_patterns(patterns)
        gc.freeze()
        answer(answers, {"code": code})


def answer(to: TextIO, message: dict[str, object]) -> None:
    to.write(json.dumps(message) + "\n")
    to.flush()


def fork_host(template: Path, order: dict[str, str]) -> None:
    """A host for the copy of `order`, forked: it talks through the two named pipes the runner
    made, and never through the zygote's own standard input and output."""
    if os.fork() != 0:
        return
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        with (
            open(order["orders"], encoding="utf-8") as orders,
            open(order["answers"], "w", encoding="utf-8") as answers,
        ):
            serve(Path(order["copy"]), template, orders, answers)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def main() -> None:
    """The zygote: third-party libraries imported once, then for each order on stdin a host
    forked for a copy, or the template's tests collected (warm)."""
    template = Path(sys.argv[1]).resolve()
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    leaked = sorted(name for name in sys.modules if name.split(".")[0] in OURS)
    # What is loaded now is never garbage: frozen, the children's collections skip it instead
    # of walking it again and again (half a second a child, measured).
    gc.freeze()
    answer(sys.stdout, {"ready": not leaked, "leaked": leaked})
    for line in sys.stdin:
        order = json.loads(line)
        if "warm" in order:
            code = in_child(partial(warm, template, order["warm"]), order["log"], order["timeout"])
            answer(sys.stdout, {"code": code})
        else:
            fork_host(template, order)
        with contextlib.suppress(ChildProcessError):  # the hosts that ended
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass


if __name__ == "__main__":
    main()
