"""How an `Answer` becomes Discord messages, interaction responses and buttons.

Everything the Discord adapter sends goes through here, so the rules hold in one place: text is
split to Discord's 2,000 characters, nothing the bot posts can ping anyone but the author it
replies to, buttons carry `Button.data` as their custom_id, and errors are answered the same way
for messages, slash commands and button presses.
"""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import discord

from bot.adapters.live import LiveReply
from bot.adapters.split import split_message
from bot.commands import Answer, Caller, Commands
from bot.config import Settings
from bot.texts import text
from memory.errors import UserFacingError

log = logging.getLogger(__name__)

PLATFORM = "discord"
MESSAGE_LIMIT = 2000
# Discord's component limits: 5 rows of 5 buttons, labels up to 80 characters.
MAX_BUTTONS = 25
LABEL_LIMIT = 80
# Discord forgets an interaction not acknowledged within 3 s; slower work is deferred first.
DEFER_AFTER_SECONDS = 2.0
# Nothing the bot posts may ping: the LLM's text can contain @everyone, roles or user ids.
NO_PINGS = discord.AllowedMentions.none()
# ...except the author of the message replied to: that is how a group reply addresses them.
REPLY_PING = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)
# Every custom_id is a Button.data: the bot sends no other kind of component.
ANY_CUSTOM_ID = re.compile(r"(?P<data>.{1,100})", re.DOTALL)

Send = dict[str, Any]
Press = Callable[[discord.Interaction, str], Awaitable[None]]


def role_ids(person: discord.User | discord.Member) -> tuple[str, ...]:
    """A guild member's role ids (for role rules, bot/access.py); none in a DM."""
    roles = getattr(person, "roles", None) or ()
    return tuple(str(role.id) for role in roles)


def message_caller(message: discord.Message) -> Caller:
    kind = "dm" if message.guild is None else "group"
    author, guild = message.author, message.guild
    return Caller(
        PLATFORM,
        str(author.id),
        author.display_name,
        kind,
        str(message.channel.id),
        age_restricted=age_restricted(message.channel),
        guild_id=str(guild.id) if guild else None,
        role_ids=role_ids(author),
    )


def interaction_caller(interaction: discord.Interaction) -> Caller:
    """The caller of a slash command or a button, with their standing in the channel: the
    permissions Discord resolved for them there (Manage Server, or Manage Channels here)."""
    kind = "dm" if interaction.guild_id is None else "group"
    user, permissions = interaction.user, interaction.permissions
    manages = kind == "group" and (permissions.manage_guild or permissions.manage_channels)
    return Caller(
        PLATFORM,
        str(user.id),
        user.display_name,
        kind,
        str(interaction.channel_id),
        str(interaction.locale.value),
        role="admin" if manages else "member",
        age_restricted=age_restricted(interaction.channel),
        guild_id=str(interaction.guild_id) if interaction.guild_id else None,
        role_ids=role_ids(user),
    )


def age_restricted(channel: object) -> bool:
    """Discord's age gate on the channel (a thread inherits its parent's)."""
    is_nsfw = getattr(channel, "is_nsfw", None)
    return bool(is_nsfw()) if callable(is_nsfw) else False


def button_type(on_press: Press) -> type[discord.ui.DynamicItem[discord.ui.Button[Any]]]:
    """The button class for answers; presses call ``on_press(interaction, Button.data)``.

    A dynamic item is recognised by parsing its custom_id instead of being looked up among the
    views kept in memory, so buttons on old messages keep working after a restart and nothing
    accumulates per message sent.
    """

    class AnswerButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=ANY_CUSTOM_ID):
        def __init__(self, label: str, data: str) -> None:
            label = label[:LABEL_LIMIT] or "·"  # a button needs a visible label
            super().__init__(discord.ui.Button(label=label, custom_id=data))

        @classmethod
        async def from_custom_id(
            cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
        ) -> AnswerButton:
            return cls(getattr(item, "label", None) or "", match["data"])

        async def callback(self, interaction: discord.Interaction) -> None:
            await on_press(interaction, self.custom_id)

    return AnswerButton


def parts(answer: Answer, view: discord.ui.View | None) -> list[Send]:
    """The keyword arguments of each message to send: the text split to Discord's limit, with
    the file and the buttons on the last part, under the text they belong to."""
    sends: list[Send] = [{"content": chunk} for chunk in split_message(answer.text, MESSAGE_LIMIT)]
    extras: Send = {}
    if answer.document is not None:
        filename, data = answer.document
        extras["file"] = discord.File(io.BytesIO(data), filename=filename)
    if view is not None:
        extras["view"] = view
    if extras:
        if not sends:
            sends.append({})
        sends[-1].update(extras)
    return sends


async def reply_to(
    message: discord.Message, sends: list[Send], *, first_is_reply: bool = True
) -> None:
    """Post under the user's message: the first part as a reply to it, the rest after it
    (all after it when the first part is already on screen, streamed)."""
    # The user may delete their message while the reply is generated; answer anyway.
    reference = message.to_reference(fail_if_not_exists=False)
    for index, send in enumerate(sends):
        if index == 0 and first_is_reply:
            await message.channel.send(reference=reference, allowed_mentions=REPLY_PING, **send)
        else:
            await message.channel.send(allowed_mentions=NO_PINGS, **send)


def live_reply(message: discord.Message, settings: Settings) -> LiveReply[discord.Message] | None:
    """The reply under the user's message while the model writes it, edited in place; None
    when STREAM_REPLIES is off."""
    if not settings.stream_replies:
        return None

    async def send(content: str) -> discord.Message:
        reference = message.to_reference(fail_if_not_exists=False)
        return await message.channel.send(content, reference=reference, allowed_mentions=REPLY_PING)

    async def edit(sent: discord.Message, content: str) -> None:
        await sent.edit(content=content)

    def render(text: str) -> str:
        return split_message(text, MESSAGE_LIMIT)[0]

    return LiveReply(send, edit, render, settings.stream_edit_seconds)


async def within_deadline(
    interaction: discord.Interaction, work: Awaitable[Answer], *, ephemeral: bool
) -> Answer:
    """Await ``work``; if it outlasts Discord's acknowledgement window, defer first (unless
    deferred already: a platform process defers every interaction it stores)."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=DEFER_AFTER_SECONDS)
    if not done and not interaction.response.is_done():
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
    return await task


class InteractionAnswers:
    """Sends answers to interactions and handles button presses and errors for the adapter."""

    def __init__(self, commands: Commands) -> None:
        self._commands = commands
        self.button_type = button_type(self.press)

    def view_of(self, answer: Answer) -> discord.ui.View | None:
        if not answer.buttons:
            return None
        if len(answer.buttons) > MAX_BUTTONS:
            log.warning(
                "discord shows %d buttons at most; %d dropped",
                MAX_BUTTONS,
                len(answer.buttons) - MAX_BUTTONS,
            )
        view = discord.ui.View(timeout=None)
        for button in answer.buttons[:MAX_BUTTONS]:
            view.add_item(self.button_type(button.label, button.data))
        return view

    async def respond(
        self, interaction: discord.Interaction, work: Awaitable[Answer], *, personal: bool = True
    ) -> None:
        """Answer a slash command. ``personal`` answers concern only the caller, so in a guild
        channel they are ephemeral; private answers and files always are."""
        in_guild = interaction.guild_id is not None
        answer = await within_deadline(interaction, work, ephemeral=in_guild and personal)
        ephemeral = answer.private or answer.document is not None or (in_guild and personal)
        await self.send(interaction, parts(answer, self.view_of(answer)), ephemeral=ephemeral)

    async def send(
        self, interaction: discord.Interaction, sends: list[Send], *, ephemeral: bool
    ) -> None:
        if not sends:
            log.warning("discord: empty answer to interaction %s", interaction.id)
        for send in sends:
            if interaction.response.is_done():
                await interaction.followup.send(
                    ephemeral=ephemeral, allowed_mentions=NO_PINGS, **send
                )
            else:
                await interaction.response.send_message(
                    ephemeral=ephemeral, allowed_mentions=NO_PINGS, **send
                )

    async def press(self, interaction: discord.Interaction, data: str) -> None:
        """A button press: the answer replaces the panel when only the presser can see it (a DM
        or an ephemeral message); under a public message it goes to the presser alone."""
        caller = interaction_caller(interaction)
        try:
            answer = await within_deadline(
                interaction, self._commands.button(caller, data), ephemeral=True
            )
        except Exception as exc:
            answer = await self.error_answer(caller, exc)
        sends = parts(answer, self.view_of(answer))
        panel = interaction.message
        own_panel = panel is not None and (interaction.guild_id is None or panel.flags.ephemeral)
        simple = len(sends) == 1 and "file" not in sends[0]
        if own_panel and simple and not interaction.response.is_done():
            send = sends[0]
            await interaction.response.edit_message(
                content=send.get("content"), view=send.get("view"), allowed_mentions=NO_PINGS
            )
        else:
            await self.send(interaction, sends, ephemeral=True)

    async def on_command_error(
        self, interaction: discord.Interaction, error: discord.app_commands.AppCommandError
    ) -> None:
        """The slash commands' one error handler (``CommandTree.on_error``)."""
        original = getattr(error, "original", error)  # CommandInvokeError wraps the real one
        try:
            answer = await self.error_answer(interaction_caller(interaction), original)
            await self.send(interaction, parts(answer, None), ephemeral=True)
        except Exception:
            log.exception("discord: could not report an error to interaction %s", interaction.id)

    async def error_answer(self, caller: Caller, exc: BaseException) -> Answer:
        """The one error rule: a UserFacingError says its message; anything else is logged
        with its traceback and answered with a generic apology in the character's language."""
        if isinstance(exc, UserFacingError):
            try:
                return await self._commands.user_error(caller, exc)
            except Exception:
                log.exception("discord: could not word a refusal in the user's language")
                return Answer(exc.message, ok=False, private=True)
        log.error("discord: failed answering user %s", caller.user_id, exc_info=exc)
        try:
            return replace(await self._commands.refusal(caller, "error"), private=True)
        except Exception:
            log.exception("discord: could not look up the language for the apology")
            return Answer(text("en", "error"), ok=False, private=True)
