"""The test process of one copy of the repository, driven by tests/mutants/run.py.

Importing discord.py, python-telegram-bot, anthropic and pytest costs seconds per process,
more than most mutants' tests take; so this process imports them once, then forks a fresh
child for each mutant, which imports OUR code (bot, memory, migrations, tests) from the copy as
it is on disk at that moment, with the mutant applied. None of our modules is ever imported
here, so no child can see an earlier mutant's code. What the host keeps from its children is
re's cache of compiled patterns (keyed by their text and flags, see compile_patterns), and
what it holds when it forks is frozen out of the garbage collector's sight (gc.freeze).

Protocol (one JSON object per line): it prints {"ready": bool} once it checked where our
packages are imported from, then for each job {"tests": [...], "log": path, "timeout": s}
read on stdin it prints {"code": pytest's exit code, or 124 on timeout}; on a timeout the log
ends with "TIMEOUT <node id of the test that was running> - ...".
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
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

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
    """A pytest plugin that writes down each test as it starts: on a timeout, the one that hung
    (run.py records it as the mutant's killer, and the baseline checks it)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.path.write_text(nodeid, encoding="utf-8")


def run_tests(copy: Path, tests: list[str], patterns: Path, running: Path) -> int:
    os.chdir(copy)
    import pytest

    args = ["-x", "-q", "-p", "no:cacheprovider", *tests]
    code = int(pytest.main(args, plugins=[Running(running)]))
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


def main() -> None:
    copy = Path(sys.argv[1]).resolve()
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    leaked = sorted(name for name in sys.modules if name.split(".")[0] in OURS)
    # What is loaded now is never garbage: frozen, the children's collections skip it instead
    # of walking it again and again (half a second a child, measured).
    gc.freeze()
    ready = not leaked and in_child(partial(imports_from_copy, copy), os.devnull, 60) == 0
    print(json.dumps({"ready": ready, "leaked": leaked}), flush=True)
    patterns = copy.parent / f"{copy.name}.patterns.json"
    running = copy.parent / f"{copy.name}.running"
    for line in sys.stdin:
        job = json.loads(line)
        running.unlink(missing_ok=True)
        body = partial(run_tests, copy, job["tests"], patterns, running)
        code = in_child(body, job["log"], job["timeout"])
        if code == TIMED_OUT and running.exists():
            with open(job["log"], "a", encoding="utf-8") as log:
                hung = running.read_text(encoding="utf-8")
                log.write(f"\nTIMEOUT {hung} - still running after {job['timeout']} s\n")
        compile_patterns(patterns)
        gc.freeze()
        print(json.dumps({"code": code}), flush=True)


if __name__ == "__main__":
    main()
