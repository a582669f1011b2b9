"""Smoke run of bench/purge_traffic.py on a tiny store: it runs end to end on the real store
and its JSON carries the headline keys with sane values."""

from __future__ import annotations

import argparse
import json
import sqlite3
from typing import Any

import pytest

from bench import purge_traffic

# The benches open stores of their own or start processes that may (tests/store_rule.py).
pytestmark = pytest.mark.usefixtures("database_target")


def test_the_purge_traffic_bench_reports_its_headline_keys(capsys: Any) -> None:
    assert purge_traffic.main(["--turns", "400", "--runs", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sqlite_version"] == sqlite3.sqlite_version
    assert result["runs"] == 2
    assert result["purge_all_settled"] is True
    assert result["purge_seconds_under_traffic_p95"] == max(
        run["purge_seconds"] for run in result["per_run"]
    )
    assert result["writer_stall_ms_max"] >= 0.0
    assert all(run["deleted_turns"] > 0 for run in result["per_run"])


def test_the_heavier_traffic_reports_the_stalls_distribution_and_its_ratio(capsys: Any) -> None:
    argv = ["--turns", "400", "--runs", "1", "--writers", "2", "--gap-ms", "0:3"]
    assert purge_traffic.main([*argv, "--quiet-seconds", "0.5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["writers"], result["gap_ms"]) == (2, "0:3")
    assert 0 <= result["writer_stall_ms_p99"] <= result["writer_stall_ms_max"]  # may be none
    assert 0 < result["quiet_stall_ms_p99"] <= result["quiet_stall_ms_max"]
    ratio = result["writer_stall_ms_max"] / result["quiet_stall_ms_max"]
    assert result["stall_max_ratio"] == round(ratio, 2)
    assert result["purge_all_settled"] is True


def test_a_gap_range_upside_down_is_refused_before_any_store_is_built() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="LO:HI"):
        purge_traffic.main(["--gap-ms", "5:1"])
