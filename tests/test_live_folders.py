"""Following the README never breaks the tests: the suite takes its characters from
tests/data/characters, so an admin's additions to the live ./characters folder change nothing.

The proof runs a representative subset of the suite in a copy of the repository whose live
folder has just received a real SillyTavern card through `companion characters import`. The
live folder may hold anything a deployment put there (its own characters, this very card
imported before): the copy gets some of that too, and the card is imported under a name no
file of the folder uses, so the test holds for whatever the folder holds.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

from cards.lore_files import slugify
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


def as_a_deployment(live: Path) -> None:
    """What a deployment's folder may hold besides the shipped characters: one of its own,
    and the card of this test imported before (under the id the import would take)."""
    own = (live / "lighthouse_keeper.yaml").read_text()
    (live / "harbour_master.yaml").write_text(
        own.replace("name: Maggie Thornton", "name: Agustina Olabe")
    )
    card_id = slugify(json.loads(CARD.read_text())["data"]["name"], "character")
    shutil.copy(live / "detective_bilbao.yaml", live / f"{card_id}.yaml")


def card_with_a_new_name(live: Path, target: Path) -> Path:
    """The card, renamed until its id is no file's of the folder: the import adds a file."""
    card = json.loads(CARD.read_text())
    taken = {path.stem for path in live.glob("*.y*ml")}
    name, number = card["data"]["name"], 1
    while slugify(name, "character") in taken:
        number += 1
        name = f"{card['data']['name']} {number}"
    card["data"]["name"] = name
    target.write_text(json.dumps(card), encoding="utf-8")
    return target


async def test_a_card_imported_into_the_live_folder_breaks_no_test(tmp_path: Path) -> None:
    copy = copy_of_the_repository(tmp_path / "repo")
    live = copy / "characters"
    as_a_deployment(live)
    before = {path.name for path in live.glob("*.y*ml")}
    env = env_for(tmp_path, None, CHARACTERS_DIR=str(live))
    card = card_with_a_new_name(live, tmp_path / "card.json")
    code, out, err = await companion("characters", "import", str(card), env=env)
    assert code == 0, err
    added = {path.name for path in live.glob("*.y*ml")} - before
    assert len(added) == 1, out  # the live folder really changed: one more character

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
