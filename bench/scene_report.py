"""bench/scene.py's figures, targets, table and transcript, from one replayed scene."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from itertools import pairwise
from statistics import mean
from typing import Any

from bench.cache_sim import LOOKBACK_BLOCKS, TTL_5M, Block, blocks_of
from bench.common import percentile, target
from bench.scene_findings import findings
from bench.scene_llm import SceneRequest
from bench.scene_run import SceneRun
from bench.scene_script import CAST, FIRST_CAST, LATE, Role
from memory.engine.tokens import TokenEstimator

GROWTH_LIMIT, READ_TARGET = 1.15, 0.85
SHIPPED = tuple(role.id for role in FIRST_CAST)
# Of a 300-message run (scaled to the run's length): the checkpoints, and how many messages
# before each the calls averaged there come from (a window holds 12 to 32 turns between two
# compactions, so one call alone would measure where the sawtooth is, not the growth).
EARLY_AT, LATE_AT, NEAR, SCRIPT_LENGTH = 60, 300, 40, 300
PARTS = ("tools", "sheet", "people", "summary", "window", "context", "reminder")
REFUSED = re.compile(r"^(\d+) fact\(s\) about .* rested on someone else's words")


@dataclass(frozen=True)
class Call:
    """One reply request of a character, read as the cache sees it."""

    request: SceneRequest
    blocks: list[Block]
    parts: list[str]  # the prompt part of each block
    last_breakpoint: int
    compaction: bool  # block 3 (the summary) changed since this character's previous call
    opening: bool  # its first call in a conversation (or ever): block 2 is read afresh

    @property
    def message(self) -> int:
        return self.request.message

    @property
    def cacheable(self) -> int:
        return sum(b.tokens for b in self.blocks[: self.last_breakpoint + 1])

    def tokens_of(self, part: str) -> int:
        return sum(b.tokens for b, p in zip(self.blocks, self.parts, strict=True) if p == part)


def prompt_text(body: dict[str, Any]) -> str:
    """Every text block of a request (system and messages), one a line."""
    texts = [b["text"] for b in body.get("system", []) if "text" in b]
    for message in body["messages"]:
        texts += [b["text"] for b in message["content"] if "text" in b]
    return "\n".join(texts)


def _parts(body: dict[str, Any]) -> list[str]:
    parts = ["tools"] * len(body.get("tools", []))
    parts += ["sheet", "people", "summary"][: len(body["system"])]
    messages = body["messages"]
    for index, message in enumerate(messages):
        count = len(message["content"])
        if index == len(messages) - 1:  # the newest text, then this turn's context, reminder
            parts += ["window"] * (count - 2) + ["context", "reminder"]
        else:
            parts += ["window"] * count
    return parts


def calls_of(run: SceneRun, role: Role, tokens: TokenEstimator) -> list[Call]:
    starts = [m.index for m in run.script.messages if m.opens_conversation]
    if role == LATE:
        starts.append(run.script.join_at)
    calls: list[Call] = []
    for request in run.requests:
        if request.kind != "reply" or request.character != role.id:
            continue
        blocks = blocks_of(request.body, tokens.count)
        previous = calls[-1] if calls else None
        summary = request.body["system"][-1]["text"]
        calls.append(
            Call(
                request,
                blocks,
                _parts(request.body),
                max(i for i, b in enumerate(blocks) if b.ttl is not None),
                previous is not None and summary != previous.request.body["system"][-1]["text"],
                previous is None or any(previous.message < s <= request.message for s in starts),
            )
        )
    return calls


def diagnose(previous: Call, call: Call, min_cacheable: int) -> tuple[str, int, int]:
    """Why a call read less than all its previous call cached (the prefix up to its last
    breakpoint): the first part that changed, else the previous prefix was too short to be
    stored (`cold`), else the entry expired (5 minutes), else the new breakpoint is past the
    provider's lookback; the tokens it could have read, and how many of them it did not."""
    cached = previous.blocks[: previous.last_breakpoint + 1]
    same = 0
    while same < min(len(cached), len(call.blocks)) and cached[same].key == call.blocks[same].key:
        same += 1
    readable = sum(b.tokens for b in cached[:same])
    lost = sum(b.tokens for b in cached) - call.request.cache.read
    if lost <= 0:
        return "hit", 0, readable
    if same < len(cached):
        return f"changed:{call.parts[same]}", lost, readable
    if previous.cacheable < min_cacheable:
        return "cold", lost, readable
    if call.request.at - previous.request.at > TTL_5M:
        return "expired", lost, readable
    if call.last_breakpoint - previous.last_breakpoint > LOOKBACK_BLOCKS:
        return "lookback", lost, readable
    return "other", lost, readable


def read_share(calls: Sequence[Call]) -> float:
    total = sum(c.request.cache.total for c in calls)
    return round(sum(c.request.cache.read for c in calls) / total, 4) if total else 0.0


def steady_of(calls: list[Call], min_cacheable: int) -> tuple[list[Call], list[Call]]:
    """(eligible, steady): the calls from the first whose prefix reaches the minimum, and
    those of them that neither follow a compaction nor open a conversation."""
    first = next((i for i, c in enumerate(calls) if c.cacheable >= min_cacheable), len(calls))
    eligible = calls[first:]
    return eligible, [c for c in eligible if not c.compaction and not c.opening]


def where_steady_tokens_go(
    calls: list[Call], steady: list[Call], min_cacheable: int
) -> dict[str, Any]:
    """Each steady call's input, as shares of all their input: read from the cache; lost (the
    previous call cached it, this one did not read it, by cause); new lines written (the
    lines since the character's previous call, and that call's own reply); this turn's
    context (time, recalled fragments) and the reminder, after the breakpoint, never cached.
    `ceiling` is the read share had every steady call read all its predecessor cached."""
    total = sum(c.request.cache.total for c in steady) or 1
    causes: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    readable = 0
    for previous, call in pairwise(calls):
        if call in steady:
            cause, missed, could = diagnose(previous, call, min_cacheable)
            causes[cause] += 1
            lost[cause] += missed
            readable += could
    share = {
        "read": sum(c.request.cache.read for c in steady) / total,
        "lost": sum(lost.values()) / total,
        "new_lines_written": sum(c.request.cache.write for c in steady) / total,
        "context": sum(c.tokens_of("context") for c in steady) / total,
        "reminder": sum(c.tokens_of("reminder") for c in steady) / total,
    }
    return {
        "shares": {k: round(v, 4) for k, v in share.items()},
        "ceiling": round(readable / total, 4),
        "calls_by_cause": dict(causes),
        "tokens_lost_by_cause": {k: v for k, v in lost.items() if k != "hit"},
        "mean_tokens": round(total / max(len(steady), 1)),
    }


def cache_figures(calls: list[Call], min_cacheable: int) -> dict[str, Any]:
    eligible, steady = steady_of(calls, min_cacheable)
    gaps = [
        (b.request.at - a.request.at) / timedelta(minutes=1)
        for a, b in pairwise(calls)
        if not b.opening
    ]
    return {
        "cache_read_share_steady": read_share(steady),
        "cache_read_share_all": read_share(calls),
        "calls": len(calls),
        "steady_calls": len(steady),
        "compaction_calls": sum(1 for c in eligible if c.compaction),
        "opening_calls": sum(1 for c in eligible if c.opening),
        "first_cacheable_message": eligible[0].message if eligible else None,
        "steady": where_steady_tokens_go(calls, steady, min_cacheable),
        "people_block_changes_within_conversation": sum(
            1 for c in calls[1:] if not c.opening and _changed(calls, c, "people")
        ),
        "minutes_between_calls": {
            "p50": round(percentile(gaps, 0.5), 1) if gaps else 0,
            "p90": round(percentile(gaps, 0.9), 1) if gaps else 0,
            "max": round(max(gaps), 1) if gaps else 0,
        },
    }


def _changed(calls: list[Call], call: Call, part: str) -> bool:
    previous = calls[calls.index(call) - 1]
    index = call.parts.index(part)
    return previous.blocks[index].key != call.blocks[index].key


def growth_figures(calls: list[Call], early: int, late: int, near: int) -> dict[str, Any]:
    """Mean prompt tokens of the calls in the `near` messages up to each checkpoint, and what
    each part of the prompt weighs there."""

    def around(at: int) -> dict[str, Any]:
        chosen = [c for c in calls if at - near < c.message <= at]
        if not chosen:
            return {"message": at, "calls": 0, "tokens": 0, "parts": {}}
        parts = {p: round(mean(c.tokens_of(p) for c in chosen)) for p in PARTS}
        tokens = round(mean(c.request.tokens for c in chosen), 1)
        return {"message": at, "calls": len(chosen), "tokens": tokens, "parts": parts}

    first, last = around(early), around(late)
    ratio = round(last["tokens"] / first["tokens"], 4) if first["tokens"] else None
    return {"ratio": ratio, "early": first, "late": last}


def checkpoints(run: SceneRun, role: Role) -> tuple[int, int, int]:
    """(early, late, near) for a role: a character that joined later is measured from its
    joining, as the others are from the first message."""
    total = len(run.script.messages)
    early = max(1, round(total * EARLY_AT / SCRIPT_LENGTH))
    near = max(1, round(total * NEAR / SCRIPT_LENGTH))
    start = run.script.join_at - 1 if role == LATE else 0
    return min(start + early, total), total, near


def calls_per_message(run: SceneRun) -> dict[str, Any]:
    counts = Counter(r.message for r in run.requests if r.kind == "reply")
    per = [counts.get(m.index, 0) for m in run.script.messages]
    return {
        "mean": round(mean(per), 4),
        "max": max(per),
        "histogram": {str(k): v for k, v in sorted(Counter(per).items())},
    }


def memory_figures(run: SceneRun, private: list[str], group: list[str]) -> dict[str, Any]:
    """The three counts that must be 0, and the controls that show they could be more."""
    foreign = [f for f in run.facts if any(run.speakers.get(e) != f.user_id for e in f.evidence)]
    texts = [prompt_text(r.body) for r in run.requests]
    late_texts = "\x00".join(prompt_text(r.body) for r in run.requests if r.character == LATE.id)
    join = run.script.join_at
    said = [(m.index, m.text) for m in run.script.messages]
    said += [(line.message, line.text) for line in run.lines if line.ok]
    before = [text for at, text in said if at < join]
    after = [text for at, text in said if at >= join]
    return {
        "facts_from_other_peoples_words": len(foreign),
        "private_facts_in_scene_prompts": sum(v in t for t in texts for v in private),
        "unwitnessed_lines_in_prompts": sum(1 for text in before if text in late_texts),
        "controls": {
            "facts_stored": len(run.facts),
            "facts_about_a_person_proposed_on_others_words": run.foreign_attempts,
            "facts_refused_for_others_words": sum(
                int(m.group(1)) for r in run.rejections if (m := REFUSED.match(r))
            ),
            "group_facts_in_scene_prompts": sum(v in t for t in texts for v in group),
            "scene_prompts": len(texts),
            "lines_before_join": len(before),
            "lines_after_join_in_late_prompts": sum(1 for text in after if text in late_texts),
            "late_joiner_requests": sum(1 for r in run.requests if r.character == LATE.id),
        },
    }


def summarise(run: SceneRun, private: list[str], group: list[str]) -> dict[str, Any]:
    tokens = TokenEstimator()
    min_cacheable = run.engine["min_cacheable_tokens"]
    growth: dict[str, Any] = {}
    cache: dict[str, Any] = {}
    for role in CAST:
        calls = calls_of(run, role, tokens)
        growth[role.id] = growth_figures(calls, *checkpoints(run, role))
        cache[role.id] = cache_figures(calls, min_cacheable)
    result: dict[str, Any] = {
        "messages": len(run.script.messages),
        "people": 4,
        "characters": [role.id for role in CAST],
        "late_joiner": LATE.id,
        "join_at": run.script.join_at,
        "calls_per_human_message": calls_per_message(run),
        "prompt_tokens_turn300_vs_turn60": {k: v["ratio"] for k, v in growth.items()},
        "cache_read_share_steady": {k: v["cache_read_share_steady"] for k, v in cache.items()},
        **memory_figures(run, private, group),
        **run.chronicles,
        "prompt_tokens_near": growth,
        "cache": cache,
        "calls_by_kind": dict(Counter(r.kind for r in run.requests)),
        "findings": findings(run),
        "engine": run.engine,
    }
    result["targets"] = targets(result)
    return result


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    cap = result["engine"]["scene_max_replies"]
    found = [target("calls_per_human_message.max", result["calls_per_human_message"]["max"],
                    cap, "<=")]  # fmt: skip
    for character, ratio in result["prompt_tokens_turn300_vs_turn60"].items():
        found.append(target(f"prompt_tokens_turn300_vs_turn60.{character}", ratio or 0.0,
                            GROWTH_LIMIT, "<="))  # fmt: skip
    for character, share in result["cache_read_share_steady"].items():
        if character in SHIPPED:  # the target is set for the shipped characters
            found.append(target(f"cache_read_share_steady.{character}", share, READ_TARGET, ">="))
    for name in (
        "facts_from_other_peoples_words",
        "private_facts_in_scene_prompts",
        "unwitnessed_lines_in_prompts",
    ):
        found.append(target(name, result[name], 0, "<="))
    if "scene_journey_tokens_max" in result:  # the story of each scene (issue 37 A)
        found += journey_targets(result)
    return found


def journey_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    cap = result["engine"]["scene_journey_max_tokens"]
    share = result["scene_journey_cites_valid_share"]
    return [
        target("scene_journey_cites_valid_share", share or 0.0, 1.0, ">="),
        target("scene_journey_unwitnessed_cites", result["scene_journey_unwitnessed_cites"], 0,
               "<="),
        target("scene_journey_sentences_left_after_forget",
               result["scene_journey_sentences_left_after_forget"], 0, "<="),
        target("scene_journey_tokens_max", result["scene_journey_tokens_max"], cap, "<="),
    ]  # fmt: skip


def format_table(result: dict[str, Any]) -> str:
    calls = result["calls_per_human_message"]
    lines = [
        f"Scene: {result['messages']} human messages, 4 people, characters "
        f"{', '.join(result['characters'])} ({result['late_joiner']} joins before message "
        f"{result['join_at']}); seed {result['seed']}",
        f"calls per human message: mean {calls['mean']}, max {calls['max']} "
        f"(histogram {calls['histogram']})",
        "",
        " character          | early tok (msg) | late tok (msg) | ratio  | steady read | calls",
    ]
    for character, growth in result["prompt_tokens_near"].items():
        cache = result["cache"][character]
        early, late = growth["early"], growth["late"]
        lines.append(
            f" {character:<18} | {early['tokens']:>8} ({early['message']:>3}) | "
            f"{late['tokens']:>7} ({late['message']:>3}) | {growth['ratio'] or 0:>6.3f} | "
            f"{cache['cache_read_share_steady']:>11.1%} | {cache['calls']}"
        )
        steady = cache["steady"]
        lines.append(
            f"   steady input: {steady['shares']} (ceiling {steady['ceiling']}); lost by "
            f"cause: {steady['tokens_lost_by_cause']}"
        )
    lines += ["", f"controls: {result['controls']}", ""]
    if "scene_journey_controls" in result:
        lines[-1:] = [f"story of the scene: {result['scene_journey_controls']}", ""]
    for item in result["targets"]:
        verdict = "PASS" if item["pass"] else "FAIL"
        lines.append(f"{verdict}  {item['name']} = {item['value']} ({item['op']} {item['limit']})")
    lines.append(f"run time: {result['run_seconds']} s")
    return "\n".join(lines)


def transcript(run: SceneRun, first: int, last: int) -> str:
    """Human messages first..last and the characters' lines, as the group saw them."""
    names = {role.id: role.name for role in CAST}
    out: list[str] = []
    for message in run.script.messages[first - 1 : last]:
        if message.index == run.script.join_at:
            out.append(f"  (/escena añadir {LATE.id}: {LATE.name} joins)")
        out.append(f"{message.person.name}: {message.text}")
        out += [f"{names[x.character]}: {x.text}" for x in run.lines if x.message == message.index]
    return "\n".join(out)
