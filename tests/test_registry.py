"""The command registry: every command of bot/registry.py runs on every platform — Telegram (real
python-telegram-bot against the fake Bot API), Discord (real discord.py against the fake Discord)
and the terminal chat — and the Telegram menu and the Discord tree are generated from it.

`SAMPLES` must name every leaf of the registry: a command added without a sample fails
`test_every_command_has_a_sample`, and one the platforms do not expose fails the walks below.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pytest import MonkeyPatch

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App, open_app
from bot.command_line import leaves, menu, path_of
from bot.registry import Command
from bot.terminal import run_chat
from bot.texts import text
from memory.models import Fact
from tests.conftest import FakeClock, make_settings, running_telegram
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.test_discord_adapter import running

KOLDO = "Koldo Arrieta"
ANA_TG, ALICE_DC, ANA_TERMINAL = 1001, 4242, "ana"
ADMINS = [f"telegram:{ANA_TG}", f"discord:{ALICE_DC}", f"terminal:{ANA_TERMINAL}"]

Sample = tuple[list[str], str]  # the words to run a command with, a piece of its answer


def samples(fact: int) -> dict[str, Sample]:
    """Per registry leaf, in the order they run (deleting the fact comes last)."""
    return {
        "ayuda": ([], f"Hablas con {KOLDO}"),
        "reset": ([], text("es", "reset_none")),
        "personaje.lista": ([], text("es", "characters", current=KOLDO)),
        "personaje.cambiar": (["detective_bilbao"], text("es", "switched", name=KOLDO)),
        "personaje.vincular": (["detective_bilbao"], text("es", "bound", name=KOLDO)),
        "personaje.desvincular": ([], text("es", "unbound")),
        "personaje.recargar": ([], "Personajes recargados (2)"),
        "memoria.ver": ([], f"#{fact} ciudad: Getxo"),
        "memoria.corregir": (
            [str(fact), "Bilbao"],
            text("es", "mem_fixed", id=fact, key="ciudad", value="Bilbao"),
        ),
        "memoria.historial": ([str(fact)], "antes: Getxo"),
        "memoria.caduca": ([str(fact), "2w"], f"#{fact} caduca ahora"),
        "memoria.revisar": (["on"], text("es", "mem_review_on")),
        "memoria.porque": ([], text("es", "why_none")),
        "memoria.historia": (["ver"], text("es", "story_none", name=KOLDO)),
        "memoria.exportar": ([], text("es", "mem_export", name=KOLDO)),
        # Scenes are a group's: in a private chat each says so (tests/test_scenes.py runs them
        # in groups).
        "escena.lista": ([], text("es", "scene_groups_only")),
        "escena.historia": (["Koldo"], text("es", "scene_groups_only")),
        "escena.anadir": (["lighthouse_keeper"], text("es", "scene_groups_only")),
        "escena.quitar": (["lighthouse_keeper"], text("es", "scene_groups_only")),
        "escena.madura": (["on"], text("es", "scene_groups_only")),
        "memoria.olvidar": ([], text("es", "mem_ask_forget", name=KOLDO)),
        "memoria.borrar": ([str(fact)], text("es", "mem_deleted", id=fact)),
        "zona": (["Europe/Madrid"], "Tu zona horaria es ahora Europe/Madrid"),
        "incognito.on": ([], "Conversación fuera de registro"),
        "incognito.off": ([], text("es", "incognito_off")),
        "avisos": (["on"], "Avisos activados"),
        "start": ([], "(/ayuda: qué puedo hacer"),  # after the pinned greeting
        "yo": ([], "Tus ids: "),
        # The operator's access rules (bot/access.py), changed and put back.
        "admin.acceso.lista": ([], "invite-only: off"),
        "admin.acceso.permitir": (["persona", "77"], "allow: "),
        "admin.acceso.bloquear": (["rol", "88"], "role:88"),
        "admin.acceso.revocar": (["persona", "77"], "allow: -"),
        "admin.acceso.desbloquear": (["rol", "88"], "block: -"),
        "admin.acceso.privados": (["on"], "dms: on"),
        "admin.acceso.invitacion": (["off"], "invite-only: off"),
        # Canon proposals (bot/canon_commands.py): none waiting here (tests/test_canon_admin.py).
        "admin.canon.lista": (["999"], text("es", "canon_unknown", id=999)),
        "admin.canon.aprobar": (["999", "ficha"], text("es", "canon_unknown", id=999)),
        "admin.canon.rechazar": (["999"], text("es", "canon_unknown", id=999)),
    }


def typed_line(leaf: Command, words: list[str], language: str) -> str:
    """The leaf as a user types it: "/memoria historial 4", or "/admin access list"."""
    names = [c.names.get(language) for c in path_of(leaf)]
    return "/" + " ".join([*names, *words])


async def seed_fact(app: App, platform: str, user_id: str, now: datetime) -> int:
    """A fact about the user, as an extraction would store it."""
    user = await app.store.upsert_user(platform, user_id, "Ana", now)
    fact = Fact(
        0, user.id, "detective_bilbao", "semantic", "ciudad", "Getxo", "stated", "dm", (),
        "days:180", None, now, now, None,
    )  # fmt: skip
    await app.store.apply_fact_changes([fact], [], [], [], None, now)
    return (await app.store.facts(user.id, "detective_bilbao"))[0].id


def test_every_command_has_a_sample() -> None:
    assert set(samples(1)) == {leaf.key for leaf in leaves()}


async def test_every_command_works_on_telegram(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path,
            fake_anthropic,
            telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url,
            admin_ids=ADMINS,
        )
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            try:
                fact = await seed_fact(app, "telegram", str(ANA_TG), clock())
                by_key = {leaf.key: leaf for leaf in leaves()}
                for key, (words, expected) in samples(fact).items():
                    before = len(fake.sent_messages(ANA_TG))
                    command, _, rest = typed_line(by_key[key], words, "es").partition(" ")
                    fake.send_command(ANA_TG, ANA_TG, command, rest)
                    parts = 2 if key == "memoria.exportar" else 1  # the text, then the file
                    answer = (await fake.wait_for_messages(ANA_TG, before + parts))[before]
                    assert expected in answer["text"], (key, answer["text"])
                    assert answer["parse_mode"] == "HTML"
                # The menu: per language, from the registry.
                for language in ("es", "en"):
                    listed = fake.commands[("default", language)]
                    assert [(c["command"], c["description"]) for c in listed] == menu(language)
            finally:
                await adapter.stop()


async def test_every_command_works_on_discord(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with (
        FakeDiscord() as fake,
        running(tmp_path, fake, fake_anthropic, clock, admin_ids=ADMINS) as h,
    ):
        fact = await seed_fact(h.app, "discord", str(ALICE_DC), clock())
        by_key = {leaf.key: leaf for leaf in leaves()}
        for key, (words, expected) in samples(fact).items():
            leaf, *above = reversed(path_of(by_key[key]))
            options: dict[str, object] = {
                arg.key: int(word) if arg.kind == "int" else word
                for arg, word in zip(leaf.args, words, strict=True)
            }
            if not above:
                interaction = await fake.slash_command(leaf.names.es, options, ALICE_DC, False)
            elif len(above) == 2:  # /admin acceso lista: a subcommand of a subgroup
                top, middle = above[1], above[0]
                interaction = await fake.slash_command(
                    top.names.es, options, ALICE_DC, False, group=middle.names.es,
                    subcommand=leaf.names.es,
                )  # fmt: skip
            else:
                parent = above[0]
                group = parent.names.es + ("-admin" if leaf.admin else "")
                interaction = await fake.slash_command(
                    group, options, ALICE_DC, False, subcommand=leaf.names.es
                )
            response = await fake.wait_for_interaction_response(interaction)
            assert expected in (response.content or ""), (key, response.content)


async def test_every_command_works_in_the_terminal_by_its_english_name(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock, monkeypatch: MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the export is written to the working folder
    settings = make_settings(tmp_path, fake_anthropic, admin_ids=ADMINS)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        fact = await seed_fact(app, "terminal", ANA_TERMINAL, clock())
        by_key = {leaf.key: leaf for leaf in leaves()}
        lines = [typed_line(by_key[k], w, "en") for k, (w, _) in samples(fact).items()]
        stdout = io.StringIO()
        await run_chat(
            app.companion,
            app.commands,
            "detective_bilbao",
            ANA_TERMINAL,
            io.StringIO("\n".join(lines) + "\n"),
            stdout,
        )
    shown = stdout.getvalue()
    position = 0
    for key, (_, expected) in samples(fact).items():  # each answer, in order
        found = shown.find(expected, position)
        assert found >= 0, (key, expected, shown[position:])
        position = found + len(expected)
    assert not fake_anthropic.bodies()  # no command reached the LLM as chat


async def test_discord_tree_is_localised_admin_hidden_and_synced_only_when_changed(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    def puts(fake: FakeDiscord) -> Callable[[], int]:
        return lambda: sum(
            1 for r in fake.requests if r.method == "PUT" and r.path.endswith("/commands")
        )

    async with FakeDiscord() as fake:
        async with running(tmp_path, fake, fake_anthropic, clock):
            synced = {c["name"]: c for c in fake.registered_commands[None]}
        memoria = synced["memoria"]
        assert memoria["name_localizations"]["en-US"] == "memory"
        subs = {o["name"]: o for o in memoria["options"]}
        assert subs["historial"]["name_localizations"]["en-GB"] == "history"
        number = subs["historial"]["options"][0]
        assert number["name"] == "numero" and number["name_localizations"]["en-US"] == "number"
        assert "history" not in subs  # English is a localisation, not a second command
        admin = synced["personaje-admin"]
        assert admin["default_member_permissions"] not in (None, "")
        assert {o["name"] for o in admin["options"]} == {"vincular", "desvincular", "recargar"}
        assert synced["personaje"]["default_member_permissions"] is None
        operator = synced["admin"]  # one hidden group, its rules a subgroup: /admin acceso ...
        assert operator["default_member_permissions"] not in (None, "")
        assert "admin-admin" not in synced
        subgroups = {o["name"]: o for o in operator["options"]}
        assert set(subgroups) == {"acceso", "canon"}  # /admin canon: the canon proposals
        acceso = subgroups["acceso"]
        canon = {o["name"] for o in subgroups["canon"]["options"]}
        assert canon == {"lista", "aprobar", "rechazar"}
        assert acceso["name"] == "acceso" and acceso["name_localizations"]["en-US"] == "access"
        assert {o["name"] for o in acceso["options"]} >= {"lista", "bloquear", "solo-invitados"}
        assert synced["yo"]["name_localizations"]["en-US"] == "whoami"
        assert {o["name"] for o in synced["personaje"]["options"]} == {"lista", "cambiar"}
        state = subs["revisar"]["options"][0]
        assert [c["value"] for c in state["choices"]] == ["on", "off"]
        count = puts(fake)
        assert count() == 1
        async with running(tmp_path, fake, fake_anthropic, clock):
            pass
        assert count() == 1  # unchanged tree: no second sync
        (tmp_path / "discord-commands.sha256").write_text("an older tree")
        async with running(tmp_path, fake, fake_anthropic, clock):
            pass
        assert count() == 2  # a changed tree is synced


async def test_a_typed_command_that_does_not_exist_lists_the_real_ones(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    async with running_telegram(tmp_path, fake_anthropic, clock) as (fake, _app):
        fake.send_command(ANA_TG, ANA_TG, "/memorai", "ver")
        fake.languages[ANA_TG + 1] = "en"
        fake.send_command(ANA_TG + 1, ANA_TG + 1, "/memory", "nonsense")
        unknown = (await fake.wait_for_messages(ANA_TG, 1))[0]["text"]
        usage = (await fake.wait_for_messages(ANA_TG + 1, 1))[0]["text"]
    valid = "/personaje, /reset, /ayuda, /memoria, /zona, /incognito, /avisos, /start, /escena, /yo"
    assert unknown == text("es", "unknown_command", given="memorai", valid=valid)
    assert usage.startswith("Usage: /memory view | fix NUMBER VALUE | delete NUMBER")
    assert not fake_anthropic.bodies()
