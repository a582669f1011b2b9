"""A throwaway PostgreSQL server for tests and benches: a fresh cluster in a temporary folder,
on 127.0.0.1 and a free port, without durability (fsync off), gone when the block ends.

    with running_server() as base:          # "postgresql://postgres@127.0.0.1:PORT"
        url = f"{base}/postgres"
    async with running_server_async() as base: ...

    python -m tests.pg_server -- COMMAND ...   # runs COMMAND with COMPANION_TEST_DATABASE_URL

initdb and postgres refuse to run as root: as root (CI, containers) they run as the `postgres`
OS user (runuser), in a folder handed to that user.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

BIN_CANDIDATES = (Path("/usr/lib/postgresql/15/bin"), Path("/usr/local/bin"), Path("/usr/bin"))
SERVER_USER = "postgres"
URL_VARIABLE = "COMPANION_TEST_DATABASE_URL"
MISSING = (
    "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: "
    "install the Debian package postgresql-15"
)
_SETTINGS = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=400",  # pytest-xdist workers share one server
)


class ServerUnavailable(RuntimeError):
    """No PostgreSQL binaries on this machine, or the server did not start."""


def binaries() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres, if any."""
    for folder in BIN_CANDIDATES:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", SERVER_USER, "--", *command]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(command: list[str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(
            _as_server_user(command), stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise ServerUnavailable(f"{Path(command[0]).name} failed ({done.returncode}):\n{tail}")


def _prepare_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="companion-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam(SERVER_USER)
        os.chown(folder, account.pw_uid, account.pw_gid)
    return folder


def _start(bin_dir: Path, folder: Path) -> int:
    data, log = folder / "data", folder / "server.log"
    _run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
         "--encoding=UTF8", "--locale=C", "--no-sync"],
        folder / "initdb.log",
    )  # fmt: skip
    port = _free_port()
    options = " ".join(
        [f"-p {port}", "-c listen_addresses=127.0.0.1", f"-k {folder}"]
        + [f"-c {setting}" for setting in _SETTINGS]
    )
    _run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
         "-o", options, "start"],
        folder / "pg_ctl.log",
    )  # fmt: skip
    return port


def _stop(bin_dir: Path, folder: Path) -> None:
    data = folder / "data"
    if (data / "postmaster.pid").exists():
        with contextlib.suppress(ServerUnavailable):
            _run(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                folder / "pg_ctl.log",
            )
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def running_server() -> Iterator[str]:
    """Start a server; yields its base URL (add "/<database>"); stops it and removes its folder
    afterwards, whatever happened in the block."""
    bin_dir = binaries()
    if bin_dir is None:
        raise ServerUnavailable(MISSING)
    folder = _prepare_folder()
    try:
        port = _start(bin_dir, folder)
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        _stop(bin_dir, folder)


@contextlib.asynccontextmanager
async def running_server_async() -> AsyncIterator[str]:
    """As `running_server`, starting and stopping on a thread so the loop stays free."""
    bin_dir = binaries()
    if bin_dir is None:
        raise ServerUnavailable(MISSING)
    folder = _prepare_folder()
    try:
        port = await asyncio.to_thread(_start, bin_dir, folder)
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        await asyncio.to_thread(_stop, bin_dir, folder)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        print("usage: python -m tests.pg_server -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    if binaries() is None:
        print(MISSING, file=sys.stderr)
        return 1
    try:
        with running_server() as base:
            env = {**os.environ, URL_VARIABLE: f"{base}/postgres"}
            return subprocess.run(args, env=env, check=False).returncode
    except ServerUnavailable as error:
        print(f"PostgreSQL test server: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
