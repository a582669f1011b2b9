"""Budgets under load (issue 36): can messages sent at once overspend?

200 people in 20 communities send their messages at once; each call passes the real budget
guard (memory/budget/guard.py) on the real store, in front of an in-process fake model whose
costs vary (input 50-100% of the local estimate, 20-600 output tokens, some of the input read
from or written to the cache) and whose latency is 5-30 ms. Half the people (those of
communities 0-9) send 12 messages, the rest 2, and the budgets are set so that the heavy half
and their communities run out mid-run while the light half never does.

Two set-ups: `postgres_2_workers`, two processes on one database of the throwaway server of
tests/pg_server.py, each with its own store and guard and half of the people; `sqlite_single`,
one process on one SQLite file. The workers are two processes running the guard and the store
(what decides whether a call may go), not two whole `companion run --role worker` bots: the
fake Telegram and the inbox add nothing to the race between reservations.

Keys (per set-up): `overspend_max` per scope kind, the most any scope went over its budget in
units of the largest single call's worst case (must be <= 1.0; 0 when none went over);
`calls_after_exhaustion`, model calls that started after their scope's settled spend had
reached its budget (0); `refused_without_reason`, refusals that did not name whose budget
and when it resets (0); `reserve_ms_p95` (and p50), the time the guard adds to a call (its
reserve and settle: the call's time minus the model's); `people_out`, `communities_out`.

A third set-up, `postgres_2_role_workers` (bench/budget_roles.py), runs the real bot split
instead: `companion run --role platform` and two `--role worker` processes, the people in
Telegram groups of the fake Bot API, the fake Anthropic API with varying usage; measured from
the database and the messages the people received (answered, refused with reason, lost).

Usage: .venv/bin/python bench/budget.py [--json] [--messages-heavy 12] [--messages-light 2]
       [--only NAME] [--role-people 200] [--role-communities 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bench`, `bot` and `memory` importable
    sys.path.insert(0, str(REPO))

from bench.budget_roles import Plan, run_roles  # noqa: E402
from bench.common import emit  # noqa: E402
from memory.budget.guard import BudgetedLLM, BudgetExhausted  # noqa: E402
from memory.budget.policy import BudgetPolicy, Pricing, input_tokens  # noqa: E402
from memory.engine.llm import (  # noqa: E402
    ChatMessage,
    LLMRequest,
    LLMResponse,
    Payer,
    TextBlock,
    Usage,
)
from memory.engine.tokens import TokenEstimator  # noqa: E402
from memory.store.budgets import BudgetLedger, Counter, Limit  # noqa: E402
from memory.usage_stats import PriceTable, percentile  # noqa: E402

PEOPLE, COMMUNITIES, MAX_TOKENS = 200, 20, 600
SOLO_CALLS, SOLO_FIRST = 50, 100_000
POLICY = BudgetPolicy(guest_day=0.03, community_day=0.17, global_day=2.9)
WORDS = ("el", "detective", "mira", "la", "lluvia", "sobre", "ría", "piensa", "caso", "sin")


def community_of(person: int) -> int:
    return person % COMMUNITIES


def heavy(person: int) -> bool:
    return community_of(person) < COMMUNITIES // 2


@dataclass
class Trace:
    """What one process saw: model calls (start time, scopes), settles, refusals, guard ms."""

    calls: list[tuple[float, list[str]]] = field(default_factory=list)
    settles: list[tuple[float, str, float]] = field(default_factory=list)
    refusals: int = 0
    refused_without_reason: int = 0
    guard_ms: list[float] = field(default_factory=list)
    alone_ms: list[float] = field(default_factory=list)  # one call at a time, after the burst
    worst_max: float = 0.0


class FakeModel:
    def __init__(self, trace: Trace, pricing: Pricing, rng: random.Random) -> None:
        self._trace, self._pricing, self._rng = trace, pricing, rng

    async def complete(self, request: LLMRequest) -> LLMResponse:
        began = time.perf_counter()
        self._trace.calls.append((time.time(), scopes_of(request.payer)))
        await asyncio.sleep(self._rng.uniform(0.005, 0.03))
        sent = int(input_tokens(request, self._pricing.tokens) * self._rng.uniform(0.5, 1.0))
        cached = int(sent * self._rng.choice((0.0, 0.0, 0.5, 0.9)))
        written = int((sent - cached) * self._rng.choice((0.0, 0.3)))
        usage = Usage(sent - cached - written, cached, written, self._rng.randint(20, MAX_TOKENS))
        # The model's own time, so the driver can tell the guard's from it.
        took = (time.perf_counter() - began) * 1000
        return LLMResponse("ok", "claude-bench", usage, latency_ms=took)


class TracedLedger:
    """The store, with each settle's result written down (when each scope ran out)."""

    def __init__(self, store: BudgetLedger, trace: Trace) -> None:
        self._store, self._trace = store, trace

    async def reserve_budget(self, limits: Sequence[Limit], amount: float) -> int | None:
        return await self._store.reserve_budget(limits, amount)

    async def settle_budget(
        self, counters: Sequence[Counter], reserved: float, spent: float
    ) -> list[float]:
        after = await self._store.settle_budget(counters, reserved, spent)
        now = time.time()
        self._trace.settles.extend((now, c[0], s) for c, s in zip(counters, after, strict=True))
        return after

    async def claim_budget_notice(self, scope: str, period: str, level: int) -> bool:
        return await self._store.claim_budget_notice(scope, period, level)

    async def budget_counters(self, period: str) -> Any:
        return await self._store.budget_counters(period)

    async def budget_total(self, scopes: Sequence[str], period: str) -> float:
        return await self._store.budget_total(scopes, period)

    async def platform_identity(self, user_id: int) -> str | None:
        return f"bench:{user_id}"

    async def channel_community(self, channel: str) -> str | None:
        return None  # the bench's communities are their own


def unstriped(scope: str) -> str:
    """A stripe of the global cap ('global#3') counted as the cap itself."""
    return "global" if scope.startswith("global#") else scope


def solo_people(trace: Trace) -> list[int]:
    return [SOLO_FIRST + seed * SOLO_CALLS + n for seed in (1, 10, 11) for n in range(SOLO_CALLS)]


def scopes_of(payer: Payer) -> list[str]:
    claims = POLICY.claims(f"bench:{payer.person}", payer.community, NOW)
    return [unstriped(c.scope) for c in claims]


NOW = datetime(2026, 11, 2, 12, tzinfo=UTC)
SETUPS = ("postgres_2_workers", "sqlite_single", "postgres_2_role_workers")


def request_for(person: int, rng: random.Random) -> LLMRequest:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 400)))
    return LLMRequest(
        kind="reply",
        system=(TextBlock("Eres el detective de Bilbao."),),
        messages=(ChatMessage("user", (TextBlock(text),)),),
        max_tokens=MAX_TOKENS,
        payer=Payer(person, f"bench:{community_of(person)}"),
    )


async def person_sends(guard: BudgetedLLM, person: int, count: int,
                       trace: Trace, rng: random.Random) -> None:  # fmt: skip
    for _ in range(count):
        request = request_for(person, rng)
        trace.worst_max = max(trace.worst_max, guard_pricing(guard).worst_case(request))
        began = time.perf_counter()
        try:
            response = await guard.complete(request)
        except BudgetExhausted as exc:
            trace.refusals += 1
            when = f"{exc.resets_at:%Y-%m-%d %H:%M}"
            if when not in exc.line("es") or exc.kind not in ("person", "community", "global"):
                trace.refused_without_reason += 1
            continue
        trace.guard_ms.append((time.perf_counter() - began) * 1000 - response.latency_ms)


def guard_pricing(guard: BudgetedLLM) -> Pricing:
    return guard._pricing  # the bench reads the guard's own worst case


async def drive(store: BudgetLedger, people: Sequence[int], heavy_n: int, light_n: int,
                start_at: float, seed: int, stripes: int) -> Trace:  # fmt: skip
    trace, rng = Trace(), random.Random(seed)
    pricing = Pricing(PriceTable(), "claude-bench", TokenEstimator())
    model = FakeModel(trace, pricing, rng)
    policy = replace(POLICY, global_stripes=stripes)
    guard = BudgetedLLM(model, TracedLedger(store, trace), policy, pricing, lambda: NOW)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    await asyncio.gather(*(
        person_sends(guard, p, heavy_n if heavy(p) else light_n, trace, rng)
        for p in people
    ))  # fmt: skip
    for solo in range(SOLO_CALLS):  # people of their own community, one call at a time
        person = SOLO_FIRST + seed * SOLO_CALLS + solo
        request = replace(request_for(person, rng), payer=Payer(person, f"solo:{person}"))
        began = time.perf_counter()
        try:
            model_ms = (await guard.complete(request)).latency_ms
        except BudgetExhausted:  # the global cap ran out: the check alone is timed
            model_ms = 0.0
        trace.alone_ms.append((time.perf_counter() - began) * 1000 - model_ms)
    return trace


def analyse(traces: Sequence[Trace], counters: dict[str, float]) -> dict[str, Any]:
    worst = max(t.worst_max for t in traces)
    payers = [(f"bench:{p}", f"bench:{community_of(p)}") for p in range(PEOPLE)]
    payers += [(f"bench:{p}", f"solo:{p}") for t in traces for p in solo_people(t)]
    limits = {c.scope: c.limit for person, community in payers
              for c in POLICY.claims(person, community, NOW)}  # fmt: skip
    summed: dict[str, float] = {}
    for scope, spent in counters.items():  # the global cap's stripes as the one cap
        summed[unstriped(scope)] = summed.get(unstriped(scope), 0.0) + spent
    counters = summed
    kinds = {"person": 0.0, "community": 0.0, "global": 0.0}
    for scope, spent in counters.items():
        kind = scope.split(":", 1)[0]
        kinds[kind] = max(kinds[kind], max(0.0, spent - limits[scope]) / worst)
    exhausted: dict[str, float] = {}
    stripes: dict[str, float] = {}
    for when, scope, spent in sorted(s for t in traces for s in t.settles):
        if scope.startswith("global"):  # the stripes' newest spends, summed
            stripes[scope] = spent
            scope, spent = "global", sum(stripes.values())
        if spent >= limits[scope] and scope not in exhausted:
            exhausted[scope] = when
    after = sum(
        1 for t in traces for when, scopes in t.calls
        if any(s in exhausted and when > exhausted[s] for s in scopes)
    )  # fmt: skip
    guard_ms = [ms for t in traces for ms in t.guard_ms]
    alone = [ms for t in traces for ms in t.alone_ms]
    near = {s for s, spent in counters.items() if spent >= limits[s] - worst}
    return {
        "overspend_max": {k: round(v, 4) for k, v in kinds.items()},
        "calls_after_exhaustion": after,
        "refused_without_reason": sum(t.refused_without_reason for t in traces),
        "reserve_ms_p50": round(percentile(guard_ms, 0.5), 2),
        "reserve_ms_p95": round(percentile(guard_ms, 0.95), 2),
        "reserve_ms_p95_one_at_a_time": round(percentile(alone, 0.95), 2),
        "model_calls": sum(len(t.calls) for t in traces),
        "refusals": sum(t.refusals for t in traces),
        "largest_worst_case_usd": round(worst, 6),
        "people_out": sum(1 for s in near if s.startswith("person:")),
        "communities_out": sum(1 for s in near if s.startswith("community:")),
        "global_out": "global" in near,
    }


async def counters_of(store: Any) -> dict[str, float]:
    return {c.scope: c.spent for c in await store.budget_counters("d:2026-11-02")}


async def run_sqlite(folder: Path, heavy_n: int, light_n: int, stripes: int) -> dict[str, Any]:
    from memory.store.sqlite import SqliteStore

    store = await SqliteStore.open(folder / "budget.db")
    try:
        trace = await drive(store, range(PEOPLE), heavy_n, light_n, time.time(), 1, stripes)
        return analyse([trace], await counters_of(store))
    finally:
        await store.close()


async def run_postgres(folder: Path, heavy_n: int, light_n: int, stripes: int) -> dict[str, Any]:
    import asyncpg

    from memory.store.postgres import PostgresStore
    from tests.pg_server import running_server_async

    async with running_server_async() as base:
        admin = await asyncpg.connect(f"{base}/postgres")
        await admin.execute("CREATE DATABASE bench_budget")
        await admin.close()
        url = f"{base}/bench_budget"
        store = await PostgresStore.open(url)  # migrates once, before the workers start
        start_at = time.time() + 3.0
        codes = await asyncio.gather(*(
            asyncio.to_thread(subprocess.call, [
                sys.executable, __file__, "--child", url, str(worker),
                str(folder / f"w{worker}.json"), str(start_at), str(heavy_n), str(light_n),
                str(stripes),
            ])
            for worker in (0, 1)
        ))  # fmt: skip
        try:
            if any(codes):
                raise RuntimeError(f"a bench worker failed: exit codes {codes}")
            traces = [load_trace(folder / f"w{w}.json") for w in (0, 1)]
            return analyse(traces, await counters_of(store))
        finally:
            await store.close()


def load_trace(path: Path) -> Trace:
    data = json.loads(path.read_text())
    trace = Trace(**{k: v for k, v in data.items()})
    trace.calls = [(t, list(s)) for t, s in trace.calls]
    trace.settles = [tuple(s) for s in trace.settles]  # type: ignore[misc]
    return trace


async def child(url: str, worker: int, out: Path, start_at: float, heavy_n: int,
                light_n: int, stripes: int) -> None:  # fmt: skip
    from memory.store.postgres import PostgresStore

    store = await PostgresStore.open(url)
    try:
        people = [p for p in range(PEOPLE) if p % 2 == worker]
        trace = await drive(store, people, heavy_n, light_n, start_at, 10 + worker, stripes)
    finally:
        await store.close()
    await asyncio.to_thread(out.write_text, json.dumps(trace.__dict__))


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{'set-up':<24} {'overspend person/community/global':<36} {'after':>6} "
        f"{'no reason':>9} {'p95 ms':>7} {'calls':>6} {'refused':>7} {'out p/c':>8}"
    ]
    for name, r in result["setups"].items():
        over = "/".join(f"{r['overspend_max'][k]:.3f}" for k in ("person", "community", "global"))
        lines.append(
            f"{name:<24} {over:<36} {r['calls_after_exhaustion']:>6} "
            f"{r['refused_without_reason']:>9} {r.get('reserve_ms_p95', '-'):>7} "
            f"{r['model_calls']:>6} {r['refusals']:>7} "
            f"{r['people_out']:>4}/{r['communities_out']:<3}"
        )
        if "messages" in r:
            lines.append(f"{'':<24} messages {r['messages']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "--child":
        url, worker, out, start_at, heavy_n, light_n, stripes = args[1:8]
        asyncio.run(child(url, int(worker), Path(out), float(start_at), int(heavy_n),
                          int(light_n), int(stripes)))  # fmt: skip
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--messages-heavy", type=int, default=12)
    parser.add_argument("--messages-light", type=int, default=2)
    parser.add_argument(
        "--stripes",
        type=int,
        default=1,
        help="the global cap's stripes (BUDGET_GLOBAL_STRIPES), both set-ups",
    )
    parser.add_argument("--only", choices=SETUPS, action="append",
                        help="run only this set-up (repeatable; default all)")  # fmt: skip
    parser.add_argument("--role-people", type=int, default=200,
                        help="people of postgres_2_role_workers")  # fmt: skip
    parser.add_argument("--role-communities", type=int, default=20,
                        help="groups of postgres_2_role_workers")  # fmt: skip
    parsed = parser.parse_args(args)
    result: dict[str, Any] = {"people": PEOPLE, "communities": COMMUNITIES, "setups": {},
                              "budgets_usd": {"person_day": POLICY.guest_day,
                                              "community_day": POLICY.community_day,
                                              "global_day": POLICY.global_day}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-budget-") as folder:
        for name, run in (("postgres_2_workers", run_postgres), ("sqlite_single", run_sqlite)):
            if parsed.only and name not in parsed.only:
                continue
            result["setups"][name] = asyncio.run(
                run(Path(folder), parsed.messages_heavy, parsed.messages_light, parsed.stripes)
            ) | {"global_stripes": parsed.stripes}
        if not parsed.only or "postgres_2_role_workers" in parsed.only:
            plan = Plan(people=parsed.role_people, communities=parsed.role_communities)
            result["setups"]["postgres_2_role_workers"] = asyncio.run(run_roles(plan, Path(folder)))
    emit(result, table(result), parsed.json)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
