"""The community each group channel belongs to, for budgets (issue 36): a Discord server is
one community, so its channels share one daily budget; a Telegram group is its own."""

from __future__ import annotations

from bot.answers import Caller
from memory.store.budgets import ChannelCommunities


class ChannelRecorder:
    """Records the community of each group channel a message is admitted in (migration
    0028): a Discord channel's server, a Telegram group itself. The budget guard pays a
    thread's calls from that community, so that a server's channels share one budget. Once
    per channel and process: a channel does not move to another server."""

    KEPT = 10_000

    def __init__(self, store: ChannelCommunities) -> None:
        self._store = store
        self._seen: set[str] = set()

    async def note(self, caller: Caller) -> None:
        if caller.channel_kind != "group":
            return
        channel = f"{caller.platform}:{caller.channel_id}"
        if channel in self._seen:
            return
        await self._store.record_channel_community(channel, caller.community)
        if len(self._seen) >= self.KEPT:  # bounded: recorded again, which changes nothing
            self._seen.clear()
        self._seen.add(channel)
