"""The registry's commands of who may talk (bot/access_commands.py): /yo, and /admin acceso,
the operator's rules changed live."""

from __future__ import annotations

from collections.abc import Awaitable

from bot.answers import Answer, Caller
from bot.canon_registry import CANON
from bot.command_surface import CommandSurface
from bot.registry_parts import Arg, Command, Handler, Words, sub

KIND = Arg(
    "tipo",
    Words("tipo", "kind"),
    Words("persona, grupo, servidor, canal o rol", "user, group, server, channel or role"),
    "choice",
    ("persona", "grupo", "servidor", "canal", "rol", "user", "group", "server", "channel", "role"),
    shown=Words("persona|grupo|servidor|canal|rol", "user|group|server|channel|role"),
)
TARGET = Arg(
    "id",
    Words("id", "id"),
    Words("Su id (/yo lo da); de otra plataforma: discord:ID", "Its id (/whoami gives it)"),
)
STATE = Arg(
    "estado", Words("estado", "state"), Words("on u off", "on or off"), "choice", ("on", "off")
)


def _access(action: str) -> Handler:
    def handler(commands: CommandSurface, caller: Caller, args: list[str]) -> Awaitable[Answer]:
        return commands.access_commands.run(caller, action, args)

    return handler


def _rule(action: str, en: str, help_es: str, help_en: str) -> Command:
    return sub(f"admin.acceso.{action}", action, en, help_es, help_en, _access(action), KIND,
               TARGET, admin=True)  # fmt: skip


ACCESO = Command(
    "admin.acceso",
    Words("acceso", "access"),
    Words("Admin: quién puede hablar con el bot", "Admin: who may talk to the bot"),
    admin=True,
    default="admin.acceso.lista",
    subcommands=(
        sub("admin.acceso.lista", "lista", "list", "Admin: las reglas de acceso",
            "Admin: the access rules", _access("lista"), admin=True),
        _rule("permitir", "allow", "Admin: a la lista de permitidos",
              "Admin: onto the allowed list"),
        _rule("bloquear", "block", "Admin: a la lista de bloqueados",
              "Admin: onto the blocked list"),
        _rule("revocar", "unallow", "Admin: fuera de la lista de permitidos",
              "Admin: off the allowed list"),
        _rule("desbloquear", "unblock", "Admin: fuera de la lista de bloqueados",
              "Admin: off the blocked list"),
        sub("admin.acceso.privados", "privados", "dms", "Admin: mensajes privados (on/off)",
            "Admin: private messages (on/off)", _access("privados"), STATE, admin=True),
        sub("admin.acceso.invitacion", "solo-invitados", "invite-only",
            "Admin: solo personas y comunidades de la lista (on/off)",
            "Admin: only listed people and communities (on/off)", _access("invitacion"),
            STATE, admin=True),
    ),
)  # fmt: skip
ADMIN = Command(
    "admin",
    Words("admin", "admin"),
    Words("Admin: las reglas del operador y el canon", "Admin: the operator's rules and canon"),
    admin=True,
    subcommands=(ACCESO, CANON),
)
YO = Command(
    "yo",
    Words("yo", "whoami"),
    Words("Tus ids (y los de aquí), para las reglas", "Your ids (and this place's), for rules"),
    lambda c, who, a: c.access_commands.whoami(who),
)
