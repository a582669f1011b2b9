"""/memoria through the platform-agnostic commands, on the real engine and database."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.answers import Caller
from bot.app import App
from memory.errors import UserFacingError
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic, ToolUse
from tests.helpers import summary_input
from tests.patience import PATIENCE
from tests.raw_db import raw_database, traces_of
from tests.test_profile import end_by_timer, op, record, user_turn_ids

ANA = Caller("telegram", "u1", "Ana", "dm", "c1")
BEA = Caller("telegram", "u2", "Bea", "dm", "c2")


async def learn(
    app: App,
    fake: FakeAnthropic,
    clock: FakeClock,
    caller: Caller,
    text: str,
    *operations: tuple[str, str, str],
) -> None:
    """One session in which the caller says `text` and the extraction records `operations`."""
    await app.commands.chat(caller, text)
    turn = user_turn_ids(app)[-1]
    fake.queue(
        record(*(op(kind, key, value, [turn]) for kind, key, value in operations)),
        route="record_profile",
    )
    await end_by_timer(app, clock)


def fact_ids(app: App) -> dict[str, int]:
    with raw_database(app.settings) as raw:
        return dict(raw.execute("SELECT key, id FROM facts").fetchall())


async def test_view_fix_history_delete(app: App, fake_anthropic, clock) -> None:
    await learn(
        app,
        fake_anthropic,
        clock,
        ANA,
        "Soy vegetariana y vivo en Bilbao",
        ("semantic", "diet", "vegetariana"),
        ("semantic", "city", "Bilbao"),
    )
    view = await app.commands.memoria(ANA, "ver", "")
    assert view.private
    ids = fact_ids(app)
    assert (
        f"#{ids['diet']} alimentación: vegetariana (contado por ti, desde el 2 nov 2026)"
        in view.text
    )
    fixed = await app.commands.memoria(ANA, "corregir", f"{ids['diet']} vegana")
    assert fixed.ok and "vegana" in fixed.text
    view = await app.commands.memoria(ANA, "view", "")
    assert f"#{ids['diet']} alimentación: vegana (contado por ti" in view.text  # as stated, by you
    assert "antes: vegetariana (hasta el 2 nov 2026)" in view.text
    deleted = await app.commands.memoria(ANA, "borrar", str(ids["city"]))
    assert "Borrado" in deleted.text
    assert "city" not in fact_ids(app)


async def test_another_users_fact_is_not_found(app: App, fake_anthropic, clock) -> None:
    await learn(app, fake_anthropic, clock, ANA, "Me llamo Ana", ("semantic", "name", "Ana"))
    theirs = fact_ids(app)["name"]
    for action, args in (
        ("borrar", f"{theirs}"),
        ("corregir", f"{theirs} Bea"),
        ("caduca", f"{theirs} 30d"),
    ):
        try:
            await app.commands.memoria(BEA, action, args)
        except Exception as exc:  # the adapters' error handler turns this into a reply
            assert f"There is no fact #{theirs}" in str(exc)
        else:
            raise AssertionError(f"{action} reached another user's fact")
    assert fact_ids(app) == {"name": theirs}
    assert "Ana" not in (await app.commands.memoria(BEA, "ver", "")).text


async def test_forget_needs_confirmation_and_leaves_no_trace(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    canary = "CANARY-7f3a9e1b"

    def summarise(body: dict[str, Any]) -> ToolUse:
        first = int(
            body["messages"][0]["content"][0]["text"].split("Turns to fold in:\n[")[1].split("]")[0]
        )
        return ToolUse(
            "write_summary", summary_input(canon=[f"El barco se llama {canary} {{cite:{first}}}"])
        )

    fake_anthropic.queue(summarise, route="write_summary")
    # Not a credential: those never reach the summary or the profile (tests/test_credentials.py).
    await app.commands.chat(ANA, f"Mi barco se llama {canary}")
    for i in range(app.settings.window_trigger_turns // 2):
        await app.commands.chat(ANA, f"mensaje {i}")
        await app.companion.drain()
    turn = user_turn_ids(app)[0]
    fake_anthropic.queue(
        record(op("semantic", "boat_name", canary, [turn])), route="record_profile"
    )
    await end_by_timer(app, clock)
    await learn(app, fake_anthropic, clock, BEA, "Yo soy Bea", ("semantic", "name", "Bea"))
    with raw_database(app.settings) as raw:
        places = [
            t
            for (t,) in raw.execute("SELECT 'turns' FROM turns WHERE text LIKE ?", (f"%{canary}%",))
        ]
        places += [
            t
            for (t,) in raw.execute(
                "SELECT 'summary' FROM summaries WHERE fields_json LIKE ?", (f"%{canary}%",)
            )
        ]
        places += [t for (t,) in raw.execute("SELECT 'fact' FROM facts WHERE value = ?", (canary,))]
    assert {"turns", "summary", "fact"} <= set(places)
    ask = await app.commands.memoria(ANA, "olvidar", "")
    assert [b.data for b in ask.buttons] == ["mem:forget:detective_bilbao", "mem:cancel"]
    assert (await app.commands.button(ANA, "mem:cancel")).text == "Cancelado."
    done = await app.commands.button(ANA, "mem:forget:detective_bilbao")
    assert "olvidado" in done.text
    assert await app.store.purge_settled(timeout=PATIENCE)  # in the background; nobody waits for it
    assert traces_of(app.settings, canary) == []
    with raw_database(app.settings) as raw:
        left = raw.execute(
            "SELECT u.platform_user_id, f.key, f.value FROM facts f"
            " JOIN users u ON u.id = f.user_id"
        ).fetchall()
    assert left == [(BEA.user_id, "name", "Bea")]  # Bea's memory is untouched


async def test_export_then_import_round_trip(app: App, fake_anthropic, clock, tmp_path) -> None:
    await learn(app, fake_anthropic, clock, ANA, "Soy enfermera", ("semantic", "job", "enfermera"))
    ids = fact_ids(app)
    await app.commands.memoria(ANA, "corregir", f"{ids['job']} enfermera en Cruces")
    exported = await app.commands.memoria(ANA, "exportar", "")
    assert exported.document is not None
    name, payload = exported.document
    data = json.loads(payload)
    assert name == "memoria-detective_bilbao.json"
    assert data["format"] == "companion-memory" and data["version"] == 1
    assert [f["value"] for f in data["facts"]] == ["enfermera en Cruces"]
    assert [h["value"] for h in data["fact_history"]] == ["enfermera"]
    assert [t["text"] for t in data["turns"]][:1] == ["Soy enfermera"]
    carla = await app.store.upsert_user("discord", "99", "Carla", clock())
    counts = await app.memory.import_(carla, "detective_bilbao", data)
    assert counts == {"conversations": 1, "turns": 2, "summaries": 0, "facts": 1}
    again = await app.memory.export(carla, "detective_bilbao")
    for table in ("facts", "fact_history", "turns"):
        strip = {"id", "fact_id", "conversation_id", "evidence"}
        assert [{k: v for k, v in row.items() if k not in strip} for row in again[table]] == [
            {k: v for k, v in row.items() if k not in strip} for row in data[table]
        ]
    new_turn = again["turns"][0]["id"]
    assert again["facts"][0]["evidence"] == [new_turn]


async def test_review_mode_accept_and_reject(app: App, fake_anthropic, clock) -> None:
    on = await app.commands.memoria(ANA, "revisar", "on")
    assert "activado" in on.text
    await learn(
        app,
        fake_anthropic,
        clock,
        ANA,
        "Tengo dos gatos y un loro",
        ("semantic", "pets", "dos gatos"),
        ("semantic", "pets_2", "un loro"),
    )
    await app.commands.chat(ANA, "hola")
    assert "gatos" not in fake_anthropic.bodies()[-1]["system"][1]["text"]  # pending: unused
    view = await app.commands.memoria(ANA, "ver", "")
    ids = fact_ids(app)
    assert f"mem:accept:{ids['pets']}" in [b.data for b in view.buttons]
    await app.commands.button(ANA, f"mem:accept:{ids['pets']}")
    await app.commands.button(ANA, f"mem:reject:{ids['pets_2']}")
    assert set(fact_ids(app)) == {"pets"}
    await end_by_timer(app, clock)
    await app.commands.chat(ANA, "¿y ahora?")
    assert "- pets: dos gatos" in fake_anthropic.bodies()[-1]["system"][1]["text"]


async def test_expire_and_why(app: App, fake_anthropic, clock) -> None:
    await learn(app, fake_anthropic, clock, ANA, "Vivo en Getxo", ("semantic", "city", "Getxo"))
    city = fact_ids(app)["city"]
    answer = await app.commands.memoria(ANA, "caduca", f"{city} 2w")
    assert "16 nov 2026" in answer.text  # confirmed 2 Nov 2026 + 14 days
    clock.advance(days=20)
    await app.commands.chat(ANA, "Hola de nuevo")
    assert "Por confirmar" in fake_anthropic.bodies()[-1]["system"][1]["text"]
    why = await app.commands.memoria(ANA, "porque", "")
    assert f"- ciudad: Getxo (#{city})" in why.text
    assert "Vivo en Getxo" in why.text  # the window turn the reply was built from
    bad = None
    try:
        await app.commands.memoria(ANA, "caduca", f"{city} pronto")
    except Exception as exc:
        bad = str(exc)
    assert bad is not None and "not a duration" in bad


async def test_a_fix_or_a_deletion_reaches_the_ongoing_conversation(
    app: App, fake_anthropic, clock
) -> None:
    """The session's profile is otherwise frozen for the cache; a change the user makes with
    /memoria must not wait for the next conversation to leave the prompt."""
    await learn(
        app,
        fake_anthropic,
        clock,
        ANA,
        "Soy vegetariana y vivo en Bilbao",
        ("semantic", "diet", "vegetariana"),
        ("semantic", "city", "Bilbao"),
    )
    await app.commands.chat(ANA, "Hola de nuevo")
    profile = fake_anthropic.bodies()[-1]["system"][1]["text"]
    assert "- diet: vegetariana" in profile and "- city: Bilbao" in profile
    ids = fact_ids(app)
    await app.commands.memoria(ANA, "corregir", f"{ids['diet']} vegana")
    await app.commands.memoria(ANA, "borrar", str(ids["city"]))
    await app.commands.chat(ANA, "¿Sigues ahí?")
    profile = fake_anthropic.bodies()[-1]["system"][1]["text"]
    assert "- diet: vegana" in profile and "Bilbao" not in profile


async def test_a_deleted_fact_leaves_the_file_and_the_ongoing_prompt(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    """`borrar` alone (no correction to rebuild the profile as a side effect): the value leaves
    the conversation under way at the next message, and its bytes leave the database file and
    its WAL (secure_delete, then the purge's checkpoint)."""
    canary = "Calle CANARY-Gorbea-q7Zx"
    await learn(
        app, fake_anthropic, clock, ANA, "Te cuento dónde vivo", ("semantic", "home", canary)
    )
    await app.commands.chat(ANA, "Hola de nuevo")
    assert canary in fake_anthropic.bodies()[-1]["system"][1]["text"]
    deleted = await app.commands.memoria(ANA, "borrar", str(fact_ids(app)["home"]))
    assert "Borrado" in deleted.text
    await app.commands.chat(ANA, "¿Sigues ahí?")
    assert canary not in fake_anthropic.bodies()[-1]["system"][1]["text"]
    assert traces_of(app.settings, canary) == []


@pytest.mark.parametrize("number", ["99999999999999999999999", "²", "#-3", "٣"])
async def test_a_number_no_fact_can_have_is_a_usage_answer(app: App, number: str) -> None:
    """Past a bigint, a superscript or another script's digit: the usage line, never a crash
    of the store (SQLite and PostgreSQL both refuse such integers)."""
    with pytest.raises(UserFacingError, match=r"^Uso: /memoria"):
        await app.commands.memoria(ANA, "borrar", number)
    assert (await app.commands.chat(ANA, "Hola")).ok
