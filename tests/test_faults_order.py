"""Messages arriving at once: one user's are stored strictly in arrival order, every message is
answered exactly once (a burst by one call, on its newest message), and different users do not
wait for each other."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

from bot.answers import Answer, Caller
from bot.app import App
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fault_helpers import newest_user_text, query, request_texts, until

SEED = 4242


def caller(user: str) -> Caller:
    return Caller("telegram", user, f"Persona {user}", "dm", f"dm-{user}")


def echo(delays: dict[str, float] | None = None, rng: random.Random | None = None) -> Any:
    """The fake LLM answers each reply request with the text it answers, after a delay chosen
    per message (or at random), so later messages get every chance to overtake earlier ones."""

    def answer(body: dict[str, Any]) -> Any:
        if route_of(body) != "reply":
            return fake_default(body)
        text = newest_user_text(body)
        delay = (delays or {}).get(text, rng.choice((0, 0, 0.001, 0.004)) if rng else 0)
        return Delay(delay, Text(f"Re: {text}")) if delay else Text(f"Re: {text}")

    return answer


def thread_log(app: App) -> dict[str, list[tuple[str, str]]]:
    """Each platform user's turns, (role, text), in turn-id order."""
    rows = query(
        app.settings.database_target,
        "SELECT u.platform_user_id, t.role, t.text FROM turns t JOIN users u ON u.id = t.user_id"
        " ORDER BY t.id",
    )
    log: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for user, role, text in rows:
        log[user].append((role, text))
    return log


def user_texts(app: App, user: str) -> list[str]:
    return [text for role, text in thread_log(app)[user] if role == "user"]


async def test_arrival_order_holds_when_the_character_lookups_differ(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    # The channel is bound while its user writes: the first message's character look-up then
    # takes one more trip to the store than the second's. Without the arrival gate the second
    # reaches the engine, and the turn log, first.
    fake_anthropic.default = echo()
    group = Caller("telegram", "ana", "Ana", "group", "g1")
    character = (await app.commands.character_for(group)).id
    first = asyncio.ensure_future(app.commands.chat(group, "primero"))
    bind = asyncio.ensure_future(
        app.store.bind_channel("telegram", "g1", character, "telegram:admin", clock())
    )
    second = asyncio.ensure_future(app.commands.chat(group, "segundo"))
    answers = await asyncio.gather(first, second, bind)
    assert user_texts(app, "ana") == ["primero", "segundo"]
    assert answers[1] == Answer("Re: segundo")  # the newest message carries the reply


async def test_a_burst_is_stored_in_order_and_answered_in_one_call(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    # The first reply is held until the nine other messages are waiting for it: they arrive
    # while it is written, and are answered together by the next call, on the newest of them.
    texts = [f"mensaje {i}" for i in range(10)]
    stored = asyncio.Event()

    async def held_until_stored(body: dict[str, Any]) -> Text:
        await stored.wait()
        return Text("Re: mensaje 0")

    fake_anthropic.default = echo()
    fake_anthropic.queue(held_until_stored)
    first = asyncio.ensure_future(app.commands.chat(caller("ana"), texts[0]))
    await until(lambda: len(fake_anthropic.bodies()) == 1, what="the first reply's request")
    rest = [asyncio.ensure_future(app.commands.chat(caller("ana"), t)) for t in texts[1:]]
    await until(lambda: app.companion.messages_waiting() == 9, what="the nine others waiting")
    stored.set()
    answers = [a.text for a in await asyncio.gather(first, *rest)]
    assert answers == ["Re: mensaje 0", *[""] * 8, "Re: mensaje 9"]
    assert thread_log(app)["ana"] == [
        ("user", "mensaje 0"),
        ("assistant", "Re: mensaje 0"),
        *[("user", t) for t in texts[1:]],
        ("assistant", "Re: mensaje 9"),
    ]
    bodies = fake_anthropic.bodies()
    assert len(bodies) == 2
    assert request_texts(bodies[1])[-10:] == ["Re: mensaje 0", *texts[1:]]


async def test_a_slow_user_does_not_hold_up_another(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default = echo({"lento": 0.5})
    order: list[str] = []

    async def chat(user: str, text: str) -> Answer:
        answer = await app.commands.chat(caller(user), text)
        order.append(user)
        return answer

    await asyncio.gather(chat("ana", "lento"), chat("bea", "rápido"))
    assert order == ["bea", "ana"]


async def test_a_thousand_messages_of_fifty_users_interleaved(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    rng = random.Random(SEED)
    users, per_user = [f"u{i:02d}" for i in range(50)], 20
    fake_anthropic.default = echo(rng=rng)
    arrivals = [user for user in users for _ in range(per_user)]
    rng.shuffle(arrivals)  # a random interleaving; each user's messages stay numbered in order
    sent: dict[str, int] = defaultdict(int)
    tasks: list[tuple[str, str, asyncio.Task[Answer]]] = []
    for user in arrivals:
        text = f"{user} mensaje {sent[user]:02d}"
        sent[user] += 1
        task = asyncio.create_task(app.commands.chat(caller(user), text))
        tasks.append((user, text, task))
        if rng.random() < 0.2:  # now and then let the bot work before more arrive
            await asyncio.sleep(0)
    await asyncio.gather(*(task for _, _, task in tasks))
    await app.companion.drain()  # compactions, so that they are part of the run

    log = thread_log(app)
    assert sorted(log) == users
    replies = 0
    for user in users:
        expected = [f"{user} mensaje {i:02d}" for i in range(per_user)]
        assert user_texts(app, user) == expected, user  # every message stored, in order
        assert log[user][-1][0] == "assistant"  # and all of them answered
        # Each reply answers the newest message before it, and is delivered on that message.
        delivered = {t: task.result().text for u, t, task in tasks if u == user}
        for index, (role, text) in enumerate(log[user]):
            if role == "assistant":
                replies += 1
                asked = log[user][index - 1][1]
                assert text == f"Re: {asked}" == delivered[asked], user
        assert sum(bool(answer) for answer in delivered.values()) == len(
            [turn for turn in log[user] if turn[0] == "assistant"]
        )
    assert len(fake_anthropic.bodies()) == replies < 1000  # one call per burst, none repeated
