"""The tables bench/throughput.py prints: one line per user count, then the capacity sweep."""

from __future__ import annotations

from typing import Any

from bench.load_common import closing_lines


def _dist(d: dict[str, float]) -> str:
    return f"{d['p50']:.1f}/{d['p95']:.1f}/{d['p99']:.1f}"


def format_table(result: dict[str, Any]) -> str:
    first = next(iter(result["runs"].values()))
    lines = [
        f"Throughput via {result['path']}: fake LLM {first['latency_s'] * 1000:.0f} ms, "
        f"{first['messages_per_user']} sequential messages per user, starts spread over "
        f"{first['ramp_seconds']} s; {result['history_turns_per_user']} earlier turns per user; "
        "retrieval: "
        f"{result['retrieval']}",
        "",
        " users | answered | wall s | ideal s |  msg/s | ideal | share  | overhead ms p50/p95/p99"
        " | e2e-latency p50/p95/p99 | store ms p50/p95/p99 | LLM wake-up delay p50/p99",
    ]
    for users, r in result["runs"].items():
        lines.append(
            f"{users:>6} | {r['answered']:>8} | {r['wall_seconds']:>6.2f} | "
            f"{r['ideal_wall_seconds']:>7.2f} | {r['achieved_msgs_per_s']:>6.1f} | "
            f"{r['ideal_msgs_per_s']:>5.0f} | {r['share_of_ideal']:>6.1%} | "
            f"{_dist(r['overhead_ms']):>23} | {_dist(r['e2e_minus_latency_ms']):>23} | "
            f"{_dist(r['store_ms']):>20} | {r['llm_wakeup_delay_ms']['p50']:.1f}/"
            f"{r['llm_wakeup_delay_ms']['p99']:.1f}"
        )
    lines.append("")
    for users, r in result["runs"].items():
        lines.append(
            f"{users} users: LLM calls {r['llm_calls']}, background compactions "
            f"{r['compactions']}, extractions {r['extractions']}, apologies {r['apologies']}, "
            f"errors {sum(r['errors'].values())} {r['errors'] or ''}, sessions in RAM "
            f"{r['sessions_in_ram']}, drain {r['drain_seconds']} s, RSS {r['rss_mb']} MB"
        )
        lines.append(
            f"    CPU per message: {r['cpu_ms_per_message_loop_thread']} ms on the event loop's "
            f"thread, {r['cpu_ms_per_message_process']} ms in the whole process"
        )
        lines.append(
            f"    DB thread: {r['db_round_trips_per_message']} round trips and "
            f"{r['db_thread_ms_per_message']} ms per message, busy "
            f"{r['db_thread_busy_share']:.0%} of the wall time; by Store method (DB-thread ms"
            " / round trips per message): "
            + ", ".join(
                f"{m['method']} {m['db_ms_per_message']:.3f}/{m['round_trips_per_message']:g}"
                for m in r["db_thread_by_method"]
            )
        )
    lines += capacity_lines(result.get("capacity"))
    lines.append("")
    lines += closing_lines(result)
    return "\n".join(lines)


def capacity_lines(found: dict[str, Any] | None) -> list[str]:
    if not found:
        return []
    lines = [
        "",
        f"Capacity: {found['users']} users, starts spread over one LLM latency",
        " latency s |    ideal msg/s | share  | overhead ms p50/p95/p99 | CPU ms/msg | targets",
    ]
    for row in found["rows"]:
        lines.append(
            f"{row['latency_s']:>10} | {row['ideal_msgs_per_s']:>14.0f} | "
            f"{row['share_of_ideal']:>6.1%} | {_dist(row['overhead_ms']):>23} | "
            f"{row['cpu_ms_per_message_process']:>10.2f} | "
            f"{'met' if row['meets_targets'] else 'missed'}"
        )
    lines.append(
        f"Highest load within both targets: {found['max_msgs_per_s_within_targets']:.0f} msg/s"
    )
    return lines
