"""Each process's health endpoint and metrics, over HTTP (aiohttp): `GET /healthz` answers
200 while the process runs its role (503 while it starts and once it stops), `GET /metrics`
the Prometheus text exposition format (version 0.0.4) that Prometheus, VictoriaMetrics or an
OpenTelemetry collector scrape as they are.

The metrics are a few counters and sums kept in this process, and the inbox's queue figures
read from the database at each scrape (every process sees the same queue).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from bot.config import Settings
from bot.llm import ClosableLLM
from memory.engine.llm import LLMRequest, LLMResponse, StreamingLLM, TextSink
from memory.store.inbox import InboxStats

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Upper bounds of the LLM latency histogram, in seconds.
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class Metrics:
    role: str
    messages_stored: int = 0
    messages_answered: int = 0
    replies_sent: int = 0
    redelivered: int = 0  # claimed again after a lease ran out
    dead_letters: int = 0  # updates the inbox would not take, kept in dead_letters
    errors: int = 0
    llm_calls: int = 0
    llm_seconds: float = 0.0
    llm_buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    started: float = field(default_factory=time.monotonic)
    # Today's and this month's spend per budget scope (bot/budgets.py), read at each scrape.
    spend: Callable[[], Awaitable[list[str]]] | None = None

    def observe_llm(self, seconds: float) -> None:
        self.llm_calls += 1
        self.llm_seconds += seconds
        for index, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.llm_buckets[index] += 1

    def exposition(self, inbox: InboxStats | None) -> str:
        """The Prometheus text format: HELP, TYPE, then the samples."""
        role = f'role="{self.role}"'
        lines: list[str] = []

        def metric(name: str, kind: str, doc: str, value: float, labels: str = role) -> None:
            lines.extend((f"# HELP {name} {doc}", f"# TYPE {name} {kind}"))
            lines.append(f"{name}{{{labels}}} {value}")

        metric("companion_up", "gauge", "1 while the process runs its role.", 1)
        metric(
            "companion_uptime_seconds",
            "gauge",
            "Seconds since the process started.",
            round(time.monotonic() - self.started, 3),
        )
        metric(
            "companion_messages_stored_total",
            "counter",
            "Updates stored in the inbox by this platform process.",
            self.messages_stored,
        )
        metric(
            "companion_messages_answered_total",
            "counter",
            "Inbox messages this worker marked answered.",
            self.messages_answered,
        )
        metric(
            "companion_replies_sent_total",
            "counter",
            "Messages this process sent to the platform (rate: replies per second).",
            self.replies_sent,
        )
        metric(
            "companion_redelivered_total",
            "counter",
            "Messages claimed again after another worker's lease ran out.",
            self.redelivered,
        )
        metric(
            "companion_dead_letters_total",
            "counter",
            "Updates the inbox would not take, kept as dead letters"
            " (companion inbox dead-letters).",
            self.dead_letters,
        )
        metric("companion_errors_total", "counter", "Failed handlings.", self.errors)
        lines.extend(self._histogram(role))
        if inbox is not None:
            lines.extend(_inbox_lines(inbox))
        return "\n".join(lines) + "\n"

    def _histogram(self, role: str) -> list[str]:
        name = "companion_llm_latency_seconds"
        out = [f"# HELP {name} LLM call latency.", f"# TYPE {name} histogram"]
        for bound, count in zip(LATENCY_BUCKETS, self.llm_buckets, strict=True):
            out.append(f'{name}_bucket{{{role},le="{bound}"}} {count}')
        out.append(f'{name}_bucket{{{role},le="+Inf"}} {self.llm_calls}')
        out.append(f"{name}_sum{{{role}}} {round(self.llm_seconds, 6)}")
        out.append(f"{name}_count{{{role}}} {self.llm_calls}")
        return out


def _inbox_lines(stats: InboxStats) -> list[str]:
    figures = (
        ("companion_inbox_depth", "Messages stored and not yet answered.", stats.pending),
        (
            "companion_inbox_oldest_pending_seconds",
            "Age of the oldest unanswered message.",
            round(stats.oldest_pending_seconds, 3),
        ),
        ("companion_inbox_claimed_pairs", "Pairs held by a worker now.", stats.claimed_pairs),
        (
            "companion_inbox_claim_age_seconds",
            "Age of the oldest message in a claimed pair.",
            round(stats.oldest_claim_seconds, 3),
        ),
    )
    out: list[str] = []
    for name, doc, value in figures:
        out.extend((f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name} {value}"))
    return out


class TimedLLM:
    """The LLM, its calls timed into the metrics."""

    def __init__(self, llm: ClosableLLM, metrics: Metrics) -> None:
        self._llm = llm
        self._metrics = metrics

    async def complete(self, request: LLMRequest) -> LLMResponse:
        began = time.monotonic()
        try:
            return await self._llm.complete(request)
        finally:
            self._metrics.observe_llm(time.monotonic() - began)

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        began = time.monotonic()
        try:
            if isinstance(self._llm, StreamingLLM):
                return await self._llm.stream(request, on_text)
            return await self._llm.complete(request)
        finally:
            self._metrics.observe_llm(time.monotonic() - began)

    async def close(self) -> None:
        await self._llm.close()


class HealthServer:
    """`/healthz` and `/metrics` on host:port (port 0: any free port, see `port`)."""

    def __init__(
        self,
        metrics: Metrics,
        inbox_stats: Callable[[], Awaitable[InboxStats]] | None,
        host: str,
        port: int,
    ) -> None:
        self._metrics = metrics
        self._inbox_stats = inbox_stats
        self._host = host
        self._port = port
        self.healthy = False  # until the role runs (`ready`)
        self._runner: web.AppRunner | None = None
        self.port = port

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/metrics", self._scrape)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server  # the bound port when 0 was asked
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("health: http://%s:%s/healthz", self._host, self.port)

    def ready(self) -> None:
        self.healthy = True

    async def stop(self) -> None:
        self.healthy = False
        if self._runner is not None:
            await self._runner.cleanup()

    async def _health(self, _request: web.Request) -> web.Response:
        status = 200 if self.healthy else 503
        body = f"{'ok' if self.healthy else 'not running'} {self._metrics.role}\n"
        return web.Response(status=status, text=body)

    async def _scrape(self, _request: web.Request) -> web.Response:
        stats = None
        if self._inbox_stats is not None:
            try:
                stats = await self._inbox_stats()
            except Exception:  # the process's own figures are still worth serving
                log.warning("metrics: the inbox figures could not be read", exc_info=True)
                self._metrics.errors += 1
        body = self._metrics.exposition(stats)
        if self._metrics.spend is not None:
            try:
                body += "".join(f"{line}\n" for line in await self._metrics.spend())
            except Exception:  # as the inbox's: the process's own figures still serve
                log.warning("metrics: the budgets' spend could not be read", exc_info=True)
                self._metrics.errors += 1
        return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})


@contextlib.asynccontextmanager
async def serve_health(
    settings: Settings,
    metrics: Metrics,
    inbox_stats: Callable[[], Awaitable[InboxStats]] | None = None,
) -> AsyncIterator[HealthServer | None]:
    """The health endpoint for the life of the block when HEALTH_PORT is set (else None); it
    answers 503 until the caller marks it `ready`."""
    server = None
    if settings.health_port is not None:
        server = HealthServer(metrics, inbox_stats, settings.health_host, settings.health_port)
        await server.start()
    try:
        yield server
    finally:
        if server is not None:
            await server.stop()
