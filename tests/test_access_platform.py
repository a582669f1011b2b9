"""The platform process's access check (bot/inbox/refused.py) on Discord's gateway payloads and
Telegram's updates, with the rules in either backend: what a refused person wrote never
reaches what is stored; a private message keeps its shape (a worker still tells them why), a
group message is left out, and an admitted one is stored as it came."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.access import Access
from bot.inbox.refused import WITHHELD, PlatformAccess
from memory.store.access import AccessRule

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
CANARY = "Ajolote3310canario"


def discord_message(author: str, guild: str | None, roles: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "9001", "channel_id": "55", "type": 0, "content": f"hola {CANARY}",
        "author": {"id": author, "username": "x"}, "mentions": [{"id": "1"}],
        "attachments": [{"id": "3", "filename": f"{CANARY}.png"}],
        "embeds": [{"description": CANARY}],
    }  # fmt: skip
    if guild is not None:
        data |= {"guild_id": guild, "member": {"roles": roles}}
    return data


async def screen(store: Any) -> PlatformAccess:
    rules = [AccessRule("discord", "role", "77", "block"),
             AccessRule("telegram", "user", "6666", "block")]  # fmt: skip
    for rule in rules:
        await store.set_access_rule(rule, True, "test", NOW)
    return PlatformAccess(Access(store, ["discord:1000"], lambda: NOW))


async def test_discord_a_refused_persons_words_are_not_kept(any_store: Any) -> None:
    platform = await screen(any_store)
    dm = await platform.discord("MESSAGE_CREATE", discord_message("5", None, []))
    assert dm is not None  # admitted: as it came
    assert CANARY in repr(dm)
    blocked_in_guild = discord_message("5", "900", ["77"])
    assert await platform.discord("MESSAGE_CREATE", blocked_in_guild) is None
    admitted = discord_message("6", "900", ["78"])
    assert await platform.discord("MESSAGE_CREATE", admitted) == admitted
    operator = discord_message("1000", "900", ["77"])  # ADMIN_IDS are never refused
    assert await platform.discord("MESSAGE_CREATE", operator) == operator


async def test_discord_a_blocked_dm_keeps_its_shape_without_its_words(any_store: Any) -> None:
    await any_store.set_access_rule(AccessRule("discord", "user", "5", "block"), True, "t", NOW)
    platform = await screen(any_store)
    kept = await platform.discord("MESSAGE_CREATE", discord_message("5", None, []))
    assert kept is not None and CANARY not in repr(kept)
    assert kept["content"] == WITHHELD and kept["author"]["id"] == "5"
    assert kept["channel_id"] == "55" and kept["id"] == "9001"


def telegram_update(user: int, chat: int, kind: str, said: str) -> dict[str, Any]:
    entities = [{"type": "bot_command", "offset": 0, "length": said.find(" ") % 99}]
    return {
        "update_id": 7,
        "message": {
            "message_id": 3, "date": 0, "text": said, "caption": CANARY,
            "chat": {"id": chat, "type": kind}, "from": {"id": user, "first_name": "B"},
            "entities": entities if said.startswith("/") else [],
        },
    }  # fmt: skip


async def test_telegram_refused_words_are_withheld_and_open_commands_kept(any_store: Any) -> None:
    platform = await screen(any_store)
    private = await platform.telegram(telegram_update(6666, 6666, "private", f"hola {CANARY}"))
    assert private is not None and CANARY not in repr(private)
    assert private["message"]["text"] == WITHHELD
    group = telegram_update(6666, -100, "supergroup", f"hola {CANARY}")
    assert await platform.telegram(group) is None
    memoria = telegram_update(6666, 6666, "private", "/memoria olvidar")
    assert await platform.telegram(memoria) == memoria  # a data right stays whole
    other = await platform.telegram(telegram_update(6666, -100, "group", f"/start {CANARY}"))
    assert other is not None and other["message"]["text"] == "/start"
    assert CANARY not in repr(other)
    admitted = telegram_update(42, 42, "private", f"hola {CANARY}")
    assert await platform.telegram(admitted) == admitted
