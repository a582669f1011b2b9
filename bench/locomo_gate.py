"""What the memory gate refuses of real conversation memory: LoCoMo's observations and summaries.

LoCoMo ships what an LLM drew from each session of long conversations between two friends. None
of it is an attack, so everything the gate refuses here is a true memory lost (the other side
of bench/poison.py, on text nobody wrote to look like an order). As in bench/locomo_memory.py,
speaker_a is the user and speaker_b the character:

- speaker_a's observations are profile facts (`check_fact`, key `event`, kind episodic);
- speaker_b's observations and every sentence of the session summaries are summary claims
  (`check_claim`);
both with speaker_b's name as the character's name. The QA annotations are never read.

Usage: .venv/bin/python bench/locomo_gate.py [DATA_PATH] [--json] [--show N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memory.integrity.gate import check_claim, check_fact  # noqa: E402
from memory.integrity.legible import load_vocabularies  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo_dev.json"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def judged(conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """Every fact and claim of the conversations through the gate: counts and the refusals."""
    facts = claims = 0
    refused: list[dict[str, str]] = []
    for conversation in conversations:
        user = conversation["conversation"]["speaker_a"]
        character = conversation["conversation"]["speaker_b"]
        names = (character,)
        for observed in conversation["observation"].values():
            for text, _ in observed.get(user, []):
                facts += 1
                verdict = check_fact("event", text, kind="episodic", names=names, learned=True)
                if verdict.reason:
                    refused.append({"kind": "fact", "text": text, "reason": verdict.reason})
            for text, _ in observed.get(character, []):
                claims += 1
                if reason := check_claim(text, names=names, learned=True):
                    refused.append({"kind": "claim", "text": text, "reason": reason})
        for summary in conversation["session_summary"].values():
            for sentence in _SENTENCE_END.split(summary):
                claims += 1
                if reason := check_claim(sentence, names=names, learned=True):
                    refused.append({"kind": "claim", "text": sentence, "reason": reason})
    refused_facts = sum(r["kind"] == "fact" for r in refused)
    return {
        "facts": facts,
        "facts_refused": refused_facts,
        "claims": claims,
        "claims_refused": len(refused) - refused_facts,
        "refused": refused,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--show", type=int, default=10, help="refusals to list (table only)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_vocabularies()
    result = judged(json.loads(args.data.read_text(encoding="utf-8")))
    result["run_seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return 0
    print(f"facts refused: {result['facts_refused']} of {result['facts']}")
    print(f"claims refused: {result['claims_refused']} of {result['claims']}")
    for row in result["refused"][: args.show]:
        print(f"  {row['kind']}: {row['text'][:90]!r} -> {row['reason'][:80]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
