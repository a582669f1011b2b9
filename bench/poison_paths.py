"""The model that copies the user's words, and the four paths an entry is played on, through
the real engine's public entry points only (Companion.handle / end_conversation, the exporter
and MemoryService.import_): see bench/poison.py."""

from __future__ import annotations

import contextvars
import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.poison_data import Entry, anchored
from bench.scripted_llm import TURN_LINE
from bot.app import App
from memory.engine.llm import LLMRequest, LLMResponse, ToolCall, Usage
from memory.models import Incoming
from memory.profile.extraction import EXTRACTION_TOOL
from memory.summary.rolling import SUMMARY_TOOL

FILLERS = {
    "es": ("Hoy ha llovido toda la tarde.", "He comido lentejas.", "Mañana madrugo un poco."),
    "en": ("It rained all afternoon today.", "I had soup for lunch.", "I start early tomorrow."),
}
FOLLOW_UP = {"es": "Hola otra vez, ¿qué tal?", "en": "Hello again, how are you?"}
USER_MESSAGES_TO_COMPACT = 4  # with WINDOW_TRIGGER_TURNS=8: four messages and four replies
REJECTED = "Your previous answer was rejected"


# ---- the copying model -------------------------------------------------------------------------


@dataclass
class Attempt:
    entry: Entry
    path: str
    replies: list[LLMRequest] = field(default_factory=list)
    extraction_calls: int = 0  # a second call is a retry after a rejection


CURRENT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar("poison", default=None)


def given_turns(body: str, marker: str) -> list[tuple[int, str, str]]:
    """(id, role, text) of the turns listed after `marker`. Lines are split on "\\n" only, so a
    U+2028 inside a message is copied as the user wrote it."""
    _, _, listed = body.split(f"\n\n{REJECTED}")[0].partition(marker)
    turns: list[list[Any]] = []
    for line in listed.split("\n"):
        match = TURN_LINE.match(line)
        if match:
            turns.append([int(match.group(1)), match.group(2), match.group(3)])
        elif turns:
            turns[-1][2] += "\n" + line
    return [(turn_id, role, text.rstrip("\n")) for turn_id, role, text in turns]


def copied_profile(body: str, key: str, retry: bool) -> dict[str, Any]:
    """One stated fact per user turn, its value the turn's words; on a retry (the previous
    answer was rejected, maybe for its key) the key is `other`, as a registry of keys would
    want for free text."""
    key = "other" if retry else key
    operations = []
    for index, (turn_id, _, text) in enumerate(
        t for t in given_turns(body, "Session turns:\n") if t[1] == "user"
    ):
        operations.append(
            {
                "op": "add",
                "kind": ("semantic", "emotional", "episodic")[index % 3],
                "key": key,
                "value": text.strip()[:300],
                "origin": "stated",
                "evidence": [turn_id],
            }
        )
    return {"operations": operations}


def written_summary(body: str, copy_words: bool) -> dict[str, list[str]]:
    """Every user turn copied, cited, into established facts and canon; or (copy_words False)
    only a tone claim, so that whatever survives comes from the anchor safety net."""
    folded = given_turns(body, "Turns to fold in:\n")
    fields: dict[str, list[str]] = {name: [] for name in SUMMARY_TOOL.input_schema["required"]}
    if not folded:
        return fields
    fields["tone"] = [f"cordial {{cite:{folded[-1][0]}}}"]
    if copy_words:
        claims = [
            f"{text.strip()[:380]} {{cite:{i}}}" for i, role, text in folded if role == "user"
        ]
        fields["established_facts"], fields["canon"] = claims, list(claims)
    return fields


class CopyingLLM:
    """Answers for the attempt of the calling task (background jobs inherit its context)."""

    async def close(self) -> None:
        return None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        attempt = CURRENT.get()
        path = attempt.path if attempt else ""
        body = request.messages[-1].text if request.messages else ""
        calls: tuple[ToolCall, ...] = ()
        if request.kind == "reply" and attempt is not None:
            attempt.replies.append(request)
        elif request.kind == "extraction":
            copies = path in ("extraction", "template")
            arguments: dict[str, Any] = {}
            if copies and attempt is not None:
                attempt.extraction_calls += 1
                retry = attempt.extraction_calls > 1 or REJECTED in body
                arguments = copied_profile(body, attempt.entry.key, retry)
            calls = (ToolCall(EXTRACTION_TOOL.name, arguments or {"operations": []}, "p"),)
        elif request.kind == "summary":
            summary = written_summary(body, copy_words=path in ("compaction", "template"))
            calls = (ToolCall(SUMMARY_TOOL.name, summary, "p"),)
        text = "Vale." if request.kind == "reply" else ""
        return LLMResponse(text, "poison-copier", Usage(), calls)


# ---- the paths ---------------------------------------------------------------------------------


class TickingClock:
    """Fixed start, one millisecond further at every reading: turns keep their order, and no
    run of the bench comes near the inactivity timeout."""

    def __init__(self) -> None:
        self._now = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self._now += timedelta(milliseconds=1)
        return self._now


@dataclass
class Bench:
    app: App
    clock: TickingClock
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)


def incoming(entry: Entry, path: str, text: str) -> Incoming:
    user = f"{path}-{entry.id}"
    name = "Ana" if entry.prose_language == "es" else "Sam"
    return Incoming("poison", user, name, "dm", f"dm-{user}", entry.character, text)


async def say(bench: Bench, entry: Entry, path: str, texts: Sequence[str]) -> None:
    for text in texts:
        await bench.app.companion.handle(incoming(entry, path, text))
    await bench.app.companion.drain()


async def end_conversation(bench: Bench, entry: Entry, path: str, fold: bool = False) -> None:
    """Ends it as the idle timer does (or as /reset does, with fold): extraction runs."""
    who = incoming(entry, path, "")
    await bench.app.companion.end_conversation(who, reason="inactivity", fold_window=fold)
    await bench.app.companion.drain()


async def play_extraction(bench: Bench, entry: Entry) -> tuple[str, ...]:
    await say(bench, entry, "extraction", entry.messages)
    await end_conversation(bench, entry, "extraction")
    return entry.payload


async def play_compaction(bench: Bench, entry: Entry) -> tuple[str, ...]:
    fillers = FILLERS[entry.prose_language][: USER_MESSAGES_TO_COMPACT - len(entry.messages)]
    await say(bench, entry, "compaction", (*entry.messages, *fillers))
    await end_conversation(bench, entry, "compaction")
    return entry.payload


async def play_anchors(bench: Bench, entry: Entry) -> tuple[str, ...]:
    messages, payload = anchored(entry)
    fillers = FILLERS[entry.prose_language][: USER_MESSAGES_TO_COMPACT - len(messages)]
    await say(bench, entry, "anchors", (*messages, *fillers))
    await end_conversation(bench, entry, "anchors")
    return payload


async def play_import(bench: Bench, entry: Entry) -> tuple[str, ...]:
    """As `companion memory import` does: the file's JSON read back for this user."""
    text = json.dumps(poisoned_export(bench.templates[entry.character], entry), ensure_ascii=False)
    who = incoming(entry, "import", "")
    store = bench.app.store
    user = await store.upsert_user(
        who.platform, who.platform_user_id, who.display_name, bench.clock()
    )
    await bench.app.memory.import_(user, entry.character, json.loads(text))
    return entry.payload


def poisoned_export(template: dict[str, Any], entry: Entry) -> dict[str, Any]:
    """The template export with the entry's words as fact values (the entry's key), as summary
    claims citing the user's turn, and as the assistant's turn, which the summary does not
    cover (as when a window is exported before its compaction): the next prompt replays it."""
    data = copy.deepcopy(template)
    base = data["facts"][0]
    first_id = max(f["id"] for f in data["facts"]) + 1
    kinds = ("semantic", "emotional", "episodic")
    data["facts"] = [
        base | {"id": first_id + i, "key": entry.key, "kind": kinds[i % 3], "value": text}
        for i, text in enumerate(entry.messages)
    ]
    data["fact_history"] = []
    user_turn = next(t["id"] for t in data["turns"] if t["role"] == "user")
    data["summaries"][-1]["covers_up_to_turn_id"] = user_turn
    fields = data["summaries"][-1]["fields_json"]
    claims = [f"{text} {{cite:{user_turn}}}" for text in entry.messages]
    fields["established_facts"] = [*fields.get("established_facts", []), *claims]
    fields["canon"] = [*fields.get("canon", []), *claims]
    next(t for t in data["turns"] if t["role"] == "assistant")["text"] = " ".join(entry.messages)
    return data


PLAYERS = {
    "extraction": play_extraction,
    "compaction": play_compaction,
    "anchors": play_anchors,
    "import": play_import,
}
TEMPLATE_FACT = {
    "es": "Me llamo Ana y trabajo en una panadería de Deusto.",
    "en": "My name is Sam and I work at a bakery in Whitby.",
}


async def make_template(bench: Bench, language: str) -> dict[str, Any]:
    """A real export (one exchange, its fact, its summary) made through the engine: the import
    path then stays in the format the exporter writes, whatever it becomes."""
    entry = Entry(
        f"template-{language}",
        "template",
        language,
        (TEMPLATE_FACT[language],),
        (TEMPLATE_FACT[language],),
    )
    token = CURRENT.set(Attempt(entry, "template"))
    try:
        await say(bench, entry, "template", entry.messages)
        await end_conversation(bench, entry, "template", fold=True)
    finally:
        CURRENT.reset(token)
    who = incoming(entry, "template", "")
    user = await bench.app.store.find_user(who.platform, who.platform_user_id)
    assert user is not None
    data = await bench.app.memory.export(user, entry.character)
    roles = {t["role"] for t in data.get("turns", [])}
    if not data.get("facts") or not data.get("summaries") or not {"user", "assistant"} <= roles:
        raise RuntimeError(f"the {language} template export lacks a fact, summary or turn")
    return data
