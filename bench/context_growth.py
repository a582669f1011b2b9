"""Prompt size and prompt-cache use over a long conversation, against sending the full history.

Replays LoCoMo dialogue through the real engine (`open_app`: real Store on a temporary SQLite
file, the repo's characters, the Summariser and compaction, the profile extraction) with a
scripted in-process LLM, records the exact Anthropic body of every request, and runs those bodies
through a prefix-cache simulator on the fake clock. Compactions are let finish before the next
message, and between sessions the scheduler's idle sweep is run when it would first fire (the
scheduler itself is not started), so the profile of the ended session is in the next one.

Counting (TokenEstimator, ratio 1.0, over text only; JSON framing and role markers are not
counted, on either side of a comparison):
- prompt tokens: every text block of the reply body: system blocks, message blocks and tool
  definitions (as canonical JSON; reply requests carry none today);
- full history at turn t: the rendered character sheet + the pinned opening message(s) + the
  text of every earlier user message and character reply + the new user message, each counted
  on its own; no profile, summary, time line or reminder;
- cost: cache reads 0.1x, cache writes 1.25x (both TTLs), plain input 1x; full history 1x with no
  cache;
- all calls (`cache_read_share_all_calls`, by kind, and their cost): every request of the main
  replay, replies and background calls (compactions, extractions, the journey) alike.
LLM_SHARE_REPLY_PREFIX=true in the environment lends the replies' prefix to the background calls.

Usage: .venv/bin/python bench/context_growth.py [LOCOMO_JSON] [--conversation N] [--turns 300]
       [--min-cacheable 1024] [--checkpoints 20,60,120,300] [--json] [--journey]
With --journey each ended conversation is chronicled and the journey is in the next one's
block 2; without, the chronicler's calls fail as a provider's would, and no journey is shown.
Settings come from the environment as for the bot (no .env file): WINDOW_TRIGGER_TURNS=40
changes the run, and the table prints the engine settings used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.cache_sim import PromptCache, cacheable_prefix_tokens  # noqa: E402
from bench.common import percentile, target  # noqa: E402
from bench.context_growth_report import (  # noqa: E402
    READ_WEIGHT,
    SHORT_WORDS,
    WRITE_WEIGHT,
    TurnFigures,
    checkpoint_figures,
    format_table,
    targets,
)
from bench.locomo import Script, ScriptedTurn, load_script  # noqa: E402
from bench.scripted_llm import BenchClock, RecordedRequest, ScriptedLLM  # noqa: E402
from bot.app import App, open_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from cards.character import opening_messages_for  # noqa: E402
from memory.engine.tokens import TokenEstimator  # noqa: E402
from memory.models import Incoming  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo_dev.json"
CHARACTER = "lighthouse_keeper"
SHIPPED = ("lighthouse_keeper", "detective_bilbao")  # characters/ as the project ships it
SHORT_READ_TARGET = 0.85
ALL_CALLS_TARGET = 0.85  # with the journey on (issue 38 item 6)
CHECKPOINTS = (20, 60, 120, 300)


@dataclass(frozen=True)
class Replay:
    turns: list[TurnFigures]
    calls: dict[str, int]  # LLM requests by kind
    engine: dict[str, Any]
    all_calls: dict[str, Any]  # the cache over every call of the conversation's life


def bench_settings(folder: Path) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_path=folder / "bench.db",
        # Never a DATABASE_URL of the environment (make test-postgres sets one per test): each
        # replay needs a database of its own, or a second replay would see the first's profile.
        database_url=None,
        characters_dir=REPO / "characters",
        llm_model="claude-bench",
    )


def engine_figures(settings: Settings, min_cacheable: int) -> dict[str, Any]:
    return {
        "window_keep_turns": settings.window_keep_turns,
        "window_trigger_turns": settings.window_trigger_turns,
        "summary_cap_tokens": settings.summary_cap_tokens,
        "budget_window_tokens": settings.budget_window_tokens,
        "inactivity_timeout_minutes": settings.inactivity_timeout_minutes,
        "min_cacheable_tokens": min_cacheable,
        "journey_max_tokens": settings.journey_max_tokens,
    }


async def replay(
    script: Script,
    min_cacheable: int,
    folder: Path,
    character_id: str = CHARACTER,
    journey: bool = False,
) -> Replay:
    """Drive every scripted turn through the engine, as one user talking to one character;
    with `journey`, each ended conversation is chronicled (bench/journey_script.py) and the
    journey is in block 2 of the next one, as the real renderer puts it."""
    tokens = TokenEstimator()  # the bench's own: the engine calibrates a separate one
    clock = BenchClock(script.turns[0].at)
    settings = bench_settings(folder)
    cap = settings.journey_max_tokens if journey else None
    llm = ScriptedLLM(clock, tokens, PromptCache(min_cacheable), journey_cap=cap)
    timeout = timedelta(minutes=settings.inactivity_timeout_minutes)
    figures: list[TurnFigures] = []
    async with open_app(settings, llm=llm, clock=clock, start_scheduler=False) as app:
        character = app.companion.character(character_id)
        history = sum(tokens.count(str(m.text)) for m in opening_messages_for(character, None))
        previous_summary: str | None = None
        for turn in script.turns:
            if turn.at - clock.now > timeout:
                await idle_sweep(app, clock, timeout)
            clock.now = max(clock.now, turn.at)
            llm.next_reply = turn.reply_text
            reply = await app.companion.handle(incoming(script.user_name, turn, character_id))
            if not reply.ok:
                raise RuntimeError(f"turn {turn.index}: the engine answered with an apology")
            # A summary call takes seconds and the next message comes a minute later: let the
            # compaction the reply scheduled finish first, as it would in production.
            await app.companion.drain()
            request = next(r for r in reversed(llm.requests) if r.kind == "reply")
            figures.append(turn_figures(turn, request, history, previous_summary, tokens))
            previous_summary = request.body["system"][2]["text"]
            history += tokens.count(turn.user_text) + tokens.count(turn.reply_text)
    calls = Counter(r.kind for r in llm.requests)
    engine = engine_figures(settings, min_cacheable)
    return Replay(figures, dict(calls), engine, all_calls_figures(llm.requests))


def all_calls_figures(requests: Sequence[RecordedRequest]) -> dict[str, Any]:
    """Every input token of the conversation's life (replies, compactions, extractions,
    journey): the share read from the cache, per kind of call too, and the cache-weighted cost
    against sending all of it uncached."""
    by_kind: dict[str, list[int]] = {}
    for request in requests:
        sums = by_kind.setdefault(request.kind, [0, 0, 0])
        cache = request.cache
        for index, value in enumerate((cache.read, cache.write, cache.uncached)):
            sums[index] += value
    read, write, uncached = (sum(s[i] for s in by_kind.values()) for i in range(3))
    total = read + write + uncached
    cost = READ_WEIGHT * read + WRITE_WEIGHT * write + uncached
    return {
        "cache_read_share_all_calls": round(read / total, 4) if total else 0.0,
        "cache_read_share_by_kind": {k: round(s[0] / sum(s), 4) for k, s in by_kind.items()},
        "input_tokens_by_kind": {k: sum(s) for k, s in by_kind.items()},
        "input_tokens_all_calls": total,
        "cost_all_calls": round(cost),
        "cost_ratio_all_calls": round(cost / total, 4) if total else 0.0,
    }


async def idle_sweep(app: App, clock: BenchClock, idle_after: timedelta) -> None:
    """The scheduler's sweep, at the moment it would first see the conversation idle: it ends
    the conversation and runs the profile extraction long before the user comes back."""
    clock.now += idle_after + timedelta(minutes=1)
    sweep = getattr(app, "sweep", app.companion.end_idle_conversations)
    await sweep()
    await app.companion.drain()


def turn_figures(
    turn: ScriptedTurn,
    request: RecordedRequest,
    history: int,
    previous_summary: str | None,
    tokens: TokenEstimator,
) -> TurnFigures:
    system = request.body["system"]
    summary = system[2]["text"]
    return TurnFigures(
        index=turn.index,
        prompt_tokens=request.tokens,
        full_history_tokens=tokens.count(system[0]["text"])
        + history
        + tokens.count(turn.user_text),
        cache=request.cache,
        cacheable_prefix=cacheable_prefix_tokens(request.body, tokens.count),
        profile_tokens=tokens.count(system[1]["text"]),
        summary_tokens=tokens.count(summary),
        compaction=previous_summary is not None and summary != previous_summary,
        opens_session=turn.opens_session and turn.index > 1,
    )


def incoming(user_name: str, turn: ScriptedTurn, character_id: str = CHARACTER) -> Incoming:
    return Incoming(
        "bench",
        "locomo-user",
        user_name,
        "dm",
        "dm-bench",
        character_id,
        # No platform message id: a replay's turns have none, and the numbers would repeat
        # across replays sharing one database, where a message's id
        # marks it as one already run (Incoming.source_key).
        turn.user_text,
    )


def read_share(turns: Sequence[TurnFigures]) -> float:
    total = sum(t.cache.total for t in turns)
    return sum(t.cache.read for t in turns) / total if total else 0.0


def steady_figures(turns: list[TurnFigures], min_cacheable: int) -> dict[str, Any]:
    """Read share once a prefix can be cached, on the turns whose prefix is stable.

    Two kinds of turn change the prefix by design (DESIGN.md's table): a compaction rewrites
    block 3, and a session opening refreshes block 2 (and, after a gap of days, finds every
    cache entry expired). Steady state excludes both; the figure without only the compaction
    turns is reported beside it, so the cost of session openings stays visible. So is the
    figure without the first eligible turn (`_warm`): it can only write the cache, whose whole
    prefix was too short to store before, so it shows what the cold start costs.
    """
    eligible = eligible_turns(turns, min_cacheable)
    non_compaction = [t for t in eligible if not t.compaction]
    steady = [t for t in non_compaction if not t.opens_session]
    first = eligible[0].index if eligible else None
    return {
        "cache_read_share_steady": round(read_share(steady), 4),
        "cache_read_share_steady_warm": round(
            read_share([t for t in steady if t.index != first]), 4
        ),
        "cache_read_share_non_compaction": round(read_share(non_compaction), 4),
        "first_cacheable_turn": first,
        "steady_turns": len(steady),
        "non_compaction_turns": len(non_compaction),
        "compaction_turns": sum(1 for t in eligible if t.compaction),
        "session_opening_turns": sum(1 for t in non_compaction if t.opens_session),
    }


def eligible_turns(turns: list[TurnFigures], min_cacheable: int) -> list[TurnFigures]:
    """The turns from the first whose prefix reaches the minimum."""
    first = next((t.index for t in turns if t.cacheable_prefix >= min_cacheable), None)
    return [t for t in turns if first is not None and t.index >= first]


def steady_turns(turns: list[TurnFigures], min_cacheable: int) -> list[TurnFigures]:
    """The eligible turns less compactions and session openings (see `steady_figures`)."""
    eligible = eligible_turns(turns, min_cacheable)
    return [t for t in eligible if not t.compaction and not t.opens_session]


def summarise(replay_: Replay, script: Script, checkpoints: Sequence[int]) -> dict[str, Any]:
    turns = replay_.turns
    min_cacheable = replay_.engine["min_cacheable_tokens"]
    summaries = [t.summary_tokens for t in turns if t.compaction]
    prompts = [t.prompt_tokens for t in turns]
    profiles = [t.profile_tokens for t in turns]
    result: dict[str, Any] = {
        "turns": len(turns),
        "conversations": list(script.conversations),
        "user": script.user_name,
        "character": CHARACTER,
        "skipped_character_lines": script.skipped_character_lines,
        **checkpoint_figures(turns, checkpoints),
        **steady_figures(turns, min_cacheable),
        "cost_ratio_vs_full_300": round(
            sum(t.cost for t in turns) / sum(t.full_history_tokens for t in turns), 4
        ),
        "cache_read_share_all": round(read_share(turns), 4),
        **replay_.all_calls,
        "compactions": replay_.calls.get("summary", 0),
        "extractions": replay_.calls.get("extraction", 0),
        "journey_calls": replay_.calls.get("journey", 0),
        "profile_tokens": {
            "p50": percentile(profiles, 0.5),
            "max": max(profiles),
            "at_checkpoints": {
                str(t.index): t.profile_tokens for t in turns if t.index in set(checkpoints)
            },
        },
        "summary_tokens": {
            "p50": percentile(summaries, 0.5) if summaries else 0,
            "max": max(summaries, default=0),
        },
        "prompt_tokens_all": {
            "p50": percentile(prompts, 0.5),
            "p95": percentile(prompts, 0.95),
            "max": max(prompts),
        },
        "engine": replay_.engine,
    }
    result["targets"] = targets(result)
    return result


def run(
    data_path: Path = DEFAULT_DATA,
    conversation: int = 0,
    turns: int = 300,
    checkpoints: Sequence[int] = CHECKPOINTS,
    min_cacheable: int = 1024,
    journey: bool = False,
) -> dict[str, Any]:
    started = time.perf_counter()
    script = load_script(Path(data_path), conversation, turns)
    if not script.turns:
        raise ValueError(f"{data_path}: no turns from conversation {conversation}")
    with tempfile.TemporaryDirectory(prefix="context-growth-") as folder:
        replayed = asyncio.run(replay(script, min_cacheable, Path(folder), journey=journey))
    result = summarise(replayed, script, checkpoints)
    result["journey"] = journey
    if journey:  # the target counts the journey's calls: without, they fail and count nothing
        share = result["cache_read_share_all_calls"]
        found = target("cache_read_share_all_calls", share, ALL_CALLS_TARGET, ">=")
        result["targets"].append(found)
    result.update(short_run(script, min_cacheable, journey))
    result["targets"].append(
        target(
            "cache_read_share_steady_short",
            result["cache_read_share_steady_short"],
            SHORT_READ_TARGET,
            ">=",
        )
    )
    result["run_seconds"] = round(time.perf_counter() - started, 2)
    return result


def shortened(script: Script, words: int) -> Script:
    """The same conversation in short messages ("ok, and you?"): each user message and reply
    cut to its first `words` words. The prompt is then mostly the sheet, profile and summary,
    the case where a breakpoint's prefix can fall short of the provider's minimum."""

    def cut(text: str) -> str:
        return " ".join(text.split()[:words])

    turns = tuple(
        replace(t, user_text=cut(t.user_text), reply_text=cut(t.reply_text)) for t in script.turns
    )
    return replace(script, turns=turns)


def short_run(script: Script, min_cacheable: int, journey: bool = False) -> dict[str, Any]:
    """The steady read share of the short conversation with each shipped character, pooled."""
    short = shortened(script, SHORT_WORDS)
    steady: list[TurnFigures] = []
    by_character: dict[str, float] = {}
    for character_id in SHIPPED:
        with tempfile.TemporaryDirectory(prefix="context-growth-short-") as folder:
            replayed = asyncio.run(
                replay(short, min_cacheable, Path(folder), character_id, journey)
            )
        turns = steady_turns(replayed.turns, min_cacheable)
        by_character[character_id] = round(read_share(turns), 4)
        steady += turns
    return {
        "cache_read_share_steady_short": round(read_share(steady), 4),
        "cache_read_share_steady_short_by_character": by_character,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--min-cacheable", type=int, default=1024)
    parser.add_argument("--checkpoints", default=",".join(map(str, CHECKPOINTS)))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--journey",
        action="store_true",
        help="chronicle each ended conversation (a scripted chronicler filling the journey to "
        "JOURNEY_MAX_TOKENS): the journey in block 2 of the next",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    checkpoints = [int(part) for part in args.checkpoints.split(",") if part.strip()]
    result = run(
        args.data, args.conversation, args.turns, checkpoints, args.min_cacheable, args.journey
    )
    print(json.dumps(result, ensure_ascii=False) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
