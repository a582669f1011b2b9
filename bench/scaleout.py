"""Several workers on PostgreSQL against one process on SQLite: capacity, CPU per message, and
whether any message was lost, answered twice or out of order (issue 16).

The throughput workload (bench/throughput.py) through the real Telegram path: returning users
(each with an earlier, summarised conversation, so recall searches a real turn log) write to the
fake Telegram Bot API (tests/fakes/), and the bot answers through it; the LLM is the in-process
fake of fixed latency (bench/load_common.py) in each bot process. Three set-ups, one run:

- sqlite_single: `companion run` (role all) on a SQLite file: today's single process;
- workers_1 / workers_2: `companion run --role platform` storing each update in the inbox of a
  throwaway PostgreSQL server (tests/pg_server.py), and one or two `--role worker` processes.

Each set-up is offered steady arrivals at increasing rates (`--rates`, messages/s, each for
`--step-seconds`); a user has at most one message waiting, so each reply names the message it
answers. Overhead per message = time from the update's arrival at the fake Telegram to the
reply's arrival there, minus the LLM latency. Capacity = the highest rate whose every message
was answered, at >= 90% of the offered rate, with overhead p99 at most 20 ms above the set-up's
floor (its p99 at the lowest rate: the fake Telegram's HTTP hops, the typing action, and for
workers the inbox's hop, which no load adds); `capacity_absolute_20ms_msgs_per_s` applies the
20 ms to the whole overhead instead; `peak_msgs_per_s` is the most answered per second in a step
whose every message was answered, whatever the overhead. CPU per message is read
from /proc for each process: the bot's (single process, or the workers), the platform process's,
the database server's (postmaster and backends), and this driver's (the fakes and the users).

Usage: .venv/bin/python bench/scaleout.py [--rates 20,40,60,80] [--step-seconds 5]
       [--latency 0.5] [--history 12] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.common import emit  # noqa: E402
from bench.load_common import numbers  # noqa: E402
from bench.scaleout_load import Config, Step, measure  # noqa: E402
from bench.scaleout_procs import child_main  # noqa: E402
from bench.scaleout_profile import cost_centres  # noqa: E402
from tests.pg_server import running_server_async  # noqa: E402

OVERHEAD_P99_TARGET_MS, SHARE_TARGET, SCALE_TARGET = 20.0, 0.9, 1.6
CONFIGS = (Config("sqlite_single", 0), Config("workers_1", 1), Config("workers_2", 2))


def capacity(steps: list[Step], floor_ms: float = 0.0) -> float:
    """The highest offered rate with every message answered, at >= 90% of the offered rate,
    and overhead p99 within `floor_ms` + 20 ms (0 when none was)."""
    met = [
        s.rate
        for s in steps
        if s.unanswered == 0
        and s.achieved >= SHARE_TARGET * s.rate
        and s.overhead_p99_ms <= floor_ms + OVERHEAD_P99_TARGET_MS
    ]
    return max(met, default=0.0)


def per_message(steps: list[Step], field: str) -> float:
    """CPU ms per message over every step (all load counted, not the best step only)."""
    answered = sum(s.answered for s in steps)
    return round(sum(getattr(s, field) for s in steps) * 1000 / answered, 3) if answered else 0.0


def per_process(config: Config, steps: list[Step]) -> dict[str, float]:
    """CPU ms per message of each process of one round of a set-up, and all of them."""
    answered = sum(s.answered for s in steps) or 1
    out: dict[str, float] = {}
    names = ["single"] if not config.workers else [f"worker_{n}" for n in range(config.workers)]
    for n, name in enumerate(names):
        seconds = sum(s.bots_cpu[n] for s in steps if len(s.bots_cpu) > n)
        out[name] = round(seconds * 1000 / answered, 3)
    if config.workers:
        for name in ("platform", "database"):
            out[name] = per_message(steps, f"{name}_cpu")
    out["driver"] = per_message(steps, "driver_cpu")
    out["all"] = round(sum(out.values()), 3)
    return out


def spread(values: list[float]) -> dict[str, Any]:
    """Median, least and most of one figure over the rounds, and each round's."""
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 3),
        "min": ordered[0],
        "max": ordered[-1],
        "runs": values,
    }


async def run(
    rates: Sequence[float],
    step: float,
    latency: float,
    history: int,
    rounds: int = 1,
    profiles: Path | None = None,
) -> dict[str, Any]:
    """Each set-up `rounds` times, interleaved (one of each, then again), so that a change in
    the shared machine's load falls on all of them alike."""
    started = time.perf_counter()
    result: dict[str, Any] = {
        "latency_s": latency,
        "history_turns": history,
        "rounds": rounds,
        "load_average_1m": [],
        "setups": {},
    }
    runs: dict[str, list[list[Step]]] = {config.name: [] for config in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as folder:
        async with running_server_async() as base:
            for n in range(rounds):
                for config in CONFIGS:
                    result["load_average_1m"].append(round(os.getloadavg()[0], 2))
                    where = profiles / f"round-{n}" if profiles is not None else None
                    if where is not None:
                        where.mkdir(parents=True, exist_ok=True)
                    steps = await measure(
                        config, rates, step, latency, history, base, Path(folder), where
                    )
                    runs[config.name].append(steps)
    result["load_average_1m"].append(round(os.getloadavg()[0], 2))
    for config in CONFIGS:
        summarise(result, config, runs[config.name])
    if profiles is not None:
        result["cost_centres"] = profile_report(profiles, runs)
    capacities = result["capacity_msgs_per_s"]
    one, two = capacities["workers_1"], capacities["workers_2"]
    result["workers_2_over_workers_1"] = round(two / one, 2) if one else None
    peaks = result["peak_msgs_per_s"]
    if peaks["workers_1"]:
        result["peak_workers_2_over_workers_1"] = round(peaks["workers_2"] / peaks["workers_1"], 2)
    result.update(cpu_ceiling(result))
    result["targets"] = {
        "0 lost, 0 duplicated, 0 out of order": result["lost_messages"] == 0
        and result["duplicate_replies"] == 0
        and result["order_violations"] == 0,
        f"workers_2 >= {SCALE_TARGET}x workers_1": bool(one) and two >= SCALE_TARGET * one,
    }
    result["run_seconds"] = round(time.perf_counter() - started, 1)
    return result


def summarise(result: dict[str, Any], config: Config, runs: list[list[Step]]) -> None:
    """One set-up's figures: CPU per message over all its rounds' steps; capacity, floor and
    peak as the median of its rounds'; each process's CPU per message as a spread."""
    name, steps = config.name, [s for one in runs for s in one]
    result["setups"][name] = [s.as_dict() | {"round": n} for n, one in enumerate(runs) for s in one]
    floors = [one[0].overhead_p99_ms if one else 0.0 for one in runs]
    result.setdefault("overhead_floor_p99_ms", {})[name] = statistics.median(floors)
    result.setdefault("capacity_msgs_per_s", {})[name] = statistics.median(
        capacity(one, floor) for one, floor in zip(runs, floors, strict=True)
    )
    result.setdefault("capacity_absolute_20ms_msgs_per_s", {})[name] = statistics.median(
        capacity(one) for one in runs
    )
    result.setdefault("bot_cpu_ms_per_msg", {})[name] = per_message(steps, "bot_cpu")
    if config.workers:
        for key, field in (
            ("worker_cpu_ms_per_msg", "bot_cpu"),
            ("platform_cpu_ms_per_msg", "platform_cpu"),
            ("database_cpu_ms_per_msg", "database_cpu"),
        ):
            result.setdefault(key, {})[name] = per_message(steps, field)
    result.setdefault("peak_msgs_per_s", {})[name] = statistics.median(
        max((s.achieved for s in one if s.unanswered == 0), default=0.0) for one in runs
    )
    result.setdefault("driver_cpu_ms_per_msg", {})[name] = per_message(steps, "driver_cpu")
    each = [per_process(config, one) for one in runs]
    result.setdefault("cpu_ms_per_msg_per_process", {})[name] = (
        {process: spread([e[process] for e in each]) for process in each[0]} if each else {}
    )
    for key in ("lost_messages", "duplicate_replies", "order_violations"):
        field = {"lost_messages": "unanswered"}.get(key, key.split("_")[0] + "s")
        result[key] = result.get(key, 0) + sum(getattr(s, field) for s in steps)


def profile_report(profiles: Path, runs: dict[str, list[list[Step]]]) -> dict[str, Any]:
    """Each profiled bot process's cost centres over every round (bench/scaleout_profile)."""
    report: dict[str, Any] = {}
    for config in CONFIGS:
        answered = sum(s.answered for one in runs[config.name] for s in one)
        for n in range(max(config.workers, 1)):
            files = sorted(profiles.glob(f"round-*/{config.name}-{n}.pstats"))
            if files:
                report[f"{config.name}/{n}"] = cost_centres(files, answered)
    return report


def cpu_ceiling(result: dict[str, Any]) -> dict[str, Any]:
    """Why two workers cannot double one here: every process of a set-up (workers, platform,
    database server, and this driver's fakes) shares the machine's cores, so the answered rate
    can never pass cores x 1000 / (CPU ms per message, all processes). Its share busy at the
    peak says how close a set-up already ran to that wall."""
    cores = len(os.sched_getaffinity(0))
    totals, ceilings, busy = {}, {}, {}
    for name in ("workers_1", "workers_2"):
        total = sum(
            result[key][name]
            for key in (
                "worker_cpu_ms_per_msg",
                "platform_cpu_ms_per_msg",
                "database_cpu_ms_per_msg",
                "driver_cpu_ms_per_msg",
            )
        )
        totals[name] = round(total, 2)
        ceilings[name] = round(cores * 1000 / total, 1) if total else None
        busy[name] = round(result["peak_msgs_per_s"][name] * total / (cores * 1000), 2)
    target = SCALE_TARGET * result["peak_msgs_per_s"]["workers_1"]
    return {
        "cores": cores,
        "cpu_ms_per_msg_all_processes": totals,
        "cpu_ceiling_msgs_per_s": ceilings,
        "cpu_busy_share_at_peak": busy,
        # The cores' share that 1.6x workers_1's peak would take at workers_2's CPU per message:
        # above 1, no code can reach the target on this machine.
        "cpu_share_needed_for_target": round(target * totals["workers_2"] / (cores * 1000), 2),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"scale-out: LLM {result['latency_s']} s, {result['history_turns']} turns of history; "
        "overhead = Telegram in -> Telegram out, minus the LLM",
        f"{'set-up':<14} {'rate':>6} {'got/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'lost':>5} "
        f"{'dup':>4} {'bot':>6} {'platf':>6} {'db':>6} {'fakes':>6}  (CPU ms/msg; bot = the"
        " single process, or the workers together)",
    ]
    for name, steps in result["setups"].items():
        for s in steps:
            lines.append(
                f"{name:<14} {s['rate']:>6.0f} {s['achieved']:>7.1f} {s['overhead_p50_ms']:>7.1f} "
                f"{s['overhead_p99_ms']:>7.1f} {s['unanswered']:>5} {s['duplicates']:>4} "
                f"{s['bot_cpu_ms_per_msg']:>6.2f} {s['platform_cpu_ms_per_msg']:>6.2f} "
                f"{s['database_cpu_ms_per_msg']:>6.2f} {s['driver_cpu_ms_per_msg']:>6.2f}"
            )
    lines.append(f"overhead floor (p99 at the lowest rate): {result['overhead_floor_p99_ms']}")
    lines.append(f"capacity (msgs/s, p99 <= floor + 20 ms): {result['capacity_msgs_per_s']}")
    lines.append(f"capacity (p99 <= 20 ms): {result['capacity_absolute_20ms_msgs_per_s']}")
    lines.append(f"peak answered/s (every message answered): {result['peak_msgs_per_s']}")
    lines.append(
        f"workers_2 / workers_1: capacity {result['workers_2_over_workers_1']}, "
        f"peak {result.get('peak_workers_2_over_workers_1')}"
    )
    lines.append(
        f"CPU wall on {result['cores']} cores: all processes use "
        f"{result['cpu_ms_per_msg_all_processes']} ms/msg, so at most "
        f"{result['cpu_ceiling_msgs_per_s']} msgs/s; busy at peak "
        f"{result['cpu_busy_share_at_peak']}; {SCALE_TARGET}x workers_1's peak would need "
        f"{result['cpu_share_needed_for_target']} of the cores"
    )
    lines.append(
        f"lost {result['lost_messages']}, duplicated {result['duplicate_replies']}, "
        f"out of order {result['order_violations']}; run {result['run_seconds']} s"
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="20,40,60,80", help="offered messages/s, ascending")
    parser.add_argument("--step-seconds", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--latency", type=float, default=0.5, help="fake LLM latency, seconds")
    parser.add_argument("--history", type=int, default=12, help="earlier turns per user")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each set-up, interleaved (spreads)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="profile each bot process (yappi, CPU clock; its CPU figures then include the "
        "profiler's) and save the profiles in DIR",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if child_main(argv):
        return 0
    args = parse_args(argv)
    rates = numbers(args.rates, float)
    result = asyncio.run(
        run(rates, args.step_seconds, args.latency, args.history, args.rounds, args.profile)
    )
    emit(result, table(result), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
