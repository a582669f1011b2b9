"""Smoke run of bench/purge_traffic.py on a tiny store: it runs end to end on the real store
and its JSON carries the headline keys with sane values."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from bench import purge_traffic


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
