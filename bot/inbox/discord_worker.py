"""A worker's Discord side: claimed gateway events are answered through Discord's REST API
alone, by the ordinary Discord adapter's handlers (chat, bursts, slash commands, buttons).

The adapter's client logs in over REST and never connects to the gateway; each stored payload
becomes the discord.py object the gateway would have made (a Message, an Interaction) over
that client's state, and goes to the handler the adapter registers for it. Sends are recorded
against the inbox message they answer (bot/inbox/sends.py), and are made idempotent where
Discord allows:

* a message is created with a nonce derived from (inbox message, send number) and
  ``enforce_nonce``: a successor that sends it again within a few minutes gets the first one
  back from Discord instead of a second message, which closes the moment between Discord's
  answer and the record's commit;
* an interaction was deferred by the platform process; its first answer edits that deferred
  response, or the pressed panel (an edit done twice is one message), the rest are follow-ups;
* a scene's line posted through a character's webhook (bot/adapters/discord_scene.py: webhooks
  need no gateway) is recorded the same way, but Discord's Execute Webhook takes no nonce: as
  on Telegram, only the record stops a resend, and a worker killed between Discord's answer and
  the record's commit leaves a line its successor cannot know of (a few milliseconds a line).
  Edits of a streamed line are not recorded (an edit made twice shows one message).

discord.py has no public way in for events that did not come from its gateway; the internals
used (as of 2.7, each exercised by tests/test_discord_inbox.py): the connection state's
`_get_guild_channel` and `_add_guild`, `CommandTree._call` and `_dispatch_error`, and an
interaction response's `_response_type` (to say the platform process deferred it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import discord
from discord.http import MultipartParameters
from discord.utils import MISSING

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.discord_scene import WebhookPoster
from bot.adapters.discord_views import NO_PINGS, InteractionAnswers, Send
from bot.app import App
from bot.commands import Commands
from bot.health import Metrics
from bot.inbox.discord_platform import (
    AUTOCOMPLETE,
    COMMAND,
    COMPONENT,
    INTERACTION_CREATE,
    own_panel,
)
from bot.inbox.sends import SendRecorder, Slot, answer_claim, drop_stale_sessions
from memory.store.inbox import Answered, Claim, Inbox

log = logging.getLogger(__name__)
# The lock of the slash commands' sync: one worker syncs at a time (any constant of ours).
COMMAND_SYNC_LOCK = 0x636F6D73
# Discord's 3 s to acknowledge an interaction, and some margin: by then the platform process
# has deferred it or never will.
DEFERRAL_WAIT_SECONDS = 4.0
DEFERRAL_RETRY_SECONDS = 0.1


def with_nonce(params: MultipartParameters, slot: Slot) -> None:
    """Add the send's nonce to a create-message request, in its JSON or in its multipart
    form's payload_json (discord.py serialises the latter before the request is made)."""
    extra = {"nonce": slot.nonce, "enforce_nonce": True}
    if params.payload is not None:
        params.payload.update(extra)
    for part in params.multipart or []:
        if part.get("name") == "payload_json":
            part["value"] = json.dumps({**json.loads(part["value"]), **extra})


def params_content(params: MultipartParameters) -> str:
    """What a create-message request says: its text and its files' names."""
    payload = params.payload
    for part in params.multipart or []:
        if part.get("name") == "payload_json":
            payload = json.loads(part["value"])
    names = [str(part.get("filename")) for part in params.multipart or [] if "filename" in part]
    return f"{(payload or {}).get('content')}\x00{names}"


def send_content(send: Send) -> str:
    """What an interaction's answer says: its text and its file's name."""
    file = send.get("file")
    return f"{send.get('content')}\x00{getattr(file, 'filename', None)}"


async def fill_deferred(interaction: discord.Interaction, send: Send) -> discord.Message:
    """Edit the response the platform process deferred. The platform stores an interaction
    before it defers it, so a quick worker can get here first: Discord then knows no response
    to edit yet, and the edit is tried again until the deferral's window has passed."""
    deadline = time.monotonic() + DEFERRAL_WAIT_SECONDS
    while True:
        try:
            return await interaction.edit_original_response(
                content=send.get("content"),
                attachments=[send["file"]] if "file" in send else MISSING,
                view=send.get("view"),
                allowed_mentions=NO_PINGS,
            )
        except discord.NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(DEFERRAL_RETRY_SECONDS)


class RecordingAnswers(InteractionAnswers):
    """Interaction answers for interactions the platform process deferred: the first part
    fills the deferred response, the others follow; each is recorded."""

    def __init__(self, commands: Commands, recorder: SendRecorder) -> None:
        super().__init__(commands)
        self._recorder = recorder
        self.deferred: set[int] = set()  # interactions whose deferred response is unfilled

    async def send(
        self, interaction: discord.Interaction, sends: list[Send], *, ephemeral: bool
    ) -> None:
        if interaction.id not in self.deferred:  # autocomplete, or nothing deferred it
            await super().send(interaction, sends, ephemeral=ephemeral)
            return
        if not sends:
            log.warning("discord: empty answer to interaction %s", interaction.id)
        for send in sends:
            slot = await self._recorder.before(send_content(send))
            if slot is not None and slot.sent is not None:  # a worker before this one sent it
                self.deferred.discard(interaction.id)
                continue
            if interaction.id in self.deferred:
                sent: discord.Message = await fill_deferred(interaction, send)
                self.deferred.discard(interaction.id)
            else:
                sent = await interaction.followup.send(
                    ephemeral=ephemeral, allowed_mentions=NO_PINGS, wait=True, **send
                )
            await self._recorder.after(slot, str(sent.id))


class RecordingPoster(WebhookPoster):
    """A scene's webhook posts, each recorded against the inbox message it answers."""

    def __init__(self, recorder: SendRecorder) -> None:
        self._recorder = recorder

    async def post(
        self, hook: discord.Webhook, content: str, username: str
    ) -> discord.WebhookMessage:
        slot = await self._recorder.before(f"webhook:{username}\x00{content}")
        if slot is not None and slot.sent is not None:  # a worker before this one posted it
            return await hook.fetch_message(int(slot.sent))
        sent = await super().post(hook, content, username)
        await self._recorder.after(slot, str(sent.id))
        return sent


class DiscordWorker:
    """Answers one claimed Discord pair: its events, in order, through the adapter."""

    def __init__(
        self, app: App, inbox: Inbox, worker_id: str, metrics: Metrics, lease_seconds: float
    ) -> None:
        self._app = app
        self._inbox = inbox
        self._lease = lease_seconds
        self._recorder = SendRecorder(inbox, worker_id, metrics)
        app.companion.on_unstored(self._recorder.unstored)
        self._answers = RecordingAnswers(app.commands, self._recorder)
        self.adapter = DiscordAdapter(
            app.settings,
            app.commands,
            responder=self._answers,
            poster=RecordingPoster(self._recorder),
        )
        self._client = self.adapter.client
        self._state = self._client._connection
        http = self._client.http
        plain = http.send_message

        async def send_message(channel_id: int, *, params: MultipartParameters) -> Any:
            slot = await self._recorder.before(params_content(params))
            if slot is not None and slot.sent is not None:  # a worker before this one sent it
                return await http.get_message(channel_id, int(slot.sent))
            if slot is not None:
                with_nonce(params, slot)
            sent = await plain(channel_id, params=params)
            await self._recorder.after(slot, str(sent["id"]))
            return sent

        # Every message the adapter creates goes through here (Messageable.send).
        http.send_message = send_message  # type: ignore[method-assign,assignment]

    async def start(self) -> None:
        """Log in over REST; one worker at a time syncs the slash commands."""
        async with self._inbox.exclusive(COMMAND_SYNC_LOCK) as mine:
            await self.adapter.login(sync=mine)

    async def stop(self) -> None:
        await self.adapter.stop()

    async def answer(self, claim: Claim) -> Answered:
        """The pair's pending events through the adapter (bot/inbox/sends.py)."""

        async def moved(pair_key: str) -> None:
            await drop_stale_sessions(self._app, pair_key)  # a scene's copies too

        return await answer_claim(claim, self._recorder, self._lease, self._run, moved)

    async def _run(self, payload: dict[str, Any]) -> None:
        event, data = payload.get("t"), payload.get("d") or {}
        try:
            if event == INTERACTION_CREATE:
                await self._interaction(data)
            else:
                await self._message(data)
        except Exception:
            # As discord.py's own dispatch does: logged, not retried (a lost lease is seen by
            # answer_claim through the pair, whatever is raised here).
            log.exception("discord: answering %s %s failed", event, data.get("id"))

    async def _message(self, data: dict[str, Any]) -> None:
        guild_id = data.get("guild_id")
        if guild_id is not None:
            await self._guild(int(guild_id))
        channel, _ = self._state._get_guild_channel(data)  # type: ignore[arg-type]
        message = discord.Message(state=self._state, channel=channel, data=data)  # type: ignore[arg-type]
        await self.adapter.on_message(message)

    async def _guild(self, guild_id: int) -> None:
        """The guild a message came from, read once over REST: the adapter reads the bot's own
        role from it, and the author's member data needs it."""
        known = self._client.get_guild(guild_id)
        if known is not None and not known.unavailable and known.roles:
            return
        guild = await self._client.fetch_guild(guild_id)
        self._state._add_guild(guild)

    async def _interaction(self, data: dict[str, Any]) -> None:
        interaction: discord.Interaction[discord.Client] = discord.Interaction(
            data=data,  # type: ignore[arg-type]
            state=self._state,
        )
        kind = data.get("type")
        if kind in (COMMAND, COMPONENT):
            # Deferred by the platform process (as it decides there): discord.py must not
            # acknowledge it again.
            deferred = discord.InteractionResponseType.deferred_channel_message
            if kind == COMPONENT and own_panel(data):
                deferred = discord.InteractionResponseType.deferred_message_update
            interaction.response._response_type = deferred
            self._answers.deferred.add(interaction.id)
        try:
            if kind in (COMMAND, AUTOCOMPLETE):
                await self._command(interaction)
            elif kind == COMPONENT:
                custom_id = str((data.get("data") or {}).get("custom_id", ""))
                await self._answers.press(interaction, custom_id)
        finally:
            self._answers.deferred.discard(interaction.id)

    async def _command(self, interaction: discord.Interaction[discord.Client]) -> None:
        """What CommandTree does with an interaction, awaited rather than spawned: the pair is
        finished only once its answer is sent."""
        tree = self.adapter.tree
        try:
            await tree._call(interaction)
        except discord.app_commands.AppCommandError as error:
            await tree._dispatch_error(interaction, error)
