"""Messages arriving at once: one user's are handled strictly in arrival order, every message is
answered exactly once, and different users do not wait for each other."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

from bot.answers import Answer, Caller
from bot.app import App
from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text, route_of
from tests.fakes.anthropic_api import _default as fake_default
from tests.fault_helpers import newest_user_text, query

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
        app.settings.database_path,
        "SELECT u.platform_user_id, t.role, t.text FROM turns t JOIN users u ON u.id = t.user_id"
        " ORDER BY t.id",
    )
    log: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for user, role, text in rows:
        log[user].append((role, text))
    return log


async def test_two_messages_at_the_same_instant_keep_their_order(
    app: App, fake_anthropic: FakeAnthropic
) -> None:
    # The first answer is the slow one: were the two handled concurrently, the second would
    # be answered (and stored) first.
    fake_anthropic.default = echo({"primero": 0.3})
    first, second = await asyncio.gather(
        app.commands.chat(caller("ana"), "primero"), app.commands.chat(caller("ana"), "segundo")
    )
    assert (first.text, second.text) == ("Re: primero", "Re: segundo")
    assert thread_log(app)["ana"] == [
        ("user", "primero"),
        ("assistant", "Re: primero"),
        ("user", "segundo"),
        ("assistant", "Re: segundo"),
    ]
    # The second request was made after the first was answered, and carries that exchange.
    texts = [b["text"] for m in fake_anthropic.bodies()[1]["messages"] for b in m["content"]]
    assert texts[-4:-2] == ["Re: primero", "segundo"]


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

    for _user, text, task in tasks:
        answer = task.result()
        assert answer.ok and answer.text == f"Re: {text}"
    assert len(fake_anthropic.bodies()) == 1000  # one request per message, none repeated
    log = thread_log(app)
    assert sorted(log) == users
    for user in users:
        expected = [f"{user} mensaje {i:02d}" for i in range(per_user)]
        pairs = [(("user", t), ("assistant", f"Re: {t}")) for t in expected]
        assert log[user] == [turn for pair in pairs for turn in pair], user
