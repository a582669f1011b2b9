"""LoCoMo conversations as a script of benchmark turns: one user message and its reply, dated.

speaker_a plays the user and speaker_b the character. A turn is a run of speaker_a lines (one
user message, lines joined by newlines) and the run of speaker_b lines after it (the scripted
reply). A session that opens with speaker_b lines has them skipped: the bot never speaks first.
When a conversation runs out before the requested number of turns, the next conversation
continues for the same user, its dates shifted to start a week after the last session so that
time only moves forward.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SESSION_KEY = re.compile(r"^session_(\d+)$")
MINUTES_PER_MESSAGE = 1
GAP_BETWEEN_CONVERSATIONS = timedelta(days=7)


@dataclass(frozen=True)
class ScriptedTurn:
    index: int  # 1-based position in the benchmark
    user_text: str
    reply_text: str
    at: datetime  # when the user message arrives; the reply comes a minute later
    session: str  # "conv-26/session_3"
    opens_session: bool


@dataclass(frozen=True)
class Script:
    turns: tuple[ScriptedTurn, ...]
    user_name: str
    conversations: tuple[str, ...]  # sample ids used, in order
    skipped_character_lines: int  # speaker_b lines that opened a session


def parse_locomo_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC: the data carries no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_conversations(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path}: expected a non-empty list of LoCoMo conversations")
    return data


def sessions_of(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    """(N, start, lines) of each session_N, in order of N; date keys without lines are ignored."""
    numbers = sorted(
        int(match.group(1)) for key in conversation if (match := SESSION_KEY.match(key))
    )
    return [
        (n, parse_locomo_date(conversation[f"session_{n}_date_time"]), conversation[f"session_{n}"])
        for n in numbers
        if conversation[f"session_{n}"]
    ]


def group_exchanges(
    lines: list[dict[str, Any]], user_speaker: str
) -> tuple[list[tuple[str, str]], int]:
    """(user message, reply) pairs of one session, and the number of leading character lines."""
    runs: list[tuple[bool, list[str]]] = []
    for line in lines:
        is_user = line["speaker"] == user_speaker
        if runs and runs[-1][0] == is_user:
            runs[-1][1].append(line["text"])
        else:
            runs.append((is_user, [line["text"]]))
    skipped = 0
    if runs and not runs[0][0]:
        skipped = len(runs.pop(0)[1])
    pairs = []
    for position in range(0, len(runs), 2):
        user = "\n".join(runs[position][1])
        reply = "\n".join(runs[position + 1][1]) if position + 1 < len(runs) else ""
        # A user message left unanswered at the end of a session still gets a short reply:
        # the engine always answers, and an empty scripted reply would be an LLM error.
        pairs.append((user, reply or "*nods*"))
    return pairs, skipped


def _conversation_turns(
    conversation: dict[str, Any], first_index: int, not_before: datetime | None, wanted: int
) -> tuple[list[ScriptedTurn], int]:
    sample_id = conversation.get("sample_id", "?")
    body = conversation["conversation"]
    sessions = sessions_of(body)
    shift = timedelta(0)
    if not_before is not None and sessions:
        shift = not_before + GAP_BETWEEN_CONVERSATIONS - sessions[0][1]
    turns: list[ScriptedTurn] = []
    skipped = 0
    clock = not_before
    step = timedelta(minutes=2 * MINUTES_PER_MESSAGE)  # the user's message, then the reply
    for number, start, lines in sessions:
        if len(turns) >= wanted:  # sessions past the cut would only inflate the skip count
            break
        pairs, lead = group_exchanges(lines, body["speaker_a"])
        skipped += lead
        at = start + shift
        if clock is not None and at <= clock:  # overlapping dates: keep time monotonic
            at = clock + step
        for position, (user, reply) in enumerate(pairs):
            turns.append(
                ScriptedTurn(
                    first_index + len(turns),
                    user,
                    reply,
                    at,
                    f"{sample_id}/session_{number}",
                    opens_session=position == 0,
                )
            )
            clock, at = at, at + step
    return turns, skipped


def load_script(path: Path, conversation: int = 0, turns: int = 300) -> Script:
    """The first `turns` turns from conversation number `conversation` onwards."""
    data = load_conversations(path)
    if not 0 <= conversation < len(data):
        raise ValueError(f"conversation {conversation} out of range: the file holds {len(data)}")
    script: list[ScriptedTurn] = []
    used: list[str] = []
    skipped = 0
    for item in data[conversation:]:
        last = script[-1].at if script else None
        more, lead = _conversation_turns(item, len(script) + 1, last, turns - len(script))
        used.append(str(item.get("sample_id", "?")))
        skipped += lead
        script.extend(more)
        if len(script) >= turns:
            break
    user_name = str(data[conversation]["conversation"]["speaker_a"])
    return Script(tuple(script[:turns]), user_name, tuple(used), skipped)
