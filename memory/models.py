"""Typed records returned by the store and passed between memory modules."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import date, datetime
from typing import Literal

from memory.engine.llm import LLMResponse
from memory.platform_text import storable

TurnRole = Literal["user", "assistant", "tool"]
FactKind = Literal["semantic", "emotional", "episodic"]
FactOrigin = Literal["stated", "inferred", "imported"]
FACT_KINDS: tuple[FactKind, ...] = ("semantic", "emotional", "episodic")
ChannelKind = Literal["dm", "group"]


@dataclass(frozen=True, slots=True)
class User:
    id: int
    platform: str
    platform_user_id: str
    display_name: str


SCENE_PREFIX = "scene:"


@dataclass(frozen=True, slots=True)
class Thread:
    """Everything a user shares with one character in one scope ('dm' or 'group:<channel>').
    A scene's thread (scope 'scene:<platform>:<channel>') is owned by the scene's own row in
    `users` and holds what one character witnessed of a group's shared conversation."""

    user_id: int
    character_id: str
    scope: str

    @property
    def is_group(self) -> bool:
        return self.scope.startswith(("group:", SCENE_PREFIX))

    @property
    def is_scene(self) -> bool:
        return self.scope.startswith(SCENE_PREFIX)

    @property
    def fact_scope(self) -> str:
        """The scope of the facts this thread may show: a scene's are the group's own."""
        return "group:" + self.scope.removeprefix(SCENE_PREFIX) if self.is_scene else self.scope


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who said a line of a scene: a person (their `users` row) or another character; `name`
    is what the witnesses see."""

    name: str
    person_id: int | None = None
    character_id: str | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    thread: Thread
    started_at: datetime
    last_activity_at: datetime
    ended_at: datetime | None = None
    end_reason: str | None = None
    extracted_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    id: int
    conversation_id: int
    role: TurnRole
    text: str
    created_at: datetime
    platform_message_id: str | None = None
    speaker: Speaker | None = None  # in a scene: who said it, when not this character


@dataclass(frozen=True, slots=True)
class SceneErasure:
    """What a participant's forget took out of scenes: their lines (every copy), the summary
    versions rewritten without the claims citing them, their facts learned in the group, and
    the characters' threads that held the lines (their sessions must be read again)."""

    lines: int
    claims: int
    facts: int
    threads: tuple[Thread, ...] = ()


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A user's turn as the store holds it: stored now, or found by its source key because the
    message ran before (then `reply` is the character's stored answer to it, if any)."""

    turn: Turn
    existed: bool = False
    reply: Turn | None = None


@dataclass(frozen=True, slots=True)
class SummaryFields:
    """The six fields of the rolling summary, in the fixed order they are rendered in."""

    established_facts: tuple[str, ...] = ()
    relationship: tuple[str, ...] = ()
    commitments: tuple[str, ...] = ()
    tone: tuple[str, ...] = ()
    open_threads: tuple[str, ...] = ()
    canon: tuple[str, ...] = ()

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def items(self) -> list[tuple[str, tuple[str, ...]]]:
        return [(name, getattr(self, name)) for name in self.names()]

    def with_field(self, name: str, claims: tuple[str, ...]) -> SummaryFields:
        return replace(self, **{name: claims})

    def is_empty(self) -> bool:
        return not any(claims for _, claims in self.items())


@dataclass(frozen=True, slots=True)
class Summary:
    fields: SummaryFields
    cited_ids: frozenset[int]
    covers_up_to_turn_id: int
    created_at: datetime
    id: int = 0  # 0 until stored


@dataclass(frozen=True, slots=True)
class SummarySaved:
    """What a summary save that names the newest summary it replaces did. `id` is the new
    row's; None with `stale` when another summary became the newest first (read it and build
    on it again), None without it when the conversation is gone (forgotten meanwhile)."""

    id: int | None
    stale: bool = False


# How a usage row's error begins when the provider failed the call after its own retries (not
# an answer the checks rejected): the retry schedule of background jobs counts these rows
# (memory/engine/retries.py).
PROVIDER_FAILURE = "LLM failed: "


@dataclass(frozen=True, slots=True)
class UsageRecord:
    kind: str
    model: str
    ok: bool
    user_id: int | None = None
    character_id: str | None = None
    conversation_id: int | None = None
    turn_id: int | None = None
    error: str | None = None
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    tool_round: int = 0  # 0: the reply's first request; 1-2: after a round of tool calls
    fragments: int = 0  # automatic fragments in the request
    tools_called: str = ""  # the tools the model called in this response, comma-separated

    def measured(self, response: LLMResponse | None) -> UsageRecord:
        """This record with a response's model, token figures and latency."""
        if response is None:
            return self
        usage = response.usage
        return replace(
            self,
            model=response.model or self.model,
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            latency_ms=response.latency_ms,
        )


@dataclass(frozen=True, slots=True)
class Incoming:
    """A platform event, as the engine sees it."""

    platform: str
    platform_user_id: str
    display_name: str
    channel_kind: ChannelKind
    channel_id: str
    character_id: str
    text: str
    platform_message_id: str | None = None

    def __post_init__(self) -> None:
        # Every message the engine takes passes here, whichever adapter or job built it.
        object.__setattr__(self, "text", storable(self.text))
        object.__setattr__(self, "display_name", storable(self.display_name))

    @property
    def scope(self) -> str:
        return "dm" if self.channel_kind == "dm" else f"group:{self.platform}:{self.channel_id}"

    @property
    def source_key(self) -> str | None:
        """Where the message came from, when the platform names it (the adapters pass
        Telegram's message_id, Discord's message id; the terminal none): a message run again
        (after a crash, a redelivery) is recognised by it and stored once."""
        if self.platform_message_id is None:
            return None
        return f"{self.platform}:{self.channel_id}:{self.platform_message_id}"


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    ok: bool = True
    turn_id: int | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    id: int
    user_id: int
    character_id: str
    kind: FactKind
    key: str
    value: str
    origin: FactOrigin
    scope: str
    evidence: tuple[int, ...]
    lifetime: str  # "never", "days:N" or "event"
    event_date: date | None
    created_at: datetime
    confirmed_at: datetime
    expires_at: datetime | None
    status: str = "active"


@dataclass(frozen=True, slots=True)
class FactVersion:
    """A value a fact held before it was superseded."""

    fact_id: int
    value: str
    origin: str
    valid_from: datetime
    superseded_at: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class ReplySources:
    """What one reply was built from: the answer to /memoria porque."""

    turn_id: int
    fact_ids: tuple[int, ...]
    summary_id: int | None
    window_turn_ids: tuple[int, ...]
    fragment_turn_ids: tuple[int, ...]
    created_at: datetime
    journey_id: int | None = None  # the journey block 2 showed (a row since replaced, maybe)


@dataclass(frozen=True, slots=True)
class FollowUpCandidate:
    """A dated fact past its day, of a user who opted in to follow-ups with its character."""

    fact: Fact
    platform: str
    platform_user_id: str
    display_name: str
    timezone: str | None


@dataclass(frozen=True, slots=True)
class FollowUpState:
    """What limits the next follow-up of a user with a character."""

    sent_at: tuple[datetime, ...]  # every follow-up sent, oldest first
    awaiting_answer: bool  # the newest one has had no message from the user since


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An update the platform process could not store in the inbox (migrations 0014)."""

    platform: str
    update_key: str | None  # the platform's id of the update, when it had one
    platform_user_id: str | None  # the sender, when the update names one
    payload: str  # the update as the platform sent it, JSON text
    error: str  # what the store said, the bot's token never in it
    created_at: datetime
    id: int | None = None


@dataclass(frozen=True)
class Fragment:
    """A dated exchange recalled from an earlier conversation."""

    turn_ids: tuple[int, ...]
    when: datetime
    text: str


CanonStatus = Literal["pending", "approved", "rejected"]
CANON_STATUSES: tuple[CanonStatus, ...] = ("pending", "approved", "rejected")


@dataclass(frozen=True, slots=True)
class NewCanonProposal:
    """A proposal the checks passed (memory/canon/), before it is stored: what the character
    established about itself or its world, the ids of its own assistant turns it rests on,
    and the sheet or lore text it contradicts, if any."""

    text: str
    evidence_turn_ids: tuple[int, ...]
    contradicts: str | None = None


@dataclass(frozen=True, slots=True)
class CanonProposal:
    """A stored proposal (migration 0027), waiting for an admin or decided."""

    id: int
    character_id: str
    text: str
    evidence_turn_ids: tuple[int, ...]
    contradicts: str | None
    status: str
    created_at: datetime
    decided_at: datetime | None


@dataclass(frozen=True, slots=True)
class CanonEvidenceLine:
    """One of the character's own lines a proposal rests on, as the admin reads it."""

    turn_id: int
    created_at: datetime
    text: str
