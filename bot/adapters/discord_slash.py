"""The Discord slash commands, generated from the command registry (bot/registry.py).

Names and descriptions are the registry's Spanish wording, localised to English through a
``Translator`` (``locale_str`` carries the English in its extras), so a user whose Discord speaks
English sees ``/memory view``. Admin subcommands go into a sibling ``<name>-admin`` group
hidden with ``default_permissions`` (only members who can manage the server see it; the bot
still checks ADMIN_IDS). The tree is synced only when its JSON changed since the last sync.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import discord
from discord import app_commands
from discord.app_commands import locale_str

from bot.adapters.discord_views import InteractionAnswers, interaction_caller
from bot.command_line import run
from bot.commands import Commands
from bot.registry import REGISTRY, Arg, Command

log = logging.getLogger(__name__)

Choices = list[app_commands.Choice[str]]
AUTOCOMPLETE_LIMIT = 25  # Discord shows at most 25 suggestions
ENGLISH = frozenset({discord.Locale.american_english, discord.Locale.british_english})
ADMIN_PERMISSIONS = discord.Permissions(manage_guild=True)


class RegistryTranslator(app_commands.Translator):
    """English from the registry for English locales; Spanish, the default, for the rest."""

    async def translate(
        self,
        string: locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        return string.extras.get("en") if locale in ENGLISH else None


def _localised(es: str, en: str) -> locale_str:
    return locale_str(es, en=en)


def _annotation(arg: Arg) -> Any:
    if arg.kind == "int":
        return app_commands.Range[int, 1]
    if arg.choices:
        return Literal[arg.choices]  # type: ignore[valid-type]
    return str


def _callback(
    leaf: Command, commands: Commands, responder: InteractionAnswers
) -> Callable[..., Awaitable[None]]:
    """A callback whose signature declares the leaf's arguments, for discord.py to read."""

    async def callback(interaction: discord.Interaction, **options: object) -> None:
        words = [str(options[a.key]) for a in leaf.args if options.get(a.key) is not None]
        work = run(commands, interaction_caller(interaction), leaf, words)
        await responder.respond(interaction, work, personal=not leaf.public)

    first = inspect.Parameter(
        "interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=discord.Interaction
    )
    options = [
        inspect.Parameter(
            a.key,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=_annotation(a),
            default=None if a.optional else inspect.Parameter.empty,  # optional on Discord
        )
        for a in leaf.args
    ]
    callback.__signature__ = inspect.Signature([first, *options])  # type: ignore[attr-defined]
    if leaf.args:
        names = {a.key: _localised(a.names.es, a.names.en) for a in leaf.args}
        helps = {a.key: _localised(a.help.es, a.help.en) for a in leaf.args}
        callback = app_commands.rename(**names)(app_commands.describe(**helps)(callback))
    return callback


def _slash(
    leaf: Command,
    commands: Commands,
    responder: InteractionAnswers,
    parent: app_commands.Group | None,
) -> app_commands.Command[Any, ..., None]:
    slash: app_commands.Command[Any, ..., None] = app_commands.Command(
        name=_localised(leaf.names.es, leaf.names.en),
        description=_localised(leaf.help.es[:100], leaf.help.en[:100]),
        callback=_callback(leaf, commands, responder),
        parent=parent,
    )
    for arg in leaf.args:
        if arg.kind == "character":
            slash.autocomplete(arg.key)(_character_ids(commands))
    return slash


def _group(
    command: Command, suffix: str, admin: bool, parent: app_commands.Group | None = None
) -> app_commands.Group:
    return app_commands.Group(
        name=_localised(command.names.es + suffix, command.names.en + suffix),
        description=_localised(command.help.es[:100], command.help.en[:100]),
        default_permissions=ADMIN_PERMISSIONS if admin and parent is None else None,
        parent=parent,
    )


def _add_children(
    group: app_commands.Group,
    subs: list[Command],
    commands: Commands,
    responder: InteractionAnswers,
) -> None:
    """A group's subcommands; one with subcommands of its own is a subgroup (Discord nests
    two levels: /admin acceso lista)."""
    for sub in subs:
        if not sub.subcommands:
            group.add_command(_slash(sub, commands, responder, group))
            continue
        inner = _group(sub, "", sub.admin, group)
        for leaf in sub.subcommands:
            inner.add_command(_slash(leaf, commands, responder, inner))


def add_slash_commands(
    tree: app_commands.CommandTree[discord.Client],
    commands: Commands,
    responder: InteractionAnswers,
) -> None:
    """Every registry command on ``tree``: a group per command with subcommands (and its admin
    sibling), a plain command otherwise."""
    for command in REGISTRY:
        if not command.subcommands:
            slash = _slash(command, commands, responder, None)
            if command.admin:
                slash.default_permissions = ADMIN_PERMISSIONS
            tree.add_command(slash)
            continue
        for admin, suffix in ((False, ""), (True, "-admin")):
            subs = [c for c in command.subcommands if c.admin == admin]
            if not subs:
                continue
            # An admin's command (/admin) is its own hidden group, with no "-admin" sibling.
            group = _group(command, "" if command.admin else suffix, admin)
            _add_children(group, subs, commands, responder)
            tree.add_command(group)


def _character_ids(commands: Commands) -> Callable[..., Awaitable[Choices]]:
    async def suggest(interaction: discord.Interaction, current: str) -> Choices:
        needle = current.casefold()
        return [
            app_commands.Choice(name=f"{name} ({character_id})"[:100], value=character_id)
            for character_id, name in commands.character_choices()
            if needle in character_id.casefold() or needle in name.casefold()
        ][:AUTOCOMPLETE_LIMIT]

    return suggest


async def tree_digest(tree: app_commands.CommandTree[discord.Client], application_id: int) -> str:
    """A hash of exactly what a sync would send (translations included)."""
    translator = tree.translator
    payload = [
        await c.get_translated_payload(tree, translator) if translator else c.to_dict(tree)
        for c in tree.get_commands()
    ]
    body = json.dumps([application_id, payload], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


async def sync_if_changed(
    tree: app_commands.CommandTree[discord.Client], application_id: int, state: Path
) -> bool:
    """Sync the global commands only when they differ from the last sync recorded in
    ``state``: a restart does not re-register them (Discord rate-limits command updates)."""
    digest = await tree_digest(tree, application_id)
    try:
        if (await asyncio.to_thread(state.read_text)).strip() == digest:
            log.info("discord: slash commands unchanged since the last sync")
            return False
    except OSError:
        pass  # never synced from here: sync
    synced = await tree.sync()
    log.info("discord: %d slash commands synced globally", len(synced))
    try:
        await asyncio.to_thread(state.write_text, digest)
    except OSError as exc:  # the next start syncs again: harmless
        log.warning("discord: could not record the command sync in %s: %s", state, exc)
    return True
