"""What the LLM calls cost, from the `llm_usage` rows: per character and per call kind.

Token fields follow the providers' split (memory/engine/llm.py): `input_tokens` are the uncached
input tokens, so the input a call sent is input + cache read + cache write, and the cache-read
share is the part of it served from the prompt cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from memory.models import UsageRecord

# Default prices, in USD per million tokens, of the default model family (Sonnet); cache reads
# and writes are billed as multiples of the input price. A write with the 1 h TTL that the
# sheet uses is billed at 2x rather than 1.25x, but usage rows do not say which TTL a write had,
# so the 5-minute factor is the estimate.
PRICE_INPUT_PER_MTOK = 3.0
PRICE_OUTPUT_PER_MTOK = 15.0
CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25
KIND_ORDER = ("reply", "summary", "extraction")
NO_CHARACTER = "-"
K = TypeVar("K")


@dataclass(frozen=True)
class Prices:
    input_per_mtok: float = PRICE_INPUT_PER_MTOK
    output_per_mtok: float = PRICE_OUTPUT_PER_MTOK
    cache_read_factor: float = CACHE_READ_FACTOR
    cache_write_factor: float = CACHE_WRITE_FACTOR

    def cost(self, uncached: int, cache_read: int, cache_write: int, output: int) -> float:
        input_units = (
            uncached + cache_read * self.cache_read_factor + cache_write * self.cache_write_factor
        )
        return (input_units * self.input_per_mtok + output * self.output_per_mtok) / 1_000_000


@dataclass(frozen=True)
class PriceTable:
    """The price of each model's tokens: `paid` for Anthropic's models (claude-...) and rows
    that name no model, `by_model` for the models named (by prefix, longest first); any other
    model (a local or OpenAI-compatible one) costs nothing unless named."""

    paid: Prices = Prices()
    by_model: tuple[tuple[str, Prices], ...] = ()

    def of(self, model: str) -> Prices:
        for prefix, prices in sorted(self.by_model, key=lambda item: -len(item[0])):
            if model.startswith(prefix):
                return prices
        if not model or model.lower().startswith("claude"):
            return self.paid
        return FREE

    def cost(self, record: UsageRecord) -> float:
        return self.of(record.model).cost(
            record.input_tokens,
            record.cache_read_tokens,
            record.cache_write_tokens,
            record.output_tokens,
        )


FREE = Prices(input_per_mtok=0.0, output_per_mtok=0.0)


def parse_model_prices(text: str) -> tuple[tuple[str, Prices], ...]:
    """'llama3:0.2:0.2,claude-haiku:1:5' -> (model prefix, prices) pairs; the error names the
    entry that does not parse."""
    found = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        model, _, rest = entry.rpartition(":")
        model, _, first = model.rpartition(":")
        try:
            prices = Prices(input_per_mtok=float(first), output_per_mtok=float(rest))
        except ValueError:
            model = ""
        if not model or prices.input_per_mtok < 0 or prices.output_per_mtok < 0:
            raise ValueError(
                f"MODEL_PRICES entry '{entry}': expected model:INPUT:OUTPUT (USD per million "
                "tokens), e.g. llama3:0:0"
            )
        found.append((model, prices))
    return tuple(found)


@dataclass(frozen=True)
class UsageStats:
    character_id: str
    kind: str
    calls: int
    failed: int
    input_tokens: int  # uncached
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    p50_ms: float
    p95_ms: float
    cost: float

    @property
    def cache_read_share(self) -> float:
        sent = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.cache_read_tokens / sent if sent else 0.0


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1): always a latency that was really observed."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


_TOKEN_FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


def _stats(
    character_id: str, kind: str, rows: list[UsageRecord], prices: PriceTable
) -> UsageStats:
    # Failed calls are counted but kept out of the latencies: they record no provider timing.
    latencies = [r.latency_ms for r in rows if r.ok]
    sums = [sum(getattr(r, f) for r in rows) for f in _TOKEN_FIELDS]
    return UsageStats(
        character_id,
        kind,
        calls=len(rows),
        failed=sum(not r.ok for r in rows),
        input_tokens=sums[0],
        cache_read_tokens=sums[1],
        cache_write_tokens=sums[2],
        output_tokens=sums[3],
        p50_ms=percentile(latencies, 0.50),
        p95_ms=percentile(latencies, 0.95),
        cost=sum(prices.cost(row) for row in rows),
    )


def _grouped(
    records: Iterable[UsageRecord], key: Callable[[UsageRecord], K]
) -> dict[K, list[UsageRecord]]:
    groups: dict[K, list[UsageRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def _kind_rank(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def _table(prices: Prices | PriceTable | None) -> PriceTable:
    return prices if isinstance(prices, PriceTable) else PriceTable(prices or Prices())


def summarize(
    records: Iterable[UsageRecord], prices: Prices | PriceTable | None = None
) -> list[UsageStats]:
    """One row per (character, kind), characters in order, kinds as reply/summary/extraction."""
    table = _table(prices)
    groups = _grouped(records, lambda r: (r.character_id or NO_CHARACTER, r.kind))
    ordered = sorted(groups, key=lambda key: (key[0], _kind_rank(key[1])))
    return [_stats(char, kind, groups[(char, kind)], table) for char, kind in ordered]


def totals(
    records: Iterable[UsageRecord], prices: Prices | PriceTable | None = None
) -> list[UsageStats]:
    """One row per kind over every character, then one over everything."""
    table = _table(prices)
    rows = list(records)
    groups = _grouped(rows, lambda r: r.kind)
    by_kind = [_stats("ALL", kind, groups[kind], table) for kind in sorted(groups, key=_kind_rank)]
    return [*by_kind, _stats("ALL", "all", rows, table)] if rows else []


_HEADER = (
    f"{'character':<20} {'kind':<11} {'calls':>6} {'failed':>6} {'input':>10} "
    f"{'cache_read':>11} {'cache_write':>11} {'output':>9} {'read%':>6} "
    f"{'p50_ms':>8} {'p95_ms':>8} {'cost_usd':>9}"
)


def format_row(row: UsageStats) -> str:
    return (
        f"{row.character_id[:20]:<20} {row.kind[:11]:<11} {row.calls:>6} {row.failed:>6} "
        f"{row.input_tokens:>10} {row.cache_read_tokens:>11} {row.cache_write_tokens:>11} "
        f"{row.output_tokens:>9} {row.cache_read_share:>6.1%} {row.p50_ms:>8.0f} "
        f"{row.p95_ms:>8.0f} {row.cost:>9.4f}"
    )


def format_table(rows: Sequence[UsageStats], total_rows: Sequence[UsageStats] = ()) -> str:
    lines = [_HEADER, *(format_row(row) for row in rows)]
    if total_rows:
        lines += ["-" * len(_HEADER), *(format_row(row) for row in total_rows)]
    return "\n".join(lines)
