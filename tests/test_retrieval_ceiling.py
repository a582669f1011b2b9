"""bench/locomo_ceiling.py: which evidence turns share no query term, at each level of reach."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.locomo_ceiling import main as ceiling_main
from tests.test_retrieval import _qa
from tests.test_retrieval_memory import locomo_item

# Ada's turn D1:1 says "I adopted a grey cat called Pebble last week."; Bo answers D1:2, and the
# memory holds a fact citing D1:1, "Ada adopted a grey cat named Pebble from an animal shelter".
NAMED = _qa("What is the name of Ada's cat?", ["D1:1"], 4)  # the turn's own words
THROUGH_MEMORY = _qa("Which animal did Ada bring home?", ["D1:1"], 4)  # only the fact says it
# D1:3 "I also started pottery classes on Tuesdays." / "Pottery sounds relaxing."; the one
# observation citing D1:3 is an injection the gate refuses: nothing holds these words.
UNREACHABLE = _qa("Which hobby did Ada pick up?", ["D1:3"], 1)
ACROSS_SESSIONS = _qa("What did Ada make in pottery?", ["D1:3", "D2:2"], 1)


def run(tmp_path: Path, qa: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> Any:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_item(f"conv-{n}", qa) for n in range(2)]))
    assert ceiling_main([str(data), "--json", "--fit-share", "0"]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_level_counts_the_turns_no_query_term_reaches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(tmp_path, [NAMED, THROUGH_MEMORY, UNREACHABLE], capsys)
    assert report["questions"] == 6 and report["evidence_turns"] == 6  # two conversations
    levels = report["levels"]
    assert levels["turn"]["zero_share"] == pytest.approx(2 / 3, abs=1e-4)
    assert levels["exchange"]["zero_share"] == pytest.approx(2 / 3, abs=1e-4)
    # The fact's "animal" reaches D1:1; only the hobby question stays out of lexical reach.
    assert report["zero_overlap_evidence_share"] == pytest.approx(1 / 3, abs=1e-4)
    assert levels["memory"]["one_share"] == pytest.approx(1 / 3, abs=1e-4)
    # The product finds the cat twice (its words, then the fact citing it), never the hobby.
    assert report["recall_at_10"] == pytest.approx(2 / 3, abs=1e-4)
    assert report["missed_at_10"] == 2
    assert levels["memory"]["zero_share_of_misses"] == 1.0
    assert levels["turn"]["zero_found_at_10"] == 2  # found through memory, not its own words
    assert report["lexical_oracle_recall_at_10"] == pytest.approx(2 / 3, abs=1e-4)
    assert report["reachable_misses"] == 0
    assert report["by_category"]["multi-hop"]["recall_at_10"] == 0.0
    assert report["miss_share_by_category"] == {"multi-hop": 1.0, "single-hop": 0.0}
    assert report["multi_hop_share_of_misses"] == 0.0  # one session each


def test_a_question_answered_across_sessions_is_multi_hop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(tmp_path, [ACROSS_SESSIONS, NAMED], capsys)
    assert report["evidence_turns"] == 6
    assert report["multi_hop_share_of_evidence"] == pytest.approx(4 / 6, abs=1e-4)
    # "pottery" is in D1:3, so an oracle ranks it first: the ceiling is at least the product.
    assert report["oracle_recall_at_10"]["turn"] >= report["recall_at_10"]
    # D2:2, the vase, says neither "make" nor "pottery".
    assert report["levels"]["turn"]["zero_share"] == pytest.approx(2 / 6, abs=1e-4)


def test_the_table_names_every_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_item(f"conv-{n}") for n in range(3)]))
    assert ceiling_main([str(data), "--no-memory"]) == 0
    shown = capsys.readouterr().out
    for word in ("turn", "exchange", "memory", "oracle@10", "multi-hop"):
        assert word in shown
