"""Whether the purge after a forget finishes under steady traffic, and what it costs a writer.

On a fresh copy of bench/store_builder.py's store per run, one user writes a turn every
0.1-0.4 s (uniform, seeded) while another user (a different one each run, the largest
first) forgets their memory with one character; the purge then runs in the background as the
bot runs it. Per run: the seconds from the forget until nothing is pending, and the longest
of the writer's turn appends during the purge (its stall; the appends that waited on the
forget's own delete, which is the user's request and not the purge, are reported apart as
forget_stall_ms_max). Printed: a table, or one JSON line with
--json: purge_seconds_under_traffic_p95 (target <= 30), writer_stall_ms_max (target <= 250),
and the SQLite version.

Usage: .venv/bin/python bench/purge_traffic.py [--turns 1e5] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    store: SqliteStore, conversation: Conversation, rng: random.Random, stop: asyncio.Event,
    stalls: list[float],
) -> None:  # fmt: skip
    """A user's turns at random intervals, each append timed."""
    n = 0
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(0.1, 0.4))
        started = time.perf_counter()
        await store.add_turn(conversation, "user", f"La frase numero {n} del escritor", NOW)
        stalls.append(time.perf_counter() - started)
        n += 1


async def one_run(path: Path, rank: int, seed: int) -> dict[str, Any]:
    """Forget the `rank`-th largest thread's user with its character under the writer."""
    store = await SqliteStore.open(path)
    try:
        rows = await store._execute(
            "SELECT user_id, character_id, count(*) FROM turns GROUP BY 1, 2"
            " ORDER BY 3 DESC LIMIT 1 OFFSET ?",
            (rank,),
        )
        [(user_id, character_id, turns)] = rows
        [(other,)] = await store._execute(
            "SELECT user_id FROM turns WHERE user_id != ? LIMIT 1", (user_id,)
        )
        conversation = await store.start_conversation(Thread(other, character_id, "dm"), NOW)
        stop, stalls = asyncio.Event(), []
        writer = asyncio.create_task(
            _writer(store, conversation, random.Random(seed), stop, stalls)
        )
        await asyncio.sleep(0.5)  # the writer under way before the forget
        before = len(stalls)
        started = time.perf_counter()
        await store.forget(user_id, character_id)
        forgotten = len(stalls)  # the writes that waited on the forget's own delete end here
        settled = await store.purge_settled(timeout=PURGE_LIMIT_SECONDS)
        seconds = time.perf_counter() - started
        during_forget, during = stalls[before : forgotten + 1], stalls[forgotten + 1 :]
        stop.set()
        await writer
        return {
            "deleted_turns": turns,
            "purge_seconds": round(seconds, 2),
            "purge_settled": settled,
            "writes_during_purge": len(during),
            "writer_stall_ms_max": round(max(during, default=0.0) * 1000, 1),
            "forget_stall_ms_max": round(max(during_forget, default=0.0) * 1000, 1),
        }
    finally:
        await store.close()


def summary(turns: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = sorted(run["purge_seconds"] for run in runs)
    # p95 of a handful of runs is their largest but for 20 runs or more.
    p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))]
    return {
        "bench": "purge_traffic",
        "sqlite_version": sqlite3.sqlite_version,
        "turns": turns,
        "runs": len(runs),
        "purge_seconds_under_traffic_p95": p95,
        "purge_all_settled": all(run["purge_settled"] for run in runs),
        "writer_stall_ms_max": max(run["writer_stall_ms_max"] for run in runs),
        "forget_stall_ms_max": max(run["forget_stall_ms_max"] for run in runs),
        "per_run": runs,
    }


async def measure(turns: int, runs: int, seed: int = 7) -> dict[str, Any]:
    built = await asyncio.to_thread(cached_store, turns)  # it runs its own event loop
    results = []
    for rank in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            results.append(await one_run(working_copy(built, Path(folder)), rank, seed + rank))
    return summary(turns, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1e5", help="turns in the store")
    parser.add_argument("--runs", type=int, default=5, help="forgets, each on a fresh copy")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(int(float(args.turns)), args.runs))
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"SQLite {result['sqlite_version']}, {result['turns']:,} turns")
    print("run  deleted turns  purge s  settled  writes meanwhile  writer stall max ms  forget")
    for i, run in enumerate(result["per_run"]):
        print(
            f"{i:<4} {run['deleted_turns']:>13} {run['purge_seconds']:>8} "
            f"{run['purge_settled']!s:>8} {run['writes_during_purge']:>17} "
            f"{run['writer_stall_ms_max']:>20} {run['forget_stall_ms_max']:>7}"
        )
    print(
        f"purge_seconds_under_traffic_p95 {result['purge_seconds_under_traffic_p95']} "
        f"(target <= 30); writer_stall_ms_max {result['writer_stall_ms_max']} (target <= 250)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
