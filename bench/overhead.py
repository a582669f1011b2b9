"""The bot's own work per message against the size of the store: 10^3, 10^5 and 10^6 turns.

Stores are built by bench/store_builder.py (the real schema and triggers, realistic rows, 10,000
users, threads of 40-160 turns) and cached under the temp folder by size; each measurement runs
on a fresh copy. The engine is the real one (`open_app` on that copy, `Companion.handle`), with
an LLM that answers at once, so what is timed is the bot's own per-message work: the user look-up,
the session (restored from the store when it is not in RAM), the user turn write (FTS5 trigger
included), automatic retrieval, the prompt rendering, the usage row, the reply turn and its
sources. Background compactions the messages trigger are let finish between samples, untimed.

Per store size, three distributions:
- cold: the session is not in RAM (dropped with `forget_cached` before the message): the first
  one of each thread opens a new conversation (the last ended hours ago), later ones restore
  the open conversation, as after a restart;
- warm: the next message of the same thread, its session in RAM;
- first touch: one message each from threads never touched in this process (SQLite's page
  cache has none of their pages), where the store has enough threads.
Cold and warm use the same `--threads` threads (8 by default) for `--rounds` rounds in every
store, so their history grows the same way whatever the store size: only the size differs.

Usage: .venv/bin/python bench/overhead.py [--sizes 1e3,1e5,1e6] [--rounds 25] [--threads 8]
       [--json] [--backend postgres [--database-url URL]]

With `--backend postgres` every size is measured on SQLite and then on a PostgreSQL copy of the
same store (made by `companion db copy`'s code on a throwaway server, or on --database-url),
and the p95s are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.backends import BACKENDS, Databases, add_backend_arguments  # noqa: E402
from bench.common import distribution_ms, emit  # noqa: E402
from bench.load_common import (  # noqa: E402
    CURRENT,
    FixedLatencyLLM,
    MessageTiming,
    add_common_arguments,
    bench_settings,
    characters_with_retrieval,
    closing_lines,
    load_average,
    time_store_calls,
)
from bench.scripted_llm import BenchClock  # noqa: E402
from bench.store_builder import (  # noqa: E402
    CACHE_DIR,
    REFERENCE,
    Built,
    Words,
    cached_store,
    working_copy,
)
from bot.app import App, open_app  # noqa: E402
from memory.models import Incoming  # noqa: E402
from memory.store import open_store  # noqa: E402
from memory.store.copy import copy_deployment  # noqa: E402
from tests.pg_server import running_server  # noqa: E402

RATIO_TARGET = 2.0
FIRST_TOUCH = 200  # messages from never-touched threads, where the store has them
Thread = tuple[int, str]  # (user id, character id)


class Samples:
    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.store: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def add(self, mode: str, timing: MessageTiming, e2e: float) -> None:
        self.seconds[mode].append(e2e - timing.llm_seconds)
        for method, spent in timing.store_seconds.items():
            self.store[mode][method] += spent

    def top_store(self, mode: str, count: int = 6) -> dict[str, float]:
        """Mean ms per message inside each Store method, the biggest first."""
        n = max(len(self.seconds[mode]), 1)
        ranked = sorted(self.store[mode].items(), key=lambda item: -item[1])[:count]
        return {method: round(spent / n * 1000, 3) for method, spent in ranked}


def label(size: int) -> str:
    exponent = math.log10(size)
    return f"1e{round(exponent)}" if exponent == round(exponent) else str(size)


def threads_of(path: Path) -> list[Thread]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT DISTINCT user_id, character_id FROM conversations ORDER BY 1, 2")
        return [(int(user), str(character)) for user, character in rows]


async def message(app: App, clock: BenchClock, thread: Thread, text: str) -> tuple[Any, float]:
    user_id, character_id = thread
    incoming = Incoming(
        "bench", f"user-{user_id}", f"User {user_id}", "dm", f"dm-{user_id}", character_id, text
    )
    timing = MessageTiming()
    token = CURRENT.set(timing)
    started = time.perf_counter()
    try:
        reply = await app.companion.handle(incoming)
    finally:
        CURRENT.reset(token)
    e2e = time.perf_counter() - started
    if not reply.ok:
        raise RuntimeError(f"the engine apologised to user {user_id}")
    # One second per message keeps every sampled conversation inside the inactivity timeout.
    clock.advance(timedelta(seconds=1))
    await app.companion.drain()  # a compaction this message started: finished, untimed
    return timing, e2e


async def on_postgres(path: Path, server: str) -> str:
    """A PostgreSQL copy of the SQLite store at `path` (`companion db copy`'s own code)."""
    databases = Databases("postgres", path.parent, server)
    url = str(await databases.fresh("overhead"))
    source, target = await open_store(path, migrate=False), await open_store(url)
    try:
        await copy_deployment(source, target)
    finally:
        await source.close()
        await target.close()
    return url


async def sample(
    built: Built,
    rounds: int,
    sampled: int,
    first_touch: int,
    folder: Path,
    retrieval: str | None,
    server: str | None = None,
) -> dict[str, Any]:
    path = working_copy(built, folder)
    threads = threads_of(path)
    url = await on_postgres(path, server) if server else None
    rng = random.Random(11)
    chosen = rng.sample(threads, min(sampled, len(threads)))
    rest = [t for t in threads if t not in set(chosen)]
    untouched = rng.sample(rest, min(first_touch, len(rest)))
    words = Words(random.Random(5), pool=2000)
    clock = BenchClock(REFERENCE)
    samples = Samples()
    settings = bench_settings(
        path, characters_dir=characters_with_retrieval(folder, retrieval), database_url=url
    )
    async with open_app(
        settings, llm=FixedLatencyLLM(0.0), clock=clock, start_scheduler=False
    ) as app:
        time_store_calls(app.store)
        await app.companion.drain()  # the start-up extraction sweep: nothing is pending
        for _ in range(rounds):
            for thread in chosen:
                app.companion.forget_cached(*thread)
                samples.add("cold", *await message(app, clock, thread, words.text(2)))
                samples.add("warm", *await message(app, clock, thread, words.text(2)))
        for thread in untouched:
            samples.add("first_touch", *await message(app, clock, thread, words.text(2)))
    path.unlink()
    return {
        mode: distribution_ms(seconds) | {"store_ms_by_method": samples.top_store(mode)}
        for mode, seconds in samples.seconds.items()
    }


def run(
    sizes: Sequence[int] = (1000, 100_000, 1_000_000),
    rounds: int = 25,
    threads: int = 8,
    first_touch: int = FIRST_TOUCH,
    cache_dir: Path = CACHE_DIR,
    retrieval: str | None = None,
    server: str | None = None,
) -> dict[str, Any]:
    """Every size on SQLite, or (with `server`, a PostgreSQL base URL) on a PostgreSQL copy
    of the same store."""
    started = time.perf_counter()
    result: dict[str, Any] = {"path": "companion.handle", "rounds": rounds, "threads": threads}
    result["load_average_1m_before"] = load_average()
    result["retrieval"] = retrieval or "as in characters/"
    result["stores"] = {}
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as folder:
        for size in sizes:
            built = cached_store(size, cache_dir)
            measured = asyncio.run(
                sample(built, rounds, threads, first_touch, Path(folder), retrieval, server)
            )
            result["stores"][label(size)] = {
                "turns": size,
                "cached": built.cached,
                "build_seconds": built.build_seconds,
                "counts": built.counts,
                "file_mb": round(built.path.stat().st_size / 1e6, 1),
                **measured,
            }
            for mode in ("cold", "warm"):
                suffix = "" if mode == "cold" else "_warm"
                result[f"p50_ms{suffix}_{label(size)}"] = measured[mode]["p50"]
                result[f"p95_ms{suffix}_{label(size)}"] = measured[mode]["p95"]
    add_ratios(result, sizes)
    result["load_average_1m_after"] = load_average()
    result["run_seconds"] = round(time.perf_counter() - started, 2)
    return result


def add_ratios(result: dict[str, Any], sizes: Sequence[int]) -> None:
    """The biggest store against the smallest, cold (the headline) and warm."""
    small, big = label(min(sizes)), label(max(sizes))
    result["targets"] = {}
    if small == big:
        return
    for suffix in ("", "_warm"):
        ratio = result[f"p95_ms{suffix}_{big}"] / max(result[f"p95_ms{suffix}_{small}"], 1e-9)
        result[f"ratio{suffix}_{big}_vs_{small}"] = round(ratio, 3)
        name = f"ratio{suffix}_{big}_vs_{small} (p95) <= {RATIO_TARGET}"
        result["targets"][name] = ratio <= RATIO_TARGET
        # The medians too: a p95 of 200 samples moves with whatever else runs on the machine.
        median = result[f"p50_ms{suffix}_{big}"] / max(result[f"p50_ms{suffix}_{small}"], 1e-9)
        result[f"ratio_p50{suffix}_{big}_vs_{small}"] = round(median, 3)


def format_table(result: dict[str, Any]) -> str:
    lines = [
        f"Per-message overhead via {result['path']} (instant LLM); cold/warm: "
        f"{result['threads']} threads x {result['rounds']} rounds per store; retrieval: "
        f"{result['retrieval']}",
        "",
        " store | threads | file MB | build s      | mode        |   n |  p50 ms |  p95 ms |"
        "  p99 ms | biggest Store methods, mean ms/message",
    ]
    for name, store in result["stores"].items():
        build = f"{store['build_seconds']:.1f}{' (cached)' if store['cached'] else ''}"
        for mode in ("cold", "warm", "first_touch"):
            if mode not in store:
                continue
            d = store[mode]
            top = ", ".join(f"{m} {v:.2f}" for m, v in list(d["store_ms_by_method"].items())[:4])
            lines.append(
                f"{name:>6} | {store['counts']['threads']:>7} | {store['file_mb']:>7.1f} | "
                f"{build:<12} | {mode:<11} | {d['n']:>3} | {d['p50']:>7.2f} | {d['p95']:>7.2f} | "
                f"{d['p99']:>7.2f} | {top}"
            )
    lines.append("")
    for key, value in result.items():
        if key.startswith("ratio"):
            lines.append(f"{key}: {value}")
    lines += closing_lines(result)
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e3,1e5,1e6", help="turns per store, e.g. 1e3,1e6")
    parser.add_argument("--rounds", type=int, default=25, help="cold+warm rounds per thread")
    parser.add_argument("--threads", type=int, default=8, help="threads sampled per store")
    add_common_arguments(parser)
    add_backend_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(float(part)) for part in args.sizes.split(",") if part.strip()]
    if args.backend == "sqlite":
        result = run(sizes, args.rounds, args.threads, retrieval=args.retrieval)
        emit(result, format_table(result), args.json)
        return 0
    both = {"sqlite": run(sizes, args.rounds, args.threads, retrieval=args.retrieval)}
    with ExitStack() as stack:
        server = args.database_url or stack.enter_context(running_server())
        both["postgres"] = run(sizes, args.rounds, args.threads, retrieval=args.retrieval,
                               server=server)  # fmt: skip
    both["postgres_vs_sqlite_p95"] = {
        key: round(both["postgres"][key] / max(both["sqlite"][key], 1e-9), 2)
        for key in both["sqlite"]
        if key.startswith("p95_ms")
    }
    table = "\n\n".join(f"== {name}\n{format_table(both[name])}" for name in BACKENDS)
    ratios = ", ".join(f"{k} {v}x" for k, v in both["postgres_vs_sqlite_p95"].items())
    emit(both, f"{table}\n\npostgres/sqlite p95: {ratios}", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
