"""The benchmarks' one entry: `python -m bench` lists the suites, `python -m bench NAME [ARGS]`
runs one (its own `--help` lists its options; most take `--json`).

Every suite is a module of this package with a `main(argv)`; the other modules are the parts
they share (common.py for every bench, load_common.py for the load benches, the scripted
models, the store builder). docs/benchmarks.md has each suite's figures and targets.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Suite:
    name: str
    module: str
    what: str


SUITES = (
    Suite("context_growth", "bench.context_growth",
          "prompt tokens and cache-read share over a 300-turn LoCoMo conversation (DATA)"),
    Suite("scene", "bench.scene",
          "a group scene: calls per message, prompt growth and cache per character, memory rules"),
    Suite("profile", "bench.profile",
          "extraction calls per session and the profile against its budget, on LoCoMo (DATA)"),
    Suite("journey", "bench.journey",
          "the journey on LoCoMo: calls, injected faults caught, citations valid (DATA)"),
    Suite("locomo_retrieval", "bench.locomo_retrieval",
          "evidence recall@5/@10 of retrieval per LoCoMo category (DATA)"),
    Suite("locomo_gate", "bench.locomo_gate",
          "true memories the gate refuses: LoCoMo's observations and summaries"),
    Suite("poison", "bench.poison",
          "memory poisoning: attacks that reach the next prompt, true facts lost, per path"),
    Suite("poison_learned", "bench.poison_learned",
          "the gate's learned check, leaving one corpus out; writes the shipped model"),
    Suite("throughput", "bench.throughput",
          "messages per second with many concurrent users and a fixed-latency model"),
    Suite("throughput_floor", "bench.throughput_floor",
          "the same workload with only the store: the most this machine allows"),
    Suite("overhead", "bench.overhead",
          "the bot's own work per message at 10^3, 10^5 and 10^6 stored turns"),
    Suite("memory_bound", "bench.memory_bound",
          "resident memory after 10,000 different users"),
    Suite("scaleout", "bench.scaleout",
          "one SQLite process against 1 and 2 workers on PostgreSQL: capacity, CPU per message"),
    Suite("purge_traffic", "bench.purge_traffic",
          "the purge after a forget under steady writers: its length and the writers' stalls"),
    Suite("budget", "bench.budget",
          "budgets under a burst on PostgreSQL and SQLite: overspend, calls after exhaustion"),
    Suite("canon", "bench.canon",
          "canon proposals with an improvising scripted model: traps kept, contradictions marked"),
)  # fmt: skip


def listing() -> str:
    width = max(len(s.name) for s in SUITES)
    lines = ["python -m bench NAME [--help | ARGS]   (DATA: ../shared/data/locomo_dev.json)", ""]
    lines += [f"  {s.name:<{width}}  {s.what}" for s in SUITES]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    by_name = {s.name: s for s in SUITES}
    suite = by_name.get(args[0].removesuffix(".py").replace("-", "_"))
    if suite is None:
        valid = ", ".join(by_name)
        print(f"bench: no suite named {args[0]!r}; the suites are: {valid}", file=sys.stderr)
        return 2
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    sys.argv = [f"python -m bench {suite.name}", *args[1:]]  # argparse names the suite
    result = importlib.import_module(suite.module).main(args[1:])
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
