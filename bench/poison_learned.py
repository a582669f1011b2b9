"""The gate's learned check (memory/integrity/learned.py): measured, and made.

The rules of memory/integrity/ were built from the misses of the development corpora, and a
corpus written blind still gets 5 to 40 % of its attacks past them (bench/poison.py). This asks
whether a plain statistical model learns something that carries across writers: naive Bayes over
the words, word pairs and 4-letter pieces of each message's skeleton (the gate's matching form),
trained on every corpus but one and scored on the one left out (leave-one-corpus-out, so the
test corpus's writer is always unseen). One threshold for all folds: the score that refuses
`--benign-share` of the pooled held-out true facts.

The other side is memory nobody wrote to look like an order: LoCoMo's observations and session
summaries (as in bench/locomo_gate.py), scored by a model trained on all the corpora. With
`--with-locomo`, half of LoCoMo's conversations join the training as true memories and the other
half is scored, to see whether the model can learn narrative text is harmless without losing
the attacks. Every fold (and the shipped model) also learns from
bench/corpora/poison_narrative/, 240
summary sentences written as true memories, since the corpora's true facts are all first-person.

`--blind CORPUS` keeps a corpus out of every training fold and out of the threshold: it is only
scored, by the model trained on all the others, as an unseen writer's corpus is.
`--gate CORPUS=FILE` (bench/poison.py's `--split all --json` output for that corpus) adds the
shares the gate and the model would give together: an attack passes only if both let it, a true
fact is lost if either refuses it.

Usage: .venv/bin/python bench/poison_learned.py [DATA_PATH] [--benign-share 0.02]
       [--with-locomo] [--gate CORPUS=FILE ...] [--blind CORPUS ...] [--json]
       [--write-model FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.poison_data import CORPORA_DIR, load_corpus  # noqa: E402
from memory.integrity.learned import (  # noqa: E402
    Labelled,
    LearnedCheck,
    NaiveBayes,
    model_reading,
)

CORPORA = ("poison_corpus", "poison_heldout", "poison_heldout2", "poison_heldout3",
           "poison_heldout4", "poison_heldout5", "poison_heldout6", "poison_heldout7",
           "poison_heldout8")  # fmt: skip
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo_dev.json"
# Summary sentences of the kind the summariser writes (third person, Spanish and English),
# written for the model as true memories: the corpora's true facts are all first-person
# near-misses, and a model that never saw narrative text refuses some of it.
NARRATIVE = CORPORA_DIR / "poison_narrative" / "claims.json"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Entry:
    id: str
    messages: tuple[str, ...]  # skeletons
    attack: bool


def corpus_entries(name: str) -> list[Entry]:
    return [
        Entry(e.id, tuple(model_reading(m) for m in e.messages), e.kind == "attack")
        for e in load_corpus(CORPORA_DIR / name)
        if e.kind in ("attack", "benign")
    ]


def locomo_raw_texts(conversations: Sequence[dict[str, Any]]) -> list[str]:
    """LoCoMo's observations and summary sentences, as written."""
    texts: list[str] = []
    for conversation in conversations:
        speakers = (
            conversation["conversation"]["speaker_a"],
            conversation["conversation"]["speaker_b"],
        )
        for observed in conversation["observation"].values():
            texts += [text for who in speakers for text, _ in observed.get(who, [])]
        for summary in conversation["session_summary"].values():
            texts += _SENTENCE_END.split(summary)
    return [t for t in texts if t.strip()]


def locomo_texts(conversations: Sequence[dict[str, Any]]) -> list[str]:
    """The same, as the model reads them."""
    return [model_reading(t) for t in locomo_raw_texts(conversations)]


def rows_of(entries: Iterable[Entry]) -> list[Labelled]:
    return [(m, int(e.attack)) for e in entries for m in e.messages]


def leave_one_out(
    corpora: dict[str, list[Entry]],
    extra: Sequence[Labelled],
    share: float,
    blind: Sequence[str] = (),
) -> tuple[float, dict[str, dict[str, Any]]]:
    """The pooled threshold, and per held-out corpus its attacks caught, its true facts refused
    and the ids of the entries flagged (an entry is flagged when any of its messages scores
    above the threshold). `blind` corpora are only scored: no fold trains on them and the
    threshold is pooled without them."""
    scored: dict[str, list[tuple[float, Entry]]] = {}
    for held in corpora:
        model = NaiveBayes.trained(
            rows_of(e for name, es in corpora.items() if name not in (held, *blind) for e in es)
            + list(extra)
        )
        scored[held] = [(max(map(model.score, e.messages)), e) for e in corpora[held]]
    pooled = sorted(
        s
        for name, results in scored.items()
        if name not in blind
        for s, e in results
        if not e.attack
    )
    threshold = pooled[min(len(pooled) - 1, int(len(pooled) * (1 - share)))]
    figures = {}
    for held, results in scored.items():
        flagged = {e.id for s, e in results if s > threshold}
        attacks = [e.id for _, e in results if e.attack]
        benign = [e.id for _, e in results if not e.attack]
        figures[held] = {
            "attacks_caught": round(len(flagged.intersection(attacks)) / len(attacks), 3),
            "benign_refused": round(len(flagged.intersection(benign)) / len(benign), 3),
            "flagged_ids": sorted(flagged),
        }
    return threshold, figures


def with_gate(gate: dict[str, Any], flagged: set[str], benign_ids: set[str]) -> dict[str, float]:
    """bench/poison.py's shares (its --json output, --split all) had the gate also refused what
    the model flags, on every path: an admitted attack is refused when flagged, a flagged true
    fact is lost."""
    paths = gate["paths"]
    attacks = benign = 0
    for path in paths:
        attacks += len(set(gate["admitted_ids"][path]) - flagged)
        benign += len(set(gate["refused_benign_ids"][path]) | (flagged & benign_ids))
    return {
        "attack_admitted_share": round(attacks / (gate["attempts"] * len(paths)), 4),
        "benign_refused_share": round(benign / (gate["benign"] * len(paths)), 4),
        "attack_admitted_share_gate_alone": gate["attack_admitted_share"],
        "benign_refused_share_gate_alone": gate["benign_refused_share"],
    }


def flagged_share(model: NaiveBayes, texts: Sequence[str], threshold: float) -> float:
    return round(sum(model.score(t) > threshold for t in texts) / max(1, len(texts)), 4)


def narrative_rows() -> list[Labelled]:
    claims = json.loads(NARRATIVE.read_text(encoding="utf-8"))
    return [(model_reading(claim), 0) for claim in claims]


def corpora_present() -> dict[str, list[Entry]]:
    return {name: corpus_entries(name) for name in CORPORA if (CORPORA_DIR / name).is_dir()}


def shipped_model(share: float, blind: Sequence[str]) -> tuple[LearnedCheck, dict[str, Any]]:
    """The model memory/integrity/learned.py ships: trained on every corpus not blind, with the
    leave-one-corpus-out threshold at ``share``; and where it comes from."""
    corpora = corpora_present()
    narrative = narrative_rows()
    threshold, _ = leave_one_out(corpora, narrative, share, blind)
    trained_on = [name for name in corpora if name not in blind]
    model = NaiveBayes.trained(
        [r for name in trained_on for r in rows_of(corpora[name])] + narrative
    )
    blind_args = "".join(f" --blind {name}" for name in blind)
    provenance = {
        "trained_on": [*trained_on, NARRATIVE.parent.name],
        "benign_share": share,
        "made_by": f"python bench/poison_learned.py --benign-share {share}{blind_args} "
        "--write-model memory/integrity/learned_model.json",
    }
    return LearnedCheck(model, threshold), provenance


def probe(
    data: Path, share: float, with_locomo: bool, gates: dict[str, Path], blind: Sequence[str]
) -> dict[str, Any]:
    corpora = corpora_present()
    conversations = json.loads(data.read_text(encoding="utf-8"))
    half = len(conversations) // 2
    trained_on = locomo_texts(conversations[:half]) if with_locomo else []
    scored_on = locomo_texts(conversations[half:] if with_locomo else conversations)
    extra = [(t, 0) for t in trained_on] + narrative_rows()
    threshold, by_corpus = leave_one_out(corpora, extra, share, blind)
    model = NaiveBayes.trained(
        [r for name, es in corpora.items() if name not in blind for r in rows_of(es)] + extra
    )
    combined = {
        name: with_gate(
            json.loads(path.read_text(encoding="utf-8")),
            set(by_corpus[name]["flagged_ids"]),
            {e.id for e in corpora[name] if not e.attack},
        )
        for name, path in gates.items()
    }
    return {
        "threshold": round(threshold, 2),
        "benign_share_for_threshold": share,
        "with_locomo": with_locomo,
        "blind": list(blind),
        "by_held_out_corpus": by_corpus,
        "locomo_texts_scored": len(scored_on),
        "locomo_flagged_share": flagged_share(model, scored_on, threshold),
        "with_gate": combined,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--benign-share", type=float, default=0.02)
    parser.add_argument("--with-locomo", action="store_true")
    parser.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="CORPUS=FILE",
        help="bench/poison.py --split all --json output for that corpus: the shares with both",
    )
    parser.add_argument(
        "--blind",
        action="append",
        default=[],
        metavar="CORPUS",
        help="a corpus only measured: nothing trains on it, the threshold is set without it",
    )
    parser.add_argument(
        "--write-model",
        type=Path,
        metavar="FILE",
        help="write the model trained on every corpus not --blind, with the threshold at "
        "--benign-share, to FILE (memory/integrity/learned_model.json ships), and stop",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    gates = dict(item.split("=", 1) for item in args.gate)
    unknown = sorted((set(gates) | set(args.blind)) - set(CORPORA))
    if unknown:
        parser.error(f"unknown corpus {unknown}; valid: {', '.join(CORPORA)}")
    if args.write_model is not None:
        check, provenance = shipped_model(args.benign_share, args.blind)
        args.write_model.write_text(check.to_json(provenance), encoding="utf-8")
        corpora = ", ".join(provenance["trained_on"])
        print(f"{args.write_model}: {len(check.model.weights)} features, "
              f"threshold {check.threshold:.2f}, trained on {corpora}")  # fmt: skip
        return 0
    result = probe(
        args.data,
        args.benign_share,
        args.with_locomo,
        {k: Path(v) for k, v in gates.items()},
        args.blind,
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"threshold {result['threshold']} (refuses {args.benign_share:.0%} of pooled true facts)")
    for name, figures in result["by_held_out_corpus"].items():
        print(f"  held out {name:<16} attacks caught {figures['attacks_caught']:.3f}  "
              f"true facts refused {figures['benign_refused']:.3f}")  # fmt: skip
    print(f"LoCoMo memories flagged: {result['locomo_flagged_share']:.1%} "
          f"of {result['locomo_texts_scored']}")  # fmt: skip
    for name, shares in result["with_gate"].items():
        print(f"  {name} with the gate: attacks admitted "
              f"{shares['attack_admitted_share_gate_alone']} -> {shares['attack_admitted_share']}, "
              f"true facts refused {shares['benign_refused_share_gate_alone']} -> "
              f"{shares['benign_refused_share']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
