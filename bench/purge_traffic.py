"""Whether the purge after a forget finishes under steady traffic, and what it costs writers.

On a fresh copy of bench/store_builder.py's store per run, `--writers` users each append a turn
after a pause drawn from `--gap-ms LO:HI` (uniform, seeded; default one writer, 100:400 ms, a
chat's pace; `--writers 2 --gap-ms 0:3` is a burst of imports or a busy bot) while another user
(a different one each run, the largest first) forgets their memory with one character; the
purge then runs in the background as the bot runs it. Each run first times the same writers for
`--quiet-seconds` with no forget: the stall they see anyway (the machine, the group commit),
so the purge's cost reads as a ratio too. Per run: the seconds from the forget until nothing is
pending, and the writers' appends during the purge (their stall; the appends that waited on the
forget's own delete, which is the user's request and not the purge, are reported apart as
forget_stall_ms_max). Printed: a table, or one JSON line with --json:
purge_seconds_under_traffic_p95 (target <= 30), writer_stall_ms_p99 and writer_stall_ms_max
(target <= 250) over every append during the purges, quiet_stall_ms_p99 and quiet_stall_ms_max
over the quiet windows, stall_max_ratio (purge max / quiet max), the longest purge step
(purge_step_ms_max) and the SQLite version.

Usage: .venv/bin/python bench/purge_traffic.py [--turns 1e5] [--runs 5] [--writers 1]
       [--gap-ms 100:400] [--quiet-seconds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.store_builder import cached_store, working_copy  # noqa: E402
from memory.models import Conversation, Thread  # noqa: E402
from memory.store.sqlite import SqliteStore  # noqa: E402

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
PURGE_LIMIT_SECONDS = 600.0


async def _writer(
    store: SqliteStore, conversation: Conversation, gap: tuple[float, float],
    rng: random.Random, stop: asyncio.Event, stalls: list[float],
) -> None:  # fmt: skip
    """A user's turns at random intervals, each append timed."""
    n = 0
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(*gap))
        started = time.perf_counter()
        await store.add_turn(conversation, "user", f"La frase numero {n} del escritor", NOW)
        stalls.append(time.perf_counter() - started)
        n += 1


class TimedSteps:
    """The store's purge steps, each timed (how long one step holds the store's thread)."""

    def __init__(self, store: SqliteStore) -> None:
        self.seconds: list[float] = []
        self._step = store._purge_step
        store._purge_step = self  # type: ignore[method-assign]

    async def __call__(self) -> str:
        started = time.perf_counter()
        try:
            return await self._step()
        finally:
            self.seconds.append(time.perf_counter() - started)


async def one_run(
    path: Path, rank: int, seed: int, writers: int, gap: tuple[float, float], quiet: float
) -> dict[str, Any]:
    """Forget the `rank`-th largest thread's user with its character under the writers."""
    store = await SqliteStore.open(path)
    try:
        rows = await store._execute(
            "SELECT user_id, character_id, count(*) FROM turns GROUP BY 1, 2"
            " ORDER BY 3 DESC LIMIT 1 OFFSET ?",
            (rank,),
        )
        [(user_id, character_id, turns)] = rows
        others = await store._execute(
            "SELECT DISTINCT user_id FROM turns WHERE user_id != ? LIMIT ?", (user_id, writers)
        )
        stop, stalls, steps = asyncio.Event(), [], TimedSteps(store)
        tasks = []
        for index, (other,) in enumerate(others):
            conversation = await store.start_conversation(Thread(other, character_id, "dm"), NOW)
            rng = random.Random(seed * 100 + index)
            tasks.append(asyncio.create_task(_writer(store, conversation, gap, rng, stop, stalls)))
        await asyncio.sleep(0.5)  # the writers under way before anything is timed
        begun = len(stalls)
        await asyncio.sleep(quiet)  # no forget: what the writers wait for anyway
        quiet_stalls = stalls[begun:]
        before = len(stalls)
        started = time.perf_counter()
        await store.forget(user_id, character_id)
        forgotten = len(stalls)  # the writes that waited on the forget's own delete end here
        settled = await store.purge_settled(timeout=PURGE_LIMIT_SECONDS)
        seconds = time.perf_counter() - started
        during_forget, during = stalls[before : forgotten + writers], stalls[forgotten + writers :]
        stop.set()
        await asyncio.gather(*tasks)
        return {
            "deleted_turns": turns,
            "purge_seconds": round(seconds, 2),
            "purge_settled": settled,
            "writes_during_purge": len(during),
            "writer_stall_ms_max": _ms(max(during, default=0.0)),
            "forget_stall_ms_max": _ms(max(during_forget, default=0.0)),
            "quiet_stall_ms_max": _ms(max(quiet_stalls, default=0.0)),
            "purge_steps": len(steps.seconds),
            "purge_step_ms_max": _ms(max(steps.seconds, default=0.0)),
            "during": during,
            "quiet": quiet_stalls,
        }
    finally:
        await store.close()


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _p99(values: list[float]) -> float:
    """Nearest rank: the smallest value with at least 99 % of the values at or below it."""
    ordered = sorted(values)
    return _ms(ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]) if ordered else 0.0


def summary(turns: int, runs: list[dict[str, Any]], writers: int, gap_ms: str) -> dict[str, Any]:
    seconds = sorted(run["purge_seconds"] for run in runs)
    # p95 of a handful of runs is their largest but for 20 runs or more.
    p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))]
    during = [s for run in runs for s in run.pop("during")]
    quiet = [s for run in runs for s in run.pop("quiet")]
    stall_max, quiet_max = _ms(max(during, default=0.0)), _ms(max(quiet, default=0.0))
    return {
        "bench": "purge_traffic",
        "sqlite_version": sqlite3.sqlite_version,
        "turns": turns,
        "runs": len(runs),
        "writers": writers,
        "gap_ms": gap_ms,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "purge_seconds_under_traffic_p95": p95,
        "purge_all_settled": all(run["purge_settled"] for run in runs),
        "writes_during_purges": len(during),
        "writer_stall_ms_p99": _p99(during),
        "writer_stall_ms_max": stall_max,
        "quiet_stall_ms_p99": _p99(quiet),
        "quiet_stall_ms_max": quiet_max,
        "stall_max_ratio": round(stall_max / quiet_max, 2) if quiet_max else None,
        "forget_stall_ms_max": max(run["forget_stall_ms_max"] for run in runs),
        "purge_step_ms_max": max(run["purge_step_ms_max"] for run in runs),
        "per_run": runs,
    }


def gap_seconds(text: str) -> tuple[float, float]:
    low, _, high = text.partition(":")
    gap = (float(low) / 1000, float(high or low) / 1000)
    if not 0 <= gap[0] <= gap[1]:
        raise argparse.ArgumentTypeError(f"--gap-ms wants LO:HI with 0 <= LO <= HI, not {text}")
    return gap


async def measure(
    turns: int, runs: int, writers: int = 1, gap_ms: str = "100:400", quiet: float = 3.0,
    seed: int = 7,
) -> dict[str, Any]:  # fmt: skip
    built = await asyncio.to_thread(cached_store, turns)  # it runs its own event loop
    gap = gap_seconds(gap_ms)
    results = []
    for rank in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            copy = working_copy(built, Path(folder))
            results.append(await one_run(copy, rank, seed + rank, writers, gap, quiet))
    return summary(turns, results, writers, gap_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1e5", help="turns in the store")
    parser.add_argument("--runs", type=int, default=5, help="forgets, each on a fresh copy")
    parser.add_argument("--writers", type=int, default=1, help="users appending at once")
    parser.add_argument("--gap-ms", default="100:400", help="each writer's pause, LO:HI ms")
    parser.add_argument(
        "--quiet-seconds", type=float, default=3.0, help="writers timed first with no forget"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    gap_seconds(args.gap_ms)  # a bad range is refused before the store is built
    turns = int(float(args.turns))
    result = asyncio.run(measure(turns, args.runs, args.writers, args.gap_ms, args.quiet_seconds))
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"SQLite {result['sqlite_version']}, {result['turns']:,} turns, {args.writers} writer(s)"
        f" every {args.gap_ms} ms, load {result['load_average_1m']}"
    )
    print("run  deleted turns  purge s  settled  writes meanwhile  stall max ms  quiet  forget")
    for i, run in enumerate(result["per_run"]):
        print(
            f"{i:<4} {run['deleted_turns']:>13} {run['purge_seconds']:>8} "
            f"{run['purge_settled']!s:>8} {run['writes_during_purge']:>17} "
            f"{run['writer_stall_ms_max']:>13} {run['quiet_stall_ms_max']:>6} "
            f"{run['forget_stall_ms_max']:>7}"
        )
    print(
        f"purge_seconds_under_traffic_p95 {result['purge_seconds_under_traffic_p95']} "
        f"(target <= 30); writer stall p99 {result['writer_stall_ms_p99']} max "
        f"{result['writer_stall_ms_max']} (target <= 250); quiet p99 "
        f"{result['quiet_stall_ms_p99']} max {result['quiet_stall_ms_max']}; max ratio "
        f"{result['stall_max_ratio']}; longest purge step {result['purge_step_ms_max']} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
