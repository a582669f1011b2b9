"""What memory already knows about its turns: the facts, summary claims and journey sentences
that cite them.

A fact keeps the ids of the turns it was extracted from (its evidence), a summary claim ends
with `{cite:ID}` codes, and so does each sentence of the journey ("El Viaje",
memory/journey/). They say in few words what an exchange was about, often in words the
exchange itself never used ("Ana's brother is missing" for "Iñaki no contesta"): a query that
matches a claim also finds the exchanges the claim cites (memory/search/retrieval.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from memory.journey.model import CITE, JOURNEY_SCOPE, Journey, cited_in, sentences_of
from memory.models import Fact, Summary, Thread
from memory.store.protocols import SearchIndex

_CITE = re.compile(r"\{cite:(\d+)\}")


class RecallStore(SearchIndex, Protocol):
    """What recall reads: the search index, and the facts and summary that cite turns."""

    async def facts(
        self, user_id: int, character_id: str, scope: str | None = None
    ) -> list[Fact]: ...

    async def latest_summary(self, thread: Thread) -> Summary | None: ...

    async def journey(self, user_id: int, character_id: str) -> Journey | None: ...


@dataclass(frozen=True, slots=True)
class Claim:
    """Something memory holds as true, and the turns it was drawn from."""

    text: str
    turn_ids: tuple[int, ...]


async def known_claims(
    store: RecallStore,
    user_id: int,
    character_id: str,
    scope: str | None,
    journey: bool = False,
) -> list[Claim]:
    """The active facts and the latest summary's claims of the thread that cite turns, and with
    `journey` each cited sentence of the pair's journey. A summary belongs to one scope:
    searching every scope of the pair reads facts only. The journey is the story of the
    private thread: it is lent to a private search (or one over every scope) and never to a
    group's, where other people read the reply."""
    claims = [
        Claim(f"{fact.key.replace('_', ' ')}: {fact.value}", fact.evidence)
        for fact in await store.facts(user_id, character_id, scope)
        if fact.status == "active" and fact.evidence
    ]
    if scope is not None:
        summary = await store.latest_summary(Thread(user_id, character_id, scope))
        for _, items in summary.fields.items() if summary else ():
            for claim in items:
                cited = tuple(int(found) for found in _CITE.findall(claim))
                if cited:
                    claims.append(Claim(_CITE.sub("", claim), cited))
    if journey and scope in (None, JOURNEY_SCOPE):
        claims += journey_claims(await store.journey(user_id, character_id))
    return claims


def journey_claims(journey: Journey | None) -> list[Claim]:
    """One claim per sentence of the journey that cites a turn: a sentence tells what its own
    citations rest on, so it lends its words to those turns only, not to the whole paragraph's.
    A citation of a turn deleted since finds nothing (recall fetches the user's own turns by
    id), so the journey is read as stored, with no rewrite on the search path."""
    claims = []
    for paragraph in journey.paragraphs if journey else ():
        for sentence in sentences_of(paragraph):
            cited = tuple(sorted(cited_in(sentence)))
            if cited:
                claims.append(Claim(CITE.sub("", sentence), cited))
    return claims
