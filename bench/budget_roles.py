"""The budget bench on the real bot split (issue 36): `postgres_2_role_workers` of bench/budget.py.

One `companion run --role platform` and two `--role worker` processes (bench/scaleout_procs.py,
tests/scaleout_helpers.py) on a database of the throwaway PostgreSQL server of
tests/pg_server.py; the people write in Telegram groups of the fake Bot API (tests/fakes/), one
group per community, each message mentioning the bot; the workers' model is the fake Anthropic
Messages API (tests/fakes/anthropic_api.py), whose usage varies per answer (input 50-100% of the
request's size, 20-600 output tokens, some input read from or written to the cache).

Half the communities are busy (every person sends `heavy` messages: the group's daily budget
runs out), half quiet (one chatty person per group sends `heavy`, and runs out of their own
budget; the others send `light`, and the group stays within its budget). Every person sends at
once with the others, one message at a time (the next after the previous one's outcome), so
each message has one outcome: the model's answer, a refusal, or nothing (lost).

Measured from the database (`llm_usage` rows and `budget_counters`) and the fake Telegram's
sent messages: `overspend_max` per scope kind (in units of the largest single call's worst case,
from the fake's requests: every input token as a cache write, raised by half, plus the request's
`max_tokens`), `calls_after_exhaustion` (a call that started after its person's or community's
settled spend had reached the budget), `refused_without_reason` (a message not answered whose
reply is not the out-of-budget line naming the reset's date), and answered/refused/lost.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from tests.fakes.anthropic_api import FakeAnthropic, Text, route_of
from tests.fakes.telegram_api import FakeTelegram
from tests.fault_helpers import subprocess_env
from tests.scaleout_helpers import RoleProcess, watched

MODEL, PRICE_IN, PRICE_OUT = "claude-sonnet-5-5", 3.0, 15.0
FIRST_PERSON, FIRST_GROUP = 70_000, -100_900_000
OUTCOME_SECONDS = 180.0  # one message's answer on a machine loaded ten times its cores
# The out-of-budget line (bot/texts.py budget_out, es): whose budget, and the reset's date.
REFUSAL = re.compile(r"límite de uso (de tu cuenta|de este grupo|del bot).*a partir del (.+)\.")
MARKER = re.compile(r"\bu(\d+)-m(\d+)\b")
_NAMES = itertools.count(1)


@dataclass(frozen=True)
class Plan:
    people: int = 200
    communities: int = 20
    heavy: int = 10
    light: int = 1
    person_day: float = 0.022
    community_day: float = 0.08
    global_day: float = 100.0

    def community_of(self, person: int) -> int:
        return person % self.communities

    def busy(self, community: int) -> bool:
        return community < self.communities // 2

    def messages_of(self, person: int) -> int:
        community = self.community_of(person)
        chatty = person < self.communities  # the first person of each community
        return self.heavy if self.busy(community) or chatty else self.light


def cost(uncached: int, read: int, written: int, output: int) -> float:
    """The bot's default prices (PRICE_INPUT/OUTPUT_PER_MTOK), cache at Anthropic's ratios."""
    return (uncached * PRICE_IN + read * PRICE_IN * 0.1 + written * PRICE_IN * 1.25
            + output * PRICE_OUT) / 1e6  # fmt: skip


class VaryingAnthropic(FakeAnthropic):
    """The fake Messages API, each answer's usage drawn at random; replies name the newest
    message marker of the request, so the bench can tell which message each answers."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._rng = random.Random(seed)
        self.worst_max = 0.0

    def _message(self, body: dict[str, Any], item: Any) -> dict[str, Any]:
        if route_of(body) == "reply":
            found = MARKER.findall(json.dumps(body, ensure_ascii=False))
            newest = max(found, key=lambda m: int(m[1])) if found else ("0", "-1")
            item = Text(f"Re: u{newest[0]}-m{newest[1]} entendido")
        message = super()._message(body, item)
        size = len(json.dumps(body)) // 4
        sent = int(size * self._rng.uniform(0.5, 1.0))
        read = int(sent * self._rng.choice((0.0, 0.0, 0.5, 0.9)))
        written = int((sent - read) * self._rng.choice((0.0, 0.3)))
        output = min(int(body.get("max_tokens", 600)), self._rng.randint(20, 600))
        message["usage"] = {"input_tokens": sent - read - written, "output_tokens": output,
                            "cache_read_input_tokens": read,
                            "cache_creation_input_tokens": written}  # fmt: skip
        worst = cost(0, 0, int(size * 1.5), int(body.get("max_tokens", 600)))
        self.worst_max = max(self.worst_max, worst)
        return message


@dataclass
class Outcomes:
    answered: int = 0
    refused: int = 0
    refused_without_reason: int = 0
    lost: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


async def person_sends(telegram: FakeTelegram, plan: Plan, person: int, out: Outcomes) -> None:
    """One person's messages, privately (even ones) and in their group (odd ones, mentioning
    the bot), each after the previous one's outcome."""
    uid, group = FIRST_PERSON + person, FIRST_GROUP - plan.community_of(person)
    for n in range(plan.messages_of(person)):
        words = f"Hola, te cuento algo u{person}-m{n}"
        if n % 2 == 0:
            sent = telegram.send_private_text(uid, words, first_name=f"P{person}")
            chat = uid
        else:
            sent = telegram.send_group_text(group, uid, words, mention_bot=True,
                                            first_name=f"P{person}")  # fmt: skip
            chat = group
        mid = sent["message"]["message_id"]
        outcome = await _outcome(telegram, chat, mid, private=chat == uid)
        if outcome is None:
            out.lost += 1
        elif outcome.startswith("Re: u") or "Re: u" in outcome:
            out.answered += 1
        else:
            out.refused += 1
            found = REFUSAL.search(outcome)
            if found is None or not re.search(r"\d", found.group(2)):
                out.refused_without_reason += 1
            else:
                out.reasons[found.group(1)] = out.reasons.get(found.group(1), 0) + 1


async def _outcome(telegram: FakeTelegram, chat: int, mid: int, private: bool) -> str | None:
    """The text that answered message `mid`, None when none came. In a private chat, the
    bot's next message; in a group, its first reply to this message or to a later one (a scene
    answers a burst of messages on its newest, as tests/scaleout_helpers.Delivery reads it)."""

    def replies() -> list[dict[str, Any]]:
        return [m for m in telegram.sent_messages(chat)
                if (private and m["message_id"] > mid)
                or (m["reply_to_message_id"] or 0) >= mid]  # fmt: skip

    try:
        await telegram.wait_until(lambda: bool(replies()), timeout=OUTCOME_SECONDS)
    except AssertionError:
        return None
    return replies()[0]["text"] or ""


def role_env(folder: Path, url: str, telegram: FakeTelegram, model: FakeAnthropic,
             plan: Plan) -> dict[str, str]:  # fmt: skip
    return subprocess_env(
        folder / "unused.db",
        DATABASE_URL=url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_API_BASE_URL=telegram.url,
        LLM_PROVIDER="anthropic",
        LLM_MODEL=MODEL,
        ANTHROPIC_API_KEY=model.api_key,
        ANTHROPIC_BASE_URL=model.url,
        PRICE_INPUT_PER_MTOK=str(PRICE_IN),
        PRICE_OUTPUT_PER_MTOK=str(PRICE_OUT),
        BUDGET_GUEST_DAY=str(plan.person_day),
        BUDGET_COMMUNITY_DAY=str(plan.community_day),
        BUDGET_GLOBAL_DAY=str(plan.global_day),
        LOG_LEVEL="WARNING",
    )


USAGE = """
SELECT u.platform_user_id AS who, l.input_tokens, l.cache_read_tokens, l.cache_write_tokens,
       l.output_tokens, l.latency_ms, l.created_at
FROM llm_usage l LEFT JOIN users u ON u.id = l.user_id WHERE l.ok = 1
"""


async def from_database(url: str, plan: Plan, worst: float) -> dict[str, Any]:
    """Overspend per scope kind from the counters; calls after exhaustion from llm_usage."""
    con = await asyncpg.connect(url)
    try:
        counters = await con.fetch("SELECT scope, spent, refused FROM budget_counters")
        rows = await con.fetch(USAGE)
    finally:
        await con.close()
    limits = {"person": plan.person_day, "community": plan.community_day,
              "global": plan.global_day}  # fmt: skip
    over = {kind: 0.0 for kind in limits}
    for row in counters:
        kind = row["scope"].split(":", 1)[0].split("#")[0]
        over[kind] = max(over[kind], max(0.0, row["spent"] - limits[kind]) / worst)
    calls = []
    for row in rows:
        ended = datetime.fromisoformat(row["created_at"])
        began = ended - timedelta(milliseconds=row["latency_ms"])
        price = cost(row["input_tokens"], row["cache_read_tokens"], row["cache_write_tokens"],
                     row["output_tokens"])  # fmt: skip
        who = row["who"] or ""
        if who.startswith("scene:"):  # a group's scene: paid by the group (its community)
            scopes = [f"c{FIRST_GROUP - int(who.removeprefix('scene:'))}"]
        else:  # a private chat: paid by the person
            scopes = [f"p{int(who) - FIRST_PERSON}"] if who.isdigit() else []
        calls.append((began, ended, price, scopes))
    spent: dict[str, float] = {}
    exhausted: dict[str, datetime] = {}
    for _, ended, price, scopes in sorted(calls, key=lambda c: c[1]):
        for scope in scopes:
            spent[scope] = spent.get(scope, 0.0) + price
            limit = plan.person_day if scope[0] == "p" else plan.community_day
            if spent[scope] >= limit and scope not in exhausted:
                exhausted[scope] = ended
    after = sum(1 for began, _, _, scopes in calls
                if any(s in exhausted and began > exhausted[s] for s in scopes))  # fmt: skip
    return {
        "overspend_max": {k: round(v, 4) for k, v in over.items()},
        "calls_after_exhaustion": after,
        "model_calls": len(calls),
        # Refused at least once: the guard refuses a call whose worst case no longer fits.
        "people_out": sum(1 for r in counters if r["refused"] and r["scope"][0] == "p"),
        "communities_out": sum(1 for r in counters if r["refused"] and r["scope"][0] == "c"),
        "spent_usd": round(sum(c[2] for c in calls), 4),
    }


async def migrated_database(base: str) -> str:
    """A new database of the server, migrated once before any process starts."""
    from memory.store.postgres import PostgresStore

    name = f"bench_budget_roles_{next(_NAMES)}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f"CREATE DATABASE {name}")  # our own name, never input
    finally:
        await admin.close()
    await (await PostgresStore.open(f"{base}/{name}")).close()
    return f"{base}/{name}"


async def run_role_workers(plan: Plan, base: str, folder: Path) -> dict[str, Any]:
    """The whole set-up on the server at `base`: its figures (module docstring)."""
    url = await migrated_database(base)
    began = time.perf_counter()
    async with FakeTelegram() as telegram, VaryingAnthropic(7) as model:
        env = role_env(folder, url, telegram, model, plan)
        processes = [await RoleProcess.start(role, env, folder, n)
                     for n, role in enumerate(("platform", "worker", "worker"))]  # fmt: skip
        async with watched(processes):
            for process in processes:
                await process.ready(timeout=300.0)
            out = Outcomes()
            await asyncio.gather(*(person_sends(telegram, plan, p, out)
                                   for p in range(plan.people)))  # fmt: skip
            for process in processes:
                await process.stop()
    worst = model.worst_max or 1.0
    figures = await from_database(url, plan, worst)
    return figures | {
        "refused_without_reason": out.refused_without_reason,
        "messages": {
            "sent": sum(plan.messages_of(p) for p in range(plan.people)),
            "answered": out.answered,
            "refused": out.refused,
            "lost": out.lost,
        },
        "refusals": out.refused,
        "refusals_by_budget": out.reasons,
        "largest_worst_case_usd": round(worst, 6),
        "people": plan.people,
        "communities": plan.communities,
        "budgets_usd": {
            "person_day": plan.person_day,
            "community_day": plan.community_day,
            "global_day": plan.global_day,
        },
        "run_seconds": round(time.perf_counter() - began, 1),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


async def run_roles(plan: Plan, folder: Path) -> dict[str, Any]:
    """The set-up on a throwaway PostgreSQL server of its own (tests/pg_server.py)."""
    from tests.pg_server import running_server_async

    async with running_server_async() as base:
        return await run_role_workers(plan, base, folder)
