"""The reply's cached prefix, lent to the calls that keep a conversation's memory.

The provider caches by exact prefix: the tool definitions, then the system blocks, up to a
breakpoint (docs/architecture.md, "Prompt layout"). A summary, extraction or journey call that
sends its own tools and system starts a prefix of its own and reads nothing. So the replies
carry the upkeep tools too (write_summary, record_profile, write_journey, after their own), and
a background call of the same conversation, on the same model, sends the reply's tools and
system blocks byte for byte, its own instructions after the last breakpoint. Its forced tool is
chosen by `tool_choice`, which the provider documents as leaving the tools' and the system's
cache valid (it invalidates the message blocks only, which a background call never shares).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from memory.engine.llm import TextBlock, ToolSpec

Owner = tuple[int, str]  # (user id, character id)

# Said before a background call's own instructions when it borrows the character's prompt:
# the blocks above it are context, and the task is not the character's.
UPKEEP_NOTE = (
    "The blocks above are the character's prompt, shown only as context. You are not the "
    "character now: you keep the memory of this conversation, as follows."
)


@dataclass(frozen=True)
class Upkeep:
    """The background calls' tools, sent by every reply whose model is theirs (`model`: None
    for the provider's default), so that the calls can share the reply's prefix."""

    tools: tuple[ToolSpec, ...]
    model: str | None = None

    def for_reply(self, reply_model: str | None) -> tuple[ToolSpec, ...]:
        """The upkeep tools a reply on `reply_model` adds after its own (none on another
        model: no background call could read its cache)."""
        return self.tools if reply_model == self.model else ()


@dataclass(frozen=True)
class CachedPrefix:
    """What a reply sent before its messages: the model, the tools and the system blocks."""

    model: str | None
    tools: tuple[ToolSpec, ...]
    system: tuple[TextBlock, ...]


def framed(
    prefix: CachedPrefix | None, model: str | None, tool: ToolSpec, instructions: str
) -> tuple[tuple[ToolSpec, ...], tuple[TextBlock, ...]]:
    """A background call's tools and system: the reply's prefix and the instructions after it
    when the prefix is on the call's model and defines its tool; its own otherwise."""
    if prefix is None or prefix.model != model or tool not in prefix.tools:
        return (tool,), (TextBlock(instructions),)
    return prefix.tools, (*prefix.system, TextBlock(f"{UPKEEP_NOTE}\n\n{instructions}"))


class ReplyPrefixes:
    """The last reply prefix of each conversation in RAM (at most `capacity`, the oldest
    dropped first). It holds memory rendered for one user, so a forget drops theirs."""

    def __init__(self, capacity: int) -> None:
        self._capacity = max(1, capacity)
        self._kept: OrderedDict[int, tuple[Owner, CachedPrefix]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, conversation_id: int, owner: Owner, prefix: CachedPrefix) -> None:
        self._kept[conversation_id] = (owner, prefix)
        self._kept.move_to_end(conversation_id)
        while len(self._kept) > self._capacity:
            self._kept.popitem(last=False)

    def of(self, conversation_id: int | None) -> CachedPrefix | None:
        kept = self._kept.get(conversation_id) if conversation_id is not None else None
        return kept[1] if kept is not None else None

    async def forget(self, user_id: int, character_id: str) -> None:
        """Drop the prefixes of this user with this character (a forget listener)."""
        for conversation_id, (owner, _) in list(self._kept.items()):
            if owner == (user_id, character_id):
                del self._kept[conversation_id]
