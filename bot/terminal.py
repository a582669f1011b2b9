"""`companion chat`: the admin's terminal conversation, through the same engine and database."""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from memory.companion import Companion
from memory.errors import UserFacingError
from memory.models import Incoming

PLATFORM = "terminal"
HELP = "Commands: /reset ends the conversation, /quit leaves (Ctrl-D too)."


async def _read_line(stream: TextIO, prompt: str) -> str | None:
    """Read one line without blocking the event loop; None at end of input."""
    if stream.isatty():
        print(prompt, end="", flush=True)
    line = await asyncio.to_thread(stream.readline)
    return line.rstrip("\n") if line else None


async def run_chat(
    companion: Companion,
    character_id: str,
    user_name: str,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> None:
    """Chat line by line until /quit or end of input, then end the conversation."""
    character = companion.character(character_id)

    def incoming(text: str) -> Incoming:
        return Incoming(PLATFORM, user_name, user_name, "dm", "terminal", character.id, text)

    print(f"{character.name} — {HELP}", file=stdout)
    if await companion.is_new_thread(incoming("")):
        for opening in character.opening_messages:
            print(f"\n{character.name}: {opening.text}\n", file=stdout)
    while (line := await _read_line(stdin, "> ")) is not None:
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text == "/reset":
            await companion.reset(incoming(text))
            print("(conversation ended; the next message starts a new one)", file=stdout)
            continue
        try:
            reply = await companion.handle(incoming(text))
        except UserFacingError as exc:
            print(f"! {exc.message}", file=stdout)
            continue
        print(f"\n{character.name}: {reply.text}\n", file=stdout, flush=True)
    await companion.end_conversation(incoming(""), reason="exit")
