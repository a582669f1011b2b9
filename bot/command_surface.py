"""What a registry handler may call: the narrow face of ``bot.commands.Commands`` that
``bot/registry.py`` and ``bot/command_line.py`` are typed against, so that neither imports
the class that imports them (``Commands`` satisfies these protocols structurally)."""

from __future__ import annotations

from typing import Protocol

from bot.answers import Answer, Caller


class PresenceCommands(Protocol):
    """/zona, /incognito and /avisos (bot/presence.py)."""

    async def zone(self, caller: Caller, name: str) -> Answer: ...

    async def incognito(self, caller: Caller, on: bool) -> Answer: ...

    async def followups(self, caller: Caller, on: bool) -> Answer: ...


class SceneCommands(Protocol):
    """/escena (bot/scenes.py)."""

    async def show(self, caller: Caller) -> Answer: ...

    async def add(self, caller: Caller, character_id: str) -> Answer: ...

    async def remove(self, caller: Caller, character_id: str) -> Answer: ...

    async def mature(self, caller: Caller, on: bool) -> Answer: ...


class AccessCommandFace(Protocol):
    """/yo, /admin acceso, and a refused person's commands (bot/access_commands.py)."""

    async def refused(self, caller: Caller, command_key: str) -> Answer | None: ...

    async def whoami(self, caller: Caller) -> Answer: ...

    async def run(self, caller: Caller, action: str, args: list[str]) -> Answer: ...


class CanonFace(Protocol):
    """/admin canon (bot/canon_commands.py)."""

    async def run(self, caller: Caller, action: str, args: list[str]) -> Answer: ...


class CommandSurface(Protocol):
    """The methods the registry's handlers call, one per command family."""

    @property
    def presence(self) -> PresenceCommands: ...

    @property
    def scenes(self) -> SceneCommands: ...

    @property
    def access_commands(self) -> AccessCommandFace: ...

    @property
    def canon(self) -> CanonFace: ...

    async def language(self, caller: Caller) -> str: ...

    async def characters(self, caller: Caller) -> Answer: ...

    async def switch(self, caller: Caller, character_id: str) -> Answer: ...

    async def bind(self, caller: Caller, character_id: str | None) -> Answer: ...

    async def reload(self, caller: Caller) -> Answer: ...

    async def reset(self, caller: Caller) -> Answer: ...

    async def help(self, caller: Caller) -> Answer: ...

    async def start(self, caller: Caller) -> Answer: ...

    async def memoria(self, caller: Caller, action: str, args: str) -> Answer: ...
