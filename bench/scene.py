"""A group scene over 300 human messages through the real engine: calls per message, prompt
growth and prompt-cache use per character, and the scene's memory rules counted.

Four people and three characters (the two shipped ones, then tests/scene_cast/tabernera.yaml
joining midway with the real `/escena añadir`, SceneRoom.add) in one group, every message
handed to `app.commands.scenes.hear` as the adapters hand it (a Caller per person; a reply to
a character's line carries its name), through `open_app` (real store on a temporary SQLite
file, the scene engine, summaries, compactions, the scene's extraction) with a fake model
(bench/scene_llm.py) whose request bodies run through the prompt-cache simulator on the fake
clock. The script (bench/scene_script.py) is seeded; people write every 20-70 s (`--gaps`),
each model call takes 6 s, and idle gaps of 3 hours end the conversations (the scheduler's
sweep is run when it would first fire), so the extraction runs after each.

Before the first message every person gets, with each character, a fact learned in a private
chat and a fact learned in this group: the first must never appear in a scene prompt, the
second shows that the people block is there to be looked at.

Usage: .venv/bin/python bench/scene.py [--messages 300] [--seed 7] [--conversation 50]
       [--join-at N] [--min-cacheable 1024] [--gaps 20:70] [--retrieval auto|tool|off]
       [--json] [--excerpt FROM:TO]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.cache_sim import PromptCache  # noqa: E402
from bench.scene_chronicle import forget_one, read_chronicles  # noqa: E402
from bench.scene_llm import SceneLLM  # noqa: E402
from bench.scene_report import format_table, summarise, transcript  # noqa: E402
from bench.scene_run import SceneRun, SpokenLine  # noqa: E402
from bench.scene_script import (  # noqa: E402
    CAST,
    FIRST_CAST,
    LATE,
    MAGGIE,
    PEOPLE,
    Claim,
    HumanMessage,
    Person,
    Role,
    SceneScript,
    build_script,
)
from bench.scripted_llm import BenchClock  # noqa: E402
from bot.answers import Caller  # noqa: E402
from bot.app import App, open_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from memory.engine.llm import TextSink  # noqa: E402
from memory.engine.tokens import TokenEstimator  # noqa: E402
from memory.models import Fact, Reply, Thread  # noqa: E402
from memory.scene.engine import scene_owner_id, scene_scope  # noqa: E402

PLATFORM, CHANNEL = "bench", "-100777"
START = datetime(2026, 3, 6, 17, 0, tzinfo=UTC)
ADMIN = PEOPLE[0]
SHIPPED_DIR = REPO / "characters"
TABERNERA = REPO / "tests" / "scene_cast" / "tabernera.yaml"
# Planted before the first message, with every character: (key, value) per person.
PRIVATE = {
    "Ana": ("pets", "una iguana llamada Rulo"),
    "Bea": ("hobbies", "colecciona sellos de Andorra"),
    "Bob": ("other", "tiene un tatuaje de un pulpo"),
    "Carlos": ("health", "alergia al kiwi"),
}
GROUP = {
    "Ana": ("likes", "los pintxos de bacalao"),
    "Bea": ("likes", "el txakoli de Getaria"),
    "Bob": ("likes", "las rabas del puerto"),
    "Carlos": ("likes", "el queso Idiazabal"),
}


class RecordingSink:
    """The group as the engine writes to it: every character line, in order.

    `settle` runs after each line: a line stored in the other characters' copies may start a
    compaction of one of them, which would otherwise race the next character's reply (the
    order of the two requests, and so the figures, would change from run to run); the bench
    lets it finish first, as it lets a turn's compactions finish before the next message."""

    def __init__(self, settle: Callable[[], Awaitable[None]] | None = None) -> None:
        self.lines: list[SpokenLine] = []
        self.message = 0
        self._settle = settle

    def live(self, character_id: str) -> TextSink | None:
        return None  # no streaming: the bench reads whole lines

    async def send(self, character_id: str, reply: Reply) -> None:
        self.lines.append(SpokenLine(self.message, character_id, reply.text, reply.ok))
        if self._settle is not None:
            await self._settle()


def cast_folder(folder: Path, retrieval: str | None = None) -> Path:
    """The shipped characters and the scene's third one, in a folder of their own; with
    `retrieval`, every copy's recall mode set to it (an experiment: `tool` shows what the
    automatic fragments cost the cache)."""
    cast = folder / "characters"
    cast.mkdir()
    for role in FIRST_CAST:
        shutil.copy(SHIPPED_DIR / f"{role.id}.yaml", cast / f"{role.id}.yaml")
    shutil.copy(TABERNERA, cast / f"{LATE.id}.yaml")
    if retrieval is not None:
        for sheet in cast.glob("*.yaml"):
            sheet.write_text(f"{sheet.read_text()}\nretrieval: {retrieval}\n")
    return cast


def bench_settings(folder: Path, seed: int, retrieval: str | None = None) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_path=folder / "bench.db",
        database_url=None,  # never the environment's: a replay needs a database of its own
        characters_dir=cast_folder(folder, retrieval),
        llm_model="claude-bench",
        default_character=FIRST_CAST[0].id,
        admin_ids=[f"{PLATFORM}:{ADMIN.user_id}"],
        scene_seed=seed,
        # The rate limit counts real seconds; the replay runs hundreds of messages a minute.
        rate_limit_messages=1_000_000,
    )


def caller(person: Person) -> Caller:
    return Caller(PLATFORM, person.user_id, person.name, "group", CHANNEL)


def claims_of(script: SceneScript) -> tuple[dict[str, Claim], frozenset[str]]:
    claims = {m.text: m.claim for m in script.messages if m.claim is not None}
    mixed = frozenset(m.text for m in script.messages if m.mixed)
    return claims, mixed


async def replay(
    script: SceneScript,
    folder: Path,
    seed: int,
    min_cacheable: int,
    retrieval: str | None = None,
) -> SceneRun:
    tokens = TokenEstimator()
    clock = BenchClock(START)
    settings = bench_settings(folder, seed, retrieval)
    claims, mixed = claims_of(script)
    llm = SceneLLM(clock, tokens, PromptCache(min_cacheable), claims, mixed, seed)
    timeout = timedelta(minutes=settings.inactivity_timeout_minutes)
    async with open_app(settings, llm=llm, clock=clock, start_scheduler=False) as app:
        sink = RecordingSink(app.companion.drain)
        person_ids = await plant_facts(app, clock())
        await drive(app, script, llm, sink, clock, timeout)
        run = SceneRun(script, llm.requests, sink.lines, engine_figures(settings, min_cacheable))
        run.person_ids, run.foreign_attempts = person_ids, llm.foreign_attempts
        await collect(app, run)
        # After the figures above: one person forgets the scene, the stories are read again.
        await forget_one(app, llm.chronicler.figures, [caller(p) for p in PEOPLE])
        cap, traps = settings.scene_journey_max_tokens, llm.chronicler.traps
        run.chronicles = llm.chronicler.figures.figures(cap, traps)
    run.rejections = rejection_reasons(settings.database_path)
    return run


async def plant_facts(app: App, now: datetime) -> dict[str, int]:
    """A private-chat fact and a fact of this group for every person, with every character."""
    scope = Thread(0, "", scene_scope(PLATFORM, CHANNEL)).fact_scope
    facts: list[Fact] = []
    ids: dict[str, int] = {}
    for person in PEOPLE:
        user = await app.store.upsert_user(PLATFORM, person.user_id, person.name, now)
        ids[person.name] = user.id
        for role in CAST:
            for where, (key, value) in (("dm", PRIVATE[person.name]), (scope, GROUP[person.name])):
                facts.append(
                    Fact(0, user.id, role.id, "semantic", key, value, "stated", where, (),
                         "days:180", None, now, now, None)
                )  # fmt: skip
    await app.store.apply_fact_changes(facts, [], [], [], None, now)
    return ids


async def drive(
    app: App,
    script: SceneScript,
    llm: SceneLLM,
    sink: RecordingSink,
    clock: BenchClock,
    idle_after: timedelta,
) -> None:
    """Every message of the script through the scene, as the adapters hand them over; the
    third character joins just before message `join_at`."""
    room = app.commands.scenes
    await join(app, MAGGIE)
    llm.present = FIRST_CAST
    for message in script.messages:
        if message.index == script.join_at:
            await join(app, LATE)
            llm.present = CAST
        await wait_for(app, clock, message, idle_after, llm)
        llm.message = sink.message = message.index
        llm.topic = message.topic
        replied = replied_name(message, sink)
        heard = await room.hear(
            caller(message.person),
            message.text,
            sink,
            mentioned=replied is None and message.kind != "named",
            replied_name=replied,
        )
        if heard is None:
            raise RuntimeError(f"message {message.index} was not heard: {message.text!r}")
        result = await heard
        if result.refusal is not None:
            raise RuntimeError(f"message {message.index} refused: {result.refusal.text}")
        # A summary call takes seconds and the next message comes later: let the compaction
        # the turn scheduled finish first, as it would in production.
        await app.companion.drain()
    await idle_sweep(app, clock, idle_after, llm)  # the last conversation's extraction


async def join(app: App, role: Role) -> None:
    answer = await app.commands.scenes.add(caller(ADMIN), role.id)
    if not answer.ok:
        raise RuntimeError(f"{role.id} could not join: {answer.text}")


def replied_name(message: HumanMessage, sink: RecordingSink) -> str | None:
    """A reply is to the latest character line, under the name the group saw it with."""
    if message.kind != "reply" or not sink.lines:
        return None
    return next(r.name for r in CAST if r.id == sink.lines[-1].character)


async def wait_for(
    app: App, clock: BenchClock, message: HumanMessage, idle_after: timedelta, llm: SceneLLM
) -> None:
    """Move the clock to the message; across an idle gap, run the sweep when it would first
    see the conversation idle (it ends it, and the scene's extraction runs)."""
    if message.opens_conversation and message.index > 1:
        await idle_sweep(app, clock, idle_after, llm)
        clock.now += max(message.gap - idle_after - timedelta(minutes=1), timedelta(0))
    else:
        clock.advance(message.gap)


async def idle_sweep(app: App, clock: BenchClock, idle_after: timedelta, llm: SceneLLM) -> None:
    clock.now += idle_after + timedelta(minutes=1)
    await app.sweep()
    await app.companion.drain()
    await read_chronicles(app, llm.chronicler.figures, PLATFORM, CHANNEL)  # each version


async def collect(app: App, run: SceneRun) -> None:
    """The facts the scene's extraction stored, and who said each line of every copy."""
    owner = await app.store.find_user(PLATFORM, scene_owner_id(CHANNEL))
    assert owner is not None
    scope = scene_scope(PLATFORM, CHANNEL)
    for role in CAST:
        thread = Thread(owner.id, role.id, scope)
        for turn in await app.store.turns_after(thread, 0):
            speaker = turn.speaker
            run.speakers[turn.id] = speaker.person_id if speaker is not None else None
        for person_id in run.person_ids.values():
            stored = await app.store.facts(person_id, role.id, thread.fact_scope)
            run.facts += [f for f in stored if f.evidence]  # the planted ones cite nothing


def rejection_reasons(database: Path) -> list[str]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as con:
        return [reason for (reason,) in con.execute("SELECT reason FROM memory_rejections")]


def engine_figures(settings: Settings, min_cacheable: int) -> dict[str, Any]:
    return {
        "scene_max_replies": settings.scene_max_replies,
        "window_keep_turns": settings.window_keep_turns,
        "window_trigger_turns": settings.window_trigger_turns,
        "summary_cap_tokens": settings.summary_cap_tokens,
        "budget_profile_tokens": settings.budget_profile_tokens,
        "inactivity_timeout_minutes": settings.inactivity_timeout_minutes,
        "min_cacheable_tokens": min_cacheable,
        "scene_journey_max_tokens": settings.scene_journey_max_tokens,
    }


def run(
    messages: int = 300,
    seed: int = 7,
    conversation: int = 50,
    join_at: int | None = None,
    min_cacheable: int = 1024,
    gaps: tuple[int, int] = (20, 70),
    retrieval: str | None = None,
) -> tuple[dict[str, Any], SceneRun]:
    started = time.perf_counter()
    script = build_script(messages, seed, conversation, join_at, gaps)
    with tempfile.TemporaryDirectory(prefix="scene-bench-") as folder:
        replayed = asyncio.run(replay(script, Path(folder), seed, min_cacheable, retrieval))
    result = summarise(replayed, private=[v for _, v in PRIVATE.values()],
                       group=[v for _, v in GROUP.values()])  # fmt: skip
    result["seed"] = seed
    result["message_gap_seconds"] = list(gaps)
    result["retrieval"] = retrieval or "as each sheet says (auto)"
    result["run_seconds"] = round(time.perf_counter() - started, 2)
    return result, replayed


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--conversation", type=int, default=50, help="messages per conversation")
    parser.add_argument("--join-at", type=int, default=None, help="default: midway")
    parser.add_argument("--min-cacheable", type=int, default=1024)
    parser.add_argument("--gaps", default="20:70", help="seconds between messages, MIN:MAX")
    parser.add_argument(
        "--retrieval",
        choices=("auto", "tool", "off"),
        default=None,
        help="an experiment: every character's recall mode (default: its sheet's)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--excerpt", default="", help="FROM:TO human messages, as the group saw")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    low, _, high = args.gaps.partition(":")
    gaps = (int(low), int(high or low))
    result, replayed = run(
        args.messages,
        args.seed,
        args.conversation,
        args.join_at,
        args.min_cacheable,
        gaps,
        args.retrieval,
    )
    print(json.dumps(result, ensure_ascii=False) if args.json else format_table(result))
    if args.excerpt:
        first, _, last = args.excerpt.partition(":")
        print(transcript(replayed, int(first), int(last or first)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
