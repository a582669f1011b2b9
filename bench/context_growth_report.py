"""bench/context_growth.py's checkpoints, targets and the table it prints without --json."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.cache_sim import CacheResult
from bench.common import target

SHORT_WORDS = 6  # the short run: every message and reply cut to its first words
GROWTH_LIMIT, FULL_SHARE_LIMIT, STEADY_READ_TARGET = 1.15, 0.25, 0.90
READ_WEIGHT, WRITE_WEIGHT = 0.1, 1.25  # the price of a cache read and write against plain input


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
        f"cache_read_share_all_calls: {result['cache_read_share_all_calls']:.1%} (every input "
        f"token of every call: replies, compactions, extractions, journey; by kind "
        f"{result['cache_read_share_by_kind']}); cost of all calls "
        f"{result['cost_all_calls']:,} token-equivalents over {result['input_tokens_all_calls']:,}"
        f" input tokens ({result['cost_ratio_all_calls']:.1%})",
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
