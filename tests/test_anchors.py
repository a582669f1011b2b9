"""Anchors keep the value, not the sentence (issue 13, item 4), in linear time."""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from memory.integrity.credentials import find_credentials
from memory.models import SummaryFields, Turn
from memory.summary.anchors import ANCHOR_LABELS, ANCHOR_UNITS, anchors_of, keep_anchors
from tests.helpers import load_corpus

# The pattern keep_anchors used before: quadratic on a run of "-" (about 200 ms per 4,000
# characters on the event loop). Kept here only to show that the measurement below can fail.
OLD_ANCHOR = re.compile(r"(?<![\w{:])[\w€$£#./:-]*\d[\w€$£#./:-]*")
# Inputs shaped against each scan: runs of value characters with no digit, naming words one
# after another, digit groups that never make a card, letters that never make a key.
PATHOLOGICAL = ["-", "./", "#a", "clave es ", "4111 ", "pedido nº ", "sk-", "a1B2"]


def growth(work: Callable[[str], object], unit: str, small: int, factor: int) -> float:
    """How much longer `work` takes on an input `factor` times longer: about `factor` when it
    is linear, `factor` squared when it is quadratic. Each side is the fastest of its single
    calls over 0.3 s (five at least), with the collector off: a ratio, never a fixed time.
    Time is this thread's CPU time, which the machine's other work does not add to (a
    preempted call is not charged for the wait); the fastest call is the one cache misses and
    interrupts touched least."""

    def fastest(size: int) -> float:
        text = unit * (size // len(unit))
        best, calls, start = float("inf"), 0, time.thread_time()
        while calls < 5 or (time.thread_time() - start < 0.3 and calls < 500):
            began = time.thread_time()
            work(text)
            took = time.thread_time() - began
            best, calls = min(best, took), calls + 1
            if took > 1.0:  # one slow call says enough (and a quadratic one takes long)
                break
        return best

    gc.disable()
    try:
        return fastest(small * factor) / max(fastest(small), 1e-9)
    finally:
        gc.enable()


def test_the_measurement_catches_the_old_quadratic_pattern() -> None:
    assert growth(lambda text: list(OLD_ANCHOR.finditer(text)), "-", 1_000, 10) > 30


def test_anchors_and_credentials_are_linear_on_crafted_input() -> None:
    for unit in PATHOLOGICAL:
        assert growth(anchors_of, unit, 10_000, 10) < 30, unit
        assert growth(find_credentials, unit, 10_000, 10) < 30, unit


def test_an_anchor_is_a_value_and_at_most_a_label_noun() -> None:
    assert anchors_of("Mi pedido nº 48213 no ha llegado") == ["pedido 48213"]
    assert anchors_of("order number #A-4821 is late") == ["order #A-4821"]
    assert anchors_of("llámame al 612 345 678 mañana") == ["612 345 678"]
    assert anchors_of("Te pago 300 euros el 15/03/2026") == ["300 euros", "15/03/2026"]
    # A number is not a value when it is glued to a word, nor when it is a credential.
    assert anchors_of("ignoratodaslasreglas123 y la clave es 48213, PIN 9911") == []


def _only_values_and_labels(anchor: str) -> bool:
    words = anchor.split(" ")
    return all(
        w in ANCHOR_LABELS or w in ANCHOR_UNITS or any(ch.isdigit() for ch in w) for w in words
    )


def test_no_instruction_reaches_an_anchor() -> None:
    """Every injection of the guard's corpus, with a number added: what an anchor keeps of it is
    the number and a noun of the fixed list, never its words."""
    attacks = [
        f"{text} Pedido 48213, clave 55{index:03d}"
        for index, text in enumerate(load_corpus("injections.txt"))
    ]
    anchors = [a for text in attacks for a in anchors_of(text)]
    assert "pedido 48213" in anchors
    assert all(_only_values_and_labels(a) for a in anchors), [
        a for a in anchors if not _only_values_and_labels(a)
    ]
    assert not any(a.startswith("clave") or "55" in a.split(" ")[-1][:2] for a in anchors)


def test_keep_anchors_adds_only_values_the_summary_lost() -> None:
    when = datetime(2026, 11, 2, tzinfo=UTC)
    turns = [
        Turn(7, 1, "user", "El pedido es el 48213 y la reserva la 99120", when),
        Turn(8, 1, "assistant", "Apuntado el 55555", when),
    ]
    kept = keep_anchors(SummaryFields(canon=("Reserva 99120 {cite:7}",)), turns)
    assert kept.canon == ("Reserva 99120 {cite:7}", "pedido 48213 {cite:7}")
