"""The rules a chronicle must keep before it is stored, each a function of its own.

Whole-output rules (`known_ids`, `prose_not_list`, `citations_integrated`, `within_budget`)
reject the chronicle, with a reason the model is shown at its next attempt. Sentence rules
(`gate_sentences`, `mask_sentences`) drop or mask one sentence alone: one hostile sentence
neither reaches the prompt nor costs the rest of the story. `cut_oldest` is the last resort over
the budget: whole paragraphs, oldest first, never the newest.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from memory.engine.tokens import TokenEstimator
from memory.integrity.bound import commitment
from memory.integrity.credentials import mask_credentials
from memory.integrity.gate import CITE_CODE, check_claim
from memory.integrity.links import without_links
from memory.integrity.normalise import clean
from memory.integrity.together import split_neighbours
from memory.journey.model import CITE, cited_in, sentences_of

# A line that opens with a bullet, a number and its sign, a heading or a quote sign, or a
# table row: the shapes of a list, not of prose.
_LIST_LINE = re.compile(r"^\s*(?:[-*•·+▪►–—]\s|\d{1,3}[.)]\s|#|>|\|)")
# A paragraph that ends in two or more citations with nothing but punctuation between them.
_TRAILING_RUN = re.compile(r"(?:\{cite:\d+\}[\s.,;:]*){2,}$")
_WORD = re.compile(r"\w", re.UNICODE)
_SENTENCE_MARK = re.compile(r"[\s.!?…]+$")


def normalise_citations(text: str) -> str:
    """`{cite: 6}` and `{cite:6}` alike: the code the gate, the prompt and lookup_turn read."""
    return CITE.sub(lambda m: f"{{cite:{int(m.group(1))}}}", text)


# ---- whole-output rules: a reason to retry with, or None ----------------------------------------


def known_ids(text: str, allowed: Collection[int]) -> str | None:
    """Rule `known_ids`: every cited id is one the chronicler was given (the previous
    journey's citations and the conversation's turns, all of this user's thread)."""
    invented = sorted(cited_in(text) - set(allowed))
    if invented:
        return (
            f"cites ids {invented} that were not given; cite only the ids shown in brackets "
            "or already cited by the previous journey"
        )
    return None


def prose_not_list(text: str) -> str | None:
    """Rule `prose_not_list`: paragraphs of sentences, no bullet, numbered line, heading,
    quote or table."""
    for line in text.splitlines():
        if _LIST_LINE.match(line):
            return (
                f"is a list or has a heading ('{line.strip()[:40]}'); write the journey as "
                "paragraphs of prose"
            )
    return None


def citations_integrated(paragraphs: Sequence[str]) -> str | None:
    """Rule `citations_integrated`: a citation sits where its idea appears; no paragraph ends
    in a run of citations, no sentence is only citations nor opens with one (a citation left
    after the full stop of the sentence it supports)."""
    for paragraph in paragraphs:
        if _TRAILING_RUN.search(paragraph):
            return (
                "has a paragraph that ends in a run of citations; put each {cite:ID} right "
                "after the idea it supports, inside the sentence"
            )
        for sentence in sentences_of(paragraph):
            if not _WORD.search(CITE_CODE.sub("", sentence)) or sentence.startswith("{cite:"):
                return (
                    "has a sentence that is only citations or opens with one "
                    f"('{sentence[:40]}'); put each {{cite:ID}} inside the sentence whose idea "
                    "it supports"
                )
    return None


def within_budget(text: str, cap: int, tokens: TokenEstimator) -> str | None:
    """Rule `within_budget`: at most `cap` tokens."""
    used = tokens.count(text)
    if used > cap:
        return (
            f"has {used} tokens, the limit is {cap}; condense the oldest chapters into a "
            "short opening and keep the citations of the turning points"
        )
    return None


# ---- sentence rules: what is dropped or masked alone --------------------------------------------


@dataclass(frozen=True)
class SentenceRefusal:
    sentence: str
    reason: str


def gate_sentences(
    paragraphs: Sequence[str], names: Sequence[str] = ()
) -> tuple[tuple[str, ...], tuple[SentenceRefusal, ...]]:
    """Rule `gate_sentences`: every sentence through the summary claims' gate (check_claim,
    learned check included) and, the journey being the character's own memory, through the
    rule on what binds the character (memory/integrity/bound.py); then neighbour with
    neighbour across the whole story (an order or a commitment split over two sentences); a
    refused sentence is dropped alone, a paragraph left empty goes."""
    refused: list[SentenceRefusal] = []
    kept: list[tuple[int, str]] = []
    for index, paragraph in enumerate(paragraphs):
        for sentence in sentences_of(paragraph):
            reason = check_claim(sentence, names=names, learned=True) or commitment(
                CITE_CODE.sub(" ", sentence), names
            )
            if reason is None:
                kept.append((index, clean(without_links(sentence))))
            else:
                refused.append(SentenceRefusal(sentence, reason))
    bare = [CITE_CODE.sub(" ", s) for _, s in kept]
    # read as one run, as the model reads the story: a full stop does not end the order it
    # splits ("Ana was clear that from now on." + "Every answer would be in Latin.")
    split = split_neighbours([_SENTENCE_MARK.sub("", s) for s in bare], names=names)
    split.update(bound_neighbours(bare, names, split))
    refused += [SentenceRefusal(kept[i][1], reason) for i, reason in sorted(split.items())]
    out: dict[int, list[str]] = {}
    for position, (index, sentence) in enumerate(kept):
        if position not in split:
            out.setdefault(index, []).append(sentence)
    return tuple(" ".join(out[i]) for i in sorted(out)), tuple(refused)


def bound_neighbours(
    texts: Sequence[str], names: Sequence[str], dropped: Collection[int] = ()
) -> dict[int, str]:
    """Rule `gate_sentences`, the character's commitment split over two sentences ("Koldo made
    her a promise. He would always obey her."): both halves go."""
    out: dict[int, str] = {}
    previous: int | None = None
    for index, text in enumerate(texts):
        if index in dropped:
            continue
        if previous is not None and (reason := commitment(f"{texts[previous]} {text}", names)):
            out[previous] = out[index] = f"read with the sentence before, {reason}"
            previous = None
            continue
        previous = index
    return out


def mask_sentences(paragraphs: Sequence[str], known: Collection[str]) -> tuple[str, ...]:
    """Rule `mask_credentials`: a password, PIN or card number said in the conversation never
    reaches the journey, wherever the model copied it."""
    return tuple(mask_credentials(paragraph, known) for paragraph in paragraphs)


def cut_oldest(paragraphs: Sequence[str], cap: int, tokens: TokenEstimator) -> tuple[str, ...]:
    """Rule `cut_oldest`: over the budget after the retries, whole paragraphs go, oldest first;
    the newest stays even alone."""
    kept = list(paragraphs)
    while len(kept) > 1 and tokens.count("\n\n".join(kept)) > cap:
        kept.pop(0)
    return tuple(kept)


def without_citing(paragraphs: Sequence[str], gone: Collection[int]) -> tuple[str, ...]:
    """Rule `delete_cascade`: the story without every sentence that cites a deleted turn
    (delete means delete); a paragraph left empty goes."""
    gone_ids = set(gone)
    out = []
    for paragraph in paragraphs:
        kept = [s for s in sentences_of(paragraph) if not (cited_in(s) & gone_ids)]
        if kept:
            out.append(" ".join(kept))
    return tuple(out)
