"""Several ranking settings over LoCoMo in one process: the conversations are loaded once.

    python bench/locomo_levers.py DATA_PATH [--no-memory] [--fit-share 0.3] [--json]
        [--set NAME:field=value,field=value ...]

bench/locomo_retrieval.py loads every conversation (and its memory) for each run, which takes
most of its ten minutes; this loads them once and searches every question with each setting
(the default RankConfig, and each `--set` of RankConfig fields or of the levers of
bench/locomo_spread.py, e.g. `--set spread:session_decay=0.7`). For each, the
report split's figures (fragment constants fitted on the FIT split, as `--fit` would, so a lever
that moves the scores is not judged with constants chosen for another ranking) and the
leave-one-conversation-out figures of bench/locomo_retrieval.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.locomo import load_conversations
from bench.locomo_load import Loaded, load
from bench.locomo_memory import MemoryTally
from bench.locomo_retrieval import (
    ALARM,
    Outcome,
    add_split_arguments,
    evaluate,
    fit_count,
    fit_fragments,
    leave_one_out,
    summarise,
)
from bench.locomo_spread import LeverRetriever, Levers
from memory.engine.tokens import TokenEstimator
from memory.search.cited import RecallStore
from memory.search.retrieval import RankConfig
from memory.store import open_store

KEYS = ("recall_at_5", "recall_at_10", "recall_600_tokens", "fragment_recall")


Setting = tuple[str, RankConfig, Levers]


def parse_setting(text: str) -> Setting:
    """'name:field=value,...' -> (name, RankConfig, Levers): the defaults with those fields,
    each field of either (bench/locomo_spread.py for the levers)."""
    name, _, assignments = text.partition(":")
    made: list[Any] = [RankConfig(), Levers()]
    for assignment in filter(None, assignments.split(",")):
        key, _, value = assignment.partition("=")
        owner = next((i for i, d in enumerate(made) if key in {f.name for f in fields(d)}), None)
        if owner is None:
            raise SystemExit(f"unknown RankConfig or Levers field {key!r}")
        made[owner] = replace(made[owner], **{key: type(getattr(made[owner], key))(value)})
    return name, made[0], made[1]


async def search_all(
    store: RecallStore, loaded: list[Loaded], config: RankConfig, levers: Levers
) -> list[tuple[str, list[Outcome]]]:
    retriever = LeverRetriever(store, TokenEstimator(), config, levers)
    results = []
    for index, conversation in enumerate(loaded):
        foreign = loaded[(index + 1) % len(loaded)] if len(loaded) > 1 else None
        results.append((conversation.sample_id, await evaluate(retriever, conversation, foreign)))
    return results


def figures(
    results: list[tuple[str, list[Outcome]]], config: RankConfig, fit_share: float, loo: bool
) -> dict[str, Any]:
    cut = fit_count(len(results), fit_share)
    fit = [o for _, outcomes in results[:cut] for o in outcomes]
    held = [o for _, outcomes in results[cut:] for o in outcomes]
    fitted = fit_fragments(fit, config, ALARM) if fit else config
    report = summarise(held, fitted)
    picked = {k: report[k] for k in (*KEYS, "foreign_fragment_rate", "search_p95_ms")}
    picked["multi_hop_r10"] = report["by_category"].get("multi-hop", {}).get("recall_at_10")
    picked["fragments"] = (fitted.gate, fitted.threshold, fitted.relative)
    if not loo:  # the ranking's LOO recall is its recall over every conversation
        everything = summarise([o for _, outcomes in results for o in outcomes], config)
        picked["all"] = {k: everything[k] for k in KEYS[:3]}
        fitting = summarise(fit, fitted)
        picked["fit"] = {k: fitting[k] for k in KEYS}
        return picked
    out = leave_one_out(results, config, ALARM)
    picked["loo"] = {k: out[k] for k in (*KEYS, "foreign_fragment_rate", "search_p95_ms")}
    return picked


async def run(path: Path, memory: bool, settings: list[Setting], share: float, loo: bool) -> None:
    data = load_conversations(path)
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / "locomo.db")
        try:
            tally = MemoryTally() if memory else None
            started = time.perf_counter()
            loaded = [await load(store, item, tally) for item in data]
            print(f"loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            for name, config, levers in settings:
                started = time.perf_counter()
                results = await search_all(store, loaded, config, levers)
                searched = time.perf_counter() - started
                found = figures(results, config, share, loo)
                print(json.dumps({"setting": name, **found}), flush=True)
                print(
                    f"searched in {searched:.0f} s, figures in "
                    f"{time.perf_counter() - started - searched:.0f} s",
                    file=sys.stderr,
                )
        finally:
            await store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_split_arguments(parser)
    parser.add_argument("--no-memory", action="store_true", help="the turns only")
    parser.add_argument("--loo", action="store_true", help="fit fragments leaving one out")
    parser.add_argument("--set", action="append", default=[], help="name:field=value,...")
    args = parser.parse_args(argv)
    settings = [("default", RankConfig(), Levers()), *map(parse_setting, args.set)]
    asyncio.run(run(args.data, not args.no_memory, settings, args.fit_share, args.loo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
