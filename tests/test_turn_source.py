"""A message run twice is stored once (issue 16): a worker killed after storing the user's turn
and before the message was marked answered, or Telegram redelivering an update after a crash,
runs the message again. Its turn is found by its source key (platform, chat, message id), in
the user's own thread only, and a reply already stored for it is sent again with no LLM call.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bot.app import open_app
from bot.config import Settings
from memory.models import Incoming, ReplySources, Thread
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import Error, FakeAnthropic, Text
from tests.fault_helpers import turns
from tests.helpers import dm

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)


def sent(text: str, message_id: str = "7", user: str = "u1") -> Incoming:
    return replace(dm(text, user=user), platform_message_id=message_id)


def roles(settings: Settings) -> list[tuple[str, str]]:
    target = settings.database_url.get_secret_value() if settings.database_url else None
    return [(role, text) for _, role, text in turns(target or settings.database_path)]


async def test_the_store_finds_a_keyed_turn_and_its_reply_in_its_own_thread(
    any_store: Any,
) -> None:
    store = any_store
    user = await store.upsert_user("telegram", "1", "Ane", NOW)
    other = await store.upsert_user("telegram", "2", "Bea", NOW)
    thread = Thread(user.id, "detective_bilbao", "dm")
    conversation = await store.start_conversation(thread, NOW)
    key = "telegram:1:7"
    first = await store.add_user_turn(conversation, "hola", NOW, "7", key)
    assert not first.existed and first.reply is None
    again = await store.add_user_turn(conversation, "hola", NOW, "7", key)
    assert (again.existed, again.turn.id, again.reply) == (True, first.turn.id, None)
    await store.add_turn(conversation, "tool", "lore", NOW)
    sources = ReplySources(0, (), None, (), (), NOW)
    reply = await store.add_reply(conversation, "Kaixo", NOW, sources)
    third = await store.add_user_turn(conversation, "hola", NOW, "7", key)
    assert third.reply is not None and (third.reply.id, third.reply.text) == (reply.id, "Kaixo")
    # The same key in another user's thread is that user's own message, never the first's.
    theirs_thread = Thread(other.id, "detective_bilbao", "dm")
    theirs = await store.start_conversation(theirs_thread, NOW)
    foreign = await store.add_user_turn(theirs, "otro", NOW, "7", key)
    assert not foreign.existed and foreign.turn.id != first.turn.id
    # A turn without a key (the terminal) is stored every time.
    plain = [await store.add_user_turn(conversation, "x", NOW, None, None) for _ in "ab"]
    assert not any(p.existed for p in plain) and plain[0].turn.id != plain[1].turn.id


async def test_a_reply_stored_but_never_sent_is_sent_again_without_the_llm(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Text("Kaixo, Ana."))
    async with open_app(settings, clock=clock, start_scheduler=False) as first:
        reply = await first.companion.handle(sent("hola"))
    calls = len(fake_anthropic.bodies())
    # The process died before the reply was sent: its successor runs the message again.
    async with open_app(settings, clock=clock, start_scheduler=False) as successor:
        again = await successor.companion.handle(sent("hola"))
    assert (again.text, again.turn_id) == (reply.text, reply.turn_id) == ("Kaixo, Ana.", 2)
    assert len(fake_anthropic.bodies()) == calls  # no LLM call
    assert roles(settings) == [("user", "hola"), ("assistant", "Kaixo, Ana.")]


async def test_a_turn_stored_without_a_reply_is_answered_once(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Error(529, "overloaded_error"))  # the first process gets no reply
    async with open_app(settings, clock=clock, start_scheduler=False) as first:
        failed = await first.companion.handle(sent("hola"))
    assert not failed.ok
    fake_anthropic.queue(Text("Kaixo."))
    async with open_app(settings, clock=clock, start_scheduler=False) as successor:
        reply = await successor.companion.handle(sent("hola"))
        # The next message is new: stored, and answered by the LLM.
        fake_anthropic.queue(Text("Bai."))
        following = await successor.companion.handle(sent("y ahora", message_id="8"))
    assert (reply.text, following.text) == ("Kaixo.", "Bai.")
    assert roles(settings) == [
        ("user", "hola"),
        ("assistant", "Kaixo."),
        ("user", "y ahora"),
        ("assistant", "Bai."),
    ]
    # The reply's prompt held the user's message once.
    texts = [str(m["content"]) for m in fake_anthropic.bodies()[-2]["messages"]]
    assert sum("hola" in t for t in texts) == 1


async def test_a_key_never_reaches_another_users_turn(
    settings: Settings, clock: FakeClock, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(Text("Para Ana."), Text("Para Bea."))
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.companion.handle(sent("hola"))
        # Bea's message names the same chat and id (a forged or colliding key): her own turn.
        forged = replace(sent("hola", user="u2"), channel_id="dm-u1")
        theirs = await app.companion.handle(forged)
    assert theirs.text == "Para Bea."
    assert [r for r, _ in roles(settings)] == ["user", "assistant", "user", "assistant"]
