"""The container's filesystem as the Dockerfile lays it out, rebuilt in a temporary folder
without Docker (no daemon in tests): the image's working directory and environment, its
unprivileged user (when the tests run as root; else a read-only /app stands for it), and the
variables `docker run --env-file .env` passes from a `.env` copied from `.env.example`. The
README's steps must put the database, the log and the exports in the volume, and the image's
HEALTHCHECK must pass against `companion run`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import until

COMPANION = str(Path(sys.executable).with_name("companion"))


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text())
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, rest = line.strip().partition(" ")
            found.append((name.upper(), rest.strip()))
    return found


def instruction(name: str) -> list[str]:
    return [rest for found, rest in dockerfile() if found == name]


def docker_env_file(text: str) -> dict[str, str]:
    """What `docker run --env-file` passes: every KEY=value line literally (no quotes, no
    expansion), empty values included; comment lines skipped."""
    values = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


@dataclass
class Container:
    root: Path
    uid: int | None  # the image's user, when this process may become it

    def path(self, inside: str) -> Path:
        """A path of the container, in the temporary folder."""
        return self.root / inside.lstrip("/")

    def env(self, env_file: dict[str, str]) -> dict[str, str]:
        """The image's ENV over a bare environment, then --env-file over it, as Docker does;
        the image's absolute paths moved into the temporary root."""
        env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}
        for line in instruction("ENV"):
            for pair in shlex.split(line):
                key, value = pair.split("=", 1)
                env[key] = str(self.path(value)) if value.startswith("/") else value
        env.update(env_file)
        return env

    def preexec(self) -> Callable[[], None] | None:
        uid = self.uid
        if uid is None:
            return None

        def become() -> None:
            os.setgid(uid)
            os.setuid(uid)

        return become


def _may_become(uid: int) -> bool:
    """Whether this process can run the interpreter as `uid` (root can switch, but the
    interpreter may live where that user cannot read, under /root say)."""
    if os.geteuid() != 0:
        return False

    def become() -> None:
        os.setgid(uid)
        os.setuid(uid)

    try:
        done = subprocess.run([COMPANION, "--version"], preexec_fn=become, capture_output=True)
    except PermissionError:
        return False
    return done.returncode == 0


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    """Built step by step from the Dockerfile: WORKDIR, the characters copied, the RUN line's
    data folder (owned by the image's user) and its links; /app left unwritable."""
    root = tmp_path / "root"
    [workdir] = instruction("WORKDIR")
    [user] = instruction("USER")
    [run] = [line for line in instruction("RUN") if "useradd" in line]
    uid_match = re.search(rf"--uid (\d+) .*\b{user}\b", run)
    assert uid_match, run
    uid = int(uid_match.group(1))
    container = Container(root, uid if _may_become(uid) else None)
    app = container.path(workdir)
    shutil.copytree(REPO / "characters", app / "characters")
    for made in re.findall(r"mkdir (\S+)", run):
        container.path(made).mkdir(parents=True)
        if container.uid is not None and f"chown {user}:{user} {made}" in run:
            os.chown(container.path(made), container.uid, container.uid)
    for mode, changed in re.findall(r"chmod (\d+) (\S+)", run):
        container.path(changed).chmod(int(mode, 8))
    for target, link in re.findall(r"ln -s (\S+) (\S+)", run):
        container.path(link).symlink_to(container.path(target))
    # The tree readable by the image's user, /app writable by nobody but root.
    for folder in (tmp_path, root, app):
        folder.chmod(0o555)
    try:
        yield container
    finally:
        for folder in (tmp_path, root, app):
            folder.chmod(0o755)


def volume(container: Container) -> Path:
    [declared] = instruction("VOLUME")
    [inside] = json.loads(declared)
    return container.path(inside)


ENV_EXAMPLE = docker_env_file((REPO / ".env.example").read_text())


@pytest.mark.parametrize(
    "database_line",
    [None, "DATABASE_PATH=./data/companion.db", "DATABASE_PATH="],
    ids=["env-example-as-is", "older-env-naming-./data", "empty-DATABASE_PATH"],
)
def test_migrate_in_the_image_writes_the_database_in_the_volume(
    container: Container, database_line: str | None
) -> None:
    env_file = dict(ENV_EXAMPLE)
    if database_line is not None:
        key, value = database_line.split("=", 1)
        env_file[key] = value
    [workdir] = instruction("WORKDIR")
    done = subprocess.run(
        [COMPANION, "migrate"],
        cwd=container.path(workdir),
        env=container.env(env_file),
        preexec_fn=container.preexec(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data = volume(container)
    # Private to the image's user, so no command warns that others can enter it (issue 35).
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert "can be entered by other users" not in done.stderr, done.stderr
    assert (data / "companion.db").is_file()
    assert (data / "companion.log").is_file()  # the log beside it, in the volume too
    app = container.path(workdir)
    assert {p.name for p in app.iterdir()} == {"characters", "data"}  # nothing else written
    assert (app / "data").resolve() == data.resolve()  # ./data is the volume


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthcheck() -> list[str]:
    [line] = instruction("HEALTHCHECK")
    command = line[line.index("CMD") + 3 :].strip()
    argv = json.loads(command)
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


async def test_the_image_healthcheck_passes_against_companion_run(container: Container) -> None:
    """The single-container recipe: `docker run --env-file .env` with the image's HEALTH_PORT,
    and the HEALTHCHECK command run inside it."""
    [workdir] = instruction("WORKDIR")
    async with FakeAnthropic() as llm, FakeTelegram() as telegram:
        env_file = dict(ENV_EXAMPLE)
        env_file.update(
            ANTHROPIC_API_KEY=llm.api_key,
            ANTHROPIC_BASE_URL=llm.url,
            TELEGRAM_BOT_TOKEN=telegram.token,
            TELEGRAM_API_BASE_URL=telegram.url,
        )
        env = container.env(env_file)
        assert "HEALTH_PORT" not in env_file and env["HEALTH_PORT"]  # the image's own
        env["HEALTH_PORT"] = str(_free_port())  # 9100 may be taken on this machine
        bot = await asyncio.create_subprocess_exec(
            COMPANION,
            "run",
            cwd=container.path(workdir),
            env=env,
            preexec_fn=container.preexec(),
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await until(lambda: bool(telegram.calls_to("getUpdates")), 60, what="polling")

            async def healthy() -> bool:
                check = await asyncio.create_subprocess_exec(
                    *_healthcheck(), env=env, stderr=asyncio.subprocess.DEVNULL
                )
                return await check.wait() == 0

            passed = False
            for _ in range(200):  # each attempt is a real request; it passes once ready
                if passed := await healthy():
                    break
                await asyncio.sleep(0.05)
            assert passed, "the image's HEALTHCHECK never passed"
        finally:
            bot.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(bot.communicate(), 60)
        assert bot.returncode == 0, err.decode()
    assert (volume(container) / "companion.db").is_file()
