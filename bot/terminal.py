"""`companion chat`: the admin's terminal conversation, through the same commands and engine."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from bot.answers import Answer, Caller
from bot.commands import Commands
from bot.registry import run_line
from bot.texts import text as catalogue
from memory.companion import Companion
from memory.errors import UserFacingError

PLATFORM = "terminal"


async def _read_line(stream: TextIO, prompt: str) -> str | None:
    """Read one line without blocking the event loop; None at end of input."""
    if stream.isatty():
        print(prompt, end="", flush=True)
    line = await asyncio.to_thread(stream.readline)
    return line.rstrip("\n") if line else None


def _show(answer: Answer, speaker: str, stdout: TextIO, folder: Path, language: str) -> None:
    if answer.text:
        print(f"\n{speaker}: {answer.text}\n", file=stdout, flush=True)
    for button in answer.buttons:
        print(f"  [{button.label}]  /press {button.data}", file=stdout)
    if answer.document is not None:
        name, payload = answer.document
        path = folder / name
        path.write_bytes(payload)
        print(f"  {catalogue(language, 'written_to', path=path)}", file=stdout)


async def _dispatch(commands: Commands, caller: Caller, text: str) -> Answer:
    """Slash commands from the registry, as on the chat platforms; anything else is a
    message."""
    command, _, rest = text.partition(" ")
    if command == "/press":
        return await commands.button(caller, rest.strip())
    answer = await run_line(commands, caller, text)
    return answer if answer is not None else await commands.chat(caller, text)


async def run_chat(
    companion: Companion,
    commands: Commands,
    character_id: str,
    user_name: str,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> None:
    """Chat line by line until /quit or end of input, then end the conversation."""
    character = companion.character(character_id)
    caller = Caller(PLATFORM, user_name, user_name, "dm", "terminal")
    await commands.switch(caller, character.id)
    header = catalogue(await commands.language(caller), "terminal_header", name=character.name)
    print(header, file=stdout)
    if await companion.is_new_thread(caller.incoming(character.id, "")):
        for opening in character.opening_messages:
            print(f"\n{character.name}: {opening.text}\n", file=stdout)
    while (line := await _read_line(stdin, "> ")) is not None:
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        try:
            answer = await _dispatch(commands, caller, text)
        except UserFacingError as exc:
            print(f"! {(await commands.user_error(caller, exc)).text}", file=stdout)
            continue
        _show(answer, character.name, stdout, Path.cwd(), await commands.language(caller))
    await companion.end_conversation(caller.incoming(character.id, ""), reason="exit")
