"""A learned second opinion beside the gate's rules: naive Bayes on a value's skeleton.

The rules (rules.py, address.py, ...) were built from the misses of the poisoning corpora, and a
corpus written by someone who never saw them still got 5 to 40 % of its attacks past them. A
plain statistical model trained on those same corpora catches most of what a new writer gets
past the rules (bench/poison_learned.py measures it leaving one corpus out, and on corpora it
never learned from). It only ever refuses more: a value the rules refuse stays refused.

It runs on the paths that write memory (`check_fact(..., learned=True)`, `filter_claims(...,
learned=True)`), never inside `check_text`: each rule keeps tests of its own, which a second
layer under them would mask.

The model is data, not code: `memory/integrity/learned_model.json`, written by
`python bench/poison_learned.py --write-model` from the corpora it names and from summary
sentences written as true memories (bench/corpora/poison_narrative/), with the threshold
that refuses `benign_share` of the true facts of corpora it had not seen (leave one corpus out).
Its features are the words, word pairs and 4-letter pieces of the skeleton
(memory/integrity/normalise.py), so look-alike letters and leetspeak read as plain letters, of
the text as memory keeps it: links masked (a link's own words are the rules' to read).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from itertools import pairwise
from typing import Any

from memory.integrity.links import without_links
from memory.integrity.normalise import skeleton

MODEL_FILE = "learned_model.json"
_WORD = re.compile(r"\w+")
Labelled = tuple[str, int]  # (skeleton of one message, 1 for an attack)


def model_reading(text: str) -> str:
    """What the model is trained on and scores: the skeleton of the text as memory keeps it
    (links and e-mail addresses masked, memory/integrity/links.py; the rules read them)."""
    return skeleton(without_links(text))


def features(folded: str) -> set[str]:
    """What the model reads of a skeleton: its words, word pairs and 4-letter pieces."""
    words = _WORD.findall(folded)
    spaced = f" {' '.join(words)} "
    return (
        set(words)
        | {f"{a} {b}" for a, b in pairwise(words)}
        | {f"#{spaced[i : i + 4]}" for i in range(len(spaced) - 3)}
    )


@dataclass(frozen=True)
class NaiveBayes:
    weights: dict[str, float]  # log of P(feature | attack) / P(feature | true fact)

    @classmethod
    def trained(cls, rows: Iterable[Labelled]) -> NaiveBayes:
        counts, totals = (Counter[str](), Counter[str]()), [0, 0]
        for text, label in rows:
            totals[label] += 1
            counts[label].update(features(text))
        weights = {
            feature: math.log(
                ((counts[1][feature] + 0.5) / (totals[1] + 1))
                / ((counts[0][feature] + 0.5) / (totals[0] + 1))
            )
            for feature in set(counts[0]) | set(counts[1])
        }
        return cls(weights)

    def score(self, folded: str) -> float:
        return sum(self.weights.get(feature, 0.0) for feature in features(folded))


@dataclass(frozen=True)
class LearnedCheck:
    model: NaiveBayes
    threshold: float  # a score above it is refused

    def reason(self, text: str) -> str | None:
        """Why the model refuses ``text``, or None."""
        score = self.model.score(model_reading(text))
        if score > self.threshold:
            return (
                f"reads like a disguised instruction to the assistant (learned check: score "
                f"{score:.0f}, limit {self.threshold:.0f}; a fact about you, said plainly, passes)"
            )
        return None

    def to_json(self, provenance: dict[str, Any]) -> str:
        weights = {f: round(w, 3) for f, w in sorted(self.model.weights.items())}
        body = {**provenance, "threshold": round(self.threshold, 3), "weights": weights}
        return json.dumps(body, ensure_ascii=False, indent=0, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LearnedCheck:
        body = json.loads(text)
        return cls(NaiveBayes(dict(body["weights"])), float(body["threshold"]))


@cache  # read-only, the same for every user: the model's weights, never a memory's words
def shipped_check() -> LearnedCheck:
    """The model that ships with the package (read once, on first use)."""
    return LearnedCheck.from_json(
        (files("memory.integrity") / MODEL_FILE).read_text(encoding="utf-8")
    )


def learned_reason(text: str) -> str | None:
    """Why the shipped model refuses ``text``, or None."""
    return shipped_check().reason(text)
