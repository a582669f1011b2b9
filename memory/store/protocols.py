"""What the services need from a database, one narrow interface each.

A service names the interfaces it uses (the Companion a turn log, summaries and a change feed;
retrieval a search index; /memoria facts, summaries, erasure and export), never a backend. Each
backend (memory/store/sqlite/, memory/store/postgres/) implements all of them in one class,
`MemoryStore` below, which only the composition root (bot/app.py) and the admin CLI hold.
Everything specific to a backend (threads, pools, PRAGMAs, FTS5 or tsvector, how a forget's
bytes leave the disk) stays behind these methods.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Protocol

from memory.journey.model import Journey
from memory.models import (
    Conversation,
    Fact,
    FactVersion,
    FollowUpCandidate,
    FollowUpState,
    ReplySources,
    SceneErasure,
    Speaker,
    Summary,
    SummarySaved,
    Thread,
    Turn,
    UsageRecord,
    User,
    UserTurn,
)
from memory.search.terms import Term
from memory.store.access import AccessRules
from memory.store.admin_protocols import Administration, DeadLetters, DeploymentCopy
from memory.store.budgets import BudgetLedger, ChannelCommunities
from memory.store.canon import CanonStore
from memory.store.scene_journeys import SceneJourneys

# (first turn id of its exchange, next exchange's first turn id, previous exchange's last, turn)
ExchangeRow = tuple[int, int | None, int | None, Turn]


class Users(Protocol):
    async def upsert_user(
        self, platform: str, platform_user_id: str, display_name: str, now: datetime
    ) -> User: ...

    async def find_user(self, platform: str, platform_user_id: str) -> User | None: ...


class TurnLog(Protocol):
    """Conversations and the immutable turn log; ids are permanent citation codes."""

    async def open_conversation(self, thread: Thread) -> Conversation | None: ...

    async def start_conversation(self, thread: Thread, now: datetime) -> Conversation: ...

    async def end_conversation(self, conversation_id: int, reason: str, now: datetime) -> bool: ...

    async def conversations_idle_since(self, cutoff: datetime) -> list[Conversation]: ...

    async def add_turn(
        self,
        conversation: Conversation,
        role: str,
        text: str,
        now: datetime,
        platform_message_id: str | None = None,
    ) -> Turn: ...

    async def add_user_turn(
        self,
        conversation: Conversation,
        text: str,
        now: datetime,
        platform_message_id: str | None,
        source_key: str | None,
        speaker: Speaker | None = None,
    ) -> UserTurn:
        """A user's turn; with a source key already stored in the thread, nothing is written
        and the stored turn comes back (`existed`), with the first reply after it, if any. In
        a scene, `speaker` says who said it (a person, or another character)."""
        ...

    async def add_reply(
        self,
        conversation: Conversation,
        text: str,
        now: datetime,
        sources: ReplySources,
        usage: UsageRecord | None = None,
    ) -> Turn: ...

    async def turns_after(self, thread: Thread, after_turn_id: int) -> list[Turn]: ...

    async def conversation_turns(self, conversation_id: int) -> list[Turn]: ...

    async def count_turns(self, thread: Thread) -> int: ...

    async def thread_turns_by_ids(self, thread: Thread, ids: list[int]) -> list[Turn]: ...

    async def turns_by_ids(self, user_id: int, character_id: str, ids: list[int]) -> list[Turn]: ...

    async def last_reply_sources(self, user_id: int, character_id: str) -> ReplySources | None: ...


class Summaries(Protocol):
    async def latest_summary(self, thread: Thread) -> Summary | None: ...

    async def save_summary(
        self, thread: Thread, summary: Summary, conversation_id: int | None = None
    ) -> int | None: ...

    async def save_summary_over(
        self,
        thread: Thread,
        summary: Summary,
        newest_id: int | None,
        conversation_id: int | None = None,
    ) -> SummarySaved:
        """Save only while `newest_id` (None: no summary yet) is still the thread's newest, in
        one step no other summary save can enter: a summary built on a row another writer has
        since replaced is never stored over that writer's."""

    async def summary_by_id(self, user_id: int, summary_id: int) -> Summary | None: ...


class Facts(Protocol):
    """The long-term profile, its history, and what extraction has done and refused."""

    async def facts(
        self, user_id: int, character_id: str, scope: str | None = None
    ) -> list[Fact]: ...

    async def fact(self, user_id: int, character_id: str, fact_id: int) -> Fact | None: ...

    async def fact_history(self, user_id: int, fact_id: int) -> list[FactVersion]: ...

    async def apply_fact_changes(
        self,
        adds: list[Fact],
        updates: list[tuple[Fact, Fact, str]],
        deletes: list[Fact],
        confirms: list[Fact],
        conversation_id: int | None,
        now: datetime,
    ) -> bool: ...

    async def delete_fact(self, user_id: int, character_id: str, fact_id: int) -> bool:
        """Delete one fact and its history; its bytes leave the disk as a forget's do."""
        ...

    async def review_mode(self, user_id: int) -> bool: ...

    async def set_review_mode(self, user_id: int, on: bool) -> None: ...

    async def mark_extracted(self, conversation_id: int, status: str, now: datetime) -> None: ...

    async def conversations_pending_extraction(self) -> list[Conversation]: ...

    async def record_rejection(
        self, thread: Thread, conversation_id: int | None, reason: str, now: datetime
    ) -> None: ...

    async def count_rejections(self, user_id: int | None = None) -> int: ...


class Preferences(Protocol):
    """What the companion knows of the user's life outside the chat: their time zone."""

    async def user_timezone(self, user_id: int) -> str | None: ...

    async def set_user_timezone(self, user_id: int, zone: str | None) -> None: ...


class OffRecordFlags(Protocol):
    """That a thread is off the record (/incognito) and until when, never its words: what a
    restart or another worker needs to refuse the next message instead of storing it."""

    async def set_off_record(self, thread: Thread, expires_at: datetime) -> None: ...

    async def off_record_until(self, thread: Thread) -> datetime | None: ...

    async def clear_off_record(self, thread: Thread) -> bool:
        """Drop the flag; True when there was one."""
        ...


class FollowUps(Protocol):
    """Opt-in follow-ups of dated facts: the switch, the one offer, what is due, what was sent."""

    async def followups_enabled(self, user_id: int, character_id: str) -> bool: ...

    async def set_followups(self, user_id: int, character_id: str, on: bool) -> None: ...

    async def offer_followups_once(
        self, user_id: int, character_id: str, now: datetime
    ) -> bool: ...

    async def followup_candidates(
        self, earliest: date, latest: date
    ) -> list[FollowUpCandidate]: ...

    async def followup_offers_due(self) -> list[FollowUpCandidate]: ...

    async def followup_state(self, user_id: int, character_id: str) -> FollowUpState: ...

    async def followup_owed(self, user_id: int, character_id: str, fact_id: int) -> bool:
        """The fact is still owed its follow-up (memory/store/followup_rules.py): asked right
        before one is written."""
        ...

    async def record_followup(
        self, user_id: int, character_id: str, fact_id: int, turn_id: int | None, now: datetime
    ) -> bool:
        """The follow-up sent about the fact; False, and nothing written, once it is gone."""
        ...

    async def followup_recorded(
        self, user_id: int, character_id: str, fact_id: int, turn_id: int
    ) -> bool:
        """The follow-up written as `turn_id` is still on record: asked right before it is
        sent (a forget, in any process, deletes it)."""
        ...


class Channels(Protocol):
    """Which character a user chose, and which one a group channel is bound to."""

    async def chosen_character_of(
        self, platform: str, platform_user_id: str, channel_key: str
    ) -> str | None: ...

    async def choose_character(
        self, user_id: int, channel_key: str, character_id: str, now: datetime
    ) -> None: ...

    async def bound_character(self, platform: str, channel_id: str) -> str | None: ...

    async def bind_channel(
        self, platform: str, channel_id: str, character_id: str | None, by: str, now: datetime
    ) -> None: ...


class Usage(Protocol):
    async def record_usage(self, record: UsageRecord, now: datetime) -> None: ...

    async def usage_records(
        self, user_id: int | None = None, since: datetime | None = None
    ) -> list[UsageRecord]: ...

    async def provider_failures(
        self, kind: str, conversation_id: int
    ) -> tuple[int, datetime | None, str]:
        """How many calls of `kind` for the conversation the provider failed (usage rows whose
        error starts with PROVIDER_FAILURE), the latest one's time and error: the state of the
        background jobs' retry schedule (memory/engine/retries.py)."""
        ...

    async def given_up_jobs(self) -> dict[str, int]:
        """How many conversations each background job gave up on after its retries
        ('extraction', 'journey', 'canon'): for the admin (`companion stats`)."""
        ...


class SearchIndex(Protocol):
    """Candidates and statistics for the BM25 of memory/search/retrieval.py, always scoped to
    one user's thread with one character (every scope of the pair when `scope` is None)."""

    async def search_term_counts(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term]
    ) -> list[int]: ...

    async def thread_text_stats(
        self, user_id: int, character_id: str, scope: str | None
    ) -> tuple[int, int]: ...

    async def search_exchanges(
        self, user_id: int, character_id: str, scope: str | None, terms: list[Term], limit: int
    ) -> tuple[list[int], list[ExchangeRow]]: ...

    async def exchange_turns(
        self, user_id: int, character_id: str, scope: str | None, turn_ids: list[int]
    ) -> list[ExchangeRow]: ...


class ChangeFeed(Protocol):
    @property
    def external_changes(self) -> int:
        """How many writes by other processes were seen: what a live session caches from the
        store may be stale once this moves."""
        ...


class Erasure(Protocol):
    """Forget: the rows go in one transaction; how their bytes leave the disk is the backend's
    (docs/privacy.md, "What stays on disk, per backend")."""

    async def forget(self, user_id: int, character_id: str) -> dict[str, int]: ...

    async def forget_user_if_unreferenced(self, user_id: int) -> bool: ...

    async def characters_of(self, user_id: int) -> list[str]: ...

    async def purge_settled(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait for the bytes of earlier deletions to leave the disk; for the admin CLI."""
        ...


class Export(Protocol):
    async def export_rows(
        self, user_id: int, character_id: str
    ) -> dict[str, list[dict[str, object]]]: ...

    async def import_rows(
        self, user_id: int, character_id: str, data: dict[str, Any], now: datetime
    ) -> dict[str, int]: ...


class Journeys(Protocol):
    """The journey of each user with each character (memory/journey/): one per pair, replaced
    whole, and which ended conversation was written into it."""

    async def journey(self, user_id: int, character_id: str) -> Journey | None: ...

    async def save_journey(
        self, journey: Journey, conversation_id: int, previous_id: int | None, now: datetime
    ) -> bool:
        """Replace the pair's journey and mark the conversation done, in one transaction; False
        (nothing written) when the conversation is gone (forgotten), was already chronicled,
        or the journey is no longer `previous_id` (another writer replaced it)."""
        ...

    async def mark_journey_run(
        self, conversation: Conversation, status: str, now: datetime
    ) -> None:
        """The conversation needs no chronicle, or every attempt was rejected: not owed again."""
        ...

    async def journey_run_status(self, conversation_id: int) -> str | None: ...

    async def conversations_pending_journey(self) -> list[Conversation]:
        """Ended private conversations not yet chronicled, oldest first."""
        ...

    async def rewrite_journey(self, journey: Journey) -> bool:
        """The same journey with fewer sentences (a cited turn or fact was deleted): written in
        place when it is still the pair's, deleted when nothing is left; purged as a delete."""
        ...

    async def delete_journey(self, user_id: int, character_id: str) -> bool: ...


class Scenes(Protocol):
    """Group scenes (migration 0022): the characters an admin added to each, and a
    participant's lines taken out of every copy the characters keep."""

    async def scene_members(self, platform: str, channel_id: str) -> list[str]: ...

    async def add_scene_member(
        self, platform: str, channel_id: str, character_id: str, by: str, now: datetime
    ) -> bool: ...

    async def remove_scene_member(
        self, platform: str, channel_id: str, character_id: str
    ) -> bool: ...

    async def forget_scene_lines(
        self, person_id: int, scene_scope: str | None, character_id: str | None = None
    ) -> SceneErasure:
        """Delete the person's lines from scene threads (one scene, or every one when
        `scene_scope` is None; only one character's copies when `character_id` is given), the
        claims of those threads' summaries citing them or nothing, and with a scene named,
        their facts learned in its group and their threads there from before scenes; the
        bytes are purged as a forget's."""
        ...


class ChatRatings(Protocol):
    """Ratings (migration 0025): the group chats marked for adults, and which bound character
    each channel's admins were told does not speak there."""

    async def chat_is_mature(self, platform: str, channel_id: str) -> bool: ...

    async def mark_chat_mature(
        self, platform: str, channel_id: str, mature: bool, by: str, now: datetime
    ) -> None: ...

    async def claim_rating_notice(
        self, platform: str, channel_id: str, character_id: str, now: datetime
    ) -> bool:
        """True the first time for this channel and character (a new character, again)."""
        ...


class ConversationStore(
    Users, TurnLog, Summaries, Facts, Preferences, OffRecordFlags, ChangeFeed, Protocol
):
    """What the conversation engine reads and writes (memory/engine/)."""


class MemoryStore(
    ConversationStore,
    Channels,
    Usage,
    FollowUps,
    SearchIndex,
    Erasure,
    Export,
    DeadLetters,
    DeploymentCopy,
    Administration,
    Journeys,
    Scenes,
    SceneJourneys,
    BudgetLedger,
    ChannelCommunities,
    AccessRules,
    ChatRatings,
    CanonStore,
    Protocol,
):
    """Everything a backend implements; held only by the composition root and the admin CLI."""
