"""Who runs each community and where a mature character speaks (issue 36, items 3 and 4), on
the fake Telegram with the real python-telegram-bot and the real engine: a group's admins (as
Telegram lists them, getChatAdministrators) manage its scene and binding and mark it mature;
a plain member is told who can; an admin of one group is a member of any other."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import open_app
from bot.texts import text
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.test_followups import THURSDAY, dated, learn
from tests.test_scenes import GROUP, ITZIAR, KOLDO, MAGGIE, Scene, cast_folder, scene_on

OPERATOR, ADMIN, MEMBER = 1001, 1002, 1003  # ADMIN runs GROUP on Telegram; MEMBER does not
OTHER_GROUP = -100_777
TABERNERA = "tabernera"  # rated mature in these tests

Stage = Callable[..., AbstractAsyncContextManager[Scene]]


def mature_cast(tmp_path: Path) -> Path:
    """The scene tests' three characters, Itziar (the barkeeper) rated mature."""
    folder = cast_folder(tmp_path)
    path = folder / "tabernera.yaml"
    path.write_text("rating: mature\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@pytest.fixture
def stage(tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock) -> Stage:
    @asynccontextmanager
    async def running(**overrides: Any) -> AsyncIterator[Scene]:
        async with FakeTelegram() as fake:
            fake.chat_admins[GROUP] = {OPERATOR: "creator", ADMIN: "administrator"}
            cast = mature_cast(tmp_path)
            staged = scene_on(fake, tmp_path, fake_anthropic, clock, cast, OPERATOR, **overrides)
            async with staged as on:
                yield on

    return running


async def command(scene: Scene, user: int, words: str, chat: int = GROUP) -> str:
    """A group command's answer in the group (the next message there)."""
    before = len(scene.fake.sent_messages(chat))
    name, _, args = words.partition(" ")
    scene.fake.send_command(chat, user, name, args, "private" if chat > 0 else "supergroup")
    return str((await scene.fake.wait_for_messages(chat, before + 1))[-1]["text"])


async def refused_privately(scene: Scene, user: int, words: str, chat: int = GROUP) -> str:
    """A private refusal of a group command: the text the person got in their private chat
    (they started the bot beforehand, so Telegram lets it write to them)."""
    if not scene.fake.sent_messages(user):
        scene.fake.send_command(user, user, "/ayuda")
        await scene.fake.wait_for_messages(user, 1)
    fake, pointer = scene.fake, text("es", "private_pointer")
    mine, theirs = len(fake.sent_messages(user)), len(fake.sent_messages(chat))

    def answered() -> bool:  # privately, or (not refused) in the group
        in_group = [m["text"] for m in fake.sent_messages(chat)[theirs:]]
        return len(fake.sent_messages(user)) > mine or any(t != pointer for t in in_group)

    name, _, args = words.partition(" ")
    fake.send_command(chat, user, name, args, "supergroup")
    await fake.wait_until(answered)
    if len(fake.sent_messages(user)) > mine:
        return str(fake.sent_messages(user)[-1]["text"])
    return "answered in the group: " + str(fake.sent_messages(chat)[-1]["text"])


async def test_a_group_admin_manages_the_scene_and_the_binding(stage: Stage) -> None:
    async with stage() as scene:
        joined = await command(scene, ADMIN, "/escena añadir lighthouse_keeper")
        assert joined == text("es", "scene_joined", name=MAGGIE)
        left = await command(scene, ADMIN, "/escena quitar lighthouse_keeper")
        assert left == text("es", "scene_left", name=MAGGIE)
        bound = await command(scene, ADMIN, "/personaje vincular lighthouse_keeper")
        assert bound == text("es", "bound", name=MAGGIE)
        store = scene.app.store
        assert await store.bound_character("telegram", str(GROUP)) == "lighthouse_keeper"
        # Reloading the characters stays the operator's.
        reload = await refused_privately(scene, ADMIN, "/personaje recargar")
        assert reload == text("es", "admins_only")


async def test_a_plain_member_is_refused_and_told_who_can(stage: Stage) -> None:
    async with stage() as scene:
        for words in ("/escena añadir lighthouse_keeper", "/personaje vincular lighthouse_keeper",
                      "/escena madura on"):  # fmt: skip
            refused = await refused_privately(scene, MEMBER, words)
            assert refused == text("es", "manage_telegram")
        store = scene.app.store
        assert await store.scene_members("telegram", str(GROUP)) == []
        assert await store.bound_character("telegram", str(GROUP)) is None
        assert not await store.chat_is_mature("telegram", str(GROUP))


async def test_an_admin_of_one_group_cannot_manage_another(stage: Stage) -> None:
    async with stage() as scene:
        scene.fake.chat_admins[OTHER_GROUP] = {MEMBER: "creator"}
        # An admin here (and known to be: the bot has read this group's admins)...
        await command(scene, ADMIN, "/escena añadir lighthouse_keeper")
        # ...is a plain member of the other group.
        for words in ("/escena añadir lighthouse_keeper", "/personaje vincular lighthouse_keeper"):
            refused = await refused_privately(scene, ADMIN, words, chat=OTHER_GROUP)
            assert refused == text("es", "manage_telegram")
        store = scene.app.store
        assert await store.scene_members("telegram", str(OTHER_GROUP)) == []
        assert await store.bound_character("telegram", str(OTHER_GROUP)) is None


async def test_the_admin_list_is_asked_once_while_cached(stage: Stage) -> None:
    async with stage() as scene:
        await command(scene, ADMIN, "/escena añadir lighthouse_keeper")
        await command(scene, ADMIN, "/escena quitar lighthouse_keeper")
        await command(scene, MEMBER, "/escena")  # no admin subcommand: Telegram is not asked
        assert len(scene.fake.calls_to("getChatAdministrators")) == 1
        # Promoted after the list was read: still a member until the cache expires.
        scene.fake.chat_admins[GROUP][MEMBER] = "administrator"
        refused = await refused_privately(scene, MEMBER, "/escena añadir lighthouse_keeper")
        assert refused == text("es", "manage_telegram")


async def test_with_no_cache_every_command_asks_telegram(stage: Stage) -> None:
    async with stage(community_admins_cache_seconds=0) as scene:
        await command(scene, ADMIN, "/escena añadir lighthouse_keeper")
        scene.fake.chat_admins[GROUP][MEMBER] = "administrator"  # promoted: seen at once
        left = await command(scene, MEMBER, "/escena quitar lighthouse_keeper")
        assert left == text("es", "scene_left", name=MAGGIE)
        assert len(scene.fake.calls_to("getChatAdministrators")) == 2


async def test_a_mature_character_speaks_only_in_a_group_marked_mature(stage: Stage) -> None:
    async with stage() as scene:
        refused = await command(scene, OPERATOR, f"/escena añadir {TABERNERA}")
        assert refused == text("es", "mature_telegram", name=ITZIAR)
        listed = await command(scene, ADMIN, "/personaje")
        assert MAGGIE in listed and ITZIAR not in listed
        marked = await command(scene, ADMIN, "/escena madura on")
        assert marked == text("es", "scene_mature_on")
        assert await scene.app.store.chat_is_mature("telegram", str(GROUP))
        joined = await command(scene, ADMIN, f"/escena añadir {TABERNERA}")
        assert joined == text("es", "scene_joined", name=ITZIAR)
        assert ITZIAR in await command(scene, ADMIN, "/personaje")
        # Marked general again: she leaves the cast, and the scene answers without her.
        await command(scene, ADMIN, "/escena madura off")
        cast = await command(scene, MEMBER, "/escena")
        assert ITZIAR not in cast and KOLDO in cast
        # She may still be taken out of it (she stays out when the group is marked again).
        left = await command(scene, ADMIN, f"/escena quitar {TABERNERA}")
        assert left == text("es", "scene_left", name=ITZIAR)
        await command(scene, ADMIN, "/escena madura on")
        assert ITZIAR not in await command(scene, MEMBER, "/escena")


async def test_a_bound_mature_character_gives_way_and_the_admins_are_told_once(
    stage: Stage,
) -> None:
    async with stage() as scene:
        await command(scene, ADMIN, "/escena madura on")
        await command(scene, ADMIN, f"/personaje vincular {TABERNERA}")
        await command(scene, ADMIN, "/escena madura off")
        scene.say(MEMBER, "Buenas tardes")
        lines = await scene.group_lines(5)
        reason = text("es", "mature_telegram", name=ITZIAR)
        notice = text("es", "mature_fallback", name=ITZIAR, reason=reason, fallback=KOLDO)
        koldo = f"{KOLDO}\nSoy Koldo."
        assert lines[-2:] == [notice, koldo]
        scene.say(MEMBER, "¿Hay alguien?")
        lines = await scene.group_lines(6)
        assert lines[-1] == koldo and lines.count(notice) == 1
        assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [KOLDO, KOLDO]


async def test_a_private_chat_offers_no_mature_character_unless_the_operator_allows(
    stage: Stage, clock: FakeClock
) -> None:
    async with stage() as scene:
        refused = await command(scene, MEMBER, f"/personaje {TABERNERA}", chat=MEMBER)
        assert refused == text("es", "mature_dm", name=ITZIAR)
        listed = await command(scene, MEMBER, "/personaje", chat=MEMBER)
        assert ITZIAR not in listed
        # Chosen while it was allowed (say, before the operator turned MATURE_DMS off).
        store = scene.app.store
        user = await store.upsert_user("telegram", str(MEMBER), "Bob", clock())
        await store.choose_character(user.id, "dm", TABERNERA, clock())
        scene.fake.send_private_text(MEMBER, "Hola")
        await scene.fake.wait_for_messages(MEMBER, 3)
        assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [KOLDO]


async def test_mature_dms_let_a_mature_character_speak_in_private(stage: Stage) -> None:
    async with stage(mature_dms=True) as scene:
        switched = await command(scene, MEMBER, f"/personaje {TABERNERA}", chat=MEMBER)
        assert switched == text("es", "switched", name=ITZIAR)
        scene.fake.send_private_text(MEMBER, "Hola")
        await scene.fake.wait_for_messages(MEMBER, 2)
        assert [scene.speaker_of(b) for b in scene.llm.bodies()] == [ITZIAR]


async def test_the_operator_restricts_which_characters_a_community_may_use(stage: Stage) -> None:
    only_koldo = {f"telegram:{GROUP}": ["detective_bilbao"]}
    async with stage(community_characters=only_koldo) as scene:
        refused = await command(scene, ADMIN, "/escena añadir lighthouse_keeper")
        assert refused == text("es", "character_not_here", name=MAGGIE)
        refused = await command(scene, ADMIN, "/personaje vincular lighthouse_keeper")
        assert refused == text("es", "character_not_here", name=MAGGIE)
        listed = await command(scene, ADMIN, "/personaje")
        assert MAGGIE not in listed and KOLDO in listed
        # Another community is not restricted (the operator manages every group).
        joined = await command(scene, OPERATOR, "/escena añadir lighthouse_keeper", OTHER_GROUP)
        assert joined == text("es", "scene_joined", name=MAGGIE)


@pytest.mark.parametrize("mature_dms", [False, True])
async def test_a_mature_character_writes_follow_ups_only_with_mature_dms(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: FakeClock, mature_dms: bool
) -> None:
    """Follow-ups are private messages: a mature character sends none (not even the offer)
    unless the operator allows mature private chats."""
    folder = mature_cast(tmp_path)
    async with FakeTelegram() as fake:
        settings = make_settings(
            tmp_path, fake_anthropic, telegram_bot_token=fake.token,
            telegram_api_base_url=fake.url, characters_dir=folder,
            default_character="detective_bilbao", mature_dms=mature_dms,
        )  # fmt: skip
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            adapter = TelegramAdapter(settings, app.commands)
            await adapter.start()
            app.followups.use(adapter)
            try:
                fake.send_command(MEMBER, MEMBER, "/ayuda")  # Bob has started the bot
                await fake.wait_for_messages(MEMBER, 1)
                user = await app.store.upsert_user("telegram", str(MEMBER), "Bob", clock())
                event = dated(user.id, "entrevista de trabajo", THURSDAY, clock())
                await learn(app, replace(event, character_id=TABERNERA), clock())
                await app.followups.run()
                offers = [m["text"] for m in fake.sent_messages(MEMBER)[1:]]
                assert offers == ([text("es", "followups_offer", name=ITZIAR)] if mature_dms
                                  else [])  # fmt: skip
            finally:
                await adapter.stop()
