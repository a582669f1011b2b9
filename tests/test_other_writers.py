"""Another process writing the database while the bot runs (the admin CLI): the bot's sessions
in RAM must not go on from memory that was deleted or changed under them."""

from __future__ import annotations

import json

from bot.app import App
from memory.models import Fact, Thread
from memory.store import open_store
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.helpers import dm
from tests.raw_db import database_env, raw_database
from tests.test_cli import companion, env_for

CHARACTER = "detective_bilbao"


def _request_text(body: dict[str, object]) -> str:
    return json.dumps(body, ensure_ascii=False)


async def test_a_forget_run_from_the_cli_reaches_the_running_bot(
    tmp_path, app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    assert (await app.companion.handle(dm("Me llamo Ana y vivo en Deusto"))).ok
    env = env_for(tmp_path, None, **database_env(app.settings))
    code, out, err = await companion(
        "memory", "forget", "--platform", "telegram", "--user", "u1", "--yes", env=env
    )
    assert code == 0 and f"{CHARACTER}: deleted" in out, err
    clock.advance(minutes=1)
    reply = await app.companion.handle(dm("¿Dónde vivo?"))
    assert reply.ok, reply.text  # no foreign-key failure on the deleted conversation
    assert "Deusto" not in _request_text(fake_anthropic.bodies()[-1])
    with raw_database(app.settings) as raw:
        texts = [row[0] for row in raw.execute("SELECT text FROM turns ORDER BY id")]
    assert texts[0] == "¿Dónde vivo?" and not any("Deusto" in text for text in texts)
    assert (await app.companion.handle(dm("¿Sigues ahí?"))).ok  # and it goes on from there


async def test_facts_written_by_another_process_reach_the_next_reply(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    assert (await app.companion.handle(dm("Hola, soy Ana"))).ok
    assert "velero" not in _request_text(fake_anthropic.bodies()[-1])
    other = await open_store(app.settings.database_target)  # as `companion memory import` does
    try:
        user = await other.find_user("telegram", "u1")
        assert user is not None
        now = clock()
        fact = Fact(
            0, user.id, CHARACTER, "semantic", "boat", "tiene un velero llamado Itsaso",
            "stated", "dm", (), "never", None, now, now, None,
        )  # fmt: skip
        await other.apply_fact_changes([fact], [], [], [], None, now)
    finally:
        await other.close()
    clock.advance(minutes=1)
    assert (await app.companion.handle(dm("¿Qué sabes de mí?"))).ok
    assert "velero llamado Itsaso" in _request_text(fake_anthropic.bodies()[-1])


async def test_the_bots_own_writes_rebuild_nothing(app: App, fake_anthropic: FakeAnthropic) -> None:
    """The change feed moves only for other connections: the bot's own turns and facts never
    make it read its sessions again."""
    for text in ("Uno", "Dos", "Tres"):
        assert (await app.companion.handle(dm(text))).ok
    assert app.store.external_changes == 0
    session = app.companion._sessions.get(Thread(1, CHARACTER, "dm"))
    assert session is not None and [t.text for t in session.window][-2:] == ["Tres", "Entendido."]
