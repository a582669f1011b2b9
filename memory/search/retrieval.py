"""Recall from the turn log: whole exchanges, ranked by BM25, kept only above a relevance threshold.

The unit is the exchange (a user turn and the replies up to the next user turn), as the seed
article asks: a turn alone often holds the question and not the answer. FTS5 finds candidate
turns in one user's thread with one character (memory/search/terms.py); this module groups them into
exchanges and scores each as one document with BM25 over the thread's own statistics, so a word
the user says every day weighs little and a name said once weighs a lot. Then:
- neighbours: the exchanges just before and after a strong match inherit half its score (the
  answer to a question often comes one exchange later);
- coverage: matching more of the query's distinct terms counts beyond the BM25 sum;
- dates: a query that names a month ("in June", "en mayo de 2023") favours what was said then.

Two scores per exchange:
- `bm25`: the ranking score.
- `score`: the share of the query's IDF weight the exchange matches, 0-1. It does not grow with
  the history or the length of the query, so one absolute threshold holds for every user; with
  a floor relative to the best hit, it decides which exchanges become this turn's fragments.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from memory.engine.tokens import TokenEstimator
from memory.integrity.credentials import mask_credentials
from memory.models import Fragment, Thread, Turn
from memory.scene.voices import witnessed
from memory.search.cited import RecallStore, known_claims
from memory.search.terms import Stemmers, Term, fold, query_terms, words
from memory.search.when import in_months, named_months, time_query

# (user id, character id): every scope of that pair; a Thread: that scope only (a DM's memories
# never surface in a group, where other people read the reply).
Where = Thread | tuple[int, str]
_FRAGMENT_POOL = 50  # ranked exchanges looked at for fragments; the relative floor cuts sooner


@dataclass(frozen=True, slots=True)
class Exchange:
    """A user turn and the reply to it, as recalled for one query."""

    turn_ids: tuple[int, ...]
    when: datetime
    text: str  # "Name: ...\nName: ..."
    score: float  # share of the query matched, 0-1 (see the module docstring)
    bm25: float = 0.0


@dataclass(frozen=True, slots=True)
class RankConfig:
    """Constants of the ranking. k1 and b are BM25's usual values; the others were chosen on the
    FIT split of bench/locomo_retrieval.py (its first two conversations), threshold and relative
    by its `--fit` search, never on the conversations the bench reports on."""

    k1: float = 1.2
    b: float = 0.75
    # Turns fetched from FTS5 (best BM25 first) before exchange scoring: on the FIT split, 40
    # recalls as much as 200 did (R@10 0.819 against 0.814) at a fifth of the scoring work.
    candidates: int = 40
    neighbour: float = 0.5  # share of the best adjacent exchange's score added to an exchange
    neighbour_sources: int = 10  # best candidates whose adjacent exchanges are fetched too
    date_boost: float = 1.0  # bm25 x (1 + this) for exchanges from a month the query names
    # Share of a matching fact's or summary claim's score its cited exchanges gain. Fitted on
    # the FIT split with the bench's memory (bench/locomo_memory.py): R@10 0.826 at 0.25 and
    # 0.5, 0.819 at 1.0, 0.814 at 2.5, where the foreign-fragment rate also climbs (0.48).
    citation: float = 0.5
    # Lend the journey's sentences as claims too. Off: on the report split of
    # bench/locomo_retrieval.py --journey, R@10 0.7813 -> 0.7837 but R@5 0.7142 -> 0.7116 and
    # fragment recall 0.5375 -> 0.5350, FIT unchanged: under the +0.01 a lever must bring, and
    # the top the product shows gets worse (docs/memory.md, "Details from long ago").
    journey_citations: bool = False
    coverage_power: float = 0.5  # bm25 x (share of the query matched) ** this
    # Fragments, in two steps (fitted together by `--fit`, at most 3% of foreign questions
    # getting any): does the query concern this thread at all (one of the best hits matches at
    # least `gate` of it)? Then which exchanges: `threshold` of the query each, and `relative`
    # of the best hit's bm25. Deciding once per query lets each exchange pass a lower bar.
    gate: float = 0.45
    threshold: float = 0.2  # fragments: minimum `score`
    relative: float = 0.3  # fragments: minimum share of the best hit's bm25
    max_fragments: int = 5  # the seed: three to five fragments a turn, no more
    stats_ttl_seconds: float = 300.0


@dataclass(frozen=True, slots=True)
class _Query:
    terms: list[Term]
    patterns: list[re.Pattern[str]]
    idf: list[float]
    average: float  # characters in an average exchange


@dataclass
class _Candidate:
    first_id: int
    next_id: int | None  # first turn of the next exchange in the conversation
    previous_id: int | None  # last turn of the previous exchange in the conversation
    turns: list[Turn]
    bm25: float = 0.0
    score: float = 0.0


class Retriever:
    def __init__(
        self,
        store: RecallStore,
        tokens: TokenEstimator | None = None,
        config: RankConfig | None = None,
    ) -> None:
        self.store = store
        self.tokens = tokens or TokenEstimator()
        self.config = config or RankConfig()
        self._stats: dict[tuple[int, str, str | None], tuple[float, int, int]] = {}
        self._stemmers = Stemmers()

    async def search(
        self,
        where: Where,
        query: str,
        limit: int,
        *,
        names: tuple[str, str] | None = None,
        language: str | None = None,
        now: datetime | None = None,
    ) -> list[Exchange]:
        """The `limit` best exchanges for `query`, best first; no threshold (search_memory).

        `names` (user, character) label the speakers and are not searched for: every exchange
        is between those two, whether or not it names them. `language` (the character's) stems
        the query when its own words do not tell its language; `now` (the conversation's clock)
        gives "yesterday" or "la semana pasada" their dates.
        """
        ranked = await self._rank(where, query, names, language, now)
        found = [self._exchange(c, names) for c in ranked[: max(limit, 0)]]
        # Credentials stay in the user's log but are never recalled (as in select_fragments).
        return [replace(e, text=mask_credentials(e.text)) for e in found]

    async def fragments(
        self,
        thread: Thread,
        query: str,
        exclude_turn_ids: set[int],
        budget_tokens: int,
        max_fragments: int = 4,
        *,
        names: tuple[str, str] | None = None,
        language: str | None = None,
        now: datetime | None = None,
    ) -> list[Fragment]:
        """This turn's recalled fragments: relevant enough, not already in the window, dated,
        at most `max_fragments` (capped at the config's) and within `budget_tokens`."""
        ranked = await self._rank(thread, query, names, language, now)
        fresh = [c for c in ranked if not any(t.id in exclude_turn_ids for t in c.turns)]
        exchanges = [self._exchange(c, names) for c in fresh[:_FRAGMENT_POOL]]
        wanted = min(max_fragments, self.config.max_fragments)
        return select_fragments(exchanges, budget_tokens, wanted, self.config, self.tokens)

    # ---- ranking ------------------------------------------------------------------------------

    async def _rank(
        self,
        where: Where,
        query: str,
        names: tuple[str, str] | None,
        language: str | None,
        now: datetime | None,
    ) -> list[_Candidate]:
        user_id, character_id, scope = _unpack(where)
        when = time_query(query, now) if now is not None else None
        # The words of "last week" say when, not what: they are not searched for.
        ignore = _name_words(names) | (when.words if when else frozenset())
        terms = query_terms(query, ignore, language, self._stemmers)
        if not terms:
            return []
        store, config = self.store, self.config
        ids, rows = await store.search_exchanges(
            user_id, character_id, scope, terms, config.candidates
        )
        if not ids and config.citation <= 0:
            return []  # (with citations, a fact may still name an exchange in other words)
        candidates = _group(rows)
        scoring = await self._query(terms, candidates, ids, (user_id, character_id, scope))
        for candidate in candidates:
            self._score(candidate, scoring)
        if config.neighbour > 0:
            wanted = _missing_neighbours(candidates, config.neighbour_sources)
            found = await store.exchange_turns(user_id, character_id, scope, wanted)
            for candidate in _group(found):
                self._score(candidate, scoring)
                candidates.append(candidate)
            _spread_to_neighbours(candidates, config.neighbour)
        if config.citation > 0:
            await self._add_cited((user_id, character_id, scope), candidates, scoring)
        months = named_months(query)
        spans = when.spans if when else ()
        if (months or spans) and config.date_boost > 0:
            for candidate in candidates:
                said = candidate.turns[0].created_at
                if in_months(said, months) or any(span.holds(said) for span in spans):
                    candidate.bm25 *= 1 + config.date_boost
        candidates = [c for c in candidates if c.bm25 > 0]
        candidates.sort(key=lambda c: (-c.bm25, -c.first_id))
        return candidates

    async def _query(
        self,
        terms: list[Term],
        candidates: list[_Candidate],
        ids: list[int],
        where: tuple[int, str, str | None],
    ) -> _Query:
        """The terms with their IDF over the thread, and its average exchange length."""
        patterns = [term.pattern() for term in terms]
        if len(ids) < self.config.candidates:
            # Every turn holding a term is among the candidates: count here, not in the index.
            counts = _document_counts(patterns, [t for c in candidates for t in c.turns], ids)
        else:
            counts = await self.store.search_term_counts(*where, terms)
        n_turns, n_chars = await self._thread_stats(*where)
        # The stats are cached and the counts are not: a term in more turns than the cached
        # total means the thread grew since, so refresh them. Left stale, that IDF would go
        # negative (and a negative score raised to a fractional power is complex: ranking
        # crashed the reply). The clamp stays as the last guard.
        if max(counts, default=0) > n_turns:
            self._stats.pop(where, None)
            n_turns, n_chars = await self._thread_stats(*where)
        n_turns = max([n_turns, *counts])
        # An exchange is about two turns long; lengths are measured in characters.
        average = max(2.0 * n_chars / max(n_turns, 1), 1.0)
        idf = [math.log(1 + (n_turns - df + 0.5) / (df + 0.5)) for df in counts]
        return _Query(terms, patterns, idf, average)

    def _score(self, candidate: _Candidate, query: _Query) -> None:
        texts = [fold(t.text) for t in candidate.turns if t.role != "tool"]
        # One string per exchange: a newline never joins two words, so the patterns find
        # exactly what they would in each turn alone, with one search per term.
        length = sum(len(text) for text in texts)
        candidate.bm25, candidate.score = self._match("\n".join(texts), length, query)

    def _match(self, text: str, length: int, query: _Query) -> tuple[float, float]:
        """(bm25, share of the query's IDF matched) of folded `text`, `length` characters long,
        as one document."""
        k1, b = self.config.k1, self.config.b
        norm = k1 * (1 - b + b * length / query.average)
        total = matched = 0.0
        for term, pattern, weight in zip(query.terms, query.patterns, query.idf, strict=True):
            # The substring test is cheap and rules out most pairs before the regex runs.
            freq = len(pattern.findall(text)) if term.stem in text else 0
            part = freq * (k1 + 1) / (freq + norm) if freq else 0.0
            total += weight * part
            matched += weight * min(part, 1.0)
        score = matched / sum(query.idf) if sum(query.idf) > 0 else 0.0
        # Matching more of the query counts beyond what the sum gives (Lucene's "coord").
        return total * score**self.config.coverage_power, score

    async def _add_cited(
        self, where: tuple[int, str, str | None], candidates: list[_Candidate], query: _Query
    ) -> None:
        """Exchanges cited by a fact or summary claim that matches the query gain a share of
        the claim's score: memory's own words about them are found too (memory/search/cited.py)."""
        best: dict[int, tuple[float, float]] = {}
        for claim in await known_claims(self.store, *where, self.config.journey_citations):
            text = fold(claim.text)
            bm25, score = self._match(text, len(text), query)
            for turn_id in claim.turn_ids if bm25 > 0 else ():
                best[turn_id] = max(best.get(turn_id, (0.0, 0.0)), (bm25, score))
        present = {turn.id for c in candidates for turn in c.turns}
        found = await self.store.exchange_turns(*where, sorted(set(best) - present)) if best else []
        for candidate in _group(found):
            self._score(candidate, query)
            candidates.append(candidate)
        share = self.config.citation
        for candidate in candidates:
            bm25, score = max(best.get(t.id, (0.0, 0.0)) for t in candidate.turns)
            candidate.bm25 += share * bm25
            candidate.score = max(candidate.score, share * score)

    async def _thread_stats(
        self, user_id: int, character_id: str, scope: str | None
    ) -> tuple[int, int]:
        """(turns, characters) of the thread, cached for a while: they move slowly."""
        key = (user_id, character_id, scope)
        now = time.monotonic()
        cached = self._stats.get(key)
        if cached is not None and now - cached[0] < self.config.stats_ttl_seconds:
            return cached[1], cached[2]
        n_turns, n_chars = await self.store.thread_text_stats(user_id, character_id, scope)
        if len(self._stats) > 4096:
            self._stats.clear()
        self._stats[key] = (now, n_turns, n_chars)
        return n_turns, n_chars

    @staticmethod
    def _exchange(candidate: _Candidate, names: tuple[str, str] | None) -> Exchange:
        user, character = names or ("User", "Character")
        shown = [t for t in candidate.turns if t.role != "tool"]
        # In a scene each line says who said it; elsewhere the two are the user and character.
        text = "\n".join(
            witnessed(t) if t.speaker else f"{user if t.role == 'user' else character}: {t.text}"
            for t in shown
        )
        return Exchange(
            turn_ids=tuple(t.id for t in shown),
            when=shown[0].created_at,
            text=text,
            score=round(candidate.score, 4),
            bm25=round(candidate.bm25, 4),
        )


def select_fragments(
    ranked: list[Exchange],
    budget_tokens: int,
    wanted: int,
    config: RankConfig,
    tokens: TokenEstimator,
    mask: Callable[[str], str] = mask_credentials,
) -> list[Fragment]:
    """The fragments among `ranked` (best first): none unless one of the best hits passes the
    gate; then those above the threshold and the floor relative to the best hit, at most
    `wanted`, within the budget. Pure, so the bench can fit the constants
    without querying again (`mask` hides credentials; the bench's fit remembers its answers)."""
    if not ranked or max(e.score for e in ranked[: config.max_fragments]) < config.gate:
        return []
    floor = config.relative * ranked[0].bm25
    chosen: list[Fragment] = []
    used = 0
    for exchange in ranked:
        if len(chosen) >= wanted or exchange.bm25 < floor:
            break
        if exchange.score < config.threshold:
            continue
        # Credentials stay in the user's log but are never recalled into a prompt; masked here,
        # for the few exchanges looked at, and before the cost is counted.
        exchange = replace(exchange, text=mask(exchange.text))
        # Counted as memory/engine/prompt.py renders it, so the renderer never has to drop one.
        cost = tokens.count(f"[{exchange.when:%Y-%m-%d}] {exchange.text}")
        if used + cost > budget_tokens:
            continue  # a long exchange must not crowd out shorter relevant ones
        chosen.append(Fragment(exchange.turn_ids, exchange.when, exchange.text))
        used += cost
    return chosen


def _unpack(where: Where) -> tuple[int, str, str | None]:
    if isinstance(where, Thread):
        return where.user_id, where.character_id, where.scope
    user_id, character_id = where
    return user_id, character_id, None


def _name_words(names: Iterable[str] | None) -> frozenset[str]:
    return frozenset(word for name in names or () for word in words(name))


def _group(rows: list[tuple[int, int | None, int | None, Turn]]) -> list[_Candidate]:
    by_first: dict[int, _Candidate] = {}
    for first_id, next_id, previous_id, turn in rows:
        candidate = by_first.get(first_id)
        if candidate is None:
            candidate = by_first[first_id] = _Candidate(first_id, next_id, previous_id, [])
        candidate.turns.append(turn)
    return [c for c in by_first.values() if any(t.role != "tool" for t in c.turns)]


def _document_counts(
    patterns: list[re.Pattern[str]], turns: list[Turn], matched_ids: list[int]
) -> list[int]:
    """In how many of the matched turns each term occurs: the same document frequencies as
    the store's search_term_counts, when the matched turns are all there are."""
    matched = set(matched_ids)
    texts = [fold(t.text) for t in turns if t.id in matched]
    return [sum(1 for text in texts if pattern.search(text)) for pattern in patterns]


def _missing_neighbours(candidates: list[_Candidate], sources: int) -> list[int]:
    """A turn of each exchange next to one of the `sources` best candidates and not yet there."""
    present = {turn.id for c in candidates for turn in c.turns}
    best = sorted(candidates, key=lambda c: -c.bm25)[:sources]
    wanted = {i for c in best for i in (c.next_id, c.previous_id) if i is not None}
    return sorted(wanted - present)


def _spread_to_neighbours(candidates: list[_Candidate], share: float) -> None:
    """An exchange next to a strong match often holds the rest of the story (the answer to the
    question asked in it, the detail given just before), so it inherits part of its score;
    the share of the query it matches (`score`) follows, so the fragment threshold can weigh it."""
    by_first = {c.first_id: c for c in candidates}
    before = {c.next_id: c for c in candidates if c.next_id is not None}
    base = {c.first_id: (c.bm25, c.score) for c in candidates}
    for candidate in candidates:
        neighbours = [by_first.get(candidate.next_id or -1), before.get(candidate.first_id)]
        bm25, score = max((base[n.first_id] for n in neighbours if n is not None), default=(0, 0))
        own_bm25, own_score = base[candidate.first_id]
        candidate.bm25 = own_bm25 + share * bm25
        candidate.score = max(own_score, share * score)
