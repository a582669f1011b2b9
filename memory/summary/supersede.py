"""Memory stays true when life changes: a claim naming a value the profile has replaced is dated.

The profile keeps one current value per fact and moves the old one to its history ("vivo en
Getxo", then "me he mudado a Bilbao"). The rolling summary accumulates established facts and canon
verbatim, so without this the old value would stay there, stated as current, in every later
prompt and in `/memoria ver`. A claim of those two fields that names a superseded value (a word of
the old value that the new value does not have), and does not also name the new value (then it is
about the change itself), leaves them and is kept in established facts as "Antes (hasta
2026-11): ...". Claims that cite only turns newer than the change are left alone: they were
written knowing it.

It runs at both ends of the race between the two background jobs that follow a conversation:
after an extraction changes facts (the thread's latest summary is rewritten into a new row) and
at every compaction (against the fact history read from the store after the model answered).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from memory.models import Fact, Summary, SummaryFields, Thread
from memory.store.protocols import Facts, Summaries

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


class ClaimsStore(Facts, Summaries, Protocol):
    """The profile's history, and the summary whose claims it dates."""


def _words(text: str) -> set[str]:
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return {w for w in _WORD.findall(plain) if (len(w) >= 3 or w.isdigit()) and w not in _COMMON}


def _is_dated(claim: str) -> bool:
    return any(claim.startswith(prefix.split("{")[0]) for prefix in _BEFORE.values())


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
    established = tuple(kept["established_facts"]) + tuple(
        claim for claim in dated if claim not in kept["established_facts"]
    )
    return fields.with_field("established_facts", established).with_field(
        "canon", tuple(kept["canon"])
    )


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


async def retire_in_latest_summary(
    store: ClaimsStore, thread: Thread, changes: Sequence[ValueChange], language: str, now: datetime
) -> Summary | None:
    """After the profile changed: the thread's latest summary without the superseded claims,
    stored as a new summary row (older rows are never edited). None when nothing changed."""
    latest = await store.latest_summary(thread)
    if latest is None or not changes:
        return None
    fields = retire_superseded(latest.fields, changes, language)
    if fields == latest.fields:
        return None
    cited = frozenset(int(i) for i in _CITE.findall(json.dumps(dict(fields.items()))))
    rewritten = replace(latest, fields=fields, cited_ids=cited, created_at=now, id=0)
    summary_id = await store.save_summary(thread, rewritten)
    return replace(rewritten, id=summary_id)
