"""Messages per second with many concurrent users, against a fake LLM of fixed latency.

Every user is a coroutine that sends `--messages` messages one after the other, each waiting for
its answer, through `app.commands.chat(Caller, text)`: the path every adapter takes (arrival-order
gate, character look-up, limits, then `Companion.handle`). All users start together (or spread
over `--ramp` seconds). Each user comes back: `--history` turns of an earlier conversation,
ended and summarised, are stored first, so every message runs automatic recall over a real turn
log. The engine is the real one (`open_app`: a Store on a SQLite file in a temporary folder, the
repo's characters, the Summariser, the profile extractor); only the LLM is in-process
(bench/load_common.py): it sleeps `--latency` with asyncio and answers briefly, and valid
minimal tool calls for summary and extraction requests. Every run has a fresh process.

Figures, per user count:
- achieved messages/s = answered messages / wall time (first send to last answer);
- ideal = users / latency: every user's messages are sequential, so with a free bot each user
  completes one message per latency;
- overhead per message = end-to-end time of `chat()` minus the time spent inside the fake LLM
  for that message's reply (measured inside the fake, around its sleep). The fake's own wake-up
  delay (how late the busy loop resumed its sleep) is therefore counted as LLM time; the column
  "e2e - latency" subtracts only the nominal latency, so it also charges that delay to the bot;
- store: time inside Store methods per message (the wait for the database thread included).

`--sweep 1,2,4` adds a capacity table: the biggest user count again at each of those latencies,
starts spread over one latency (steady arrivals instead of one burst), and the highest load
that meets both targets.

Usage: .venv/bin/python bench/throughput.py [--users 100,1000] [--messages 5]
       [--latency 0.5] [--ramp 0] [--history 24] [--sweep 1,2,4,6] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.common import distribution_ms, emit  # noqa: E402
from bench.load_common import (  # noqa: E402
    CURRENT,
    FixedLatencyLLM,
    MessageTiming,
    add_common_arguments,
    answered_as_child,
    bench_settings,
    caller,
    characters_with_retrieval,
    count_round_trips,
    load_average,
    numbers,
    rss_mb,
    run_child,
    seed_history,
    time_store_calls,
    user_line,
)
from bench.throughput_report import format_table  # noqa: E402
from bot.app import App, open_app  # noqa: E402
from bot.runner import settle_garbage_collector  # noqa: E402

SHARE_TARGET, OVERHEAD_P99_TARGET_MS = 0.90, 20.0


@dataclass(frozen=True)
class Sample:
    e2e: float
    llm: float
    store: float
    ok: bool


@dataclass
class Outcome:
    samples: list[Sample]
    errors: Counter[str]


async def one_user(app: App, index: int, messages: int, delay: float, outcome: Outcome) -> None:
    who = caller(index)
    await asyncio.sleep(delay)
    for message in range(messages):
        timing = MessageTiming()
        token = CURRENT.set(timing)
        started = time.perf_counter()
        try:
            answer = await app.commands.chat(who, user_line(index, message))
        except Exception as exc:  # counted, not raised: one failure must not hide the figures
            outcome.errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            continue
        finally:
            CURRENT.reset(token)
        e2e = time.perf_counter() - started
        store = sum(timing.store_seconds.values())
        outcome.samples.append(Sample(e2e, timing.llm_seconds, store, answer.ok))


async def drive(
    users: int,
    messages: int,
    latency: float,
    ramp: float,
    folder: Path,
    retrieval: str | None,
    history: int,
) -> dict[str, Any]:
    llm = FixedLatencyLLM(latency)
    characters = characters_with_retrieval(folder, retrieval)
    settings = bench_settings(folder / f"throughput-{users}.db", characters_dir=characters)
    async with open_app(settings, llm=llm, start_scheduler=False) as app:
        await seed_history(app, users, history)
        settle_garbage_collector()  # as `companion run` does once its adapters are up
        time_store_calls(app.store)
        await app.companion.drain()  # the start-up extraction sweep: nothing is pending
        worker = count_round_trips(app.store)
        outcome = Outcome([], Counter())
        # Evenly spread start offsets (none by default): the ramp's last offset is part of the
        # ideal wall time, so the share stays comparable.
        delays = [ramp * i / users for i in range(users)]
        # CPU seconds: the event loop's thread alone, and the whole process (the DB thread too).
        cpu_main, cpu_all = time.thread_time(), time.process_time()
        started = time.perf_counter()
        await asyncio.gather(
            *(one_user(app, i, messages, delays[i], outcome) for i in range(users))
        )
        wall = time.perf_counter() - started
        cpu_main, cpu_all = time.thread_time() - cpu_main, time.process_time() - cpu_all
        trips, busy, top = worker.round_trips, worker.busy_seconds, worker.top(users * messages)
        sessions = app.companion.sessions_in_ram
        drain_started = time.perf_counter()
        await app.companion.drain()  # background compactions still running after the last reply
        drain = time.perf_counter() - drain_started
        rss, peak = rss_mb()
    sent = users * messages
    return figures(users, messages, latency, max(delays), wall, outcome, llm) | {
        "db_round_trips_per_message": round(trips / sent, 1),
        "db_thread_ms_per_message": round(busy / sent * 1000, 3),
        "db_thread_busy_share": round(busy / wall, 3),
        "db_thread_by_method": top,
        "cpu_ms_per_message_loop_thread": round(cpu_main / sent * 1000, 3),
        "cpu_ms_per_message_process": round(cpu_all / sent * 1000, 3),
        "drain_seconds": round(drain, 3),
        "sessions_in_ram": sessions,
        "rss_mb": round(rss, 1),
        "rss_peak_mb": round(peak, 1),
    }


def figures(
    users: int,
    messages: int,
    latency: float,
    last_start: float,
    wall: float,
    outcome: Outcome,
    llm: FixedLatencyLLM,
) -> dict[str, Any]:
    samples = outcome.samples
    answered = sum(1 for s in samples if s.ok)
    # users x messages / (messages x latency), plus the last start offset when ramping.
    ideal_wall = messages * latency + last_start
    ideal = users * messages / ideal_wall if ideal_wall > 0 else float("inf")
    achieved = answered / wall if wall > 0 else 0.0
    return {
        "users": users,
        "messages_per_user": messages,
        "latency_s": latency,
        "messages_sent": users * messages,
        "answered": answered,
        "apologies": sum(1 for s in samples if not s.ok),
        "errors": dict(outcome.errors),
        "wall_seconds": round(wall, 3),
        "ideal_wall_seconds": round(ideal_wall, 3),
        "ramp_seconds": round(last_start, 3),
        "achieved_msgs_per_s": round(achieved, 1),
        "ideal_msgs_per_s": round(ideal, 1),
        "share_of_ideal": round(achieved / ideal, 4) if ideal else 0.0,
        "overhead_ms": distribution_ms([s.e2e - s.llm for s in samples]),
        "e2e_minus_latency_ms": distribution_ms([s.e2e - latency for s in samples]),
        "store_ms": distribution_ms([s.store for s in samples]),
        "llm_wakeup_delay_ms": distribution_ms(llm.overshoot),
        "llm_calls": dict(llm.calls),
        "compactions": llm.calls.get("summary", 0),
        "extractions": llm.calls.get("extraction", 0),
    }


def run(
    users: Sequence[int] = (100, 1000),
    messages: int = 5,
    latency: float = 0.5,
    ramp: float = 0.0,
    retrieval: str | None = None,
    history: int = 24,
    sweep: Sequence[float] = (),
    isolate: bool = True,
) -> dict[str, Any]:
    """One fresh process, app and database per run (isolate=False runs them here: quicker,
    for tests); flat keys for the headline figures. `sweep`: LLM latencies at which the
    biggest user count runs again with its starts spread over one latency, to find the load
    the bot carries within the targets."""
    started = time.perf_counter()
    result: dict[str, Any] = {"path": "app.commands.chat", "runs": {}}
    result["retrieval"] = retrieval or "as in characters/"
    result["history_turns_per_user"] = history
    result["load_average_1m_before"] = load_average()
    for count in users:
        run_ = one_run(count, messages, latency, ramp, retrieval, history, isolate)
        result["runs"][str(count)] = run_
        result[f"share_of_ideal_{count}"] = run_["share_of_ideal"]
        result[f"overhead_p99_ms_{count}"] = run_["overhead_ms"]["p99"]
        result[f"overhead_p50_ms_{count}"] = run_["overhead_ms"]["p50"]
    biggest = str(max(users))
    # A run where some messages failed passes nothing, whatever its figures.
    complete = result["runs"][biggest]["answered"] == result["runs"][biggest]["messages_sent"]
    share, p99 = result[f"share_of_ideal_{biggest}"], result[f"overhead_p99_ms_{biggest}"]
    result["targets"] = {
        f"share_of_ideal_{biggest} >= {SHARE_TARGET}": complete and share >= SHARE_TARGET,
        f"overhead_p99_ms_{biggest} <= {OVERHEAD_P99_TARGET_MS}": complete
        and p99 <= OVERHEAD_P99_TARGET_MS,
        f"every message of the {biggest}-user run answered": complete,
    }
    if sweep:
        result["capacity"] = capacity(int(biggest), messages, sweep, retrieval, history, isolate)
    result["load_average_1m_after"] = load_average()
    result["run_seconds"] = round(time.perf_counter() - started, 2)
    return result


def one_run(
    users: int,
    messages: int,
    latency: float,
    ramp: float,
    retrieval: str | None,
    history: int,
    isolate: bool,
) -> dict[str, Any]:
    args = [users, messages, latency, ramp, retrieval or "-", history]
    if not isolate:
        return child([str(a) for a in args])
    return run_child(__file__, args, f"{users} users at {latency} s")


def child(argv: list[str]) -> dict[str, Any]:
    """One run in this process, on a database of its own (the parent starts one per run)."""
    users, messages = int(argv[0]), int(argv[1])
    latency, ramp = float(argv[2]), float(argv[3])
    retrieval, history = None if argv[4] == "-" else argv[4], int(argv[5])
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as folder:
        return asyncio.run(drive(users, messages, latency, ramp, Path(folder), retrieval, history))


def capacity(
    users: int,
    messages: int,
    latencies: Sequence[float],
    retrieval: str | None,
    history: int,
    isolate: bool,
) -> dict[str, Any]:
    """`users` users at each LLM latency, their starts spread evenly over one latency (steady
    arrivals, about users/latency messages/s, rather than one burst): which loads meet both
    targets. A slower LLM is a lower arrival rate, as with real replies of a few seconds."""
    rows = []
    for latency in latencies:
        figures = one_run(users, messages, latency, latency, retrieval, history, isolate)
        complete = figures["answered"] == figures["messages_sent"]
        rows.append(
            {
                "latency_s": latency,
                "ideal_msgs_per_s": figures["ideal_msgs_per_s"],
                "achieved_msgs_per_s": figures["achieved_msgs_per_s"],
                "share_of_ideal": figures["share_of_ideal"],
                "overhead_ms": figures["overhead_ms"],
                "cpu_ms_per_message_process": figures["cpu_ms_per_message_process"],
                "meets_targets": complete
                and figures["share_of_ideal"] >= SHARE_TARGET
                and figures["overhead_ms"]["p99"] <= OVERHEAD_P99_TARGET_MS,
            }
        )
    carried = [r["ideal_msgs_per_s"] for r in rows if r["meets_targets"]]
    return {
        "users": users,
        "rows": rows,
        "max_msgs_per_s_within_targets": max(carried, default=0.0),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="100,1000", help="comma-separated user counts")
    parser.add_argument("--messages", type=int, default=5, help="messages per user, in sequence")
    parser.add_argument("--latency", type=float, default=0.5, help="fake LLM latency, seconds")
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="spread user starts over this many seconds"
    )
    parser.add_argument(
        "--history",
        type=int,
        default=24,
        help="turns of an earlier, summarised conversation per user (what recall searches)",
    )
    parser.add_argument(
        "--sweep",
        default="",
        help="comma-separated LLM latencies (s) for the capacity table, e.g. 0.5,1,2,4",
    )
    add_common_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if answered_as_child(argv, child):
        return 0
    args = parse_args(argv)
    users = numbers(args.users, int)
    result = run(
        users,
        args.messages,
        args.latency,
        args.ramp,
        args.retrieval,
        args.history,
        numbers(args.sweep, float),
    )
    emit(result, format_table(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
