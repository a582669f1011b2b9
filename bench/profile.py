"""The long-term profile over LoCoMo: extraction calls per session, block 2 against its budget.

Every LoCoMo conversation is replayed session by session through the real engine (`open_app`: a
Store on a temporary SQLite file, the repo's characters, `lighthouse_keeper`) with an in-process
fake LLM and a fake clock on `session_N_date_time`, one minute per LoCoMo line. speaker_a is one
DM user per conversation: a run of their lines is one user message, the run of speaker_b lines
after it the scripted reply; speaker_b lines that open a session are skipped (the bot never
speaks first). After each session the clock passes the inactivity timeout and the scheduler's
job runs (`app.sweep()`, then `drain()`), so extraction runs as in production.

The fake `record_profile` answer adds the session's `observation` entries of speaker_a:
- kind: emotional if the text names a feeling (FEELING), else episodic if it has a time marker
  or a one-off event verb (EVENT), else semantic; no event_date (LoCoMo gives none);
- key: the first four content words in snake_case, suffixed `_2`, `_3`... until unique among the
  current profile's keys (read from the request, as a model would) and this answer's;
- value: the observation cut to 300 chars, origin "stated";
- evidence: the user turn that carried each dia_id; a speaker_b dia_id (or a skipped opening
  line) counts as the nearest speaker_a line of the session, ties to the earlier one.
A rejected answer is sent again without the operations the feedback names, as a model would
(the extraction names every operation it refused when none was left to write).

Profile tokens: block 2 (`system[1]`) of each session's first reply request, by a fresh
TokenEstimator; the fake LLM reports zero usage, so the engine's estimator stays at ratio 1.0
too. "dropped" is `profile_lines(...).dropped` on the facts the session started with;
"block_dropped" counts active facts missing from the block, so it also sees what
`render_profile` cuts on its own; a "dangling header" is a section title with no fact under it.

Usage: .venv/bin/python bench/profile.py DATA_PATH [--json] [--budget N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import groupby
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is bench/, where this file would shadow the stdlib `profile`.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bot.app import App, open_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from memory.engine.llm import LLMRequest, LLMResponse, ToolCall  # noqa: E402
from memory.engine.tokens import TokenEstimator  # noqa: E402
from memory.models import Fact, Incoming, Thread  # noqa: E402
from memory.profile.view import profile_lines  # noqa: E402
from memory.summary.rolling import SUMMARY_TOOL  # noqa: E402

CHARACTER = "lighthouse_keeper"
PLATFORM = "bench"
KINDS = ("reply", "summary", "extraction")
SESSION_KEY = re.compile(r"^session_(\d+)$")
TURN_LINE = re.compile(r"^\[(\d+)\] \d{4}-\d{2}-\d{2} \d{2}:\d{2} (user|assistant|tool)\b")
PROFILE_LINE = re.compile(r"^\[(?:semantic|emotional|episodic)\] ([a-z0-9_]+) = ", re.MULTILINE)
FEEDBACK = "Your previous answer was rejected: "
REJECTED_OP = re.compile(r"(?:^|; )operation (\d+) \(")
FEELING = re.compile(
    r"\b(feel\w*|felt|emotion\w*|proud|pride|anxi\w+|excite\w*|stress\w*|grateful|thankful"
    r"|scared|afraid|fear\w*|lonely|overwhelm\w*|inspir\w*|motivat\w*|hope\w*|worr\w+|nervous"
    r"|happy|happiness|sad|sadness|frustrat\w*|upset|angry|reliev\w+|courage\w*|confiden\w+)\b",
    re.IGNORECASE,
)
EVENT = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|recently|ago|upcoming|last (?:week|weekend|month|year"
    r"|night|summer|friday|saturday|sunday)|next (?:week|weekend|month|year)|this (?:week"
    r"|weekend|month)|attended|visited|went|trip|took part|participated|hosted|celebrated)\b",
    re.IGNORECASE,
)
_STOP = "a an the and or but of to in on at for with from by about as is are was were be been has \
have had that this these those it its he she they them his her their who which also very s"
STOPWORDS = frozenset(_STOP.split())
FALLBACK_REPLY = "*Maggie nods and pours more tea.*"  # a session that ends on the user's line


@dataclass(frozen=True)
class Exchange:
    dia_ids: list[str]  # the run of speaker_a lines that makes one user message
    text: str
    reply: str  # the run of speaker_b lines after it
    lines: int  # LoCoMo lines used: one minute each on the clock


@dataclass
class LocomoSession:
    label: str  # "conv-26/session_3"
    start: datetime
    exchanges: list[Exchange]
    anchor: dict[str, str]  # any dia_id of the session -> dia_id of the nearest user line
    observations: list[tuple[str, list[str]]]  # speaker_a's (text, dia_ids)
    turn_of: dict[str, int] = field(default_factory=dict)  # user dia_id -> turn id, on replay


@dataclass
class Conversation:
    sample_id: str
    user_name: str
    sessions: list[LocomoSession]
    seen_turn: int = 0  # the newest turn id already mapped, on replay


def parse_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> aware UTC datetime (the data carries no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def dia_ids(raw: str | list[str]) -> list[str]:
    """A few observations cite a list, or a comma-separated string, of dia_ids."""
    items = raw if isinstance(raw, list) else re.split(r"[,;\s]+", raw)
    return [item.strip() for item in items if item.strip()]


def nearest_user(lines: list[dict[str, Any]], user: str) -> dict[str, str]:
    users = [i for i, line in enumerate(lines) if line["speaker"] == user]
    if not users:
        return {}
    return {
        line["dia_id"]: lines[min(users, key=lambda u: (abs(u - i), u))]["dia_id"]
        for i, line in enumerate(lines)
    }


def exchanges_of(lines: list[dict[str, Any]], user: str) -> list[Exchange]:
    runs = [list(run) for _, run in groupby(lines, key=lambda line: line["speaker"] == user)]
    if runs and runs[0][0]["speaker"] != user:
        runs.pop(0)  # the bot never speaks first: leading speaker_b lines are skipped
    result = []
    for index in range(0, len(runs), 2):
        asked, answer = runs[index], runs[index + 1] if index + 1 < len(runs) else []
        user_text = "\n".join(line["text"] for line in asked)
        reply = "\n".join(line["text"] for line in answer) or FALLBACK_REPLY
        ids = [line["dia_id"] for line in asked]
        result.append(Exchange(ids, user_text, reply, len(asked) + max(1, len(answer))))
    return result


def load_conversations(path: Path) -> list[Conversation]:
    result = []
    for raw in json.loads(path.read_text(encoding="utf-8")):
        talk, user = raw["conversation"], raw["conversation"]["speaker_a"]
        observed = raw.get("observation", {})
        numbers = sorted(int(m.group(1)) for key in talk if (m := SESSION_KEY.match(key)))
        sessions = []
        for n in numbers:
            lines = talk[f"session_{n}"]
            if not any(line["speaker"] == user for line in lines):
                continue  # no user message: the engine would never open a conversation
            notes = observed.get(f"session_{n}_observation", {}).get(user, [])
            sessions.append(
                LocomoSession(
                    label=f"{raw['sample_id']}/session_{n}",
                    start=parse_date(talk[f"session_{n}_date_time"]),
                    exchanges=exchanges_of(lines, user),
                    anchor=nearest_user(lines, user),
                    observations=[(text, dia_ids(ids)) for text, ids in notes],
                )
            )
        result.append(Conversation(raw["sample_id"], user, sessions))
    return result


def kind_of(text: str) -> str:
    if FEELING.search(text):
        return "emotional"
    return "episodic" if EVENT.search(text) else "semantic"


def slug(text: str, name: str, taken: set[str]) -> str:
    skip = STOPWORDS | {part.lower() for part in name.split()}
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in skip][:4]
    while len("_".join(words)) > 34:  # whole words only, room left for a `_NN` suffix
        words.pop()
    base = "_".join(words) or "fact"
    base = base if base[0].isalpha() else f"f_{base}"
    key, n = base, 1
    while key in taken:
        n += 1
        key = f"{base}_{n}"
    taken.add(key)
    return key


def given_turns(body: str, marker: str) -> list[tuple[int, str]]:
    """(id, role) of each `[ID] date role: text` line after `marker` in a request body."""
    lines = body.partition(marker)[2].splitlines()
    return [(int(m.group(1)), m.group(2)) for line in lines if (m := TURN_LINE.match(line))]


def scripted_summary(body: str) -> dict[str, list[str]]:
    """A small valid write_summary call: one claim citing the last folded turn."""
    turns = given_turns(body, "Turns to fold in:")
    fields: dict[str, list[str]] = {name: [] for name in SUMMARY_TOOL.input_schema["required"]}
    if turns:
        fields["established_facts"] = [f"They talked a while {{cite:{turns[-1][0]}}}"]
    return fields


class ReplayLLM:
    """`memory.engine.llm.LLM` playing LoCoMo: scripted replies, observations as profile
    operations."""

    def __init__(self, user_names: dict[str, str]) -> None:
        self.current = ""  # label of the session being replayed
        self.next_reply = ""
        self.last_reply: LLMRequest | None = None
        self.calls: list[tuple[str, str]] = []  # (kind, session label)
        self.sessions: dict[str, LocomoSession] = {}
        self.session_of_turn: dict[int, str] = {}
        self.user_names = user_names  # sample id -> speaker_a
        self.fallback_evidence = 0  # observations whose dia_ids map to no user turn here
        self.extraction_tokens: list[int] = []  # size of each extraction request
        self._answers: dict[str, list[dict[str, Any]]] = {}

    async def close(self) -> None:
        return None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = request.messages[-1].text if request.messages else ""
        label, calls, text = self.current, (), ""
        if request.kind == "reply":
            self.last_reply, text = request, self.next_reply
        elif request.kind == "summary":
            calls = (ToolCall(SUMMARY_TOOL.name, scripted_summary(body)),)
        elif request.kind == "extraction":
            turns = given_turns(body, "Session turns:")
            texts = [block.text for block in request.system] + [body]
            self.extraction_tokens.append(sum(TokenEstimator().count(t) for t in texts))
            label = self.session_of_turn.get(turns[0][0], label) if turns else label
            calls = (ToolCall("record_profile", {"operations": self._operations(label, body)}),)
        self.calls.append((request.kind, label))
        # Zero usage: the engine's token estimator is never calibrated away from 1.0.
        return LLMResponse(text=text, model="bench-replay", tool_calls=calls)

    def _operations(self, label: str, body: str) -> list[dict[str, Any]]:
        if label in self._answers:  # a retry: drop the operations the feedback names
            feedback = body.partition(FEEDBACK)[2]
            named = {int(n) for n in REJECTED_OP.findall(feedback)}
            answer = self._answers[label]
            self._answers[label] = [op for i, op in enumerate(answer) if i not in named]
            return self._answers[label]
        session = self.sessions.get(label)
        if session is None:
            return []
        users = [i for i, role in given_turns(body, "Session turns:") if role == "user"]
        taken = set(PROFILE_LINE.findall(body.partition("Session turns:")[0]))
        name = self.user_names[label.split("/")[0]]
        answer = []
        for text, ids in session.observations:
            cited = {session.turn_of.get(session.anchor.get(d, ""), -1) for d in ids}
            evidence = sorted(cited & set(users))
            if not evidence:
                self.fallback_evidence += 1
                evidence = users[:1]
            value = text.strip()[:300].strip()
            key = slug(value, name, taken)
            op = dict(op="add", kind=kind_of(value), key=key, value=value, evidence=evidence)
            answer.append(op | {"origin": "stated"})
        self._answers[label] = answer
        return answer


@dataclass
class SessionFigures:
    label: str
    profile_tokens: int
    active_facts: int
    dropped: int  # by profile_lines, on the budget
    block_dropped: int  # active facts missing from the rendered block
    dangling_header: bool  # a section title with no fact line under it


class BenchClock:
    def __init__(self) -> None:
        self.now = datetime(2000, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def facts_now(app: App, talk: Conversation) -> list[Fact]:
    user = await app.store.find_user(PLATFORM, talk.sample_id)
    return await app.store.facts(user.id, CHARACTER, "dm") if user else []


async def newest_user_turn(app: App, talk: Conversation, reply_id: int) -> int:
    """The Reply carries only its own id; read the user turn from the log (tool turns may sit
    between the two)."""
    user = await app.store.find_user(PLATFORM, talk.sample_id)
    assert user is not None
    new = await app.store.turns_after(Thread(user.id, CHARACTER, "dm"), talk.seen_turn)
    talk.seen_turn = reply_id
    return max(t.id for t in new if t.role == "user" and t.id < reply_id)


async def replay_session(
    app: App, llm: ReplayLLM, clock: BenchClock, talk: Conversation, session: LocomoSession
) -> SessionFigures:
    llm.current, llm.sessions[session.label], llm.last_reply = session.label, session, None
    started, facts, first_block = clock.now, await facts_now(app, talk), ""
    for exchange in session.exchanges:
        llm.next_reply = exchange.reply
        incoming = Incoming(
            PLATFORM, talk.sample_id, talk.user_name, "dm", talk.sample_id, CHARACTER, exchange.text
        )
        answer = await app.companion.handle(incoming)
        if not answer.ok or answer.turn_id is None:
            raise RuntimeError(f"{session.label}: the engine apologised instead of replying")
        user_turn = await newest_user_turn(app, talk, answer.turn_id)
        session.turn_of.update(dict.fromkeys(exchange.dia_ids, user_turn))
        llm.session_of_turn[user_turn] = session.label
        if not first_block and llm.last_reply is not None:
            first_block = llm.last_reply.system[1].text
        # Compaction takes seconds, the next message comes minutes later: let it finish.
        await app.companion.drain()
        clock.now += timedelta(minutes=exchange.lines)
    return figures_at_start(app.settings, session.label, facts, started, first_block)


def figures_at_start(
    settings: Settings, label: str, facts: list[Fact], started: datetime, block: str
) -> SessionFigures:
    """profile_lines with the inputs ProfileService had at the session's first message."""
    tokens = TokenEstimator()
    lines = profile_lines(
        facts, started, settings.lifetimes(), "en", settings.budget_profile_tokens, tokens
    )
    active = sum(f.status == "active" for f in facts)
    rows = block.splitlines()
    shown = sum(row.startswith("- ") for row in rows)
    titles = [i for i, row in enumerate(rows) if row and not row.startswith("- ")]
    # With no active fact the block is one sentence ("You know nothing..."), not a title.
    last = len(rows) - 1
    dangling = active > 0 and any(i == last or not rows[i + 1].startswith("- ") for i in titles)
    figures = (tokens.count(block), active, lines.dropped, active - shown, dangling)
    return SessionFigures(label, *figures)


async def replay_all(
    app: App, llm: ReplayLLM, clock: BenchClock, talks: Sequence[Conversation]
) -> list[SessionFigures]:
    timeout = timedelta(minutes=app.settings.inactivity_timeout_minutes)
    figures: list[SessionFigures] = []
    for talk in talks:
        clock.now = talk.sessions[0].start if talk.sessions else clock.now
        for session in talk.sessions:
            # Dates only move forward: a session dated inside the previous one starts after it.
            clock.now = max(clock.now, session.start)
            figures.append(await replay_session(app, llm, clock, talk, session))
            clock.now += timeout + timedelta(minutes=1)
            await app.sweep()  # the scheduler's job: end idle conversations, extract
            await app.companion.drain()
    return figures


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest rank: the smallest value with at least `share` of the values at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(share * len(ordered)) - 1)])


def spread(values: Sequence[float]) -> dict[str, float]:
    mean = round(sum(values) / len(values), 3) if values else 0.0
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    return {"mean": mean, "p50": p50, "p95": p95, "max": float(max(values, default=0))}


async def facts_stored(app: App, talks: Sequence[Conversation]) -> int:
    users = [await app.store.find_user(PLATFORM, talk.sample_id) for talk in talks]
    return sum([len(await app.store.facts(u.id, CHARACTER)) for u in users if u is not None])


async def collect(
    app: App, llm: ReplayLLM, figures: list[SessionFigures], talks: Sequence[Conversation]
) -> dict[str, Any]:
    budget = app.settings.budget_profile_tokens
    calls = {f.label: Counter[str]() for f in figures}
    for kind, label in llm.calls:
        calls.setdefault(label, Counter())[kind] += 1
    extraction = [calls[f.label]["extraction"] for f in figures]
    usage = [u for u in await app.store.usage_records() if u.kind == "extraction"]
    tokens = [f.profile_tokens for f in figures]
    return {
        "sessions": len(figures),
        "budget": budget,
        "llm_calls_per_session": {k: spread([calls[f.label][k] for f in figures]) for k in KINDS},
        "extraction_calls_per_session": spread(extraction)["mean"],
        "sessions_extraction_not_1": sum(n != 1 for n in extraction),
        "profile_tokens_p50": percentile(tokens, 0.5),
        "profile_tokens_p95": percentile(tokens, 0.95),
        "profile_tokens_max": max(tokens, default=0),
        "profile_within_budget_share": sum(t <= budget for t in tokens) / max(1, len(tokens)),
        "dropped_per_session": spread([f.dropped for f in figures]),
        "sessions_with_drops": sum(f.dropped > 0 for f in figures),
        "block_dropped_per_session": spread([f.block_dropped for f in figures]),
        "sessions_block_drops_more": sum(f.block_dropped > f.dropped for f in figures),
        "observations_offered": sum(len(s.observations) for t in talks for s in t.sessions),
        "facts_stored": await facts_stored(app, talks),
        "extractions_ok": sum(u.ok for u in usage),
        "rejected_extractions": sum(not u.ok for u in usage),
        "memory_rejections": await app.store.count_rejections(),
        "sessions_dangling_header": sum(f.dangling_header for f in figures),
        "extraction_request_tokens": spread(llm.extraction_tokens),
        "fallback_evidence": llm.fallback_evidence,
    }


def run(data: Path, budget: int | None = None) -> dict[str, Any]:
    """Replay every conversation of `data` and return the figures (see the module docstring)."""
    talks = load_conversations(data)
    llm = ReplayLLM({t.sample_id: t.user_name for t in talks})
    clock = BenchClock()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as folder:
        extra = {} if budget is None else {"budget_profile_tokens": budget}
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            database_path=Path(folder) / "bench.db",
            database_url=None,  # the bench's own database, never the environment's
            characters_dir=REPO / "characters",
            **extra,
        )

        async def go() -> dict[str, Any]:
            async with open_app(settings, llm=llm, clock=clock, start_scheduler=False) as app:
                figures = await replay_all(app, llm, clock, talks)
                return await collect(app, llm, figures, talks)

        result = asyncio.run(go())
    result["run_seconds"] = round(time.perf_counter() - began, 2)
    return result


def _dist(d: dict[str, float]) -> str:
    return f"mean {d['mean']:.2f}  p50 {d['p50']:g}  p95 {d['p95']:g}  max {d['max']:g}"


def table(r: dict[str, Any]) -> str:
    calls, budget = r["llm_calls_per_session"], r["budget"]
    tokens = "p50 {:g}  p95 {:g}  max {:g}".format(
        r["profile_tokens_p50"], r["profile_tokens_p95"], r["profile_tokens_max"]
    )
    rows = [
        ("sessions replayed", str(r["sessions"])),
        ("reply calls / session", _dist(calls["reply"])),
        ("summary calls / session", _dist(calls["summary"])),
        ("extraction calls / session (target 1)", _dist(calls["extraction"])),
        ("sessions with extraction calls != 1", str(r["sessions_extraction_not_1"])),
        (f"profile block tokens (budget {budget})", tokens),
        ("sessions within budget (target 100%)", f"{r['profile_within_budget_share']:.1%}"),
        ("facts dropped by budget / session", _dist(r["dropped_per_session"])),
        ("sessions with facts dropped", str(r["sessions_with_drops"])),
        ("active facts missing from block / session", _dist(r["block_dropped_per_session"])),
        ("sessions: block drops more than profile_lines", str(r["sessions_block_drops_more"])),
        ("sessions with a dangling section header", str(r["sessions_dangling_header"])),
        ("extraction request tokens", _dist(r["extraction_request_tokens"])),
        (
            "observations offered / facts stored",
            f"{r['observations_offered']} / {r['facts_stored']}",
        ),
        ("extraction calls ok / rejected", f"{r['extractions_ok']} / {r['rejected_extractions']}"),
        (
            "memory_rejections / evidence fallbacks",
            f"{r['memory_rejections']} / {r['fallback_evidence']}",
        ),
        ("run time", f"{r['run_seconds']:.1f} s"),
    ]
    width = max(len(name) for name, _ in rows) + 2
    return "\n".join(f"{name:<{width}}{value}" for name, value in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a LoCoMo JSON file, e.g. locomo_dev.json")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--budget", type=int, help="profile budget (default BUDGET_PROFILE_TOKENS)")
    args = parser.parse_args(argv)
    result = run(args.data, args.budget)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
