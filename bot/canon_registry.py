"""The registry's /admin canon (bot/canon_commands.py): the operator reviews the canon proposals
from a private chat with the bot."""

from __future__ import annotations

from collections.abc import Awaitable

from bot.answers import Answer, Caller
from bot.command_surface import CommandSurface
from bot.registry_parts import Arg, Command, Handler, Words, sub

PROPOSAL = Arg(
    "id",
    Words("id", "id"),
    Words("El número de la propuesta (/admin canon lo da)", "The proposal's number (/admin canon)"),
    "int",
)
PLACE = Arg(
    "lugar",
    Words("lugar", "place"),
    Words("ficha (del personaje) o lore (de su mundo)", "sheet (itself) or lore (its world)"),
    "choice",
    ("ficha", "lore", "sheet"),
    shown=Words("ficha|lore", "sheet|lore"),
    optional=True,  # the sheet
)


def _canon(action: str) -> Handler:
    def handler(commands: CommandSurface, caller: Caller, args: list[str]) -> Awaitable[Answer]:
        return commands.canon.run(caller, action, args)

    return handler


CANON = Command(
    "admin.canon",
    Words("canon", "canon"),
    Words("Admin: lo que los personajes han establecido, por revisar",
          "Admin: what characters established, to review"),
    admin=True,
    default="admin.canon.lista",
    subcommands=(
        sub("admin.canon.lista", "lista", "list", "Admin: las propuestas pendientes, o una",
            "Admin: the pending proposals, or one", _canon("lista"),
            Arg("id", PROPOSAL.names, PROPOSAL.help, "int", optional=True), admin=True),
        sub("admin.canon.aprobar", "aprobar", "approve", "Admin: escribe la propuesta en el "
            "personaje", "Admin: write the proposal into the character", _canon("aprobar"),
            PROPOSAL, PLACE, admin=True),
        sub("admin.canon.rechazar", "rechazar", "reject", "Admin: descarta la propuesta",
            "Admin: drop the proposal", _canon("rechazar"), PROPOSAL, admin=True),
    ),
)  # fmt: skip
