"""`companion chat`: the admin's terminal conversation, through the same commands and engine.

On a terminal the input is read with prompt_toolkit (line editing, arrow keys, a history file);
from a pipe (scripts, tests) it is read line by line. Ctrl-C during a reply cancels that reply;
at the prompt, Ctrl-C or Ctrl-D leaves.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sqlite3
import sys
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output

from bot.answers import Answer, Caller
from bot.command_line import run_line
from bot.commands import Commands
from bot.private_files import write_private_file
from bot.texts import text as catalogue
from memory.engine.companion import Companion
from memory.errors import UserFacingError

log = logging.getLogger(__name__)

PLATFORM = "terminal"
PROMPT = "> "


@dataclass(frozen=True)
class ChatPlaces:
    """Where the chat keeps its files: all under the data folder, never in the repository."""

    database: Path
    history: Path | None = None
    exports: Path = Path("data/exports")
    log_file: Path | None = None

    @classmethod
    def beside(cls, database: Path, log_file: Path | None = None) -> ChatPlaces:
        folder = database.parent
        return cls(database, folder / "chat_history", folder / "exports", log_file)


class LineReader(Protocol):
    async def read(self) -> str | None:
        """The next line; None when the user leaves (end of input, or Ctrl-C at the prompt)."""
        ...


class StreamReader:
    """A pipe or file: plain lines, no editing."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    async def read(self) -> str | None:
        line = await asyncio.to_thread(self._stream.readline)
        return line.rstrip("\n") if line else None


class PromptReader:
    """A terminal: prompt_toolkit's editing, so arrow keys move the cursor and never reach the
    conversation as escape codes, and Up recalls earlier lines (kept in the history file)."""

    def __init__(
        self,
        history: Path | None,
        prompt_input: Input | None = None,
        prompt_output: Output | None = None,
    ) -> None:
        self._session: PromptSession[str] = PromptSession(
            history=_history(history), input=prompt_input, output=prompt_output
        )

    async def read(self) -> str | None:
        try:
            return await self._session.prompt_async(PROMPT)
        except (EOFError, KeyboardInterrupt):
            return None


def _history(path: Path | None) -> FileHistory | InMemoryHistory:
    if path is None:
        return InMemoryHistory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
    except OSError as exc:  # a read-only data folder costs the history, not the chat
        log.warning("chat history not kept: %s", exc)
        return InMemoryHistory()
    return FileHistory(str(path))


async def _dispatch(commands: Commands, caller: Caller, text: str) -> Answer:
    """Slash commands from the registry, as on the chat platforms (an unknown `/word` is
    answered with the list of commands, never sent to the character); anything else is a
    message."""
    command, _, rest = text.partition(" ")
    if command == "/press":
        return await commands.button(caller, rest.strip())
    answer = await run_line(commands, caller, text)
    return answer if answer is not None else await commands.chat(caller, text)


async def _cancellable(work: Awaitable[Answer]) -> Answer | None:
    """Run `work`; Ctrl-C (SIGINT) meanwhile cancels it and returns None."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        installed = False
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves, not the reply
        return None
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


def _show(answer: Answer, speaker: str, stdout: TextIO, exports: Path, language: str) -> None:
    if answer.text:
        print(f"\n{speaker}: {answer.text}\n", file=stdout, flush=True)
    for button in answer.buttons:
        print(f"  [{button.label}]  /press {button.data}", file=stdout)
    if answer.document is not None:
        name, payload = answer.document
        path = write_private_file(exports, name, payload)
        print(f"  {catalogue(language, 'written_to', path=path)}", file=stdout, flush=True)


def _storage_line(exc: BaseException, places: ChatPlaces) -> str:
    where = f"; details in {places.log_file}" if places.log_file else ""
    if isinstance(exc, sqlite3.Error):
        return f"! the database {places.database} failed: {exc}{where}"
    return f"! a file could not be written: {exc}{where}"


async def _answer(
    commands: Commands, caller: Caller, text: str, places: ChatPlaces
) -> tuple[Answer | None, str | None]:
    """The answer to one line, or a one-line notice instead (cancelled, refused, storage)."""
    try:
        answer = await _cancellable(_dispatch(commands, caller, text))
    except UserFacingError as exc:
        return None, f"! {(await commands.user_error(caller, exc)).text}"
    except (sqlite3.Error, OSError) as exc:
        log.error("terminal chat: storage failed", exc_info=True)
        return None, _storage_line(exc, places)
    if answer is None:
        return None, "(reply cancelled)"
    return answer, None


async def run_chat(
    companion: Companion,
    commands: Commands,
    character_id: str,
    user_name: str,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    places: ChatPlaces | None = None,
    reader: LineReader | None = None,
) -> None:
    """Chat line by line until /quit, Ctrl-D or Ctrl-C at the prompt, then end the
    conversation."""
    places = places or ChatPlaces(Path("companion.db"))
    if reader is None:
        reader = PromptReader(places.history) if stdin.isatty() else StreamReader(stdin)
    character = companion.character(character_id)
    caller = Caller(PLATFORM, user_name, user_name, "dm", "terminal")
    await commands.switch(caller, character.id)
    language = await commands.language(caller)
    print(catalogue(language, "terminal_header", name=character.name), file=stdout)
    if await companion.is_new_thread(caller.incoming(character.id, "")):
        for opening in character.opening_messages:
            print(f"\n{character.name}: {opening.text}\n", file=stdout, flush=True)
    try:
        while (line := await reader.read()) is not None:
            text = line.strip()
            if text in ("/quit", "/exit"):
                break
            if not text:
                continue
            answer, notice = await _answer(commands, caller, text, places)
            if answer is not None:
                try:
                    _show(answer, character.name, stdout, places.exports, language)
                except BrokenPipeError:
                    raise  # the terminal is gone: nothing to tell, the CLI exits quietly
                except OSError as exc:
                    log.error("terminal chat: writing a file failed", exc_info=True)
                    notice = _storage_line(exc, places)
            if notice is not None:
                print(notice, file=stdout, flush=True)
    finally:
        try:
            await companion.end_conversation(caller.incoming(character.id, ""), reason="exit")
        except (sqlite3.Error, OSError):
            log.error("terminal chat: ending the conversation failed", exc_info=True)
