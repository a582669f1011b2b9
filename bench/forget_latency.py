"""What a forget costs the user who asks and everyone else, on bench/overhead.py's stores.

Per store size, on a fresh copy each time, the user with the most turns forgets their memory
with one character while a second user's store calls run in a loop:
- before: the delete, then 'optimize' (a merge of everyone's index into one segment) and the
  checkpoint, on the user's path, as forget ran until issue 13;
- after: `Store.forget` (the delete and the purge's record in one transaction), then the purge
  in the background, in steps of `PURGE_STEP_PAGES` pages.
Printed: the user's wait, the time until the purge is complete, and the longest wait of the
other user's store calls meanwhile (what "forget stalls everyone" measured).

Usage: .venv/bin/python bench/forget_latency.py [--sizes 1e5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.store_builder import cached_store, working_copy  # noqa: E402
from memory.models import Thread  # noqa: E402
from memory.store.sqlite import SqliteStore, fts_index  # noqa: E402


async def _probe(
    store: SqliteStore, thread: Thread, stop: asyncio.Event, waits: list[float]
) -> None:
    """Another user's store calls, one after another, each timed."""
    while not stop.is_set():
        started = time.perf_counter()
        await store.count_turns(thread)
        waits.append(time.perf_counter() - started)
        await asyncio.sleep(0.001)


def _old_purge(store: SqliteStore) -> None:
    fts_index.optimize(store._con)
    store._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def measure(path: Path, mode: str) -> dict[str, Any]:
    store = await SqliteStore.open(path)
    try:
        [(user_id, character_id, turns)] = await store._execute(
            "SELECT user_id, character_id, count(*) FROM turns GROUP BY 1, 2"
            " ORDER BY 3 DESC LIMIT 1"
        )
        [other] = await store._execute(
            "SELECT user_id, character_id, scope FROM turns WHERE user_id != ? LIMIT 1",
            (user_id,),
        )
        stop, waits = asyncio.Event(), []
        prober = asyncio.create_task(_probe(store, Thread(*other), stop, waits))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        if mode == "before":
            await store._forget_rows(user_id, character_id)
            await store._run_alone(_old_purge, store)
        else:
            await store.forget(user_id, character_id)
        user_wait = time.perf_counter() - started
        assert await store.purge_settled(timeout=600) or mode == "before"
        complete = time.perf_counter() - started
        stop.set()
        await prober
        return {
            "mode": mode,
            "deleted_turns": turns,
            "user_wait_ms": round(user_wait * 1000, 1),
            "purge_complete_ms": round(complete * 1000, 1),
            "other_user_longest_wait_ms": round(max(waits) * 1000, 1),
        }
    finally:
        await store.close()


async def main(sizes: list[int], as_json: bool) -> None:
    results = []
    for size in sizes:
        built = await asyncio.to_thread(cached_store, size)  # it runs its own event loop
        for mode in ("before", "after"):
            with tempfile.TemporaryDirectory() as folder:
                row = await measure(working_copy(built, Path(folder)), mode)
            results.append({"turns": size, **row})
    if as_json:
        print(json.dumps(results, indent=1))
        return
    print("turns     mode    deleted  user wait ms  purge complete ms  other user's max wait ms")
    for r in results:
        print(
            f"{r['turns']:<9} {r['mode']:<7} {r['deleted_turns']:>7} {r['user_wait_ms']:>13}"
            f" {r['purge_complete_ms']:>18} {r['other_user_longest_wait_ms']:>25}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5", help="comma-separated turn counts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    asyncio.run(main([int(float(s)) for s in args.sizes.split(",")], args.json))
