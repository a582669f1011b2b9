"""The copies of the repository that tests/mutants/run.py edits, and the test host of each.

The first copy is made from the repository's files and prepared once (below); every further
copy is a copy of it. Each copy gets a host (tests/mutants/host.py, under the project's venv)
that imports the third-party libraries once and forks a child per job.

Preparing the first copy, measured on two cores: byte code for every module of ours and
pytest's rewritten test modules are written there once, so that no child compiles them again
(about half a second each). Both are checked by a hash of their source, never by a file's
time: a pyc left from the unmutated file is not used for the mutated one, whatever the clock
says, and the children (PYTHONDONTWRITEBYTECODE) write none. Plain Python, standard library
only, like run.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def tracked_files() -> list[str]:
    """The repository's files as git sees them (committed or not yet, never ignored ones)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted({name for name in listing.split("\0") if name and (REPO / name).is_file()})


def interpreter() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def copy_env(copy: Path, write_bytecode: bool = False) -> dict[str, str]:
    # PYTHONPATH puts the copy ahead of the editable install of .venv (which points at the
    # repository itself), for pytest and for every `python -m bot` subprocess a test starts.
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    if write_bytecode:
        del env["PYTHONDONTWRITEBYTECODE"]
    return env


def make_template(destination: Path, files: list[str], test_files: list[str]) -> None:
    """The first copy: the repository's files, our byte code and pytest's rewritten tests."""
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    compile_all = [interpreter(), "-m", "compileall", "-q", "-j", "0"]
    subprocess.run(
        [*compile_all, "--invalidation-mode", "checked-hash", str(destination)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # Collecting the tests writes pytest's rewritten modules (checked by a source hash since
    # pytest 9); our modules are found compiled above, so nothing else is written.
    collect = [interpreter(), "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"]
    subprocess.run(
        [*collect, *test_files],
        cwd=destination,
        env=copy_env(destination, write_bytecode=True),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,  # a test file that cannot be collected is reported by its mutants' runs
    )


class Host:
    """tests/mutants/host.py on one copy: third-party libraries imported once, a fresh fork
    per job (see its docstring)."""

    def __init__(self, copy: Path, timeout: float) -> None:
        self.copy = copy
        self.timeout = timeout
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
        """pytest's exit code for `tests` on the copy as it is on disk now (124: timed out)."""
        assert self.process.stdin is not None
        job = {"tests": list(tests), "log": str(self.log), "timeout": self.timeout}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return int(self.answer()["code"])  # type: ignore[call-overload]

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


class Pool:
    """The copies and their hosts: a free one is reused, a new one made when none is free (a
    mutant whose test waits out its patience keeps its copy for minutes, see run.py)."""

    def __init__(self, root: Path, template: Path, timeout: float) -> None:
        self.root = root
        self.template = template
        self.timeout = timeout
        self.hosts: list[Host] = []
        self.free: list[Host] = []
        self.lock = threading.Lock()

    def start(self, count: int) -> None:
        """`count` hosts, started side by side (each imports its libraries for a second or two)."""
        new = [self._new() for _ in range(count)]
        for host in new:
            host.check_ready()
        with self.lock:
            self.free += new

    def _new(self) -> Host:
        with self.lock:
            copy = self.root / f"copy{len(self.hosts)}"
            # Never a copy of another host's copy: that one may hold a mutant right now.
            shutil.copytree(self.template, copy, symlinks=True)
            host = Host(copy, self.timeout)
            self.hosts.append(host)
        return host

    def take(self) -> Host:
        with self.lock:
            if self.free:
                return self.free.pop()
        host = self._new()
        host.check_ready()
        return host

    def give_back(self, host: Host) -> None:
        with self.lock:
            self.free.append(host)

    def close(self) -> None:
        for host in self.hosts:
            host.close()
