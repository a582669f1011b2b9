"""The profile bench runs end to end on a tiny LoCoMo-shaped file: one extraction per session,
the observations reach the store, and block 2 stays within its budget."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.profile import ReplayLLM, kind_of, main, run, slug

ADA_NOTES = {
    1: [
        ["Ada moved to a flat by the harbour and works as a ferry engineer.", "D1:2"],
        ["Ada felt anxious about the night shifts at the ferry yard.", "D1:4"],
        ["Ada adopted a grey cat called Pebble.", "D1:1"],  # a speaker_b line that opens
    ],
    2: [
        ["Ada visited her sister in Leeds last weekend.", ["D2:1", "D2:3"]],
        ["Ada is learning the violin on Sunday mornings.", "D2:4"],  # a speaker_b line
    ],
    3: [["Ada hopes to sail around the bay next summer with Pebble.", "D3:1, D3:3"]],
}


def _session(number: int, lines: int, opens_with_character: bool) -> list[dict[str, str]]:
    speakers = ["Bo", "Ada"] if opens_with_character else ["Ada", "Bo"]
    return [
        {
            "speaker": speakers[i % 2],
            "dia_id": f"D{number}:{i + 1}",
            "text": f"Line {i + 1} of session {number}, about the sea and the harbour.",
        }
        for i in range(lines)
    ]


def write_locomo(folder: Path) -> Path:
    conversation: dict[str, Any] = {
        "speaker_a": "Ada",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": _session(1, 6, opens_with_character=True),
        "session_2_date_time": "10:05 am on 12 May, 2023",
        "session_2": _session(2, 5, opens_with_character=False),  # ends on the user's line
        "session_3_date_time": "9:00 am on 20 July, 2023",
        "session_3": _session(3, 4, opens_with_character=False),
        "session_4_date_time": "9:00 am on 1 August, 2023",  # a date key without a session
    }
    observation = {
        f"session_{n}_observation": {"Ada": notes, "Bo": [["Bo likes tea.", f"D{n}:2"]]}
        for n, notes in ADA_NOTES.items()
    }
    path = folder / "locomo_tiny.json"
    sample = {"sample_id": "tiny-1", "conversation": conversation, "observation": observation}
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_one_extraction_per_session_and_facts_reach_the_store(tmp_path: Path) -> None:
    result = run(write_locomo(tmp_path))
    for key in ("extraction_calls_per_session", "profile_tokens_p95", "llm_calls_per_session"):
        assert key in result
    assert result["sessions"] == 3
    assert result["extraction_calls_per_session"] == 1
    assert result["llm_calls_per_session"]["extraction"]["max"] == 1
    assert result["facts_stored"] == result["observations_offered"] == 6  # Bo's notes ignored
    assert result["fallback_evidence"] == 0  # speaker_b dia_ids map to a user turn
    assert result["rejected_extractions"] == result["memory_rejections"] == 0
    assert result["profile_within_budget_share"] == 1.0
    assert 0 < result["profile_tokens_p95"] <= result["budget"] == 500


def test_json_output_and_a_small_budget(tmp_path: Path, capsys: Any) -> None:
    assert main([str(write_locomo(tmp_path)), "--json", "--budget", "60"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["budget"] == 60
    assert printed["dropped_per_session"]["max"] > 0  # five facts do not fit in 60 tokens
    assert 0.0 <= printed["profile_within_budget_share"] <= 1.0
    assert printed["profile_tokens_max"] <= 60


def test_keys_are_unique_snake_case_and_kinds_follow_the_rule() -> None:
    taken: set[str] = set()
    keys = [slug("Ada adopted a grey cat called Pebble.", "Ada", taken) for _ in range(3)]
    base = "adopted_grey_cat_called"
    assert keys == [base, f"{base}_2", f"{base}_3"]
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,39}", key) for key in keys)
    assert kind_of("Ada felt proud of her first sale.") == "emotional"
    assert kind_of("Ada visited Leeds last weekend.") == "episodic"
    assert kind_of("Ada works as a ferry engineer.") == "semantic"


def test_a_retry_drops_every_operation_the_feedback_names() -> None:
    llm = ReplayLLM({})
    answer = [{"key": "a"}, {"key": "b"}, {"key": "c"}]
    llm._answers["conv-1/session_1"] = list(answer)
    body = (
        "Session turns:\n...\n\nYour previous answer was rejected: operation 0 (add semantic/a):"
        " too long; operation 2 (add semantic/c): too long; nothing was left to record."
    )
    assert llm._operations("conv-1/session_1", body) == [{"key": "b"}]
