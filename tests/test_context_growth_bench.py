"""The context-growth bench runs end to end on a small LoCoMo-shaped file, and its cache
simulator follows the prefix rules it claims."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.cache_sim import PromptCache
from bench.context_growth import main, run
from bench.context_growth_report import format_table

WORDS = ["tide", "lantern", "harbour", "kettle", "gull", "rope", "shelf", "book", "cat", "rain"]


def _line(speaker: str, index: int, number: int) -> dict[str, str]:
    words = [WORDS[(index * 3 + k) % len(WORDS)] for k in range(8 + index % 17)]
    return {"speaker": speaker, "dia_id": f"D{number}:{index}", "text": " ".join(words) + "."}


def _session(number: int, exchanges: int, lead_with_character: bool) -> list[dict[str, str]]:
    lines = [_line("Bo", 0, number)] if lead_with_character else []
    for i in range(exchanges):
        lines.append(_line("Ada", 2 * i + 1, number))
        if i % 7 == 3:  # a run of two user lines: one user message of two lines
            lines.append(_line("Ada", 2 * i + 101, number))
        lines.append(_line("Bo", 2 * i + 2, number))
    return lines


def write_locomo(folder: Path) -> Path:
    conversation: dict[str, Any] = {
        "speaker_a": "Ada",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": _session(1, 40, lead_with_character=False),
        "session_2_date_time": "10:05 am on 12 May, 2023",
        "session_2": _session(2, 40, lead_with_character=True),
        "session_3_date_time": "9:00 am on 20 May, 2023",  # a date key without a session
    }
    path = folder / "locomo_tiny.json"
    path.write_text(json.dumps([{"sample_id": "tiny-1", "conversation": conversation}]))
    return path


def test_bench_runs_and_prompt_stays_bounded(tmp_path: Path) -> None:
    result = run(write_locomo(tmp_path), turns=80, checkpoints=(20, 40, 80))
    for key in ("prompt_tokens", "full_history_tokens", "cache_read_share", "cost_vs_full"):
        assert set(result[key]) == {"20", "40", "80"}
    assert result["turns"] == 80
    assert result["skipped_character_lines"] == 1
    assert 0.0 <= result["cache_read_share_steady"] <= 1.0
    # Less the first cacheable turn, which can only write: the share can only rise.
    assert result["cache_read_share_steady"] < result["cache_read_share_steady_warm"] <= 1.0
    # The short run: the same conversation in six-word messages, with each shipped character.
    assert set(result["cache_read_share_steady_short_by_character"]) == {
        "lighthouse_keeper",
        "detective_bilbao",
    }
    assert 0.0 < result["cache_read_share_steady_short"] <= 1.0
    assert "cache_read_share_steady_short" in {t["name"] for t in result["targets"]}
    assert 0.0 < result["cost_ratio_vs_full_300"] < 1.0
    assert result["compactions"] >= 5
    assert result["extractions"] == 1  # the first session ended in the gap; the second is open
    assert (
        result["profile_tokens"]["at_checkpoints"]["80"]
        > result["profile_tokens"]["at_checkpoints"]["20"]
    )
    prompt, full = result["prompt_tokens"], result["full_history_tokens"]
    assert prompt["80"] <= 1.3 * prompt["40"]
    assert prompt["80"] < full["80"] / 2
    cost = f"cost of all calls {result['cost_all_calls']:,} token-equivalents"
    assert cost in format_table(result)  # the table reports every call beside the replies


def test_with_the_journey_the_second_session_carries_it_in_block_2(tmp_path: Path) -> None:
    path = write_locomo(tmp_path)
    without = run(path, turns=60, checkpoints=(20, 60))
    chronicled = run(path, turns=60, checkpoints=(20, 60), journey=True)
    before, after = (r["profile_tokens"]["at_checkpoints"] for r in (without, chronicled))
    assert after["20"] == before["20"]  # the first session: no journey yet
    assert after["60"] > before["60"]  # the second: the first one's chronicle in block 2
    assert chronicled["journey"] is True and without["journey"] is False


def test_json_output_is_one_object(tmp_path: Path, capsys: Any) -> None:
    path = write_locomo(tmp_path)
    assert main([str(path), "--turns", "30", "--checkpoints", "10,30", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["prompt_tokens"].keys() == {"10", "30"}
    assert "cache_read_share_steady" in printed
    # Every call of the conversation's life, beside the replies' share.
    kinds = printed["cache_read_share_by_kind"]
    assert {"reply", "summary"} <= set(kinds)  # 30 turns: no session ends
    total = sum(printed["input_tokens_by_kind"].values())
    assert total == printed["input_tokens_all_calls"] > 0
    read = sum(kinds[k] * printed["input_tokens_by_kind"][k] for k in kinds)
    assert abs(printed["cache_read_share_all_calls"] - read / total) < 0.001
    assert kinds["reply"] == printed["cache_read_share_all"]


def _body(*texts: str, breakpoint_at: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    content[breakpoint_at]["cache_control"] = {"type": "ephemeral"}
    return {"model": "m", "system": [], "messages": [{"role": "user", "content": content}]}


def test_cache_sim_reads_the_cached_prefix_until_the_ttl_ends() -> None:
    cache = PromptCache(min_cacheable=10)
    count = len  # one token per character keeps the arithmetic visible
    start = datetime(2026, 1, 1, tzinfo=UTC)
    first = cache.request(_body("a" * 20, "b" * 5, breakpoint_at=0), start, count)
    assert (first.read, first.write, first.uncached) == (0, 20, 5)
    later = start + timedelta(minutes=4)
    second = cache.request(_body("a" * 20, "c" * 30, "d", breakpoint_at=1), later, count)
    assert (second.read, second.write, second.uncached) == (20, 30, 1)
    cold = later + timedelta(minutes=6)
    third = cache.request(_body("a" * 20, "e", breakpoint_at=0), cold, count)
    assert (third.read, third.write) == (0, 20)  # expired: written again


def test_cache_sim_stores_nothing_below_the_minimum() -> None:
    cache = PromptCache(min_cacheable=100)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(2):
        result = cache.request(_body("a" * 50, "b", breakpoint_at=0), now, len)
        assert (result.read, result.write, result.uncached) == (0, 0, 51)


def test_cache_sim_a_new_tool_choice_reads_the_tools_and_system_not_the_messages() -> None:
    """The provider's table: a change of tool_choice invalidates the message blocks only."""
    cache = PromptCache(min_cacheable=10)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    body = _body("a" * 20, "b" * 5, breakpoint_at=0)
    body["system"] = [{"type": "text", "text": "s" * 30, "cache_control": {"type": "ephemeral"}}]
    assert cache.request(body, now, len).write == 50
    forced = {**body, "tool_choice": {"type": "tool", "name": "write_summary"}}
    again = cache.request(forced, now + timedelta(minutes=1), len)
    assert (again.read, again.write, again.uncached) == (30, 20, 5)
