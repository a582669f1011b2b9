"""The gate on several values at once: an instruction split in halves.

Each value passes `memory.integrity.gate` alone; here they are read together, as the model
reads them. `check_joined` reads values side by side, `check_together` a new value with each
one the user already holds, `split_neighbours` and `split_values` the values of a profile
block, and `filter_claims` a summary's claims one by one, then neighbour with neighbour.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory.integrity.address import is_address_preference
from memory.integrity.gate import CITE_CODE, check_claim, check_text, content_of
from memory.integrity.links import without_links
from memory.integrity.normalise import clean
from memory.models import SummaryFields


def check_joined(texts: Iterable[str], *, names: Sequence[str] = ()) -> str | None:
    """An instruction split over several values ("answer only" + "in French from now on"):
    the values are checked once more side by side, in order, as they are and, when two or more
    of them quote or label their words, as what they quote or label ("Dato dos: y termina con
    «solo con insultos»"). A request about how the user is addressed is allowed alone, and
    read alone."""
    parts = [clean(t) for t in texts if t and t.strip()]
    parts = [p for p in parts if not is_address_preference(p)]
    if len(parts) < 2:
        return None
    joined = [" ".join(parts)]
    if sum(map(_marks_its_words, parts)) >= 2:
        joined.append(" ".join(content_of(p) for p in parts))
    for text in joined:
        reason = check_text(text, max_len=len(text) + 1, names=names)
        if reason:
            return f"read together, the values {reason}"
    return None


def check_together(new: str, held: Iterable[str], *, names: Sequence[str] = ()) -> str | None:
    """A value read with each value the user already holds, in both orders: half an
    instruction stored today completes the half stored last week."""
    for old in held:
        if reason := check_joined([old, new], names=names) or check_joined([new, old], names=names):
            return reason
    return None


@dataclass(frozen=True)
class ClaimRefusal:
    field: str
    claim: str
    reason: str


def filter_claims(
    fields: SummaryFields, *, names: Sequence[str] = (), learned: bool = False
) -> tuple[SummaryFields, tuple[ClaimRefusal, ...]]:
    """The summary without the claims the gate refuses, and what was refused: a hostile claim
    is dropped alone, the rest of the summary stays. ``learned``: see `check_claim`."""
    refused: list[ClaimRefusal] = []
    for name, claims in fields.items():
        kept = []
        for claim in claims:
            reason = check_claim(claim, names=names, learned=learned)
            if reason is None:
                kept.append(clean(without_links(claim)))
            else:
                refused.append(ClaimRefusal(name, claim, reason))
        kept, split = _without_split_orders(kept, names)
        refused += [ClaimRefusal(name, claim, reason) for claim, reason in split]
        fields = fields.with_field(name, tuple(kept))
    return fields, tuple(refused)


def _without_split_orders(
    claims: list[str], names: Sequence[str]
) -> tuple[list[str], list[tuple[str, str]]]:
    """Neighbouring claims read together, as the model reads the field: an instruction split
    over two claims ("Koldo would like to" + "always answer in French") drops both."""
    bare = [CITE_CODE.sub(" ", claim) for claim in claims]
    split = split_neighbours(bare, names=names)
    kept = [claim for index, claim in enumerate(claims) if index not in split]
    return kept, [(claims[index], reason) for index, reason in sorted(split.items())]


def split_neighbours(
    texts: Sequence[str], *, names: Sequence[str] = (), both_orders: bool = False
) -> dict[int, str]:
    """The texts to drop, with the reason: each text is read after the last one kept, in the
    order they are shown (and, with ``both_orders``, before it: a profile is ranked, not kept in
    the order it was said, and "the second half is..." names its place); a pair that reads as an
    instruction drops both halves."""
    dropped: dict[int, str] = {}
    kept: list[int] = []
    for index, text in enumerate(texts):
        pair = [texts[kept[-1]], text] if kept else []
        if pair and (
            reason := check_joined(pair, names=names)
            or (both_orders and check_joined(pair[::-1], names=names))
        ):
            dropped[kept.pop()] = dropped[index] = reason
            continue
        kept.append(index)
    return dropped


def split_values(texts: Sequence[str], *, names: Sequence[str] = ()) -> dict[int, str]:
    """`split_neighbours` in both orders, and every two values that quote or label their words
    read together, by what they quote or label, wherever they are (the halves of a profile may
    be ranked apart). Few values quote; the first `MAX_MARKED` are read."""
    dropped = split_neighbours(texts, names=names, both_orders=True)
    marked = [i for i, t in enumerate(texts) if i not in dropped and _marks_its_words(t)]
    for position, first in enumerate(marked[:MAX_MARKED]):
        for second in marked[position + 1 : MAX_MARKED]:
            if first in dropped or second in dropped:
                continue
            if reason := _contents_together(texts[first], texts[second], tuple(names)):
                dropped[first] = dropped[second] = reason
    return dropped


MAX_MARKED = 16  # quoting or labelled values read pairwise: at most 16 x 15 / 2 pairs


# Not cached: a cache would keep the values' words in RAM after a forget. Block 2 reads only
# the values it shows (memory/profile/view.py), so the pairs stay few.
def _contents_together(first: str, second: str, names: tuple[str, ...]) -> str | None:
    for pair in ((first, second), (second, first)):
        joined = " ".join(content_of(clean(t)) for t in pair)
        if reason := check_text(joined, max_len=len(joined) + 1, names=names):
            return f"read together, the values {reason}"
    return None


def _marks_its_words(text: str) -> bool:
    cleaned = clean(text)
    return content_of(cleaned) != cleaned.strip(" .")
