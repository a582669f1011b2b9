"""Levers tried for questions whose answer was said in several sessions (issue 18), as a probe.

BM25 ranks exchanges one by one; a question whose evidence is spread over sessions ("what
martial arts has John done?") needs one exchange from each. Three levers, applied after the
product's ranking (`LeverRetriever._rank` calls `Retriever._rank` first, so with every lever off
it ranks exactly as the product does):
- `session_decay` (`spread_sessions`): the n-th best exchange of a session keeps decay ** n of
  its score, so the best exchange of each session comes before the third of one (MMR-like);
- `feedback_terms` (`feedback_words`, `LeverRetriever._follow`): pseudo-relevance feedback, the
  best hit's words that the query lacks (with several `feedback_sources`, the words shared by
  at least two of the best hits), searched again; their BM25 times `feedback_weight` is added to
  the exchanges of the other sessions (of the other exchanges, with several sources);
- `session_share` (`support_sessions`): the opposite of spreading, an exchange gains a share of
  the best score among the other exchanges of its session.
None raised recall@10 on the report split by 0.01 (docs/memory.md, "Details from long ago"),
so none is in memory/search/; bench/locomo_levers.py measures them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.engine.tokens import TokenEstimator
from memory.search.cited import RecallStore
from memory.search.retrieval import (
    RankConfig,
    Retriever,
    Where,
    _Candidate,
    _group,
    _name_words,
    _Query,
    _unpack,
)
from memory.search.terms import STOP_WORDS, Term, fold, language_of, query_terms, stem, words
from memory.search.when import time_query


@dataclass(frozen=True, slots=True)
class Levers:
    session_decay: float = 1.0  # 1: off
    session_share: float = 0.0  # 0: off
    feedback_terms: int = 0  # 0: off
    feedback_weight: float = 0.3
    feedback_sources: int = 1


def session_of(candidate: _Candidate) -> int:
    return candidate.turns[0].conversation_id


def spread_sessions(ranked: Sequence[_Candidate], decay: float) -> list[_Candidate]:
    """`ranked` (best first) with each score times `decay` to the power of the number of better
    exchanges from the same session, re-sorted. The penalty depends only on an exchange's rank
    within its own session, so one pass and one sort give the greedy MMR order."""
    if decay >= 1.0:
        return list(ranked)
    taken: Counter[int] = Counter()
    for item in ranked:
        item.bm25 *= decay ** taken[session_of(item)]
        taken[session_of(item)] += 1
    return sorted(ranked, key=lambda item: -item.bm25)  # stable: ties keep their order


def support_sessions(ranked: Sequence[_Candidate], share: float) -> None:
    """Each exchange gains `share` of the best score among the other exchanges of its session."""
    if share <= 0:
        return
    best: dict[int, list[float]] = {}
    for item in ranked:
        top = best.setdefault(session_of(item), [0.0, 0.0])  # the session's two best scores
        if item.bm25 > top[0]:
            top[0], top[1] = item.bm25, top[0]
        elif item.bm25 > top[1]:
            top[1] = item.bm25
    for item in ranked:
        first, second = best[session_of(item)]
        item.bm25 += share * (second if item.bm25 >= first else first)


def feedback_words(
    texts: Sequence[str], known: frozenset[str], stem_of: Callable[[str], str], limit: int
) -> list[str]:
    """Up to `limit` words of `texts` (the strong hits) to search for besides the query's:
    alphabetic, four letters or more, not stop words, not `known` (the query's words and the
    names); with several texts, only those in at least two of them (the topic, not one hit's
    details); those in the most texts first, then the longest (rarer, more often a thing)."""
    seen: dict[str, str] = {}
    found_in: Counter[str] = Counter()
    for text in texts:
        stems = set()
        for word in words(text):
            if len(word) < 4 or not word.isalpha() or word in STOP_WORDS or word in known:
                continue
            key = stem_of(word)
            seen.setdefault(key, word)
            stems.add(key)
        found_in.update(stems)
    least = min(len(texts), 2)
    kept = [key for key, count in found_in.items() if count >= least]
    kept.sort(key=lambda key: (-found_in[key], -len(seen[key]), key))
    return [seen[key] for key in kept[:limit]]


class LeverRetriever(Retriever):
    """The product's Retriever, then the levers on its ranking."""

    def __init__(
        self, store: RecallStore, tokens: TokenEstimator, config: RankConfig, levers: Levers
    ) -> None:
        super().__init__(store, tokens, config)
        self.levers = levers

    async def _rank(
        self,
        where: Where,
        query: str,
        names: tuple[str, str] | None,
        language: str | None,
        now: datetime | None,
    ) -> list[_Candidate]:
        ranked = await super()._rank(where, query, names, language, now)
        levers = self.levers
        support_sessions(ranked, levers.session_share)
        ranked.sort(key=lambda c: (-c.bm25, -c.first_id))
        if levers.feedback_terms > 0 and ranked:
            when = time_query(query, now) if now is not None else None
            ignore = _name_words(names) | (when.words if when else frozenset())
            known = ignore | {t.word for t in query_terms(query, ignore, language)}
            await self._follow(_unpack(where), ranked, known, language_of(query, language))
            ranked = [c for c in ranked if c.bm25 > 0]
            ranked.sort(key=lambda c: (-c.bm25, -c.first_id))
        return spread_sessions(ranked, levers.session_decay)

    async def _follow(
        self,
        where: tuple[int, str, str | None],
        candidates: list[_Candidate],
        known: frozenset[str],
        language: str | None,
    ) -> None:
        """Pseudo-relevance feedback: the feedback words that occur elsewhere but not widely,
        rarest first, searched in the thread; their BM25 adds to the other exchanges' scores."""
        levers = self.levers
        sources = candidates[: levers.feedback_sources]
        texts = ["\n".join(t.text for t in c.turns if t.role != "tool") for c in sources]
        found = feedback_words(texts, known, lambda w: stem(w, language, self._stemmers), 24)
        extra = [Term.of(word, language, self._stemmers) for word in found]
        if not extra:
            return
        counts = await self.store.search_term_counts(*where, extra)
        n_turns, n_chars = await self._thread_stats(*where)
        # A word said only in the hit finds nothing elsewhere; a common one finds noise.
        useful = sorted(
            ((df, t) for df, t in zip(counts, extra, strict=True) if 2 <= df <= n_turns / 20),
            key=lambda pair: pair[0],
        )[: levers.feedback_terms]
        if not useful:
            return
        chosen = [term for _, term in useful]
        idf = [math.log(1 + (n_turns - df + 0.5) / (df + 0.5)) for df, _ in useful]
        average = max(2.0 * n_chars / max(n_turns, 1), 1.0)
        expansion = _Query(chosen, [t.pattern() for t in chosen], idf, average)
        _, rows = await self.store.search_exchanges(*where, chosen, self.config.candidates // 2)
        present = {c.first_id for c in candidates}
        candidates += [c for c in _group(rows) if c.first_id not in present]
        own = {session_of(sources[0])} if len(sources) == 1 else set()
        for candidate in candidates:
            if candidate in sources or session_of(candidate) in own:
                continue
            texts = [fold(t.text) for t in candidate.turns if t.role != "tool"]
            bm25, _ = self._match("\n".join(texts), sum(map(len, texts)), expansion)
            candidate.bm25 += levers.feedback_weight * bm25
