"""The roles of `companion run` (bot/roles.py) as an operator meets them: compose.yaml runs
PostgreSQL, one platform process and N workers with commands the CLI knows; the roles that need
PostgreSQL say so on SQLite; the health endpoint and the metrics speak what scrapers read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import yaml

from bot.cli import build_parser
from bot.health import HealthServer, Metrics
from bot.role_names import ROLES
from bot.roles import run_role
from memory.store.postgres.inbox import InboxStats
from tests.conftest import REPO, make_settings
from tests.fakes.anthropic_api import FakeAnthropic


def test_compose_runs_postgres_one_platform_and_several_workers() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "platform", "worker"}
    assert services["postgres"]["image"].startswith("postgres:")
    parser = build_parser()
    roles = {}
    for name in ("platform", "worker"):
        service = services[name]
        args = parser.parse_args(service["command"])  # the image's entrypoint is `companion`
        roles[name] = args.role
        assert service["environment"]["DATABASE_URL"].startswith("postgresql://")
        assert "healthz" in " ".join(service["healthcheck"]["test"])
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert roles == {"platform": "platform", "worker": "worker"}
    assert services["worker"]["deploy"]["replicas"] >= 2
    assert set(ROLES) == {"all", "platform", "worker"}
    assert parser.parse_args(["run"]).role == "all"  # today's single process stays the default


async def test_the_inbox_roles_refuse_sqlite_with_the_setting_to_add(
    tmp_path: Path, capsys: object
) -> None:
    async with FakeAnthropic() as llm:
        settings = make_settings(tmp_path, llm, telegram_bot_token="1:x", database_url=None)
    for role in ("platform", "worker"):
        assert await run_role(settings, role, asyncio.Event()) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "DATABASE_URL=postgresql://" in err and "--role all" in err


async def test_health_and_metrics_over_http() -> None:
    metrics = Metrics("worker")
    metrics.observe_llm(0.3)
    metrics.replies_sent = 5

    async def stats() -> InboxStats:
        return InboxStats(
            pending=7,
            oldest_pending_seconds=1.5,
            claimed_pairs=2,
            oldest_claim_seconds=0.5,
            answered=40,
        )

    server = HealthServer(metrics, stats, "127.0.0.1", 0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{server.port}"
            async with session.get(f"{base}/healthz") as response:
                assert response.status == 503  # starting: not yet claiming
            server.ready()
            async with session.get(f"{base}/healthz") as response:
                assert response.status == 200
            async with session.get(f"{base}/metrics") as response:
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                body = await response.text()
    finally:
        await server.stop()
    samples = dict(
        line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#")
    )
    assert samples["companion_inbox_depth"] == "7"
    assert samples["companion_inbox_claim_age_seconds"] == "0.5"
    assert samples['companion_replies_sent_total{role="worker"}'] == "5"
    assert samples['companion_llm_latency_seconds_bucket{role="worker",le="0.25"}'] == "0"
    assert samples['companion_llm_latency_seconds_bucket{role="worker",le="0.5"}'] == "1"
    assert samples['companion_llm_latency_seconds_count{role="worker"}'] == "1"
    # Every sample's metric has its TYPE line, as the exposition format requires.
    typed = {line.split()[2] for line in body.splitlines() if line.startswith("# TYPE")}
    for name in samples:
        base_name = name.split("{")[0]
        assert base_name in typed or base_name.rsplit("_", 1)[0] in typed, name
