"""`companion eval`: does the character still remember at turn 120? (seed 000's control test)

A script (YAML) holds the user's messages, in sessions, and control questions with the key words
the answer must contain, asked at chosen turns. The conversation runs through the real engine
and the configured LLM on a throw-away database, on a simulated clock (a minute a message, the
script's gaps between sessions, so sessions end and profiles are extracted as in production).
Questions are probes: asked of the memory as it stands, never added to the conversation. For
each failure the report says where the needed words were at that moment: in the window, the
summary, the profile, a retrieved fragment, or nowhere — which tells trimming, summarising and
block order apart.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.app import open_app
from bot.config import Settings
from memory.engine.responder import ProbeResult
from memory.errors import UserFacingError
from memory.models import Incoming

CLEAR_LINE = "\x1b[K"  # erase to the end of the line

PLACES = ("window", "summary", "profile", "fragment")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Question(_Strict):
    ask: str = Field(min_length=1)
    expect: list[str] = Field(min_length=1)


class Checkpoint(_Strict):
    after_turn: int = Field(ge=1)
    questions: list[Question] = Field(min_length=1)


class ScriptSession(_Strict):
    gap_hours: float = Field(0, ge=0)
    messages: list[str] = Field(min_length=1)


class Script(_Strict):
    character: str | None = None
    user: str = "eval"
    sessions: list[ScriptSession] = Field(min_length=1)
    checkpoints: list[Checkpoint] = Field(min_length=1)


def load_script(path: Path) -> Script:
    try:
        with path.open(encoding="utf-8") as stream:  # a syntax error's mark names the file
            return Script.model_validate(yaml.safe_load(stream))
    except (OSError, yaml.YAMLError) as exc:
        raise UserFacingError(f"{path}: cannot be read: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserFacingError(f"{path}: field '{where}': {first['msg']}") from exc


def _plain(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def contains_all(text: str, words: list[str]) -> bool:
    plain = _plain(text)
    return all(_plain(word) in plain for word in words)


def where_found(probe: ProbeResult, words: list[str]) -> list[str]:
    sources = {
        "window": "\n".join(probe.window),
        "summary": probe.summary,
        "profile": "\n".join(probe.profile),
        "fragment": "\n".join(probe.fragments),
    }
    return [place for place in PLACES if contains_all(sources[place], words)]


class SimulatedClock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


class ProgressBar(logging.Filter):
    """A one-line bar on a terminal (nothing on a pipe or file). As a filter on the log
    handlers, it clears its line before a log line is written, so the two never run into each
    other; the next step draws it again below the log line."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        super().__init__()
        self._total, self._width = max(total, 1), width
        self._stream = stream or sys.stderr
        self._shown = False

    def draw(self, done: int) -> None:
        if not self._stream.isatty():
            return
        filled = self._width * done // self._total
        bar = f"[{'#' * filled}{'-' * (self._width - filled)}] {done}/{self._total} turns"
        self._stream.write(f"\r{CLEAR_LINE}{bar}")
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write(f"\r{CLEAR_LINE}")
            self._stream.flush()
            self._shown = False

    def filter(self, record: logging.LogRecord) -> bool:
        self.clear()
        return True

    @contextmanager
    def over_logs(self) -> Iterator[ProgressBar]:
        """While active, every root log handler clears the bar first; the bar is gone after."""
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(self)
        try:
            yield self
        finally:
            for handler in handlers:
                handler.removeFilter(self)
            self.clear()


async def run_eval(
    settings: Settings, script: Script, character_id: str, show_progress: bool = True
) -> dict[str, Any]:
    """Play the script; returns the report (also what `--json` prints)."""
    clock = SimulatedClock()
    asked_at = {c.after_turn: c for c in script.checkpoints}
    total = sum(len(s.messages) for s in script.sessions)
    results: list[dict[str, Any]] = []
    bar = ProgressBar(total, sys.stderr if show_progress else io.StringIO())
    with bar.over_logs():
        async with open_app(settings, clock=clock, start_scheduler=False) as app:
            await _play(app, script, character_id, clock, asked_at, results, bar)
    failed = sum(len(r["failed"]) for r in results)
    return {
        "character": character_id,
        "turns": total,
        "checkpoints": results,
        "questions": sum(r["asked"] for r in results),
        "failed": failed,
    }


async def _play(
    app: Any,
    script: Script,
    character_id: str,
    clock: SimulatedClock,
    asked_at: dict[int, Checkpoint],
    results: list[dict[str, Any]],
    bar: ProgressBar,
) -> None:
    character = app.companion.character(character_id)
    turn = 0
    for session in script.sessions:
        if session.gap_hours:
            clock.now += timedelta(hours=session.gap_hours)
            await app.sweep()
            await app.companion.drain()
        for message in session.messages:
            turn += 1
            clock.now += timedelta(minutes=1)
            await app.companion.handle(_incoming(script, character.id, message))
            await app.companion.drain()
            if turn in asked_at:
                results.append(await _checkpoint(app, script, character.id, turn, asked_at[turn]))
            bar.draw(turn)


def _incoming(script: Script, character_id: str, text: str) -> Incoming:
    return Incoming("eval", script.user, script.user, "dm", "eval", character_id, text)


async def _checkpoint(
    app: Any, script: Script, character_id: str, turn: int, checkpoint: Checkpoint
) -> dict[str, Any]:
    failed = []
    for question in checkpoint.questions:
        probe = await app.companion.probe(_incoming(script, character_id, question.ask))
        if not contains_all(probe.reply, question.expect):
            failed.append(
                {
                    "question": question.ask,
                    "expected": question.expect,
                    "reply": probe.reply,
                    "found_in": where_found(probe, question.expect) or ["nowhere"],
                }
            )
    return {"turn": turn, "asked": len(checkpoint.questions), "failed": failed}


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['character']}: {report['turns']} turns, {report['questions']} control "
        f"question(s), {report['failed']} failed"
    ]
    for checkpoint in report["checkpoints"]:
        passed = checkpoint["asked"] - len(checkpoint["failed"])
        lines.append(f"turn {checkpoint['turn']}: {passed}/{checkpoint['asked']} passed")
        for miss in checkpoint["failed"]:
            lines.append(
                f"  FAIL “{miss['question']}”: the reply should contain "
                f"{', '.join(miss['expected'])}; those words were in: "
                f"{', '.join(miss['found_in'])}"
            )
    return "\n".join(lines)


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    evaluate = commands.add_parser(
        "eval", help="replay a scripted conversation and ask control questions at chosen turns"
    )
    evaluate.add_argument("--character", required=True, help="character id")
    evaluate.add_argument("--script", required=True, type=Path, help="the script (YAML)")
    evaluate.add_argument("--json", action="store_true", help="print one JSON report")


async def run_eval_command(args: argparse.Namespace, settings: Settings) -> int:
    script = load_script(args.script)
    if script.character and script.character != args.character:
        raise UserFacingError(
            f"{args.script} is written for '{script.character}', not '{args.character}'"
        )
    with tempfile.TemporaryDirectory(prefix="companion-eval-") as folder:
        # A throw-away database: an evaluation never touches real users' memory.
        isolated = settings.model_copy(update={"database_path": Path(folder) / "eval.db"})
        report = await run_eval(isolated, script, args.character, show_progress=not args.json)
    print(json.dumps(report, ensure_ascii=False) if args.json else format_report(report))
    return 0 if report["failed"] == 0 else 1
