"""The Dockerfile stays true to the project (the image itself is not built in tests: no
network here to pull its base)."""

from __future__ import annotations

import re

from bot.cli import build_parser
from tests.conftest import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    return re.findall(rf"^{name}\s+(.+)$", DOCKERFILE, flags=re.MULTILINE)


def test_the_image_runs_the_bot_as_a_user_with_the_database_on_the_volume() -> None:
    assert instructions("FROM") == ["python:3.11-slim"]
    [user] = instructions("USER")
    assert user not in ("root", "0")
    assert instructions("VOLUME") == ['["/data"]']
    assert "DATABASE_PATH=/data/companion.db" in DOCKERFILE
    assert instructions("ENTRYPOINT") == ['["companion"]'] and instructions("CMD") == ['["run"]']
    assert "run" in build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def test_every_copied_path_exists_and_secrets_stay_out_of_the_image() -> None:
    for line in instructions("COPY"):
        *sources, _target = line.split()
        for source in sources:
            assert (REPO / source).exists(), source
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    for secret in (".env", "data/", "*.db"):
        assert secret in ignored, secret
    assert "Running in Docker" in (REPO / "README.md").read_text()


def test_every_package_of_the_distribution_is_in_the_image() -> None:
    """A package added to pyproject.toml (cards/, say) and not copied would fail at start-up."""
    include = re.search(r"^include = \[(.+)\]$", (REPO / "pyproject.toml").read_text(), re.M)
    assert include is not None
    packages = {name.strip(' "*') for name in include.group(1).split(",")}
    copied = {line.split()[0] for line in instructions("COPY")}
    assert packages <= copied, packages - copied
