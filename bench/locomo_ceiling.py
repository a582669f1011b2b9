"""Why lexical recall stops where it does: which evidence turns share no word with the question.

    python bench/locomo_ceiling.py DATA_PATH [--json] [--fit-share 0.3] [--no-memory]

The conversations are loaded exactly as bench/locomo_retrieval.py loads them (bench/locomo_load,
with the memory of bench/locomo_memory unless `--no-memory`), every question of the report split
is searched with the product's `Retriever.search`, and each evidence turn is checked against the
question's terms as the product reads them: `query_terms` (the speakers' names ignored, Snowball
stems as prefixes) matched with each term's own pattern on folded text, as BM25 matches it.

A turn is counted at three levels, each a superset of the one before:
- turn: its own text;
- exchange: the exchange holding it, the unit BM25 scores and the bench counts;
- memory: that exchange, or a fact or summary claim citing one of its turns (recall reaches an
  exchange through the claims that cite it, memory/search/cited.py).
At each level: the share of evidence turns sharing no term with the question (no BM25 variant
over that text can rank them by the query; only neighbour spreading can still lift them), the
share sharing exactly one term, the same shares among the turns the product misses at k=10, and
the recall@10 of an oracle lexical ranker: the question's evidence exchanges sharing at least one
term at that level first, then the product's ranking. A question's evidence is "multi-hop" when it
spans several sessions. `zero_overlap_evidence_share` and `lexical_oracle_recall_at_10` are the
memory level, the product's own reach.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.locomo import load_conversations
from bench.locomo_load import CATEGORIES, Loaded, load
from bench.locomo_memory import MemoryTally
from bench.locomo_retrieval import POOL, _evidence_ids, _recall, add_split_arguments, fit_count
from memory.engine.tokens import TokenEstimator
from memory.models import Turn
from memory.search.cited import known_claims
from memory.search.retrieval import Exchange, Retriever, _group, _name_words
from memory.search.terms import Stemmers, Term, fold, query_terms
from memory.store import MemoryStore, open_store

LEVELS = ("turn", "exchange", "memory")
K = 10
_SESSION = re.compile(r"D:?(\d+):\d+")


@dataclass(frozen=True, slots=True)
class EvidenceTurn:
    """One evidence turn of one question: the query terms it shares at each level, and where
    the product ranked its exchange (None: not among the POOL exchanges searched)."""

    turn_id: int
    exchange: tuple[int, ...]  # the shown turn ids of its exchange, as Exchange.turn_ids
    shared: dict[str, int]  # level -> distinct query terms found there
    rank: int | None


@dataclass(frozen=True, slots=True)
class Question:
    category: str
    multi_hop: bool  # evidence in more than one session
    terms: int
    evidence: list[EvidenceTurn]
    recall: float  # the product's recall@K
    oracle: dict[str, float]  # level -> the oracle ranker's recall@K


@dataclass(frozen=True, slots=True)
class Indexed:
    """What the check needs of one loaded conversation besides its questions."""

    loaded: Loaded
    exchange_of: dict[int, tuple[Turn, ...]]  # turn id -> the turns of its exchange
    cited_by: dict[int, list[str]]  # turn id -> folded texts of the claims citing it


def _shared(terms: list[tuple[Term, re.Pattern[str]]], text: str) -> int:
    return sum(1 for term, pattern in terms if term.stem in text and pattern.search(text))


async def _thread(store: MemoryStore, loaded: Loaded) -> Indexed:
    where = loaded.thread
    rows = await store.exchange_turns(
        where.user_id, where.character_id, where.scope, sorted(loaded.turn_of.values())
    )
    exchange_of: dict[int, tuple[Turn, ...]] = {}
    for candidate in _group(rows):
        shown = tuple(t for t in candidate.turns if t.role != "tool")
        exchange_of |= {turn.id: shown for turn in shown}
    cited_by: dict[int, list[str]] = {}
    for claim in await known_claims(store, where.user_id, where.character_id, where.scope):
        for turn_id in claim.turn_ids:
            cited_by.setdefault(turn_id, []).append(fold(claim.text))
    return Indexed(loaded, exchange_of, cited_by)


def _evidence_turn(
    thread: Indexed, turn_id: int, terms: list[tuple[Term, re.Pattern[str]]], ranked: list[Exchange]
) -> EvidenceTurn:
    turns = thread.exchange_of[turn_id]
    own = next(t for t in turns if t.id == turn_id)
    exchange = _shared(terms, "\n".join(fold(t.text) for t in turns))
    claims = [text for t in turns for text in thread.cited_by.get(t.id, [])]
    memory = max([exchange, *(_shared(terms, text) for text in claims)])
    rank = next((i for i, e in enumerate(ranked) if turn_id in e.turn_ids), None)
    shared = {"turn": _shared(terms, fold(own.text)), "exchange": exchange, "memory": memory}
    return EvidenceTurn(turn_id, tuple(t.id for t in turns), shared, rank)


def _oracle(
    evidence: set[int], turns: list[EvidenceTurn], ranked: list[Exchange], level: str
) -> float:
    """Recall@K when the evidence exchanges sharing a term at `level` come first."""
    first = list(dict.fromkeys(t.exchange for t in turns if t.shared[level] > 0))
    rest = [e.turn_ids for e in ranked if e.turn_ids not in first]
    covered = {turn for exchange in (first + rest)[:K] for turn in exchange}
    return len(evidence & covered) / len(evidence)


async def _questions(retriever: Retriever, thread: Indexed) -> list[Question]:
    loaded, stemmers = thread.loaded, Stemmers()
    ignore = _name_words(loaded.names)
    found = []
    for qa in loaded.questions:
        evidence = _evidence_ids(qa.get("evidence", []), loaded.turn_of)
        if not evidence:
            continue
        text = str(qa["question"])
        ranked = await retriever.search(loaded.thread, text, POOL, names=loaded.names)
        terms = [(t, t.pattern()) for t in query_terms(text, ignore, None, stemmers)]
        turns = [_evidence_turn(thread, turn, terms, ranked) for turn in sorted(evidence)]
        sessions = {s for raw in qa.get("evidence", []) for s in _SESSION.findall(raw)}
        oracle = {level: _oracle(evidence, turns, ranked, level) for level in LEVELS}
        category = CATEGORIES[int(qa["category"])]
        recall = _recall(evidence, ranked[:K])
        found.append(Question(category, len(sessions) > 1, len(terms), turns, recall, oracle))
    return found


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _level(level: str, turns: list[EvidenceTurn]) -> dict[str, Any]:
    missed = [t for t in turns if t.rank is None or t.rank >= K]
    zero = [t for t in missed if t.shared[level] == 0]
    return {
        "zero_share": _share(sum(t.shared[level] == 0 for t in turns), len(turns)),
        "one_share": _share(sum(t.shared[level] == 1 for t in turns), len(turns)),
        "zero_share_of_misses": _share(len(zero), len(missed)),
        "one_share_of_misses": _share(sum(t.shared[level] == 1 for t in missed), len(missed)),
        # Found all the same: neighbour spreading, dates or (below memory level) citations.
        "zero_found_at_10": sum(t.shared[level] == 0 for t in turns) - len(zero),
    }


def figures(questions: list[Question]) -> dict[str, Any]:
    """Every figure over these questions; evidence-turn shares count each (question, turn)."""
    if not questions:
        return {"questions": 0}
    turns = [t for q in questions for t in q.evidence]
    missed = [(q, t) for q in questions for t in q.evidence if t.rank is None or t.rank >= K]
    reachable = [t for _, t in missed if t.shared["memory"] > 0]
    levels = {level: _level(level, turns) for level in LEVELS}
    return {
        "questions": len(questions),
        "evidence_turns": len(turns),
        "missed_at_10": len(missed),
        "recall_at_10": round(statistics.fmean(q.recall for q in questions), 4),
        "zero_overlap_evidence_share": levels["memory"]["zero_share"],
        "lexical_oracle_recall_at_10": round(
            statistics.fmean(q.oracle["memory"] for q in questions), 4
        ),
        "oracle_recall_at_10": {
            level: round(statistics.fmean(q.oracle[level] for q in questions), 4)
            for level in LEVELS
        },
        "levels": levels,
        "multi_hop_share_of_evidence": _share(
            sum(len(q.evidence) for q in questions if q.multi_hop), len(turns)
        ),
        "multi_hop_share_of_misses": _share(sum(q.multi_hop for q, _ in missed), len(missed)),
        # Misses a lexical ranker could still reach: how far down the product put them.
        "reachable_misses": len(reachable),
        "reachable_misses_ranked_11_to_50": sum(t.rank is not None for t in reachable),
        "mean_query_terms": round(statistics.fmean(q.terms for q in questions), 2),
    }


def summarise(questions: list[Question]) -> dict[str, Any]:
    report = figures(questions)
    names = [name for name in CATEGORIES.values() if any(q.category == name for q in questions)]
    report["by_category"] = {
        name: figures([q for q in questions if q.category == name]) for name in names
    }
    report["miss_share_by_category"] = {
        name: _share(part["missed_at_10"], report["missed_at_10"])
        for name, part in report["by_category"].items()
    }
    return report


async def measure(path: Path, fit_share: float, memory: bool = True) -> dict[str, Any]:
    data = load_conversations(path)
    tally = MemoryTally() if memory else None
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / "locomo.db")
        try:
            loaded = [await load(store, item, tally) for item in data]
            cut = fit_count(len(loaded), fit_share)
            retriever = Retriever(store, TokenEstimator())
            questions = []
            for conversation in loaded[cut:]:
                questions += await _questions(retriever, await _thread(store, conversation))
        finally:
            await store.close()
    report = summarise(questions)
    report["held_out_conversations"] = [c.sample_id for c in loaded[cut:]]
    report["memory"] = memory
    return report


def table(report: dict[str, Any]) -> str:
    if not report["questions"]:
        return "no question with evidence in the report split"
    rows = [f"{'':22}{'zero':>8}{'one':>8}{'zero|miss':>11}{'one|miss':>10}{'oracle@10':>11}"]
    for level in LEVELS:
        part = report["levels"][level]
        cells = [part[k] for k in ("zero_share", "one_share", "zero_share_of_misses")]
        cells += [part["one_share_of_misses"], report["oracle_recall_at_10"][level]]
        rows.append(
            f"{level:22}"
            + "".join(f"{c!s:>{w}}" for c, w in zip(cells, (8, 8, 11, 10, 11), strict=True))
        )
    rows.append(
        f"product R@10 {report['recall_at_10']} ({report['questions']} questions, "
        f"{report['evidence_turns']} evidence turns, {report['missed_at_10']} missed at 10); "
        f"multi-hop: {report['multi_hop_share_of_evidence']} of evidence turns, "
        f"{report['multi_hop_share_of_misses']} of misses"
    )
    rows.append(
        f"misses sharing a term at memory level: {report['reachable_misses']}, of which "
        f"{report['reachable_misses_ranked_11_to_50']} ranked 11-{POOL}"
    )
    for name, part in report["by_category"].items():
        rows.append(
            f"  {name:12} R@10 {part['recall_at_10']:<7} "
            f"zero {part['zero_overlap_evidence_share']!s:<7}"
            f" oracle {part['lexical_oracle_recall_at_10']!s:<7} share of misses "
            f"{report['miss_share_by_category'][name]}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_split_arguments(parser)
    parser.add_argument("--no-memory", action="store_true", help="the turns only, as the bench's")
    args = parser.parse_args(argv)
    report = asyncio.run(measure(args.data, args.fit_share, not args.no_memory))
    print(json.dumps(report) if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
