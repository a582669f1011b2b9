"""Commands as typed: a "/name words..." line or a platform's parsed options, resolved against
the registry (bot/registry.py), shaped into the handler's arguments, or refused with the usage."""

from __future__ import annotations

from collections.abc import Iterator

from bot.answers import Answer, Caller, clean_input
from bot.command_surface import CommandSurface
from bot.registry import REGISTRY, Arg, Command
from bot.texts import text
from memory.errors import UserFacingError


def _arg_usage(arg: Arg, language: str) -> str:
    if arg.shown is not None:
        shown = arg.shown.get(language)
    else:
        shown = "|".join(arg.choices) if arg.choices else arg.names.get(language).upper()
    return f"[{shown}]" if arg.optional else shown


def top_level(word: str) -> Command | None:
    folded = word.casefold()
    return next((c for c in REGISTRY if folded in c.all_names), None)


def leaves() -> Iterator[Command]:
    for command in REGISTRY:
        yield from command.leaves()


def path_of(command: Command) -> list[Command]:
    """The commands from the top down to `command` (itself included)."""

    def walk(node: Command, trail: list[Command]) -> list[Command] | None:
        if node is command:
            return [*trail, node]
        found = (walk(sub, [*trail, node]) for sub in node.subcommands)
        return next((path for path in found if path is not None), None)

    return next((p for p in (walk(c, []) for c in REGISTRY) if p is not None), [command])


def menu(language: str) -> list[tuple[str, str]]:
    """(name, description) of the top-level commands, for a platform's command menu."""
    return [(c.names.get(language), c.help.get(language)) for c in REGISTRY if not c.admin]


def help_lines(language: str) -> str:
    return "\n".join(
        f"/{c.names.get(language)}: {c.help.get(language)}" for c in REGISTRY if not c.admin
    )


def resolve(command: Command, words: list[str]) -> tuple[Command, list[str]]:
    """Walk down the subcommands named by the first words; the rest are the arguments."""
    while command.subcommands:
        sub = command.named(words[0]) if words else None
        if sub is not None:
            command, words = sub, words[1:]
        elif not words and command.default:
            command = command.child(command.default)
        elif words and command.implicit:
            command = command.child(command.implicit)
        else:
            return command, words  # the caller gets this command's usage
    return command, words


def shape_args(command: Command, words: list[str], language: str) -> list[str]:
    """The words as the command's arguments: a `rest` argument takes the remaining words;
    a missing or malformed argument is refused with the command's usage."""
    if command.args and command.args[-1].rest and len(words) > len(command.args):
        keep = len(command.args) - 1
        words = [*words[:keep], " ".join(words[keep:])]
    required = sum(not arg.optional for arg in command.args)
    bad = len(words) < required or any(
        (arg.kind == "int" and not word.lstrip("#").isdigit())
        or (arg.choices and word.casefold() not in arg.choices)
        for arg, word in zip(command.args, words, strict=False)
    )
    if bad or command.handler is None:
        raise UserFacingError(text(language, "usage", usage=usage_of(command, language)))
    return [
        w.lstrip("#") if a.kind == "int" else w for a, w in zip(command.args, words, strict=False)
    ]


def _leaf_usage(command: Command, language: str) -> str:
    return " ".join([command.names.get(language), *(_arg_usage(a, language) for a in command.args)])


def usage_of(command: Command, language: str) -> str:
    """'/memoria ver | corregir NUMERO VALOR | ...' or '/memoria corregir NUMERO VALOR'."""
    names = [c.names.get(language) for c in path_of(command)[:-1]]
    above = "/" + "".join(f"{name} " for name in names)
    if command.subcommands:  # an admin's command lists its admin subcommands
        subs = (
            _leaf_usage(c, language) for c in command.subcommands if command.admin or not c.admin
        )
        return f"{above}{command.names.get(language)} " + " | ".join(subs)
    return above + _leaf_usage(command, language)


async def run(
    commands: CommandSurface, caller: Caller, command: Command, words: list[str]
) -> Answer:
    """One command with its words (as typed, or an option per argument from Discord)."""
    language = await commands.language(caller)
    leaf, rest = resolve(command, [clean_input(word) for word in words])
    if (refused := await commands.access_commands.refused(caller, leaf.key)) is not None:
        return refused  # a refused person keeps /memoria and /yo only (bot/access.py)
    args = shape_args(leaf, rest, language)
    assert leaf.handler is not None
    return await leaf.handler(commands, caller, args)


def parse_line(line: str) -> tuple[Command | None, str, list[str]] | None:
    """A typed "/name words..." line: (the command or None if unknown, the name, the words);
    None when the line is not a command at all. "/name@bot" (Telegram groups) is accepted."""
    if not line.startswith("/") or len(line) < 2:
        return None
    head, *words = line[1:].split()
    name = head.split("@", 1)[0]
    return top_level(name), name, words


async def run_line(commands: CommandSurface, caller: Caller, line: str) -> Answer | None:
    """The text platforms' hook (terminal, Telegram): a registry command run, an unknown
    "/word" answered with the list of commands, and None for chat text."""
    parsed = parse_line(line.strip())
    if parsed is None:
        return None
    command, name, words = parsed
    if command is None:
        language = await commands.language(caller)
        valid = ", ".join(f"/{c.names.get(language)}" for c in REGISTRY if not c.admin)
        return Answer(text(language, "unknown_command", given=name, valid=valid), ok=False)
    return await run(commands, caller, command, words)
