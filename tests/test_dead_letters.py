"""Dead letters (issue 28 item A2) on both backends: the updates a platform process could not
store, kept per sender; a forget deletes the sender's, `companion inbox dead-letters` lists
them and `--purge` deletes them. Text from the platforms made storable at the edge. The
platform process itself, on PostgreSQL: tests/test_dead_letters_pg.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory.models import DeadLetter, Incoming
from memory.platform_text import storable, storable_json
from memory.store import open_store
from tests.test_cli import cli_database, companion, env_for

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
DETECTIVE = "detective_bilbao"


def letter(user: str, update: int, text: str = "hola") -> DeadLetter:
    payload = json.dumps({"update_id": update, "message": {"from": {"id": user}, "text": text}})
    return DeadLetter("telegram", str(update), user, payload, "DataError: refused", NOW)


async def test_dead_letters_are_kept_once_newest_first(any_store: Any) -> None:
    assert await any_store.record_dead_letter(letter("41", 1, "a\x00b"))
    assert not await any_store.record_dead_letter(letter("41", 1))  # delivered again
    assert await any_store.record_dead_letter(letter("42", 2))
    newest, oldest = await any_store.dead_letters(10)
    assert (newest.update_key, oldest.update_key) == ("2", "1")
    assert json.loads(oldest.payload)["message"]["text"] == "a\x00b"  # as the platform sent it
    assert oldest.created_at == NOW and oldest.error == "DataError: refused"
    assert await any_store.count_dead_letters() == 2
    assert await any_store.purge_dead_letters() == 2
    assert await any_store.dead_letters(10) == []


async def test_a_forget_deletes_the_senders_dead_letters_and_nobody_elses(
    any_store: Any,
) -> None:
    ana = await any_store.upsert_user("telegram", "41", "Ana", NOW)
    await any_store.upsert_user("telegram", "42", "Bea", NOW)
    for update, user in enumerate(("41", "41", "42"), start=1):
        await any_store.record_dead_letter(letter(user, update))
    await any_store.record_dead_letter(
        DeadLetter("discord", "m9", "41", "{}", "DataError: refused", NOW)  # another platform's 41
    )
    counts = await any_store.forget(ana.id, DETECTIVE)
    assert counts["dead_letters"] == 2
    left = await any_store.dead_letters(10)
    assert sorted((d.platform, d.platform_user_id) for d in left) == [
        ("discord", "41"),
        ("telegram", "42"),
    ]


async def test_the_cli_lists_one_line_each_and_purges(tmp_path: Path) -> None:
    store = await open_store(cli_database(tmp_path))
    try:
        await store.record_dead_letter(letter("41", 7, "x" * 400))
        await store.record_dead_letter(letter("42", 8))
    finally:
        await store.close()
    env = env_for(tmp_path, None)
    code, out, err = await companion("inbox", "dead-letters", "--limit", "1", env=env)
    assert code == 0, err
    first, total = out.splitlines()
    assert first.startswith("#2 2026-11-02T18:30:00+00:00 telegram update 8 from user 42:")
    assert "DataError: refused | {" in first
    assert total == "2 dead letter(s)"
    code, out, _ = await companion("inbox", "dead-letters", env=env)
    assert len(out.splitlines()) == 3 and len(out.splitlines()[1]) < 300  # the payload cut
    code, out, _ = await companion("inbox", "dead-letters", "--purge", env=env)
    assert (code, out) == (0, "deleted 2 dead letter(s)\n")
    code, out, _ = await companion("inbox", "dead-letters", env=env)
    assert out == "0 dead letter(s)\n"


@pytest.mark.parametrize(
    ("given", "stored"),
    [("ho\x00la", "hola"), ("a\ud800b", "a\ufffdb"), ("\udc00\x00", "\ufffd"), ("ñ 😀", "ñ 😀")],
)
def test_platform_text_is_made_storable(given: str, stored: str) -> None:
    assert storable(given) == stored
    incoming = Incoming("telegram", "1", given, "dm", "1", DETECTIVE, given)
    assert (incoming.text, incoming.display_name) == (stored, stored)
    update = storable_json({"message": {"text": given, f"k{given}": [given, 1, None]}})
    assert update == {"message": {"text": stored, f"k{stored}": [stored, 1, None]}}
    stored.encode("utf-8")  # storable: no lone surrogate left
