"""`companion eval`: control questions at chosen turns, and where the answer's words were."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.evaluation import load_script
from memory.errors import UserFacingError
from tests.conftest import REPO
from tests.fakes.anthropic_api import FakeAnthropic, Text, empty_tool_answer
from tests.test_cli import companion, env_for

SCRIPT = """
character: detective_bilbao
user: tester
sessions:
  - messages: ["Mi perro se llama Beltza", "Vivo en Deusto", "Hace frío", "Llueve"]
  - gap_hours: 5
    messages: ["Vuelvo a estar aquí", "Sigue lloviendo"]
checkpoints:
  - after_turn: 2
    questions:
      - {ask: "¿Cómo se llama mi perro?", expect: ["Beltza"]}
      - {ask: "¿Dónde vivo?", expect: ["Deusto"]}
  - after_turn: 6
    questions:
      - {ask: "¿Cuál es mi color favorito?", expect: ["azul"]}
"""


def answer_probes(body: dict[str, Any]) -> Text:
    asked = body["messages"][-1]["content"][0]["text"]
    if asked == "¿Cómo se llama mi perro?":
        return Text("Se llama Beltza, claro.")
    return Text("Ni idea.")


async def test_eval_reports_failures_and_where_the_words_were(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    fake_anthropic.default = route_probes
    code, out, err = await companion(
        "eval",
        "--character",
        "detective_bilbao",
        "--script",
        str(script),
        "--json",
        env=env_for(tmp_path, fake_anthropic),
    )
    report = json.loads(out)
    assert code == 1, err  # one or more control questions failed
    assert (report["turns"], report["questions"], report["failed"]) == (6, 3, 2)
    first, second = report["checkpoints"]
    assert first["turn"] == 2 and first["asked"] == 2
    assert first["failed"] == [
        {
            "question": "¿Dónde vivo?",
            "expected": ["Deusto"],
            "reply": "Ni idea.",
            "found_in": ["window"],
        }
    ]
    assert second["failed"][0]["found_in"] == ["nowhere"]
    probes = [
        b
        for b in fake_anthropic.bodies()
        if b["messages"][-1]["content"][0]["text"].startswith("¿")
    ]
    assert len(probes) == 3 and "tools" not in probes[0]
    # Probes are never part of the conversation: no other request carries a question.
    others = [
        json.dumps(b, ensure_ascii=False)
        for b in fake_anthropic.requests_bodies()
        if b not in probes
    ]
    assert others and not any("¿Dónde vivo?" in body for body in others)


def route_probes(body: dict[str, Any]) -> Any:
    """Summaries and extractions get the fake's empty answers; everything else is a reply."""
    if (body.get("tool_choice") or {}).get("type") == "tool":
        return empty_tool_answer(body)
    return answer_probes(body)


def test_shipped_scripts_are_valid_and_ask_at_20_60_120() -> None:
    for name in ("detective_bilbao", "lighthouse_keeper"):
        script = load_script(REPO / "characters" / "evals" / f"{name}.yaml")
        assert script.character == name
        assert sum(len(s.messages) for s in script.sessions) == 120
        assert [c.after_turn for c in script.checkpoints] == [20, 60, 120]


def test_a_broken_script_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("sessions: []\ncheckpoints: []\n", encoding="utf-8")
    with pytest.raises(UserFacingError, match=r"bad\.yaml: field 'sessions'"):
        load_script(path)
