"""The terminal chat after the first exchange: who answers after `/personaje NAME`, whose file
`/memoria exportar` writes, and a card's greeting that names the user."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from bot.app import App, open_app
from bot.terminal import ChatPlaces, StreamReader, run_chat
from cards.sillytavern import import_card, save_imported
from tests.conftest import CHARACTERS, FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic, Text
from tests.test_cards import v2_card, write


async def chat_lines(app: App, user: str, character: str, *lines: str) -> str:
    out = io.StringIO()
    places = ChatPlaces.beside(app.settings.database_path)
    reader = StreamReader(io.StringIO("".join(f"{line}\n" for line in lines)))
    await run_chat(
        app.companion, app.commands, character, user, stdout=out, places=places, reader=reader
    )
    return out.getvalue()


async def test_after_switching_the_replies_carry_the_new_characters_name(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Text("Siéntate."), Text("The lamp is lit."))
    out = await chat_lines(
        app, "ana", "detective_bilbao", "Hola", "/personaje lighthouse_keeper", "Hello?"
    )
    assert "Koldo Arrieta: Siéntate." in out
    keeper = app.companion.character("lighthouse_keeper").name
    assert f"{keeper}: The lamp is lit." in out
    assert "Koldo Arrieta: The lamp is lit." not in out


async def test_the_memory_export_file_names_the_user(
    app: App, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.queue(Text("Anotado."))
    await chat_lines(
        app, "Ana María/../x", "detective_bilbao", "Vivo en Deusto", "/memoria exportar"
    )
    await chat_lines(app, "bob", "detective_bilbao", "/memoria exportar")
    names = sorted(p.name for p in (tmp_path / "exports").iterdir())
    assert names == [
        "memoria-detective_bilbao-terminal-Ana_María_.._x.json",  # no slash: stays in the folder
        "memoria-detective_bilbao-terminal-bob.json",
    ]
    ana = json.loads((tmp_path / "exports" / names[0]).read_text())
    assert "Vivo en Deusto" in json.dumps(ana, ensure_ascii=False)


async def test_a_cards_greeting_names_the_user_it_is_pinned_for(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    folder = tmp_path / "characters"
    shutil.copytree(CHARACTERS, folder)
    card = v2_card()
    card["data"]["first_mes"] = "*She looks up.* Welcome, {{user}}. {{user}} looks tired."
    save_imported(import_card(write(tmp_path, "card.json", card)), folder)
    settings = make_settings(tmp_path, fake_anthropic, characters_dir=folder)
    fake_anthropic.queue(Text("Rest here."))
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        out = await chat_lines(app, "Ana", "seraphina_vale", "Thank you")
    assert "Seraphina Vale: *She looks up.* Welcome, Ana. Ana looks tired." in out
    pinned = json.dumps(fake_anthropic.bodies()[-1]["messages"], ensure_ascii=False)
    assert "Welcome, Ana. Ana looks tired." in pinned  # the model sees the same greeting
    assert "the user" not in pinned.lower()
