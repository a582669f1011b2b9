"""Fragments are decided once per query (does it concern this thread at all?), then per
exchange: a query half-matched everywhere gets none, a query one exchange answers gets it
and the weaker ones that pass the lower bar."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.engine.tokens import TokenEstimator
from memory.search.retrieval import Exchange, RankConfig, select_fragments

WHEN = datetime(2026, 3, 2, tzinfo=UTC)


def exchange(turn_id: int, score: float, bm25: float) -> Exchange:
    return Exchange((turn_id,), WHEN, f"User: line {turn_id}", score, bm25)


def chosen(ranked: list[Exchange], config: RankConfig) -> list[int]:
    fragments = select_fragments(ranked, 600, 5, config, TokenEstimator())
    return [f.turn_ids[0] for f in fragments]


def test_the_gate_decides_once_per_query() -> None:
    config = RankConfig(gate=0.45, threshold=0.2, relative=0.3)
    # Every exchange matches a little of the query: the usual shape of a question about
    # another conversation. None passes the gate, so none is recalled.
    vague = [exchange(1, 0.4, 3.0), exchange(2, 0.3, 2.5), exchange(3, 0.25, 2.0)]
    assert chosen(vague, config) == []
    # One exchange matches most of it: the query concerns this thread, and the weaker
    # exchanges above the threshold and the relative floor come along.
    answered = [exchange(4, 0.8, 5.0), *vague, exchange(5, 0.9, 1.0)]
    assert chosen(answered, config) == [4, 1, 2, 3]
    # The gate looks at the best hits only, not at a strong match far down the ranking.
    far = [*vague, exchange(6, 0.1, 1.9), exchange(7, 0.1, 1.8), exchange(8, 0.9, 1.7)]
    assert chosen(far, config) == []


def test_an_exchange_below_the_threshold_stays_out_even_above_the_floor() -> None:
    config = RankConfig(gate=0.45, threshold=0.2, relative=0.3)
    # Exchange 9 ranks high by bm25 (well above the relative floor) but matches a tenth of
    # the query: the threshold alone keeps it out.
    ranked = [exchange(4, 0.8, 5.0), exchange(9, 0.1, 4.0), exchange(10, 0.5, 3.0)]
    assert chosen(ranked, config) == [4, 10]
