"""What memory already knows about its turns: the facts and summary claims that cite them.

A fact keeps the ids of the turns it was extracted from (its evidence), and a summary claim
ends with `{cite:ID}` codes. Both say in few words what an exchange was about, often in words
the exchange itself never used ("Ana's brother is missing" for "Iñaki no contesta"): a query
that matches a claim also finds the exchanges the claim cites (memory/search/retrieval.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from memory.models import Fact, Summary, Thread
from memory.store.protocols import SearchIndex

_CITE = re.compile(r"\{cite:(\d+)\}")


class RecallStore(SearchIndex, Protocol):
    """What recall reads: the search index, and the facts and summary that cite turns."""

    async def facts(
        self, user_id: int, character_id: str, scope: str | None = None
    ) -> list[Fact]: ...

    async def latest_summary(self, thread: Thread) -> Summary | None: ...


@dataclass(frozen=True, slots=True)
class Claim:
    """Something memory holds as true, and the turns it was drawn from."""

    text: str
    turn_ids: tuple[int, ...]


async def known_claims(
    store: RecallStore, user_id: int, character_id: str, scope: str | None
) -> list[Claim]:
    """The active facts and the latest summary's claims of the thread that cite turns. A
    summary belongs to one scope: searching every scope of the pair reads facts only."""
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
    return claims
