"""One LoCoMo conversation into the store: its turns, and with a tally its memory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bench.locomo import parse_locomo_date, sessions_of
from bench.locomo_memory import MemoryTally, SessionMemory, session_memory
from memory.models import Thread
from memory.store import MemoryStore

if TYPE_CHECKING:
    from bench.locomo_journey import JourneyTally

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CHARACTER = "locomo"


@dataclass
class Loaded:
    sample_id: str
    thread: Thread
    names: tuple[str, str]
    turn_of: dict[str, int]  # dia_id -> turn id
    questions: list[dict[str, Any]]


def _line_text(line: dict[str, Any]) -> str:
    # A shared photo is part of what was said; LoCoMo gives it as a caption.
    caption = line.get("blip_caption")
    return f"{line['text']} [shares a photo: {caption}]" if caption else str(line["text"])


async def load(
    store: MemoryStore,
    item: dict[str, Any],
    tally: MemoryTally | None = None,
    journey: JourneyTally | None = None,
) -> Loaded:
    """One conversation into the store; with a `tally`, each session is followed by what
    extraction and compaction would have stored (bench/locomo_memory.py); with `journey`, by
    its chronicle (bench/locomo_journey.py)."""
    from bench.locomo_journey import SessionJourney  # the journey's imports, only when asked

    body = item["conversation"]
    user_name, character_name = body["speaker_a"], body["speaker_b"]
    sample_id = str(item.get("sample_id", "?"))
    sessions = sessions_of(body)
    first = sessions[0][1] if sessions else parse_locomo_date("12:00 pm on 1 January, 2023")
    user = await store.upsert_user("locomo", sample_id, user_name, first)
    thread = Thread(user.id, CHARACTER, "dm")
    turn_of: dict[str, int] = {}
    memory = SessionMemory(store, (user_name, character_name), tally) if tally else None
    chronicle = SessionJourney(store, CHARACTER, journey) if journey is not None else None
    for number, start, lines in sessions:
        conversation = await store.start_conversation(thread, start)
        at, turns = start, []
        for line in lines:
            role = "user" if line["speaker"] == user_name else "assistant"
            turns.append(await store.add_turn(conversation, role, _line_text(line), at))
            turn_of[str(line["dia_id"])] = turns[-1].id
            at += timedelta(minutes=1)
        await store.end_conversation(conversation.id, "bench", at)
        if memory is not None:
            observations, summary = session_memory(item, number)
            await memory.after_session(conversation, turns, turn_of, observations, summary, at)
        if chronicle is not None:
            await chronicle.after_session(conversation, item, number, turn_of, at)
    questions = [q for q in item.get("qa", []) if q.get("category") in CATEGORIES]
    return Loaded(sample_id, thread, (user_name, character_name), turn_of, questions)
