"""`companion chat`: the admin's terminal conversation, through the same commands and engine.

On a terminal the input is read with prompt_toolkit (line editing, arrow keys, a history file);
from a pipe (scripts, tests) it is read line by line. Ctrl-C during a reply cancels that reply;
at the prompt, Ctrl-C or Ctrl-D leaves.
"""

from __future__ import annotations

import asyncio
import logging
import re
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
from bot.llm.diagnosis import ReplyFailures
from bot.private_files import write_private_file
from bot.texts import text as catalogue
from cards.character import opening_messages_for
from memory.engine.companion import Companion
from memory.errors import UserFacingError
from memory.models import Incoming

log = logging.getLogger(__name__)

PLATFORM = "terminal"
PROMPT = "> "
_UNSAFE = re.compile(r"[^\w.-]")  # as bot/cli_memory.py makes its export names


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


def _show(
    answer: Answer, speaker: str, stdout: TextIO, places: ChatPlaces, user: str, language: str
) -> None:
    if answer.text:
        print(f"\n{speaker}: {answer.text}\n", file=stdout, flush=True)
    for button in answer.buttons:
        print(f"  [{button.label}]  /press {button.data}", file=stdout)
    if answer.document is not None:
        name, payload = answer.document
        path = write_private_file(places.exports, export_name(name, user), payload)
        print(f"  {catalogue(language, 'written_to', path=path)}", file=stdout, flush=True)


def export_name(name: str, user_name: str) -> str:
    """`memoria-detective_bilbao-terminal-ana.json`: the exports folder is shared by every
    user of the terminal, so the file says whose memory it holds (the name made safe for a file
    name); `companion memory export` adds `-admin` to its own, so that neither meets the
    other's file."""
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    safe = _UNSAFE.sub("_", f"{PLATFORM}-{user_name}")
    return f"{stem}-{safe}.{suffix}" if suffix else f"{stem}-{safe}"


def _storage_line(exc: BaseException, places: ChatPlaces) -> str:
    where = f"; details in {places.log_file}" if places.log_file else ""
    if isinstance(exc, sqlite3.Error):
        return f"! the database {places.database} failed: {exc}{where}"
    return f"! a file could not be written: {exc}{where}"


async def _answer(chat: _Chat, text: str) -> tuple[Answer | None, str | None]:
    """The answer to one line, or a one-line notice instead (cancelled, refused, storage, or
    why the model failed: the admin is the one who can fix it, so the cause replaces the
    character's apology)."""
    companion, commands, caller, places = chat.companion, chat.commands, chat.caller, chat.places
    if chat.failures is not None:
        chat.failures.take()  # an earlier line's failure is not this one's
    try:
        # What the thread holds before the line, so that a Ctrl-C can say what it kept.
        incoming = caller.incoming((await commands.character_for(caller)).id, text)
        before = await companion.turn_count(incoming)
        answer = await _cancellable(_dispatch(commands, caller, text))
        if answer is None:
            return await _after_cancel(companion, incoming, before, await commands.language(caller))
    except UserFacingError as exc:
        return None, f"! {(await commands.user_error(caller, exc)).text}"
    except (sqlite3.Error, OSError) as exc:
        log.error("terminal chat: storage failed", exc_info=True)
        return None, _storage_line(exc, places)
    cause = chat.failures.take() if chat.failures is not None and not answer.ok else None
    if cause is not None:
        where = f" (details in {places.log_file})" if places.log_file else ""
        return None, f"! the model failed: {cause}{where}"
    return answer, None


async def _after_cancel(
    companion: Companion, incoming: Incoming, before: int, language: str
) -> tuple[Answer | None, str | None]:
    """What Ctrl-C really left in the store, said as it is (in the session's language): a
    reply stored before the cancel arrived is part of the conversation, so it is shown rather
    than called cancelled."""
    kept = await companion.turns_since(incoming, before)
    reply = next((t for t in reversed(kept) if t.role == "assistant"), None)
    if reply is not None:
        return Answer(reply.text), catalogue(language, "cancel_too_late")
    if any(t.role == "user" for t in kept):
        return None, catalogue(language, "cancel_kept")
    return None, catalogue(language, "cancel_not_kept")


async def run_chat(
    companion: Companion,
    commands: Commands,
    character_id: str,
    user_name: str,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    places: ChatPlaces | None = None,
    reader: LineReader | None = None,
    failures: ReplyFailures | None = None,
) -> None:
    """Chat line by line until /quit, Ctrl-D or Ctrl-C at the prompt, then end the
    conversation; `failures` (the LLM the companion calls) tells why a reply failed."""
    places = places or ChatPlaces(Path("companion.db"))
    if reader is None:
        reader = PromptReader(places.history) if stdin.isatty() else StreamReader(stdin)
    character = companion.character(character_id)
    caller = Caller(PLATFORM, user_name, user_name, "dm", "terminal")
    await commands.switch(caller, character.id)
    language = await commands.language(caller)
    print(catalogue(language, "terminal_header", name=character.name), file=stdout)
    if await companion.is_new_thread(caller.incoming(character.id, "")):
        for opening in opening_messages_for(character, user_name, language):
            print(f"\n{character.name}: {opening.text}\n", file=stdout, flush=True)
    try:
        while (line := await reader.read()) is not None:
            text = line.strip()
            if text in ("/quit", "/exit"):
                break
            if text:
                chat = _Chat(companion, commands, caller, places, stdout, failures)
                await _one_line(chat, text)
    finally:
        await _end(companion, commands, caller)


@dataclass(frozen=True)
class _Chat:
    companion: Companion
    commands: Commands
    caller: Caller
    places: ChatPlaces
    stdout: TextIO
    failures: ReplyFailures | None = None


async def _one_line(chat: _Chat, text: str) -> None:
    commands, caller, places, stdout = chat.commands, chat.caller, chat.places, chat.stdout
    answer, notice = await _answer(chat, text)
    if notice is not None and answer is not None:
        print(notice, file=stdout, flush=True)  # says what the reply below is
        notice = None
    if answer is not None:
        # The speaker is whoever answers now: `/personaje NAME` may just have switched.
        speaker = (await commands.character_for(caller)).name
        try:
            _show(answer, speaker, stdout, places, caller.user_id, await commands.language(caller))
        except BrokenPipeError:
            raise  # the terminal is gone: nothing to tell, the CLI exits quietly
        except OSError as exc:
            log.error("terminal chat: writing a file failed", exc_info=True)
            notice = _storage_line(exc, places)
    if notice is not None:
        print(notice, file=stdout, flush=True)


async def _end(companion: Companion, commands: Commands, caller: Caller) -> None:
    """End the conversation with the character the chat ends with."""
    try:
        character = await commands.character_for(caller)
        await companion.end_conversation(caller.incoming(character.id, ""), reason="exit")
    except (sqlite3.Error, OSError):
        log.error("terminal chat: ending the conversation failed", exc_info=True)
