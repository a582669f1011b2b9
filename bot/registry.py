"""Every command and subcommand, defined once: names in Spanish and English, aliases,
arguments, help per language, the handler, and whether only admins may use it.

Telegram's menu and handlers, Discord's app command tree, and the text parser (Telegram
``/...`` messages, the terminal chat) are all generated from ``REGISTRY``; a test walks it and
runs every command on every platform, so a command cannot exist on one and be missing on another.
Handlers are thin: they call one method of ``Commands`` (typed as its face,
``bot/command_surface.py``, so this table never imports the class) with the parsed arguments.
``bot/command_line.py`` resolves what was typed against this table.
"""

from __future__ import annotations

from collections.abc import Awaitable

from bot.access_registry import ADMIN, YO
from bot.answers import Answer, Caller
from bot.command_surface import CommandSurface
from bot.registry_parts import Arg, ArgKind, Command, Handler, Words
from bot.registry_parts import sub as _sub

__all__ = ["REGISTRY", "Arg", "ArgKind", "Command", "Handler", "Words"]

# ---- the commands -----------------------------------------------------------------------------

FACT = Arg(
    "numero",
    Words("numero", "number"),
    Words("El número en /memoria ver", "The number in /memory view"),
    "int",
)
STATE = Arg(
    "estado", Words("estado", "state"), Words("on u off", "on or off"), "choice", ("on", "off")
)
CHARACTER = Arg(
    "id", Words("id", "id"), Words("El personaje (su id)", "The character (its id)"), "character"
)


def _memoria(action: str) -> Handler:
    def handler(commands: CommandSurface, caller: Caller, args: list[str]) -> Awaitable[Answer]:
        return commands.memoria(caller, action, " ".join(args))

    return handler


PERSONAJE = Command(
    "personaje",
    Words("personaje", "character"),
    Words("Ver o cambiar de personaje", "See or switch characters"),
    default="personaje.lista",
    implicit="personaje.cambiar",
    subcommands=(
        _sub(
            "personaje.lista",
            "lista",
            "list",
            "Los personajes, con botones para cambiar",
            "The characters, with buttons to switch",
            lambda c, who, a: c.characters(who),
        ),
        _sub(
            "personaje.cambiar",
            "cambiar",
            "switch",
            "Habla con otro personaje; cada uno guarda su memoria",
            "Talk to another character; each keeps its own memory",
            lambda c, who, a: c.switch(who, a[0]),
            CHARACTER,
        ),
        _sub(
            "personaje.vincular",
            "vincular",
            "bind",
            "Admin: este canal contesta a todo como un personaje",
            "Admin: this channel answers every message as a character",
            lambda c, who, a: c.bind(who, a[0]),
            CHARACTER,
            admin=True,
            public=True,
        ),
        _sub(
            "personaje.desvincular",
            "desvincular",
            "unbind",
            "Admin: este canal deja de contestar a todo",
            "Admin: this channel stops answering every message",
            lambda c, who, a: c.bind(who, None),
            admin=True,
            public=True,
        ),
        _sub(
            "personaje.recargar",
            "recargar",
            "reload",
            "Admin: recarga los ficheros de personajes",
            "Admin: reload the character files",
            lambda c, who, a: c.reload(who),
            admin=True,
        ),
    ),
)
RESET = Command(
    "reset",
    Words("reset", "reset"),
    Words("Terminar la conversación actual", "End the current conversation"),
    lambda c, who, a: c.reset(who),
)
AYUDA = Command(
    "ayuda",
    Words("ayuda", "help"),
    Words("Qué puedo hacer y qué comandos hay", "What I can do and which commands there are"),
    lambda c, who, a: c.help(who),
)
# Every Telegram user begins with /start: the character greets them (help is one line away).
START = Command(
    "start",
    Words("start", "start"),
    Words("El saludo de tu personaje", "Your character's greeting"),
    lambda c, who, a: c.start(who),
)
MEMORIA = Command(
    "memoria",
    Words("memoria", "memory"),
    Words(
        "Ver, corregir o borrar lo que recuerdo de ti",
        "See, fix or delete what I remember about you",
    ),
    default="memoria.ver",
    subcommands=(
        _sub(
            "memoria.ver",
            "ver",
            "view",
            "Lo que recuerdo de ti, numerado y con fechas",
            "What I remember about you, numbered and dated",
            _memoria("ver"),
        ),
        _sub(
            "memoria.corregir",
            "corregir",
            "fix",
            "Corrige un recuerdo",
            "Fix a memory",
            _memoria("corregir"),
            FACT,
            Arg("valor", Words("valor", "value"), Words("Lo correcto", "What is right"), rest=True),
        ),
        _sub(
            "memoria.borrar",
            "borrar",
            "delete",
            "Borra un recuerdo",
            "Delete a memory",
            _memoria("borrar"),
            FACT,
        ),
        _sub(
            "memoria.historial",
            "historial",
            "history",
            "Cómo ha cambiado un recuerdo",
            "How a memory has changed",
            _memoria("historial"),
            FACT,
        ),
        _sub(
            "memoria.caduca",
            "caduca",
            "expire",
            "Cuánto tiempo doy por bueno un recuerdo",
            "How long a memory holds",
            _memoria("caduca"),
            FACT,
            Arg(
                "duracion",
                Words("duracion", "duration"),
                Words("30d, 2w, 6m, 1y o nunca", "30d, 2w, 6m, 1y or never"),
            ),
        ),
        _sub(
            "memoria.revisar",
            "revisar",
            "review",
            "Los recuerdos nuevos esperan tu visto bueno (on/off)",
            "New memories wait for your approval (on/off)",
            _memoria("revisar"),
            STATE,
        ),
        _sub(
            "memoria.historia",
            "historia",
            "story",
            "La historia de lo que hemos vivido (ver o borrar)",
            "The story of what we went through (show or delete)",
            _memoria("historia"),
            Arg(
                "accion",
                Words("accion", "action"),
                Words("ver o borrar", "show or delete"),
                "choice",
                ("ver", "borrar", "show", "delete"),
                shown=Words("ver|borrar", "show|delete"),
                optional=True,  # bare `/memoria historia` shows the story
            ),
        ),
        _sub(
            "memoria.porque",
            "porque",
            "why",
            "De qué salió mi última respuesta",
            "What my last reply was built from",
            _memoria("porque"),
        ),
        _sub(
            "memoria.exportar",
            "exportar",
            "export",
            "Todo lo que recuerdo de ti, en un archivo JSON",
            "Everything I remember about you, as a JSON file",
            _memoria("exportar"),
        ),
        _sub(
            "memoria.olvidar",
            "olvidar",
            "forget",
            "Olvida todo lo que sé de ti con este personaje",
            "Forget everything I know about you with this character",
            _memoria("olvidar"),
        ),
    ),
)
ZONA = Command(
    "zona",
    Words("zona", "timezone"),
    Words("Tu zona horaria, para saber qué hora es para ti", "Your time zone, so I know your time"),
    lambda c, who, a: c.presence.zone(who, a[0]),
    (
        Arg(
            "zona",
            Words("zona", "zone"),
            Words("Por ejemplo Europe/Madrid", "For example Europe/London"),
        ),
    ),
    aliases=("tz",),
)
INCOGNITO = Command(
    "incognito",
    Words("incognito", "incognito"),
    Words(
        "Hablar sin dejar rastro: no guardo nada (on/off)",
        "Talk off the record: I keep nothing (on/off)",
    ),
    default="incognito.on",
    subcommands=(
        _sub(
            "incognito.on",
            "on",
            "on",
            "Empieza una conversación que no se guarda",
            "Start a conversation that is not kept",
            lambda c, who, a: c.presence.incognito(who, on=True),
        ),
        _sub(
            "incognito.off",
            "off",
            "off",
            "Vuelve a la conversación con memoria",
            "Back to the conversation with memory",
            lambda c, who, a: c.presence.incognito(who, on=False),
        ),
    ),
)
AVISOS = Command(
    "avisos",
    Words("avisos", "followups"),
    Words(
        "Que te escriba después de algo que me cuentes (on/off)",
        "Let me write to you after something you tell me about (on/off)",
    ),
    lambda c, who, a: c.presence.followups(who, on=a[0].casefold() == "on"),
    (
        STATE,
    ),
)
ESCENA = Command(
    "escena",
    Words("escena", "scene"),
    Words("Los personajes de la escena de este grupo", "The characters of this group's scene"),
    default="escena.lista",
    subcommands=(
        _sub(
            "escena.lista",
            "lista",
            "list",
            "Quién está en la escena",
            "Who is in the scene",
            lambda c, who, a: c.scenes.show(who),
            public=True,
        ),
        _sub(
            "escena.historia",
            "historia",
            "story",
            "La historia de la escena según un personaje",
            "The story of the scene as a character tells it",
            lambda c, who, a: c.scenes.story(who, " ".join(a)),
            Arg(
                "personaje",
                Words("personaje", "character"),
                Words("Su nombre o id; sin él, el primero", "Its name or id; none: the first"),
                rest=True,
                optional=True,
            ),
            public=True,
        ),
        _sub(
            "escena.anadir",
            "añadir",
            "add",
            "Admin: un personaje entra en la escena (no sabe lo dicho antes)",
            "Admin: a character joins the scene (knowing nothing said before)",
            lambda c, who, a: c.scenes.add(who, a[0]),
            CHARACTER,
            admin=True,
            public=True,
        ),
        _sub(
            "escena.quitar",
            "quitar",
            "remove",
            "Admin: un personaje sale de la escena",
            "Admin: a character leaves the scene",
            lambda c, who, a: c.scenes.remove(who, a[0]),
            CHARACTER,
            admin=True,
            public=True,
        ),
        _sub(
            "escena.madura",
            "madura",
            "mature",
            "Admin: los personajes para adultos pueden hablar en este grupo (on/off)",
            "Admin: characters for adults may speak in this group (on/off)",
            lambda c, who, a: c.scenes.mature(who, a[0].casefold() == "on"),
            STATE,
            admin=True,
            public=True,
        ),
    ),
)
REGISTRY: tuple[Command, ...] = (
    PERSONAJE, RESET, AYUDA, MEMORIA, ZONA, INCOGNITO, AVISOS, START, ESCENA, YO, ADMIN,
)  # fmt: skip
