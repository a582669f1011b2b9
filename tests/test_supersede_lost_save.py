"""A supersede that loses its first save still retires the claims (issue 35, faults): another
summary (a compaction finishing) lands between the extraction's read of the newest summary
and its save, so that save stores nothing; the extraction reads the new newest row and dates
its claims there. Both backends; the rival lands through the real store, at that moment."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memory.models import Summary, SummaryFields, Thread
from memory.summary.supersede import ValueChange, retire_in_latest_summary

NOW = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)
WHEN = datetime(2026, 11, 1, tzinfo=UTC)


class RivalLandsFirst:
    """The real store, where `rival` is saved over the same row just before this caller's
    first save (then out of the way): the interleaving of a race, made certain."""

    def __init__(self, store: Any, rival: Summary) -> None:
        self._store = store
        self._rival: Summary | None = rival
        self.saves = 0

    async def latest_summary(self, thread: Thread) -> Summary | None:
        return await self._store.latest_summary(thread)

    def __getattr__(self, name: str) -> Any:
        """Every other method (the journey's dating after the change) is the real store's."""
        return getattr(self._store, name)

    async def save_summary_over(self, thread: Thread, summary: Summary, over: int | None) -> Any:
        if self._rival is not None:
            rival, self._rival = self._rival, None
            assert (await self._store.save_summary_over(thread, rival, over)).id is not None
        self.saves += 1
        return await self._store.save_summary_over(thread, summary, over)


def summary(*claims: str) -> Summary:
    return Summary(SummaryFields(established_facts=claims), frozenset(), 0, NOW)


async def test_a_supersede_whose_first_save_loses_still_retires_the_claims(
    any_store: Any,
) -> None:
    user = await any_store.upsert_user("telegram", "41", "Ana", NOW)
    thread = Thread(user.id, "detective_bilbao", "dm")
    first = await any_store.save_summary_over(thread, summary("Vive en Getxo"), None)
    rival = summary("Vive en Getxo", "Tiene perro")  # the compaction's, built before the change
    raced = RivalLandsFirst(any_store, rival)
    change = ValueChange("Getxo", "Bilbao", WHEN, through_turn_id=40)
    saved = await retire_in_latest_summary(raced, thread, [change], "es", NOW)
    assert raced.saves == 2  # the first lost to the rival
    latest = await any_store.latest_summary(thread)
    assert saved is not None and latest is not None and latest.id == saved.id != first.id
    claims = latest.fields.established_facts
    assert "Vive en Getxo" not in claims and "Tiene perro" in claims
    assert any(c.startswith("Antes (hasta 2026-11): Vive en Getxo") for c in claims), claims
