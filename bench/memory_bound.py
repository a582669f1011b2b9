"""Resident memory after many different users have chatted: idle sessions are evicted, RSS stays
bounded by MAX_SESSIONS_IN_RAM.

`--users` different users (10,000) each send `--messages` messages (2) through
`app.commands.chat`, `--concurrency` users at a time, against the real engine (`open_app`, a
SQLite file in a temporary folder, the repo's characters) and the fake LLM of
bench/load_common.py with a short latency. This is done once per session cap (`--caps`: the
default 2,000 and 10,000 for comparison), each in a fresh Python process, so that one run's heap
cannot inflate the other's RSS. Every tenth of the users the child records VmRSS,
`companion.sessions_in_ram`, and the sizes of the per-user maps that are not sessions (the rate
limiter's, the session locks'), read defensively: they are private and may change.

Per-session RAM = (RSS at cap 10,000 - RSS at cap 2,000) / (sessions difference).

Usage: .venv/bin/python bench/memory_bound.py [--users 10000] [--messages 2] [--caps 2000,10000]
       [--concurrency 200] [--latency 0.01] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.common import emit  # noqa: E402
from bench.load_common import (  # noqa: E402
    FixedLatencyLLM,
    add_common_arguments,
    answered_as_child,
    bench_settings,
    caller,
    characters_with_retrieval,
    closing_lines,
    load_average,
    numbers,
    rss_mb,
    run_child,
    user_line,
)
from bot.app import App, open_app  # noqa: E402

DEFAULT_CAP = 2000


def private(root: object, *path: str) -> Any:
    """A private attribute chain, or None when the engine no longer has it."""
    target: object = root
    for name in path:
        target = getattr(target, name, None)
        if target is None:
            return None
    return target


def private_size(root: object, *path: str) -> int | None:
    target = private(root, *path)
    return len(target) if hasattr(target, "__len__") else None


def mapping_kb(mapping: object) -> float | None:
    """Shallow size of a dict and of its keys and values (a deque of floats: its own size
    plus the floats), in KB."""
    if not isinstance(mapping, dict):
        return None
    total = sys.getsizeof(mapping)
    for key, value in mapping.items():
        total += sys.getsizeof(key) + sys.getsizeof(value)
        if isinstance(value, deque):
            total += sum(sys.getsizeof(item) for item in value)
    return round(total / 1024, 1)


def checkpoint(app: App, users_done: int) -> dict[str, Any]:
    gc.collect()
    rss, peak = rss_mb()
    return {
        "users": users_done,
        "rss_mb": round(rss, 1),
        "rss_peak_mb": round(peak, 1),
        "sessions_in_ram": app.companion.sessions_in_ram,
        "session_locks": private_size(app.companion, "_sessions", "_locks"),
        "rate_limiter_keys": private_size(app.commands, "_rate", "_hits"),
        "rate_limiter_kb": mapping_kb(private(app.commands, "_rate", "_hits")),
    }


async def chat_all(
    users: int,
    messages: int,
    cap: int,
    concurrency: int,
    latency: float,
    retrieval: str | None,
    folder: Path,
) -> dict[str, Any]:
    settings = bench_settings(
        folder / f"memory-{cap}.db",
        max_sessions_in_ram=cap,
        characters_dir=characters_with_retrieval(folder, retrieval),
    )
    gate = asyncio.Semaphore(concurrency)
    failures = 0

    async def one_user(index: int) -> None:
        nonlocal failures
        async with gate:
            for message in range(messages):
                answer = await app.commands.chat(caller(index), user_line(index, message))
                failures += 0 if answer.ok else 1

    async with open_app(settings, llm=FixedLatencyLLM(latency), start_scheduler=False) as app:
        await app.companion.drain()
        points = [checkpoint(app, 0)]
        step = max(users // 10, 1)
        started = time.perf_counter()
        for first in range(0, users, step):
            batch = range(first, min(first + step, users))
            await asyncio.gather(*(one_user(i) for i in batch))
            points.append(checkpoint(app, batch[-1] + 1))
        seconds = time.perf_counter() - started
        await app.companion.drain()
    return {
        "cap": cap,
        "users": users,
        "messages_per_user": messages,
        "failed_answers": failures,
        "chat_seconds": round(seconds, 2),
        "baseline_rss_mb": points[0]["rss_mb"],
        "checkpoints": points,
        "final": points[-1],
    }


def child(argv: list[str]) -> dict[str, Any]:
    """Run one cap in this process (the parent starts one process per cap)."""
    users, messages, cap, concurrency = (int(v) for v in argv[:4])
    latency, retrieval = float(argv[4]), None if argv[5] == "-" else argv[5]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as folder:
        return asyncio.run(
            chat_all(users, messages, cap, concurrency, latency, retrieval, Path(folder))
        )


def run_cap(
    users: int,
    messages: int,
    cap: int,
    concurrency: int,
    latency: float,
    retrieval: str | None,
    isolate: bool,
) -> dict[str, Any]:
    args = [str(v) for v in (users, messages, cap, concurrency, latency, retrieval or "-")]
    if not isolate:
        return child(args)
    return run_child(__file__, args, f"cap {cap}")


def run(
    users: int = 10_000,
    messages: int = 2,
    caps: Sequence[int] = (DEFAULT_CAP, 10_000),
    concurrency: int = 200,
    latency: float = 0.01,
    isolate: bool = True,
    retrieval: str | None = None,
) -> dict[str, Any]:
    """One fresh process per cap (isolate=False runs them here: quicker, for tests)."""
    started = time.perf_counter()
    result: dict[str, Any] = {"path": "app.commands.chat", "runs": {}}
    result["retrieval"] = retrieval or "as in characters/"
    result["load_average_1m_before"] = load_average()
    for cap in caps:
        one = run_cap(users, messages, cap, concurrency, latency, retrieval, isolate)
        result["runs"][str(cap)] = one
        result[f"rss_mb_after_{users}_users_cap_{cap}"] = one["final"]["rss_mb"]
        result[f"sessions_in_ram_cap_{cap}"] = one["final"]["sessions_in_ram"]
    headline = str(DEFAULT_CAP if DEFAULT_CAP in caps else caps[0])
    result[f"rss_mb_after_{users}_users"] = result["runs"][headline]["final"]["rss_mb"]
    result["sessions_in_ram"] = result["runs"][headline]["final"]["sessions_in_ram"]
    add_per_session(result)
    result["load_average_1m_after"] = load_average()
    result["run_seconds"] = round(time.perf_counter() - started, 2)
    return result


def add_per_session(result: dict[str, Any]) -> None:
    finals = sorted(
        (r["final"] for r in result["runs"].values()), key=lambda f: f["sessions_in_ram"]
    )
    if len(finals) >= 2 and finals[-1]["sessions_in_ram"] > finals[0]["sessions_in_ram"]:
        extra_mb = finals[-1]["rss_mb"] - finals[0]["rss_mb"]
        extra_sessions = finals[-1]["sessions_in_ram"] - finals[0]["sessions_in_ram"]
        result["kb_per_session_in_ram"] = round(extra_mb * 1024 / extra_sessions, 2)


def format_table(result: dict[str, Any]) -> str:
    first = next(iter(result["runs"].values()))
    lines = [
        f"Memory bound via {result['path']}: {first['users']} different users x "
        f"{first['messages_per_user']} messages, one process per MAX_SESSIONS_IN_RAM; "
        f"retrieval: {result['retrieval']}",
        "",
        "   cap |  users | RSS MB | vs start | sessions in RAM | session locks | rate-limiter"
        " keys / KB",
    ]
    for cap, r in result["runs"].items():
        for point in r["checkpoints"]:
            lines.append(
                f"{cap:>6} | {point['users']:>6} | {point['rss_mb']:>6.1f} | "
                f"{point['rss_mb'] - r['baseline_rss_mb']:>+8.1f} | "
                f"{point['sessions_in_ram']:>15} | {point['session_locks']!s:>13} | "
                f"{point['rate_limiter_keys']!s:>6} / {point['rate_limiter_kb']!s}"
            )
        lines.append(
            f"       cap {cap}: {r['chat_seconds']} s of chat, {r['failed_answers']} failed answers"
        )
    lines.append("")
    if "kb_per_session_in_ram" in result:
        lines.append(f"RAM per session kept: {result['kb_per_session_in_ram']} KB")
    lines += closing_lines(result)
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=2)
    parser.add_argument("--caps", default=f"{DEFAULT_CAP},10000", help="MAX_SESSIONS_IN_RAM values")
    parser.add_argument("--concurrency", type=int, default=200, help="users chatting at once")
    parser.add_argument("--latency", type=float, default=0.01, help="fake LLM latency, seconds")
    add_common_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if answered_as_child(argv, child):
        return 0
    args = parse_args(argv)
    caps = numbers(args.caps, int)
    result = run(
        args.users,
        args.messages,
        caps,
        args.concurrency,
        args.latency,
        retrieval=args.retrieval,
    )
    emit(result, format_table(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
