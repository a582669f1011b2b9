"""Following the README never breaks the tests: the suite takes its characters from
tests/data/characters, so an admin's additions to the live ./characters folder change nothing.

The proof runs a representative subset of the suite in a copy of the repository whose live
folder has just received a real SillyTavern card through `companion characters import`.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.test_cli import companion, env_for

CARD = REPO / "tests" / "data" / "cards" / "seraphina_v2.json"
# Tests that once asserted on the live folder (its list of ids, its count, its lint summary).
SUBSET = [
    "tests/test_characters.py",
    "tests/test_cli.py::test_migrate_and_characters_commands",
    "tests/test_cli.py::test_unknown_character_is_a_clear_error",
]


def copy_of_the_repository(target: Path) -> Path:
    for folder in ("tests", "characters"):
        shutil.copytree(
            REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name in ("pyproject.toml", "README.md", ".env.example"):
        shutil.copy(REPO / name, target / name)
    return target


async def test_a_card_imported_into_the_live_folder_breaks_no_test(tmp_path: Path) -> None:
    copy = copy_of_the_repository(tmp_path / "repo")
    live = copy / "characters"
    env = env_for(tmp_path, None, CHARACTERS_DIR=str(live))
    code, out, err = await companion("characters", "import", str(CARD), env=env)
    assert code == 0, err
    assert len(list(live.glob("*.yaml"))) == 3, out  # the live folder really changed

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *SUBSET,
        cwd=copy,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=240)
    report = output.decode()
    assert process.returncode == 0, report
    assert " passed" in report and "failed" not in report
    # The copy's tests ran (they find their files from their own path), not this checkout's.
    where = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import tests.conftest as c; print(c.REPO)",
        cwd=copy,
        stdout=asyncio.subprocess.PIPE,
    )
    assert (await where.communicate())[0].decode().strip() == str(copy)
