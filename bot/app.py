"""The composition root: settings in; the store, the LLM, the services, the jobs and the
command handlers built once, in dependency order, and passed in; closed in reverse."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.budgets import OperatorNotices, budgeted
from bot.commands import Commands, Limits
from bot.config import Settings
from bot.followups import FollowUpJob, FollowUpPolicy
from bot.jobs import BackgroundJobs
from bot.llm import ClosableLLM, build_llm
from bot.memoria import Memoria
from bot.photos import Photos
from bot.reload import CharacterReloader
from cards.character import CharacterBook
from memory.canon.proposer import CanonProposer
from memory.engine.companion import Companion
from memory.engine.photos import PhotoDescriber
from memory.engine.prefix import ReplyPrefixes, Upkeep
from memory.engine.responder import Responder
from memory.engine.tokens import TokenEstimator
from memory.integrity.learned import shipped_check
from memory.integrity.legible import load_vocabularies
from memory.journey.chronicler import JOURNEY_TOOL, Chronicler
from memory.journey.source import ProfileWithJourney
from memory.privacy import MemoryService
from memory.profile.extraction import ProfileExtractor, character_names
from memory.profile.planning import EXTRACTION_TOOL
from memory.profile.view import ProfileService
from memory.scene.people import ScenePeople
from memory.search.retrieval import Retriever
from memory.store import MemoryStore, open_store
from memory.summary.rolling import SUMMARY_TOOL, Summariser


@dataclass
class App:
    settings: Settings
    store: MemoryStore
    characters: CharacterBook
    llm: ClosableLLM
    companion: Companion
    scheduler: AsyncIOScheduler
    extractor: ProfileExtractor
    sweep: Callable[[], Awaitable[None]]
    commands: Commands
    memory: MemoryService
    followups: FollowUpJob
    chronicler: Chronicler | None = None
    # Starts the work owed since the last stop; open_app calls it unless told not to.
    catch_up: Callable[[], None] = lambda: None
    canon: CanonProposer | None = None


def system_clock(settings: Settings) -> Callable[[], datetime]:
    zone = ZoneInfo(settings.timezone)
    return lambda: datetime.now(zone)


def _engine(
    settings: Settings,
    store: MemoryStore,
    llm: ClosableLLM,
    clock: Callable[[], datetime],
    characters: CharacterBook,
) -> tuple[Companion, ProfileExtractor, Chronicler]:
    """The conversation engine, the profile's extraction and the journey's chronicler, on one
    store and one LLM."""
    engine_settings = settings.engine()
    tokens = TokenEstimator()
    prefixes = ReplyPrefixes(settings.max_sessions_in_ram)
    summariser = Summariser(
        llm,
        lambda record: store.record_usage(record, clock()),
        tokens,
        cap_tokens=settings.summary_cap_tokens,
        model=settings.llm_summary_model,
        record_rejection=lambda thread, conversation_id, reason: store.record_rejection(
            thread, conversation_id, reason, clock()
        ),
        prefixes=prefixes,
    )
    lifetimes = settings.lifetimes()
    facts = ProfileService(store, lifetimes, settings.budget_profile_tokens, tokens, characters)
    profile = ScenePeople(
        ProfileWithJourney(facts, store, characters),
        store,
        lifetimes,
        settings.budget_profile_tokens,
        tokens,
        characters,
        chronicles=store if settings.scene_journey_max_tokens else None,
    )
    journey_model = settings.llm_journey_model or settings.llm_summary_model
    chronicler = Chronicler(
        llm,
        store,
        characters,
        clock,
        tokens,
        cap_tokens=settings.journey_max_tokens,
        model=journey_model,
        prefixes=prefixes,
        scene_cap_tokens=settings.scene_journey_max_tokens,
    )
    extractor = ProfileExtractor(
        llm, store, lifetimes, clock, characters, model=settings.llm_summary_model,
        prefixes=prefixes,
    )  # fmt: skip
    # A reply may lend its prefix to the background calls on its model (memory/engine/prefix.py).
    journey_tool = (JOURNEY_TOOL,) if journey_model == settings.llm_summary_model else ()
    upkeep = Upkeep((SUMMARY_TOOL, EXTRACTION_TOOL, *journey_tool), settings.llm_summary_model)
    lent = prefixes if settings.llm_share_reply_prefix else None
    responder = Responder(
        llm,
        store,
        Retriever(store, tokens),
        engine_settings.budgets,
        engine_settings.max_reply_tokens,
        engine_settings.lore_page_cap_tokens,
        tokens,
        clock,
        upkeep,
        lent,
    )
    companion = Companion(
        store, characters, responder, summariser, engine_settings, clock, tokens, profile=profile
    )
    companion.on_forget(prefixes.forget)  # they hold memory rendered for one user
    return companion, extractor, chronicler


def _commands(
    settings: Settings,
    companion: Companion,
    store: MemoryStore,
    memory_service: MemoryService,
    reloader: CharacterReloader,
    llm: ClosableLLM,
    clock: Callable[[], datetime],
) -> Commands:
    """The platform-agnostic command handlers every adapter calls, photos included."""
    limits = Limits(
        settings.max_message_chars,
        settings.rate_limit_messages,
        settings.rate_limit_window_seconds,
        followups_per_week=settings.followups_per_week,
        access_refresh_seconds=settings.access_refresh_seconds,
        lore_page_cap_tokens=settings.lore_page_cap_tokens,
    )
    commands = Commands(
        companion,
        store,
        Memoria(memory_service),
        reloader,
        limits,
        settings.admin_ids,
        clock,
        settings.default_character,
        settings.community_characters,
        settings.mature_dms,
    )
    vision = settings.llm_vision and settings.llm_provider == "anthropic"
    describer = PhotoDescriber(llm, store, clock, settings.llm_summary_model) if vision else None
    commands.photos = Photos(
        describer,
        settings.photo_max_bytes,
        store,
        commands.character_for,
        commands.submit,
        clock,
        commands.access.refusal,
    )
    return commands


def _jobs(
    settings: Settings,
    companion: Companion,
    extractor: ProfileExtractor,
    reloader: CharacterReloader,
    store: MemoryStore,
    clock: Callable[[], datetime],
    chronicler: Chronicler,
) -> BackgroundJobs:
    """What runs between messages: the sweep, extraction, follow-ups."""
    policy = FollowUpPolicy(
        settings.followups_per_week,
        settings.followup_quiet_start_hour,
        settings.followup_quiet_end_hour,
        settings.followup_window_days,
    )
    followups = FollowUpJob(companion, store, policy, clock, settings.mature_dms)
    return BackgroundJobs(
        companion,
        extractor,
        reloader,
        store,
        followups,
        settings.followup_check_seconds,
        chronicler,
        clock=clock,
        letters_kept=timedelta(days=settings.dead_letter_no_sender_days),
    )


@asynccontextmanager
async def open_app(
    settings: Settings,
    *,
    llm: ClosableLLM | None = None,
    clock: Callable[[], datetime] | None = None,
    start_scheduler: bool = True,
    characters: CharacterBook | None = None,
    catch_up: bool = True,
) -> AsyncIterator[App]:
    """Build everything once, in dependency order, and close it in reverse. `characters`
    defaults to the folder, every file valid (CharacterFileError otherwise). With
    `catch_up=False` the caller starts the owed work (`App.catch_up`) when it is ready."""
    characters = characters or CharacterBook.load(settings.characters_dir)
    # The gate's word lists and its learned model, read off the event loop: the first message
    # must not wait for them.
    await asyncio.to_thread(load_vocabularies)
    await asyncio.to_thread(shipped_check)
    llm = llm or build_llm(settings)
    clock = clock or system_clock(settings)
    store = await open_store(settings.database_target)
    notices = OperatorNotices(settings.admin_ids)
    llm = budgeted(settings, store, llm, clock, notices)  # every call below passes the guard
    companion, extractor, chronicler = _engine(settings, store, llm, clock, characters)
    reloader = CharacterReloader(settings.characters_dir, characters)
    jobs = _jobs(settings, companion, extractor, reloader, store, clock, chronicler)
    # Canon proposals (memory/canon/): beside the journey, on the summary's model.
    jobs.canon = CanonProposer(
        llm,
        store,
        characters,
        clock,
        model=settings.llm_summary_model,
        enabled=settings.canon_proposals,
    )
    jobs.wire()
    notices.followups = jobs.followups
    if catch_up:
        jobs.catch_up()
    scheduler = AsyncIOScheduler()
    jobs.schedule(scheduler)
    if start_scheduler:
        scheduler.start()
    memory_service = MemoryService(
        store,
        settings.lifetimes(),
        clock,
        companion.forgetting,
        companion.profile_changed,
        names_of=partial(character_names, characters),
    )
    commands = _commands(settings, companion, store, memory_service, reloader, llm, clock)
    await commands.access.merge(settings.access_start(), clock())  # .env's rules (bot/access.py)
    try:
        yield App(
            settings,
            store,
            characters,
            llm,
            companion,
            scheduler,
            extractor,
            jobs.sweep,
            commands,
            memory_service,
            jobs.followups,
            chronicler,
            jobs.catch_up,
            jobs.canon,
        )
    finally:
        if scheduler.running:
            scheduler.shutdown(wait=False)
        await companion.drain()
        await llm.close()
        await store.close()
