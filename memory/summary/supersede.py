"""Memory stays true when life changes: a claim naming a value the profile has replaced is dated.

The profile keeps one current value per fact and moves the old one to its history ("vivo en
Getxo", then "me he mudado a Bilbao"). The rolling summary accumulates established facts and canon
verbatim, so without this the old value would stay there, stated as current, in every later
prompt and in `/memoria ver`. A claim of those two fields that names a superseded value (a word of
the old value that the new value does not have), and does not also name the new value (then it is
about the change itself), leaves them and is kept in established facts as "Antes (hasta
2026-11): ...". Claims that cite only turns newer than the change are left alone: they were
written knowing it.

The journey (memory/journey/) is dated the same way: a sentence naming a superseded value is
kept where it stands in the story, prefixed as past ("Antes (hasta 2026-11): Ana contó que vivía
en Getxo"), when the extraction records the change (`retire_in_journey`) and at every chronicle's
save (`date_journey`, with the history read then), so a chronicle written from turns before the
change does not bring the old value back as current.

Two background jobs follow a conversation and race: its extraction (which changes facts) and its
compaction (which writes the next summary from the previous one it was given, maybe older than
the newest). So the dating holds at every summary save, whichever lands last: a compaction's
summary is saved over the thread's newest row, with the claims that row had dated dated again
(`carry_dated`: this is how a deletion, which leaves no history, reaches it) and the fact
history read at that moment applied; an extraction rewrites the newest row after its changes
are committed. Both save with `save_summary_over`, which stores nothing when another summary
became the newest meanwhile: they read it and build again, so neither overwrites the other's.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from memory.journey.model import JOURNEY_SCOPE, Journey, sentences_of
from memory.models import Fact, Summary, SummaryFields, Thread
from memory.store.protocols import Facts, Journeys, Summaries

log = logging.getLogger(__name__)
_CITE = re.compile(r"\{cite:(\d+)\}")
_WORD = re.compile(r"\w+")
_BEFORE = {"es": "Antes (hasta {month}): ", "en": "Before (until {month}): "}
# Words too common to tell an old value from a new one.
# fmt: off
_COMMON = frozenset({
    "del", "los", "las", "con", "por", "para", "una", "uno", "que", "muy", "the", "and", "with",
    "for", "from", "his", "her", "its", "sus", "este", "esta", "desde", "hace", "since",
})
# fmt: on
CHECKED_FIELDS = ("established_facts", "canon")
# A save that keeps finding a newer summary (a busy thread on several workers) gives up after
# this many reads: the next save or extraction dates what it missed.
SAVE_ATTEMPTS = 8


@dataclass(frozen=True, slots=True)
class ValueChange:
    """A fact value that stopped being true.

    `new` is the value now (None when the fact was deleted); `until` when it changed; claims that
    cite only turns after `through_turn_id` were written after the change was said.
    """

    old: str
    new: str | None
    until: datetime
    through_turn_id: int


class ClaimsStore(Facts, Summaries, Journeys, Protocol):
    """The profile's history, and the summary and the journey it dates."""


def _words(text: str) -> set[str]:
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return {w for w in _WORD.findall(plain) if (len(w) >= 3 or w.isdigit()) and w not in _COMMON}


def _is_dated(claim: str) -> bool:
    return any(claim.startswith(prefix.split("{")[0]) for prefix in _BEFORE.values())


def _undated(claim: str) -> str:
    """The claim as it was written, without its "Antes (hasta ...): " prefix."""
    if _is_dated(claim) and ": " in claim:
        return claim.split(": ", 1)[1]
    return claim


def _stale(claim: str, change: ValueChange) -> bool:
    cited = [int(i) for i in _CITE.findall(claim)]
    if cited and min(cited) > change.through_turn_id:
        return False
    new_words = _words(change.new or "")
    distinctive = _words(change.old) - new_words
    said = _words(_CITE.sub(" ", claim))
    return bool(distinctive & said) and not (new_words - _words(change.old)) & said


def retire_superseded(
    fields: SummaryFields, changes: Sequence[ValueChange], language: str
) -> SummaryFields:
    """Established facts and canon without claims of superseded values; those claims are kept
    once, dated, among the established facts."""
    if not changes:
        return fields
    prefix = _BEFORE.get(language, _BEFORE["en"])
    dated: list[str] = []
    kept: dict[str, list[str]] = {}
    for name in CHECKED_FIELDS:
        kept[name] = []
        for claim in getattr(fields, name):
            change = next((c for c in changes if _stale(claim, c)), None)
            if change is None or _is_dated(claim):
                kept[name].append(claim)
            else:
                dated.append(prefix.format(month=f"{change.until:%Y-%m}") + claim)
    if not dated:
        return fields
    return _with_dated(fields, kept["established_facts"], kept["canon"], dated)


def date_sentences(
    paragraphs: Sequence[str], changes: Sequence[ValueChange], language: str
) -> tuple[str, ...]:
    """The journey's paragraphs with each sentence that names a superseded value (as a claim
    would, `_stale`) marked as past where it stands; a sentence dated before is left as it is."""
    if not changes:
        return tuple(paragraphs)
    prefix = _BEFORE.get(language, _BEFORE["en"])
    out = []
    for paragraph in paragraphs:
        sentences = []
        for sentence in sentences_of(paragraph):
            change = next((c for c in changes if _stale(sentence, c)), None)
            if change is not None and not _is_dated(sentence):
                sentence = prefix.format(month=f"{change.until:%Y-%m}") + sentence
            sentences.append(sentence)
        out.append(" ".join(sentences))
    return tuple(out)


class JourneyDatingStore(Facts, Journeys, Protocol):
    """The profile's history, and the journey whose sentences it dates."""


async def date_journey(store: Facts, thread: Thread, journey: Journey, language: str) -> Journey:
    """A chronicle about to be saved, dated against the fact history as it is now."""
    changes = await superseded_values(store, thread)
    return replace(journey, paragraphs=date_sentences(journey.paragraphs, changes, language))


async def retire_in_journey(
    store: JourneyDatingStore, thread: Thread, changes: Sequence[ValueChange], language: str
) -> bool:
    """After the profile changed: the pair's journey with the sentences naming a replaced
    value marked as past, rewritten in place (True when something was dated)."""
    journey = await store.journey(thread.user_id, thread.character_id)
    if journey is None or not changes:
        return False
    dated = date_sentences(journey.paragraphs, changes, language)
    if dated == journey.paragraphs:
        return False
    return await store.rewrite_journey(replace(journey, paragraphs=dated))


def _with_dated(
    fields: SummaryFields, established: list[str], canon: list[str], dated: list[str]
) -> SummaryFields:
    """`dated` appended to the established facts, each claim dated once: a claim said in both
    fields, or dated before under another month, is not listed twice."""
    seen = {_undated(claim) for claim in established if _is_dated(claim)}
    for claim in dated:
        if _undated(claim) not in seen:
            seen.add(_undated(claim))
            established.append(claim)
    return fields.with_field("established_facts", tuple(established)).with_field(
        "canon", tuple(canon)
    )


def carry_dated(fields: SummaryFields, newest: SummaryFields | None) -> SummaryFields:
    """`fields` with every claim that `newest` (the row they are saved over) holds dated
    dated the same way: a summary built from an older row does not bring back as current
    what a change, a deletion included, retired after that row was read."""
    if newest is None:
        return fields
    dated = {_undated(c): c for c in newest.established_facts if _is_dated(c)}
    kept = {name: [c for c in getattr(fields, name) if c not in dated] for name in CHECKED_FIELDS}
    carried = [dated[c] for name in CHECKED_FIELDS for c in getattr(fields, name) if c in dated]
    if not carried:
        return fields
    return _with_dated(fields, kept["established_facts"], kept["canon"], carried)


def changes_of(
    updates: Sequence[tuple[Fact, Fact, str]],
    deletes: Sequence[Fact],
    now: datetime,
    through_turn_id: int,
) -> list[ValueChange]:
    """The value changes an extraction made: updated facts and deleted ones."""
    changed = [ValueChange(old.value, new.value, now, through_turn_id) for old, new, _ in updates]
    return changed + [ValueChange(fact.value, None, now, through_turn_id) for fact in deletes]


async def superseded_values(store: ClaimsStore, thread: Thread) -> list[ValueChange]:
    """Every value the thread's profile has replaced, read from the facts' history."""
    changes: list[ValueChange] = []
    for fact in await store.facts(thread.user_id, thread.character_id, thread.scope):
        for version in await store.fact_history(thread.user_id, fact.id):
            through = max(fact.evidence, default=0)
            changes.append(ValueChange(version.value, fact.value, version.superseded_at, through))
    return changes


def _cited(fields: SummaryFields) -> frozenset[int]:
    return frozenset(int(i) for i in _CITE.findall(json.dumps(dict(fields.items()))))


async def save_current(
    store: ClaimsStore,
    thread: Thread,
    summary: Summary,
    language: str,
    conversation_id: int | None = None,
) -> Summary | None:
    """Save a compaction's summary as the thread's newest, dated against the newest row it
    replaces and the fact history as they are at the save. The summary stored, or None when
    nothing was (the conversation was forgotten, or the thread never stopped changing)."""
    for _ in range(SAVE_ATTEMPTS):
        newest = await store.latest_summary(thread)
        fields = carry_dated(summary.fields, newest.fields if newest else None)
        fields = retire_superseded(fields, await superseded_values(store, thread), language)
        dated = replace(summary, fields=fields, cited_ids=_cited(fields))
        saved = await store.save_summary_over(
            thread, dated, newest.id if newest else None, conversation_id
        )
        if not saved.stale:
            return replace(dated, id=saved.id) if saved.id is not None else None
    log.warning("summary of %s not saved: a newer one kept landing first", thread)
    return None


async def retire_in_latest_summary(
    store: ClaimsStore, thread: Thread, changes: Sequence[ValueChange], language: str, now: datetime
) -> Summary | None:
    """After the profile changed: the thread's newest summary without the superseded claims,
    stored as a new summary row (older rows are never edited). None when nothing changed. A
    private thread's journey has its sentences naming a replaced value dated too, in place."""
    if thread.scope == JOURNEY_SCOPE:
        await retire_in_journey(store, thread, changes, language)
    for _ in range(SAVE_ATTEMPTS):
        latest = await store.latest_summary(thread)
        if latest is None or not changes:
            return None
        fields = retire_superseded(latest.fields, changes, language)
        if fields == latest.fields:
            return None
        rewritten = replace(latest, fields=fields, cited_ids=_cited(fields), created_at=now, id=0)
        saved = await store.save_summary_over(thread, rewritten, latest.id)
        if saved.id is not None:
            return replace(rewritten, id=saved.id)
    return None
