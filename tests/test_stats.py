"""`companion stats`: sums, cache-read shares, latencies and cost from the llm_usage rows."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.cli_admin import AdminError, load_usage, parse_since, register, run_admin
from bot.config import Settings
from memory.models import UsageRecord
from memory.store import MemoryStore, open_store
from memory.usage_stats import Prices, percentile, summarize, totals

T0 = datetime(2026, 11, 2, 18, 30, tzinfo=UTC)


def rec(character: str | None, kind: str, ok: bool = True, **tokens: Any) -> UsageRecord:
    return UsageRecord(kind=kind, model="claude-test", ok=ok, character_id=character, **tokens)


ROWS = [
    rec("maggie", "reply", input_tokens=100, cache_read_tokens=900, output_tokens=50,
        latency_ms=800),
    rec("maggie", "reply", input_tokens=200, cache_write_tokens=800, output_tokens=70,
        latency_ms=1200),
    rec("maggie", "reply", ok=False),  # a failed call: counted, no latency
    rec("maggie", "summary", input_tokens=1000, output_tokens=300, latency_ms=2000),
    rec("koldo", "reply", input_tokens=50, cache_read_tokens=950, output_tokens=20,
        latency_ms=600),
    rec("koldo", "extraction", input_tokens=400, output_tokens=100, latency_ms=1500),
]  # fmt: skip


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    store = await open_store(database_target)
    for minutes, row in enumerate(ROWS):
        await store.record_usage(row, T0 + timedelta(minutes=minutes))
    yield store
    await store.close()


async def test_stats_per_character_and_kind(store: MemoryStore) -> None:
    prices = Prices(input_per_mtok=3.0, output_per_mtok=15.0)
    rows = {(r.character_id, r.kind): r for r in summarize(await store.usage_records(), prices)}
    assert list(rows) == [
        ("koldo", "reply"),
        ("koldo", "extraction"),
        ("maggie", "reply"),
        ("maggie", "summary"),
    ]
    reply = rows[("maggie", "reply")]
    assert (reply.calls, reply.failed) == (3, 1)
    assert (reply.input_tokens, reply.cache_read_tokens, reply.cache_write_tokens) == (
        300,
        900,
        800,
    )
    assert reply.output_tokens == 120
    assert reply.cache_read_share == pytest.approx(900 / 2000)
    assert (reply.p50_ms, reply.p95_ms) == (800, 1200)
    expected = (300 * 3 + 900 * 0.3 + 800 * 3.75 + 120 * 15) / 1_000_000
    assert reply.cost == pytest.approx(expected)
    assert rows[("koldo", "reply")].cache_read_share == pytest.approx(0.95)
    assert rows[("maggie", "summary")].cache_read_share == 0.0


async def test_totals_per_kind_and_overall(store: MemoryStore) -> None:
    rows = totals(await store.usage_records())
    assert [(r.character_id, r.kind, r.calls) for r in rows] == [
        ("ALL", "reply", 4),
        ("ALL", "summary", 1),
        ("ALL", "extraction", 1),
        ("ALL", "all", 6),
    ]
    overall = rows[-1]
    assert overall.input_tokens == 1750 and overall.cache_read_tokens == 1850
    assert overall.cost == pytest.approx(sum(r.cost for r in summarize(ROWS)))


def test_percentiles_are_observed_values() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (50.0, 95.0)
    assert percentile([], 0.5) == 0.0
    assert percentile([7.0], 0.95) == 7.0


def test_since_accepts_durations_and_dates() -> None:
    assert parse_since("7d", T0) == T0 - timedelta(days=7)
    assert parse_since("24h", T0) == T0 - timedelta(hours=24)
    assert parse_since("2026-11-01", T0) == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(AdminError, match="--since 'soon'"):
        parse_since("soon", T0)


async def test_since_filters_by_instant_across_offsets(database_target: Path | str) -> None:
    store = await open_store(database_target)
    madrid = ZoneInfo("Europe/Madrid")
    try:
        await store.record_usage(rec("a", "reply"), T0.astimezone(madrid))  # 19:30+01:00
        await store.record_usage(rec("b", "reply"), T0 + timedelta(minutes=10))
        since = T0 + timedelta(minutes=5)
        assert [r.character_id for r in await load_usage(store, since)] == ["b"]
        assert len(await load_usage(store, None)) == 2
    finally:
        await store.close()


async def test_the_stats_command_prints_the_table(
    store: MemoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="companion")
    register(parser.add_subparsers(dest="command", required=True))
    # The store's own database: this file, or DATABASE_URL under make test-postgres.
    settings = Settings(_env_file=None, database_path=tmp_path / "companion.db")  # type: ignore[call-arg]
    args = parser.parse_args(["stats", "--price-input", "1", "--price-output", "2"])
    assert await run_admin(args, settings) == 0
    out = capsys.readouterr().out
    assert "6 call(s)" in out and "input $1, output $2" in out
    lines = out.splitlines()
    maggie = next(line for line in lines if line.startswith("maggie") and " reply " in line)
    assert maggie.split()[:4] == ["maggie", "reply", "3", "1"]
    assert "45.0%" in maggie
    assert lines[-1].startswith("ALL") and " all " in lines[-1]
    missing = Settings(_env_file=None, database_path=tmp_path / "none.db", database_url=None)  # type: ignore[call-arg]
    assert await run_admin(parser.parse_args(["stats"]), missing) == 0
    assert "no usage recorded yet" in capsys.readouterr().out
