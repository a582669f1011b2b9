"""The LoCoMo retrieval bench's report as text: one table, or both backends side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LEVER_KEYS = ("recall_at_5", "recall_at_10", "fragment_recall", "foreign_fragment_rate")


def table(report: dict[str, Any]) -> str:
    columns = ["questions", "recall_at_5", "recall_at_10", "recall_600_tokens"]
    columns += ["fragment_recall", "fragments_per_question", "foreign_fragment_rate"]
    heads = ["n", "R@5", "R@10", "R@600tok", "frag R", "frag/q", "foreign"]
    lines = [f"{'':24}" + "".join(f"{h:>9}" for h in heads)]

    def row(name: str, figures: dict[str, Any]) -> None:
        cells = "".join(
            f"{figures.get(c) if figures.get(c) is not None else '-':>9}" for c in columns
        )
        lines.append(f"{name:24}{cells}")

    for label, part in (("FIT", report["fit"]), ("HELD-OUT", report)):
        if not part.get("questions"):
            continue
        row(f"{label} overall", part)
        for name, figures in part["by_category"].items():
            row(f"  {name}", figures)
        lines.append(
            f"{'':24}search latency p50 {part['search_p50_ms']} ms, p95 {part['search_p95_ms']} ms"
        )
    lines.append(
        f"fit: {', '.join(report['fit_conversations']) or '-'}; "
        f"held out: {', '.join(report['held_out_conversations'])}"
    )
    lines.append(f"config: {report['config']}")
    memory = report.get("memory")
    lines.append(f"memory: {memory}" if memory else "memory: none (--no-memory, the turns only)")
    return "\n".join(lines)


def side_by_side(reports: dict[str, Any]) -> str:
    keys = ["recall_at_5", "recall_at_10", "recall_600_tokens", "fragment_recall"]
    keys += ["foreign_fragment_rate", "search_p50_ms", "search_p95_ms"]
    lines = [f"{'held-out':24}{'sqlite':>10}{'postgres':>10}{'diff':>10}"]
    for key in keys:
        a, b = reports["sqlite"].get(key), reports["postgres"].get(key)
        if isinstance(a, int | float) and isinstance(b, int | float):
            lines.append(f"{key:24}{a:>10.3f}{b:>10.3f}{b - a:>+10.3f}")
    return "\n".join(lines)


def journey_lever(
    figures: Mapping[tuple[str, bool], dict[str, Any]],
    chronicles: Mapping[str, int],
    calls: int,
) -> dict[str, Any]:
    """The recall lever (--journey): per split, the figures without and with the journey's
    citations lent to search, from `summarise`'s reports keyed by (split, lent)."""
    lever: dict[str, Any] = {"chronicles": dict(chronicles), "calls": calls}
    for (split, lent), report in sorted(figures.items()):
        shown = {key: report.get(key) for key in LEVER_KEYS}
        shown["recall_at_10_by_category"] = {
            name: part["recall_at_10"] for name, part in report.get("by_category", {}).items()
        }
        lever.setdefault(split, {})["with" if lent else "without"] = shown
    return lever
