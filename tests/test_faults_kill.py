"""SIGKILL at random points of a scripted terminal conversation: nothing the user saw is lost,
nothing is stored twice, the database stays sound, and the next run carries on.

Two lanes (each its own database and bot process) run side by side to keep the file fast; each
lane kills its bot 12 times, in a seeded random order of four kinds of kill point:

- ``llm``: while the fake LLM is answering (the request arrived; the answer is held back);
- ``printed``: right after a reply line was printed;
- ``compaction``: while the compaction's summary request is being answered;
- ``sent``: a random few milliseconds after a line was written, wherever that lands.

Waiting is always on an event (a request reaching the fake, a line on stdout); only the ``sent``
kind sleeps, on purpose, to land at an arbitrary point.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_api import Delay, FakeAnthropic, Text, ToolUse, route_of
from tests.fault_helpers import (
    BotProcess,
    integrity,
    newest_user_text,
    request_texts,
    subprocess_env,
    summary_cover,
    turns,
    until,
)
from tests.helpers import summary_input
from tests.patience import PATIENCE

SEED = 20261102
KILLS_PER_LANE = 12
KINDS = ("llm", "printed", "compaction", "sent")
TRIGGER, KEEP = 6, 2  # compaction every couple of exchanges
HELD = 3.0  # how long a held answer would take: the bot is always killed before it comes
SLOW = "[slow]"


def reply_to(text: str) -> str:
    return f"Re: {text}"


@dataclass
class Lane:
    name: str
    database: Path
    rng: random.Random
    hold_summary: bool = False
    sent: list[str] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)
    kills: Counter[str] = field(default_factory=Counter)
    landings: Counter[str] = field(default_factory=Counter)  # where the "sent" kills landed

    def mine(self, body: dict[str, Any]) -> bool:
        return f"{self.name}-m" in json.dumps(body, ensure_ascii=False)

    def next_text(self, slow: bool = False) -> str:
        text = f"{self.name}-m{len(self.sent)} sigo con el caso{' ' + SLOW if slow else ''}"
        self.sent.append(text)
        return text


class Responder:
    """The fake LLM's answers: a reply names the message it answers; held answers never come
    before the kill."""

    def __init__(self, lanes: list[Lane]) -> None:
        self.lanes = lanes

    def __call__(self, body: dict[str, Any]) -> Any:
        route = route_of(body)
        if route == "reply":
            text = newest_user_text(body)
            answer = Text(reply_to(text))
            return Delay(HELD, answer) if SLOW in text else answer
        if route == "write_summary":
            folded = body["messages"][0]["content"][0]["text"].split("Turns to fold in:\n[")[1]
            first_id = int(folded.split("]")[0])
            summary = ToolUse(
                "write_summary", summary_input(open_threads=[f"el caso sigue {{cite:{first_id}}}"])
            )
            lane = next(lane for lane in self.lanes if lane.mine(body))
            if lane.hold_summary:
                lane.hold_summary = False
                return Delay(HELD, summary)
            return summary
        return ToolUse(route, {"operations": []})


def check_after_kill(lane: Lane, process: BotProcess) -> None:
    """The invariants that must hold whatever point the kill landed on."""
    assert integrity(lane.database) == "ok"
    log = turns(lane.database)
    users = [text for _, role, text in log if role == "user"]
    replies = [text for _, role, text in log if role == "assistant"]
    assert all(count == 1 for count in Counter(users).values()), f"duplicated user turn: {users}"
    assert all(count == 1 for count in Counter(replies).values()), f"duplicated reply: {replies}"
    assert set(users) <= set(lane.sent), "a user turn nobody sent"
    lane.printed += [line for line in process.said() if line.startswith("Re: ")]
    by_text = {text: index for index, (_, role, text) in enumerate(log) if role == "assistant"}
    for reply in lane.printed:
        assert reply in by_text, f"printed but not stored: {reply!r}"
        index = by_text[reply]
        # ...and stored right after the user turn it answers.
        assert index > 0 and log[index - 1][1:] == ("user", reply.removeprefix("Re: "))


def check_continues(
    window: list[str], folded: list[str], last_seen: str | None, first_body: dict[str, Any]
) -> None:
    """The run's first request carries the stored window (the turns after the newest summary)
    in order, then the new message: nothing lost, nothing doubled."""
    texts = request_texts(first_body)
    new = texts[-1]
    assert texts[-1 - len(window) :] == [*window, new], (window, texts)
    if last_seen is not None:  # the last reply seen before the kill is there, or summarised
        assert last_seen in window or last_seen in folded, last_seen


def _landing(lane: Lane, last: tuple[str, str]) -> str:
    if last == ("user", lane.sent[-1]):
        return "question stored"
    if last == ("assistant", reply_to(lane.sent[-1])):
        return "answer stored"
    return "before storing"


async def exchange(process: BotProcess, lane: Lane) -> None:
    text = lane.next_text()
    await process.send(text)
    await process.wait_for_line(f"Koldo Arrieta: {reply_to(text)}")


async def run_lane(lane: Lane, fake: FakeAnthropic, tmp_path: Path) -> None:
    env = subprocess_env(
        lane.database,
        ANTHROPIC_API_KEY=fake.api_key,
        ANTHROPIC_BASE_URL=fake.url,
        LLM_TIMEOUT_SECONDS=str(PATIENCE),  # the fake answers; only a hang may end it
        WINDOW_TRIGGER_TURNS=str(TRIGGER),
        WINDOW_KEEP_TURNS=str(KEEP),
        LOG_LEVEL="WARNING",
    )
    kinds = [KINDS[i % len(KINDS)] for i in range(KILLS_PER_LANE)]
    lane.rng.shuffle(kinds)
    args = ("chat", "--character", "detective_bilbao", "--user", lane.name)

    def bodies(route: str = "reply") -> list[dict[str, Any]]:
        return [body for body in fake.bodies(route) if lane.mine(body)]

    for run, kind in enumerate([*kinds, "final"]):
        cover = summary_cover(lane.database)
        window = [text for id_, _, text in turns(lane.database) if id_ > cover]
        folded = [text for id_, _, text in turns(lane.database) if id_ <= cover]
        seen, summaries = len(bodies()), len(bodies("write_summary"))
        first_sent = len(lane.sent)
        last_seen = lane.printed[-1] if lane.printed else None
        lane.hold_summary = kind == "compaction"
        process = await BotProcess.start(
            *args, env=env, stderr_path=tmp_path / f"{lane.name}-{run}.err"
        )
        for _ in range(lane.rng.randint(0, 2)):
            await exchange(process, lane)
        if kind == "llm":
            await process.send(lane.next_text(slow=True))
            await until(lambda n=seen: len(bodies()) > n and SLOW in newest_user_text(bodies()[-1]))
        elif kind == "printed":
            await exchange(process, lane)
        elif kind == "compaction":
            # No compaction finishes in this run (the first one is held), so the window is the
            # stored one plus this run's turns: compaction is due once it reaches the trigger.
            await exchange(process, lane)
            while len([t for t in turns(lane.database) if t[0] > cover]) < TRIGGER:
                await exchange(process, lane)
            await until(lambda n=summaries: len(bodies("write_summary")) > n, what="compaction")
        elif kind == "sent":
            await process.send(lane.next_text())
            await asyncio.sleep(lane.rng.choice((0, 0.002, 0.005, 0.01, 0.02)))
        else:  # the final run leaves cleanly
            await exchange(process, lane)
            assert await process.close() == 0, process.stderr()
        if kind != "final":
            assert await process.kill() == -9
            lane.kills[kind] += 1
        check_after_kill(lane, process)
        last = turns(lane.database)[-1][1:]
        if kind == "llm":  # the question is kept, unanswered
            assert last == ("user", lane.sent[-1])
        elif kind in ("printed", "final"):
            assert last == ("assistant", reply_to(lane.sent[-1]))
        elif kind == "compaction":  # the held summary was never stored: the old one stands
            assert summary_cover(lane.database) == cover
        else:
            lane.landings[_landing(lane, last)] += 1
        this_run = [b for b in bodies()[seen:] if newest_user_text(b) in lane.sent[first_sent:]]
        if this_run:
            check_continues(window, folded, last_seen, this_run[0])
        assert lane.hold_summary is False or kind != "compaction"


# The SQLite file's own durability (integrity_check after each kill); on PostgreSQL the
# workers' kill test of tests/test_workers*.py covers it.
@pytest.mark.sqlite_only
async def test_sigkill_at_random_points_loses_and_doubles_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    lanes = [
        Lane(name, tmp_path / name / "c.db", random.Random(rng.random()))
        for name in ("north", "south")
    ]
    for lane in lanes:
        lane.database.parent.mkdir()
    async with FakeAnthropic() as fake:
        fake.default = Responder(lanes)
        await asyncio.gather(*(run_lane(lane, fake, lane.database.parent) for lane in lanes))
    kills = sum((lane.kills for lane in lanes), Counter())
    landings = sum((lane.landings for lane in lanes), Counter())
    assert sum(kills.values()) >= 20 and all(kills[kind] >= 5 for kind in KINDS), (kills, landings)
    for lane in lanes:
        assert lane.printed, "no reply was ever printed"
        # Every line sent before a kill that was stored got its turn exactly once; the last
        # run (no kill) answered its message.
        assert lane.printed[-1] == reply_to(lane.sent[-1])
        assert len(turns(lane.database)) >= len(lane.printed) * 2


async def test_thread_growing_after_a_restart_keeps_being_answered(
    tmp_path: Path, fake_anthropic: FakeAnthropic, clock: Any
) -> None:
    """Found by the kills above: after a restart the recall statistics are cached at the
    thread's size then; as the thread grew, a word could be in more turns than that, its
    weight went negative and ranking crashed the reply (a TypeError on complex numbers)."""
    from bot.app import open_app
    from tests.conftest import make_settings
    from tests.fault_helpers import echo_llm
    from tests.helpers import dm

    fake_anthropic.default = echo_llm
    settings = make_settings(tmp_path, fake_anthropic)
    sent = 0
    for messages in (1, 3):  # one message, a restart, three more
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            for _ in range(messages):
                text = f"m{sent} sigo con el caso"
                reply = await app.companion.handle(dm(text, name="Ana"))
                assert reply.ok and reply.text == reply_to(text)
                sent += 1
