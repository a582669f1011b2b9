"""Smoke runs of the load benches on tiny sizes: they run end to end against the real engine,
and their JSON carries the headline keys with sane values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import memory_bound, overhead, throughput, throughput_floor

# The benches open stores of their own or start processes that may (tests/store_rule.py).
pytestmark = pytest.mark.usefixtures("database_target")


def test_throughput_reports_share_of_ideal_and_overhead() -> None:
    result = throughput.run(users=(20,), messages=3, latency=0.02, isolate=False)
    run = result["runs"]["20"]
    assert run["answered"] == 60, run["errors"]
    assert 0.0 < result["share_of_ideal_20"] <= 1.2
    assert result["overhead_p99_ms_20"] >= 0.0
    assert result["overhead_p99_ms_20"] >= result["overhead_p50_ms_20"]
    assert run["llm_calls"]["reply"] == 60
    assert run["db_round_trips_per_message"] > 0


def test_throughput_capacity_sweep_spreads_starts_over_one_latency() -> None:
    result = throughput.run(
        users=(10,), messages=2, latency=0.02, sweep=(0.05, 0.1), isolate=False, history=4
    )
    rows = result["capacity"]["rows"]
    assert [row["latency_s"] for row in rows] == [0.05, 0.1]
    # 20 messages in 2 latencies, plus the last user's start at 9/10 of a latency.
    assert [round(row["ideal_msgs_per_s"]) for row in rows] == [
        round(20 / (2 * latency + 0.9 * latency)) for latency in (0.05, 0.1)
    ]
    carried = [row["ideal_msgs_per_s"] for row in rows if row["meets_targets"]]
    assert result["capacity"]["max_msgs_per_s_within_targets"] == max(carried, default=0.0)


def test_throughput_json_is_one_object(capsys: Any) -> None:
    assert throughput.main(["--users", "5", "--messages", "2", "--latency", "0.01", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"share_of_ideal_5", "overhead_p99_ms_5", "runs", "targets"} <= printed.keys()


def test_throughput_floor_runs_every_mode_and_stores_every_turn(capsys: Any) -> None:
    shape = ["--users", "6", "--messages", "2", "--latency", "0.01", "--history", "4"]
    assert throughput_floor.main([*shape, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [row["mode"] for row in printed["rows"]] == list(throughput_floor.MODES)
    for row in printed["rows"]:
        assert row["turns_stored"] == 6 * 4 + 6 * 2 * 2, row  # history, then two per message
        assert 0.0 < row["share_of_ideal"] <= 1.2
    assert {"share_of_ideal_writes", "share_of_ideal_writes_search"} <= printed.keys()


def test_overhead_on_small_stores(tmp_path: Path) -> None:
    result = overhead.run(
        sizes=(1000, 2000), rounds=2, threads=2, first_touch=3, cache_dir=tmp_path
    )
    for key in ("p50_ms_1e3", "p95_ms_1e3", "p95_ms_warm_1e3", "p95_ms_2000"):
        assert result[key] > 0.0, key
    assert result["ratio_2000_vs_1e3"] > 0.0
    store = result["stores"]["1e3"]
    assert store["counts"]["turns"] == 1000
    assert store["cold"]["n"] == 4 and store["warm"]["n"] == 4
    assert store["first_touch"]["n"] == 3
    # Built once, then served from the cache.
    assert overhead.run(sizes=(1000,), rounds=1, threads=1, first_touch=0, cache_dir=tmp_path)[
        "stores"
    ]["1e3"]["cached"]


def test_memory_bound_evicts_idle_sessions() -> None:
    result = memory_bound.run(
        users=60, messages=1, caps=(10, 100), concurrency=20, latency=0.0, isolate=False
    )
    assert result["sessions_in_ram_cap_10"] == 10
    assert result["sessions_in_ram_cap_100"] == 60
    assert result["rss_mb_after_60_users"] > 0
    assert result["runs"]["10"]["failed_answers"] == 0


def test_scaleout_names_the_cpu_wall_from_every_process_share() -> None:
    from bench.scaleout import cpu_ceiling

    per_process = {"workers_1": 4.0, "workers_2": 5.0}
    result = {
        key: per_process
        for key in (
            "worker_cpu_ms_per_msg",
            "platform_cpu_ms_per_msg",
            "database_cpu_ms_per_msg",
            "driver_cpu_ms_per_msg",
        )
    }
    result["peak_msgs_per_s"] = {"workers_1": 50.0, "workers_2": 60.0}
    wall = cpu_ceiling(result)
    cores = wall["cores"]
    assert wall["cpu_ms_per_msg_all_processes"] == {"workers_1": 16.0, "workers_2": 20.0}
    assert wall["cpu_ceiling_msgs_per_s"]["workers_2"] == round(cores * 1000 / 20.0, 1)
    assert wall["cpu_busy_share_at_peak"]["workers_1"] == round(50 * 16.0 / (cores * 1000), 2)
    # 1.6 x 50 msgs/s at 20 ms each is 1,600 ms of CPU per second.
    assert wall["cpu_share_needed_for_target"] == round(1600 / (cores * 1000), 2)
