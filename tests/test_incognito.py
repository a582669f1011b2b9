"""/incognito: a conversation that writes nothing. The character still knows what it knew; the
database (every byte of the SQLite file and its WAL, or every row of every PostgreSQL table)
holds none of its words afterwards, its usage rows only counts."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from bot.answers import Caller
from bot.app import App
from bot.command_line import run_line
from memory.errors import UserFacingError
from memory.models import Thread
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, Text, ToolUse

ANA = Caller("telegram", "u1", "Ana", "dm", "dm-u1")
CANARY = "Zumalakarregi7781quetzal"  # in the user's words, the tool query and the replies


async def database_holds(app: App, needle: str) -> list[str]:
    """Where the needle is: the SQLite file and its -wal/-shm byte for byte, or each PostgreSQL
    table row by row (the text of every column)."""
    target = app.settings.database_target
    wanted = needle.casefold()
    if isinstance(target, Path):
        found = []
        for path in target.parent.glob(target.name + "*"):
            data = path.read_bytes().decode("utf-8", "replace").casefold()
            if wanted in data:
                found.append(path.name)
        return found
    con = await asyncpg.connect(target)
    try:
        tables = await con.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
        found = []
        for (table,) in tables:
            rows = await con.fetch(f'SELECT * FROM "{table}"')
            if any(wanted in str(tuple(row.values())).casefold() for row in rows):
                found.append(table)
        return found
    finally:
        await con.close()


async def say(app: App, line: str) -> str:
    answer = await run_line(app.commands, ANA, line)
    if answer is None:
        answer = await app.commands.chat(ANA, line)
    return answer.text


async def test_an_incognito_conversation_leaves_no_byte_of_its_text(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    fake_anthropic.queue(Text("Apuntado, Ana."))
    await say(app, "Soy Ana y tengo un gato, Txuri.")
    thread = Thread(1, "detective_bilbao", "dm")
    stored = await app.store.count_turns(thread)
    on = await say(app, "/incognito")
    assert on.startswith("Conversación fuera de registro") and "30 min" in on
    fake_anthropic.queue(
        ToolUse("search_memory", {"query": f"{CANARY} gato"}),
        Text(f"Tu secreto {CANARY} queda entre nosotros, y saluda a Txuri."),
        Text(f"Sí, {CANARY}."),
    )
    first = await say(app, f"Te cuento un secreto: {CANARY}. ¿Recuerdas a mi gato?")
    assert CANARY in first
    clock.advance(minutes=5)
    await say(app, f"Otra vez {CANARY}")
    bodies = fake_anthropic.bodies()
    # It still knows what it knew: the stored window is in the request, with the secret after.
    sent = str(bodies[-1]["messages"])
    assert "tengo un gato, Txuri" in sent and CANARY in sent
    assert await app.store.count_turns(thread) == stored  # not even the tool's result turn
    off = await say(app, "/incognito off")
    assert off.startswith("Fin de la conversación fuera de registro")
    # On the record again: this message is kept; then the conversation ends, is extracted.
    fake_anthropic.queue(Text("De vuelta."))
    await say(app, "Ya está, hablemos normal.")
    clock.advance(hours=2)
    await app.companion.end_idle_conversations()
    await app.extractor.extract_pending()
    await app.companion.drain()
    await app.store.purge_settled(10)
    assert await database_holds(app, CANARY) == []
    assert await database_holds(app, "Ya está, hablemos normal") != []  # the probe works
    usage = await app.store.usage_records(1)
    off_record = [r for r in usage if r.kind == "incognito"]
    assert len(off_record) == 3  # the tool round, then two replies: counts only
    assert all(r.conversation_id is None and r.turn_id is None for r in off_record)
    assert all(r.input_tokens > 0 or r.output_tokens > 0 for r in off_record)


async def test_it_ends_with_the_session_and_the_next_message_is_not_kept(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await say(app, "/incognito")
    fake_anthropic.queue(Text("Vale."), Text("Hola de nuevo."))
    await say(app, "primer mensaje secreto")
    clock.advance(minutes=31)
    with pytest.raises(UserFacingError) as refused:
        await app.commands.chat(ANA, "segundo mensaje secreto")
    worded = await app.commands.user_error(ANA, refused.value)
    assert "terminó tras un rato sin mensajes" in worded.text
    await say(app, "ahora sí, con memoria")
    await app.companion.drain()
    assert await database_holds(app, "mensaje secreto") == []
    assert await database_holds(app, "ahora sí, con memoria") != []
    assert await say(app, "/incognito off") == (
        "No estábamos fuera de registro: lo que hablamos se recuerda."
    )


async def test_reset_ends_it_too(app: App, fake_anthropic: FakeAnthropic) -> None:
    await say(app, "/incognito")
    fake_anthropic.queue(Text("Vale."), Text("Normal."))
    await say(app, "algo confidencial")
    await say(app, "/reset")
    await say(app, "algo normal")
    await app.companion.drain()
    assert await database_holds(app, "confidencial") == []
    assert await database_holds(app, "algo normal") != []
