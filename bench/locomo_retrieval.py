"""Evidence recall of `Retriever.search` on LoCoMo: does recall bring back the turns that answer?

    python bench/locomo_retrieval.py DATA_PATH [--json] [--fit-share 0.3] [--loo | --fit]
        [--no-memory] [--summary-versions] [--journey] [--backend postgres]

Each conversation is written into its own user's turn log through the real `Store`, on a
temporary SQLite file: speaker_a is the user, speaker_b the character, one stored conversation
per session, dated from `session_N_date_time` (a minute per line). After each session, unless
`--no-memory`, what the product's extraction and compaction would have kept is stored too: the
user's facts citing their evidence turns and the thread's one rolling summary citing turns,
drawn from LoCoMo's own `observation` and `session_summary` (never from the QA annotations) and
passed through the product's gate, planning and trimming code; bench/locomo_memory.py says
exactly what stands in for what. Every question of categories 1-4 is then searched for, with
the two speakers' names passed as the Retriever's `names`.

- recall@k: share of a question's evidence turns inside the top k exchanges; averaged per
  question.
- recall in 600 tokens: exchanges taken in rank order while their text fits 600 tokens
  (TokenEstimator; the first that does not fit ends the list).
- fragment recall: the same for `Retriever.fragments` (threshold, at most 5, 600 tokens), and
  the share of foreign questions (the next conversation's) that still get a fragment: the
  threshold's false alarms.

The first `--fit-share` of the conversations is the FIT split, the only one the ranking
constants were chosen on (`--fit` prints the grid search); figures are reported for the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.backends import add_backend_arguments, databases
from bench.locomo import load_conversations
from bench.locomo_journey import JourneyTally
from bench.locomo_load import CATEGORIES, Loaded, load
from bench.locomo_memory import EverySummary, MemoryMode, MemoryTally
from bench.locomo_report import journey_lever, side_by_side, table
from memory.engine.tokens import TokenEstimator
from memory.integrity.credentials import mask_credentials
from memory.search.cited import RecallStore
from memory.search.retrieval import Exchange, RankConfig, Retriever, select_fragments
from memory.store import open_store

BUDGET = 600
POOL = 50  # exchanges fetched per question: enough for every metric below
# --fit and --loo: the highest foreign-fragment rate a fitted setting may have. The target is
# 0.05; on held-out conversations the rate has run up to twice the FIT split's, hence 0.03.
ALARM = 0.03
_DIA = re.compile(r"D(\d+):(\d+)")


@dataclass
class Outcome:
    category: int
    evidence: set[int]
    ranked: list[Exchange]
    ms: float
    foreign: list[Exchange] = field(default_factory=list)


def _evidence_ids(raw: list[str], turn_of: dict[str, int]) -> set[int]:
    """Evidence ids as turn ids. The data has a few malformed ids ("D8:6; D9:17", "D:11:26") and
    some that name no line; those that cannot be resolved are left out."""
    found = set()
    for item in raw:
        for number, line in _DIA.findall(item.replace("D:", "D")):
            turn = turn_of.get(f"D{number}:{line}")
            if turn is not None:
                found.add(turn)
    return found


async def evaluate(retriever: Retriever, loaded: Loaded, foreign: Loaded | None) -> list[Outcome]:
    outcomes = []
    foreign_questions = foreign.questions if foreign else []
    for index, qa in enumerate(loaded.questions):
        evidence = _evidence_ids(qa.get("evidence", []), loaded.turn_of)
        if not evidence:
            continue
        started = time.perf_counter()
        ranked = await retriever.search(
            loaded.thread, str(qa["question"]), POOL, names=loaded.names
        )
        ms = (time.perf_counter() - started) * 1000
        outcome = Outcome(int(qa["category"]), evidence, ranked, ms)
        if foreign_questions:
            question = str(foreign_questions[index % len(foreign_questions)]["question"])
            outcome.foreign = await retriever.search(
                loaded.thread, question, POOL, names=loaded.names
            )
        outcomes.append(outcome)
    return outcomes


def _recall(evidence: set[int], exchanges: Sequence[Exchange] | Sequence[Any]) -> float:
    covered = {turn for exchange in exchanges for turn in exchange.turn_ids}
    return len(evidence & covered) / len(evidence)


def _within(ranked: list[Exchange], budget: int, tokens: TokenEstimator) -> list[Exchange]:
    kept, used = [], 0
    for exchange in ranked:
        used += tokens.count(exchange.text)
        if used > budget:
            break
        kept.append(exchange)
    return kept


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def _mean(values: Any) -> float:
    return round(statistics.fmean(values), 4)


def _figures(
    group: list[Outcome],
    config: RankConfig,
    tokens: TokenEstimator,
    mask: Callable[[str], str] = mask_credentials,
) -> dict[str, Any]:
    def fragments(ranked: list[Exchange]) -> list[Any]:
        return select_fragments(ranked, BUDGET, config.max_fragments, config, tokens, mask)

    recalled = [fragments(o.ranked) for o in group]
    asked_elsewhere = any(o.foreign for o in group)
    return {
        "questions": len(group),
        "recall_at_5": _mean(_recall(o.evidence, o.ranked[:5]) for o in group),
        "recall_at_10": _mean(_recall(o.evidence, o.ranked[:10]) for o in group),
        "recall_600_tokens": _mean(
            _recall(o.evidence, _within(o.ranked, BUDGET, tokens)) for o in group
        ),
        "fragment_recall": _mean(
            _recall(o.evidence, f) for o, f in zip(group, recalled, strict=True)
        ),
        "fragments_per_question": round(statistics.fmean(len(f) for f in recalled), 2),
        "foreign_fragment_rate": _mean(bool(fragments(o.foreign)) for o in group)
        if asked_elsewhere
        else None,
    }


def summarise(outcomes: list[Outcome], config: RankConfig) -> dict[str, Any]:
    if not outcomes:
        return {"questions": 0}
    tokens = TokenEstimator()
    result = _figures(outcomes, config, tokens)
    latencies = [o.ms for o in outcomes]
    result["search_p50_ms"] = round(statistics.median(latencies), 2)
    result["search_p95_ms"] = round(_percentile(latencies, 0.95), 2)
    result["by_category"] = {
        CATEGORIES[c]: _figures([o for o in outcomes if o.category == c], config, tokens)
        for c in CATEGORIES
        if any(o.category == c for o in outcomes)
    }
    return result


def fit_count(conversations: int, share: float) -> int:
    """How many leading conversations form the FIT split: none for a share of 0, else at least
    one, and never all of them when there are two or more."""
    if conversations < 2 or share <= 0:
        return 0  # --fit-share 0: nothing set aside, every conversation is reported on
    return min(max(round(share * conversations), 1), conversations - 1)


async def collect(
    path: Path,
    config: RankConfig | None,
    database: str | Path | None = None,
    tally: MemoryTally | None = None,
    versions: bool = False,
) -> list[tuple[str, list[Outcome]]]:
    """Load every conversation into one empty database (a temporary SQLite file unless
    `database` names one), with its memory when given a `tally`, and search every question."""
    return (await collect_each(path, [config or RankConfig()], database, tally, versions))[0]


async def collect_each(
    path: Path,
    configs: Sequence[RankConfig],
    database: str | Path | None = None,
    tally: MemoryTally | None = None,
    versions: bool = False,
    journey: JourneyTally | None = None,
) -> list[list[tuple[str, list[Outcome]]]]:
    """`collect` once per config over one load; with `journey`, each session is chronicled
    too (bench/locomo_journey.py), so the configs can differ in lending it to search."""
    data = load_conversations(path)
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(database or Path(folder) / "locomo.db")
        try:
            loaded = [await load(store, item, tally, journey) for item in data]
            recall: RecallStore = EverySummary(store) if versions else store
            runs = []
            for config in configs:
                retriever = Retriever(recall, TokenEstimator(), config)
                results = []
                for index, conversation in enumerate(loaded):
                    foreign = loaded[(index + 1) % len(loaded)] if len(loaded) > 1 else None
                    outcomes = await evaluate(retriever, conversation, foreign)
                    results.append((conversation.sample_id, outcomes))
                runs.append(results)
        finally:
            await store.close()
    return runs


async def run(
    path: Path,
    fit_share: float,
    config: RankConfig | None = None,
    database: str | Path | None = None,
    mode: MemoryMode | None = None,
) -> dict[str, Any]:
    config, mode = config or RankConfig(), mode or MemoryMode()
    tally = MemoryTally() if mode.memory else None
    journey = JourneyTally() if mode.journey else None
    # With the journey: recall as configured, then with the journey's lending flipped.
    configs = [config, replace(config, journey_citations=not config.journey_citations)]
    runs = await collect_each(
        path, configs[: 2 if journey else 1], database, tally, mode.versions, journey
    )
    results = runs[0]
    cut = fit_count(len(results), fit_share)
    fit, held = results[:cut], results[cut:]
    report = summarise([o for _, outcomes in held for o in outcomes], config)
    report["held_out_conversations"] = [sample for sample, _ in held]
    report["fit"] = summarise([o for _, outcomes in fit for o in outcomes], config)
    report["fit_conversations"] = [sample for sample, _ in fit]
    report["config"] = asdict(config)
    report["memory"] = asdict(tally) if tally else None
    report["summary_versions"] = mode.versions
    if journey is not None:  # the recall lever: the same questions without and with it lent
        figures = {
            (split, lent.journey_citations): summarise(
                [o for _, outcomes in run_[part] for o in outcomes], lent
            )
            for lent, run_ in zip(configs, runs, strict=True)
            for split, part in (("held_out", slice(cut, None)), ("fit", slice(0, cut)))
        }
        report["journey"] = journey_lever(figures, journey.statuses, journey.calls)
    return report


def fit_fragments(outcomes: list[Outcome], config: RankConfig, max_alarm: float) -> RankConfig:
    """The fragment gate, threshold and relative floor, offline (no new searches): among the
    settings whose foreign questions get a fragment at most `max_alarm` of the time, those
    within one point of the best fragment recall; of these, the one injecting the fewest."""
    tokens = TokenEstimator()
    mask = functools.cache(mask_credentials)  # the same exchanges, for every setting tried
    trials = []
    for gate in [x / 20 for x in range(6, 17)]:
        for threshold in [x / 20 for x in range(2, 13) if x / 20 <= gate]:
            for relative in [x / 10 for x in range(0, 8)]:
                trial = replace(config, gate=gate, threshold=threshold, relative=relative)
                figures = _figures(outcomes, trial, tokens, mask)
                if (figures["foreign_fragment_rate"] or 0.0) <= max_alarm:
                    trials.append(
                        (figures["fragment_recall"], figures["fragments_per_question"], trial)
                    )
    if not trials:
        return config
    best = max(recall for recall, _, _ in trials)
    return min((t for t in trials if t[0] >= best - 0.01), key=lambda t: t[1])[2]


def leave_one_out(
    results: list[tuple[str, list[Outcome]]], config: RankConfig, max_alarm: float
) -> dict[str, Any]:
    """Leave-one-conversation-out: each conversation's fragments are chosen with the threshold
    and floor fitted (`fit_fragments`) on all the others; the ranking has no constant fitted
    per run, so its recall is the same as over every conversation. Figures pooled by question."""
    pooled: list[Outcome] = []
    fragments: list[float] = []
    alarms: list[bool] = []
    chosen: dict[str, tuple[float, float, float]] = {}
    tokens = TokenEstimator()
    mask = functools.cache(mask_credentials)
    for index, (sample, outcomes) in enumerate(results):
        others = [o for j, (_, group) in enumerate(results) if j != index for o in group]
        fitted = fit_fragments(others, config, max_alarm)
        chosen[sample] = (fitted.gate, fitted.threshold, fitted.relative)
        for outcome in outcomes:
            picked = select_fragments(
                outcome.ranked, BUDGET, fitted.max_fragments, fitted, tokens, mask
            )
            fragments.append(_recall(outcome.evidence, picked))
            if outcome.foreign:
                foreign = select_fragments(
                    outcome.foreign, BUDGET, fitted.max_fragments, fitted, tokens, mask
                )
                alarms.append(bool(foreign))
        pooled += outcomes
    report = summarise(pooled, config)
    report["fragment_recall"] = _mean(fragments) if fragments else None
    report["foreign_fragment_rate"] = _mean(alarms) if alarms else None
    report["fitted_gate_threshold_relative"] = chosen
    return report


def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """The data path, --json and --fit-share: the same in every bench over this split."""
    parser.add_argument("data", type=Path, help="LoCoMo JSON (locomo10.json or a cut of it)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--fit-share", type=float, default=0.3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_split_arguments(parser)
    parser.add_argument("--fit", action="store_true", help="fit the fragment threshold on FIT")
    add_backend_arguments(parser)
    parser.add_argument(
        "--loo", action="store_true", help="leave-one-conversation-out over every conversation"
    )
    parser.add_argument(
        "--no-memory",
        action="store_true",
        help="the turns only: no facts nor summary (bench/locomo_memory.py)",
    )
    parser.add_argument(
        "--journey",
        action="store_true",
        help="chronicle each session (bench/locomo_journey.py) and report recall without and "
        "with the journey's citations lent to search",
    )
    parser.add_argument(
        "--summary-versions",
        action="store_true",
        help="recall through every stored summary version, not the latest only (a probe)",
    )
    args = parser.parse_args(argv)
    mode = MemoryMode(not args.no_memory, args.summary_versions, args.journey)
    if args.loo:
        tally = MemoryTally() if mode.memory else None
        results = asyncio.run(collect(args.data, RankConfig(), None, tally, mode.versions))
        report = leave_one_out(results, RankConfig(), ALARM)
        report["memory"] = asdict(tally) if tally else None
        report.pop("by_category")
        print(json.dumps(report) if args.json else json.dumps(report, indent=1))
        return 0
    if args.fit:
        tally = MemoryTally() if mode.memory else None
        results = asyncio.run(collect(args.data, RankConfig(), None, tally, mode.versions))
        fit = results[: fit_count(len(results), args.fit_share)]
        chosen = fit_fragments([o for _, outcomes in fit for o in outcomes], RankConfig(), ALARM)
        print(f"gate={chosen.gate} threshold={chosen.threshold} relative={chosen.relative}")
        return 0
    if args.backend == "postgres":
        reports = asyncio.run(on_both_backends(args.data, args.fit_share, args.database_url, mode))
        if args.json:
            print(json.dumps(reports))
        else:
            print(side_by_side(reports))
        return 0
    report = asyncio.run(run(args.data, args.fit_share, mode=mode))
    print(json.dumps(report) if args.json else table(report))
    if "journey" in report and not args.json:
        print(f"journey: {json.dumps(report['journey'])}")
    return 0


async def on_both_backends(
    path: Path, fit_share: float, server: str | None, mode: MemoryMode | None = None
) -> dict[str, Any]:
    """The same questions over SQLite FTS5 and PostgreSQL full-text search, in one run."""
    reports = {"sqlite": await run(path, fit_share, mode=mode)}
    async with databases("postgres", server) as postgres:
        database = await postgres.fresh("locomo")
        reports["postgres"] = await run(path, fit_share, None, database, mode)
    return reports


if __name__ == "__main__":
    raise SystemExit(main())
