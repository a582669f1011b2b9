"""What every bench shares: the repository's root, percentiles and distributions, targets, and
the one way a bench prints its result (a table for people, one JSON object with --json)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile on the (n - 1) scale; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def distribution_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 and max of durations in seconds, in milliseconds, with the count."""
    return {
        f"p{int(q * 100)}": round(percentile(seconds, q) * 1000, 3) for q in (0.5, 0.95, 0.99)
    } | {"max": round(max(seconds, default=0.0) * 1000, 3), "n": len(seconds)}


def target(name: str, value: float, limit: float, op: str) -> dict[str, Any]:
    """One target of a bench: its figure, its limit and whether it holds."""
    ok = value <= limit if op == "<=" else value >= limit
    return {"name": name, "value": round(value, 4), "limit": limit, "op": op, "pass": ok}


def emit(result: dict[str, Any], table: str, as_json: bool) -> None:
    """With --json stdout holds the one JSON object and the table goes to stderr, for people."""
    if as_json:
        print(table, file=sys.stderr)
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(table)
