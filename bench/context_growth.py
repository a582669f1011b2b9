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
  cache.

Usage: .venv/bin/python bench/context_growth.py [LOCOMO_JSON] [--conversation N] [--turns 300]
       [--min-cacheable 1024] [--checkpoints 20,60,120,300] [--json]
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

from bench.cache_sim import CacheResult, PromptCache, cacheable_prefix_tokens  # noqa: E402
from bench.locomo import Script, ScriptedTurn, load_script  # noqa: E402
from bench.scripted_llm import BenchClock, RecordedRequest, ScriptedLLM  # noqa: E402
from bot.app import App, open_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from memory.engine.tokens import TokenEstimator  # noqa: E402
from memory.models import Incoming  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo_dev.json"
CHARACTER = "lighthouse_keeper"
SHIPPED = ("lighthouse_keeper", "detective_bilbao")  # characters/ as the project ships it
SHORT_WORDS = 6  # the short run: every message and reply cut to its first words
SHORT_READ_TARGET = 0.85
CHECKPOINTS = (20, 60, 120, 300)
READ_WEIGHT, WRITE_WEIGHT = 0.1, 1.25
GROWTH_LIMIT, FULL_SHARE_LIMIT, STEADY_READ_TARGET = 1.15, 0.25, 0.90


@dataclass(frozen=True)
class TurnFigures:
    index: int
    prompt_tokens: int
    full_history_tokens: int
    cache: CacheResult
    cacheable_prefix: int  # tokens up to the last breakpoint
    profile_tokens: int
    summary_tokens: int
    compaction: bool  # the first request after the summary changed
    opens_session: bool  # first message after an inactivity gap: the 5-minute cache is cold

    @property
    def cost(self) -> float:
        c = self.cache
        return READ_WEIGHT * c.read + WRITE_WEIGHT * c.write + c.uncached


@dataclass(frozen=True)
class Replay:
    turns: list[TurnFigures]
    calls: dict[str, int]  # LLM requests by kind
    engine: dict[str, Any]


def bench_settings(folder: Path) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_path=folder / "bench.db",
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
    }


async def replay(
    script: Script, min_cacheable: int, folder: Path, character_id: str = CHARACTER
) -> Replay:
    """Drive every scripted turn through the engine, as one user talking to one character."""
    tokens = TokenEstimator()  # the bench's own: the engine calibrates a separate one
    clock = BenchClock(script.turns[0].at)
    llm = ScriptedLLM(clock, tokens, PromptCache(min_cacheable))
    settings = bench_settings(folder)
    timeout = timedelta(minutes=settings.inactivity_timeout_minutes)
    figures: list[TurnFigures] = []
    async with open_app(settings, llm=llm, clock=clock, start_scheduler=False) as app:
        character = app.companion.character(character_id)
        history = sum(tokens.count(m.text) for m in character.opening_messages)
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
    return Replay(figures, dict(calls), engine_figures(settings, min_cacheable))


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
        # across replays sharing one database (make test-postgres), where a message's id
        # marks it as one already run (Incoming.source_key).
        turn.user_text,
    )


def read_share(turns: Sequence[TurnFigures]) -> float:
    total = sum(t.cache.total for t in turns)
    return sum(t.cache.read for t in turns) / total if total else 0.0


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


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


def checkpoint_figures(turns: list[TurnFigures], checkpoints: Sequence[int]) -> dict[str, Any]:
    by_index = {t.index: t for t in turns}
    chosen = [by_index[c] for c in checkpoints if c in by_index]
    return {
        "prompt_tokens": {str(t.index): t.prompt_tokens for t in chosen},
        "full_history_tokens": {str(t.index): t.full_history_tokens for t in chosen},
        "prompt_vs_full": {
            str(t.index): round(t.prompt_tokens / t.full_history_tokens, 4) for t in chosen
        },
        "cache_read_share": {str(t.index): round(t.cache.read / t.cache.total, 4) for t in chosen},
        "cost_vs_full": {str(t.index): round(t.cost / t.full_history_tokens, 4) for t in chosen},
        "turn_kind": {str(t.index): turn_kind(t) for t in chosen},
    }


def turn_kind(turn: TurnFigures) -> str:
    if turn.compaction:
        return "compaction"
    return "session-opening" if turn.opens_session else "steady"


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    prompt, full = result["prompt_tokens"], result["full_history_tokens"]
    found: list[dict[str, Any]] = []
    if "60" in prompt and "300" in prompt:
        ratio = prompt["300"] / prompt["60"]
        found.append(target("prompt tokens turn 300 / turn 60", ratio, GROWTH_LIMIT, "<="))
    if "300" in prompt:
        ratio = prompt["300"] / full["300"]
        found.append(target("prompt tokens turn 300 / full history", ratio, FULL_SHARE_LIMIT, "<="))
    steady = result["cache_read_share_steady"]
    found.append(target("cache_read_share_steady", steady, STEADY_READ_TARGET, ">="))
    return found


def target(name: str, value: float, limit: float, op: str) -> dict[str, Any]:
    ok = value <= limit if op == "<=" else value >= limit
    return {"name": name, "value": round(value, 4), "limit": limit, "op": op, "pass": ok}


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
        "compactions": replay_.calls.get("summary", 0),
        "extractions": replay_.calls.get("extraction", 0),
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
) -> dict[str, Any]:
    started = time.perf_counter()
    script = load_script(Path(data_path), conversation, turns)
    if not script.turns:
        raise ValueError(f"{data_path}: no turns from conversation {conversation}")
    with tempfile.TemporaryDirectory(prefix="context-growth-") as folder:
        replayed = asyncio.run(replay(script, min_cacheable, Path(folder)))
    result = summarise(replayed, script, checkpoints)
    result.update(short_run(script, min_cacheable))
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


def short_run(script: Script, min_cacheable: int) -> dict[str, Any]:
    """The steady read share of the short conversation with each shipped character, pooled."""
    short = shortened(script, SHORT_WORDS)
    steady: list[TurnFigures] = []
    by_character: dict[str, float] = {}
    for character_id in SHIPPED:
        with tempfile.TemporaryDirectory(prefix="context-growth-short-") as folder:
            replayed = asyncio.run(replay(short, min_cacheable, Path(folder), character_id))
        turns = steady_turns(replayed.turns, min_cacheable)
        by_character[character_id] = round(read_share(turns), 4)
        steady += turns
    return {
        "cache_read_share_steady_short": round(read_share(steady), 4),
        "cache_read_share_steady_short_by_character": by_character,
    }


def format_table(result: dict[str, Any]) -> str:
    engine = result["engine"]
    lines = [
        f"Context growth: {result['turns']} turns of LoCoMo {', '.join(result['conversations'])}"
        f" (user {result['user']}, character {result['character']})",
        f"engine: window keep {engine['window_keep_turns']} / trigger "
        f"{engine['window_trigger_turns']} turns, summary cap {engine['summary_cap_tokens']}, "
        f"min cacheable {engine['min_cacheable_tokens']} tokens",
        "",
        " turn | prompt tok | full history | prompt/full | cache read | cost vs full | kind",
    ]
    for key, prompt in result["prompt_tokens"].items():
        lines.append(
            f"{key:>5} | {prompt:>10} | {result['full_history_tokens'][key]:>12} | "
            f"{result['prompt_vs_full'][key]:>11.1%} | {result['cache_read_share'][key]:>10.1%} | "
            f"{result['cost_vs_full'][key]:>12.1%} | {result['turn_kind'][key]}"
        )
    lines += ["", *summary_lines(result), ""]
    for item in result["targets"]:
        verdict = "PASS" if item["pass"] else "FAIL"
        lines.append(f"{verdict}  {item['name']} = {item['value']} ({item['op']} {item['limit']})")
    lines.append(f"run time: {result['run_seconds']} s")
    return "\n".join(lines)


def summary_lines(result: dict[str, Any]) -> list[str]:
    prompts, summaries = result["prompt_tokens_all"], result["summary_tokens"]
    return [
        f"cache_read_share_steady: {result['cache_read_share_steady']:.1%} over "
        f"{result['steady_turns']} turns from turn {result['first_cacheable_turn']} (the first "
        f"whose prefix reaches the minimum), less {result['compaction_turns']} compaction and "
        f"{result['session_opening_turns']} session-opening turns",
        f"cache_read_share_steady_warm: {result['cache_read_share_steady_warm']:.2%} (the same, "
        f"less turn {result['first_cacheable_turn']}, whose cache is written cold)",
        f"cache_read_share_non_compaction: {result['cache_read_share_non_compaction']:.1%} "
        "(the same, session openings included)",
        f"cache_read_share_all:    {result['cache_read_share_all']:.1%} (every turn)",
        f"cache_read_share_steady_short: {result['cache_read_share_steady_short']:.1%} (the same "
        f"conversation in messages of {SHORT_WORDS} words, each shipped character: "
        f"{result['cache_read_share_steady_short_by_character']})",
        f"cost_ratio_vs_full_300:  {result['cost_ratio_vs_full_300']:.1%} (all turns, "
        "cache-weighted, vs full history at 1x)",
        f"compactions: {result['compactions']}; summary tokens p50 {summaries['p50']}, "
        f"max {summaries['max']}",
        f"profile extractions: {result['extractions']}; profile block tokens p50 "
        f"{result['profile_tokens']['p50']}, max {result['profile_tokens']['max']}",
        f"prompt tokens per turn: p50 {prompts['p50']}, p95 {prompts['p95']}, max {prompts['max']}",
        f"speaker_b lines skipped at session starts: {result['skipped_character_lines']}",
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--min-cacheable", type=int, default=1024)
    parser.add_argument("--checkpoints", default=",".join(map(str, CHECKPOINTS)))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    checkpoints = [int(part) for part in args.checkpoints.split(",") if part.strip()]
    result = run(args.data, args.conversation, args.turns, checkpoints, args.min_cacheable)
    print(json.dumps(result, ensure_ascii=False) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
