"""Anchors: the safety net that keeps a value the user gave (an order number, an amount, a date,
a phone) in canon when the summary lost it: the value and the one listed noun that names it,
never the user's sentence, so an anchor cannot carry an instruction; in one linear pass."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from memory.integrity.credentials import credential_values, find_credentials
from memory.integrity.gate import check_claim
from memory.models import SummaryFields, Turn

# An anchor is a value that must survive verbatim (an order number, an amount, a date, a phone:
# 3+ digits) and at most the one noun before it that names it, from this list: never the user's
# sentence, so an anchor cannot carry an instruction. Folded: lower case, no accents.
# fmt: off
ANCHOR_LABELS = frozenset({
    "pedido", "order", "factura", "invoice", "referencia", "reference", "ref", "localizador",
    "reserva", "booking", "reservation", "billete", "ticket", "vuelo", "flight", "tren", "train",
    "habitacion", "room", "mesa", "table", "telefono", "movil", "phone", "mobile", "importe",
    "amount", "precio", "price", "total", "presupuesto", "budget", "deuda", "debt", "sueldo",
    "salary", "alquiler", "rent", "fecha", "date", "cita", "appointment", "expediente", "caso",
    "case", "matricula", "plate", "portal", "piso", "flat", "calle", "street", "postal", "envio",
    "shipment", "seguimiento", "tracking", "paquete", "package", "parcel", "cliente", "customer",
    "socio", "member", "poliza", "policy", "contrato", "contract",
})
# fmt: on
# Words allowed between a label and its value ("pedido nº 48213", "order number 48213").
# fmt: off
_ANCHOR_FILLER = frozenset({
    "n", "nº", "n°", "no", "num", "numero", "number", "#", "de", "del", "el", "la", "es", "is",
    "mi", "my", "the", "of",
})
# fmt: on
_ANCHOR_VALUE = re.compile(r"[\w€$£#./:+-]{1,32}")  # a whole token; one bounded repeat
_WORD_IN_VALUE = re.compile(r"[^\W\d_]{5}")  # five letters in a row: a word, not a value
_TOKEN = re.compile(r"\S+")
_EDGE = "\"'«»“”‘’`()[]{}<>,;:!?¿¡."
# Units after an amount, kept with it ("300 euros"); like the labels, a fixed list.
ANCHOR_UNITS = frozenset({"euros", "euro", "eur", "dolares", "dollars", "usd", "libras", "pounds"})
ANCHOR_LABEL_WINDOW = 3  # tokens looked at before a value for its label
ANCHOR_VALUE_GROUPS = 4  # "612 345 678": digit groups joined into one value
MAX_NEW_ANCHORS = 3


@dataclass(frozen=True, slots=True)
class _Word:
    start: int
    end: int
    text: str


def _words(text: str) -> list[_Word]:
    found = []
    for match in _TOKEN.finditer(text):
        stripped = match.group(0).strip(_EDGE)
        offset = match.group(0).find(stripped) if stripped else 0
        found.append(
            _Word(match.start() + offset, match.start() + offset + len(stripped), stripped)
        )
    return found


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _is_value(word: str) -> bool:
    return (
        len(word) <= 32
        and bool(_ANCHOR_VALUE.fullmatch(word))
        and any(ch.isdigit() for ch in word)
        and not _WORD_IN_VALUE.search(word)
    )


def _label_before(words: list[_Word], index: int) -> str | None:
    """The label noun among the few words before a value, skipping "nº", "de", "es"...; the
    first other word ends the search."""
    for word in reversed(words[max(index - ANCHOR_LABEL_WINDOW, 0) : index]):
        folded = _fold(word.text)
        if folded in ANCHOR_LABELS:
            return folded
        if folded not in _ANCHOR_FILLER:
            return None
    return None


def anchors_of(text: str, known: frozenset[str] = frozenset()) -> list[str]:
    """The values worth keeping verbatim in `text`, each as "label value" or "value": built from
    a bounded window of tokens in one pass (linear time), never from a credential (nor from a
    `known` one said elsewhere in the conversation)."""
    secret = [(c.start, c.end) for c in find_credentials(text, known)]
    words = _words(text)
    found: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if not _is_value(word.text) or any(s < word.end and word.start < e for s, e in secret):
            index += 1
            continue
        end = index + 1  # digit groups typed with spaces are one value
        while (
            end < len(words)
            and end - index < ANCHOR_VALUE_GROUPS
            and words[end].text.isdigit()
            and words[end].start - words[end - 1].end == 1
        ):
            end += 1
        value = " ".join(w.text for w in words[index:end])
        if end < len(words) and _fold(words[end].text) in ANCHOR_UNITS:
            value += " " + _fold(words[end].text)
            end += 1
        if sum(ch.isdigit() for ch in value) >= 3:
            label = _label_before(words, index)
            found.append(f"{label} {value}" if label else value)
        index = end
    return found


def keep_anchors(fields: SummaryFields, folded: Sequence[Turn]) -> SummaryFields:
    """A code-level safety net: a value the user gave that the summary lost goes to canon, as
    the value and the noun naming it, citing its turn."""
    rendered = json.dumps(dict(fields.items()), ensure_ascii=False)
    known = credential_values(t.text for t in folded)
    added: list[str] = []
    for turn in (t for t in folded if t.role == "user"):
        for anchor in anchors_of(turn.text, known):
            value = anchor.split(" ", 1)[-1] if anchor.split(" ", 1)[0] in ANCHOR_LABELS else anchor
            if len(added) >= MAX_NEW_ANCHORS or value in rendered:
                continue
            claim = f"{anchor} {{cite:{turn.id}}}"
            if check_claim(claim) is not None:
                continue  # built from a value and a listed noun, but it passes the gate too
            added.append(claim)
            rendered += claim
    return fields.with_field("canon", fields.canon + tuple(added)) if added else fields
