"""The composition root: settings in, a running engine with its store, LLM and scheduler out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.commands import Commands, Limits
from bot.config import Settings
from bot.llm import ClosableLLM, build_llm
from bot.memoria import Memoria
from bot.reload import CharacterReloader
from memory.characters import CharacterBook
from memory.companion import Companion
from memory.extraction import ProfileExtractor
from memory.models import Conversation
from memory.privacy import MemoryService
from memory.profile import ProfileService
from memory.responder import Responder
from memory.retrieval import Retriever
from memory.store import Store
from memory.summary import Summariser
from memory.supersede import superseded_values
from memory.tokens import TokenEstimator

IDLE_SWEEP_SECONDS = 60


@dataclass
class App:
    settings: Settings
    store: Store
    characters: CharacterBook
    llm: ClosableLLM
    companion: Companion
    scheduler: AsyncIOScheduler
    extractor: ProfileExtractor
    sweep: Callable[[], Awaitable[None]]
    commands: Commands
    memory: MemoryService


def system_clock(settings: Settings) -> Callable[[], datetime]:
    zone = ZoneInfo(settings.timezone)
    return lambda: datetime.now(zone)


@asynccontextmanager
async def open_app(
    settings: Settings,
    *,
    llm: ClosableLLM | None = None,
    clock: Callable[[], datetime] | None = None,
    start_scheduler: bool = True,
) -> AsyncIterator[App]:
    """Build everything once, in dependency order, and close it in reverse."""
    engine_settings = settings.engine()
    characters = CharacterBook.load(settings.characters_dir)
    llm = llm or build_llm(settings)
    clock = clock or system_clock(settings)
    store = await Store.open(settings.database_path)
    tokens = TokenEstimator()
    summariser = Summariser(
        llm,
        lambda record: store.record_usage(record, clock()),
        tokens,
        cap_tokens=settings.summary_cap_tokens,
        model=settings.llm_summary_model,
        superseded=lambda thread: superseded_values(store, thread),
        record_rejection=lambda thread, conversation_id, reason: store.record_rejection(
            thread, conversation_id, reason, clock()
        ),
    )
    lifetimes = settings.lifetimes()
    profile = ProfileService(
        store,
        lifetimes,
        settings.budget_profile_tokens,
        tokens,
        characters,
    )
    extractor = ProfileExtractor(
        llm,
        store,
        lifetimes,
        clock,
        characters,
        model=settings.llm_summary_model,
    )
    responder = Responder(
        llm,
        store,
        Retriever(store, tokens),
        engine_settings.budgets,
        engine_settings.max_reply_tokens,
        engine_settings.lore_page_cap_tokens,
        tokens,
        clock,
    )
    companion = Companion(
        store, characters, responder, summariser, engine_settings, clock, tokens, profile=profile
    )

    async def extract_and_refresh(conversation: Conversation) -> None:
        if await extractor.extract(conversation) == "done":
            thread = conversation.thread
            companion.profile_changed(thread.user_id, thread.character_id)

    async def extract_later(conversation: Conversation) -> None:
        companion.spawn(extract_and_refresh(conversation))

    reloader = CharacterReloader(settings.characters_dir, characters)

    async def sweep() -> None:
        await reloader.check()
        await companion.end_idle_conversations()
        await extractor.extract_pending()
        await store.resume_purge()  # owed by a crash or by another process's forget

    companion.on_conversation_end(extract_later)
    companion.on_forget(extractor.cancel_for)  # a forget stops the user's extraction first
    # Work that was due when the process last stopped is found from the database, not memory.
    companion.spawn(extractor.extract_pending())
    scheduler = AsyncIOScheduler()
    scheduler.add_job(
        sweep,
        "interval",
        seconds=IDLE_SWEEP_SECONDS,
        id="end-idle-conversations",
        coalesce=True,
        max_instances=1,
    )
    if start_scheduler:
        scheduler.start()
    memory_service = MemoryService(
        store, lifetimes, clock, companion.forgetting, companion.profile_changed
    )
    commands = Commands(
        companion,
        store,
        Memoria(memory_service),
        reloader,
        Limits(
            settings.max_message_chars,
            settings.rate_limit_messages,
            settings.rate_limit_window_seconds,
        ),
        settings.admin_ids,
        clock,
        settings.default_character,
    )
    try:
        yield App(
            settings,
            store,
            characters,
            llm,
            companion,
            scheduler,
            extractor,
            sweep,
            commands,
            memory_service,
        )
    finally:
        if scheduler.running:
            scheduler.shutdown(wait=False)
        await companion.drain()
        await llm.close()
        await store.close()
