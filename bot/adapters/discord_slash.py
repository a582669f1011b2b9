"""The Discord slash commands: each one parses its options, calls `Commands` and responds.

The docstring of each callback is the description users see in Discord's command picker, so it
is one line, in Spanish like the command names.
"""

from __future__ import annotations

from typing import Literal

import discord
from discord import app_commands

from bot.adapters.discord_views import Responder, interaction_caller
from bot.commands import Commands

Choices = list[app_commands.Choice[str]]
AUTOCOMPLETE_LIMIT = 25  # Discord shows at most 25 suggestions


def add_slash_commands(
    tree: app_commands.CommandTree[discord.Client], commands: Commands, responder: Responder
) -> None:
    tree.add_command(Personaje(commands, responder))
    tree.add_command(Memoria(commands, responder))

    @tree.command(name="reset")
    async def reset(interaction: discord.Interaction) -> None:
        """Termina la conversación actual; lo importante queda guardado."""
        await responder.respond(interaction, commands.reset(interaction_caller(interaction)))

    @tree.command(name="ayuda")
    async def ayuda(interaction: discord.Interaction) -> None:
        """Qué puedo hacer y qué comandos hay."""
        await responder.respond(interaction, commands.help(interaction_caller(interaction)))


class Personaje(app_commands.Group, name="personaje"):
    """Ver o cambiar el personaje con el que hablas."""

    def __init__(self, commands: Commands, responder: Responder) -> None:
        super().__init__()
        self._commands = commands
        self._responder = responder

    @app_commands.command(name="lista")
    async def lista(self, interaction: discord.Interaction) -> None:
        """Los personajes disponibles, con botones para cambiar."""
        caller = interaction_caller(interaction)
        await self._responder.respond(interaction, self._commands.characters(caller))

    @app_commands.command(name="cambiar")
    @app_commands.rename(character_id="id")
    @app_commands.describe(character_id="El personaje (su id)")
    async def cambiar(self, interaction: discord.Interaction, character_id: str) -> None:
        """Habla con otro personaje; cada uno guarda su propia memoria."""
        caller = interaction_caller(interaction)
        await self._responder.respond(interaction, self._commands.switch(caller, character_id))

    @app_commands.command(name="vincular")
    @app_commands.rename(character_id="id")
    @app_commands.describe(character_id="El personaje (su id)")
    async def vincular(self, interaction: discord.Interaction, character_id: str) -> None:
        """Admin: este canal contesta a todos los mensajes como un personaje."""
        caller = interaction_caller(interaction)
        work = self._commands.bind(caller, character_id)
        await self._responder.respond(interaction, work, personal=False)

    @app_commands.command(name="desvincular")
    async def desvincular(self, interaction: discord.Interaction) -> None:
        """Admin: este canal deja de contestar a todos los mensajes."""
        work = self._commands.bind(interaction_caller(interaction), None)
        await self._responder.respond(interaction, work, personal=False)

    @app_commands.command(name="recargar")
    async def recargar(self, interaction: discord.Interaction) -> None:
        """Admin: recarga los ficheros de personajes; si alguno está roto, sigue el anterior."""
        work = self._commands.reload(interaction_caller(interaction))
        await self._responder.respond(interaction, work)

    @cambiar.autocomplete("character_id")
    @vincular.autocomplete("character_id")
    async def _character_ids(self, interaction: discord.Interaction, current: str) -> Choices:
        needle = current.casefold()
        return [
            app_commands.Choice(name=f"{name} ({character_id})"[:100], value=character_id)
            for character_id, name in self._commands.character_choices()
            if needle in character_id.casefold() or needle in name.casefold()
        ][:AUTOCOMPLETE_LIMIT]


class Memoria(app_commands.Group, name="memoria"):
    """Ver, corregir, borrar o exportar lo que recuerdo de ti."""

    def __init__(self, commands: Commands, responder: Responder) -> None:
        super().__init__()
        self._commands = commands
        self._responder = responder

    async def _run(self, interaction: discord.Interaction, action: str, *args: object) -> None:
        """Every subcommand: the Spanish action name and its arguments joined by spaces."""
        caller = interaction_caller(interaction)
        work = self._commands.memoria(caller, action, " ".join(str(a) for a in args))
        await self._responder.respond(interaction, work)

    @app_commands.command(name="ver")
    async def ver(self, interaction: discord.Interaction) -> None:
        """Lo que recuerdo de ti, numerado, con su tipo y su fecha."""
        await self._run(interaction, "ver")

    @app_commands.command(name="corregir")
    @app_commands.describe(numero="El número del recuerdo en /memoria ver", valor="Lo correcto")
    async def corregir(
        self, interaction: discord.Interaction, numero: app_commands.Range[int, 1], valor: str
    ) -> None:
        """Corrige un recuerdo."""
        await self._run(interaction, "corregir", numero, valor)

    @app_commands.command(name="borrar")
    @app_commands.describe(numero="El número del recuerdo en /memoria ver")
    async def borrar(
        self, interaction: discord.Interaction, numero: app_commands.Range[int, 1]
    ) -> None:
        """Borra un recuerdo."""
        await self._run(interaction, "borrar", numero)

    @app_commands.command(name="olvidar")
    async def olvidar(self, interaction: discord.Interaction) -> None:
        """Olvida todo lo que sé de ti con este personaje."""
        await self._run(interaction, "olvidar")

    @app_commands.command(name="exportar")
    async def exportar(self, interaction: discord.Interaction) -> None:
        """Descarga todo lo que recuerdo de ti en un archivo JSON."""
        await self._run(interaction, "exportar")

    @app_commands.command(name="revisar")
    @app_commands.describe(estado="on: los recuerdos nuevos esperan tu visto bueno; off: no")
    async def revisar(self, interaction: discord.Interaction, estado: Literal["on", "off"]) -> None:
        """Elige si los recuerdos nuevos esperan tu visto bueno antes de usarse."""
        await self._run(interaction, "revisar", estado)

    @app_commands.command(name="caduca")
    @app_commands.describe(
        numero="El número del recuerdo en /memoria ver", duracion="30d, 2w, 6m, 1y o nunca"
    )
    async def caduca(
        self, interaction: discord.Interaction, numero: app_commands.Range[int, 1], duracion: str
    ) -> None:
        """Cambia cuánto tiempo doy por bueno un recuerdo."""
        await self._run(interaction, "caduca", numero, duracion)

    @app_commands.command(name="porque")
    async def porque(self, interaction: discord.Interaction) -> None:
        """De qué recuerdos y mensajes salió mi última respuesta."""
        await self._run(interaction, "porque")
