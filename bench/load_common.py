"""Shared pieces of the load benches (throughput, overhead, memory_bound): a fake LLM of fixed
latency that times itself per message, a per-store-method timer, percentiles and RSS.

The fake LLM attributes its own time to the message being handled through a context variable:
`Companion.handle` awaits `llm.complete` in the caller's task, so the variable set by the bench
around one `chat()` call is the one the fake sees. Background jobs (compaction, extraction) run in
tasks spawned from that call and inherit a copy of the context, so their LLM time would land on
the same record: only `kind == "reply"` time is attributed, the rest is only counted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import inspect
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import Any

from bench.common import REPO
from bot.answers import Caller
from bot.app import App
from bot.config import Settings
from memory.engine.llm import LLMError, LLMRequest, LLMResponse, ToolCall, Usage
from memory.engine.tokens import CHARS_PER_TOKEN
from memory.models import Summary, SummaryFields, Thread
from memory.profile.extraction import EXTRACTION_TOOL
from memory.store import MemoryStore
from memory.store.sqlite import SqliteStore
from memory.summary.rolling import SUMMARY_TOOL

BENCH_MODEL = "bench-fixed-latency"
FOLDED_ID = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
REPLY = "Entiendo. Cuéntame un poco más de eso, que me interesa."


@dataclass
class MessageTiming:
    """What one message cost: set by the bench, filled in by the fake LLM and the store timer."""

    llm_seconds: float = 0.0
    store_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    store_calls: int = 0


CURRENT: contextvars.ContextVar[MessageTiming | None] = contextvars.ContextVar(
    "bench_message", default=None
)
# The store method a round trip to the DB thread is made for (set by the store timer).
STORE_METHOD: contextvars.ContextVar[str] = contextvars.ContextVar("bench_store_method")


def _summary_arguments(request: LLMRequest) -> dict[str, list[str]]:
    """A minimal valid write_summary call: every field present, one cited claim."""
    _, _, folded = request.messages[-1].text.partition("Turns to fold in:\n")
    ids = FOLDED_ID.findall(folded)
    arguments: dict[str, list[str]] = {name: [] for name in SUMMARY_TOOL.input_schema["required"]}
    if ids:
        arguments["tone"] = [f"friendly and relaxed {{cite:{ids[-1]}}}"]
        arguments["relationship"] = [f"getting to know each other {{cite:{ids[0]}}}"]
    return arguments


class FixedLatencyLLM:
    """Sleeps `latency` seconds with asyncio (as a network call would), then answers briefly."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls: Counter[str] = Counter()
        # How late the event loop woke the sleeper: a direct measure of loop congestion.
        self.overshoot: list[float] = []

    async def close(self) -> None:
        return None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        self.calls[request.kind] += 1
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if request.kind == "reply":
            text, calls = REPLY, ()
        elif request.kind == "summary":
            text, calls = "", (ToolCall(SUMMARY_TOOL.name, _summary_arguments(request), "b"),)
        elif request.kind == "extraction":
            text, calls = "", (ToolCall(EXTRACTION_TOOL.name, {"operations": []}, "b"),)
        else:
            raise LLMError(f"the bench LLM has no answer for '{request.kind}' requests")
        chars = sum(len(b.text) for b in request.system)
        chars += sum(len(m.text) for m in request.messages)
        usage = Usage(input_tokens=int(chars / CHARS_PER_TOKEN), output_tokens=20)
        elapsed = time.perf_counter() - started
        if self.latency > 0:
            self.overshoot.append(elapsed - self.latency)
        record = CURRENT.get()
        if record is not None and request.kind == "reply":
            record.llm_seconds += elapsed
        return LLMResponse(text, BENCH_MODEL, usage, calls, latency_ms=elapsed * 1000)


def time_store_calls(store: MemoryStore) -> None:
    """Wrap every public coroutine method of this store (either backend) so that its wall time
    (queue wait for the database included) is added to the current message's record. Instance
    attributes shadow the class methods, so every holder of this store is timed; no engine file
    changes."""
    for name in dir(type(store)):
        method = getattr(store, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(method):
            continue
        setattr(store, name, _timed(name, method))


def _timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        if STORE_METHOD.get(None) is not None:  # called by another store method: counted there
            return await method(*args, **kwargs)
        started = time.perf_counter()
        token = STORE_METHOD.set(name)
        try:
            return await method(*args, **kwargs)
        finally:
            STORE_METHOD.reset(token)
            record = CURRENT.get()
            if record is not None:
                record.store_seconds[name] += time.perf_counter() - started
                record.store_calls += 1

    return timed


@dataclass
class WorkerLoad:
    """Round trips to the database thread, and how long that one thread was busy running them
    (SQLite work, plus waiting for the GIL between C calls): it is the only place SQL runs."""

    round_trips: int = 0
    busy_seconds: float = 0.0
    # By store method (the outermost one timed by time_store_calls; "other" outside them).
    trips_by_method: Counter[str] = field(default_factory=Counter)
    busy_by_method: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def top(self, messages: int, count: int = 8) -> list[dict[str, Any]]:
        """The store methods that keep the DB thread busiest, per message."""
        ranked = sorted(self.busy_by_method.items(), key=lambda item: -item[1])[:count]
        return [
            {
                "method": name,
                "db_ms_per_message": round(busy / messages * 1000, 3),
                "round_trips_per_message": round(self.trips_by_method[name] / messages, 2),
            }
            for name, busy in ranked
        ]


def count_round_trips(store: SqliteStore) -> WorkerLoad:
    """Wrap this SQLite store's `_run` (its one door to the database thread)."""
    load = WorkerLoad()
    original = store._run

    async def run(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        load.round_trips += 1
        method = STORE_METHOD.get("other")
        load.trips_by_method[method] += 1

        def timed(*inner: Any, **named: Any) -> Any:  # on the DB thread, the figures' one writer
            started = time.perf_counter()
            try:
                return fn(*inner, **named)
            finally:
                elapsed = time.perf_counter() - started
                load.busy_seconds += elapsed
                load.busy_by_method[method] += elapsed

        return await original(timed, *args, **kwargs)

    store._run = run  # type: ignore[method-assign]
    return load


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size in MB: VmRSS and VmHWM, or ru_maxrss for both."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return peak, peak
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def load_average() -> float:
    """The 1-minute load average: other processes on the machine skew every timing here."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def characters_with_retrieval(folder: Path, mode: str | None) -> Path:
    """The repo's characters, or a copy in `folder` whose every sheet has `retrieval: mode`:
    turning automatic recall off shows what it costs per message."""
    if mode is None:
        return REPO / "characters"
    target = folder / f"characters-retrieval-{mode}"
    shutil.copytree(REPO / "characters", target, dirs_exist_ok=True)
    for sheet in target.glob("*.y*ml"):
        text = re.sub(r"(?m)^retrieval:.*\n?", "", sheet.read_text(encoding="utf-8"))
        sheet.write_text(f'{text.rstrip()}\nretrieval: "{mode}"\n', encoding="utf-8")
    return target


def bench_settings(database: Path, **overrides: Any) -> Settings:
    """The bot's settings with no .env, a throw-away database, the repo's characters, and a rate
    limit no bench user can reach (the bench measures the engine, not the limiter)."""
    values: dict[str, Any] = {
        "database_path": database,
        "database_url": None,  # never a DATABASE_URL of the environment: the bench picks
        "characters_dir": REPO / "characters",
        "llm_model": BENCH_MODEL,
        "rate_limit_messages": 1_000_000,
    }
    return Settings(_env_file=None, **(values | overrides))  # type: ignore[call-arg]


def caller(index: int) -> Caller:
    return Caller("bench", f"user-{index}", f"User {index}", "dm", f"dm-{index}")


USER_LINES = (
    "Hoy he salido a caminar por el puerto y me he acordado de lo que me contaste.",
    "No he dormido muy bien, tengo la entrevista del viernes en la cabeza todo el rato.",
    "Mi hermana viene a verme el fin de semana, hace meses que no la veo.",
    "¿Tú qué harías si tuvieras que elegir entre quedarte o mudarte a otra ciudad?",
    "He empezado a leer la novela que me recomendaste, de momento me está gustando.",
    "El trabajo ha sido un caos hoy, pero al menos he terminado el informe a tiempo.",
)


def user_line(user: int, message: int) -> str:
    return f"{USER_LINES[(user + message) % len(USER_LINES)]} ({message + 1})"


HISTORY_REPLIES = (
    "Qué bien que me lo cuentes. ¿Y cómo te sentiste después de caminar por el puerto?",
    "La entrevista del viernes te va a salir bien, ya lo verás; cuéntame cómo te preparas.",
    "Tu hermana seguro que tiene ganas de verte también. ¿Qué planes tenéis?",
)


async def seed_history(
    app: App, users: int, turns: int, caller_of: Callable[[int], Caller] = caller
) -> None:
    """Give every bench user one earlier conversation of `turns` turns, ended, extracted and
    summarised, the day before: so that each new message has a turn log to recall from (a
    thread whose whole history is in the window skips recall), as a returning user does.
    `caller_of` makes user `index`'s caller (another platform's, for the scale-out bench)."""
    if turns <= 0:
        return
    store, character = app.store, app.companion.characters.default_id
    yesterday = datetime.now(UTC) - timedelta(days=1)
    for index in range(users):
        who = caller_of(index)
        user = await store.upsert_user(who.platform, who.user_id, who.display_name, yesterday)
        thread = Thread(user.id, character, who.incoming(character, "").scope)
        conversation = await store.start_conversation(thread, yesterday)
        last = 0
        for number in range(turns):
            said = user_line(index + 3, number) if number % 2 == 0 else None
            text = said or HISTORY_REPLIES[(index + number) % len(HISTORY_REPLIES)]
            role = "user" if said else "assistant"
            last = (await store.add_turn(conversation, role, text, yesterday)).id
        await store.end_conversation(conversation.id, "inactivity", yesterday)
        await store.mark_extracted(conversation.id, "done", yesterday)
        fields = SummaryFields(tone=(f"cercano {{cite:{last}}}",))
        await store.save_summary(thread, Summary(fields, frozenset({last}), last, yesterday))


def closing_lines(result: dict[str, Any]) -> list[str]:
    """The PASS/FAIL lines of the targets (if any) and the run's time and machine load."""
    lines = [
        f"{'PASS' if ok else 'FAIL'}  {name}" for name, ok in result.get("targets", {}).items()
    ]
    lines.append(
        f"run time: {result['run_seconds']} s; load average (1 min) before/after: "
        f"{result['load_average_1m_before']}/{result['load_average_1m_after']} on "
        f"{os.cpu_count()} CPUs"
    )
    return lines


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """--retrieval and --json, the same in every load benchmark."""
    parser.add_argument(
        "--retrieval", choices=("auto", "tool", "off"), help="override every character's mode"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the table to stderr)"
    )


def run_child(script: str, args: Sequence[object], what: str) -> dict[str, Any]:
    """Run `script --child ARGS` in a fresh interpreter and return the JSON object it prints
    last: every run starts from the same empty process, so one run's heap, threads and
    frozen objects cannot slow or inflate the next."""
    env = os.environ | {"PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, script, "--child", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the run for {what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def answered_as_child(argv: list[str], child: Callable[[list[str]], dict[str, Any]]) -> bool:
    """`--child ARGS`, as `run_child` starts a bench: one run here, its JSON object printed."""
    if argv[:1] != ["--child"]:
        return False
    print(json.dumps(child(argv[1:])))
    return True


def numbers(text: str, kind: Callable[[str], Any]) -> list[Any]:
    """A comma-separated option ("100,1000") as a list of `kind`."""
    return [kind(part) for part in text.split(",") if part.strip()]
