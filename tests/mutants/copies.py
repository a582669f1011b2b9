"""The copies of the repository that tests/mutants/run.py edits, and the test host of each.

The first copy, the template, is made from the repository's files and prepared once (Pool.
prepare); every host's copy is a copy of it, never of another host's copy. The hosts are forked
by one zygote (tests/mutants/host.py, under the project's venv, started on the template) that
imported the third-party libraries once; each forks a child per job.

Preparing the template, measured on two cores: byte code for every module of ours and pytest's
rewritten test modules are written there once, so that no child compiles them again (about
half a second each). Both are checked by a hash of their source, never by a file's time: a pyc
left from the unmutated file is not used for the mutated one, whatever the clock says, and the
children (PYTHONDONTWRITEBYTECODE) write none. Plain Python, standard library only, like run.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

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


# The tests' patience in a mutant's run (tests/patience.py says why a lower one is sound): above
# the 70 s the slowest passing subprocess test took on a two-core machine other jobs loaded;
# the suite itself keeps 240 s.
MUTANT_PATIENCE = 90.0


def copy_env(copy: Path) -> dict[str, str]:
    # PYTHONPATH puts the copy ahead of the editable install of .venv (which points at the
    # repository itself), for pytest and for every `python -m bot` subprocess a test starts.
    return {
        **os.environ,
        "PYTHONPATH": str(copy),
        "PYTHONDONTWRITEBYTECODE": "1",
        "COMPANION_TEST_PATIENCE": str(MUTANT_PATIENCE),
    }


def remove_later(root: Path) -> None:
    """Remove the copies in a process of its own that outlives the run: once the outcome is
    known, a dozen copies of the repository still took up to 18 s to delete on a busy disk."""
    remove = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"
    subprocess.Popen(
        [sys.executable, "-c", remove, str(root)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Host:
    """A host forked by the zygote (tests/mutants/host.py) for one copy: a fresh fork of it per
    job, which imports our code from the copy as it is on disk then. It talks through two named
    pipes."""

    def __init__(self, copy: Path, timeout: float, orders: TextIO, answers: TextIO) -> None:
        self.copy = copy
        self.timeout = timeout
        self.orders = orders
        self.answers = answers
        self.alive = True
        self.log = copy.parent / f"{copy.name}.log"

    def answer(self) -> dict[str, object]:
        line = self.answers.readline()
        if not line:
            self.alive = False
            raise RuntimeError(f"the test host of {self.copy} stopped")
        return dict(json.loads(line))

    def check_ready(self) -> None:
        """Every mutant would "survive" if the repository's own code were what gets imported."""
        ready = self.answer()
        if not ready.get("ready"):
            raise SystemExit(f"the copy's code is not what the tests import: {ready}")

    def run(self, tests: tuple[str, ...]) -> int:
        """pytest's exit code for `tests` on the copy as it is on disk now (124: timed out)."""
        job = {"tests": list(tests), "log": str(self.log), "timeout": self.timeout}
        self.orders.write(json.dumps(job) + "\n")
        self.orders.flush()
        return int(self.answer()["code"])  # type: ignore[call-overload]

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        self.orders.close()  # the host ends at the end of its orders
        self.answers.close()


class Pool:
    """The copies and their hosts: a free one is reused, a new one made when none is free (a
    mutant whose test waits out its patience keeps its copy for minutes, see run.py). The
    hosts are forked from one zygote, which imported the third-party libraries once for all."""

    def __init__(self, root: Path, timeout: float) -> None:
        self.root = root
        self.template = root / "template"
        self.timeout = timeout
        self.hosts: list[Host] = []
        self.free: list[Host] = []
        self.made = 0
        self.lock = threading.Lock()
        self.zygote: subprocess.Popen[str] | None = None

    def prepare(self, files: list[str], test_files: list[str]) -> None:
        """The first copy, the template: the repository's files, our byte code (compiled while
        the zygote imports its libraries) and pytest's rewritten tests."""
        for name in files:
            target = self.template / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target)
        self.zygote = subprocess.Popen(
            [
                interpreter(),
                str(self.template / "tests" / "mutants" / "host.py"),
                str(self.template),
            ],
            cwd=self.template,
            env=copy_env(self.template),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        compile_all = [interpreter(), "-m", "compileall", "-q", "-j", "0"]
        subprocess.run(
            [*compile_all, "--invalidation-mode", "checked-hash", str(self.template)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        ready = self.tell({})
        if ready.get("leaked"):
            raise SystemExit(f"the zygote imported our own modules: {ready}")
        log = str(self.root / "warm.log")
        # A test file that cannot be collected is reported by its mutants' runs.
        self.tell({"warm": test_files, "log": log, "timeout": self.timeout})

    def tell(self, order: dict[str, object]) -> dict[str, object]:
        """Send the zygote an order (none: only read its first answer) and read its answer."""
        assert self.zygote is not None and self.zygote.stdin and self.zygote.stdout
        if order:
            self.zygote.stdin.write(json.dumps(order) + "\n")
            self.zygote.stdin.flush()
        line = self.zygote.stdout.readline()
        if not line:
            raise SystemExit("the mutants' zygote (tests/mutants/host.py) stopped")
        return dict(json.loads(line))

    def start(self, count: int) -> None:
        """`count` hosts, started side by side."""
        new = [self._new() for _ in range(count)]
        for host in new:
            host.check_ready()
        with self.lock:
            self.free += new

    def _new(self) -> Host:
        with self.lock:
            self.made += 1
            copy = self.root / f"copy{self.made}"
        # Never a copy of another host's copy: that one may hold a mutant right now.
        shutil.copytree(self.template, copy, symlinks=True)
        orders, answers = (self.root / f"copy{self.made}.{end}" for end in ("orders", "answers"))
        os.mkfifo(orders)
        os.mkfifo(answers)
        assert self.zygote is not None and self.zygote.stdin
        order = {"copy": str(copy), "orders": str(orders), "answers": str(answers)}
        self.zygote.stdin.write(json.dumps(order) + "\n")
        self.zygote.stdin.flush()
        # Opened in the order the host opens them, or both would wait for ever; Host.close
        # closes them.
        to_host = self._open_orders(orders)
        from_host = open(answers, encoding="utf-8")  # noqa: SIM115
        host = Host(copy, self.timeout, to_host, from_host)
        with self.lock:
            self.hosts.append(host)
        return host

    def _open_orders(self, path: Path) -> TextIO:
        """The writing end of a host's orders, once the host opened its end: never waiting for
        ever on a zygote that died."""
        assert self.zygote is not None
        deadline = time.monotonic() + 60
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:  # ENXIO: nobody reads it yet
                gone = self.zygote.poll() is not None or time.monotonic() > deadline
                if error.errno != errno.ENXIO or gone:
                    raise SystemExit(f"no mutant host came up for {path}") from error
                time.sleep(0.01)
                continue
            os.set_blocking(fd, True)
            return os.fdopen(fd, "w", encoding="utf-8")

    def take(self) -> Host:
        with self.lock:
            if self.free:
                return self.free.pop()
        host = self._new()
        host.check_ready()
        return host

    def give_back(self, host: Host) -> None:
        if not host.alive:
            return  # a host that died is not given another mutant: each would be "broken"
        with self.lock:
            self.free.append(host)

    def close(self) -> None:
        for host in self.hosts:
            host.close()
        if self.zygote is not None and self.zygote.stdin is not None:
            self.zygote.stdin.close()
            self.zygote.wait(timeout=30)
