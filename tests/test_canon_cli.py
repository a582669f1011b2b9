"""`companion characters proposals|approve|reject` as a real subprocess on the real store: the
pending list with evidence and the contradiction mark, approve writing the fact (comments kept)
and the running bot's live reload taking it, reject, and the refusals of an unknown or already
decided id."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.reload import CharacterReloader
from cards.character import CharacterBook, load_character
from memory.models import NewCanonProposal, Thread
from memory.store import open_store
from tests.conftest import CHARACTERS
from tests.test_canon_writer import added_lines
from tests.test_cli import cli_database, companion, env_for

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
DETECTIVE = "detective_bilbao"
SISTER = "Tiene una hermana, Ane, que vive en Getxo."
BAR = "El bar de debajo del despacho se llama Txoko."
CATS = "No soporta a los gatos y vive con un perro."


async def seeded(tmp_path: Path) -> tuple[dict[str, str], Path, list[int], list[Any]]:
    """A characters folder of its own, and three pending proposals resting on the detective's
    lines in Ana's private thread (the third marked as contradicting the sheet)."""
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    store = await open_store(cli_database(tmp_path))
    try:
        user = await store.upsert_user("telegram", "ana", "Ana", NOW)
        conversation = await store.start_conversation(Thread(user.id, DETECTIVE, "dm"), NOW)
        await store.add_turn(conversation, "user", "Hola, soy Ana, ¿tienes familia?", NOW)
        lines = [
            await store.add_turn(conversation, "assistant", text, NOW)
            for text in ("Mi hermana Ane vive en Getxo.", "Abajo está el Txoko.", "Odio los gatos.")
        ]
        ids = await store.add_canon_proposals(
            DETECTIVE,
            [
                NewCanonProposal(SISTER, (lines[0].id,)),
                NewCanonProposal(BAR, (lines[1].id,)),
                NewCanonProposal(CATS, (lines[2].id,), "traits: Observador obsesivo"),
            ],
            NOW,
        )
    finally:
        await store.close()
    return env_for(tmp_path, None, CHARACTERS_DIR=str(folder)), folder, ids, lines


async def statuses(tmp_path: Path, ids: list[int]) -> list[str]:
    store = await open_store(cli_database(tmp_path))
    try:
        return [(await store.get_canon_proposal(i)).status for i in ids]  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_the_list_shows_each_pending_proposal_its_evidence_and_the_mark(
    tmp_path: Path,
) -> None:
    env, _, (sister, bar, cats), lines = await seeded(tmp_path)
    code, out, err = await companion("characters", "proposals", env=env)
    assert code == 0, err
    for proposal_id, text, line in ((sister, SISTER, lines[0]), (bar, BAR, lines[1])):
        head = next(row for row in out.splitlines() if row.startswith(f"#{proposal_id} "))
        assert DETECTIVE in head and "CONTRADICTS" not in head
        assert text in out and f"turn {line.id}" in out and line.text in out
    [marked] = [row for row in out.splitlines() if row.startswith(f"#{cats} ")]
    assert "CONTRADICTS the sheet: traits: Observador obsesivo" in marked
    assert "soy Ana" not in out  # what the person said is no evidence, and is not shown
    assert "3 pending" in out
    code, out, err = await companion(
        "characters", "proposals", "--character", "lighthouse_keeper", env=env
    )
    assert code == 0 and "0 pending" in out and SISTER not in out, err
    code, out, err = await companion("characters", "proposals", f"#{cats}", env=env)
    assert code == 0, err
    assert CATS in out and "It contradicts the sheet: traits: Observador obsesivo" in out
    assert f"turn {lines[2].id}" in out and "Odio los gatos." in out


async def test_approve_writes_the_fact_marks_it_and_the_live_reload_takes_it(
    tmp_path: Path,
) -> None:
    env, folder, (sister, bar, _), _ = await seeded(tmp_path)
    sheet = folder / f"{DETECTIVE}.yaml"
    before = sheet.read_text(encoding="utf-8")
    book = CharacterBook({DETECTIVE: load_character(sheet)})
    reloader = CharacterReloader(folder, book)  # a running bot's, watching the folder
    code, out, err = await companion("characters", "approve", str(sister), env=env)
    assert code == 0, err
    assert f"approved #{sister}" in out and str(sheet) in out
    assert added_lines(before, sheet.read_text(encoding="utf-8")) == [f"    {SISTER}\n"]
    assert await reloader.check()
    served = book.get(DETECTIVE)
    assert served is not None and served.identity.description.endswith(SISTER)
    code, out, err = await companion("characters", "approve", str(bar), "--into", "lore", env=env)
    assert code == 0, err
    assert "lore page 'canon'" in out
    assert await reloader.check()
    served = book.get(DETECTIVE)
    assert served is not None
    assert [p.content for p in served.lore if p.slug == "canon"] == [f"- {BAR}"]
    assert await statuses(tmp_path, [sister, bar]) == ["approved", "approved"]
    code, out, _ = await companion("characters", "proposals", env=env)
    assert f"#{sister} " not in out and f"#{bar} " not in out and "1 pending" in out


async def test_a_decided_or_unknown_id_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    env, folder, (sister, _, cats), _ = await seeded(tmp_path)
    sheet = folder / f"{DETECTIVE}.yaml"
    code, _, err = await companion("characters", "approve", str(sister), env=env)
    assert code == 0, err
    written = sheet.read_bytes()
    code, _, err = await companion("characters", "approve", str(sister), env=env)
    assert code == 2 and f"#{sister} was already approved" in err
    assert sheet.read_bytes() == written  # the fact is not written twice
    code, _, err = await companion("characters", "reject", str(sister), env=env)
    assert code == 2 and f"#{sister} was already approved" in err
    for verb in ("approve", "reject", "proposals"):
        code, _, err = await companion("characters", verb, "999999", env=env)
        assert code == 2 and "there is no canon proposal #999999" in err, verb
    code, _, err = await companion("characters", "approve", "abc", env=env)
    assert code == 2 and "'abc' is not a proposal id" in err
    assert await statuses(tmp_path, [sister, cats]) == ["approved", "pending"]


async def test_a_contradicting_proposal_waits_for_force_and_reject_writes_nothing(
    tmp_path: Path,
) -> None:
    env, folder, (_, bar, cats), _ = await seeded(tmp_path)
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code, _, err = await companion("characters", "approve", str(cats), env=env)
    assert code == 2 and "contradicts the character's sheet" in err and "--force" in err
    code, out, err = await companion("characters", "reject", str(bar), env=env)
    assert code == 0 and f"rejected #{bar}" in out, err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == files
    assert await statuses(tmp_path, [bar, cats]) == ["rejected", "pending"]
    code, out, err = await companion("characters", "approve", str(cats), "--force", env=env)
    assert code == 0, err
    assert load_character(folder / f"{DETECTIVE}.yaml").identity.description.endswith(CATS)


async def test_help_names_the_review_verbs(tmp_path: Path) -> None:
    code, out, _ = await companion("characters", "--help", env=env_for(tmp_path, None))
    assert code == 0
    assert all(verb in out for verb in ("proposals", "approve", "reject"))
    code, out, _ = await companion("characters", "approve", "--help", env=env_for(tmp_path, None))
    assert "--into {sheet,lore}" in out and "--force" in out
